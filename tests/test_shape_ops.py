"""Shape manipulation against eager NumPy: reshape, transpose, concatenate,
stack, roll, expand_dims, squeeze, broadcast_to, pad."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import AxisError, ShapeMismatchError
from pytato_like.testing import assert_matches_numpy, random_input


# {{{ reshape

@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("newshape", [(12, 2), (-1,), (2, -1, 3), (4, 6), 24,
                                      (1, 24, 1), (2, 3, 4)], ids=str)
def test_reshape_matches_numpy(newshape, order, rng):
    a = random_input(rng, (2, 3, 4), "int32")
    assert_matches_numpy(lambda xp, x: xp.reshape(x, newshape, order=order), a)
    assert_matches_numpy(lambda xp, x: x.reshape(newshape, order=order), a)


def test_reshape_method_takes_shape_as_varargs(rng):
    a = random_input(rng, (2, 3, 4), "float64")
    assert_matches_numpy(lambda xp, x: x.reshape(4, -1), a)
    assert_matches_numpy(lambda xp, x: x.reshape(6, 4, order="F"), a)


def test_reshape_of_transposed_array_in_fortran_order(rng):
    a = random_input(rng, (3, 4), "float64")
    assert_matches_numpy(lambda xp, x: xp.reshape(x.T + 1, (2, 6), order="F"), a)


def test_reshape_zero_dimensional_and_empty(rng):
    assert_matches_numpy(lambda xp, x: xp.reshape(x, (1, 1)), np.array(3.0))
    assert_matches_numpy(lambda xp, x: xp.reshape(x, ()), np.array([3.0]))
    assert_matches_numpy(lambda xp, x: xp.reshape(x, (0, 5)), np.zeros((5, 0)))


def test_ravel_and_flatten(rng):
    a = random_input(rng, (3, 4), "float64")
    assert_matches_numpy(lambda xp, x: x.ravel(), a)
    assert_matches_numpy(lambda xp, x: x.T.flatten(), a)


@pytest.mark.parametrize("newshape", [(5, 5), (-1, 5), (-1, -1)], ids=str)
def test_reshape_size_mismatch_raises(newshape):
    x = pt.make_placeholder("x", (2, 3, 4), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(2, 3, 4\)"):
        pt.reshape(x, newshape)

# }}}


# {{{ transpose

@pytest.mark.parametrize("axes", [None, (0, 1, 2), (2, 0, 1), (1, 0, 2), (-1, 0, 1)],
                         ids=str)
def test_transpose_matches_numpy(axes, rng):
    a = random_input(rng, (2, 3, 4), "float32")
    assert_matches_numpy(lambda xp, x: xp.transpose(x, axes), a)


def test_transpose_method_and_T(rng):
    a = random_input(rng, (2, 3, 4), "float32")
    assert_matches_numpy(lambda xp, x: x.T, a)
    assert_matches_numpy(lambda xp, x: x.transpose(1, 2, 0), a)
    assert_matches_numpy(lambda xp, x: x.transpose((2, 1, 0)), a)
    assert_matches_numpy(lambda xp, x: x.transpose(), a)


@pytest.mark.parametrize("axes", [(0, 1), (0, 1, 1), (0, 1, 3)], ids=str)
def test_transpose_with_bad_axes_raises(axes):
    x = pt.make_placeholder("x", (2, 3, 4), np.float64)
    with pytest.raises(AxisError, match=r"\(2, 3, 4\)|dimension 3"):
        pt.transpose(x, axes)

# }}}


# {{{ concatenate / stack

@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concatenate_matches_numpy(axis, rng):
    shapes = {0: [(2, 3), (4, 3), (1, 3)], 1: [(2, 3), (2, 1), (2, 5)]}
    shapes = shapes[axis % 2]
    arrays = [random_input(rng, s, "float64") for s in shapes]
    assert_matches_numpy(lambda xp, *xs: xp.concatenate(xs, axis=axis), *arrays)


def test_concatenate_promotes_dtypes(rng):
    arrays = [random_input(rng, (2,), d) for d in ("int8", "uint8", "float32")]
    assert_matches_numpy(lambda xp, *xs: xp.concatenate(xs), *arrays)
    assert_matches_numpy(lambda xp, *xs: xp.concatenate(xs[:2]), *arrays)


def test_concatenate_same_array_twice_and_single_array(rng):
    a = random_input(rng, (2, 3), "float64")
    assert_matches_numpy(lambda xp, x: xp.concatenate([x, x, x], axis=1), a)
    assert_matches_numpy(lambda xp, x: xp.concatenate([x]), a)


def test_concatenate_with_empty_part(rng):
    a = random_input(rng, (2, 3), "float64")
    b = np.zeros((0, 3))
    assert_matches_numpy(lambda xp, x, y: xp.concatenate([y, x, y]), a, b)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_matches_numpy(axis, rng):
    arrays = [random_input(rng, (2, 3), d) for d in ("float32", "int64", "float32")]
    assert_matches_numpy(lambda xp, *xs: xp.stack(xs, axis=axis), *arrays)


def test_stack_of_scalars_and_repeated_array(rng):
    a = random_input(rng, (), "float64")
    assert_matches_numpy(lambda xp, x: xp.stack([x, x * 2, x]), a)


def test_concatenate_shape_mismatch_raises():
    x = pt.make_placeholder("x", (2, 3), np.float64)
    y = pt.make_placeholder("y", (2, 4), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(2, 3\).*\(2, 4\)"):
        pt.concatenate([x, y], axis=0)


@pytest.mark.parametrize("axis", [2, -3])
def test_concatenate_bad_axis_raises(axis):
    x = pt.make_placeholder("x", (2, 3), np.float64)
    with pytest.raises(AxisError, match=r"\(2, 3\)|dimension 2"):
        pt.concatenate([x, x], axis=axis)


@pytest.mark.parametrize("axis", [3, -4])
def test_stack_bad_axis_raises(axis):
    x = pt.make_placeholder("x", (2, 3), np.float64)
    with pytest.raises(AxisError, match=r"\(2, 3\)|dimension 3"):
        pt.stack([x, x], axis=axis)


def test_stack_shape_mismatch_raises():
    x = pt.make_placeholder("x", (2, 3), np.float64)
    y = pt.make_placeholder("y", (3, 2), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(2, 3\).*\(3, 2\)"):
        pt.stack([x, y])

# }}}


# {{{ roll

@pytest.mark.parametrize("shift, axis", [
    (1, 0), (-1, 0), (2, 1), (-5, 1), (7, -1), (0, 0), (4, 1),
    (3, None), (-7, None), ((1, 2), (0, 1)), ((1, -1), (1, 1)),
    (2, (0, 1)), ((1, 2), 1)], ids=str)
def test_roll_matches_numpy(shift, axis, rng):
    a = random_input(rng, (3, 4), "int64")
    assert_matches_numpy(lambda xp, x: xp.roll(x, shift, axis=axis), a)


def test_roll_of_computed_and_zero_dimensional_arrays(rng):
    a = random_input(rng, (5,), "float64")
    assert_matches_numpy(lambda xp, x: xp.roll(x * 2, -2) + x, a)
    assert_matches_numpy(lambda xp, x: xp.roll(x, 3), np.array(1.5))


def test_roll_bad_axis_raises():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    with pytest.raises(AxisError, match=r"\(3, 4\)|dimension 2"):
        pt.roll(x, 1, axis=2)

# }}}


# {{{ expand_dims / squeeze / broadcast_to

@pytest.mark.parametrize("axis", [0, 1, 2, -1, (0, 2), (0, -1), (1, 2, 3)], ids=str)
def test_expand_dims_matches_numpy(axis, rng):
    a = random_input(rng, (3, 4), "float64")
    assert_matches_numpy(lambda xp, x: xp.expand_dims(x, axis), a)


def test_expand_dims_bad_axis_raises():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    with pytest.raises(AxisError, match=r"\(3, 4\)|dimension 3"):
        pt.expand_dims(x, 3)


@pytest.mark.parametrize("axis", [None, 0, 2, -1, (0, 3)], ids=str)
def test_squeeze_matches_numpy(axis, rng):
    a = random_input(rng, (1, 3, 1, 1), "float64")
    assert_matches_numpy(lambda xp, x: xp.squeeze(x, axis=axis), a)
    assert_matches_numpy(lambda xp, x: x.squeeze(axis), a)


def test_squeeze_of_non_unit_axis_raises():
    x = pt.make_placeholder("x", (1, 3), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(1, 3\)"):
        pt.squeeze(x, axis=1)
    with pytest.raises(ValueError):
        np.squeeze(np.zeros((1, 3)), axis=1)


def test_squeeze_bad_axis_raises():
    x = pt.make_placeholder("x", (1, 3), np.float64)
    with pytest.raises(AxisError, match=r"\(1, 3\)|dimension 2"):
        pt.squeeze(x, axis=2)


@pytest.mark.parametrize("shape_in, shape_out", [
    ((3,), (2, 3)), ((1,), (4,)), ((), (2, 2)), ((2, 1), (2, 5)),
    ((1, 3), (4, 2, 3)), ((2, 3), (2, 3))], ids=str)
def test_broadcast_to_matches_numpy(shape_in, shape_out, rng):
    a = random_input(rng, shape_in, "int32")
    assert_matches_numpy(lambda xp, x: xp.broadcast_to(x, shape_out), a)


@pytest.mark.parametrize("shape_out", [(4,), (2, 2), (3, 1)], ids=str)
def test_broadcast_to_incompatible_shape_raises(shape_out):
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(ShapeMismatchError, match=r"\(3,\)"):
        pt.broadcast_to(x, shape_out)

# }}}


# {{{ pad

@pytest.mark.parametrize("pad_width", [1, (1, 2), ((0, 1), (2, 0)), ((1, 1), (0, 0)),
                                       0, [[3, 0], [0, 3]]], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
def test_pad_matches_numpy(pad_width, dtype, rng):
    a = random_input(rng, (2, 3), dtype)
    assert_matches_numpy(lambda xp, x: xp.pad(x, pad_width), a)
    assert_matches_numpy(
        lambda xp, x: xp.pad(x, pad_width, mode="constant", constant_values=1), a)


def test_pad_of_computed_array_then_arithmetic(rng):
    a = random_input(rng, (4,), "float64")
    assert_matches_numpy(lambda xp, x: xp.pad(xp.sin(x), (2, 1)) * 3 + 1, a)


def test_pad_with_negative_width_raises():
    x = pt.make_placeholder("x", (2, 3), np.float64)
    with pytest.raises(ShapeMismatchError, match="pad_width"):
        pt.pad(x, -1)

# }}}

# vim: foldmethod=marker
