"""Elementwise operations with NumPy 2 semantics, built as index lambdas.

The dtype rules come from NumPy itself: ``ufunc.resolve_dtypes`` tells, for
the operand dtypes (Python scalars passed as the weak types ``int``,
``float``, ``complex``), which dtype each operand is converted to and what
the result dtype is. Every conversion is written into the scalar expression
as an explicit :class:`~pytato_like.scalar_expr.TypeCast`, and scalar
constants are stored as NumPy scalars of their converted dtype, so the IR
says exactly what NumPy would compute and any target can follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar, overload

import numpy as np
import pymbolic.primitives as prim

from pytato_like._shapes import get_shape_after_broadcasting, is_one
from pytato_like.array import (
    NO_TAGS,
    SUPPORTED_DTYPES,
    Array,
    IndexLambda,
    make_data_wrapper,
    supported_dtype,
)
from pytato_like.diagnostic import (
    BooleanSubtractError,
    DTypeError,
    InvalidOperandError,
    ScalarOverflowError,
)
from pytato_like.scalar_expr import C99_FUNCTION_PREFIX, TypeCast, index_var

if TYPE_CHECKING:
    from pymbolic.typing import Expression
    from pymbolic.typing import Scalar as ScalarValue
    from typing_extensions import TypeIs

    from pytato_like.dtype import DTypeLike

    #: a number an elementwise operation takes as it is
    ScalarOperand = int | float | complex | bool | np.generic

Scalar = (int, float, complex, bool, np.generic)

#: what the builder of a memoized elementwise operation returns (an array,
#: or a NumPy scalar when no operand is an array)
ResultT = TypeVar("ResultT")


def is_scalar(x: object) -> TypeIs[ScalarOperand]:
    return isinstance(x, Scalar) and not isinstance(x, np.ndarray)


def as_operand(x: object) -> Array | ScalarOperand:
    """Arrays and scalars pass through; NumPy arrays, and lists and tuples
    (converted as :func:`numpy.asarray` converts them: ``[1, 2]`` is an
    ``int64`` array, whatever the other operand's dtype) become data
    wrappers."""
    if isinstance(x, Array) or is_scalar(x):
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        return make_data_wrapper(_sequence_as_array(x))
    raise InvalidOperandError(
        f"cannot use {_short_repr(x)} (a {type(x).__name__}) as an array "
        "operand: operands are arrays, numbers, or lists of numbers")


def _short_repr(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _sequence_as_array(x: np.ndarray | list | tuple) -> np.ndarray:
    """*x* as :func:`numpy.asarray` converts it, refusing what no target
    computes with (ragged lists, strings, objects) with a typed error."""
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except ValueError as err:  # ragged nesting
            raise InvalidOperandError(
                f"operand {_short_repr(x)} does not convert to an array: "
                f"{err}") from err
    if arr.dtype.kind in "OUSV":
        raise InvalidOperandError(
            f"operand {_short_repr(x)} converts to an array of dtype "
            f"{arr.dtype}, which no target computes with")
    return arr


def _resolution_dtype(x: object) -> np.dtype | type:
    """What ``resolve_dtypes`` should see for operand *x*."""
    if isinstance(x, Array):
        return x.dtype
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(x, np.generic):
        return x.dtype
    if isinstance(x, int):
        return int
    if isinstance(x, float):
        return float
    if isinstance(x, complex):
        return complex
    raise InvalidOperandError(f"unsupported operand {_short_repr(x)} (a "
                              f"{type(x).__name__})")


@lru_cache(maxsize=4096)
def _resolve(ufunc: np.ufunc, in_types: tuple) -> tuple[np.dtype, ...]:
    return ufunc.resolve_dtypes((*in_types, None))


def resolve_dtypes(ufunc: np.ufunc, operands: tuple, what: str) -> tuple[np.dtype, ...]:
    """``(operand dtypes..., result dtype)`` as NumPy resolves them for
    *ufunc*; raises :class:`DTypeError` naming the dtypes if NumPy refuses."""
    in_types = tuple(_resolution_dtype(x) for x in operands)
    try:
        return _resolve(ufunc, in_types)
    except (TypeError, np.exceptions.DTypePromotionError) as err:
        names = ", ".join(str(t) if isinstance(t, np.dtype) else
                          f"Python {t.__name__}" for t in in_types)
        if ufunc is np.subtract and all(
                isinstance(t, np.dtype) and t.kind == "b" for t in in_types):
            raise BooleanSubtractError(
                f"{what} is not supported for dtypes ({names}): use '^' or "
                "logical_xor for booleans") from err
        raise DTypeError(f"{what} is not supported for dtypes ({names})") from err


def convert_scalar(value: ScalarOperand, dtype: np.dtype, what: str
                   ) -> ScalarValue:
    """*value* as a NumPy scalar of *dtype*, refusing out-of-range Python
    integers as NumPy 2 does."""
    try:
        return dtype.type(value)
    except OverflowError as err:
        raise ScalarOverflowError(f"Python integer {value} is out of bounds "
                                  f"for {dtype} in {what}") from err


@lru_cache(maxsize=4096)
def _subscript_template(name: str, operand_shape: tuple, result_ndim: int,
                        broadcast_mask: tuple[bool, ...]):
    if not operand_shape:
        return prim.Variable(name)
    offset = result_ndim - len(operand_shape)
    return prim.Subscript(prim.Variable(name), tuple(
        0 if bcast else index_var(offset + i)
        for i, bcast in enumerate(broadcast_mask)))


def broadcast_access(name: str, ary: Array, result_shape: tuple):
    """The expression reading *ary* (bound as *name*) at the current index of
    an index lambda of *result_shape*, with NumPy broadcasting."""
    offset = len(result_shape) - ary.ndim
    mask = tuple(is_one(d) and not is_one(result_shape[offset + i])
                 for i, d in enumerate(ary.shape))
    shape_key = tuple(d if isinstance(d, int) else None for d in ary.shape)
    return _subscript_template(name, shape_key, len(result_shape), mask)


def cast_to(expr, from_dtype: np.dtype, to_dtype: np.dtype):
    if from_dtype == to_dtype:
        return expr
    return TypeCast(to_dtype, expr)


class ElementwiseBuilder:
    """Collects operands of one elementwise index lambda: binds arrays to
    ``_in<k>`` (the same array once) and turns scalars into constants."""

    def __init__(self, operands: tuple, result_shape: tuple, what: str) -> None:
        self.result_shape = result_shape
        self.what = what
        self.bindings: dict[str, Array] = {}
        self._names: dict[int, str] = {}
        self.operands = operands

    def access(self, x: Array | ScalarOperand, to_dtype: np.dtype) -> Expression:
        if isinstance(x, Array):
            name = self._names.get(id(x))
            if name is None:
                name = f"_in{len(self.bindings)}"
                self._names[id(x)] = name
                self.bindings[name] = x
            return cast_to(broadcast_access(name, x, self.result_shape),
                           x.dtype, to_dtype)
        return convert_scalar(x, to_dtype, self.what)

    def build(self, expr, dtype: np.dtype) -> IndexLambda:
        if dtype not in SUPPORTED_DTYPES:
            # e.g. NumPy's sqrt of int8 is float16, which no target computes
            operands = ", ".join(
                f"{x.dtype} array of shape {x.shape}" if isinstance(x, Array)
                else type(x).__name__ for x in self.operands)
            raise DTypeError(
                f"{self.what} of ({operands}) has dtype {dtype}, which is not "
                "supported; convert the operands first (e.g. .astype(np.float32))")
        return IndexLambda(expr, self.result_shape, dtype, self.bindings,
                           None, None, NO_TAGS)


# {{{ binary operations

def _negated(expr, dtype: np.dtype):
    """``-expr`` in *dtype* without an out-of-range constant: unsigned
    integers multiply by the all-ones value, which wraps like negation."""
    if isinstance(expr, np.generic) and dtype.kind in "ifc":
        with np.errstate(over="ignore"):  # -(min int) wraps, as a - b does
            return np.negative(expr)
    if dtype.kind == "u":
        return prim.Product((dtype.type(np.iinfo(dtype).max), expr))
    return prim.Product((dtype.type(-1), expr))


def _maximum_expr(a, b, dtype):
    if dtype.kind in "fc":
        # NaN in either operand fails both comparisons and yields a + b = NaN
        return prim.If(prim.Comparison(a, ">", b), a,
                       prim.If(prim.Comparison(a, "<=", b), b, prim.Sum((a, b))))
    return prim.If(prim.Comparison(a, ">", b), a, b)


def _minimum_expr(a, b, dtype):
    if dtype.kind in "fc":
        return prim.If(prim.Comparison(a, "<", b), a,
                       prim.If(prim.Comparison(a, ">=", b), b, prim.Sum((a, b))))
    return prim.If(prim.Comparison(a, "<", b), a, b)


def c99_call(name):
    fn = prim.Variable(C99_FUNCTION_PREFIX + name)
    return lambda *args: prim.Call(fn, args)


# op name -> (ufunc, expression builder taking (a, b, operand dtype))
BINARY_OPS: dict[str, tuple[np.ufunc, Callable[..., Expression]]] = {
    "add": (np.add, lambda a, b, dt: prim.Sum((a, b))),
    "sub": (np.subtract, lambda a, b, dt: prim.Sum((a, _negated(b, dt)))),
    "mul": (np.multiply, lambda a, b, dt: prim.Product((a, b))),
    "truediv": (np.true_divide, lambda a, b, dt: prim.Quotient(a, b)),
    "floordiv": (np.floor_divide, lambda a, b, dt: prim.FloorDiv(a, b)),
    "mod": (np.remainder, lambda a, b, dt: prim.Remainder(a, b)),
    "pow": (np.power, lambda a, b, dt: prim.Power(a, b)),
    "and": (np.bitwise_and, lambda a, b, dt: prim.BitwiseAnd((a, b))),
    "or": (np.bitwise_or, lambda a, b, dt: prim.BitwiseOr((a, b))),
    "xor": (np.bitwise_xor, lambda a, b, dt: prim.BitwiseXor((a, b))),
    "lshift": (np.left_shift, lambda a, b, dt: prim.LeftShift(a, b)),
    "rshift": (np.right_shift, lambda a, b, dt: prim.RightShift(a, b)),
    "lt": (np.less, lambda a, b, dt: prim.Comparison(a, "<", b)),
    "le": (np.less_equal, lambda a, b, dt: prim.Comparison(a, "<=", b)),
    "gt": (np.greater, lambda a, b, dt: prim.Comparison(a, ">", b)),
    "ge": (np.greater_equal, lambda a, b, dt: prim.Comparison(a, ">=", b)),
    "eq": (np.equal, lambda a, b, dt: prim.Comparison(a, "==", b)),
    "ne": (np.not_equal, lambda a, b, dt: prim.Comparison(a, "!=", b)),
    "logical_and": (np.logical_and, lambda a, b, dt: prim.LogicalAnd((a, b))),
    "logical_or": (np.logical_or, lambda a, b, dt: prim.LogicalOr((a, b))),
    "maximum": (np.maximum, _maximum_expr),
    "minimum": (np.minimum, _minimum_expr),
    "arctan2": (np.arctan2, lambda a, b, dt: c99_call("atan2")(a, b)),
}

def operator_symbol(op_name: str) -> str:
    """How the user wrote operation *op_name* (``"+"`` for ``"add"``)."""
    return _SYMBOL.get(op_name, op_name)


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//",
           "mod": "%", "pow": "**", "and": "&", "or": "|", "xor": "^",
           "lshift": "<<", "rshift": ">>", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!="}


# Building the expression and resolving dtypes dominates construction time,
# and programs repeat the same few operation signatures many times, so the
# (expression, dtype, shape) of an elementwise operation is memoized per
# signature: the operation and, per operand, dtype and shape of an array (or
# which earlier operand it is) or type and value of a scalar. Arrays are
# bound as _in0, _in1, ... in order of first occurrence, so the expression
# does not depend on which arrays are combined.
_ELEMENTWISE_MEMO: dict[tuple, tuple] = {}
_CACHEABLE_SCALARS = frozenset({int, float, bool, np.float64, np.float32,
                                np.int64, np.int32})


def memoized_elementwise(operation: tuple, operands: tuple,
                         build: Callable[[], ResultT]) -> ResultT | IndexLambda:
    """``build()``, or a copy of its memoized expression bound to
    *operands* when an operation of the same signature was built before."""
    # one pass builds the key and the bindings (this is the hot path of
    # graph construction)
    key: list[Hashable] = [operation]
    arrays: list[Array] = []
    for x in operands:
        if isinstance(x, Array):
            for k, seen in enumerate(arrays):
                if seen is x:
                    key.append(k)
                    break
            else:
                key.append((x.dtype, x.shape))
                arrays.append(x)
        else:
            tx = type(x)
            # NaN never equals itself and -0.0 equals 0.0: not memoized
            if tx in _CACHEABLE_SCALARS and x == x and (x != 0 or tx is not float):
                key.append((tx, x))
            else:
                return build()
    signature = tuple(key)
    cached = _ELEMENTWISE_MEMO.get(signature)
    if cached is not None:
        expr, dtype, shape = cached
        bindings = (dict(zip(_BINDING_NAMES, arrays))
                    if len(arrays) <= len(_BINDING_NAMES)
                    else {_binding_name(k): a for k, a in enumerate(arrays)})
        return IndexLambda(expr, shape, dtype, bindings, None, None, NO_TAGS)
    result = build()
    # e.g. a comparison decided by the scalar alone binds no array; a
    # shape with size parameters is not kept (a later call would get this
    # call's size parameter objects: an equal DAG with other sharing,
    # hence another cache key)
    if (isinstance(result, IndexLambda) and len(result.bindings) == len(arrays)
            and all(type(d) is int for d in result.shape)):
        if len(_ELEMENTWISE_MEMO) > 100_000:
            _ELEMENTWISE_MEMO.clear()
        _ELEMENTWISE_MEMO[signature] = (result.expr, result.dtype, result.shape)
    return result


def _binding_name(k: int) -> str:
    """The name ElementwiseBuilder gives the *k*-th distinct array."""
    return _BINDING_NAMES[k] if k < len(_BINDING_NAMES) else f"_in{k}"


_BINDING_NAMES = tuple(f"_in{k}" for k in range(8))


_COMPARISON_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
_COMPARE = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
            "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
            "eq": lambda x, y: x == y, "ne": lambda x, y: x != y}


def _comparison_decided_by_range(op_name, a, b, dt_a, dt_b) -> bool | None:
    """NumPy 2 compares integer arrays with any Python int exactly, even one
    the array's dtype cannot hold: then every element compares the same way
    as the dtype's bounds do. Returns that common answer, or None."""
    for scalar, dtype, scalar_first in ((b, dt_b, False), (a, dt_a, True)):
        if type(scalar) is not int or dtype.kind not in "iu":
            continue
        info = np.iinfo(dtype)
        if info.min <= scalar <= info.max:
            return None
        bound = int(info.max) if scalar > info.max else int(info.min)
        x, y = (scalar, bound) if scalar_first else (bound, scalar)
        return _COMPARE[op_name](x, y)
    return None


def binary_op(op_name: str, a: object, b: object) -> Array | np.generic:
    """``a <op> b`` with NumPy broadcasting and dtype promotion."""
    return memoized_elementwise((op_name,), (a, b),
                                lambda: _binary_op_uncached(op_name, a, b))


def _binary_op_uncached(op_name: str, a: object, b: object) -> Array | np.generic:
    ufunc, make_expr = BINARY_OPS[op_name]
    a = as_operand(a)
    b = as_operand(b)
    if not isinstance(a, Array) and not isinstance(b, Array):
        return ufunc(a, b)
    what = f"operator '{_SYMBOL.get(op_name, op_name)}'"
    dt_a, dt_b, dt_out = resolve_dtypes(ufunc, (a, b), what)
    shape = get_shape_after_broadcasting((a, b))
    if op_name in _COMPARISON_OPS:
        decided = _comparison_decided_by_range(op_name, a, b, dt_a, dt_b)
        if decided is not None:
            return IndexLambda(np.bool_(decided), shape, dt_out, {}, None, None,
                               NO_TAGS)
    builder = ElementwiseBuilder((a, b), shape, what)
    expr = make_expr(builder.access(a, dt_a), builder.access(b, dt_b), dt_a)
    return builder.build(expr, dt_out)


def unary_op(op_name: str, x: Array) -> Array:
    """``-x``, ``+x``, ``~x``."""
    return memoized_elementwise(("unary", op_name), (x,),
                                lambda: _unary_op_uncached(op_name, x))


def _unary_op_uncached(op_name: str, x: Array) -> Array:
    ufunc = {"neg": np.negative, "pos": np.positive, "invert": np.invert}[op_name]
    dt_in, dt_out = resolve_dtypes(ufunc, (x,), f"unary '{op_name}'")
    if op_name == "pos":
        return x
    builder = ElementwiseBuilder((x,), x.shape, op_name)
    access = builder.access(x, dt_in)
    if op_name == "neg":
        expr = _negated(access, dt_in)
    elif dt_in.kind == "b":
        expr = prim.LogicalNot(access)  # ~ on booleans is logical negation
    else:
        expr = prim.BitwiseNot(access)
    return builder.build(expr, dt_out)


def apply_ufunc(c99_name: str, ufunc: np.ufunc, *args: object) -> Array | np.generic:
    """Elementwise math function *ufunc*, written as a call of
    ``pytato.c99.<c99_name>`` with NumPy's argument conversions."""
    operands = tuple(as_operand(x) for x in args)
    if not any(isinstance(x, Array) for x in operands):
        return ufunc(*operands)
    what = f"{ufunc.__name__}()"
    *dt_in, dt_out = resolve_dtypes(ufunc, operands, what)
    shape = get_shape_after_broadcasting(operands)
    builder = ElementwiseBuilder(operands, shape, what)
    expr = c99_call(c99_name)(*(builder.access(x, dt)
                                for x, dt in zip(operands, dt_in)))
    return builder.build(expr, dt_out)


def astype(x: Array, dtype: DTypeLike) -> Array:
    """*x* converted elementwise to *dtype* (NumPy's unsafe casting)."""
    dtype = supported_dtype(dtype, f"astype of an array of shape {x.shape}")
    if x.dtype == dtype:
        return x
    builder = ElementwiseBuilder((x,), x.shape, "astype")
    return builder.build(builder.access(x, dtype), dtype)


@overload
def where(condition: Array, x: object = None, y: object = None) -> Array: ...
@overload
def where(condition: object, x: Array, y: object = None) -> Array: ...
@overload
def where(condition: object, x: object, y: Array) -> Array: ...
@overload
def where(condition: object, x: object = None, y: object = None
          ) -> Array | np.ndarray: ...
def where(condition: object, x: object = None, y: object = None
          ) -> Array | np.ndarray:
    """Elements of *x* where *condition* holds, else of *y* (a NumPy array
    when none of them is an array)."""
    if x is None or y is None:
        raise DTypeError("where() with one argument (nonzero) has a "
                         "data-dependent shape and is not supported")
    c_op, x_op, y_op = as_operand(condition), as_operand(x), as_operand(y)
    return memoized_elementwise(("where",), (c_op, x_op, y_op),
                                lambda: _where_uncached(c_op, x_op, y_op))


def _where_uncached(condition: Array | ScalarOperand, x: Array | ScalarOperand,
                    y: Array | ScalarOperand) -> Array | np.ndarray:
    try:
        dtype = np.result_type(*(v.dtype if isinstance(v, Array) else v
                                 for v in (x, y)))
    except (TypeError, np.exceptions.DTypePromotionError) as err:
        raise DTypeError(f"where() cannot combine {x!r} and {y!r}") from err
    shape = get_shape_after_broadcasting((condition, x, y))
    if not (isinstance(condition, Array) or isinstance(x, Array)
            or isinstance(y, Array)):
        return np.where(condition, x, y)
    builder = ElementwiseBuilder((condition, x, y), shape, "where()")
    cond_dtype = condition.dtype if isinstance(condition, Array) else np.dtype(bool)
    expr = prim.If(builder.access(condition, cond_dtype),
                   builder.access(x, dtype), builder.access(y, dtype))
    return builder.build(expr, dtype)


# {{{ Python's operators on Array

# lists and tuples are converted as np.asarray converts them
_OPERAND_TYPES = (int, float, complex, bool, np.generic, np.ndarray, list, tuple)
# operands no operator takes, whatever methods their classes have
_NEVER_OPERANDS = (str, bytes, type(None), dict, set, frozenset, slice)
_REFLECTED_NAME = {"lt": "__gt__", "le": "__ge__", "gt": "__lt__",
                   "ge": "__le__"}


def _refuse_operand(op_name: str, array: Array, other: object) -> InvalidOperandError:
    text = repr(other)
    if len(text) > 40:
        text = text[:37] + "..."
    return InvalidOperandError(
        f"operator '{operator_symbol(op_name)}' between a lazy array (shape "
        f"{array.shape}, dtype {array.dtype}) and {text} (a "
        f"{type(other).__name__}): operands are arrays, numbers, or lists "
        "of numbers")


def _binary_operator(op_name: str, reflected: bool):
    reflected_name = _REFLECTED_NAME.get(op_name, f"__r{op_name}__")
    if reflected:
        def method(self, other):
            if not isinstance(other, _OPERAND_TYPES) and not isinstance(other, Array):
                # the other operand's own method has refused already
                raise _refuse_operand(op_name, self, other)
            return binary_op(op_name, other, self)
    else:
        def method(self, other):
            if not isinstance(other, Array) and not isinstance(other, _OPERAND_TYPES):
                if (not isinstance(other, _NEVER_OPERANDS)
                        and hasattr(type(other), reflected_name)):
                    return NotImplemented  # its reflected method may know us
                raise _refuse_operand(op_name, self, other)
            return binary_op(op_name, self, other)
    method.__name__ = f"__{'r' if reflected else ''}{op_name}__"
    return method


def _unary_operator(op_name: str):
    def method(self):
        return unary_op(op_name, self)
    method.__name__ = f"__{op_name}__"
    return method


def install_operators(array_cls: type) -> None:
    """Give *array_cls* (:class:`~pytato_like.array.Array`) Python's
    arithmetic, bitwise, comparison and unary operators, built lazily by
    :func:`binary_op` and :func:`unary_op`."""
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                 "and", "or", "xor", "lshift", "rshift"):
        setattr(array_cls, f"__{name}__", _binary_operator(name, reflected=False))
        setattr(array_cls, f"__r{name}__", _binary_operator(name, reflected=True))
    for name in ("lt", "le", "gt", "ge"):
        setattr(array_cls, f"__{name}__", _binary_operator(name, reflected=False))
    for name in ("neg", "pos", "invert"):
        setattr(array_cls, f"__{name}__", _unary_operator(name))


install_operators(Array)

# }}}
