"""How many threads each rank's OpenCL CPU device may use.

A CPU OpenCL device (PoCL's pthread driver) starts one worker thread per
core. With several MPI ranks on one node, every rank's device would do so:
2 ranks on 2 cores run 4 busy worker threads, plus the ranks' own threads,
and each step pays for the oversubscription. So, by default, each rank's
device gets ``cores // ranks_on_node`` threads (at least 1).

The limit can only be set before the OpenCL platform is first queried (PoCL
reads it from the environment when it starts), so it is applied
(:func:`ensure_device_threads`, once per process) at the first step of a
distributed program: when it makes its first send or receive node
(:func:`~pytato_like.distributed.nodes.make_distributed_send`,
:func:`~pytato_like.distributed.nodes.make_distributed_recv`) or, without
any, partitions
(:func:`~pytato_like.distributed.partition.find_distributed_partition`) --
before code generation warms up the OpenCL compiler and before the
program's queue is normally made -- by setting PoCL's variables ``POCL_MAX_PTHREAD_COUNT`` (older PoCL) and
``POCL_CPU_MAX_CU_COUNT`` (newer PoCL). Nothing is changed

* when the process does not run under an MPI launcher that tells the ranks
  per node (MPICH/Hydra's ``MPI_LOCALNRANKS``, Open MPI's
  ``OMPI_COMM_WORLD_LOCAL_SIZE``) or runs as the only rank of its node;
* when either PoCL variable is already set (the user's choice wins).

``PYTATO_LIKE_DEVICE_THREADS`` overrides the default: a positive number of
threads, or ``all`` to leave PoCL's default (one per core). Call
:func:`configure_device_threads` yourself before creating a context to
apply another count.

**One thread: the rank's own.** When a rank's device gets one thread (2
ranks on 2 cores, say), a worker thread buys nothing but hand-offs: every
command crosses from the rank's thread to the worker and every wait
crosses back, each a futex wake costing 15-25 µs of CPU on this kind of
machine, and the two threads share the rank's core. So a one-thread
configuration also selects PoCL's ``basic`` driver (``POCL_DEVICES=basic``),
which runs each command in the thread that enqueues it. Measured on the
halo benchmark (2 ranks, 2 cores, 10^5 cells per rank, 32 steps): each
rank's CPU time per execution fell from about 27 ms (13 ms on its own
thread, 14 ms on the worker) to about 17 ms, and an execution from 28.2
to 21.6 ms (both drivers alternated in the same processes; no loss at
10^6 cells, see doc/distributed.rst). Not done if ``POCL_DEVICES`` is set
(the user's choice wins) or ``PYTATO_LIKE_INLINE_DEVICE=0``.

.. autofunction:: configure_device_threads
.. autofunction:: ensure_device_threads
.. autofunction:: ranks_on_node
.. autofunction:: default_device_threads
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

from pytato_like._env import env_flag, ranks_on_node
from pytato_like.diagnostic import ConfigurationError

logger = logging.getLogger("pytato_like")

POCL_VARIABLES = ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_COUNT")
SETTING = "PYTATO_LIKE_DEVICE_THREADS"
#: the switch for running a one-thread device in the rank's own thread
INLINE_SETTING = "PYTATO_LIKE_INLINE_DEVICE"
#: PoCL's driver list, and the driver that runs commands in the caller
POCL_DEVICES = "POCL_DEVICES"
INLINE_DRIVER = "basic"


def default_device_threads(environ: MutableMapping[str, str] | None = None,
                           cores: int | None = None) -> int | None:
    """Threads per rank's device: ``cores // ranks_on_node`` (at least 1),
    the ``PYTATO_LIKE_DEVICE_THREADS`` setting, or ``None`` for PoCL's own
    default."""
    env = os.environ if environ is None else environ
    setting = env.get(SETTING, "").strip()
    if setting:
        if setting == "all":
            return None
        if not setting.isdigit() or int(setting) < 1:
            raise ConfigurationError(
                f"{SETTING}={setting!r}: expected a positive number of "
                "threads or 'all'")
        return int(setting)
    n_ranks = ranks_on_node(env)
    if n_ranks is None or n_ranks == 1:
        return None
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(
            os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // n_ranks)


def configure_device_threads(n_threads: int | None = None,
                             environ: MutableMapping[str, str] | None = None,
                             cores: int | None = None) -> int | None:
    """Limit the CPU OpenCL device of this process to *n_threads*, or by
    default to :func:`default_device_threads` unless the PoCL variables
    are already set; returns the limit now in force (``None``: PoCL's
    default). One thread also selects PoCL's ``basic`` driver (see the
    module docs) unless ``POCL_DEVICES`` is set or
    ``PYTATO_LIKE_INLINE_DEVICE`` is off. Takes effect only for OpenCL
    platforms not yet initialized. *cores*: as for
    :func:`default_device_threads`."""
    env = os.environ if environ is None else environ
    if n_threads is None:
        for name in POCL_VARIABLES:
            if env.get(name):
                return int(env[name]) if env[name].isdigit() else None
        n_threads = default_device_threads(env, cores)
    elif n_threads < 1:
        raise ConfigurationError(
            f"configure_device_threads({n_threads}): expected at least 1")
    if n_threads is None:
        return None
    for name in POCL_VARIABLES:
        env[name] = str(n_threads)
    if n_threads == 1 and not env.get(POCL_DEVICES) and env_flag(
            INLINE_SETTING, True, environ=env):
        env[POCL_DEVICES] = INLINE_DRIVER
    logger.debug("OpenCL CPU device threads per rank: %d (PoCL drivers %s)",
                 n_threads, env.get(POCL_DEVICES, "default"))
    return n_threads


_ENSURED = False


def ensure_device_threads() -> None:
    """:func:`configure_device_threads` with its defaults, the first time
    this is called in the process (later calls do nothing). The distributed
    steps that come before any OpenCL context call it; not run at import,
    so importing the package reads no environment."""
    global _ENSURED
    if not _ENSURED:
        _ENSURED = True
        configure_device_threads()
