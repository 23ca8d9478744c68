"""OpenCL programs of generated kernels, shared by the code generator and
the runtime.

Both :mod:`pytato_like.target.loopy` (the kernels of compiled programs)
and :mod:`pytato_like.runtime.halo_opencl` (the copy kernels of the halo
packer) turn :class:`KernelSource` records into built ``pyopencl``
programs; this leaf module (it imports nothing of the package but
:mod:`pytato_like._pocl_cache`) does it for both, so that the runtime
does not import the code generator:

- :func:`get_kernel` / :func:`put_kernel`: kernel sources by key, in
  memory, and on disk once :mod:`pytato_like.target.loopy.cache` (the disk
  cache) is imported: it installs its store with
  :func:`set_kernel_persistence`;
- :func:`note_kernels` / :func:`note_plan`: kernels that the next OpenCL
  build builds too, and :func:`kernel_program`: the built program holding
  a kernel -- every kernel waiting is built in that one
  ``clBuildProgram`` (:func:`merge_device_code`), so the part programs of
  a partition and the halo copy kernels cost one build;
- :func:`build_program`: one build per OpenCL text and context (PoCL's
  own cache skips the compiler across processes; see
  :mod:`~pytato_like._pocl_cache`).

.. autoclass:: KernelSource
.. autofunction:: merge_device_code
.. autofunction:: get_kernel
.. autofunction:: put_kernel
.. autofunction:: set_kernel_persistence
.. autofunction:: build_program
.. autofunction:: set_binary_persistence
.. autofunction:: save_binaries
.. autodata:: SAVE_BINARIES_S
.. autodata:: BINARIES_LOADED
.. autofunction:: note_plan
.. autofunction:: note_kernels
.. autofunction:: kernel_program
.. autofunction:: pending_kernels
.. autofunction:: build_pending
.. autofunction:: clear_memory
.. autodata:: OPENCL_BUILDS
.. autodata:: CODEGEN_CALLS
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pytato_like import _pocl_cache, kernel_precompile

if TYPE_CHECKING:
    import pyopencl as cl

logger = logging.getLogger("pytato_like.cache")

#: number of OpenCL program builds (``clBuildProgram``) in this process
OPENCL_BUILDS = 0
#: number of kernel sources generated (by loopy) in this process: tests
#: check that a cache hit generates none
CODEGEN_CALLS = 0
# (context, digest of the OpenCL text) -> built pyopencl.Program
_PROGRAMS: dict[tuple[cl.Context, bytes], cl.Program] = {}


# {{{ kernel sources

@dataclasses.dataclass(frozen=True)
class KernelSource:
    """The generated code of one kernel: a distinct chunk of a compiled
    program, or a copy kernel of the halo packer."""

    key: str
    device_code: str
    host_code: str
    host_function: str
    #: canonical argument names of the launcher, in order
    arg_names: tuple[str, ...]
    #: the OpenCL text of all kernels of the program this kernel belongs
    #: to: the whole program is built at once
    program_code: str = ""


# kernel key -> KernelSource generated in this process or loaded
_MEMORY_KERNELS: dict[str, KernelSource] = {}
# (load(key), store(key, source)) of the disk cache, when installed
_persistence: tuple[Callable[[str], object], Callable[[str, KernelSource], None]] | None = None


def set_kernel_persistence(load: Callable[[str], object],
                           store: Callable[[str, KernelSource], None]) -> None:
    """Keep kernel sources on disk too: *load(key)* returns what *store*
    stored under *key* (or None). :mod:`pytato_like.target.loopy.cache`
    installs its disk cache so when it is imported."""
    global _persistence
    _persistence = (load, store)


def get_kernel(key: str) -> KernelSource | None:
    """The :class:`KernelSource` generated for kernel *key* by any program
    of this or (through the disk cache) an earlier process, or None."""
    source = _MEMORY_KERNELS.get(key)
    if source is None and _persistence is not None:
        loaded = _persistence[0](key)
        if not isinstance(loaded, KernelSource):
            return None
        _MEMORY_KERNELS[key] = source = loaded
    return source


def put_kernel(key: str, source: KernelSource) -> None:
    """Keep *source* as kernel *key* (see :func:`get_kernel`)."""
    _MEMORY_KERNELS[key] = source
    if _persistence is not None:
        _persistence[1](key, source)

# }}}


# {{{ one OpenCL text for several kernels

def _preamble_items(head: str) -> list[str]:
    """The items of a kernel preamble: preprocessor lines, whole
    ``#if``...``#endif`` groups, and C declarations or functions."""
    items: list[str] = []
    lines = head.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        j = i + 1
        if line.startswith("#if"):
            depth = 1
            while j < len(lines) and depth:
                if lines[j].startswith("#if"):
                    depth += 1
                elif lines[j].startswith("#endif"):
                    depth -= 1
                j += 1
        elif not line.startswith("#"):
            depth = line.count("{") - line.count("}")
            opened = depth > 0
            while j < len(lines) and (depth > 0 or not (
                    opened or lines[j - 1].rstrip().endswith(";"))):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or depth > 0
                j += 1
        items.append("\n".join(lines[i:j]))
        i = j
    return items


_INDEX_MACROS = ("#define lid(", "#define gid(")


def merge_device_code(codes: list[str]) -> str:
    """One OpenCL program text for the device codes of several kernels:
    each preamble item (``#define``, ``#if`` group, helper function) once,
    in order of first use, then every kernel -- one ``clBuildProgram`` per
    program instead of one per kernel."""
    if len(codes) == 1:
        return codes[0]
    seen: set[str] = set()
    preamble: list[str] = []
    bodies: list[str] = []
    heads = []
    for code in codes:
        cut = code.find("__kernel ")
        head, body = (code[:cut], code[cut:]) if cut >= 0 else (code, "")
        heads.append(_preamble_items(head))
        bodies.append(body)
    # loopy defines lid/gid with the kernel's index type: kernels with
    # 32-bit and 64-bit indices each get their own definition, just before
    # their body (one shared definition would retype the other kernels)
    index_macros = {item for items in heads for item in items
                    if item.startswith(_INDEX_MACROS)}
    per_kernel = len(index_macros) > 2
    for k, items in enumerate(heads):
        if per_kernel:
            local = [item for item in items if item.startswith(_INDEX_MACROS)]
            items = [item for item in items if item not in local]
            bodies[k] = "\n".join(
                [f"#undef {item.split()[1].split('(')[0]}\n{item}"
                 for item in local] + [bodies[k]])
        for item in items:
            if item not in seen:
                seen.add(item)
                preamble.append(item)
    # pyopencl-complex.h defines cdouble only if asked before its first
    # include (a complex64 kernel may come first): hoist the request
    early = [i for i in preamble if i.startswith((
        "#pragma OPENCL EXTENSION cl_khr_fp64", "#define PYOPENCL_DEFINE_CDOUBLE"))]
    preamble = early + [i for i in preamble if i not in early]
    return "\n".join(preamble) + "\n\n" + "\n\n".join(bodies)

# }}}


# {{{ building

_NO_CONTRACTION = "#pragma OPENCL FP_CONTRACT OFF\n"


def build_program(ctx, code: str):
    """The ``pyopencl.Program`` of *code* built for *ctx*, once per process
    and context. Across processes the program's binary, saved at the exit
    of the process that built it (:func:`save_binaries`), is loaded from
    the disk cache when it is installed (:func:`set_binary_persistence`)
    and PoCL's folder is ours (the entry PoCL unpacks the binary into is
    checked first: :func:`~pytato_like._pocl_cache.check_binary_entry`);
    else PoCL's own cache (``POCL_CACHE_DIR``) skips the compiler for a
    source it built before, and with other drivers pyopencl's binary cache
    does. PoCL's folder is checked before the first build from source
    (loading a binary checks only the entry it names), and a build
    that fails or lacks a kernel of *code* is retried once past PoCL's
    cache (:mod:`~pytato_like._pocl_cache`)."""
    key = (ctx, hashlib.sha256(code.encode()).digest())
    prg = _PROGRAMS.get(key)
    if prg is None:
        global OPENCL_BUILDS
        OPENCL_BUILDS += 1
        # NumPy rounds every product and sum: no fused multiply-add
        # (OpenCL C allows contraction by default, which changes the last
        # bits, e.g. of arange's start + i * delta)
        source = _NO_CONTRACTION + code
        # a saved binary reads only the PoCL entry it names, which
        # _from_binaries checks: the walk of the whole folder (whose cost
        # grows with it) is for builds from source only
        prg = _from_binaries(ctx, source, code)
        if prg is not None:
            kernel_precompile.note_program(prg, code)  # (the dry argument)
            _PROGRAMS[key] = prg
            return prg
        _pocl_cache.check_pocl_cache()  # waits for the background check
        try:
            prg = _build_with_kernels(ctx, source, code)
            _unsaved_binary(ctx, source, prg)
        except Exception as first:  # noqa: BLE001 - retried once
            logger.warning("OpenCL build failed (%s); retrying once "
                           "past PoCL's cache",
                           (str(first).splitlines() or [""])[0][:200])
            try:
                prg = _build_with_kernels(
                    ctx, _pocl_cache.uncached_source(source), code)
            except Exception:  # noqa: BLE001
                raise first from None  # its build log's lines match *code*
        _PROGRAMS[key] = prg
        # the node's ranks compile its kernels' work-group functions now,
        # each kernel once, rather than each rank all at its first launches
        kernel_precompile.start(ctx, prg, code)
    return prg


# {{{ program binaries across processes

# (load(key), store(key, binaries)) of the disk cache, when installed
_binary_persistence: tuple[Callable[[str], object],
                           Callable[[str, list[bytes]], None]] | None = None
# programs built from source in this process, whose binaries are saved at
# exit: (binary key, program)
_UNSAVED: list[tuple[str, cl.Program]] = []
_SAVE_REGISTERED = False
#: most seconds :func:`save_binaries` spends at exit
SAVE_BINARIES_S = 1.0
#: binaries loaded from the disk cache in this process
BINARIES_LOADED = 0


def set_binary_persistence(load: Callable[[str], object],
                           store: Callable[[str, list[bytes]], None]) -> None:
    """Keep built programs' binaries on disk: *load(key)* returns what
    *store* stored under *key* (or None).
    :mod:`pytato_like.target.loopy.cache` installs its disk cache so."""
    global _binary_persistence
    _binary_persistence = (load, store)


def _binary_key(ctx, source: str) -> str:
    """The key of *source*'s binaries for *ctx*'s devices: a binary is
    only loaded on the platform, device and driver version that made it."""
    h = hashlib.sha256()
    for dev in ctx.devices:
        h.update(f"{dev.platform.name}|{dev.platform.version}|{dev.name}|"
                 f"{dev.driver_version}|{dev.vendor_id}\n".encode())
    h.update(source.encode())
    return h.hexdigest()


def _from_binaries(ctx, source: str, code: str):
    """*source*'s program for *ctx* from its saved binaries, or None (none
    saved, or the driver refuses them: the caller builds the source)."""
    global BINARIES_LOADED
    if _binary_persistence is None:
        return None
    binaries = _binary_persistence[0](_binary_key(ctx, source))
    if not (isinstance(binaries, list) and len(binaries) == len(ctx.devices)
            and all(isinstance(b, bytes) and b for b in binaries)):
        return None
    if not all(_pocl_cache.check_binary_entry(b) for b in binaries):
        return None
    import pyopencl as cl
    try:
        prg = cl.Program(ctx, ctx.devices, binaries).build()
        missing = _missing_kernels(prg, code)
    except Exception as exc:  # noqa: BLE001 - the source is built instead
        logger.info("cache: saved binary refused (%s); building the source",
                    (str(exc).splitlines() or [""])[0][:200])
        return None
    if missing:
        return None
    BINARIES_LOADED += 1
    return prg


def _unsaved_binary(ctx, source: str, prg) -> None:
    global _SAVE_REGISTERED
    if (_binary_persistence is None
            or _pocl_cache.private_pocl_cache_dir() is None):
        return      # (loaded only where PoCL's folder is ours)
    _UNSAVED.append((_binary_key(ctx, source), prg))
    if not _SAVE_REGISTERED:
        _SAVE_REGISTERED = True
        atexit.register(_save_binaries_at_exit, os.getpid())


def _save_binaries_at_exit(pid: int) -> None:
    # not in a process forked from this one: its OpenCL driver state is
    # the parent's copy (PoCL's threads are not there)
    if os.getpid() == pid:
        save_binaries()


def save_binaries(budget: float | None = None) -> int:
    """Store the binaries of the programs this process built from source
    (most recent first) in the disk cache, for at most *budget* seconds
    (:data:`SAVE_BINARIES_S`); the number stored. Run at exit: fetching a
    program's binaries makes PoCL compile its kernels for them (~0.2 s
    each), which would delay the first results if done at the build.
    Failures are logged (``pytato_like.cache``, debug) and skipped."""
    if _binary_persistence is None:
        return 0
    deadline = time.monotonic() + (SAVE_BINARIES_S if budget is None
                                   else budget)
    stored = 0
    while _UNSAVED and time.monotonic() < deadline:
        key, prg = _UNSAVED.pop()
        try:
            if _binary_persistence[0](key) is not None:
                continue    # another process (rank) saved it
            _binary_persistence[1](key, list(prg.binaries))
            stored += 1
        except Exception as exc:  # noqa: BLE001 - a cache, best effort
            logger.debug("cache: binary not saved (%s)", exc)
    _UNSAVED.clear()
    return stored

# }}}


def _missing_kernels(prg, code: str) -> set[str]:
    """The kernels of the OpenCL text *code* that the built *prg* lacks."""
    return set(kernel_names(code)) - set(prg.kernel_names.split(";"))


def _build_with_kernels(ctx, source: str, code: str):
    import pyopencl as cl
    prg = cl.Program(ctx, source).build()
    missing = _missing_kernels(prg, code)
    if missing:
        # e.g. an emptied program.bc in PoCL's cache: the build "succeeds"
        raise RuntimeError(f"the built OpenCL program lacks kernel(s) "
                           f"{sorted(missing)}")
    return prg


# }}}


# {{{ one OpenCL build for every kernel waiting to be built

# kernel key -> KernelSource of plans obtained since the last build
_PENDING: dict[str, KernelSource] = {}
# (context, kernel key) -> the pyopencl.Program holding that kernel
_KERNEL_PROGRAMS: dict[tuple[cl.Context, str], cl.Program] = {}
# held while a batch of pending kernels is chosen and built: a program
# compiled in a thread after a first call on the host
# (target.loopy.host_first_call) builds beside the caller's programs
_BUILD_LOCK = threading.RLock()


def kernel_names(code: str) -> list[str]:
    """The names of the kernels defined in the OpenCL text *code*."""
    return [head["name"]
            for head in kernel_precompile.KERNEL_HEAD_RE.finditer(code)]


def note_plan(plan) -> None:
    """The kernels of *plan* will be needed: the next OpenCL build builds
    them too (all part programs of a partition, generated before the
    first runs, are then one build)."""
    for source in plan.kernels:
        _PENDING.setdefault(source.key, source)


def note_kernels(sources) -> None:
    """Kernels built outside a plan (the halo copy kernels of
    :mod:`pytato_like.runtime.halo_opencl`) that the next OpenCL build
    builds too."""
    for source in sources:
        _PENDING.setdefault(source.key, source)


def kernel_program(ctx, source):
    """The ``pyopencl.Program`` of *ctx* containing the kernel *source*.
    Built on first use together with every kernel noted by
    :func:`note_plan` and not built yet (kernels whose names would clash
    wait for a later build); with nothing else pending, together with
    the other kernels of *source*'s program."""
    prg = _KERNEL_PROGRAMS.get((ctx, source.key))
    if prg is not None:
        return prg
    with _BUILD_LOCK:
        return _build_with_pending(ctx, source)


def _build_with_pending(ctx, source):
    prg = _KERNEL_PROGRAMS.get((ctx, source.key))
    if prg is not None:
        return prg      # (built by another thread meanwhile)
    batch = {source.key: source}
    names = set(kernel_names(source.device_code))
    for key, other in list(_PENDING.items()):
        if (ctx, key) in _KERNEL_PROGRAMS:
            _PENDING.pop(key, None)  # built already (its plan fetched again)
            continue
        if key in batch:
            continue
        other_names = set(kernel_names(other.device_code))
        if other_names & names:
            continue
        names |= other_names
        batch[key] = other
    own = source.program_code or source.device_code
    if len(batch) == 1:
        prg = build_program(ctx, own)
    else:
        try:
            # in the order of their keys: alike ranks, whose kernels were
            # generated in different orders, build one text (PoCL's cache
            # entry, shared: see kernel_precompile)
            prg = build_program(ctx, merge_device_code(
                [batch[key].device_code for key in sorted(batch)]))
        except Exception:  # noqa: BLE001 - another program's kernel failed:
            # build this program alone, so that its own error (if any) shows
            logger.info("joint OpenCL build of %d kernels failed; "
                        "building %s alone", len(batch), source.host_function)
            batch = {source.key: source}
            prg = build_program(ctx, own)
    for key in batch:
        _KERNEL_PROGRAMS[(ctx, key)] = prg
        _PENDING.pop(key, None)
    return prg


def pending_kernels() -> int:
    """How many noted kernels wait for an OpenCL build."""
    return len(_PENDING)


def build_pending(ctx) -> None:
    """Build every kernel noted and not built yet for *ctx* now (one
    OpenCL build, as :func:`kernel_program` would at the next launch):
    the distributed executor does it while it waits for messages."""
    with _BUILD_LOCK:
        for key, source in list(_PENDING.items()):
            if (ctx, key) not in _KERNEL_PROGRAMS:
                kernel_program(ctx, source)
            # (kernels whose names clashed wait for a later build)
            if (ctx, key) in _KERNEL_PROGRAMS:
                _PENDING.pop(key, None)

# }}}


def clear_memory() -> None:
    """Forget kernel sources and built programs held in memory."""
    _MEMORY_KERNELS.clear()
    _PROGRAMS.clear()
    kernel_precompile.forget_programs()
    _PENDING.clear()
    _KERNEL_PROGRAMS.clear()

# vim: foldmethod=marker
