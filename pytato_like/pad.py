"""Constant padding, as :func:`numpy.pad` with ``mode="constant"``.

.. autofunction:: pad
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pymbolic.primitives as prim

from pytato_like._frontend import convert_scalar
from pytato_like.array import Array, IndexLambda, _NO_TAGS
from pytato_like.diagnostic import ShapeMismatchError
from pytato_like.scalar_expr import index_var

if TYPE_CHECKING:
    from pymbolic.typing import Expression


def _as_pairs(value: Any, ndim: int, what: str) -> np.ndarray:
    """*value* (a scalar, a pair, one pair per axis, or any array-like
    broadcastable to that, as :func:`numpy.pad` takes it) as an array of
    shape ``(ndim, 2)``."""
    if isinstance(value, Array):
        raise ShapeMismatchError(f"pad: {what} must be known when the graph is "
                                 f"built, got a lazy array of shape {value.shape}")
    try:
        arr = np.asarray(value)
        return np.broadcast_to(arr, (ndim, 2))
    except ValueError as err:
        raise ShapeMismatchError(
            f"pad: {what} {value!r} does not fit an array of {ndim} "
            "dimensions (expected a scalar, (before, after), or one pair per "
            "axis)") from err


def _normalize_pad_width(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    arr = _as_pairs(pad_width, ndim, "pad_width")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind != "f" or not np.all(arr == np.round(arr)):
            raise ShapeMismatchError(
                f"pad: pad_width {pad_width!r} must hold integers, got dtype "
                f"{arr.dtype}")
    result = [(int(lo), int(hi)) for lo, hi in arr]
    if any(lo < 0 or hi < 0 for lo, hi in result):
        raise ShapeMismatchError(f"pad_width {pad_width!r} has negative entries")
    return result


def pad(array: Array, pad_width: Any, mode: str = "constant",
        **kwargs: Any) -> Array:
    """*array* surrounded by ``constant_values`` (default 0).

    *pad_width* and ``constant_values`` take every form :func:`numpy.pad`
    accepts: a scalar, a ``(before, after)`` pair, one pair per axis, or any
    array-like (lists, tuples, NumPy arrays) broadcastable to shape
    ``(ndim, 2)``. Where padded regions of two axes meet, the later axis's
    value wins, as in NumPy."""
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}: only 'constant' is supported")
    constant_values = kwargs.pop("constant_values", 0)
    if kwargs:
        raise TypeError(f"pad() got unexpected arguments {sorted(kwargs)}")
    widths = _normalize_pad_width(pad_width, array.ndim)
    cvals = _as_pairs(constant_values, array.ndim, "constant_values")
    shape = []
    index = []
    for i, ((lo, hi), dim) in enumerate(zip(widths, array.shape)):
        if not isinstance(dim, int):
            raise ShapeMismatchError(f"pad: axis {i} of shape {array.shape} is "
                                     "symbolic")
        shape.append(lo + dim + hi)
        index.append(prim.Sum((index_var(i), -lo)) if lo else index_var(i))
    if all(lo == 0 and hi == 0 for lo, hi in widths):
        return array
    expr: Expression = (prim.Subscript(prim.Variable("_in0"), tuple(index)) if index
            else prim.Variable("_in0"))
    # innermost test for the first axis, so the last axis decides corners
    for i, ((lo, hi), dim) in enumerate(zip(widths, array.shape)):
        var = index_var(i)
        if hi:
            fill = convert_scalar(cvals[i, 1].item(), array.dtype, "pad")
            expr = prim.If(prim.Comparison(var, ">=", lo + dim), fill, expr)
        if lo:
            fill = convert_scalar(cvals[i, 0].item(), array.dtype, "pad")
            expr = prim.If(prim.Comparison(var, "<", lo), fill, expr)
    return IndexLambda(expr, tuple(shape), array.dtype,
                       {"_in0": array}, None, None, _NO_TAGS)
