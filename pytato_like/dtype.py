"""Dtype questions about lazy arrays and scalars, answered as NumPy 2 would.

Lazy arrays are not NumPy arrays, so :func:`numpy.result_type` and
:func:`numpy.can_cast` cannot take them directly; the functions here accept
:class:`~pytato_like.array.Array` operands (by their dtype) next to Python
and NumPy scalars (Python scalars weakly typed, as in NumPy 2).

.. autofunction:: result_type
.. autofunction:: can_cast
.. autofunction:: is_integer_dtype
.. autofunction:: is_floating_dtype
.. autofunction:: is_complex_dtype

.. data:: DTypeLike

    What the front end accepts as a dtype: a :class:`numpy.dtype` or
    anything :func:`numpy.dtype` takes (``"float64"``, ``np.int32``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np
from numpy.typing import DTypeLike as _NpDTypeLike

from pytato_like.array import Array
from pytato_like.diagnostic import DTypeError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "DTypeLike",
    "can_cast",
    "is_complex_dtype",
    "is_floating_dtype",
    "is_integer_dtype",
    "result_type",
]

DTypeLike: TypeAlias = _NpDTypeLike


def _as_numpy_operand(x: object) -> ArrayLike | DTypeLike:
    if isinstance(x, Array):
        return x.dtype
    if isinstance(x, (bool, int, float, complex, np.generic, np.dtype, type,
                      str, np.ndarray)):
        return x
    raise DTypeError(f"{x!r} (a {type(x).__name__}) has no dtype")


def result_type(*arrays_and_dtypes: Array | ArrayLike | DTypeLike) -> np.dtype:
    """The dtype of combining *arrays_and_dtypes* (lazy arrays, NumPy
    arrays, scalars, dtypes) in an elementwise operation."""
    return np.result_type(*(_as_numpy_operand(x) for x in arrays_and_dtypes))


def can_cast(from_: Array | DTypeLike, to: DTypeLike,
             casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"]
             = "safe") -> bool:
    """:func:`numpy.can_cast` for a lazy array (by its dtype) or a dtype."""
    source = from_.dtype if isinstance(from_, Array) else from_
    return bool(np.can_cast(source, np.dtype(to), casting=casting))


def is_integer_dtype(dtype: DTypeLike) -> bool:
    """Whether *dtype* is a signed or unsigned integer type (not bool)."""
    return np.dtype(dtype).kind in "iu"


def is_floating_dtype(dtype: DTypeLike) -> bool:
    """Whether *dtype* is a real floating-point type."""
    return np.dtype(dtype).kind == "f"


def is_complex_dtype(dtype: DTypeLike) -> bool:
    """Whether *dtype* is a complex floating-point type."""
    return np.dtype(dtype).kind == "c"
