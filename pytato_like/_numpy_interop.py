"""What NumPy may do with a lazy array: :meth:`Array.__array__`,
``__array_ufunc__`` and ``__array_function__`` (installed on
:class:`~pytato_like.array.Array` when this module is imported, by
:func:`install_numpy_protocol`).

A lazy array has no values until a program computes them, so NumPy cannot
convert it (``np.asarray(x)`` would otherwise build an object array of
nodes, element by element, without a word). The rules:

1. ``np.asarray(x)``, ``np.array(x)`` and anything else that asks for the
   values raise :class:`~pytato_like.diagnostic.LazyArrayConversionError`
   saying how to evaluate (:func:`~pytato_like.generate_numpy`,
   :func:`~pytato_like.generate_loopy`).
2. The ufuncs behind Python's operators (``np.add``, ``np.multiply``,
   ``np.less``, ``np.matmul``, ...) build the lazy result, as the operator
   does: NumPy scalars and arrays on the left of an operator call them
   (``np.float64(2) * x`` is ``np.multiply(np.float64(2), x)``), and that
   must keep working. ``np.equal`` and ``np.not_equal`` answer as ``==``
   and ``!=`` of lazy arrays do: structural equality (``pt.equal`` is the
   elementwise comparison). Called with ``out=``, ``where=`` or other options
   (``arr += x`` passes ``out=arr``) they raise: NumPy cannot store a lazy
   result.
3. Every other ufunc (``np.sin(x)``), ufunc method (``np.add.reduce``) and
   array function (``np.sum(x)``, ``np.concatenate([x, y])``) raises
   :class:`~pytato_like.diagnostic.LazyArrayConversionError` naming the
   :mod:`pytato_like` function to call instead, or, when there is none,
   how to evaluate; ``np.shape``, ``np.ndim`` and ``np.size`` answer,
   since they need no values (arraycontext calls ``np.size`` on its
   arrays).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from pytato_like._einsum import matmul
from pytato_like._frontend import binary_op
from pytato_like.array import Array
from pytato_like.diagnostic import LazyArrayConversionError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    from pytato_like.dtype import DTypeLike


class ArrayFunction(Protocol):
    """What NumPy passes to ``__array_function__``: a public function
    (``np.sum``) that keeps its plain implementation beside it."""

    __name__: str
    _implementation: Callable[..., object]

    def __call__(self, *args: object, **kwargs: object) -> object: ...

#: ufuncs of Python's binary operators -> the front end's operation name
_OPERATOR_UFUNCS: dict[np.ufunc, str] = {
    np.add: "add", np.subtract: "sub", np.multiply: "mul",
    np.true_divide: "truediv", np.floor_divide: "floordiv",
    np.remainder: "mod", np.power: "pow", np.bitwise_and: "and",
    np.bitwise_or: "or", np.bitwise_xor: "xor", np.left_shift: "lshift",
    np.right_shift: "rshift", np.less: "lt", np.less_equal: "le",
    np.greater: "gt", np.greater_equal: "ge",
}

#: other ufuncs that Python operators call: '@', divmod(), '==', '!='
_OTHER_OPERATOR_UFUNCS = frozenset({np.matmul, np.divmod, np.equal,
                                    np.not_equal})

#: NumPy names whose pytato_like counterpart has another name
_PT_NAMES = {"absolute": "abs", "conjugate": "conj", "max": "amax",
             "min": "amin", "negative": "the operator -",
             "positive": "the operator +", "invert": "the operator ~",
             "equal": "equal", "not_equal": "not_equal",
             "result_type": "dtype.result_type", "can_cast": "dtype.can_cast"}

#: ufunc reductions -> the pytato_like reduction computing them
_REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "amax",
               "minimum": "amin", "logical_and": "all", "logical_or": "any"}

_EVALUATE = ("evaluate it first: pt.generate_numpy(result)(**inputs) on the "
             "host, or pt.generate_loopy(result)(queue, **inputs) with "
             "OpenCL")


def _describe(x: Array | None) -> str:
    if x is None:  # nested deeper than _first_lazy looks
        return "a lazy array"
    name = getattr(x, "name", None)
    named = f" '{name}'" if isinstance(name, str) else ""
    return (f"{type(x).__name__}{named} of shape {x.shape}, dtype "
            f"{x.dtype}")


def _first_lazy(values: Iterable[object]) -> Array | None:
    """The first lazy array among *values* (looking one level into lists
    and tuples, where array functions take their arrays)."""
    for v in values:
        if isinstance(v, Array):
            return v
        if isinstance(v, (list, tuple)):
            for w in v:
                if isinstance(w, Array):
                    return w
    return None


#: The names :mod:`pytato_like` provides (lazy ones too), so that a refusal
#: can say ``use pt.<name>``. The package fills it when it is imported (this
#: module builds on :mod:`pytato_like.array` and cannot import the package).
PACKAGE_NAMES: set[str] = set()


def _pt_hint(numpy_name: str) -> str:
    name = _PT_NAMES.get(numpy_name, numpy_name)
    if name.startswith("the operator"):
        return f"use {name}"
    head = name.split(".")[0]
    if head in PACKAGE_NAMES:
        return f"use pt.{name} instead, which builds the result lazily"
    return _EVALUATE


def refuse_conversion(array: Array) -> LazyArrayConversionError:
    """The error for ``np.asarray(array)`` (rule 1)."""
    return LazyArrayConversionError(
        f"NumPy asked for the values of a lazy array ({_describe(array)}), "
        f"which has none until a program computes them; {_EVALUATE}. "
        "(To combine lazy arrays in a list, use pt.stack or "
        "pt.concatenate.)")


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[object, ...],
                kwargs: dict[str, object]) -> object:
    """``ufunc`` applied (by *method*) to *inputs*, at least one of them
    lazy: rules 2 and 3."""
    if method == "__call__" and len(inputs) == 2 and not kwargs:
        op_name = _OPERATOR_UFUNCS.get(ufunc)
        if op_name is not None:
            # the hot path: a NumPy scalar on the left of an operator.
            # A scalar compared with an array arrives as a 0-d array.
            a, b = inputs
            if type(a) is np.ndarray and a.ndim == 0:
                a = a[()]
            if type(b) is np.ndarray and b.ndim == 0:
                b = b[()]
            return binary_op(op_name, a, b)
        if ufunc in _OTHER_OPERATOR_UFUNCS:
            return _other_operator(ufunc, *inputs)
    lazy = _first_lazy(inputs)
    what = (f"np.{ufunc.__name__}" if method == "__call__"
            else f"np.{ufunc.__name__}.{method}")
    if method == "__call__" and len(inputs) == 2 and (
            ufunc in _OPERATOR_UFUNCS or ufunc in _OTHER_OPERATOR_UFUNCS):
        raise LazyArrayConversionError(
            f"{what} with {sorted(kwargs)} and a lazy operand "
            f"({_describe(lazy)}): NumPy cannot store a lazy result "
            "(for 'arr += x' write 'arr = arr + x')")
    if method == "reduce" and ufunc.__name__ in _REDUCTIONS:
        hint = f"use pt.{_REDUCTIONS[ufunc.__name__]} to build it lazily"
    elif method == "__call__":
        hint = _pt_hint(ufunc.__name__)
    else:
        hint = _EVALUATE
    raise LazyArrayConversionError(
        f"{what} cannot compute a lazy array ({_describe(lazy)}); {hint}")


def _other_operator(ufunc: np.ufunc, a: object, b: object) -> object:
    """``@``, ``divmod()``, ``==`` and ``!=`` with a NumPy left operand."""
    if isinstance(a, np.ndarray) and a.ndim == 0:
        a = a[()]
    if isinstance(b, np.ndarray) and b.ndim == 0:
        b = b[()]
    if ufunc is np.matmul:
        return matmul(a, b)
    if ufunc is np.divmod:
        return binary_op("floordiv", a, b), binary_op("mod", a, b)
    # '==' of lazy arrays is structural equality (pytato's rule), so
    # 'np.float64(2) == x' answers as '2.0 == x' does
    left, right = (a, b) if isinstance(a, Array) else (b, a)
    same = left.__eq__(right)
    return same if ufunc is np.equal else not same


#: array functions that need only the argument's shape
_METADATA_FUNCTIONS = frozenset({np.shape, np.ndim, np.size})


def array_function(func: ArrayFunction, args: tuple[object, ...],
                   kwargs: dict[str, object]) -> object:
    """NumPy's array function *func* called with a lazy array among
    *args*: rule 3."""
    lazy = _first_lazy((*args, *kwargs.values()))
    if func in _METADATA_FUNCTIONS:
        # NumPy's own code, which reads .shape/.ndim/.size of its argument
        return func._implementation(*args, **kwargs)
    name = func.__name__
    raise LazyArrayConversionError(
        f"np.{name} got a lazy array "
        f"({_describe(lazy)}); {_pt_hint(name)}")


def install_numpy_protocol(array_cls: type) -> None:
    """Give *array_cls* (:class:`~pytato_like.array.Array`) NumPy's
    ``__array__``, ``__array_ufunc__`` and ``__array_function__`` (rules 1
    to 3)."""

    def __array__(self: Array, dtype: DTypeLike | None = None,
                  copy: bool | None = None) -> np.ndarray:
        raise refuse_conversion(self)

    def __array_ufunc__(self: Array, ufunc: np.ufunc, method: str,
                        *inputs: object, **kwargs: object) -> object:
        # a NumPy scalar on the left of an operator comes here, a hot path
        # of graph construction
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self: Array, func: ArrayFunction,
                           types: Collection[type],
                           args: tuple[object, ...],
                           kwargs: dict[str, object]) -> object:
        return array_function(func, args, kwargs)

    array_cls.__array__ = __array__  # type: ignore[attr-defined]
    array_cls.__array_ufunc__ = __array_ufunc__  # type: ignore[attr-defined]
    array_cls.__array_function__ = __array_function__  # type: ignore[attr-defined]


install_numpy_protocol(Array)
