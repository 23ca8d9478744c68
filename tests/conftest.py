"""Shared fixtures of the test suite: seeded random data and dtype lists."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

# The tests check compiled kernels against NumPy: a program's first call
# is compiled, not evaluated on the host while it compiles (what
# tests/test_host_first_call.py tests turns it back on).
os.environ.setdefault("PYTATO_LIKE_HOST_FIRST_CALL", "0")

#: Every dtype the front end is tested with.
ALL_DTYPES = ("float32", "float64", "int8", "int32", "int64", "uint8",
              "uint32", "complex64", "complex128", "bool")
REAL_FLOAT_DTYPES = ("float32", "float64")
INEXACT_DTYPES = ("float32", "float64", "complex64", "complex128")
INT_DTYPES = ("int8", "int32", "int64", "uint8", "uint32")
NUMERIC_DTYPES = tuple(d for d in ALL_DTYPES if d != "bool")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed, so every test sees the same
    data on every run."""
    return np.random.default_rng(1234)


#: Python's default recursion limit; deep-DAG tests must pass under it.
DEFAULT_RECURSION_LIMIT = 1000


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """Run every test at Python's default recursion limit. Hypothesis raises
    the limit while it runs a test and does not always restore it, which
    would let a later deep-DAG test pass with recursion the library must not
    use."""
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    yield
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)


@pytest.fixture(scope="module")
def queue():
    """A command queue on the default OpenCL device (PoCL here)."""
    cl = pytest.importorskip("pyopencl")
    return cl.CommandQueue(cl.create_some_context(interactive=False))


@pytest.fixture(scope="module")
def loopy_cache_dir(tmp_path_factory):
    """A private on-disk code cache for one test module (use with
    ``pytestmark = pytest.mark.usefixtures("loopy_cache_dir")``)."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("ptcache")
    mp.setenv("PYTATO_LIKE_CACHE_DIR", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def deep_chain():
    """``(x, y)``: ``y = 0.5*y + 1.0`` applied 100 000 times to the
    placeholder ``x`` of shape (3,) (200 000 nodes)."""
    import pytato_like as pt
    x = pt.make_placeholder("x", (3,))
    y = x
    for _ in range(100_000):
        y = 0.5 * y + 1.0
    return x, y
