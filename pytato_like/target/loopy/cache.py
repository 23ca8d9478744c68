"""Compile cache: program plans and generated kernels, in memory and on disk.

**Keys.** A program is keyed by a persistent structural key of its DAG
(:func:`dag_key`): one line per node in topological order, children
referred to by their local position, every field written with ``repr``
(expressions, dtypes, shapes, tags, names); data wrappers contribute their
shape and dtype only (their data are kernel arguments, never part of the
key). The output names, the options, the device and the versions of
pytato_like (its release and a fingerprint of its source files), loopy,
pyopencl, pymbolic, islpy and Python complete the key, which is a SHA-256
hex digest, equal across processes (Python's ``hash`` is not). A kernel
(one distinct chunk of a program) is keyed by its structure with
canonical names (:mod:`~pytato_like.target.loopy.codegen`), so programs
sharing a computation -- time loops of any length, the parts of a
partition -- share its generated code.

**Store.** Plans (:class:`~pytato_like.target.loopy.plan.ProgramPlan`),
kernels (:class:`~pytato_like.opencl_build.KernelSource`) and the
translation units handed out (:mod:`~pytato_like.target.loopy.unit`) are
kept in dicts and written to ``<cache dir>/{plans,kernels,units}/<key>.pkl``
as entries signed with a per-user secret over their key, kind and
versions (:mod:`~pytato_like.cache_files`: the format, what
is refused, and why not :mod:`pytools.persistent_dict`). An entry that is
not a regular file, or whose signature does not match the request, is a
miss: the program is recompiled, never anything else loaded. The OpenCL
binaries of the programs a process built are saved in ``binaries/`` at
its exit (:func:`~pytato_like.opencl_build.save_binaries`: fetching them
makes PoCL compile for them, ~0.2 s a program, so not at the build),
keyed by the source and the platform, device and driver version; a
later process loads them instead of building the source (a warm start
~40 ms faster than PoCL's own cache, in a folder of ours:
:mod:`~pytato_like._pocl_cache`), and builds the source when the driver
refuses them.

**Claims.** A process about to generate a plan claims its key first
(:func:`claim_plan`): ranks of an SPMD program, or processes compiling
the same program at once, then generate each plan once, the others
waiting for it on disk (:func:`wait_for_plan`) -- or, in the distributed
executor's first execution, generating their other parts meanwhile
(:func:`deferring_claimed_plans`). A claim is refreshed while it is held;
one not refreshed for a minute, or whose process on this host has ended,
is replaced; a wait ends when the plan is stored, when the claim goes away
without it, or after :data:`PLAN_WAIT_S` seconds, and the process then
generates the plan itself.

**Size.** The disk cache (all versions) is kept under
:func:`cache_size_limit` bytes (``PYTATO_LIKE_CACHE_SIZE``, e.g. ``200M``;
default 1G): after each write, the least recently used entries (a hit
refreshes an entry's time) are removed until it fits.

**Location.** ``$PYTATO_LIKE_CACHE_DIR`` if set, else the user's cache
folder (:func:`platformdirs.user_cache_dir`: ``~/.cache/pytato_like`` on
Linux), in a subdirectory named after the versions above: a version
change starts a fresh cache. Files are written atomically (temporary
file + rename). ``PYTATO_LIKE_CACHE=0`` disables the disk cache.
``python -m pytato_like.cache info|clear`` shows or empties it
(:mod:`pytato_like.cache`).

Building the OpenCL programs of the kernels (one build for every kernel
waiting) is :mod:`pytato_like.opencl_build`'s, which the runtime uses too;
this module gives it the disk store for kernel sources.

.. autofunction:: dag_key
.. autofunction:: claim_plan
.. autofunction:: release_plan
.. autofunction:: wait_for_plan
.. autofunction:: deferring_claimed_plans
.. autofunction:: defer_claimed_plans
.. autoexception:: PlanClaimedElsewhere
.. autodata:: PLAN_WAIT_S
.. autofunction:: cache_dir
.. autofunction:: cache_base_dir
.. autofunction:: cache_size_limit
.. autofunction:: cache_info
.. autofunction:: clear_disk_cache
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import cast

from pytato_like import kernel_precompile, opencl_build
from pytato_like._env import env_flag
from pytato_like._traversal import ArrayRef
from pytato_like.array import ARRAY, ARRAY_TUPLE, BINDINGS, Array, NamedArray
from pytato_like.diagnostic import ConfigurationError
from pytato_like import cache_files
from pytato_like.opencl_build import note_plan
from pytato_like.cache_files import cache_base_dir
from pytato_like.target.loopy.plan import ProgramPlan


_MEMORY: dict[str, ProgramPlan] = {}

logger = logging.getLogger("pytato_like.cache")

#: the libraries whose versions name the cache directory
_KEYED_LIBRARIES = ("loopy", "pyopencl", "pymbolic", "islpy")


@functools.lru_cache(maxsize=1)
def _library_versions() -> str:
    return "_".join(f"{name}-{installed_version(name)}"
                    for name in _KEYED_LIBRARIES)


def installed_version(name: str) -> str:
    """The installed version of distribution *name* (a top-level module of
    the same name), without importing it: importing loopy would cost a warm
    start ~0.4 s. Read from the name of its ``<name>-<version>.dist-info``
    folder beside the module (what pip writes), which costs a directory
    listing; :func:`importlib.metadata.version` (~1.5 ms a library: it
    parses the metadata file) when there is none (an egg, a source tree)."""
    import importlib.util
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin is not None:
        folder = os.path.dirname(os.path.dirname(spec.origin))
        prefix, suffix = f"{name}-", ".dist-info"
        with contextlib.suppress(OSError):
            found = [entry for entry in os.listdir(folder)
                     if entry.startswith(prefix) and entry.endswith(suffix)]
            if len(found) == 1:
                return found[0][len(prefix):-len(suffix)]
    from importlib.metadata import version
    return version(name)


@functools.lru_cache(maxsize=1)
def _source_fingerprint() -> str:
    """Digest of the names, sizes and modification times of the package's
    Python files: an edited checkout (same release number) does not use
    entries an older code generator wrote."""
    import pytato_like
    h = hashlib.sha256()
    # (os.scandir: the names and sizes of ~150 files in ~1 ms; os.walk with
    # os.stat and relpath took 3-9 ms of every warm start)
    folders = [("", os.path.dirname(os.path.abspath(pytato_like.__file__)))]
    while folders:
        rel, folder = folders.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name.endswith(".py") and entry.is_file():
                st = entry.stat()
                h.update(f"{rel}{entry.name}:{st.st_size}:{st.st_mtime_ns}\n"
                         .encode())
            elif entry.name != "__pycache__" and entry.is_dir():
                folders.append((f"{rel}{entry.name}/", entry.path))
    return h.hexdigest()[:12]


def _versions() -> str:
    import pytato_like
    return (f"pytato_like-{pytato_like.__version__}-{_source_fingerprint()}"
            f"_{_library_versions()}"
            f"_py{sys.version_info[0]}.{sys.version_info[1]}")


def cache_dir() -> str:
    """The versioned directory of the disk cache (this version's entries)."""
    return os.path.join(cache_base_dir(), _versions())


_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def cache_size_limit() -> int:
    """Bytes the disk cache may take: ``PYTATO_LIKE_CACHE_SIZE`` (an integer
    with an optional ``K``/``M``/``G`` suffix), default 1G.

    :raises ~pytato_like.diagnostic.ConfigurationError: for a malformed value.
    """
    text = os.environ.get("PYTATO_LIKE_CACHE_SIZE", "1G").strip().upper()
    text = text[:-1] if text.endswith("B") and len(text) > 1 else text
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    number = text[:-1] if unit else text
    try:
        value = float(number) * _SIZE_UNITS[unit]
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigurationError(
            f"PYTATO_LIKE_CACHE_SIZE={os.environ['PYTATO_LIKE_CACHE_SIZE']!r} "
            "is not a size (expected e.g. 500M, 2G or a number of bytes)")
    return int(value)


def _disk_enabled() -> bool:
    return env_flag("PYTATO_LIKE_CACHE", True)


# {{{ structural key

# How a node's line is written, by the kind of each of its fields: value
# fields (expressions, names, dtypes; shared by many nodes) by their repr,
# made once per object; data by a placeholder (their values are kernel
# arguments, not part of the key); arrays by their position in the order;
# other fields holding arrays (shapes, indices) by the repr of their
# canonical form, made once per object.
# (a known value is one dict lookup, inline; a new one is written once)
_VALUE_TEXT = "(texts.get(id(node.{name})) or value_text(node.{name}))"
_FIELD_TEXTS = {
    id(ARRAY): "at[id(node.{name})]",
    id(ARRAY_TUPLE): "'(' + ','.join([at[id(a)] for a in node.{name}]) + ')'",
    id(BINDINGS): "'{{' + ','.join([repr(k) + ':' + at[id(v[k])] "
                  "for v in (node.{name},) for k in sorted(v)]) + '}}'",
}
# class -> its writer: (node, at, texts, value_text, other_text) -> its line
_NODE_WRITERS: dict[type, Callable[..., str]] = {}


def _node_writer(cls: type) -> Callable[..., str]:
    """The function writing a node of class *cls* as its line of the key.

    Generated once per class, as :mod:`dataclasses` generates ``__init__``:
    a node then costs straight-line code, not a loop over its fields with
    a branch per kind (~3 us a node instead of ~6: 0.4 s of the key of a
    140 000-node DAG)."""
    kinds: list[object] = []
    texts = [repr(cls.__name__)]
    for name, kind in cls._fields:  # type: ignore[attr-defined]
        if kind.by_identity:
            texts.append("'<data>'")
        elif not kind.holds_arrays:
            texts.append(_VALUE_TEXT.format(name=name))
        elif id(kind) in _FIELD_TEXTS:
            texts.append(_FIELD_TEXTS[id(kind)].format(name=name))
        else:
            texts.append(f"other_text(node.{name}, kinds[{len(kinds)}])")
            kinds.append(kind)
    texts += [_VALUE_TEXT.format(name="dtype"), _VALUE_TEXT.format(name="axes")]
    joined = ", ".join(texts)
    source = (
        "def write(node, at, texts, value_text, other_text):\n"
        f"    line = ';'.join(({joined}))\n"
        "    if node.tags:\n"
        "        line += ';' + repr(sorted(map(repr, node.tags)))\n"
        "    return line\n")
    namespace: dict[str, object] = {"kinds": kinds}
    exec(compile(source, f"<dag_key writer of {cls.__name__}>", "exec"),
         namespace)
    writer = _NODE_WRITERS[cls] = namespace["write"]  # type: ignore[assignment]
    return writer  # type: ignore[return-value]


def dag_key(outputs: dict[str, Array], order: list[Array], extra: str = "") -> str:
    """Persistent structural key of the DAG computing *outputs* (*order* is
    its topological order), plus *extra*.

    One line per node (:func:`_node_writer`), children written as their
    position in *order*: linear in the DAG, ~3 us per node."""
    # id -> "@<position in order>"
    at: dict[int, str] = {}
    h = hashlib.sha256()
    # id -> text of a value (written once per object); the objects are kept
    # alive so ids stay unique
    texts: dict[int, str] = {}
    alive: list[object] = []

    def value_text(value: object) -> str:
        text = texts.get(id(value))
        if text is None:
            text = texts[id(value)] = repr(value)
            alive.append(value)
        return text

    def ref(array: Array) -> ArrayRef:
        return ArrayRef(int(at[id(array)][1:]))

    canonical_texts: dict[int, str] = {}

    def other_text(value: object, kind) -> str:
        # (the arrays of one object have their one position each: written
        # once per object too)
        text = canonical_texts.get(id(value))
        if text is None:
            text = canonical_texts[id(value)] = repr(kind.canonical(value, ref))
            alive.append(value)
        return text

    writers = _NODE_WRITERS
    lines: list[str] = []
    for i, node in enumerate(order):
        cls = type(node)
        if cls is NamedArray:
            named = cast(NamedArray, node)
            lines.append(f"N:{named.name}:{at[id(named.expr)]}")
        else:
            writer = writers.get(cls) or _node_writer(cls)
            lines.append(writer(node, at, texts, value_text, other_text))
        at[id(node)] = f"@{i}"
        if len(lines) >= 4096:
            h.update("\n".join(lines).encode())
            h.update(b"\n")
            lines.clear()
    h.update("\n".join(lines).encode())
    h.update(b"\n")
    h.update(repr(sorted((name, int(at[id(a)][1:]))
                         for name, a in outputs.items())).encode())
    h.update(extra.encode())
    h.update(_versions().encode())
    return h.hexdigest()

# }}}


# {{{ files (the format and the checks are cache_files')

def _path(kind: str, key: str) -> str:
    return cache_files.entry_path(_versions(), kind, key)


def _load(kind: str, key: str):
    """The value stored under *key*, or None: only an entry signed for
    this very key, kind and installation is unpickled
    (:func:`~pytato_like.cache_files.load`)."""
    if not _disk_enabled():
        return None
    payload = cache_files.load(_versions(), kind, key)
    if payload is None:
        return None
    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001 - e.g. a class that changed shape
        cache_files.discard(_path(kind, key), "payload does not unpickle")
        return None


def _store(kind: str, key: str, value) -> None:
    if not _disk_enabled():
        return
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        # e.g. a tag class defined in a function: kept in memory only
        logger.info("cache: %s %s... not stored on disk (%s)", kind, key[:16], e)
        return
    if cache_files.store(_versions(), kind, key, payload):
        evict(cache_size_limit())


def evict(limit: int) -> int:
    """Remove least recently used entries (of every version) until the
    disk cache takes at most *limit* bytes; returns the bytes removed.
    Only files the package wrote are counted and removed."""
    return cache_files.evict(limit)


def cache_info() -> dict:
    """Location, bound, and entries and bytes per version directory and
    kind (``plans``, ``kernels``, ``units``, ``binaries``) of the disk cache."""
    base = cache_base_dir()
    versions: dict[str, dict] = {}
    for _, size, path in cache_files.entries(base):
        version, kind = os.path.relpath(path, base).split(os.sep)[:2]
        slot = versions.setdefault(version, {}).setdefault(
            kind, {"entries": 0, "bytes": 0})
        slot["entries"] += 1
        slot["bytes"] += size
    return {"dir": base, "current": os.path.basename(cache_dir()),
            "limit": cache_size_limit(), "enabled": _disk_enabled(),
            "versions": versions,
            "bytes": sum(k["bytes"] for v in versions.values()
                         for k in v.values())}


def clear_disk_cache() -> int:
    """Delete every entry of every version (and the package's folders
    left empty; nothing else in the folder); returns the number deleted."""
    n = cache_files.clear()
    clear_memory_cache()
    return n

# }}}


# {{{ claims: one process generates a plan, the others wait for it

#: longest wait, in seconds, for a plan another process is generating;
#: then this process generates it itself
PLAN_WAIT_S = 300.0


class PlanClaimedElsewhere(Exception):
    """Raised by :func:`~pytato_like.target.loopy.generate_loopy` inside
    :func:`deferring_claimed_plans` when another process is generating the
    plan: the caller generates its other programs first."""

    def __init__(self, key: str) -> None:
        super().__init__(f"plan {key[:16]}... is being generated by another "
                         "process")
        self.key = key


_DEFER = threading.local()


@contextlib.contextmanager
def deferring_claimed_plans() -> Iterator[None]:
    """Within: a plan claimed by another process raises
    :class:`PlanClaimedElsewhere` instead of being waited for."""
    before = getattr(_DEFER, "on", False)
    _DEFER.on = True
    try:
        yield
    finally:
        _DEFER.on = before


def defer_claimed_plans() -> bool:
    """Whether this thread is inside :func:`deferring_claimed_plans`."""
    return getattr(_DEFER, "on", False)


def _claim(kind: str, key: str) -> bool:
    # True when this process may make the entry (or the disk cache is off)
    return not _disk_enabled() or cache_files.claim(_versions(), kind, key)


def _release(kind: str, key: str) -> None:
    if _disk_enabled():
        cache_files.release(_versions(), kind, key)


def _claimed_elsewhere(kind: str, key: str) -> bool:
    return _disk_enabled() and cache_files.claimed_elsewhere(
        _versions(), kind, key)


def claim_plan(key: str) -> bool:
    """Claim plan *key* before generating it (see
    :func:`~pytato_like.cache_files.claim`): ranks or
    processes generating alike programs at once then generate each plan
    once. True when this process may generate it (it holds the claim, or
    the disk cache is off); False while another process generates it."""
    return _claim("plans", key)


def release_plan(key: str) -> None:
    """Give up this process's claim on plan *key*."""
    _release("plans", key)


def wait_for_plan(key: str, timeout: float | None = None):
    """``(plan, "disk")`` once the process holding the claim on plan *key*
    has stored it; ``(None, "miss")`` if that process ends (or gives up
    its claim) without storing it, or after *timeout* seconds
    (:data:`PLAN_WAIT_S`). A process that holds a claim itself (a plan
    generated inside another's generation) does not wait: two processes
    waiting for each other's plans would otherwise wait the full time."""
    if cache_files.holds_claims("plans"):
        return get_plan(key)
    deadline = time.monotonic() + (PLAN_WAIT_S if timeout is None else timeout)
    pause = 0.002
    while True:
        plan, where = get_plan(key)
        if plan is not None:
            return plan, where
        if (not _claimed_elsewhere("plans", key)
                or time.monotonic() > deadline):
            return get_plan(key)
        time.sleep(pause)
        pause = min(2 * pause, 0.05)

# }}}


def get_plan(key: str):
    """``(plan, where)`` with *where* in ``"memory"``, ``"disk"``; or
    ``(None, "miss")``."""
    plan = _MEMORY.get(key)
    if plan is not None:
        note_plan(plan)
        return plan, "memory"
    plan = _load("plans", key)
    if plan is not None:
        if not isinstance(plan, ProgramPlan):
            return None, "miss"
        _MEMORY[key] = plan
        note_plan(plan)
        return plan, "disk"
    return None, "miss"


def put_plan(key: str, plan) -> None:
    _MEMORY[key] = plan
    note_plan(plan)
    _store("plans", key, plan)


def _load_kernel(key: str):
    return _load("kernels", key)


def _store_kernel(key: str, source) -> None:
    _store("kernels", key, source)


# kernel sources generated by any process are kept on disk
opencl_build.set_kernel_persistence(_load_kernel, _store_kernel)


def _load_binaries(key: str):
    return _load("binaries", key)


def _store_binaries(key: str, binaries: list[bytes]) -> None:
    _store("binaries", key, binaries)


# and the binaries of the programs built, saved at exit
opencl_build.set_binary_persistence(_load_binaries, _store_binaries)


# the node's ranks compile each kernel ahead of its launch once: claims
# and done markers of kind "workgroups"
kernel_precompile.set_claims(kernel_precompile.CompileClaims(
    claim=functools.partial(_claim, "workgroups"),
    release=functools.partial(_release, "workgroups"),
    claimed_elsewhere=functools.partial(_claimed_elsewhere, "workgroups"),
    is_done=lambda key: _load("workgroups", key) is True,
    mark_done=lambda key: _store("workgroups", key, True)))


#: unit key -> the picklable record of a translation unit handed out
_MEMORY_UNITS: dict[str, dict] = {}


def get_unit(key: str):
    """The record :func:`put_unit` stored under *key* (the translation
    unit pytato's API hands out, see
    :mod:`~pytato_like.target.loopy.unit`), or None. Loading one costs a
    tenth of building it."""
    record = _MEMORY_UNITS.get(key)
    if record is None:
        record = _load("units", key)
        if not (isinstance(record, dict) and "t_unit" in record):
            return None
        _MEMORY_UNITS[key] = record
    return record


def put_unit(key: str, record: dict) -> None:
    _MEMORY_UNITS[key] = record
    _store("units", key, record)


def clear_memory_cache() -> None:
    """Forget in-memory plans, kernels and built programs (the disk cache
    stays)."""
    _MEMORY.clear()
    _MEMORY_UNITS.clear()
    opencl_build.clear_memory()
