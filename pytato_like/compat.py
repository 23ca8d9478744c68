"""Running unchanged code that imports ``pytato``: the import alias.

:func:`install_pytato_alias` makes ``import pytato`` and ``import
pytato.X.Y`` give :mod:`pytato_like` and ``pytato_like.X.Y`` -- the same
module objects, so a class reached through either name is one class and
``isinstance`` agrees. Applications built on pytato (arraycontext,
meshmode, grudge, mirgecom) then run on pytato_like without an edit.
``python -m pytato_like.run script.py [args]`` (see :mod:`pytato_like.run`)
installs the alias before it runs a script or module, also under
``mpiexec``.

The alias is an explicit opt-in: nothing installs it on import. It
refuses, with a :class:`~pytato_like.diagnostic.ConfigurationError`, when
the real pytato was imported first (two libraries would then share one
name). When pytato is installed but not yet imported, the alias wins and
the real one stays unreachable by that name in this process.

.. autofunction:: install_pytato_alias
.. autofunction:: pytato_alias_installed
.. autofunction:: alias_path
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import pytato_like
from pytato_like.diagnostic import ConfigurationError

#: the name applications import
ALIAS = "pytato"
#: the package it stands for
TARGET = "pytato_like"


def _target_name(fullname: str) -> str | None:
    """``pytato_like.X`` for ``pytato.X`` (None for other names)."""
    if fullname == ALIAS:
        return TARGET
    if fullname.startswith(ALIAS + "."):
        return TARGET + fullname[len(ALIAS):]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads ``pytato.X`` as the already importable ``pytato_like.X``.

    The module object stays the target's own (its ``__name__`` and
    ``__spec__`` untouched): :meth:`exec_module` puts it into
    :data:`sys.modules` under the alias, which is what the import system
    hands back."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        # a throw-away placeholder: exec_module replaces it in sys.modules
        return types.ModuleType(spec.name)

    def exec_module(self, module) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.target)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``pytato`` and its submodules as pytato_like's."""

    def find_spec(self, fullname, path=None, target=None):
        target_name = _target_name(fullname)
        if target_name is None:
            return None
        if importlib.util.find_spec(target_name) is None:
            return None  # pytato.X with no pytato_like.X: a plain ImportError
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(target_name),
            is_package=target_name == TARGET or None)


def alias_path() -> str:
    """A folder holding a stand-in ``pytato`` package that installs the
    alias when imported: put first on ``PYTHONPATH``, it gives the alias
    to child processes too (test workers, ``mpiexec`` ranks)."""
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "_alias_path")


def pytato_alias_installed() -> bool:
    """Whether ``import pytato`` gives :mod:`pytato_like` in this process."""
    return (any(isinstance(f, _AliasFinder) for f in sys.meta_path)
            and sys.modules.get(ALIAS) is sys.modules.get(TARGET))


def install_pytato_alias(*, replace_stand_in: bool = False) -> None:
    """Make ``import pytato`` (and every ``pytato.X``) load pytato_like.

    Idempotent. Raises
    :class:`~pytato_like.diagnostic.ConfigurationError` when a real
    ``pytato`` module is imported already. (*replace_stand_in* is for the
    stand-in module :func:`alias_path` holds, which calls this while it is
    itself being imported as ``pytato``.)"""
    present = sys.modules.get(ALIAS)
    if replace_stand_in and present is not None and \
            getattr(present, "__file__", "").startswith(alias_path()):
        present = None
        sys.modules[ALIAS] = pytato_like
    if present is not None and present is not pytato_like:
        where = getattr(present, "__file__", None) or "an unknown location"
        raise ConfigurationError(
            f"install_pytato_alias: the real pytato (from {where}) is "
            f"imported already in this process; install the alias before "
            f"anything imports pytato (for example run the program with "
            f"'python -m pytato_like.run'), or uninstall pytato")
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        # first: before the path finder could find an installed pytato
        sys.meta_path.insert(0, _AliasFinder())
    # the modules imported already keep their identity under both names
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        if name == TARGET or name.startswith(TARGET + "."):
            sys.modules.setdefault(ALIAS + name[len(TARGET):], module)


def pytest_configure(config) -> None:
    """pytest hook: ``pytest -p pytato_like.compat`` runs a test suite
    written for pytato with the alias installed, in every worker of
    pytest-xdist too (``python -m pytato_like.run -m pytest`` adds the
    option itself)."""
    install_pytato_alias()
