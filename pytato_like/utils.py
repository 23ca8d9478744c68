"""Shape helpers shared by the front end and the transforms.

.. autofunction:: are_shape_components_equal
.. autofunction:: are_shapes_equal
.. autofunction:: size_polynomial
.. autofunction:: get_shape_after_broadcasting
.. autofunction:: dim_to_index_lambda_components
.. autofunction:: normalize_axis
.. autofunction:: normalize_axes
.. autofunction:: get_indexing_expression
.. autofunction:: get_common_dtype_of_ary_or_scalars
.. autofunction:: broadcast_binary_op
.. autofunction:: get_einsum_subscript_str
.. autofunction:: get_einsum_specification
.. autofunction:: normalized_slice_does_not_change_axis
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pymbolic.primitives as prim

from pytato_like._frontend import ElementwiseBuilder, as_operand
from pytato_like._shapes import (
    Polynomial,
    are_shape_components_equal,
    are_shapes_equal,
    dim_to_index_lambda_components,
    get_shape_after_broadcasting,
    is_one,
    poly_mul,
    size_polynomial,
)
from pytato_like.array import (
    Array,
    Einsum,
    EinsumElementwiseAxis,
    check_tags,
)
from pytato_like.diagnostic import (
    AxisError,
    CannotBroadcastError,
    UnsupportedArrayError,
)
from pytato_like.scalar_expr import index_var

if TYPE_CHECKING:
    from pytato_like.array import EinsumAxisDescriptor

__all__ = [
    "Polynomial",
    "are_shape_components_equal",
    "are_shapes_equal",
    "broadcast_binary_op",
    "dim_to_index_lambda_components",
    "get_common_dtype_of_ary_or_scalars",
    "get_einsum_specification",
    "get_einsum_subscript_str",
    "get_indexing_expression",
    "get_shape_after_broadcasting",
    "is_one",
    "normalize_axes",
    "normalize_axis",
    "normalized_slice_does_not_change_axis",
    "poly_mul",
    "size_polynomial",
]


def normalize_axis(axis: object, ndim: int, what: str = "array") -> int:
    """*axis* in ``range(ndim)``, accepting negative values as NumPy does."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise AxisError(f"axis {axis!r} is not an integer")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for {what} of "
                        f"dimension {ndim}")
    return axis % ndim


def normalize_axes(axis: int | np.integer | Iterable[int | np.integer] | None,
                   ndim: int, what: str = "array") -> tuple[int, ...]:
    """*axis* (None, an int or a tuple of ints) as a sorted tuple of distinct
    non-negative axes; None means all axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    result = tuple(normalize_axis(a, ndim, what) for a in axis)
    if len(set(result)) != len(result):
        raise AxisError(f"repeated axis in {tuple(axis)} for {what} of "
                        f"dimension {ndim}")
    return tuple(sorted(result))


# {{{ pytato's front-end helpers

def get_indexing_expression(shape, result_shape) -> tuple[int | prim.Variable, ...]:
    """The index expressions reading an array of *shape* inside an index
    lambda of *result_shape* under NumPy broadcasting: ``0`` along axes of
    length 1 that are broadcast, the result's index variable ``_i``
    elsewhere (axes aligned from the right)."""
    shape = tuple(shape)
    result_shape = tuple(result_shape)
    if len(shape) > len(result_shape):
        raise CannotBroadcastError(
            f"an array of shape {shape} cannot be read in a result of shape "
            f"{result_shape} (more dimensions)")
    offset = len(result_shape) - len(shape)
    indices: list[int | prim.Variable] = []  # 0 (broadcast) or an index variable
    for i, dim in enumerate(shape):
        out_dim = result_shape[offset + i]
        if is_one(dim) and not is_one(out_dim):
            indices.append(0)
        elif are_shape_components_equal(dim, out_dim):
            indices.append(index_var(offset + i))
        else:
            raise CannotBroadcastError(
                f"axis {i} of shape {shape} (length {dim}) does not broadcast "
                f"to length {out_dim} of result shape {result_shape}")
    return tuple(indices)


def get_common_dtype_of_ary_or_scalars(ary_or_scalars) -> np.dtype:
    """The dtype NumPy gives the result of combining *ary_or_scalars*
    (arrays by their dtype, Python scalars weakly, as NumPy 2 does)."""
    operands = [a.dtype if isinstance(a, Array) else a for a in ary_or_scalars]
    return np.result_type(*operands)


def broadcast_binary_op(a1, a2, op, get_result_type, *,
                        tags=frozenset(), non_equality_tags=frozenset(),
                        cast_to_result_dtype: bool = True,
                        is_pow: bool = False):
    """``op(a1, a2)`` as an index lambda over the broadcast shape of the
    operands (arrays or scalars). *op* combines two scalar expressions (e.g.
    :func:`operator.add`); ``get_result_type(a1, a2)`` gives the result
    dtype. With *cast_to_result_dtype*, operands are first converted to the
    result dtype (for *is_pow*, only the base is, as NumPy computes
    ``int ** int`` in integers). Two scalars give ``op(a1, a2)`` itself."""
    a1 = as_operand(a1)
    a2 = as_operand(a2)
    if not isinstance(a1, Array) and not isinstance(a2, Array):
        return op(a1, a2)
    result_dtype = np.dtype(get_result_type(a1, a2))
    shape = get_shape_after_broadcasting([a1, a2])
    builder = ElementwiseBuilder((a1, a2), shape, "broadcast_binary_op")

    def operand(x, cast):
        if isinstance(x, Array):
            return builder.access(x, result_dtype if cast else x.dtype)
        if cast:
            return np.dtype(result_dtype).type(x)
        return x

    x1 = operand(a1, cast_to_result_dtype)
    x2 = operand(a2, cast_to_result_dtype and not is_pow)
    result = builder.build(op(x1, x2), result_dtype)
    tags = check_tags(tags)
    if tags or non_equality_tags:
        result = result.copy(tags=tags, non_equality_tags=frozenset(
            non_equality_tags))
    return result


def _einsum_letters():
    import string
    alphabet = string.ascii_lowercase
    # start at 'i' as hand-written einsums do, then the rest
    return (alphabet[8:] + alphabet[:8] + string.ascii_uppercase)


def get_einsum_subscript_str(expr) -> str:
    """A subscript string that rebuilds the einsum *expr* with
    :func:`~pytato_like.einsum` from ``expr.args``. Letters are given in
    order of first appearance starting at ``i`` (so ``pt.einsum("ij,jk->ik",
    a, b)`` gives back ``"ij,jk->ik"``), not necessarily the original
    ones."""
    if not isinstance(expr, Einsum):
        raise UnsupportedArrayError(
            f"get_einsum_subscript_str expects an Einsum, got a "
            f"{type(expr).__name__} of shape {getattr(expr, 'shape', None)}")
    letters = iter(_einsum_letters())
    letter_of: dict[EinsumAxisDescriptor, str] = {}
    in_specs = []
    for acc in expr.access_descriptors:
        spec = ""
        for descr in acc:
            if descr not in letter_of:
                letter_of[descr] = next(letters)
            spec += letter_of[descr]
        in_specs.append(spec)
    out_spec = ""
    for i in range(expr.ndim):
        descr = EinsumElementwiseAxis(i)
        if descr not in letter_of:  # pragma: no cover (every output axis is read)
            letter_of[descr] = next(letters)
        out_spec += letter_of[descr]
    return ",".join(in_specs) + "->" + out_spec


#: pytato's newer name of :func:`get_einsum_subscript_str`
get_einsum_specification = get_einsum_subscript_str


def normalized_slice_does_not_change_axis(normalized_slice, axis_len) -> bool:
    """Whether indexing an axis of length *axis_len* with the
    :class:`~pytato_like.array.NormalizedSlice` *normalized_slice* keeps the
    axis as it is (start 0, step 1, stop at the end)."""
    if normalized_slice.step != 1 or normalized_slice.start != 0:
        return False
    if normalized_slice.stop is None:  # full slice of a symbolic axis
        return True
    return are_shape_components_equal(normalized_slice.stop, axis_len)

# }}}
