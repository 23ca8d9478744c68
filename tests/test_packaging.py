"""Packaging: the version source, the typed-package marker, typed errors for
malformed ``PYTATO_LIKE_*`` settings."""

from __future__ import annotations

import importlib.metadata
import pathlib

import pytest

import pytato_like as pt
from pytato_like._env import env_int
from pytato_like.diagnostic import ConfigurationError

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_one_version_source():
    from pytato_like.version import VERSION, __version__
    assert pt.__version__ == __version__
    assert ".".join(map(str, VERSION)) == __version__
    # the installed metadata is read from the same place (dynamic version)
    assert importlib.metadata.version("pytato_like") == __version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert __version__ not in pyproject


def test_py_typed_and_license_present():
    assert (ROOT / "pytato_like" / "py.typed").is_file()
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_license_is_an_spdx_expression():
    """The license as setuptools 77+ wants it (the table form and license
    classifiers are deprecated, to be refused from 2027-02-18): an SPDX
    expression in the installed metadata, the file shipped beside it."""
    meta = importlib.metadata.metadata("pytato_like")
    assert meta["License-Expression"] == "MIT"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    assert not [c for c in meta.get_all("Classifier") or []
                if c.startswith("License ::")]


@pytest.mark.parametrize("raw", ["abc", "4.5", "", "0", "-3"])
def test_env_int_malformed_raises_configuration_error(raw):
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_X"):
        env_int("PYTATO_LIKE_X", 7, environ={"PYTATO_LIKE_X": raw})


def test_env_int_values():
    assert env_int("PYTATO_LIKE_X", 7, environ={}) == 7
    assert env_int("PYTATO_LIKE_X", 7, environ={"PYTATO_LIKE_X": " 32 "}) == 32
    assert env_int("PYTATO_LIKE_X", 7, minimum=None,
                   environ={"PYTATO_LIKE_X": "-2"}) == -2


def test_cache_size_malformed_raises(monkeypatch):
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", "lots")
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_CACHE_SIZE"):
        cache.cache_size_limit()


def test_docs_link_numpy_loopy_pyopencl_mpi4py_offline():
    """The doc build (run with -W by make test) links to all four projects,
    each through an inventory read from disk, holding the objects our docs
    name."""
    import runpy

    from sphinx.util.inventory import InventoryFile

    conf = runpy.run_path(str(ROOT / "doc" / "conf.py"))
    mapping = conf["intersphinx_mapping"]
    assert set(mapping) >= {"numpy", "loopy", "pyopencl", "mpi4py"}
    expected = {"numpy": "numpy.ndarray", "loopy": "loopy.TranslationUnit",
                "pyopencl": "pyopencl.CommandQueue", "mpi4py": "mpi4py.MPI.Comm"}
    for name, (url, inventory) in mapping.items():
        assert url.startswith("https://")
        assert pathlib.Path(inventory).is_file(), inventory
        with open(inventory, "rb") as f:
            inv = InventoryFile.load(f, url, lambda base, uri: base + uri)
        if name in expected:
            assert any(expected[name] in objs for objs in inv.values()), name


def test_package_warnings_are_errors_in_the_suite():
    # setup.cfg's filterwarnings: a warning of ours fails the test that
    # triggers it (concatenate_calls' is one)
    import warnings

    from pytato_like.diagnostic import PytatoLikeWarning
    with pytest.raises(PytatoLikeWarning):
        warnings.warn("a warning of pytato_like", PytatoLikeWarning,
                      stacklevel=1)


def test_extras_install_what_they_name():
    import tomllib  # noqa: I001  (the suite runs on 3.11+)
    project = tomllib.loads(
        (pathlib.Path(__file__).resolve().parent.parent
         / "pyproject.toml").read_text()
    )["project"]
    extras = project["optional-dependencies"]
    assert extras["mpi"] == ["mpi4py"]                 # never PyPI's MPICH
    assert set(extras["mpich"]) == {"mpich", "mpi4py"}
    assert {"jupyterlab", "nbconvert", "ipykernel"} <= set(extras["notebook"])
    assert "scipy" in extras["docs"]                    # doc/sparse.rst
    assert extras["all"] == ["pytato_like[mpi,opencl,jax,notebook,docs]"]
    assert project["scripts"]["pytato-like-check-env"] == \
        "pytato_like.check_env:main"
