"""Fact 8 of the drop-in issue: the dtypes pytato accepts. NumPy ``bool``
inputs and outputs on the loopy target (bytes on the device, bool when
returned), complex64 comparisons, and float16 (and object) refused at
construction with a typed error naming the dtype."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import DTypeError

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

B = np.array([True, False, True, True, False, False, True])
Z = (np.arange(7) + 1j * np.arange(7)[::-1]).astype(np.complex64)


def _bool_program():
    b = pt.make_placeholder("b", B.shape, np.bool_)
    x = pt.make_placeholder("x", B.shape, np.float64)
    return {"passed": b, "negated": pt.logical_not(b),
            "chosen": pt.where(b, x, -x), "positive": pt.greater(x, 0),
            "any": pt.any(b), "count": pt.sum(b)}


def _bool_reference(b, x):
    return {"passed": b, "negated": np.logical_not(b),
            "chosen": np.where(b, x, -x), "positive": x > 0,
            "any": np.any(b), "count": np.sum(b)}


def test_bool_inputs_and_outputs_on_the_host(queue):
    x = np.linspace(-1, 1, B.size)
    _evt, out = pt.generate_loopy(_bool_program())(queue, b=B, x=x)
    ref = _bool_reference(B, x)
    numpy_out = pt.generate_numpy(_bool_program())(b=B, x=x)
    for name, expected in ref.items():
        assert out[name].dtype == np.asarray(expected).dtype, name
        assert numpy_out[name].dtype == out[name].dtype, name
        np.testing.assert_array_equal(out[name], expected)


def test_bool_inputs_and_outputs_on_the_device(queue):
    x = np.linspace(-1, 1, B.size)
    b_dev = cla.to_device(queue, B)
    _evt, out = pt.generate_loopy(_bool_program())(
        queue, b=b_dev, x=cla.to_device(queue, x))
    ref = _bool_reference(B, x)
    for name in ("passed", "negated", "positive"):
        assert isinstance(out[name], cla.Array)
        assert out[name].dtype == np.bool_
        np.testing.assert_array_equal(out[name].get(), ref[name])


def test_bool_data_wrapper_round_trip(queue):
    w = pt.make_data_wrapper(B, name="mask")
    _evt, (out,) = pt.generate_loopy(pt.logical_or(w, w[::-1]))(queue)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, B | B[::-1])


@pytest.mark.parametrize("op", ["equal", "not_equal"])
def test_complex64_comparisons_match_numpy(queue, op):
    z = pt.make_placeholder("z", Z.shape, np.complex64)
    expr = getattr(pt, op)(z, z[::-1])
    expr_scalar = getattr(pt, op)(z, np.complex64(3 + 3j))
    expected = getattr(np, op)(Z, Z[::-1])
    expected_scalar = getattr(np, op)(Z, np.complex64(3 + 3j))
    assert expected.any() and not expected.all()  # both outcomes occur
    _evt, out = pt.generate_loopy({"a": expr, "s": expr_scalar})(queue, z=Z)
    np.testing.assert_array_equal(out["a"], expected)
    np.testing.assert_array_equal(out["s"], expected_scalar)
    ref = pt.generate_numpy({"a": expr, "s": expr_scalar})(z=Z)
    np.testing.assert_array_equal(ref["a"], expected)
    np.testing.assert_array_equal(ref["s"], expected_scalar)


def test_complex64_comparison_with_nan_matches_numpy(queue):
    values = np.array([np.nan + 1j, 1 + 1j, 1 + np.nan * 1j], np.complex64)
    z = pt.make_placeholder("z", values.shape, np.complex64)
    _evt, (out,) = pt.generate_loopy(pt.not_equal(z, z))(queue, z=values)
    np.testing.assert_array_equal(out, values != values)


@pytest.mark.parametrize("build", [
    lambda: pt.make_placeholder("h", (3,), np.float16),
    lambda: pt.make_data_wrapper(np.zeros(3, np.float16), name="h"),
    lambda: pt.make_placeholder("x", (3,), np.float32).astype(np.float16),
    lambda: pt.zeros((3,), np.float16),
    lambda: pt.full((3,), 1.0, np.float16),
    lambda: pt.arange(3, dtype=np.float16),
    lambda: pt.eye(3, dtype=np.float16),
    # NumPy's sqrt of int8 is float16
    lambda: pt.sqrt(pt.make_placeholder("i", (3,), np.int8)),
], ids=["placeholder", "data_wrapper", "astype", "zeros", "full", "arange",
        "eye", "sqrt_int8"])
def test_float16_is_refused_at_construction(build):
    with pytest.raises(DTypeError, match="float16"):
        build()


def test_object_and_extended_precision_are_refused():
    with pytest.raises(DTypeError, match="object"):
        pt.make_data_wrapper(np.array([1, "a"], dtype=object), name="o")
    with pytest.raises(DTypeError, match="float128|longdouble"):
        pt.make_placeholder("q", (2,), np.longdouble)


def test_refusal_names_the_placeholder():
    with pytest.raises(DTypeError, match="'h'"):
        pt.make_placeholder("h", (3,), np.float16)


def test_the_advice_in_the_error_works():
    i = pt.make_placeholder("i", (4,), np.int8)
    values = np.arange(4, dtype=np.int8)
    out = pt.generate_numpy(pt.sqrt(i.astype(np.float32)))(i=values)
    np.testing.assert_allclose(out, np.sqrt(values.astype(np.float32)))
