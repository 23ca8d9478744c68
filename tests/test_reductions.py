"""Reductions (sum, prod, amax, amin, any, all, mean and the Array methods)
against eager NumPy: axis None/int/tuple/negative, keepdims, accumulation
dtypes, NaN propagation, empty axes."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import AxisError, EmptyReductionError
from pytato_like.testing import assert_matches_numpy, random_input

AXES = [None, 0, 1, -1, -3, (0, 2), (2, 0), (-1, 1), (0, 1, 2), ()]
REDUCTIONS = ["sum", "prod", "amax", "amin", "any", "all", "mean"]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_over_axes_matches_numpy(name, axis, keepdims, rng):
    a = random_input(rng, (2, 3, 4), "float64")
    assert_matches_numpy(
        lambda xp, x: getattr(xp, name)(x, axis=axis, keepdims=keepdims), a)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "uint8",
                                   "uint32", "int64", "bool", "complex64"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_result_dtype_matches_numpy(name, dtype, rng):
    # e.g. sum of int8 accumulates in int64, of uint8 in uint64
    a = random_input(rng, (3, 4), dtype)
    if name == "prod" and np.dtype(dtype).kind in "iu":
        a = (a % 3).astype(dtype)  # keep products in range
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=1), a)
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x), a)


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool"])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_reduction_with_explicit_dtype(name, dtype, rng):
    a = random_input(rng, (3, 4), "int8")
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=0, dtype=dtype), a)


@pytest.mark.parametrize("name", ["amax", "amin", "sum", "prod", "mean"])
def test_nan_propagates_through_reductions(name):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0], [np.nan, np.nan, 0.0]])
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=1), a)
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=0), a)


def test_max_of_infinities():
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0]])
    assert_matches_numpy(lambda xp, x: xp.amax(x, axis=1), a)
    assert_matches_numpy(lambda xp, x: xp.amin(x, axis=1), a)


@pytest.mark.parametrize("name", ["sum", "prod", "any", "all"])
def test_reduction_over_empty_axis_gives_identity(name):
    a = np.zeros((3, 0))
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=1), a)
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x), a)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_max_min_over_nonempty_axis_of_empty_array(name):
    # reducing the non-empty axis is fine and gives an empty result
    a = np.zeros((3, 0))
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, axis=0), a)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_max_min_over_empty_axis_raises(name):
    x = pt.make_placeholder("x", (3, 0), np.float64)
    with pytest.raises(EmptyReductionError, match=r"\(3, 0\)"):
        getattr(pt, name)(x, axis=1)
    with pytest.raises(ValueError):
        getattr(np, name)(np.zeros((3, 0)), axis=1)


@pytest.mark.parametrize("axis", [3, -4, (0, 0), (1, -2)], ids=repr)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_bad_reduction_axis_raises(name, axis):
    x = pt.make_placeholder("x", (2, 3, 4), np.float64)
    with pytest.raises(AxisError, match=r"\(2, 3, 4\)|dimension 3"):
        getattr(pt, name)(x, axis=axis)


@pytest.mark.parametrize("method", ["sum", "prod", "max", "min", "any", "all",
                                    "mean"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)], ids=repr)
def test_reduction_methods_match_numpy(method, axis, rng):
    a = random_input(rng, (3, 4), "float32")
    assert_matches_numpy(lambda xp, x: getattr(x, method)(axis=axis), a)
    assert_matches_numpy(lambda xp, x: getattr(x, method)(axis=axis,
                                                         keepdims=True), a)


def test_reduction_of_zero_dimensional_array(rng):
    a = np.array(2.5)
    for name in REDUCTIONS:
        assert_matches_numpy(lambda xp, x, name=name: getattr(xp, name)(x), a)


def test_pytato_axes_keyword_is_accepted(rng):
    a = random_input(rng, (3, 4), "float64")
    x = pt.make_placeholder("x", a.shape, a.dtype)
    out = pt.generate_numpy(pt.sum(x, axes=(1,)))(x=a)
    np.testing.assert_allclose(out, a.sum(axis=1))


def test_reduction_of_broadcast_and_computed_operands(rng):
    a = random_input(rng, (3, 1), "float64")
    b = random_input(rng, (4,), "float64")
    assert_matches_numpy(lambda xp, x, y: xp.sum(x * y + 1, axis=0), a, b)
    assert_matches_numpy(lambda xp, x, y: xp.amax(xp.sin(x) - y, axis=(0, 1)), a, b)
    assert_matches_numpy(lambda xp, x, y: xp.sum(xp.sum(x * y, axis=1) ** 2), a, b)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_over_symbolic_axis(name, rng):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3), np.float64)
    result = pt.make_dict_of_named_arrays({
        "axis0": getattr(pt, name)(x, axis=0),
        "all": getattr(pt, name)(x)})
    for rows in (1, 5):
        a = random_input(rng, (rows, 3), "float64")
        out = pt.generate_numpy(result)(x=a)
        np.testing.assert_allclose(out["axis0"], getattr(np, name)(a, axis=0))
        np.testing.assert_allclose(out["all"], getattr(np, name)(a))
