"""Register-blocked products on the loopy target: matmul-like reductions
over 2-d output groups run with a tile of outputs per work-item
(:func:`pytato_like.target.loopy.schedule.parallelize`); values as NumPy's
at sizes that do and do not divide the tile, for other reductions over
2-d groups too, and the DG einsum of a small operator on many elements."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy import schedule

# (rows, reduction, columns): tile-divisible, ragged in every axis, and
# below the size where blocking starts (plain schedule)
SHAPES = [(256, 64, 128), (203, 77, 157), (33, 5, 70), (7, 9, 11)]


def _uses_tiles(m, n):
    return (m >= schedule.TILE_ROWS * 8 and n >= schedule.TILE_COLS * 8)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_matmul_matches_numpy(queue, m, k, n, dtype):
    rng = np.random.default_rng(m + k + n)
    a = rng.integers(-5, 6, (m, k)).astype(dtype)
    b = rng.integers(-5, 6, (k, n)).astype(dtype)
    pa = pt.make_placeholder("a", (m, k), dtype)
    pb = pt.make_placeholder("b", (k, n), dtype)
    _, got = pt.generate_loopy(pa @ pb)(queue, a=a, b=b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    # small integers: every order of summation is exact
    np.testing.assert_array_equal(got, a @ b)


def test_tiles_are_applied_to_large_products(queue):
    """The kernel of a 256x128 product carries the ilp tile inames (the
    test above would pass without blocking; this one would not)."""
    m, k, n = 256, 64, 128
    assert _uses_tiles(m, n)
    pa = pt.make_placeholder("a", (m, k), np.float64)
    pb = pt.make_placeholder("b", (k, n), np.float64)
    prg = pt.generate_loopy(pa @ pb)
    source = prg.source if isinstance(prg.source, str) else prg.get_source()
    accumulators = schedule.TILE_ROWS * schedule.TILE_COLS
    assert f"[{accumulators - 1}]" in source


@pytest.mark.parametrize("reduce", ["sum", "amax", "prod"])
def test_other_reductions_over_2d_groups(queue, reduce):
    x = np.random.default_rng(3).random((70, 13, 97)) + 0.5
    x[5, 3, 7] = np.nan
    p = pt.make_placeholder("x", x.shape, np.float64)
    _, got = pt.generate_loopy(getattr(pt, reduce)(p, axis=1))(queue, x=x)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, getattr(np, reduce)(x, axis=1),
                               rtol=1e-13)
    assert np.isnan(got[5, 7]) and np.isnan(getattr(np, reduce)(x, axis=1)[5, 7])


def test_matmul_chain_and_transposed_operand(queue):
    rng = np.random.default_rng(1)
    a, b = rng.random((130, 90)), rng.random((130, 90))
    pa = pt.make_placeholder("a", a.shape, np.float64)
    pb = pt.make_placeholder("b", b.shape, np.float64)
    expr = (pa @ pb.T) @ pa + 1.0
    _, got = pt.generate_loopy(expr)(queue, a=a, b=b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, (a @ b.T) @ a + 1.0, rtol=1e-12)


def test_dg_einsum_matches_numpy(queue):
    rng = np.random.default_rng(2)
    n_el, n_dof = 1001, 35
    d, u = rng.random((n_dof, n_dof)), rng.random((n_el, n_dof))
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    expr = pu + 0.1 * pt.einsum("ij,ej->ei", pd, pu)
    _, got = pt.generate_loopy(expr)(queue, d=d, u=u)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, u + 0.1 * np.einsum("ij,ej->ei", d, u),
                               rtol=1e-12)
