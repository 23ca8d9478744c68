"""Hostile inputs on which the device must agree with NumPy: float to
integer casts, input names that are call options, sizes past 2^31, shapes
past what an int64 addresses."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic

INTEGER_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                 np.uint64, np.int64]


@pytest.mark.parametrize("length", [3, 4, 8, 17])
def test_float_to_uint8_wraps_as_numpy(queue, length):
    # the reported case: [-1, 256, 300.7, 2.9] -> [255, 0, 44, 2], whatever
    # the array length (NumPy's vector loops start at 4 elements)
    values = np.resize(np.array([-1.0, 256.0, 300.7, 2.9]), length)
    x = pt.make_placeholder("x", (length,), np.float64)
    _, (got,) = pt.generate_loopy(x.astype(np.uint8))(queue, x=values)
    np.testing.assert_array_equal(got, values.astype(np.uint8))
    np.testing.assert_array_equal(pt.generate_numpy(x.astype(np.uint8))(x=values),
                                  values.astype(np.uint8))


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
@pytest.mark.parametrize("src", [np.float64, np.float32])
def test_float_to_integer_casts_match_numpys_scalar_results(queue, dtype, src):
    # values inside the int64 range but outside (or at the edge of) the
    # target type: NumPy's C cast goes through a 64-bit integer and wraps.
    # Reference: NumPy on one element at a time (its scalar loop); beyond
    # the target range NumPy's own vector loops disagree with it.
    values = np.array([-1.0, 256.0, 300.7, 2.9, -129.5, 70000.2, -3.7, 65535.9,
                       -40000.5, 4294967295.0, -2.0**31, 1.5e9, 0.0, -0.9],
                      dtype=src)
    if np.dtype(dtype) == np.uint64:
        values = np.concatenate([values, np.array([1e19, 2.0**63 + 2.0**40],
                                                  dtype=src)])
    with np.errstate(invalid="ignore"):    # NumPy warns out of range
        ref = np.array([np.array([v]).astype(dtype)[0] for v in values])
    x = pt.make_placeholder("x", values.shape, src)
    _, (got,) = pt.generate_loopy(x.astype(dtype))(queue, x=values)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("name", ["queue", "allocator", "wait_for", "out_host"])
def test_inputs_may_be_named_like_call_options(queue, name):
    import pyopencl.array as cla
    x = pt.make_placeholder(name, (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    result = 2 * x + y
    xv, yv = np.arange(3.0), np.ones(3)
    _, (got,) = pt.generate_loopy(result)(queue, **{name: xv, "y": yv})
    np.testing.assert_array_equal(got, 2 * xv + yv)
    # a device input of that name: outputs stay on the device as usual
    _, (dev,) = pt.generate_loopy(result)(
        queue, **{name: cla.to_device(queue, xv), "y": cla.to_device(queue, yv)})
    assert isinstance(dev, cla.Array)
    np.testing.assert_array_equal(dev.get(), 2 * xv + yv)
    np.testing.assert_array_equal(pt.generate_numpy(result)(**{name: xv, "y": yv}),
                                  2 * xv + yv)


def test_options_still_work_beside_ordinary_inputs(queue):
    import pyopencl.array as cla
    x = pt.make_placeholder("x", (3,), np.float64)
    _, (got,) = pt.generate_loopy(x + 1)(queue, x=np.zeros(3), out_host=False)
    assert isinstance(got, cla.Array)


@pytest.mark.parametrize("make", [
    lambda: pt.make_placeholder("a", (2**40, 2**40), np.float64),
    lambda: pt.zeros((2**32, 2**32)),
    lambda: pt.make_placeholder("a", (2**40, 1)) + pt.make_placeholder(
        "b", (1, 2**40)),
    lambda: pt.einsum("i,j->ij", pt.make_placeholder("a", (2**40,)),
                      pt.make_placeholder("b", (2**40,))),
])
def test_shapes_past_int64_are_refused(make):
    with pytest.raises(diagnostic.ArrayTooLargeError, match="elements"):
        make()


def test_largest_addressable_shape_is_accepted():
    a = pt.make_placeholder("a", (2**31, 2**31), np.int8)
    assert a.size == 2**62


def test_reduction_past_two_to_the_31_completes(queue):
    # the loop counter must be 64-bit: a 32-bit one never ends
    n = 2**31 + 5
    prg = pt.generate_loopy(pt.sum(pt.ones(n, dtype=np.int64)))
    assert "long" in prg.source
    _, (got,) = prg(queue)
    assert int(got) == n


def test_size_parameter_past_two_to_the_31(queue):
    # a size known only at run time gets 64-bit indices: a sum over
    # n = 2^33 ones (no memory of that size is used)
    n = pt.make_size_param("n")
    prg = pt.generate_loopy(pt.sum(pt.ones(n, dtype=np.int64)))
    assert "long" in prg.source
    _, (got,) = prg(queue, n=2**33)
    assert int(got) == 2**33
