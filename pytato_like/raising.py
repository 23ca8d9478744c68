"""Recognising the NumPy-level operation behind an index lambda.

The front end lowers every elementwise operation, broadcast, ``where``,
math-library call and reduction to an :class:`~pytato_like.array.IndexLambda`.
:func:`index_lambda_to_high_level_op` goes the other way: it reads the
lambda's scalar expression and returns the operation it computes as one of
the small records below (pytato's "raising"), so analyses and printers can
speak of ``x + y`` or ``sum(x, axis=1)`` instead of scalar expressions.

The recogniser works in these steps:

1. Type casts are dropped (a cast operand still names the same array).
2. A constant is a :class:`FullOp`.
3. A two-operand arithmetic, bitwise, logical or comparison expression whose
   operands are constants or broadcast reads of bound arrays is a
   :class:`BinaryOp` (``a + (-1)*b`` is recognised as subtraction).
4. A call of a ``pytato.c99.*`` function on such operands is a
   :class:`C99CallOp`; an ``If`` is a :class:`WhereOp`; a logical negation
   a :class:`LogicalNotOp`.
5. A reduction reading one bound array with plain index variables, bounds
   running over whole axes, is a :class:`ReduceOp`.
6. A broadcast read of one bound array is a :class:`BroadcastOp`.

Anything else raises :class:`~pytato_like.diagnostic.UnknownIndexLambdaExpr`.

.. autoclass:: HighLevelOp
.. autoclass:: FullOp
.. autoclass:: BinaryOpType
.. autoclass:: BinaryOp
.. autoclass:: C99CallOp
.. autoclass:: WhereOp
.. autoclass:: BroadcastOp
.. autoclass:: LogicalNotOp
.. autoclass:: ReduceOp
.. autofunction:: index_lambda_to_high_level_op
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pymbolic.primitives as prim
from constantdict import constantdict

from pytato_like.array import Array, IndexLambda
from pytato_like.diagnostic import UnknownIndexLambdaExpr
from pytato_like.scalar_expr import (
    C99_FUNCTION_PREFIX,
    IdentityMapper,
    Reduce,
    TypeCast,
    index_var,
    is_scalar_constant,
)
from pytato_like.utils import are_shape_components_equal, get_indexing_expression

if TYPE_CHECKING:
    from pymbolic.typing import Expression, Scalar

    from pytato_like.reductions import ReductionOperation

    #: an operand of a recognised operation: a bound array or a constant
    HighLevelOperand = Array | Scalar

__all__ = [
    "BinaryOp",
    "BinaryOpType",
    "BroadcastOp",
    "C99CallOp",
    "FullOp",
    "HighLevelOp",
    "LogicalNotOp",
    "ReduceOp",
    "WhereOp",
    "index_lambda_to_high_level_op",
]


# {{{ the operation records

class HighLevelOp:
    """Base class of the operations an index lambda can be recognised as."""


@dataclasses.dataclass(frozen=True)
class FullOp(HighLevelOp):
    """Every entry is :attr:`fill_value`."""

    fill_value: Scalar


class BinaryOpType(enum.Enum):
    """The binary operators a :class:`BinaryOp` can apply."""

    ADD = enum.auto()
    SUB = enum.auto()
    MULT = enum.auto()
    LOGICAL_OR = enum.auto()
    LOGICAL_AND = enum.auto()
    BITWISE_OR = enum.auto()
    BITWISE_AND = enum.auto()
    BITWISE_XOR = enum.auto()
    TRUEDIV = enum.auto()
    FLOORDIV = enum.auto()
    POWER = enum.auto()
    MOD = enum.auto()
    LESS = enum.auto()
    LESS_EQUAL = enum.auto()
    GREATER = enum.auto()
    GREATER_EQUAL = enum.auto()
    EQUAL = enum.auto()
    NOT_EQUAL = enum.auto()


@dataclasses.dataclass(frozen=True)
class BinaryOp(HighLevelOp):
    """``x1 <binary_op> x2`` with NumPy broadcasting; operands are arrays or
    scalars."""

    binary_op: BinaryOpType
    x1: HighLevelOperand
    x2: HighLevelOperand


@dataclasses.dataclass(frozen=True)
class C99CallOp(HighLevelOp):
    """The C99 math function :attr:`function` (e.g. ``"sin"``, ``"atan2"``)
    applied elementwise to :attr:`args`."""

    function: str
    args: tuple[HighLevelOperand, ...]


@dataclasses.dataclass(frozen=True)
class WhereOp(HighLevelOp):
    """``where(condition, then, else_)``."""

    condition: HighLevelOperand
    then: HighLevelOperand
    else_: HighLevelOperand


@dataclasses.dataclass(frozen=True)
class BroadcastOp(HighLevelOp):
    """:attr:`x` broadcast to the index lambda's shape (possibly converted
    to another dtype)."""

    x: Array


@dataclasses.dataclass(frozen=True)
class LogicalNotOp(HighLevelOp):
    """Elementwise logical negation of :attr:`x`."""

    x: Array


@dataclasses.dataclass(frozen=True)
class ReduceOp(HighLevelOp):
    """The reduction :attr:`op` (a
    :class:`~pytato_like.reductions.ReductionOperation`) of :attr:`x` over
    the axes in :attr:`axes`, a mapping from the reduced axis of :attr:`x`
    to the name of its reduction variable in the index lambda (the name
    :meth:`~pytato_like.array.IndexLambda.with_tagged_reduction` takes)."""

    op: ReductionOperation
    x: Array
    axes: Mapping[int, str]

# }}}


class _TypeCastDropper(IdentityMapper):
    def map_type_cast(self, expr: TypeCast) -> Expression:
        return self.rec(expr.inner_expr)

    def map_reduce(self, expr: Reduce) -> Expression:
        return Reduce(self.rec(expr.inner_expr), expr.op, expr.bounds)


_ARITHMETIC = {
    prim.Sum: BinaryOpType.ADD,
    prim.Product: BinaryOpType.MULT,
    prim.LogicalOr: BinaryOpType.LOGICAL_OR,
    prim.LogicalAnd: BinaryOpType.LOGICAL_AND,
    prim.BitwiseOr: BinaryOpType.BITWISE_OR,
    prim.BitwiseAnd: BinaryOpType.BITWISE_AND,
    prim.BitwiseXor: BinaryOpType.BITWISE_XOR,
}
#: (the classes of _ARITHMETIC: each has ``children``)
_N_ARY = (prim.Sum, prim.Product, prim.LogicalOr, prim.LogicalAnd,
          prim.BitwiseOr, prim.BitwiseAnd, prim.BitwiseXor)
_COMPARISONS = {
    "==": BinaryOpType.EQUAL, "!=": BinaryOpType.NOT_EQUAL,
    "<": BinaryOpType.LESS, "<=": BinaryOpType.LESS_EQUAL,
    ">": BinaryOpType.GREATER, ">=": BinaryOpType.GREATER_EQUAL,
}


def _is_minus_one(value: object, dtype: np.dtype) -> bool:
    """Whether *value* is the factor the front end negates with: -1, or
    the all-ones value for unsigned integers (which wraps like negation)."""
    if not is_scalar_constant(value) or isinstance(value, bool):
        return False
    if value == -1:
        return True
    return dtype.kind == "u" and value == np.iinfo(dtype).max


class _Operands:
    """Turns the operand expressions of one index lambda back into arrays
    (broadcast reads of its bindings) and scalars."""

    def __init__(self, expr: IndexLambda) -> None:
        self.bindings = expr.bindings
        self.expected: dict[str, Expression] = {}
        for name, ary in expr.bindings.items():
            try:
                index = get_indexing_expression(ary.shape, expr.shape)
            except Exception:  # noqa: BLE001 (not a broadcast of this array)
                continue
            self.expected[name] = (prim.Subscript(prim.Variable(name), index)
                                   if index else prim.Variable(name))

    def __call__(self, *exprs: Expression) -> tuple[HighLevelOperand, ...]:
        result: list[HighLevelOperand] = []
        for e in exprs:
            if is_scalar_constant(e):
                result.append(e)
            elif isinstance(e, prim.NaN):
                result.append(np.nan if e.data_type is None
                              else e.data_type(float("nan")))
            else:
                name = (e.name if isinstance(e, prim.Variable)
                        else e.aggregate.name
                        if isinstance(e, prim.Subscript)
                        and isinstance(e.aggregate, prim.Variable) else None)
                if name is None or self.expected.get(name) != e:
                    raise UnknownIndexLambdaExpr(
                        f"operand {e} is not a broadcast read of a bound array")
                result.append(self.bindings[name])
        return tuple(result)


def _binary(inner: Expression, operands: _Operands, dtype: np.dtype
            ) -> BinaryOp | None:
    if isinstance(inner, prim.Sum) and len(inner.children) == 2:
        a, b = inner.children
        if (isinstance(b, prim.Product) and len(b.children) == 2
                and _is_minus_one(b.children[0], dtype)):
            return BinaryOp(BinaryOpType.SUB, *operands(a, b.children[1]))
    kind = type(inner)
    if (kind in _ARITHMETIC and isinstance(inner, _N_ARY)
            and len(inner.children) == 2):
        return BinaryOp(_ARITHMETIC[kind], *operands(*inner.children))
    if isinstance(inner, prim.Quotient):
        return BinaryOp(BinaryOpType.TRUEDIV,
                        *operands(inner.numerator, inner.denominator))
    if isinstance(inner, prim.FloorDiv):
        return BinaryOp(BinaryOpType.FLOORDIV,
                        *operands(inner.numerator, inner.denominator))
    if isinstance(inner, prim.Remainder):
        return BinaryOp(BinaryOpType.MOD,
                        *operands(inner.numerator, inner.denominator))
    if isinstance(inner, prim.Power):
        return BinaryOp(BinaryOpType.POWER, *operands(inner.base, inner.exponent))
    if isinstance(inner, prim.Comparison):
        return BinaryOp(_COMPARISONS[inner.operator],
                        *operands(inner.left, inner.right))
    return None


def _reduce_op(expr: IndexLambda, inner: Reduce) -> ReduceOp:
    """The :class:`ReduceOp` of a reduction over whole axes of one bound
    array read with plain index variables."""
    body = inner.inner_expr
    if (inner.op.name in ("any", "all") and isinstance(body, prim.Comparison)
            and body.operator == "!=" and is_scalar_constant(body.right)
            and body.right == 0):
        body = body.left  # any/all of a non-bool array test it against 0
    if isinstance(body, prim.Variable):
        index: tuple = ()
        name = body.name
    elif isinstance(body, prim.Subscript) and isinstance(body.aggregate,
                                                          prim.Variable):
        index = body.index_tuple
        name = body.aggregate.name
    else:
        raise UnknownIndexLambdaExpr(f"reduction of {body} is not of one array")
    ary = expr.bindings.get(name)
    if ary is None or len(index) != ary.ndim:
        raise UnknownIndexLambdaExpr(f"reduction of {body} is not of one array")
    axes = {}
    n_out = 0
    for axis, idx in enumerate(index):
        if not isinstance(idx, prim.Variable):
            raise UnknownIndexLambdaExpr(f"reduction index {idx} is not a variable")
        if idx.name in inner.bounds:
            lower, upper = inner.bounds[idx.name]
            if lower != 0 or not isinstance(upper, int) \
                    or not are_shape_components_equal(upper, ary.shape[axis]):
                raise UnknownIndexLambdaExpr(
                    f"reduction over {idx.name} does not run over all of axis "
                    f"{axis} of shape {ary.shape}")
            axes[axis] = idx.name
        else:
            # kept axes appear in order (keepdims leaves size-1 axes between)
            while n_out < expr.ndim and idx != index_var(n_out):
                n_out += 1
            if n_out == expr.ndim:
                raise UnknownIndexLambdaExpr(
                    f"index {idx} of reduction {inner} is not an output axis")
            n_out += 1
    return ReduceOp(inner.op, ary, constantdict(axes))


def index_lambda_to_high_level_op(expr: IndexLambda) -> HighLevelOp:
    """The operation *expr* computes, as a :class:`HighLevelOp`; raises
    :class:`~pytato_like.diagnostic.UnknownIndexLambdaExpr` when it is none
    of them."""
    if not isinstance(expr, IndexLambda):
        raise UnknownIndexLambdaExpr(
            f"expected an IndexLambda, got a {type(expr).__name__} of shape "
            f"{getattr(expr, 'shape', None)}")
    inner = _TypeCastDropper()(expr.expr)
    if is_scalar_constant(inner):
        return FullOp(inner)
    operands = _Operands(expr)
    operand_dtype = next((a.dtype for a in expr.bindings.values()), expr.dtype)
    try:
        result = _binary(inner, operands, operand_dtype)
        if result is not None:
            return result
    except UnknownIndexLambdaExpr:
        pass
    if (isinstance(inner, prim.Call) and isinstance(inner.function, prim.Variable)
            and inner.function.name.startswith(C99_FUNCTION_PREFIX)):
        try:
            return C99CallOp(inner.function.name[len(C99_FUNCTION_PREFIX):],
                             operands(*inner.parameters))
        except UnknownIndexLambdaExpr:
            pass
    if isinstance(inner, prim.If):
        try:
            return WhereOp(*operands(inner.condition, inner.then, inner.else_))
        except UnknownIndexLambdaExpr:
            pass
    if isinstance(inner, prim.LogicalNot):
        try:
            (x,) = operands(inner.child)
            if isinstance(x, Array):
                return LogicalNotOp(x)
        except UnknownIndexLambdaExpr:
            pass
    if isinstance(inner, Reduce):
        return _reduce_op(expr, inner)
    try:
        (x,) = operands(inner)
    except UnknownIndexLambdaExpr:
        pass
    else:
        if isinstance(x, Array):
            return BroadcastOp(x)
    raise UnknownIndexLambdaExpr(
        f"index lambda of shape {expr.shape} with expression {inner} is none of "
        "the high-level operations")
