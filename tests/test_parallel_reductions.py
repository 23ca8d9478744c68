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


@pytest.mark.parametrize("axis", [0, (0, 2)])
def test_reductions_to_few_values_over_some_axes(queue, axis):
    """Tall reductions with a few outputs are split too (more launches
    than the unsplit small case), with NumPy's values, NaN and dtypes."""
    rng = np.random.default_rng(7)
    shape = (SPLIT_THRESHOLD + 13, 3, 2) if axis == 0 else (20_011, 3, 5)
    x = rng.standard_normal(shape) + 0.5
    x[17, 1, 0] = np.nan
    p = pt.make_placeholder("x", shape, np.float64)
    outputs = {"sum": pt.sum(p, axis=axis), "max": pt.amax(p, axis=axis),
               "min": pt.amin(p, axis=axis),
               "prod": pt.prod(p * 0 + 1.0, axis=axis),
               "any": pt.any(p > 3.5, axis=axis),
               "all": pt.all(p < 10, axis=axis)}
    ref = {"sum": x.sum(axis=axis), "max": x.max(axis=axis),
           "min": x.min(axis=axis), "prod": np.prod(x * 0 + 1.0, axis=axis),
           "any": (x > 3.5).any(axis=axis), "all": (x < 10).all(axis=axis)}
    prg = pt.generate_loopy(outputs)
    _, got = prg(queue, x=x)
    for name, r in ref.items():
        assert got[name].dtype == r.dtype and got[name].shape == r.shape, name
        np.testing.assert_allclose(got[name], r, rtol=1e-11, err_msg=name)
    assert len(prg.plan.launches) > 1
    # the rewrite happened at the DAG level
    from pytato_like._traversal import topological_order
    one = {"s": outputs["sum"]}
    assert split_full_reductions(one, topological_order([one["s"]])) is not one


def test_float32_sum_over_an_axis_is_as_accurate_as_numpys(queue):
    rng = np.random.default_rng(8)
    x = rng.random((10**5, 2)).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    p = pt.make_placeholder("x", x.shape, np.float32)
    _, (got,) = pt.generate_loopy(pt.sum(p, axis=0))(queue, x=x)
    ours = np.abs(got.astype(np.float64) - exact) / exact
    numpys = np.abs(x.sum(axis=0).astype(np.float64) - exact) / exact
    assert (ours <= np.maximum(10 * numpys, np.finfo(np.float32).eps)).all()


def test_many_outputs_are_not_split():
    from pytato_like._traversal import topological_order
    p = pt.make_placeholder("x", (SPLIT_THRESHOLD, 64), np.float64)
    one = {"s": pt.sum(p, axis=0)}
    assert split_full_reductions(one, topological_order([one["s"]])) is one
