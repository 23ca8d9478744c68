"""Work-group functions compiled before the first launch, once per node.

PoCL compiles a kernel in two steps: ``clBuildProgram`` turns the OpenCL
text into LLVM bitcode, and the first launch of each kernel generates and
compiles its *work-group function* (LLVM's optimisation and code
generation for that work-group size), 0.05-0.5 s a kernel on this
project's machine. PoCL keeps the result in its cache folder, and a
process launching a kernel another process compiled there loads it
instead of compiling it. The ranks of an SPMD program on one node build
the same program (alike parts, the same kernels in the same order), so
each of them compiled every work-group function of it, one after the
other, at its first launches: on 2 ranks sharing 2 cores, 1.3 s of the
demo's first run per rank, and 4 times that work on 4 ranks.

This module lets the ranks of a node share that work:

* Every generated kernel of one work-item per work-group (the stencil,
  time-tile and elementwise kernels; not reductions or small dense
  operators, whose work-groups PoCL vectorises across work-items) gets a
  last argument ``_pt_dry`` (:func:`add_dry_argument`): a launch with it
  nonzero returns at once.
  Kernel objects keep it at 0 (:func:`set_dry_arguments`, run on every
  kernel object the package makes), so a program's launches are unchanged.
* After a build, a background thread launches each kernel of the program
  *dry* -- one work-group of the kernel's required size, dummy arguments
  -- which makes PoCL compile the same work-group function a real launch
  uses (same work-group size, zero offset, small grid). Before each dry
  launch it claims the kernel (a claim file in the disk cache, as plans
  are claimed; see :func:`~pytato_like.target.loopy.cache.claim_plan`):
  a kernel claimed by another process is left to it. Ranks start at
  different kernels, so they take the kernels between them.
* The first real launch of a kernel claimed by another process waits for
  that claim's release (:func:`wait_for_other_processes`, at most
  :data:`WAIT_S`), then PoCL loads what that process compiled.

It runs only where it pays: on PoCL, with more than one MPI rank on the
node (``MPI_LOCALNRANKS``, ``OMPI_COMM_WORLD_LOCAL_SIZE``), with the disk
cache on and PoCL's folder the package's own (shared by the node's ranks,
and checked: :mod:`~pytato_like._pocl_cache`). PoCL compiles one kernel at
a time per process, so in a single process compiling ahead gains nothing.
``PYTATO_LIKE_SHARED_PRECOMPILE=0`` turns it off. Kernels without a
required work-group size, or with an argument of a type it cannot fake,
are compiled at their first launch as before.

.. autodata:: DRY_ARGUMENT
.. autodata:: WAIT_S
.. autofunction:: add_dry_argument
.. autofunction:: host_code_with_dry_argument
.. autofunction:: dry_launches
.. autofunction:: note_program
.. autofunction:: forget_programs
.. autofunction:: set_dry_arguments
.. autofunction:: kernel_object
.. autoclass:: CompileClaims
.. autofunction:: set_claims
.. autofunction:: enabled
.. autofunction:: start
.. autofunction:: wait_for_other_processes
.. autofunction:: wait_for_precompiles
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import logging
import queue as queue_module
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from pytato_like import _pocl_cache
from pytato_like._env import env_flag, rank_on_node, ranks_on_node

if TYPE_CHECKING:
    import pyopencl as cl

logger = logging.getLogger("pytato_like.cache")

#: the name of the argument every generated kernel gets last
DRY_ARGUMENT = "_pt_dry"
#: longest wait, in seconds, for a kernel another process compiles (its
#: dry launch may queue behind that process's running kernels; past this,
#: the real launch compiles the kernel itself)
WAIT_S = 20.0
#: longest wait at exit for the dry launch in flight (an interpreter ending
#: under a compile in the driver's thread can crash it; the ones not
#: started are dropped)
EXIT_WAIT_S = 10.0
SETTING = "PYTATO_LIKE_SHARED_PRECOMPILE"

#: a kernel's head in OpenCL C, up to its parameter list: its attributes
#: and its name (:func:`pytato_like.opencl_build.kernel_names` uses it too)
KERNEL_HEAD_RE = re.compile(
    r"__kernel\s+void\s+(?P<attrs>(?:__attribute__\s*\(\(.*?\)\)\s*)*)"
    r"(?P<name>[A-Za-z_]\w*)\s*\(")
_WORK_GROUP_RE = re.compile(
    r"reqd_work_group_size\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_HOST_ARG_COUNT_RE = re.compile(
    r"(_lpy_knl = _lpy_cl_kernels\.(\w+)\s+assert _lpy_knl\.num_args == )(\d+)")
_QUALIFIERS = {"const", "volatile", "__private", "private", "restrict",
               "__restrict__", "__restrict"}
_SCALAR_TYPES: dict[str, type[np.generic]] = {
    "char": np.int8, "signed char": np.int8, "uchar": np.uint8,
    "unsigned char": np.uint8, "short": np.int16, "ushort": np.uint16,
    "unsigned short": np.uint16, "int": np.int32, "uint": np.uint32,
    "unsigned int": np.uint32, "unsigned": np.uint32, "long": np.int64,
    "ulong": np.uint64, "unsigned long": np.uint64, "float": np.float32,
    "double": np.float64,
}


# {{{ the dry argument

def _kernel_parts(code: str):
    """For each kernel definition of *code*: (head match, index of its
    parameter list's opening and closing parenthesis, index of the body's
    opening brace)."""
    for head in KERNEL_HEAD_RE.finditer(code):
        open_paren = head.end() - 1
        depth = 0
        close = -1
        for i in range(open_paren, len(code)):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                close = i
                break
        brace = code.find("{", close)
        if close < 0 or brace < 0 or code[close + 1:brace].strip():
            continue    # a declaration, or something this does not parse
        yield head, open_paren, close, brace


def add_dry_argument(code: str) -> str:
    """*code* (OpenCL C) with a last argument ``int const _pt_dry`` on every
    kernel of one work-item per work-group (``reqd_work_group_size(1, 1,
    1)``), which returns at once when it is nonzero. Kernels of larger
    work-groups are left as they are: PoCL runs their body in a loop over
    the work-items, which an early return kept from being vectorised (a
    full reduction ran 25 % slower with it)."""
    out: list[str] = []
    pos = 0
    for head, open_paren, close, brace in _kernel_parts(code):
        params = code[open_paren + 1:close]
        size = _WORK_GROUP_RE.search(head["attrs"])
        if DRY_ARGUMENT in params or size is None or size.groups() != (
                "1", "1", "1"):
            continue
        sep = ", " if params.strip() else ""
        out.append(code[pos:close])
        out.append(f"{sep}int const {DRY_ARGUMENT}")
        out.append(code[close:brace + 1])
        out.append(f"\n  if ({DRY_ARGUMENT})\n    return;")
        pos = brace + 1
    out.append(code[pos:])
    return "".join(out)


def host_code_with_dry_argument(host_code: str, names: Iterable[str]) -> str:
    """loopy's launcher *host_code* when its kernels *names* have the dry
    argument: it checks a kernel's argument count, which is one more for
    those (the launcher sets the others by position; the dry one stays as
    set when the kernel object was made)."""
    names = set(names)
    return _HOST_ARG_COUNT_RE.sub(
        lambda m: (f"{m[1]}{int(m[3]) + 1}" if m[2] in names else m[0]),
        host_code)


@dataclasses.dataclass(frozen=True)
class DryLaunch:
    """What a dry launch of kernel *name* passes: per argument ``"buffer"``
    or a NumPy scalar type; and the work-group size."""

    name: str
    arguments: tuple[str | type[np.generic] | None, ...]
    work_group: tuple[int, int, int] | None


def _argument_kind(param: str) -> str | type[np.generic] | None:
    param = " ".join(param.split())
    if "*" in param:
        # (loopy declares local memory inside kernels, not as arguments)
        return None if re.search(r"\b(__local|local)\b", param) else "buffer"
    words = [w for w in param.split() if w not in _QUALIFIERS][:-1]
    return _SCALAR_TYPES.get(" ".join(words))


def dry_launches(code: str) -> list[DryLaunch]:
    """The kernels of *code* with the dry argument, and what their dry
    launches pass (``work_group`` is None, and some argument None, where
    a dry launch cannot be made)."""
    launches = []
    for head, open_paren, close, _brace in _kernel_parts(code):
        params = _split_params(code[open_paren + 1:close])
        if not params or DRY_ARGUMENT not in params[-1]:
            continue
        size = _WORK_GROUP_RE.search(head["attrs"])
        work_group = ((int(size[1]), int(size[2]), int(size[3]))
                      if size else None)
        launches.append(DryLaunch(
            head["name"], tuple(_argument_kind(p) for p in params[:-1]),
            work_group))
    return launches


def _split_params(text: str) -> list[str]:
    params, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            params.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        params.append(text[start:])
    return params


# (OpenCL program handle, kernel name) -> number of arguments, for the
# kernels with the dry argument of the programs built or loaded (a name
# alone is not a kernel: programs of different users' code may hold
# kernels of one name, with and without the argument)
_DRY_KERNELS: dict[tuple[int, str], int] = {}


def note_program(program: cl.Program, code: str) -> list[DryLaunch]:
    """Remember the kernels of *program* (built from *code*) that have the
    dry argument (for :func:`set_dry_arguments`); their dry launches."""
    launches = dry_launches(code)
    for launch in launches:
        _DRY_KERNELS[program.int_ptr, launch.name] = len(launch.arguments) + 1
    return launches


def forget_programs() -> None:
    """Forget the programs noted (their handles may be reused once they
    are freed)."""
    _DRY_KERNELS.clear()


def set_dry_arguments(program: cl.Program, kernels: Iterable[cl.Kernel]
                      ) -> None:
    """Set the dry argument of *kernels* (objects of *program*'s kernels)
    to 0 (a real launch), where they have one."""
    handle = program.int_ptr
    for kernel in kernels:
        n_args = _DRY_KERNELS.get((handle, kernel.function_name))
        if n_args is not None:
            kernel.set_arg(n_args - 1, np.int32(0))


def kernel_object(program: cl.Program, name: str) -> cl.Kernel:
    """A new kernel object of *program*'s kernel *name*, ready for real
    launches."""
    import pyopencl as cl
    kernel = cl.Kernel(program, name)
    set_dry_arguments(program, [kernel])
    return kernel

# }}}


# {{{ claims and switches

@dataclasses.dataclass(frozen=True)
class CompileClaims:
    """The disk cache's claims and markers, by key: *claim* (True when this
    process may compile), *release*, *claimed_elsewhere* (another live
    process compiles it now), *is_done* and *mark_done* (a kernel some
    process of the node compiled, in the PoCL folder they share)."""

    claim: Callable[[str], bool]
    release: Callable[[str], None]
    claimed_elsewhere: Callable[[str], bool]
    is_done: Callable[[str], bool]
    mark_done: Callable[[str], None]


_claims: CompileClaims | None = None


def set_claims(claims: CompileClaims) -> None:
    """Use the disk cache's claim files and markers (installed by
    :mod:`pytato_like.target.loopy.cache` when it is imported)."""
    global _claims
    _claims = claims


def _is_pocl(ctx: cl.Context) -> bool:
    try:
        return all(_pocl_cache.is_pocl_platform(d.platform) for d in ctx.devices)
    except Exception:  # noqa: BLE001 - an unusual context: not ours to do
        return False


def enabled(ctx: cl.Context) -> bool:
    """Whether kernels built in *ctx* are compiled ahead, shared with the
    node's other ranks (see the module's docstring).

    :raises ~pytato_like.diagnostic.ConfigurationError: when
        ``PYTATO_LIKE_SHARED_PRECOMPILE`` is not a switch."""
    if not env_flag(SETTING, True):
        return False
    n_ranks = ranks_on_node()
    return (_claims is not None and n_ranks is not None and n_ranks > 1
            and _pocl_cache.private_pocl_cache_dir() is not None
            and _is_pocl(ctx))


def _device_key(ctx: cl.Context) -> str:
    return "|".join(f"{d.platform.name}|{d.name}|{d.driver_version}"
                    for d in ctx.devices)


def _program_digest(ctx: cl.Context, source: str) -> bytes:
    return hashlib.sha256(
        f"precompile\0{_device_key(ctx)}\0{source}".encode()).digest()


def _claim_key(program_digest: bytes, name: str) -> str:
    return hashlib.sha256(program_digest + name.encode()).hexdigest()


# }}}


# {{{ dry launches in the background

# (ctx, source) of every program handed to start() -> the digest its
# kernels' claim keys derive from, and its dry launches
_STARTED: dict[tuple[cl.Context, str], tuple[bytes, list[DryLaunch]]] = {}
_JOBS: queue_module.Queue = queue_module.Queue()
_WORKER: threading.Thread | None = None
_LOCK = threading.Lock()
# set at exit: the dry launches not started are dropped
_STOPPING = threading.Event()
#: kernels whose work-group function this process compiled ahead
DRY_LAUNCHED: list[str] = []
#: kernels left to another process (it compiled them, or compiles them)
LEFT_TO_OTHERS: list[str] = []


def start(ctx: cl.Context, program: cl.Program, source: str) -> None:
    """Launch the kernels of *program* (built from *source*) dry in a
    background thread, each one another process of the node does not
    compile already (when :func:`enabled`)."""
    launches = note_program(program, source)
    if not launches or not enabled(ctx):
        return
    key = (ctx, source)
    global _WORKER
    with _LOCK:
        if key in _STARTED:
            return
        usable = [launch for launch in launches
                  if launch.work_group is not None
                  and all(kind is not None for kind in launch.arguments)]
        digest = _program_digest(ctx, source)
        _STARTED[key] = (digest, usable)
        if not usable:
            return
        # ranks start at different kernels, so that they share them
        shift = (rank_on_node() or 0) % len(usable)
        _JOBS.put((ctx, program, digest, usable[shift:] + usable[:shift]))
        if _WORKER is None:
            _WORKER = threading.Thread(target=_work, daemon=True,
                                       name="pytato_like-precompile")
            _WORKER.start()
            atexit.register(_stop_at_exit)


def _work() -> None:
    while True:
        job = _JOBS.get()
        try:
            _launch_dry(*job)
        except Exception as exc:  # noqa: BLE001 - the real launch compiles
            logger.debug("dry launches failed: %s", exc)
        finally:
            _JOBS.task_done()


def _launch_dry(ctx: cl.Context, program: cl.Program, digest: bytes,
                launches: list[DryLaunch]) -> None:
    import pyopencl as cl
    claims = _claims
    assert claims is not None
    queue = cl.CommandQueue(ctx)
    dummy = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    for launch in launches:
        if _STOPPING.is_set():
            return
        key = _claim_key(digest, launch.name)
        if claims.is_done(key) or not claims.claim(key):
            LEFT_TO_OTHERS.append(launch.name)
            continue
        try:
            if claims.is_done(key):     # done between the two looks
                LEFT_TO_OTHERS.append(launch.name)
                continue
            kernel = cl.Kernel(program, launch.name)
            args: list[cl.Buffer | np.generic] = []
            for kind in launch.arguments:
                args.append(dummy if kind == "buffer"
                            else np.zeros(1, dtype=kind)[0])
            args.append(np.int32(1))
            kernel.set_args(*args)
            size = launch.work_group
            assert size is not None
            # one work-group of the required size: PoCL compiles the
            # work-group function a real launch uses, the kernel returns
            cl.enqueue_nd_range_kernel(queue, kernel, size, size).wait()
            claims.mark_done(key)
            DRY_LAUNCHED.append(launch.name)
        finally:
            claims.release(key)


def _stop_at_exit() -> None:
    # at exit: no new dry launch, and the one in flight waited for
    _STOPPING.set()
    wait_for_precompiles(EXIT_WAIT_S)


def wait_for_precompiles(timeout: float | None = None) -> bool:
    """Wait for the dry launches handed to the background thread; whether
    they are all done."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _JOBS.unfinished_tasks:
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def wait_for_other_processes(ctx: cl.Context, kernels: Iterable[cl.Kernel],
                             timeout: float | None = None) -> None:
    """Before the first real launch of *kernels*: wait while another
    process of the node compiles one of them (it holds the claim), at
    most *timeout* seconds (:data:`WAIT_S`) in all; PoCL then loads what
    it compiled."""
    if _claims is None:
        return
    names = {k.function_name for k in kernels}
    programs = [(digest, launches) for (c, _), (digest, launches)
                in list(_STARTED.items()) if c == ctx
                and any(launch.name in names for launch in launches)]
    if not programs:
        return
    claimed_elsewhere = _claims.claimed_elsewhere
    deadline = time.monotonic() + (WAIT_S if timeout is None else timeout)
    pause = 0.002
    for digest, launches in programs:
        for launch in launches:
            if launch.name not in names:
                continue
            key = _claim_key(digest, launch.name)
            while claimed_elsewhere(key) and time.monotonic() < deadline:
                time.sleep(pause)
                pause = min(2 * pause, 0.02)

# }}}

# vim: foldmethod=marker
