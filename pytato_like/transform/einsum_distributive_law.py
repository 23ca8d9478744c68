"""Distributing einsums over sums and scalar factors of one operand.

:func:`apply_distributive_property_to_einsums` rewrites, for each
:class:`~pytato_like.array.Einsum` for which the user's callback answers
:class:`DoDistribute` ``(ioperand)``, ::

    einsum(A, x1 + x2)   ->  einsum(A, x1) + einsum(A, x2)
    einsum(A, x1 - x2)   ->  einsum(A, x1) - einsum(A, x2)
    einsum(A, c * x)     ->  c * einsum(A, x)       (c a scalar; also x * c)
    einsum(A, x / c)     ->  einsum(A, x) / c

repeatedly, down through nested sums, so ``A @ (x1 + x2 + x3)`` becomes
three products. How it works: the mapper carries a *context* -- the einsum
being distributed, which operand, and the other operands (mapped without
context) -- down the operand; a sum or scalar product of the form above is
split and each part mapped with the same context; any other node ends the
descent and is wrapped in the einsum again. Only elementwise operations
whose operands have the result's shape and dtype are split (no
broadcasting, no casts), so the rewrite is exact in NumPy's semantics.
:class:`DoNotDistribute` keeps the einsum (its operands are still mapped).
An einsum asking to be distributed inside the operand of another one being
distributed raises :class:`CannotDistributeError`, as in pytato.

The mapper is a cached mapper with the context as extra argument, so DAGs
of any depth work at the default recursion limit.

.. autoclass:: EinsumDistributiveLawDescriptor
.. autoclass:: DoNotDistribute
.. autoclass:: DoDistribute
.. autoclass:: EinsumDistributiveLawMapper
.. autoexception:: CannotDistributeError
.. autofunction:: apply_distributive_property_to_einsums
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np
import pymbolic.primitives as prim

from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    Einsum,
    IndexLambda,
)
from pytato_like.diagnostic import PytatoLikeError
from pytato_like.scalar_expr import index_vars
from pytato_like.transform.copy import rebuild_with
from pytato_like.transform.mapper import (
    ArrayOrNamesTc,
    TransformMapperWithExtraArgs,
    with_default_map_methods,
)

if TYPE_CHECKING:
    from pymbolic.typing import Expression

    from pytato_like.transform.mapper import ArrayOrNames


class CannotDistributeError(PytatoLikeError, RuntimeError):
    """The callback asked to distribute an einsum that lies inside the
    distributed operand of another einsum (composed einsums), or answered
    something other than :class:`DoDistribute` / :class:`DoNotDistribute`."""


class EinsumDistributiveLawDescriptor:
    """Base class of the answers of the *how_to_distribute* callback of
    :func:`apply_distributive_property_to_einsums`."""


@dataclasses.dataclass(frozen=True)
class DoNotDistribute(EinsumDistributiveLawDescriptor):
    """Keep the einsum as it is."""


@dataclasses.dataclass(frozen=True)
class DoDistribute(EinsumDistributiveLawDescriptor):
    """Distribute the einsum over its operand number *ioperand*."""

    ioperand: int


@dataclasses.dataclass(frozen=True)
class _EinsumDistributiveLawMapperContext:
    """The einsum being distributed over its operand *ioperand*, with its
    other operands already mapped."""

    einsum: Einsum
    ioperand: int
    other_args: tuple[Array, ...]

    def wrap(self, operand: Array) -> Array:
        args = list(self.other_args)
        args.insert(self.ioperand, operand)
        return self.einsum.copy(args=tuple(args))


# {{{ which index lambdas split

def _binding_read(expr: IndexLambda, term: Expression) -> Array | None:
    """The binding *term* reads at the output index unchanged, or None."""
    index: tuple[object, ...]
    if isinstance(term, prim.Variable):
        name, index = term.name, ()
    elif isinstance(term, prim.Subscript) \
            and isinstance(term.aggregate, prim.Variable):
        # (index lambdas subscript with tuples)
        name, index = term.aggregate.name, tuple(cast(tuple, term.index))
    else:
        return None
    ary = expr.bindings.get(name)
    if (ary is None or index != index_vars(expr.ndim)
            or ary.shape != expr.shape or ary.dtype != expr.dtype):
        return None
    return ary


def _is_scalar(value: object) -> bool:
    return isinstance(value, (numbers.Number, np.generic)) \
        and not isinstance(value, bool)


def _split(expr: IndexLambda) -> tuple[str, Any, Any] | None:
    """``(op, a, b)`` if *expr* is ``a + b``, ``a - b`` of two same-shape,
    same-dtype arrays, ``a * b`` with one side a scalar, or ``a / b`` with
    *b* a scalar; else None."""
    # (Any: each of a and b is an array or a scalar depending on op; the
    # caller combines them with the array operators)
    if expr.var_to_reduction_descr:
        return None
    e = expr.expr
    if isinstance(e, prim.Sum) and len(e.children) == 2:
        first, second = e.children
        x1 = _binding_read(expr, first)
        if x1 is None:
            return None
        if isinstance(second, prim.Product) and len(second.children) == 2 \
                and _is_scalar(second.children[0]) and second.children[0] == -1:
            x2 = _binding_read(expr, second.children[1])
            return None if x2 is None else ("-", x1, x2)
        x2 = _binding_read(expr, second)
        return None if x2 is None else ("+", x1, x2)
    if isinstance(e, prim.Product) and len(e.children) == 2:
        first, second = e.children
        if _is_scalar(first):
            x = _binding_read(expr, second)
            return None if x is None else ("*", first, x)
        if _is_scalar(second):
            x = _binding_read(expr, first)
            return None if x is None else ("*", x, second)
        return None
    if isinstance(e, prim.Quotient) and _is_scalar(e.denominator):
        x = _binding_read(expr, e.numerator)
        return None if x is None else ("/", x, e.denominator)
    return None

# }}}


@with_default_map_methods
class EinsumDistributiveLawMapper(
        TransformMapperWithExtraArgs[[_EinsumDistributiveLawMapperContext | None]]):
    """The mapper behind :func:`apply_distributive_property_to_einsums`;
    call it as ``mapper(expr, None)``."""

    def __init__(self, how_to_distribute: Callable[[Array],
                                                   EinsumDistributiveLawDescriptor]
                 ) -> None:
        super().__init__()
        self.how_to_distribute = how_to_distribute
        self._premap_ctx: _EinsumDistributiveLawMapperContext | None = None

    # {{{ deep DAGs: premap only what is mapped with the same context

    def _map_descendants_first(self, root: ArrayOrNames, args: tuple,
                               kwargs: dict) -> None:
        saved = self._premap_ctx
        self._premap_ctx = args[0] if args else None
        try:
            super()._map_descendants_first(root, args, kwargs)
        finally:
            self._premap_ctx = saved

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        children = super()._descendants_to_premap(expr)
        if self._premap_ctx is None:
            if isinstance(expr, Einsum):
                answer = self.how_to_distribute(expr)
                if isinstance(answer, DoDistribute):
                    return tuple(a for i, a in enumerate(expr.args)
                                 if i != answer.ioperand)
            return children
        if isinstance(expr, IndexLambda):
            split = _split(expr)
            if split is not None:
                return tuple(x for x in split[1:] if isinstance(x, Array))
        return ()

    # }}}

    @overload
    def _map_default(self, expr: Array,
                     ctx: _EinsumDistributiveLawMapperContext | None = None
                     ) -> Array: ...
    @overload
    def _map_default(self, expr: AbstractResultWithNamedArrays,
                     ctx: None = None) -> AbstractResultWithNamedArrays: ...

    def _map_default(self, expr: ArrayOrNames,
                     ctx: _EinsumDistributiveLawMapperContext | None = None
                     ) -> ArrayOrNames:
        rebuilt = rebuild_with(expr, lambda child: self.rec(child, None))
        return rebuilt if ctx is None else ctx.wrap(rebuilt)

    def map_index_lambda(self, expr: IndexLambda,
                         ctx: _EinsumDistributiveLawMapperContext | None = None
                         ) -> Array:
        split = None if ctx is None else _split(expr)
        if split is None:
            return self._map_default(expr, ctx)
        op, a, b = split
        if op == "+":
            return self.rec(a, ctx) + self.rec(b, ctx)
        if op == "-":
            return self.rec(a, ctx) - self.rec(b, ctx)
        if op == "*":
            return (a * self.rec(b, ctx) if not isinstance(a, Array)
                    else self.rec(a, ctx) * b)
        return self.rec(a, ctx) / b

    def map_einsum(self, expr: Einsum,
                   ctx: _EinsumDistributiveLawMapperContext | None = None
                   ) -> Array:
        answer = self.how_to_distribute(expr)
        if isinstance(answer, DoDistribute):
            if ctx is not None:
                raise CannotDistributeError(
                    f"cannot distribute the einsum of shape {expr.shape} over "
                    f"operand {answer.ioperand}: it is inside the distributed "
                    f"operand of the einsum of shape {ctx.einsum.shape}")
            if not 0 <= answer.ioperand < len(expr.args):
                raise CannotDistributeError(
                    f"DoDistribute(ioperand={answer.ioperand}) for an einsum "
                    f"with {len(expr.args)} operands")
            inner = _EinsumDistributiveLawMapperContext(
                expr, answer.ioperand,
                tuple(self.rec(arg, None) for i, arg in enumerate(expr.args)
                      if i != answer.ioperand))
            return self.rec(expr.args[answer.ioperand], inner)
        if not isinstance(answer, DoNotDistribute):
            raise CannotDistributeError(
                f"how_to_distribute returned a {type(answer).__name__} for the "
                f"einsum of shape {expr.shape}; expected DoDistribute or "
                "DoNotDistribute")
        return self._map_default(expr, ctx)


def apply_distributive_property_to_einsums(
        expr: ArrayOrNamesTc,
        how_to_distribute: Callable[[Array], EinsumDistributiveLawDescriptor]
        ) -> ArrayOrNamesTc:
    """A copy of *expr* (an array or a
    :class:`~pytato_like.array.DictOfNamedArrays`) in which every einsum
    for which ``how_to_distribute(einsum)`` is :class:`DoDistribute` is
    distributed over the sums and scalar factors of that operand (see the
    module documentation)."""
    return EinsumDistributiveLawMapper(how_to_distribute)(expr, None)
