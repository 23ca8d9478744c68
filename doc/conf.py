# Sphinx configuration for pytato_like.
# The build must stay warning-free: `make docs` / `make test` use `sphinx -W`.
# No network access at build time: intersphinx reads only inventories found
# on disk (see intersphinx_mapping below).
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "pytato_like"
author = "pytato_like developers"
copyright = "2026, pytato_like developers"
from pytato_like.version import VERSION_TEXT  # noqa: E402  (one version source)

release = version = VERSION_TEXT

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
]

# {{{ intersphinx, offline
#
# The build machine reaches package registries only, so intersphinx must not
# fetch inventories over the network (a failed fetch is a warning, and the
# build runs with -W). Each project links to its online docs but reads its
# objects.inv from a local file; a project whose inventory is not on disk is
# left out rather than fetched. Debian ships pyopencl's and mpi4py's
# inventories (python-pyopencl-doc, python-mpi4py-doc, installed by
# scripts/bootstrap.sh). NumPy's and loopy's are committed in
# doc/_inventories/, written by scripts/make_inventories.py (loopy's built
# from the documentation sources of its sdist, NumPy's from the installed
# package by NumPy's URL scheme); rerun it when either is upgraded.

_HERE = os.path.dirname(os.path.abspath(__file__))
_INVENTORY_CANDIDATES = {
    "numpy": ("https://numpy.org/doc/stable/", [
        os.path.join(_HERE, "_inventories", "numpy.inv"),
        "/usr/share/doc/python-numpy-doc/html/objects.inv",
        "/usr/share/doc/python3-numpy/html/objects.inv"]),
    "loopy": ("https://documen.tician.de/loopy/", [
        os.path.join(_HERE, "_inventories", "loopy.inv")]),
    "pyopencl": ("https://documen.tician.de/pyopencl/", [
        os.path.join(_HERE, "_inventories", "pyopencl.inv"),
        "/usr/share/doc/python-pyopencl-doc/html/objects.inv"]),
    "mpi4py": ("https://mpi4py.readthedocs.io/en/stable/", [
        os.path.join(_HERE, "_inventories", "mpi4py.inv"),
        "/usr/share/doc/python-mpi4py-doc/html/objects.inv"]),
}
intersphinx_mapping = {}
for _name, (_url, _paths) in _INVENTORY_CANDIDATES.items():
    _found = [p for p in _paths if os.path.isfile(p)]
    if _found:
        intersphinx_mapping[_name] = (_url, _found[0])
intersphinx_disabled_reftypes = ["std:doc"]

# }}}

nitpicky = False
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = "pytato_like"
