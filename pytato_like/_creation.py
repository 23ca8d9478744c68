"""Array creation: zeros, ones, full, eye, arange and the ``*_like``
variants, as index lambdas without inputs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

import numpy as np
import pymbolic.primitives as prim

from pytato_like._frontend import convert_scalar
from pytato_like.array import (
    Array,
    IndexLambda,
    NO_TAGS,
    normalize_shape,
    supported_dtype,
)
from pytato_like.diagnostic import DTypeError, InvalidOrderError
from pytato_like.scalar_expr import TypeCast, index_var

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pymbolic.typing import Number

    from pytato_like.array import ShapeComponent
    from pytato_like.dtype import DTypeLike

    #: a shape: one length or a sequence of lengths (ints or size expressions)
    ShapeArg = int | Sequence[ShapeComponent]
    #: a start, stop or step of :func:`arange`
    RangeValue = float | np.integer | np.floating


def _check_order(order: object, what: str) -> None:
    # lazy arrays have no memory layout: "C" and "F" describe the same array
    if order not in ("C", "F"):
        raise InvalidOrderError(f"{what}(): order must be 'C' or 'F', got "
                                f"{order!r}")


def full(shape: ShapeArg, fill_value: object, dtype: DTypeLike | None = None,
         order: str = "C") -> Array:
    """An array of *shape* filled with *fill_value*."""
    _check_order(order, "full")
    shape = normalize_shape(shape)
    if dtype is None:
        dtype = np.array(fill_value).dtype
    dtype = supported_dtype(dtype, "full()")
    if isinstance(fill_value, Array):
        raise DTypeError("full() needs a scalar fill value, not an array")
    try:
        value = dtype.type(fill_value)
    except (OverflowError, ValueError, TypeError) as err:
        raise DTypeError(f"fill value {fill_value!r} cannot be stored as "
                         f"{dtype}") from err
    return IndexLambda(value, shape, dtype, {}, None, None, NO_TAGS)


def zeros(shape: ShapeArg, dtype: DTypeLike = np.float64,
          order: str = "C") -> Array:
    """An array of zeros."""
    _check_order(order, "zeros")
    return full(shape, 0, dtype)


def ones(shape: ShapeArg, dtype: DTypeLike = np.float64,
         order: str = "C") -> Array:
    """An array of ones."""
    _check_order(order, "ones")
    return full(shape, 1, dtype)


def full_like(x: Array, fill_value: object, dtype: DTypeLike | None = None
              ) -> Array:
    """An array shaped like *x* filled with *fill_value*."""
    return full(x.shape, fill_value, x.dtype if dtype is None else dtype)


def zeros_like(x: Array, dtype: DTypeLike | None = None) -> Array:
    """Zeros shaped like *x*."""
    return full_like(x, 0, dtype)


def ones_like(x: Array, dtype: DTypeLike | None = None) -> Array:
    """Ones shaped like *x*."""
    return full_like(x, 1, dtype)


def eye(N: int, M: int | None = None, k: int = 0,  # noqa: N803
        dtype: DTypeLike = np.float64) -> Array:
    """A 2-d array with ones on diagonal *k*."""
    M = N if M is None else M  # noqa: N806
    dtype = supported_dtype(dtype, "eye()")
    expr = prim.If(prim.Comparison(prim.Sum((index_var(1), -1 * index_var(0))),
                                   "==", int(k)),
                   dtype.type(1), dtype.type(0))
    return IndexLambda(expr, normalize_shape((N, M)), dtype, {}, None, None,
                       NO_TAGS)


def arange(*args: RangeValue,
           dtype: DTypeLike | None = None) -> Array:
    """Evenly spaced values, as :func:`numpy.arange`."""
    if not 1 <= len(args) <= 3:
        raise DTypeError(f"arange takes 1 to 3 positional arguments, got {len(args)}")
    start: RangeValue
    stop: RangeValue
    step: RangeValue
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        start, stop, step = args[0], args[1], 1
    else:
        start, stop, step = args
    if step == 0:
        raise DTypeError("arange step cannot be zero")
    # one-element probes: NumPy's own dtype choice (which depends on the
    # types of start, stop and step) without allocating the range
    probe_dtype = np.result_type(np.arange(start, start + step, step).dtype,
                                 np.arange(stop, stop + step, step).dtype)
    dtype = supported_dtype(probe_dtype if dtype is None else dtype, "arange()")
    if dtype.kind == "b":
        raise DTypeError("arange of dtype bool is not supported")
    length = max(0, math.ceil((stop - start) / step))
    # NumPy stores start and start + step in *dtype* and fills entry i with
    # first + i * (second - first) computed in *dtype*: so
    # arange(0.0, 2.0, 0.25, dtype=int) is all zeros.
    # (numbers: bool was refused above)
    first = cast("Number", convert_scalar(start, dtype, "arange"))
    with np.errstate(over="ignore"):
        delta = cast("Number", convert_scalar(start + step, dtype, "arange")) - first
    expr = prim.Sum((first, prim.Product((delta, TypeCast(dtype, index_var(0))))))
    return IndexLambda(expr, (length,), dtype, {}, None, None, NO_TAGS)
