"""Shape manipulation: reshape, transpose, concatenate, stack, roll,
expand_dims, squeeze, broadcast_to (NumPy semantics, lazy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pytato_like._frontend import ElementwiseBuilder, as_operand
from pytato_like.array import (
    Array,
    AxisPermutation,
    Concatenate,
    Reshape,
    Roll,
    Stack,
    _NO_TAGS,
    _shape_product,
    normalize_shape,
)
from pytato_like.diagnostic import (
    AxisError,
    CannotBroadcastError,
    ShapeMismatchError,
)
from pytato_like.utils import (
    are_shape_components_equal,
    are_shapes_equal,
    get_shape_after_broadcasting,
    normalize_axes,
    normalize_axis,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pytato_like.array import ShapeComponent

    #: a shape: one length or a sequence of lengths (ints or size expressions)
    ShapeArg = int | Sequence[ShapeComponent]
    #: one axis or several
    AxesArg = int | Sequence[int]


def _require_array(a: Any, what: str) -> Array:
    a = as_operand(a)
    if not isinstance(a, Array):
        from pytato_like.array import make_data_wrapper
        a = make_data_wrapper(np.asarray(a))
    return a


def reshape(a: Any, newshape: ShapeArg, order: str = "C") -> Array:
    """*a* with shape *newshape* (one entry may be -1), read in *order*."""
    a = _require_array(a, "reshape")
    if (type(newshape) is tuple and order in ("C", "F")
            and all(type(d) is int and d >= 0 for d in newshape)
            and type(a.size) is int):
        # fast path: a concrete shape without -1
        if newshape == a.shape:
            return a
        size = 1
        for d in newshape:
            size *= d
        if size == a.size:
            return Reshape(a, newshape, order, None, _NO_TAGS)
    if order not in ("C", "F"):
        raise ShapeMismatchError(f"reshape order must be 'C' or 'F', got {order!r}")
    if isinstance(newshape, (int, np.integer, Array)):
        newshape = (newshape,)
    newshape = list(newshape)
    n_inferred = sum(1 for s in newshape if not isinstance(s, Array) and s == -1)
    if n_inferred > 1:
        raise ShapeMismatchError(f"can only infer one dimension in reshape of "
                                 f"{a.shape} to {tuple(newshape)}")
    if n_inferred:
        known = _shape_product([s for s in newshape
                                if isinstance(s, Array) or s != -1])
        if not isinstance(known, int) or not isinstance(a.size, int):
            raise ShapeMismatchError(
                f"cannot infer -1 in reshape of symbolic shape {a.shape}")
        if known == 0 or a.size % known:
            raise ShapeMismatchError(
                f"cannot reshape array of shape {a.shape} (size {a.size}) "
                f"into shape {tuple(newshape)}")
        newshape = [a.size // known if not isinstance(s, Array) and s == -1 else s
                    for s in newshape]
    newshape = normalize_shape(newshape)
    if are_shapes_equal(newshape, a.shape):
        return a
    old_size, new_size = a.size, _shape_product(newshape)
    if not are_shape_components_equal(old_size, new_size):
        raise ShapeMismatchError(
            f"cannot reshape array of shape {a.shape} (size {old_size}) into "
            f"shape {newshape} (size {new_size})")
    return Reshape(a, newshape, order, None, _NO_TAGS)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Array:
    """*a* with its axes permuted (reversed when *axes* is None)."""
    a = _require_array(a, "transpose")
    if axes is None:
        axes = tuple(range(a.ndim))[::-1]
    axes = tuple(normalize_axis(ax, a.ndim, f"array of shape {a.shape}")
                 for ax in axes)
    if sorted(axes) != list(range(a.ndim)):
        raise AxisError(f"axes {axes} are not a permutation of the axes of an "
                        f"array of shape {a.shape}")
    if axes == tuple(range(a.ndim)):
        return a
    return AxisPermutation(a, axes, None, _NO_TAGS)


def _check_joinable(arrays, axis_to_skip, what):
    first = arrays[0]
    for other in arrays[1:]:
        if other.ndim != first.ndim:
            raise ShapeMismatchError(
                f"{what}: all arrays must have the same number of dimensions, "
                f"got shapes {[a.shape for a in arrays]}")
        for ax, (d1, d2) in enumerate(zip(first.shape, other.shape)):
            if ax != axis_to_skip and not are_shape_components_equal(d1, d2):
                raise ShapeMismatchError(
                    f"{what}: shapes {[a.shape for a in arrays]} differ in "
                    f"axis {ax}")


def concatenate(arrays: Iterable[Any], axis: int = 0) -> Array:
    """*arrays* joined along existing axis *axis*."""
    arrays = [_require_array(a, "concatenate") for a in arrays]
    if not arrays:
        raise ShapeMismatchError("concatenate needs at least one array")
    if arrays[0].ndim == 0:
        raise ShapeMismatchError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, arrays[0].ndim, f"array of shape {arrays[0].shape}")
    _check_joinable(arrays, axis, "concatenate")
    if len(arrays) == 1:
        return arrays[0]
    return Concatenate(tuple(arrays), axis, None, _NO_TAGS)


def stack(arrays: Iterable[Any], axis: int = 0) -> Array:
    """*arrays* (all of one shape) joined along a new axis *axis*."""
    arrays = [_require_array(a, "stack") for a in arrays]
    if not arrays:
        raise ShapeMismatchError("stack needs at least one array")
    _check_joinable(arrays, None, "stack")
    for a in arrays[1:]:
        if not are_shapes_equal(a.shape, arrays[0].shape):
            raise ShapeMismatchError(
                f"stack: all arrays must have the same shape, got "
                f"{[x.shape for x in arrays]}")
    axis = normalize_axis(axis, arrays[0].ndim + 1,
                          f"stacked result of arrays of shape {arrays[0].shape}")
    return Stack(tuple(arrays), axis, None, _NO_TAGS)


def roll(a: Any, shift: int | Sequence[int], axis: AxesArg | None = None
         ) -> Array:
    """Elements of *a* shifted cyclically by *shift* along *axis* (the
    flattened array when None), as :func:`numpy.roll`."""
    a = _require_array(a, "roll")
    if axis is None:
        if isinstance(shift, (tuple, list)):
            raise AxisError("roll with axis=None takes a single integer shift")
        if a.ndim == 0:
            return a  # one element: nothing moves (NumPy and pytato agree)
        return reshape(roll(reshape(a, (-1,)), shift, 0), a.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise AxisError(f"roll: shift {shift} and axis {axis} do not match")
    result = a
    for sh, ax in zip(shifts, axes):
        ax = normalize_axis(ax, a.ndim, f"array of shape {a.shape}")
        sh = int(sh)
        dim = a.shape[ax]
        if isinstance(dim, int):
            if dim == 0:
                continue
            sh %= dim
        if sh == 0:
            continue
        result = Roll(result, sh, ax, None, _NO_TAGS)
    return result


def expand_dims(a: Any, axis: AxesArg) -> Array:
    """*a* with unit axes inserted at the positions *axis*."""
    a = _require_array(a, "expand_dims")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    new_ndim = a.ndim + len(axes)
    positions = normalize_axes(axes, new_ndim, f"expanded array of shape {a.shape}")
    old = iter(a.shape)
    newshape = tuple(1 if i in positions else next(old) for i in range(new_ndim))
    from pytato_like.tags import ExpandedDimsReshape
    return Reshape(a, newshape, "C", None,
                   frozenset([ExpandedDimsReshape(tuple(positions))]))


def squeeze(a: Any, axis: AxesArg | None = None) -> Array:
    """*a* without its unit axes (only those in *axis* when given)."""
    a = _require_array(a, "squeeze")
    if axis is None:
        drop = {i for i, d in enumerate(a.shape)
                if not isinstance(d, Array) and d == 1}
    else:
        drop = set(normalize_axes(axis, a.ndim, f"array of shape {a.shape}"))
        for ax in drop:
            if isinstance(a.shape[ax], Array) or a.shape[ax] != 1:
                raise ShapeMismatchError(
                    f"cannot squeeze axis {ax} of length {a.shape[ax]} "
                    f"(array shape {a.shape})")
    if not drop:
        return a
    newshape = tuple(d for i, d in enumerate(a.shape) if i not in drop)
    return Reshape(a, newshape, "C", None, _NO_TAGS)


def broadcast_to(a: Any, shape: ShapeArg) -> Array:
    """*a* broadcast to *shape*, as :func:`numpy.broadcast_to`."""
    a = _require_array(a, "broadcast_to")
    shape = normalize_shape(shape)
    if len(shape) < a.ndim:
        raise CannotBroadcastError(
            f"cannot broadcast array of shape {a.shape} to fewer dimensions "
            f"{shape}")
    result_shape = get_shape_after_broadcasting([a, _ShapeOnly(shape)])
    if not are_shapes_equal(result_shape, shape):
        raise CannotBroadcastError(f"cannot broadcast array of shape {a.shape} "
                                 f"to shape {shape}")
    if are_shapes_equal(a.shape, shape):
        return a
    builder = ElementwiseBuilder((a,), shape, "broadcast_to")
    return builder.build(builder.access(a, a.dtype), a.dtype)


class _ShapeOnly:
    """Stand-in with just a shape, for broadcasting checks."""

    def __init__(self, shape) -> None:
        self.shape = shape

