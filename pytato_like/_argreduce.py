"""``argmax``/``argmin`` as NumPy defines them, built from existing nodes.

The index of the first occurrence of the extreme value is the smallest
position whose entry equals the extreme (a ``max``/``min`` reduction
followed by a ``min`` over positions), so every target that runs
reductions runs these, with no new node kind. NaN rule (NumPy's): NaN
counts as the extreme, so the first NaN wins; ``max``/``min`` propagate
NaN, and a position holding NaN counts as a hit. Complex values are
ordered as NumPy orders them: by real part, then by imaginary part, an
entry with a NaN in either part counting as the extreme.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from pytato_like._creation import arange
from pytato_like.array import Array, make_data_wrapper
from pytato_like.cmath import (
    equal,
    imag,
    isnan,
    logical_and,
    logical_or,
    real,
    where,
)
from pytato_like.diagnostic import AxisError, DTypeError, EmptyReductionError
from pytato_like.reductions import amax, amin
from pytato_like.reductions import any as any_

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike


def _arg_extreme(a: Array | ArrayLike, axis: SupportsIndex | None,
                 keepdims: bool, which: str) -> Array:
    if not isinstance(a, Array):
        a = make_data_wrapper(np.asarray(a))
    if a.dtype.kind not in "biufc":
        raise DTypeError(f"arg{which} of array of dtype {a.dtype} "
                         "is not supported")
    if axis is None:
        # over the flattened array; keepdims gives every axis length 1
        flat = _arg_extreme(a.reshape(-1), 0, False, which)
        return flat.reshape((1,) * a.ndim) if keepdims else flat
    axis = int(axis)
    if not -a.ndim <= axis < a.ndim:
        raise AxisError(f"axis {axis} is out of bounds for array of shape "
                        f"{a.shape}")
    axis %= a.ndim
    n = a.shape[axis]
    if not isinstance(n, int):
        raise AxisError(f"arg{which} along axis {axis} of shape {a.shape}: "
                        "the axis length must be known")
    if n == 0:
        raise EmptyReductionError(f"attempt to get arg{which} of an empty "
                                  f"sequence (shape {a.shape})")
    reduce = amax if which == "max" else amin
    if a.dtype.kind == "c":
        hit = _complex_hits(a, axis, reduce, which)
    else:
        extreme = reduce(a, axis=axis, keepdims=True)
        hit = equal(a, extreme)
        if a.dtype.kind == "f":
            hit = logical_or(hit, isnan(a))
    position = arange(n, dtype=np.int64).reshape(
        tuple(n if k == axis else 1 for k in range(a.ndim)))
    return amin(where(hit, position, np.int64(n)), axis=axis,
                keepdims=keepdims)


def _complex_hits(a: Array, axis: int, reduce: Callable[..., Array],
                  which: str) -> Array:
    """Where complex *a* holds its extreme along *axis* in NumPy's order:
    by real part, then imaginary part; an entry with a NaN part is the
    extreme, so when the axis has one, only NaN entries are hits."""
    re, im = real(a), imag(a)
    nan = logical_or(isnan(re), isnan(im))
    best_re = reduce(re, axis=axis, keepdims=True)
    on_best_re = equal(re, best_re)
    # the extreme imaginary part among the entries of the extreme real part
    beyond = -np.inf if which == "max" else np.inf
    best_im = reduce(where(on_best_re, im, beyond), axis=axis, keepdims=True)
    hit = logical_and(on_best_re, equal(im, best_im))
    has_nan = any_(nan, axis=axis, keepdims=True)
    return where(has_nan, nan, hit)


def argmax(a: Array | ArrayLike, axis: SupportsIndex | None = None,
           keepdims: bool = False) -> Array:
    """Index of the first largest entry, as :func:`numpy.argmax` (int64)."""
    return _arg_extreme(a, axis, keepdims, "max")


def argmin(a: Array | ArrayLike, axis: SupportsIndex | None = None,
           keepdims: bool = False) -> Array:
    """Index of the first smallest entry, as :func:`numpy.argmin` (int64)."""
    return _arg_extreme(a, axis, keepdims, "min")
