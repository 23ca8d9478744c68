"""uint64 gather indices on the loopy target (transform/signed_indices.py):
moved by a signed offset (a gather from a concatenation) and along an
axis whose length is a size parameter, against NumPy; out-of-range
entries still raise naming the uint64 value; the pass on a deep DAG."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import IndexOutOfBoundsError
from pytato_like.transform.signed_indices import store_unsigned_indices

pytest.importorskip("pyopencl")


def _host(ary):
    return ary.get() if hasattr(ary, "get") else np.asarray(ary)


A = np.arange(10.0)
B = np.arange(5.0) * 7
IDX = np.array([0, 3, 14, 9, 12], np.uint64)


def test_uint64_index_into_a_concatenation(queue):
    a = pt.make_placeholder("a", (10,), np.float64)
    b = pt.make_placeholder("b", (5,), np.float64)
    i = pt.make_placeholder("i", (5,), np.uint64)
    result = pt.concatenate([a, b])[i] + a[i % np.uint64(10)]
    _, (out,) = pt.generate_loopy(result)(queue, a=A, b=B, i=IDX)
    np.testing.assert_array_equal(
        _host(out), np.concatenate([A, B])[IDX] + A[IDX % np.uint64(10)])


def test_uint64_index_along_a_size_parameter_axis(queue):
    n = pt.make_size_param("n")
    s = pt.make_placeholder("s", (n,), np.float64)
    i = pt.make_placeholder("i", (5,), np.uint64)
    data = np.arange(20.0) ** 2
    _, (out,) = pt.generate_loopy(s[i])(queue, s=data, i=IDX)
    np.testing.assert_array_equal(_host(out), data[IDX])


def test_uint64_index_in_two_axes(queue):
    m = pt.make_placeholder("m", (4, 6), np.int32)
    i = pt.make_placeholder("i", (3,), np.uint64)
    j = pt.make_placeholder("j", (3,), np.uint64)
    data = np.arange(24, dtype=np.int32).reshape(4, 6)
    iv = np.array([3, 0, 2], np.uint64)
    jv = np.array([5, 1, 0], np.uint64)
    _, (out,) = pt.generate_loopy(m[i, j] + m[:, j][i])(queue, m=data, i=iv, j=jv)
    np.testing.assert_array_equal(_host(out), data[iv, jv] + data[:, jv][iv])


@pytest.mark.parametrize("bad", [10, 2**63])
def test_out_of_range_uint64_index_raises_as_numpy(queue, bad):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (2,), np.uint64)
    idx = np.array([1, bad], np.uint64)
    with pytest.raises(IndexError) as numpy_error:
        A[idx]
    # NumPy reads the index as int64: 2**63 is reported as -2**63
    (value,) = [w for w in str(numpy_error.value).split() if w.lstrip("-").isdigit()
                ][:1]
    with pytest.raises(IndexOutOfBoundsError, match=f"index {value} "):
        pt.generate_loopy(a[i])(queue, a=A, i=idx)


def test_uint64_index_wrapping_to_negative_counts_from_the_end(queue):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.uint64)
    idx = np.array([1, 2**64 - 1, 2**64 - 10], np.uint64)
    _, (out,) = pt.generate_loopy(a[i])(queue, a=A, i=idx)
    np.testing.assert_array_equal(_host(out), A[idx])
    np.testing.assert_array_equal(pt.generate_numpy(a[i])(a=A, i=idx), A[idx])


def test_pass_keeps_values_on_a_deep_dag(deep_chain):
    x, y = deep_chain
    i = pt.make_placeholder("i", (4,), np.uint64)
    outputs = {"out": pt.concatenate([y, x])[i]}
    from pytato_like._traversal import topological_order
    rewritten = store_unsigned_indices(outputs, topological_order(
        list(outputs.values())))
    assert rewritten is not outputs
    xv = np.array([1.0, -2.0, 3.5])
    iv = np.array([0, 4, 2, 5], np.uint64)
    expected = pt.generate_numpy(outputs["out"])(x=xv, i=iv)
    got = pt.generate_numpy(rewritten["out"])(x=xv, i=iv)
    np.testing.assert_array_equal(got, expected)
    yv = xv.copy()
    for _ in range(100_000):
        yv = 0.5 * yv + 1.0
    np.testing.assert_allclose(got, np.concatenate([yv, xv])[iv])
