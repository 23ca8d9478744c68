"""Loading PoCL's compiler while code is generated.

On PoCL, the first OpenCL build of a process costs about 0.7 s more than
the builds after it: LLVM, clang and PoCL's kernel library are loaded
then (measured on this project's 2-core machine: 0.97 s for a one-line
kernel first, 0.23-0.26 s for the next ones). A cold compile runs
lowering, loopy and code generation (0.3-1 s) before its first build, one
after the other. :func:`start_compiler_warmup`, called by
:func:`~pytato_like.target.loopy.generate_loopy` when its plan cache
misses, builds a one-line program on a PoCL device in a background
thread meanwhile (``clBuildProgram`` runs without Python's lock), so the
real build finds the compiler loaded.

* PoCL only: other drivers are left alone. Once per process;
  ``PYTATO_LIKE_COMPILER_WARMUP=0`` turns it off (for timing the build
  alone).
* PoCL answers a source it has cached without loading its compiler, so
  the warm-up source is new in each process. In the package's own PoCL
  folder (:func:`~pytato_like._pocl_cache.private_pocl_cache_dir`) its
  entry is removed after the build; in a folder the user chose, a fixed
  source is built instead (one entry, left there: such a warm-up loads
  the compiler only until PoCL has cached it).
* Failures are logged (``pytato_like.cache``, debug) and ignored: the real
  build reports its own. At exit the thread is waited for (bounded), since
  an interpreter ending under a running build can crash the driver.

.. autofunction:: start_compiler_warmup
.. autofunction:: wait_for_warmup
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import shutil
import threading
import time
from typing import TYPE_CHECKING

from pytato_like._pocl_cache import is_pocl_platform

if TYPE_CHECKING:
    import pyopencl as cl

logger = logging.getLogger("pytato_like.cache")

#: longest wait for the warm-up at exit, in seconds
EXIT_WAIT = 10.0

_LOCK = threading.Lock()
_THREAD: threading.Thread | None = None
#: seconds the warm-up build took (None: not run or failed)
warmup_seconds: float | None = None

_FIXED_SOURCE = ("__kernel void _pytato_like_warmup(__global int *a) "
                 "{ a[0] = 1; }\n")


def start_compiler_warmup(device: cl.Device | None = None) -> bool:
    """Build a one-line program on *device* (a ``pyopencl.Device``), or on
    the first device of the PoCL platform, in a background thread, unless
    that was done before in this process or ``PYTATO_LIKE_COMPILER_WARMUP``
    is ``0`` (read at each call); whether a warm-up started."""
    global _THREAD
    if os.environ.get("PYTATO_LIKE_COMPILER_WARMUP", "").strip() == "0":
        return False
    with _LOCK:
        if _THREAD is not None:
            return False
        _THREAD = threading.Thread(target=_warm, args=(device,),
                                   name="pytato_like-pocl-warmup", daemon=True)
        _THREAD.start()
    atexit.register(wait_for_warmup, EXIT_WAIT)
    return True


def wait_for_warmup(timeout: float | None = None) -> None:
    """Wait for a warm-up started by :func:`start_compiler_warmup`."""
    thread = _THREAD
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)


def _pocl_device(device: cl.Device | None) -> cl.Device | None:
    """*device* if it is PoCL's, else the first device of the PoCL
    platform; None when there is none."""
    import pyopencl as cl
    if device is not None:
        return device if is_pocl_platform(device.platform) else None
    for platform in cl.get_platforms():
        if is_pocl_platform(platform):
            devices = platform.get_devices()
            return devices[0] if devices else None
    return None


def _warm(device: cl.Device | None) -> None:
    global warmup_seconds
    try:
        import pyopencl as cl

        from pytato_like._pocl_cache import private_pocl_cache_dir
        device = _pocl_device(device)
        if device is None:
            return
        ours = private_pocl_cache_dir()
        token = secrets.token_hex(8) if ours else ""
        name = f"_pytato_like_warmup{token}"
        source = _FIXED_SOURCE.replace("_pytato_like_warmup", name)
        t0 = time.perf_counter()
        started = time.time()
        cl.Program(cl.Context([device]), source).build()
        warmup_seconds = time.perf_counter() - t0
        if ours:
            _remove_entry(ours, name.encode(), started)
    except Exception as exc:  # noqa: BLE001 - best effort, see the docstring
        logger.debug("PoCL warm-up failed: %s", exc)


def _remove_entry(folder: str, name: bytes, since: float) -> None:
    """Remove the entry of PoCL's *folder* (``XX/<hash>/program.bc``)
    written since *since* whose bitcode holds the kernel name *name*."""
    try:
        buckets = os.scandir(folder)
    except OSError:
        return
    with buckets:
        for bucket in buckets:
            if len(bucket.name) != 2 or not bucket.is_dir(follow_symlinks=False):
                continue
            try:
                # an entry made now changes its bucket's modification time
                if bucket.stat(follow_symlinks=False).st_mtime < since - 1:
                    continue
                entries = list(os.scandir(bucket.path))
            except OSError:
                continue
            for entry in entries:
                bitcode = os.path.join(entry.path, "program.bc")
                try:
                    if (not entry.is_dir(follow_symlinks=False)
                            or os.stat(bitcode).st_mtime < since - 1):
                        continue
                    with open(bitcode, "rb") as f:
                        if name not in f.read():
                            continue
                except OSError:
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)
                return
