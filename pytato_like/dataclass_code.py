"""The functions :mod:`dataclasses` compiles when a class is declared,
kept compiled on disk from one process to the next.

Declaring a frozen dataclass compiles up to six small functions from
source text (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``): ~1.3 ms a class on the development
machine (Python 3.11), most of it in ``compile``. ``import pytato_like``
declares about fifty such classes and the pymbolic it imports about forty;
the first :func:`~pytato_like.generate_loopy` of a process declares about
twenty-five more. Together that was 50-70 ms of a warm start (a new process
running a program whose kernels are cached: 0.35-0.45 s from the imports
to the first result, see :doc:`/codegen`).

:func:`install` (the first thing ``import pytato_like`` does) sets
``dataclasses.exec``: :mod:`dataclasses` calls ``exec`` by name from its
own module, so it finds :func:`cached_exec` before the builtin. For a class
declared in a module of a package of :data:`SCOPES` (this package,
pymbolic, pytools, loopy, pyopencl), the source text is looked up in that
package's table of code objects; a text not in it is compiled as ``exec``
would compile it there (no ``__future__`` flags inherited) and added.
Every other call is the builtin ``exec`` with the same arguments. One text
always compiles to the same code, so a class declared from the table is
the class ``exec`` would have made; only the compile is skipped.

Each package's table is one entry of the disk cache
(:mod:`~pytato_like.cache_files`: a private folder, entries signed with
the user's secret and checked before they are unmarshalled), in a folder
named after the interpreter's bytecode (``sys.implementation.cache_tag``
and :data:`importlib.util.MAGIC_NUMBER`). This package's table is read by
:func:`install`, the others when a first class of their package is
declared: a warm start that never imports loopy (its ~90 classes, ~470
texts, ~80 ms of ``import loopy`` when compiled) does not read loopy's
table. A process that compiled texts not in a table writes that table
at exit: the texts it used together with those stored (merged with what
another process may have stored meanwhile), or only the texts it used
once that would exceed :data:`MAX_ENTRIES`.

With ``PYTATO_LIKE_CACHE=0`` (no disk cache) or
``PYTATO_LIKE_DATACLASS_CODE=0``, :mod:`dataclasses` is left alone. These
two and ``PYTATO_LIKE_CACHE_DIR`` are read when the package is imported:
the functions are declared then. A value of ``PYTATO_LIKE_DATACLASS_CODE``
that is no switch raises
:class:`~pytato_like.diagnostic.ConfigurationError` there (the import is
its only reader); one of ``PYTATO_LIKE_CACHE`` only leaves
:mod:`dataclasses` alone, and the compile cache raises for it when a
program is generated. A cache
folder the disk cache refuses
(:class:`~pytato_like.diagnostic.UnsafeCacheFolderError`) is not read or
written here either: the error is raised by the compile cache, when a
program is generated, not by the import.

pymbolic's expression classes add more functions of their own: for each
class, :mod:`pymbolic.primitives` builds a source text and calls
``compile`` by name (~0.8 ms a class, ~30 ms of the forty pymbolic declares
at import). :func:`install` sees that module's import and binds
``compile`` in its namespace to :func:`cached_compile` before its body runs
(the name is then found before the builtin; when pymbolic was imported
before this package, only the classes declared afterwards are served). The
text of a class declared in :data:`SCOPES` comes from its package's table
(keyed by its file name, flags and text); everything else is the builtin
``compile`` with the flags it would have inherited from its caller.

.. autodata:: MAX_ENTRIES
.. autodata:: SCOPES
.. autofunction:: install
.. autofunction:: cached_exec
.. autofunction:: cached_compile
.. autofunction:: stats
"""

from __future__ import annotations

import atexit
import builtins
import __future__
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import marshal
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Mapping

from pytato_like import cache_files
from pytato_like._env import SWITCH_ON, env_flag
from pytato_like.diagnostic import UnsafeCacheFolderError

logger = logging.getLogger("pytato_like.cache")

#: most source texts a package's stored table keeps (a process that would
#: store more stores only the texts it used)
MAX_ENTRIES = 4096

#: top-level packages whose classes' functions are taken from the tables,
#: one table each
SCOPES = ("pytato_like", "pymbolic", "pytools", "loopy", "pyopencl")

_KIND = "classes"
_KEY = "dataclass-functions"

# package -> {source text -> code object}: what the disk held (read at the
# package's first class), then what was compiled
_tables: dict[str, dict[str, types.CodeType]] = {}
# package -> the texts this process used (for the bound on its table)
_used: dict[str, set[str]] = {}
# the packages whose tables gained texts here (stored at exit)
_grown: set[str] = set()
_counts = {"hits": 0, "compiled": 0, "loaded": 0}
_state = {"installed": False, "save_registered": False}
_lock = threading.Lock()
# module name -> its package if in SCOPES, else "" (a declaration tests its
# module once)
_scoped: dict[str, str] = {}


def _versions() -> str:
    """The cache's folder for this interpreter's bytecode (a name matching
    :data:`~pytato_like.cache_files.VERSION_DIR_RE`)."""
    return (f"pytato_like-code-{sys.implementation.cache_tag}"
            f"-{importlib.util.MAGIC_NUMBER.hex()}")


def _scope_of(module: object) -> str:
    """The package of :data:`SCOPES` that module name *module* belongs to
    ("" when none)."""
    if not isinstance(module, str):
        return ""
    found = _scoped.get(module)
    if found is None:
        package = module.split(".", 1)[0]
        found = _scoped[module] = package if package in SCOPES else ""
    return found


def _table_of(package: str) -> dict[str, types.CodeType]:
    """The table of *package*, read from disk at its first use (a table
    that cannot be read is empty: a class is declared all the same)."""
    table = _tables.get(package)
    if table is None:
        try:
            stored = _read_table(package)
        except (OSError, UnsafeCacheFolderError) as e:
            logger.info("cache: dataclass functions of %s not read (%s)",
                        package, e)
            stored = {}
        with _lock:
            table = _tables.setdefault(package, stored)
            if table is stored:
                _counts["loaded"] += len(stored)
    return table


def _read_table(package: str) -> dict[str, types.CodeType]:
    """The stored table of *package* (empty when there is none, or it is
    not one)."""
    payload = cache_files.load(_versions(), _KIND, f"{_KEY}-{package}")
    if payload is None:
        return {}
    try:
        table = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return {}
    if not (type(table) is dict
            and all(type(text) is str and type(code) is types.CodeType
                    for text, code in table.items())):
        return {}
    return table


def cached_exec(source: str | types.CodeType,
                globals: dict[str, object] | None = None,
                locals: Mapping[str, object] | None = None,
                /, *args: object, **kwargs: object) -> None:
    """``exec``, taking the code of a source text declared in a module of
    :data:`SCOPES` from the table (compiling it once when it is not
    there)."""
    package = (not args and not kwargs and type(globals) is dict
               and _scope_of(globals.get("__name__")))
    if package and isinstance(source, str):
        code = _served(package, source, _compile)
        return builtins.exec(code, globals, locals)
    if type(source) is str:
        source = _compile(source)
    return builtins.exec(source, globals, locals, *args, **kwargs)


def _future_flags(module: types.ModuleType) -> int:
    """The compiler flags of the ``__future__`` imports of *module* (each
    binds its name to a :class:`__future__._Feature`)."""
    flags = 0
    for value in vars(module).values():
        if isinstance(value, __future__._Feature):
            flags |= value.compiler_flag
    return flags


# (none in the dataclasses of Python 3.10 to 3.13)
_DATACLASSES_FLAGS = _future_flags(dataclasses)


def _compile(source: str) -> types.CodeType:
    """*source* compiled as ``exec`` compiles it when :mod:`dataclasses`
    calls it: ``exec`` of a string takes the ``__future__`` flags of the
    module calling it, so called from here it would take this module's
    ``annotations`` and make every annotation of a generated ``__init__``
    a string."""
    return compile(source, "<string>", "exec", flags=_DATACLASSES_FLAGS,
                   dont_inherit=True)


# the compiler flags a caller's __future__ imports pass on to ``compile``
# (nested_scopes' is CO_NESTED, a flag of every nested function's code,
# which compile does not inherit)
_FUTURE_MASK = 0
for _feature in __future__.all_feature_names:
    if _feature != "nested_scopes":
        _FUTURE_MASK |= getattr(__future__, _feature).compiler_flag

#: the module whose ``compile`` :func:`install` binds to :func:`cached_compile`
COMPILING_MODULE = "pymbolic.primitives"

# the file name pymbolic gives a class's added functions, naming the class
_AUGMENTATION_NAME = re.compile(
    r"<dataclass augmentation code for <class '([A-Za-z_][\w.]*)'>>\Z")


def _augmented_module(filename: object) -> str | None:
    """The module of the class whose added functions pymbolic compiles
    under *filename* (None for any other file name)."""
    if type(filename) is not str:
        return None
    found = _AUGMENTATION_NAME.match(filename)
    return found.group(1).rsplit(".", 1)[0] if found else None


def cached_compile(source: object, filename: object, mode: str,
                   flags: int = 0, dont_inherit: bool = False,
                   optimize: int = -1, **kwargs: object) -> object:
    """``compile``, taking the code of a class's added functions that
    :mod:`pymbolic.primitives` compiles for a class of :data:`SCOPES` from
    the table (compiling it once when it is not there). Any other call is
    the builtin with the ``__future__`` flags it would have inherited from
    its caller (the builtin, called from here, would inherit this
    module's)."""
    if not dont_inherit:
        flags |= sys._getframe(1).f_code.co_flags & _FUTURE_MASK
    package = (type(source) is str and mode == "exec"
               and not flags & ~_FUTURE_MASK and optimize == -1
               and not kwargs and _scope_of(_augmented_module(filename)))
    if package:
        return _served(
            package, f"\0{filename}\0{flags}\0{source}",
            lambda _key: compile(source, filename, mode,  # type: ignore[call-overload]
                                 flags, True))
    return compile(source, filename, mode, flags, True,  # type: ignore[call-overload]
                   optimize, **kwargs)


def _served(package: str, key: str,
            make: Callable[[str], types.CodeType]) -> types.CodeType:
    """The code of *key* from *package*'s table; ``make(key)`` compiles it
    when the table lacks it, and it is added (stored at exit)."""
    table = _table_of(package)
    code = table.get(key)
    if code is None:
        code = make(key)
        with _lock:
            table[key] = code
            _grown.add(package)
            _counts["compiled"] += 1
            if not _state["save_registered"]:
                _state["save_registered"] = True
                atexit.register(_save)
    else:
        _counts["hits"] += 1
    _used.setdefault(package, set()).add(key)
    return code


class _CompileBinder(importlib.abc.MetaPathFinder):
    """Finds :data:`COMPILING_MODULE` once, through the finders after it,
    and loads it with :class:`_BindingLoader` (when its loader is the
    ordinary one for a source file; otherwise it is left as it is)."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != COMPILING_MODULE:
            return None
        _remove_binder()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if type(spec.loader) is importlib.machinery.SourceFileLoader:
            spec.loader = _BindingLoader(spec.loader.name, spec.loader.path)
        return spec


class _BindingLoader(importlib.machinery.SourceFileLoader):
    """The module's own loader, binding ``compile`` in its namespace before
    its body runs."""

    def exec_module(self, module: types.ModuleType) -> None:
        module.compile = cached_compile  # type: ignore[attr-defined]
        super().exec_module(module)


def _remove_binder() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if type(finder) is not _CompileBinder]


def _bind_compile() -> None:
    """Make :data:`COMPILING_MODULE` call :func:`cached_compile`: now if it
    is imported, else when it is."""
    module = sys.modules.get(COMPILING_MODULE)
    if module is not None:
        module.compile = cached_compile  # type: ignore[attr-defined]
    else:
        _remove_binder()
        sys.meta_path.insert(0, _CompileBinder())


def _save() -> None:
    """Store the tables that gained texts here: for each, the texts used
    here merged with those stored (:data:`MAX_ENTRIES` at most, else only
    the texts used here)."""
    with _lock:
        grown = sorted(_grown)
        used_of = {package: {text: _tables[package][text]
                             for text in _used.get(package, ())}
                   for package in grown}
    for package in grown:
        used = used_of[package]
        try:
            table = _read_table(package)
            table.update(used)
            if len(table) > MAX_ENTRIES:
                table = used
            cache_files.store(_versions(), _KIND, f"{_KEY}-{package}",
                              marshal.dumps(table))
        except (OSError, UnsafeCacheFolderError, ValueError) as e:
            logger.info("cache: dataclass functions of %s not stored (%s)",
                        package, e)


def install() -> None:
    """Read the stored table and make :mod:`dataclasses` call
    :func:`cached_exec` (once per process; nothing when the disk cache or
    this switch is off, or the cache folder is refused).

    :raises ~pytato_like.diagnostic.ConfigurationError: when
        ``PYTATO_LIKE_DATACLASS_CODE`` holds no switch.
    """
    if _state["installed"]:
        return
    _state["installed"] = True
    # (read here and handed to env_flag, which parses it and words the
    # error: the import's reads of the environment stay in this function)
    own = os.environ.get("PYTATO_LIKE_DATACLASS_CODE")
    if own is not None and not env_flag(
            "PYTATO_LIKE_DATACLASS_CODE", True,
            environ={"PYTATO_LIKE_DATACLASS_CODE": own}):
        return
    # a malformed value only turns the table off: the compile cache raises
    # for it when a program is generated, not the import
    cache = os.environ.get("PYTATO_LIKE_CACHE", "").strip().lower()
    if cache and cache not in SWITCH_ON:
        return
    # the package's own table now: a folder the disk cache refuses leaves
    # dataclasses alone (the other tables are read at their first class)
    try:
        stored = _read_table("pytato_like")
    except (OSError, UnsafeCacheFolderError) as e:
        logger.info("cache: dataclass functions not read (%s)", e)
        return
    _tables["pytato_like"] = stored
    _counts["loaded"] += len(stored)
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]
    _bind_compile()


def stats() -> dict[str, int | bool]:
    """What the table did in this process: ``installed`` (whether
    :mod:`dataclasses` calls :func:`cached_exec`), ``compile_bound``
    (whether :data:`COMPILING_MODULE` calls :func:`cached_compile`, or will
    when it is imported), ``loaded`` (texts read from disk), ``hits``
    (declarations' functions taken from the table), ``compiled`` (texts
    compiled here)."""
    module = sys.modules.get(COMPILING_MODULE)
    bound = (getattr(module, "compile", None) is cached_compile
             if module is not None else
             any(type(f) is _CompileBinder for f in sys.meta_path))
    return {"installed": getattr(dataclasses, "exec", None) is cached_exec,
            "compile_bound": bound, **_counts}
