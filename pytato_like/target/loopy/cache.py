"""Compile cache: program plans and OpenCL binaries, in memory and on disk.

**Keys.** A program is keyed by a persistent structural key of its DAG
(:func:`dag_key`): one line per node in topological order, children
referred to by their local position, every field written with ``repr``
(expressions, dtypes, shapes, tags, names); data wrappers contribute their
shape and dtype only (their data are kernel arguments, never part of the
key). The output names, the options, the device and the versions of
pytato_like, loopy, pyopencl and Python complete the key, which is a
SHA-256 hex digest, equal across processes (Python's ``hash`` is not).

**Store.** A :class:`~pytato_like.target.loopy.codegen.ProgramPlan` (the
generated OpenCL and launchers) is kept in a dict and pickled to
``<cache dir>/plans/<key>.pkl``; OpenCL binaries of each kernel source are
kept per device in ``<cache dir>/binaries/<key>.pkl``. A second process
compiling the same DAG thus runs neither loopy nor the OpenCL compiler.

**Location.** ``$PYTATO_LIKE_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/pytato_like`` (``~/.cache/pytato_like``), in a
subdirectory named after the versions above: a version change starts a
fresh cache. Files are written atomically (temporary file + rename); an
entry that cannot be read (truncated, corrupted, from an incompatible
version) is deleted and recompiled, never fatal. ``PYTATO_LIKE_CACHE=0``
disables the disk cache.

.. autofunction:: dag_key
.. autofunction:: cache_dir
.. autodata:: CODEGEN_CALLS
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from typing import Any

from pytato_like.array import (
    ARRAY,
    ARRAY_TUPLE,
    BINDINGS,
    IDENTITY,
    VALUE,
    Array,
    NamedArray,
)

#: number of loopy code generations in this process (tests use it to check
#: that a cache hit does not generate code)
CODEGEN_CALLS = 0

_MEMORY: dict[str, Any] = {}
_MEMORY_BINARIES: dict[tuple, Any] = {}


@functools.lru_cache(maxsize=1)
def _library_versions() -> str:
    # from package metadata: importing loopy here would cost a warm start
    # ~0.4 s
    from importlib.metadata import version
    return "_".join(f"{name}-{version(name)}"
                    for name in ("loopy", "pyopencl", "pymbolic", "islpy"))


def _versions() -> str:
    import pytato_like
    return (f"pytato_like-{pytato_like.__version__}_{_library_versions()}"
            f"_py{sys.version_info[0]}.{sys.version_info[1]}")


def cache_dir() -> str:
    """The versioned directory of the disk cache."""
    base = os.environ.get("PYTATO_LIKE_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "pytato_like")
    return os.path.join(base, _versions())


def _disk_enabled() -> bool:
    return os.environ.get("PYTATO_LIKE_CACHE", "1") != "0"


# {{{ structural key

def _field_repr(value, kind, index, expr_reprs) -> str:
    if kind is VALUE:
        if isinstance(value, Array):  # pragma: no cover - defensive
            return f"@{index[id(value)]}"
        r = expr_reprs.get(id(value))
        if r is None:
            r = repr(value)
            expr_reprs[id(value)] = r
            expr_reprs[-id(value)] = value  # keep alive: ids stay unique
        return r
    if kind is IDENTITY:
        return "<data>"
    if kind is ARRAY:
        return f"@{index[id(value)]}"
    if kind is ARRAY_TUPLE:
        return "(" + ",".join(f"@{index[id(a)]}" for a in value) + ")"
    if kind is BINDINGS:
        return "{" + ",".join(f"{k}:@{index[id(a)]}"
                              for k, a in sorted(value.items())) + "}"
    return "(" + ",".join(f"@{index[id(v)]}" if isinstance(v, Array) else repr(v)
                          for v in value) + ")"


def dag_key(outputs: dict[str, Array], order: list[Array], extra: str = "") -> str:
    """Persistent structural key of the DAG computing *outputs* (*order* is
    its topological order), plus *extra*."""
    index: dict[int, int] = {}
    h = hashlib.sha256()
    expr_reprs: dict[int, Any] = {}
    # dtypes and axes tuples are shared between nodes: render each once
    dtype_str: dict[Any, str] = {}
    axes_repr: dict[int, str] = {}
    for i, node in enumerate(order):
        index[id(node)] = i
        if isinstance(node, NamedArray):
            line = f"N:{node.name}:@{index[id(node.expr)]}"
        else:
            fields = ";".join(_field_repr(getattr(node, name), kind, index,
                                          expr_reprs)
                              for name, kind in node._fields)
            dt = dtype_str.get(node.dtype)
            if dt is None:
                dt = dtype_str[node.dtype] = str(node.dtype)
            axes = node.axes
            ax = axes_repr.get(id(axes))
            if ax is None:
                ax = axes_repr[id(axes)] = repr(axes)
                expr_reprs[-id(axes) - 1] = axes  # keep alive: ids stay unique
            tags = sorted(map(repr, node.tags)) if node.tags else ""
            line = f"{type(node).__name__}:{dt}:{fields}:{ax}:{tags}"
        h.update(line.encode())
        h.update(b"\n")
    h.update(repr(sorted((name, index[id(a)]) for name, a in outputs.items()))
             .encode())
    h.update(extra.encode())
    h.update(_versions().encode())
    return h.hexdigest()

# }}}


# {{{ files

def _path(kind: str, key: str) -> str:
    return os.path.join(cache_dir(), kind, key + ".pkl")


def _load(kind: str, key: str):
    if not _disk_enabled():
        return None
    path = _path(kind, key)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - any unreadable entry is a miss
        try:
            os.unlink(path)
        except OSError:
            pass
        return None


def _store(kind: str, key: str, value) -> None:
    if not _disk_enabled():
        return
    path = _path(kind, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full disk only costs a recompile later

# }}}


def get_plan(key: str):
    """``(plan, where)`` with *where* in ``"memory"``, ``"disk"``; or
    ``(None, "miss")``."""
    plan = _MEMORY.get(key)
    if plan is not None:
        return plan, "memory"
    plan = _load("plans", key)
    if plan is not None:
        from pytato_like.target.loopy.codegen import ProgramPlan
        if not isinstance(plan, ProgramPlan):
            return None, "miss"
        _MEMORY[key] = plan
        return plan, "disk"
    return None, "miss"


def put_plan(key: str, plan) -> None:
    _MEMORY[key] = plan
    _store("plans", key, plan)


def device_key(ctx) -> str:
    return ";".join(f"{d.platform.name}|{d.name}|{d.driver_version}|{d.version}"
                    for d in ctx.devices)


def build_program_cached(ctx, source: str, options: tuple = ()):
    """``pyopencl.Program`` of *source* built for *ctx*, from binaries
    cached on disk when possible."""
    import pyopencl as cl
    key = hashlib.sha256(
        (source + "\0" + device_key(ctx) + "\0" + " ".join(options)).encode()
    ).hexdigest()
    binaries = _MEMORY_BINARIES.get(key) or _load("binaries", key)
    if binaries is not None and len(binaries) == len(ctx.devices):
        try:
            prg = cl.Program(ctx, ctx.devices, binaries).build(options=list(options))
            _MEMORY_BINARIES[key] = binaries
            return prg
        except Exception:  # noqa: BLE001 - stale binary: rebuild from source
            pass
    prg = cl.Program(ctx, source).build(options=list(options))
    try:
        binaries = prg.binaries
        _MEMORY_BINARIES[key] = binaries
        _store("binaries", key, binaries)
    except Exception:  # noqa: BLE001 - some drivers cannot return binaries
        pass
    return prg


def clear_memory_cache() -> None:
    """Forget in-memory plans and binaries (the disk cache stays)."""
    _MEMORY.clear()
    _MEMORY_BINARIES.clear()
