"""Array properties and methods against NumPy: shape, dtype, ndim, size,
len, T, real, imag, conj, astype, and inputs (placeholders, data wrappers,
size parameters)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_DTYPES

import pytato_like as pt
from pytato_like.testing import assert_matches_numpy, assert_results_close, random_input


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4)], ids=str)
def test_metadata_matches_numpy(shape):
    a = np.zeros(shape, np.int16)
    x = pt.make_placeholder("x", shape, np.int16)
    assert x.shape == a.shape
    assert x.ndim == a.ndim
    assert x.size == a.size
    assert x.dtype == a.dtype
    if shape:
        assert len(x) == len(a)
    y = (x + 1.5).T
    assert (y.shape, y.dtype) == ((a + 1.5).T.shape, (a + 1.5).dtype)


def test_placeholder_default_dtype_is_float64():
    assert pt.make_placeholder("x", (2,)).dtype == np.float64


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_real_imag_conj_properties_match_numpy(dtype, rng):
    a = random_input(rng, (2, 3), dtype)
    assert_matches_numpy(lambda xp, x: x.real, a)
    assert_matches_numpy(lambda xp, x: x.imag + 0 * x.real, a)
    assert_matches_numpy(lambda xp, x: xp.conj(x), a)
    assert_matches_numpy(lambda xp, x: abs(x), a)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_conj_methods_match_numpy(dtype, rng):
    # ndarray.conj() of booleans stays bool while np.conj() gives int8
    a = random_input(rng, (2, 3), dtype)
    assert_matches_numpy(lambda xp, x: x.conj(), a)
    assert_matches_numpy(lambda xp, x: x.conjugate(), a)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("to_dtype", ALL_DTYPES)
@pytest.mark.parametrize("from_dtype", ALL_DTYPES)
def test_astype_matches_numpy(from_dtype, to_dtype, rng):
    a = random_input(rng, (2, 3), from_dtype)
    if np.dtype(to_dtype).kind == "u" and a.dtype.kind in "fc":
        a = abs(a)  # negative floats to unsigned: undefined in C
    assert_matches_numpy(lambda xp, x: x.astype(to_dtype), a)


def test_astype_to_same_dtype_is_identity():
    x = pt.make_placeholder("x", (2,), np.float32)
    assert x.astype(np.float32) is x


def test_float_to_int_cast_truncates_towards_zero():
    assert_matches_numpy(lambda xp, x: x.astype(np.int32),
                         np.array([-2.7, -0.5, 0.5, 2.7, 1e3]))


def test_data_wrapper_takes_part_in_expressions(rng):
    data = random_input(rng, (3, 4), "float32")
    b = random_input(rng, (4,), "float32")
    assert_matches_numpy(lambda xp, x, y: xp.sin(x) * y + x.sum(axis=0), data, b,
                         as_data_wrappers=True)


def test_data_wrapper_with_name_and_shape():
    data = np.arange(6.0).reshape(2, 3)
    dw = pt.make_data_wrapper(data, name="table")
    assert dw.name == "table"
    assert dw.shape == (2, 3)
    assert dw.dtype == np.float64
    out = pt.generate_numpy(dw * 2)()
    np.testing.assert_array_equal(out, data * 2)


def test_size_param_in_shape_is_inferred_from_input():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3), np.float64)
    assert x.shape[0] is n
    result = pt.sum(x * 2, axis=0) + x[0]
    for rows in (1, 4):
        a = np.arange(rows * 3.0).reshape(rows, 3)
        assert_results_close(pt.generate_numpy(result)(x=a),
                             np.sum(a * 2, axis=0) + a[0])


def test_size_param_passed_explicitly_and_used_in_arithmetic():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.int64)
    result = pt.make_dict_of_named_arrays({"scaled": x * n, "n": n + 0})
    out = pt.generate_numpy(result)(x=np.arange(5), n=5)
    np.testing.assert_array_equal(out["scaled"], np.arange(5) * 5)
    assert out["n"] == 5


def test_symbolic_size_expression_in_shape():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (2 * n + 1,), np.float64)
    assert x.size is not None
    a = np.arange(7.0)
    out = pt.generate_numpy(pt.sum(x[:] * n, axis=0) + x[0])(x=a, n=3)
    np.testing.assert_array_equal(out, np.sum(a * 3) + a[0])
