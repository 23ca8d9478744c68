"""Padding, as :func:`numpy.pad`: modes ``constant``, ``edge``, ``wrap``,
``reflect`` and ``symmetric``.

How each mode is built:

1. ``constant``: one index lambda reading the input inside and a constant
   outside, the test for the first axis innermost so that the last axis
   decides the corners (NumPy pads axis after axis).
2. ``edge``, ``wrap``, ``reflect`` and ``symmetric`` (``reflect_type="even"``)
   only move values: one index lambda whose index on each padded axis is
   the source position, in closed form (a clamp, a remainder, or a
   remainder folded at the period's middle). Padding repeats as NumPy's
   does when a width exceeds the axis (the reflection is periodic).
3. ``reflect_type="odd"`` computes values (``2 * edge - reflected``) from
   values computed before, so it follows NumPy's own loop step by step
   with slices, flips and concatenations, per axis: the result rounds as
   NumPy's does. The number of steps grows with the logarithm of
   width / axis length.

Modes NumPy has and this module does not (``linear_ramp``, ``maximum``,
``mean``, ``median``, ``minimum``, ``empty``, a callable) raise
:class:`~pytato_like.diagnostic.UnsupportedPadModeError`.

.. autofunction:: pad
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pymbolic.primitives as prim

from pytato_like._frontend import convert_scalar
from pytato_like._shape_ops import concatenate
from pytato_like.array import NO_TAGS, Array, IndexLambda
from pytato_like.diagnostic import (
    PadModeError,
    ShapeMismatchError,
    UnsupportedPadModeError,
)
from pytato_like.scalar_expr import index_var

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numpy.typing import ArrayLike
    from pymbolic.typing import ArithmeticExpression, Expression

#: mode -> keyword arguments it takes (as numpy.pad checks them)
_MODE_KEYWORDS = {"constant": {"constant_values"}, "edge": set(), "wrap": set(),
                  "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}}
_NUMPY_ONLY_MODES = ("empty", "linear_ramp", "maximum", "mean", "median",
                     "minimum")


def _as_pairs(value: Array | ArrayLike, ndim: int, what: str) -> np.ndarray:
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


def _normalize_pad_width(pad_width: ArrayLike, ndim: int
                         ) -> list[tuple[int, int]]:
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


def _check_mode(mode: object, kwargs: Mapping[str, ArrayLike]) -> None:
    if mode in _NUMPY_ONLY_MODES or callable(mode):
        raise UnsupportedPadModeError(
            f"pad mode {mode!r} is not supported; supported modes: "
            f"{sorted(_MODE_KEYWORDS)}")
    if mode not in _MODE_KEYWORDS:
        raise PadModeError(f"pad mode {mode!r} is unknown; supported modes: "
                           f"{sorted(_MODE_KEYWORDS)}")
    unexpected = set(kwargs) - _MODE_KEYWORDS[mode]
    if unexpected:
        raise PadModeError(f"pad mode {mode!r} takes no keyword arguments "
                           f"{sorted(unexpected)}")
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise PadModeError(f"pad: reflect_type {reflect_type!r} must be "
                           "'even' or 'odd'")


def pad(array: Array, pad_width: ArrayLike, mode: str = "constant",
        **kwargs: ArrayLike) -> Array:
    """*array* padded as :func:`numpy.pad` pads it.

    :arg pad_width: every form :func:`numpy.pad` accepts: a scalar, a
        ``(before, after)`` pair, one pair per axis, or any array-like
        (lists, tuples, NumPy arrays) broadcastable to shape ``(ndim, 2)``.
    :arg mode: ``"constant"`` (``constant_values``, default 0, in the same
        forms as *pad_width*), ``"edge"``, ``"wrap"``, ``"reflect"`` or
        ``"symmetric"`` (both with ``reflect_type`` ``"even"``, the
        default, or ``"odd"``). Widths larger than the axis repeat the
        pattern as NumPy does.
    """
    _check_mode(mode, kwargs)
    widths = _normalize_pad_width(pad_width, array.ndim)
    for i, ((lo, hi), dim) in enumerate(zip(widths, array.shape)):
        if not isinstance(dim, int):
            raise ShapeMismatchError(f"pad: axis {i} of shape {array.shape} is "
                                     "symbolic")
        if mode != "constant" and dim == 0 and (lo or hi):
            raise ShapeMismatchError(
                f"pad: cannot extend empty axis {i} of shape {array.shape} "
                f"by {(lo, hi)} with mode {mode!r} (only 'constant' fills "
                "an empty axis)")
    if all(lo == 0 and hi == 0 for lo, hi in widths):
        return array
    if mode == "constant":
        return _pad_constant(array, widths,
                             kwargs.get("constant_values", 0))
    if 0 in array.shape:
        # nothing to read: every padded axis holds no values either
        return _pad_constant(array, widths, 0)
    if kwargs.get("reflect_type", "even") == "odd":
        for axis, (lo, hi) in enumerate(widths):
            if lo or hi:
                array = _reflect_odd_along(array, axis, lo, hi,
                                           include_edge=mode == "symmetric")
        return array
    return _pad_by_moving(array, widths, mode)


def _pad_constant(array: Array, widths: list[tuple[int, int]],
                  constant_values: ArrayLike) -> Array:
    cvals = _as_pairs(constant_values, array.ndim, "constant_values")
    shape = []
    index = []
    for i, ((lo, hi), dim) in enumerate(zip(widths, array.shape)):
        shape.append(lo + dim + hi)
        index.append(prim.Sum((index_var(i), -lo)) if lo else index_var(i))
    expr: Expression = (prim.Subscript(prim.Variable("_in0"), tuple(index))
                        if index else prim.Variable("_in0"))
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
                       {"_in0": array}, None, None, NO_TAGS)


def _periodic(position: ArithmeticExpression, lo: int, period: int
              ) -> ArithmeticExpression:
    """*position* (at least ``-lo``) modulo *period*, from a non-negative
    dividend (so no target's sign convention for remainders matters)."""
    shift = -(-lo // period) * period
    return prim.Remainder(prim.Sum((position, shift)) if shift else position,
                          period)


def _source_index(mode: str, axis: int, lo: int, dim: int
                  ) -> ArithmeticExpression:
    """The input position that output index ``_<axis>`` copies, for a mode
    that only moves values."""
    position: ArithmeticExpression = (prim.Sum((index_var(axis), -lo)) if lo
                            else index_var(axis))
    if mode == "edge" or (mode == "reflect" and dim == 1):
        # (a single value reflects to itself: NumPy repeats it)
        return prim.Min((prim.Max((position, 0)), dim - 1))
    if mode == "wrap":
        return _periodic(position, lo, dim)
    # reflect: period 2(dim-1), the edge value not repeated;
    # symmetric: period 2 dim, the edge value repeated
    period = 2 * (dim - 1) if mode == "reflect" else 2 * dim
    folded = _periodic(position, lo, period)
    mirror = period - (0 if mode == "reflect" else 1)
    return prim.Min((folded, prim.Sum((mirror, prim.Product((-1, folded))))))


def _pad_by_moving(array: Array, widths: list[tuple[int, int]],
                   mode: str) -> Array:
    index = tuple(_source_index(mode, axis, lo, dim) if (lo or hi)
                  else index_var(axis)
                  for axis, ((lo, hi), dim) in enumerate(zip(widths,
                                                             array.shape)))
    shape = tuple(lo + dim + hi for (lo, hi), dim in zip(widths, array.shape))
    return IndexLambda(prim.Subscript(prim.Variable("_in0"), index), shape,
                       array.dtype, {"_in0": array}, None, None, NO_TAGS)


def _along(axis: int, ndim: int, s: slice) -> tuple[slice, ...]:
    return (*([slice(None)] * axis), s, *([slice(None)] * (ndim - axis - 1)))


def _reflect_odd_along(array: Array, axis: int, lo: int, hi: int,
                       include_edge: bool) -> Array:
    """*array* padded by (*lo*, *hi*) along *axis* with NumPy's odd
    reflection, in NumPy's steps: each step mirrors at most the values
    already there (a whole number of periods of the original) about the
    current edge, on the left, then on the right."""
    ndim = array.ndim
    n = array.shape[axis]
    assert isinstance(n, int)
    if n == 1:
        # NumPy's legacy rule: a single value is extended as with 'edge'
        return _pad_by_moving(array, [(lo, hi) if a == axis else (0, 0)
                                      for a in range(ndim)], "edge")
    current = array
    while lo or hi:
        filled = current.shape[axis]
        assert isinstance(filled, int)
        if include_edge:
            usable, offset = filled // n * n, 0
        else:
            usable, offset = (filled - 1) // (n - 1) * (n - 1), 1
        if lo:
            length = min(usable, lo)
            chunk = current[_along(axis, ndim, slice(offset, offset + length))]
            chunk = chunk[_along(axis, ndim, slice(None, None, -1))]
            edge = current[_along(axis, ndim, slice(0, 1))]
            chunk = _odd(edge, chunk, array.dtype)
            current = concatenate([chunk, current], axis=axis)
            lo -= length
        if hi:
            length = min(usable, hi)
            end = current.shape[axis]
            assert isinstance(end, int)
            chunk = current[_along(axis, ndim, slice(end - offset - length,
                                                     end - offset))]
            chunk = chunk[_along(axis, ndim, slice(None, None, -1))]
            edge = current[_along(axis, ndim, slice(end - 1, end))]
            chunk = _odd(edge, chunk, array.dtype)
            current = concatenate([current, chunk], axis=axis)
            hi -= length
    return current


def _odd(edge: Array, chunk: Array, dtype: np.dtype) -> Array:
    # NumPy computes 2 * edge - chunk and stores it in the array's dtype
    # (booleans go through int64 and back)
    result = 2 * edge - chunk
    return result if result.dtype == dtype else result.astype(dtype)
