"""Constant padding, as :func:`numpy.pad` with ``mode="constant"``.

.. autofunction:: pad
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymbolic.primitives as prim

from pytato_like._frontend import convert_scalar
from pytato_like.array import Array, IndexLambda, _NO_TAGS
from pytato_like.diagnostic import ShapeMismatchError
from pytato_like.scalar_expr import index_var


def _normalize_pad_width(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    arr = np.asarray(pad_width, dtype=object)
    try:
        arr = np.broadcast_to(np.asarray(pad_width), (ndim, 2))
    except ValueError as err:
        raise ShapeMismatchError(
            f"pad_width {pad_width!r} does not fit an array of {ndim} "
            "dimensions") from err
    result = [(int(lo), int(hi)) for lo, hi in arr]
    if any(lo < 0 or hi < 0 for lo, hi in result):
        raise ShapeMismatchError(f"pad_width {pad_width!r} has negative entries")
    return result


def pad(array: Array, pad_width: Any, mode: str = "constant",
        **kwargs: Any) -> Array:
    """*array* surrounded by ``constant_values`` (default 0): *pad_width*
    is an int, a ``(before, after)`` pair, or one pair per axis."""
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}: only 'constant' is supported")
    constant_values = kwargs.pop("constant_values", 0)
    if kwargs:
        raise TypeError(f"pad() got unexpected arguments {sorted(kwargs)}")
    widths = _normalize_pad_width(pad_width, array.ndim)
    cvals = np.broadcast_to(np.asarray(constant_values), (array.ndim, 2))
    if np.unique(cvals).size != 1:
        raise NotImplementedError("pad: only one constant value for all sides "
                                  "is supported")
    fill = convert_scalar(cvals.flat[0].item(), array.dtype, "pad")
    shape = []
    conditions = []
    index = []
    for i, ((lo, hi), dim) in enumerate(zip(widths, array.shape)):
        if not isinstance(dim, int):
            raise ShapeMismatchError(f"pad: axis {i} of shape {array.shape} is "
                                     "symbolic")
        shape.append(lo + dim + hi)
        var = index_var(i)
        if lo:
            conditions.append(prim.Comparison(var, ">=", lo))
        if hi:
            conditions.append(prim.Comparison(var, "<", lo + dim))
        index.append(prim.Sum((var, -lo)) if lo else var)
    access = (prim.Subscript(prim.Variable("_in0"), tuple(index)) if index
              else prim.Variable("_in0"))
    if not conditions:
        return array
    cond = conditions[0] if len(conditions) == 1 else prim.LogicalAnd(tuple(conditions))
    return IndexLambda(prim.If(cond, access, fill), tuple(shape), array.dtype,
                       {"_in0": array}, None, None, _NO_TAGS)
