"""Elementwise math functions and comparisons, following NumPy.

Each function accepts arrays and scalars; with only scalar arguments it
returns NumPy's result. Math functions become calls of
``pytato.c99.<name>`` in the scalar expression; :data:`C99_TO_NUMPY` maps
those names back to NumPy ufuncs for the reference executor.

.. autofunction:: abs
.. autofunction:: sqrt
.. autofunction:: exp
.. autofunction:: log
.. autofunction:: log10
.. autofunction:: sin
.. autofunction:: cos
.. autofunction:: tan
.. autofunction:: arcsin
.. autofunction:: arccos
.. autofunction:: arctan
.. autofunction:: arctan2
.. autofunction:: sinh
.. autofunction:: cosh
.. autofunction:: tanh
.. autofunction:: conj
.. autofunction:: real
.. autofunction:: imag
.. autofunction:: isnan
.. autofunction:: maximum
.. autofunction:: minimum
.. autofunction:: where
.. autofunction:: equal
.. autofunction:: not_equal
.. autofunction:: less
.. autofunction:: less_equal
.. autofunction:: greater
.. autofunction:: greater_equal
.. autofunction:: logical_and
.. autofunction:: logical_or
.. autofunction:: logical_not
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast, overload

import numpy as np
import pymbolic.primitives as prim

from pytato_like._creation import zeros_like
from pytato_like._frontend import (
    ElementwiseBuilder,
    c99_call,
    apply_ufunc,
    as_operand,
    binary_op,
    where,  # noqa: F401  (re-exported: where() belongs with the elementwise functions)
)
from pytato_like.array import Array

if TYPE_CHECKING:
    from pytato_like.array import Operand

#: C99 function name used in scalar expressions -> NumPy ufunc.
C99_TO_NUMPY: dict[str, Callable[..., np.ndarray | np.generic]] = {
    "abs": np.absolute, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
    "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "conj": np.conjugate, "real": np.real, "imag": np.imag, "isnan": np.isnan,
}


class _UnaryFunction(Protocol):
    """An elementwise function: an array for an array, a NumPy scalar for
    a scalar."""

    @overload
    def __call__(self, x: Array, /) -> Array: ...
    @overload
    def __call__(self, x: Operand, /) -> Array | np.generic: ...


def _unary(c99_name: str, ufunc: np.ufunc) -> _UnaryFunction:
    def fn(x: Operand) -> Array | np.generic:
        return apply_ufunc(c99_name, ufunc, x)
    fn.__name__ = ufunc.__name__
    fn.__doc__ = f"Elementwise :func:`numpy.{ufunc.__name__}`."
    return cast(_UnaryFunction, fn)


abs = _unary("abs", np.absolute)  # noqa: A001
sqrt = _unary("sqrt", np.sqrt)
exp = _unary("exp", np.exp)
log = _unary("log", np.log)
log10 = _unary("log10", np.log10)
sin = _unary("sin", np.sin)
cos = _unary("cos", np.cos)
tan = _unary("tan", np.tan)
arcsin = _unary("asin", np.arcsin)
arccos = _unary("acos", np.arccos)
arctan = _unary("atan", np.arctan)
sinh = _unary("sinh", np.sinh)
cosh = _unary("cosh", np.cosh)
tanh = _unary("tanh", np.tanh)
isnan = _unary("isnan", np.isnan)


def arctan2(x1: Operand, x2: Operand) -> Array | np.generic:
    """Elementwise :func:`numpy.arctan2`."""
    return binary_op("arctan2", x1, x2)


@overload
def conj(x: Array) -> Array: ...
@overload
def conj(x: Operand) -> Array | np.generic: ...


def conj(x: Operand) -> Array | np.generic:
    """Complex conjugate; real arrays are returned unchanged."""
    x = as_operand(x)
    if isinstance(x, Array) and x.dtype.kind != "c":
        # NumPy's conjugate of booleans is int8 (its only bool-less loop)
        return x.astype(np.int8) if x.dtype.kind == "b" else x
    return apply_ufunc("conj", np.conjugate, x)


@overload
def real(x: Array) -> Array: ...
@overload
def real(x: Operand) -> Array | np.generic | complex: ...


def real(x: Operand) -> Array | np.generic | complex:
    """Real part; real arrays are returned unchanged."""
    # (a Python number's part is a Python number, as np.real gives it)
    x = as_operand(x)
    if not isinstance(x, Array):
        return np.real(x)
    if x.dtype.kind != "c":
        return x
    builder = ElementwiseBuilder((x,), x.shape, "real()")
    return builder.build(c99_call("real")(builder.access(x, x.dtype)),
                         np.empty(0, x.dtype).real.dtype)


@overload
def imag(x: Array) -> Array: ...
@overload
def imag(x: Operand) -> Array | np.generic | complex: ...


def imag(x: Operand) -> Array | np.generic | complex:
    """Imaginary part; zeros for real arrays."""
    x = as_operand(x)
    if not isinstance(x, Array):
        return np.imag(x)
    if x.dtype.kind != "c":
        return zeros_like(x)
    builder = ElementwiseBuilder((x,), x.shape, "imag()")
    return builder.build(c99_call("imag")(builder.access(x, x.dtype)),
                         np.empty(0, x.dtype).imag.dtype)


def _binary(op_name: str, doc: str):
    def fn(x1: Operand, x2: Operand) -> Array | np.generic:
        return binary_op(op_name, x1, x2)
    fn.__name__ = doc
    fn.__doc__ = f"Elementwise :func:`numpy.{doc}`."
    return fn


maximum = _binary("maximum", "maximum")
minimum = _binary("minimum", "minimum")
equal = _binary("eq", "equal")
not_equal = _binary("ne", "not_equal")
less = _binary("lt", "less")
less_equal = _binary("le", "less_equal")
greater = _binary("gt", "greater")
greater_equal = _binary("ge", "greater_equal")
logical_and = _binary("logical_and", "logical_and")
logical_or = _binary("logical_or", "logical_or")


def logical_not(x: Operand) -> Array:
    """Elementwise :func:`numpy.logical_not`."""
    x = as_operand(x)
    if not isinstance(x, Array):
        return np.logical_not(x)
    builder = ElementwiseBuilder((x,), x.shape, "logical_not()")
    expr = prim.LogicalNot(builder.access(x, np.dtype(bool)))
    return builder.build(expr, np.dtype(bool))

