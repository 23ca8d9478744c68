"""Large full reductions split into parallel stages, and single-precision
sums accumulated in double: values as NumPy's, accuracy at least NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.transform.split_reductions import (
    SPLIT_THRESHOLD,
    split_full_reductions,
)

SIZES = [SPLIT_THRESHOLD - 1, SPLIT_THRESHOLD, 3 * SPLIT_THRESHOLD + 7,
         1_000_003]


def _reductions(p):
    return {"sum": pt.sum(p), "prod": pt.prod(p * 0 + 1), "max": pt.amax(p),
            "min": pt.amin(p), "any": pt.any(p > 3.5), "all": pt.all(p < 10),
            "mean": pt.mean(p)}


def _reference(x):
    return {"sum": x.sum(), "prod": np.prod(x * 0 + 1), "max": x.max(),
            "min": x.min(), "any": (x > 3.5).any(), "all": (x < 10).all(),
            "mean": x.mean()}


def _close(got, ref, x):
    # float sums: within a few rounding errors of the magnitudes summed
    if np.issubdtype(np.asarray(ref).dtype, np.floating):
        scale = np.abs(x).astype(np.float64).sum() + 1
        tol = 50 * np.finfo(np.asarray(ref).dtype).eps * scale
        assert abs(float(got) - float(ref)) <= tol, (got, ref)
    else:
        assert got == ref, (got, ref)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int8])
def test_full_reductions_match_numpy(queue, n, dtype):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(dtype)
    p = pt.make_placeholder("x", (n,), dtype)
    outputs = _reductions(p)
    prg = pt.generate_loopy(outputs)
    _, got = prg(queue, x=x)
    ref = _reference(x)
    for name in ref:
        assert got[name].dtype == np.asarray(ref[name]).dtype, name
        _close(got[name], ref[name], x)
    # split or not, as the threshold says
    n_launch_split = len(prg.plan.launches)
    small = pt.generate_loopy(pt.sum(pt.make_placeholder("y", (10,), dtype)))
    if n >= SPLIT_THRESHOLD:
        assert n_launch_split > len(small.plan.launches)


def test_multidimensional_and_strided_full_reductions(queue):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 217))
    p = pt.make_placeholder("x", x.shape, np.float64)
    outputs = {"sum": pt.sum(p), "tsum": pt.sum(p.T[::2, 1:]),
               "max": pt.amax(p * p), "sq": pt.sum(pt.sin(p) ** 2)}
    _, got = pt.generate_loopy(outputs)(queue, x=x)
    np.testing.assert_allclose(got["sum"], x.sum(), rtol=1e-11)
    np.testing.assert_allclose(got["tsum"], x.T[::2, 1:].sum(), rtol=1e-11)
    np.testing.assert_allclose(got["max"], (x * x).max(), rtol=0)
    np.testing.assert_allclose(got["sq"], (np.sin(x) ** 2).sum(), rtol=1e-11)


def test_nan_propagates_through_split_max_and_sum(queue):
    x = np.random.default_rng(4).standard_normal(200_001)
    x[123_457] = np.nan
    p = pt.make_placeholder("x", x.shape, np.float64)
    _, got = pt.generate_loopy({"max": pt.amax(p), "min": pt.amin(p),
                                "sum": pt.sum(p)})(queue, x=x)
    assert np.isnan(got["max"]) and np.isnan(got["min"]) and np.isnan(got["sum"])


def test_float32_sum_is_as_accurate_as_numpys(queue):
    # the reported case: a float32 sum of 10^5 values accumulated in order
    # had relative error 1.4e-4 where NumPy's pairwise sum has ~1e-7
    rng = np.random.default_rng(0)
    for x in (rng.random(10**5).astype(np.float32),
              (rng.standard_normal(10**5) + 0.1).astype(np.float32)):
        exact = x.astype(np.float64).sum()
        p = pt.make_placeholder("x", x.shape, np.float32)
        _, (got,) = pt.generate_loopy(pt.sum(p))(queue, x=x)
        assert got.dtype == np.float32
        ours = abs(float(got) - exact) / abs(exact)
        numpys = abs(float(x.sum()) - exact) / abs(exact)
        assert ours <= max(10 * numpys, np.finfo(np.float32).eps), (ours, numpys)


def test_split_dag_evaluates_like_the_original_on_the_numpy_target(deep_chain):
    # the rewrite is a DAG transform: its result, run by the NumPy target,
    # equals the original; a 100 000-deep chain beside it is copied
    # without recursion
    from pytato_like._traversal import topological_order
    x, y = deep_chain
    big = pt.make_placeholder("big", (3 * SPLIT_THRESHOLD + 5,), np.float64)
    outputs = {"s": pt.sum(big * 2), "m": pt.amax(big), "deep": y}
    order = topological_order(list(outputs.values()))
    split = split_full_reductions(outputs, order)
    assert split is not outputs
    assert split["s"] != outputs["s"] and split["deep"] is y
    rng = np.random.default_rng(5)
    inputs = {"big": rng.standard_normal(big.shape), "x": np.arange(3.0)}
    ref = pt.generate_numpy(outputs)(**inputs)
    got = pt.generate_numpy(split)(**inputs)
    np.testing.assert_allclose(got["s"], ref["s"], rtol=1e-12)
    assert got["m"] == ref["m"]
    np.testing.assert_array_equal(got["deep"], ref["deep"])
    # nothing to split: the same outputs back
    small = {"s": pt.sum(x)}
    assert split_full_reductions(small, topological_order([small["s"]])) is small
