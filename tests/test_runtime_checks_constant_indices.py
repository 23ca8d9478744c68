"""Gathers by index arrays known when the program is built (NumPy data
wrapped in the DAG, as a mesh's connectivity is) are checked once on the
host: in range, the loopy program carries no per-call reduction over
them; out of range, the call still raises NumPy's error, naming the bad
index and the axis length."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def _gather(idx: np.ndarray):
    x = pt.make_placeholder("x", (10,), np.float64)
    return x[pt.make_data_wrapper(idx)] * 2


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_in_range_constant_indices_add_no_check(queue, dtype):
    idx = np.array([0, 9, 3, 3, 1], dtype=dtype)
    idx[1] = -10                    # the smallest valid negative index
    x = np.arange(10.0)
    prg = pt.generate_loopy(_gather(idx))
    assert prg.checks == []
    _, (out,) = prg(queue, x=x)
    np.testing.assert_array_equal(np.asarray(out), x[idx] * 2)


def test_out_of_range_constant_indices_still_raise(queue):
    idx = np.array([0, 10, 3], dtype=np.int64)
    x = np.arange(10.0)
    with pytest.raises(IndexError):
        x[idx]                      # NumPy's verdict
    prg = pt.generate_loopy(_gather(idx))
    assert [c.kind for c in prg.checks] == ["index"]
    with pytest.raises(diagnostic.IndexOutOfBoundsError,
                       match=r"index 10 .* size 10"):
        prg(queue, x=x)


def test_placeholder_indices_keep_their_check(queue):
    x = pt.make_placeholder("x", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.int64)
    prg = pt.generate_loopy(x[i])
    assert [c.kind for c in prg.checks] == ["index"]
    with pytest.raises(diagnostic.IndexOutOfBoundsError, match="-11"):
        prg(queue, x=np.arange(10.0), i=np.array([0, -11, 2]))
