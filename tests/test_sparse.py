"""CSR sparse matrices times dense arrays, on both targets, against
scipy.sparse and a dense NumPy product."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sps

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.sparse import CSRMatmul, CSRMatrix, make_csr_matrix, sparse_matmul


def _random_csr(rng, nrows, ncols, density, *, empty_rows=(), dtype=np.float64,
                index_dtype=np.int32):
    dense = rng.standard_normal((nrows, ncols)).astype(dtype)
    dense[rng.random((nrows, ncols)) > density] = 0
    for r in empty_rows:
        dense[r] = 0
    mat = sps.csr_array(dense)
    mat.indices = mat.indices.astype(index_dtype)
    mat.indptr = mat.indptr.astype(index_dtype)
    return mat, dense


def _lazy(mat, *, as_placeholders=False):
    if as_placeholders:
        vals = pt.make_placeholder("vals", mat.data.shape, mat.data.dtype)
        cols = pt.make_placeholder("cols", mat.indices.shape, mat.indices.dtype)
        starts = pt.make_placeholder("starts", mat.indptr.shape,
                                     mat.indptr.dtype)
    else:
        vals = pt.make_data_wrapper(mat.data)
        cols = pt.make_data_wrapper(mat.indices)
        starts = pt.make_data_wrapper(mat.indptr)
    return make_csr_matrix(mat.shape, vals, cols, starts)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("operand_shape", [(), (3,)])
def test_products_match_scipy_and_dense_numpy_on_both_targets(
        queue, index_dtype, operand_shape):
    rng = np.random.default_rng(11)
    mat, dense = _random_csr(rng, 150, 90, 0.1, empty_rows=(0, 7, 149),
                             index_dtype=index_dtype)
    x_np = rng.standard_normal((90, *operand_shape))
    x = pt.make_placeholder("x", x_np.shape, np.float64)
    a = _lazy(mat, as_placeholders=True)
    result = pt.make_dict_of_named_arrays({
        "prod": a @ x,                       # the operator form
        "fused": 2 * sparse_matmul(a, x) + 1,
        "twice": a @ (a.shape[1] * 0 + x),   # an operand computed first
    })
    assert result["prod"].shape == (150, *operand_shape)
    inputs = {"x": x_np, "vals": mat.data, "cols": mat.indices,
              "starts": mat.indptr}
    scipy_ref = mat @ x_np
    np.testing.assert_allclose(scipy_ref, dense @ x_np, rtol=1e-12, atol=1e-12)

    by_numpy = pt.generate_numpy(result)(**inputs)
    _, by_loopy = pt.generate_loopy(result)(queue, **inputs)
    for got in (by_numpy, by_loopy):
        np.testing.assert_allclose(got["prod"], scipy_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["fused"], 2 * scipy_ref + 1, rtol=1e-12)
        np.testing.assert_allclose(got["twice"], scipy_ref, rtol=1e-12,
                                   atol=1e-12)
        # empty rows give zeros
        assert not got["prod"][[0, 7, 149]].any()


def test_dtypes_promote_as_numpy(queue):
    rng = np.random.default_rng(2)
    mat, dense = _random_csr(rng, 20, 10, 0.3, dtype=np.float32)
    x_np = rng.integers(-5, 5, 10).astype(np.int64)
    a = _lazy(mat)
    prod = a @ pt.make_data_wrapper(x_np)
    assert prod.dtype == np.result_type(np.float32, np.int64) == np.float64
    _, (got,) = pt.generate_loopy(prod)(queue)
    np.testing.assert_allclose(got, dense.astype(np.float64) @ x_np, rtol=1e-6)
    np.testing.assert_allclose(pt.generate_numpy(prod)(), got, rtol=1e-6)


def test_all_empty_and_zero_row_matrices(queue):
    vals = pt.make_data_wrapper(np.zeros(0))
    cols = pt.make_data_wrapper(np.zeros(0, np.int32))
    starts = pt.make_data_wrapper(np.zeros(6, np.int32))
    a = make_csr_matrix((5, 4), vals, cols, starts)
    x = pt.make_data_wrapper(np.arange(4.0))
    _, (got,) = pt.generate_loopy(a @ x)(queue)
    np.testing.assert_array_equal(got, np.zeros(5))
    np.testing.assert_array_equal(pt.generate_numpy(a @ x)(), np.zeros(5))


def test_bad_matrices_and_operands_raise_typed_errors():
    vals = pt.make_placeholder("v", (4,), np.float64)
    cols = pt.make_placeholder("c", (4,), np.int32)
    starts = pt.make_placeholder("s", (3,), np.int32)
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"shape \(3,\)"):
        make_csr_matrix((3, 5), vals, cols, starts)      # needs 4 starts
    with pytest.raises(diagnostic.DTypeError, match="float64"):
        make_csr_matrix((2, 5), vals, pt.make_placeholder("c2", (4,)), starts)
    with pytest.raises(diagnostic.ShapeMismatchError, match="pair"):
        make_csr_matrix((2, -1), vals, cols, starts)
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"\(4,\)"):
        make_csr_matrix((2, 5), vals, pt.make_placeholder("c3", (3,), np.int32),
                        starts)
    a = make_csr_matrix((2, 5), vals, cols, starts)
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"\(2, 5\)"):
        a @ pt.make_placeholder("x", (4,))
    with pytest.raises(diagnostic.ShapeMismatchError):
        a @ pt.make_placeholder("x3", (5, 2, 2))
    with pytest.raises(diagnostic.NotAnArrayError):
        sparse_matmul(a, np.ones(5))


def test_structure_equality_pickling_and_mappers():
    rng = np.random.default_rng(5)
    mat, dense = _random_csr(rng, 12, 8, 0.4)
    a = _lazy(mat, as_placeholders=True)
    x = pt.make_placeholder("x", (8,), np.float64)
    p1, p2 = a @ x, a @ x
    assert isinstance(p1, CSRMatmul) and p1 is not p2 and p1 == p2
    assert isinstance(p1.matrix, CSRMatrix) and p1.matrix == a
    assert p1 != a @ (x + 1)
    back = pickle.loads(pickle.dumps(p1 + 1))
    assert back == p1 + 1
    # generic mappers see the CSR arrays as children
    deps = pt.transform.InputGatherer()(p1)
    assert {d.name for d in deps} == {"vals", "cols", "starts", "x"}

    class Doubler(pt.transform.CopyMapper):
        def map_placeholder(self, expr):
            return 2 * expr if expr.name in ("x", "vals") else expr

    doubled = Doubler()(p1)
    xv = rng.standard_normal(8)
    inputs = {"x": xv, "vals": mat.data, "cols": mat.indices,
              "starts": mat.indptr}
    np.testing.assert_allclose(pt.generate_numpy(doubled)(**inputs),
                               4 * (dense @ xv), rtol=1e-12)
    src = pt.get_dot_graph(p1)
    assert "CSRMatmul" in src and "row_starts" in src


def test_deep_dag_through_a_sparse_product(deep_chain):
    x, y = deep_chain           # shape (3,), 100 000 updates deep
    vals = pt.make_placeholder("vals", (3,), np.float64)
    cols = pt.make_placeholder("cols", (3,), np.int32)
    starts = pt.make_placeholder("starts", (4,), np.int32)
    out = make_csr_matrix((3, 3), vals, cols, starts) @ y
    deeper = out
    for _ in range(1000):
        deeper = deeper + 0.0
    xv = np.array([1.0, 2.0, 3.0])
    chain = xv
    for _ in range(100_000):
        chain = 0.5 * chain + 1.0
    ref = np.array([1.0 * chain[2], 2.0 * chain[0], 3.0 * chain[1]])
    inputs = {"x": xv, "vals": np.array([1.0, 2.0, 3.0]),
              "cols": np.array([2, 0, 1], np.int32),
              "starts": np.array([0, 1, 2, 3], np.int32)}
    np.testing.assert_allclose(pt.generate_numpy(deeper)(**inputs), ref)
    assert pickle.loads(pickle.dumps(deeper)) == deeper
    assert pt.transform.CopyMapper()(deeper) is deeper


def test_chain_of_100_000_sparse_products_through_every_mapper():
    """``y <- A @ y + 1`` 50 000 times: depth 100 000, half of it CSR
    products, so each mapper's CSR method runs at full depth."""
    from _every_mapper import run_every_mapper
    vals = pt.make_placeholder("vals", (3,), np.float64)
    cols = pt.make_placeholder("cols", (3,), np.int32)
    starts = pt.make_placeholder("starts", (4,), np.int32)
    a = make_csr_matrix((3, 3), vals, cols, starts)
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    steps = 50_000
    for _ in range(steps):
        y = a @ y + 1.0
    run_every_mapper(y, CSRMatmul, steps, {"x", "vals", "cols", "starts"})

    mat = sps.csr_array((np.array([0.5, -0.5, 0.25]),
                         np.array([2, 0, 1], np.int32),
                         np.array([0, 1, 2, 3], np.int32)), shape=(3, 3))
    ref = xv = np.array([1.0, 2.0, 3.0])
    for _ in range(steps):
        ref = mat @ ref + 1.0
    got = pt.generate_numpy(y)(x=xv, vals=mat.data, cols=mat.indices,
                               starts=mat.indptr)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_cost_model_stores_every_product(queue):
    rng = np.random.default_rng(9)
    mat, dense = _random_csr(rng, 30, 20, 0.2, empty_rows=(4,))
    a = _lazy(mat)
    x = pt.make_placeholder("x", (20, 2), np.float64)
    inner = a @ x                              # used once, elementwise
    out = 2 * inner + 1
    from pytato_like.transform.materialize_cost import decide_storage
    costs = decide_storage([out])
    assert costs[id(inner)].stored and costs[id(inner)].reason == "outlined"
    xv = rng.standard_normal((20, 2))
    _, (got,) = pt.generate_loopy(out)(queue, x=xv)
    np.testing.assert_allclose(got, 2 * (dense @ xv) + 1, rtol=1e-12)
    ascii_src = pt.get_ascii_graph(out, use_color=False)
    assert "CSRMatmul" in ascii_src
