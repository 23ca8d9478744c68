"""Array creation against NumPy: zeros, ones, full, eye, arange and the
``*_like`` variants (values, shapes, dtypes)."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import DTypeError
from pytato_like.testing import assert_results_close


def _evaluate(result, **inputs):
    return pt.generate_numpy(result)(**inputs)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), 4, (0, 2)], ids=str)
@pytest.mark.parametrize("dtype", [None, "float32", "int8", "bool", "complex64"])
@pytest.mark.parametrize("name", ["zeros", "ones"])
def test_zeros_ones_match_numpy(name, shape, dtype):
    kwargs = {} if dtype is None else {"dtype": dtype}
    assert_results_close(_evaluate(getattr(pt, name)(shape, **kwargs)),
                         getattr(np, name)(shape, **kwargs))


@pytest.mark.parametrize("fill_value, dtype", [
    (3, None), (2.5, None), (True, None), (1j, None), (np.float32(1.5), None),
    (7, "float32"), (1.5, "int32"), (0, "bool"), (-1, "int8"), (255, "uint8")],
    ids=str)
def test_full_matches_numpy(fill_value, dtype):
    assert_results_close(_evaluate(pt.full((2, 3), fill_value, dtype=dtype)),
                         np.full((2, 3), fill_value, dtype=dtype))


def test_full_with_out_of_range_value_raises():
    with pytest.raises(DTypeError, match="300.*int8"):
        pt.full((2,), 300, dtype=np.int8)


@pytest.mark.parametrize("name, args", [
    ("zeros_like", ()), ("ones_like", ()), ("full_like", (4,)),
    ("full_like", (0.5,)), ("zeros_like", ("int8",)), ("ones_like", ("bool",)),
    ("full_like", (2, "float32"))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128"])
def test_like_functions_match_numpy(name, args, dtype):
    a = np.zeros((2, 3), dtype)
    x = pt.make_placeholder("x", a.shape, a.dtype)
    assert_results_close(_evaluate(getattr(pt, name)(x, *args)),
                         getattr(np, name)(a, *args))


@pytest.mark.parametrize("args", [(3,), (3, 5), (4, 2), (3, 4, 1), (3, 4, -2),
                                  (3, 3, 5), (0,), (2, None, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_eye_matches_numpy(args, dtype):
    assert_results_close(_evaluate(pt.eye(*args, dtype=dtype)),
                         np.eye(*args, dtype=dtype))


ARANGE_ARGS = [(5,), (0,), (-3,), (2, 7), (7, 2), (1, 10, 3), (10, 1, -3),
               (5, -5, -1), (0.0, 1.0, 0.1), (1.0, 0.0, -0.25), (0.5, 3),
               (2.5,), (0, 10, 2.5), (-1.5, 1.5, 0.5), (1.0, 2.0, 0.1),
               (3, 1.0, -0.3), (np.int8(3),),
               (np.float32(0.5), np.float32(2.0), np.float32(0.5))]


@pytest.mark.parametrize("args", ARANGE_ARGS, ids=str)
def test_arange_matches_numpy(args):
    # bit for bit: NumPy fills entry i as start + i * ((start + step) - start)
    assert_results_close(_evaluate(pt.arange(*args)), np.arange(*args),
                         rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int64", "float64"])
def test_arange_with_dtype_matches_numpy(dtype):
    # for integer dtypes NumPy truncates start and start + step first:
    # arange(0.0, 2.0, 0.25, dtype=int8) is all zeros
    for args in [(1, 10, 2), (0.0, 2.0, 0.25), (1.0, 3.0, 0.1), (-1.5, 2)]:
        assert_results_close(_evaluate(pt.arange(*args, dtype=dtype)),
                             np.arange(*args, dtype=dtype), rtol=0, atol=0)


def test_arange_with_zero_step_raises():
    with pytest.raises(DTypeError, match="step"):
        pt.arange(0, 5, 0)


def test_created_arrays_combine_with_inputs(rng):
    a = rng.standard_normal((3, 3))
    x = pt.make_placeholder("x", a.shape, a.dtype)
    result = x @ pt.eye(3) + pt.arange(3) * pt.ones((3, 1)) - pt.full_like(x, 2)
    assert_results_close(_evaluate(result, x=a),
                         a @ np.eye(3) + np.arange(3) * np.ones((3, 1))
                         - np.full_like(a, 2))
