"""The scalar expression language inside :class:`~pytato_like.array.IndexLambda`.

An index lambda's value at index ``(_0, _1, ...)`` is a :mod:`pymbolic`
expression over

* index variables ``_0``, ``_1``, ... (one per output axis),
* reduction variables (``_r0``, ...) bound by a :class:`Reduce`,
* subscripts of bound arrays, e.g. ``_in0[_0, 0]`` where ``_in0`` names an
  entry of the lambda's ``bindings``,
* Python/NumPy scalar constants,
* pymbolic arithmetic, comparisons, logic, bitwise operations and ``If``,
* calls ``Call(Variable("pytato.c99.<name>"), args)`` of the math functions in
  :mod:`pytato_like.cmath`,
* :class:`TypeCast` and :class:`Reduce` defined here.

.. autoclass:: Reduce
.. autoclass:: TypeCast
.. autofunction:: index_var
.. autofunction:: index_vars
.. autofunction:: reduction_var
.. autofunction:: get_dependencies
.. autofunction:: substitute
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import pymbolic.primitives as prim
from constantdict import constantdict
from pymbolic.mapper.dependency import DependencyMapper as _PymbolicDependencyMapper
from pymbolic.mapper.stringifier import StringifyMapper as _PymbolicStringifyMapper
from pymbolic.mapper.substitutor import SubstitutionMapper as _PymbolicSubstitutionMapper

ScalarExpression = Any
"""Type alias: a pymbolic expression or a scalar constant."""

C99_FUNCTION_PREFIX = "pytato.c99."


@prim.expr_dataclass()
class Reduce(prim.ExpressionNode):
    """``op``-reduction of *inner_expr* over the reduction variables in
    *bounds* (a mapping from variable name to ``(lower, upper)``, upper
    exclusive).

    .. attribute:: inner_expr
    .. attribute:: op
    .. attribute:: bounds
    """

    inner_expr: ScalarExpression
    op: Any
    bounds: Mapping[str, tuple[Any, Any]]



@prim.expr_dataclass()
class TypeCast(prim.ExpressionNode):
    """*inner_expr* converted to *dtype* (a :class:`numpy.dtype`)."""

    dtype: np.dtype
    inner_expr: ScalarExpression



@lru_cache(maxsize=None)
def index_var(i: int) -> prim.Variable:
    """The variable standing for output axis *i* of an index lambda."""
    return prim.Variable(f"_{i}")


@lru_cache(maxsize=None)
def index_vars(ndim: int) -> tuple[prim.Variable, ...]:
    """``(_0, ..., _{ndim-1})``."""
    return tuple(index_var(i) for i in range(ndim))


@lru_cache(maxsize=None)
def reduction_var(i: int) -> prim.Variable:
    """The variable standing for reduction axis *i*."""
    return prim.Variable(f"_r{i}")


def make_reduce(inner_expr, op, bounds: Mapping[str, tuple[Any, Any]]) -> Reduce:
    return Reduce(inner_expr, op, constantdict(bounds))


# {{{ mappers extended to Reduce / TypeCast

class DependencyMapper(_PymbolicDependencyMapper):
    """Collects the variables an expression depends on (free ones only:
    reduction variables bound by a :class:`Reduce` are excluded)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("composite_leaves", False)
        super().__init__(**kwargs)

    def map_reduce(self, expr: Reduce, *args: Any, **kwargs: Any):
        inner = self.rec(expr.inner_expr, *args, **kwargs)
        bound = {prim.Variable(name) for name in expr.bounds}
        bound_results = set()
        for lo, hi in expr.bounds.values():
            bound_results |= self.rec(lo) | self.rec(hi)
        return frozenset((set(inner) - bound) | bound_results)

    def map_type_cast(self, expr: TypeCast, *args: Any, **kwargs: Any):
        return self.rec(expr.inner_expr, *args, **kwargs)

    def map_nan(self, expr, *args, **kwargs):
        return frozenset()


def get_dependencies(expr: ScalarExpression) -> frozenset[str]:
    """Names of the free variables of *expr* (array names and index
    variables)."""
    mapper = DependencyMapper(include_subscripts=False, include_lookups=False,
                              include_calls="descend_args")
    return frozenset(v.name for v in mapper(expr))


class SubstitutionMapper(_PymbolicSubstitutionMapper):
    def map_reduce(self, expr: Reduce):
        return Reduce(self.rec(expr.inner_expr), expr.op,
                      constantdict({k: (self.rec(lo), self.rec(hi))
                                    for k, (lo, hi) in expr.bounds.items()}))

    def map_type_cast(self, expr: TypeCast):
        return TypeCast(expr.dtype, self.rec(expr.inner_expr))


def substitute(expr: ScalarExpression,
               variable_assignments: Mapping[str, ScalarExpression]) -> ScalarExpression:
    """*expr* with the variables named in *variable_assignments* replaced."""
    from pymbolic.mapper.substitutor import make_subst_func
    return SubstitutionMapper(make_subst_func(variable_assignments))(expr)


class StringifyMapper(_PymbolicStringifyMapper):
    def map_reduce(self, expr: Reduce, enclosing_prec: int, *args: Any) -> str:
        bounds = ", ".join(f"{k}:{self.rec(lo, 0)}..{self.rec(hi, 0)}"
                           for k, (lo, hi) in expr.bounds.items())
        return f"{expr.op}[{bounds}]({self.rec(expr.inner_expr, 0)})"

    def map_type_cast(self, expr: TypeCast, enclosing_prec: int, *args: Any) -> str:
        return f"cast({expr.dtype}, {self.rec(expr.inner_expr, 0)})"

    def map_variable(self, expr, enclosing_prec, *args):
        name = expr.name
        if name.startswith(C99_FUNCTION_PREFIX):
            return name[len(C99_FUNCTION_PREFIX):]
        return name


@lru_cache(maxsize=4096)
def _stringify_cached(expr: ScalarExpression) -> str:
    return _STRINGIFIER(expr)


def stringify(expr: ScalarExpression) -> str:
    """A readable one-line rendering of *expr*."""
    # The front end shares expression objects between nodes of the same
    # signature, so printing a large DAG renders few distinct expressions.
    try:
        return _stringify_cached(expr)
    except TypeError:  # unhashable constant inside
        return _STRINGIFIER(expr)


_STRINGIFIER = StringifyMapper()

# }}}
