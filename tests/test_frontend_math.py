"""Elementwise math functions, where/maximum/minimum, comparisons and
logical functions against eager NumPy (values and result dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_DTYPES

import pytato_like as pt
from pytato_like.diagnostic import DTypeError
from pytato_like.testing import assert_matches_numpy, random_input

# log/sqrt/arcsin of out-of-domain data give NaN in both evaluations
pytestmark = pytest.mark.filterwarnings(
    "ignore:(divide by zero|invalid value|overflow):RuntimeWarning")

UNARY_FUNCTIONS = ["abs", "sqrt", "exp", "log", "log10", "sin", "cos", "tan",
                   "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "conj",
                   "real", "imag", "isnan"]
MATH_DTYPES = ["float32", "float64", "complex64", "complex128", "int8",
               "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", MATH_DTYPES)
@pytest.mark.parametrize("name", UNARY_FUNCTIONS)
def test_unary_function_matches_numpy(name, dtype, rng):
    a = random_input(rng, (3, 4), dtype)
    np_fn = getattr(np, name)
    try:
        expected = np_fn(a)
    except TypeError:
        x = pt.make_placeholder("x", a.shape, a.dtype)
        with pytest.raises(DTypeError, match=str(a.dtype)):
            getattr(pt, name)(x)
        return
    if expected.dtype == np.float16:
        _assert_float16_refused(lambda x: getattr(pt, name)(x), a)
        return
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x), a)


def _assert_float16_refused(build, *arrays):
    """NumPy computes math on int8/uint8/bool in float16, which no target
    supports: the operation is refused when the DAG is built."""
    placeholders = [pt.make_placeholder(f"x{i}", a.shape, a.dtype)
                    for i, a in enumerate(arrays)]
    with pytest.raises(DTypeError, match="float16"):
        build(*placeholders)


@pytest.mark.parametrize("name", UNARY_FUNCTIONS)
def test_unary_function_of_scalar_is_numpys_value(name):
    np.testing.assert_allclose(getattr(pt, name)(0.5), getattr(np, name)(0.5))


@pytest.mark.parametrize("name", ["sqrt", "log", "log10", "arcsin", "arccos"])
def test_out_of_domain_values_give_nan_like_numpy(name):
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x),
                         np.array([-1.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan]))


def test_isnan_on_special_values():
    assert_matches_numpy(lambda xp, x: xp.isnan(x),
                         np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"),
                                    ("float32", "int64"), ("int8", "int8"),
                                    ("int32", "float32"), ("float32", "float64")],
                         ids="-".join)
def test_arctan2_matches_numpy(dtypes, rng):
    a = random_input(rng, (3, 4), dtypes[0])
    b = random_input(rng, (4,), dtypes[1])
    if np.arctan2(a, b).dtype == np.float16:
        _assert_float16_refused(pt.arctan2, a, b)
        return
    assert_matches_numpy(lambda xp, x, y: xp.arctan2(x, y), a, b)
    assert_matches_numpy(lambda xp, x, y: xp.arctan2(y, x), a, b)


def test_arctan2_signed_zeros_and_quadrants():
    a = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 1.0, -1.0])
    b = np.array([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, -1.0, -1.0])
    assert_matches_numpy(lambda xp, x, y: xp.arctan2(x, y), a, b)


# {{{ maximum / minimum

@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"),
                                    ("int8", "uint8"), ("int32", "int32"),
                                    ("float32", "int64"), ("bool", "bool"),
                                    ("uint32", "uint32")],
                         ids="-".join)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_match_numpy(name, dtypes, rng):
    a = random_input(rng, (3, 4), dtypes[0])
    b = random_input(rng, (3, 1), dtypes[1])
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(x, y), a, b)
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(y, x), a, b)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan_from_either_side(name):
    a = np.array([np.nan, 1.0, np.nan, 2.0, np.inf, -np.inf])
    b = np.array([1.0, np.nan, np.nan, 3.0, np.nan, 0.0])
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(x, y), a, b)
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(y, x), a, b)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("scalar", [0, 0.5, np.float32(0.5), -2])
def test_maximum_minimum_with_scalar(name, scalar, rng):
    a = random_input(rng, (5,), "float32")
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, scalar), a)
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(scalar, x), a)

# }}}


# {{{ where

@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "int8"),
                                    ("int8", "uint8"), ("bool", "int32"),
                                    ("complex64", "float32")],
                         ids="-".join)
def test_where_broadcasts_and_promotes_like_numpy(dtypes, rng):
    cond = random_input(rng, (3, 1), "bool")
    a = random_input(rng, (4,), dtypes[0])
    b = random_input(rng, (3, 4), dtypes[1])
    assert_matches_numpy(lambda xp, c, x, y: xp.where(c, x, y), cond, a, b)


@pytest.mark.parametrize("scalars", [(1.5, 0), (0, 1), (np.float32(1), 2.0),
                                     (True, False)], ids=repr)
def test_where_with_scalar_branches(scalars, rng):
    cond = random_input(rng, (2, 3), "bool")
    a = random_input(rng, (2, 3), "float32")
    assert_matches_numpy(lambda xp, c: xp.where(c, *scalars), cond)
    assert_matches_numpy(lambda xp, c, x: xp.where(c, x, scalars[0]), cond, a)
    assert_matches_numpy(lambda xp, c, x: xp.where(c, scalars[1], x), cond, a)


def test_where_with_nonboolean_condition_uses_truthiness(rng):
    cond = np.array([0, 2, -1, 0], np.int32)
    a = random_input(rng, (4,), "float64")
    assert_matches_numpy(lambda xp, c, x: xp.where(c, x, -x), cond, a)

# }}}


# {{{ comparison and logical functions

COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater",
               "greater_equal"]


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "int8"),
                                    ("int8", "uint8"), ("bool", "bool"),
                                    ("uint32", "int64"), ("complex64", "complex64")],
                         ids="-".join)
@pytest.mark.parametrize("name", COMPARISONS)
def test_comparison_function_matches_numpy(name, dtypes, rng):
    a = random_input(rng, (3, 4), dtypes[0])
    b = random_input(rng, (4,), dtypes[1])
    b[0] = a[0, 0]  # at least one tie
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(x, y), a, b)


@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons_with_nan(name):
    a = np.array([np.nan, 1.0, np.nan])
    b = np.array([1.0, np.nan, np.nan])
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(x, y), a, b)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", ["logical_and", "logical_or"])
def test_logical_binary_functions_match_numpy(name, dtype, rng):
    a = random_input(rng, (3, 4), dtype)
    b = random_input(rng, (4,), "bool")
    a[0, 0] = 0
    assert_matches_numpy(lambda xp, x, y: getattr(xp, name)(x, y), a, b)
    assert_matches_numpy(lambda xp, x: getattr(xp, name)(x, 0), a)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_logical_not_matches_numpy(dtype, rng):
    a = random_input(rng, (3, 4), dtype)
    a[0, 0] = 0
    assert_matches_numpy(lambda xp, x: xp.logical_not(x), a)

# }}}


def test_functions_accept_numpy_arrays_and_lists(rng):
    a = random_input(rng, (3,), "float64")
    c = np.array([1.0, -2.0, 3.0])
    assert_matches_numpy(lambda xp, x: xp.maximum(x, c), a)
    assert_matches_numpy(lambda xp, x: xp.arctan2([1.0, 2.0, 3.0], x), a)

# vim: foldmethod=marker
