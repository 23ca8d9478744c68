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
.. autofunction:: affine_form
.. autofunction:: reduction_var
.. autofunction:: get_dependencies
.. autofunction:: substitute
.. autofunction:: evaluate
.. autofunction:: parse
.. autofunction:: distribute
.. autofunction:: get_reduction_induction_variables
.. autofunction:: expression_children

Mappers (pytato's families, subclasses of pymbolic's that also handle
:class:`Reduce` and :class:`TypeCast`):

.. autoclass:: WalkMapper
.. autoclass:: CombineMapper
.. autoclass:: IdentityMapper
.. autoclass:: DependencyMapper
.. autoclass:: EvaluationMapper
.. autoclass:: SubstitutionMapper
.. autoclass:: InductionVariableCollector
.. autoclass:: StringifyMapper
.. autoclass:: DistributeMapper
.. autoclass:: TermCollector

.. autodata:: IDX_LAMBDA_AXIS_INDEX
.. autodata:: IDX_LAMBDA_REDUCTION_AXIS_INDEX
.. autodata:: INT_CLASSES
.. autodata:: SCALAR_CLASSES
.. autofunction:: is_scalar_constant
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, SupportsInt, TypeAlias, cast

import numpy as np
import pymbolic.primitives as prim
from constantdict import constantdict
from pymbolic.mapper import CombineMapper as _PymbolicCombineMapper
from pymbolic.mapper import IdentityMapper as _PymbolicIdentityMapper
from pymbolic.mapper import P, ResultT
from pymbolic.mapper import WalkMapper as _PymbolicWalkMapper
from pymbolic.mapper.collector import TermCollector as _PymbolicTermCollector
from pymbolic.mapper.constant_folder import (
    CommutativeConstantFoldingMapper as _PymbolicConstantFolder,
)
from pymbolic.mapper.dependency import DependencyMapper as _PymbolicDependencyMapper
from pymbolic.mapper.distributor import DistributeMapper as _PymbolicDistributeMapper
from pymbolic.mapper.evaluator import EvaluationMapper as _PymbolicEvaluationMapper
from pymbolic.mapper.stringifier import StringifyMapper as _PymbolicStringifyMapper
from pymbolic.mapper.substitutor import (
    SubstitutionMapper as _PymbolicSubstitutionMapper,
)

from pytato_like.diagnostic import EmptyReductionError

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from pymbolic.typing import ArithmeticExpression, Expression, Scalar
    from typing_extensions import TypeIs

    from pytato_like.reductions import ReductionOperation

ScalarExpression: TypeAlias = "Expression"
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
    op: ReductionOperation
    # (Any: each bound is an int or a scalar expression, but the passes that
    # split static reductions do integer arithmetic on them unchecked)
    bounds: Mapping[str, tuple[Any, Any]]

    def make_stringifier(self, originating_stringifier=None):
        return StringifyMapper()



@prim.expr_dataclass()
class TypeCast(prim.ExpressionNode):
    """*inner_expr* converted to *dtype* (a :class:`numpy.dtype`)."""

    dtype: np.dtype
    inner_expr: ScalarExpression

    def make_stringifier(self, originating_stringifier=None):
        return StringifyMapper()



@lru_cache(maxsize=None)
def index_var(i: int) -> prim.Variable:
    """The variable standing for output axis *i* of an index lambda."""
    return prim.Variable(f"_{i}")


@lru_cache(maxsize=None)
def index_vars(ndim: int) -> tuple[prim.Variable, ...]:
    """``(_0, ..., _{ndim-1})``."""
    return tuple(index_var(i) for i in range(ndim))


def affine_form(expr: ScalarExpression, names: tuple[str, ...]
                ) -> tuple[dict[str, int], int] | None:
    """``({name: coefficient}, constant)`` of *expr* if it is an integer
    affine function of the index variables *names* (e.g. ``("_0",)``),
    else None. Recurses over the expression's nesting only."""
    if isinstance(expr, (bool, np.bool_)):
        return None
    if isinstance(expr, (int, np.integer)):
        return {}, int(expr)
    if isinstance(expr, prim.Variable):
        return ({expr.name: 1}, 0) if expr.name in names else None
    if isinstance(expr, prim.Sum):
        coefs: dict[str, int] = {}
        const = 0
        for child in expr.children:
            term = affine_form(child, names)
            if term is None:
                return None
            for name, c in term[0].items():
                coefs[name] = coefs.get(name, 0) + c
            const += term[1]
        return {n: c for n, c in coefs.items() if c}, const
    if isinstance(expr, prim.Product):
        coefs, const = {}, 1
        for child in expr.children:
            term = affine_form(child, names)
            if term is None:
                return None
            if term[0] and coefs:
                return None     # a product of indices
            if term[0]:
                coefs = {n: c * const for n, c in term[0].items()}
            else:
                coefs = {n: c * term[1] for n, c in coefs.items()}
            const *= term[1]
        return {n: c for n, c in coefs.items() if c}, const
    return None


@lru_cache(maxsize=None)
def reduction_var(i: int) -> prim.Variable:
    """The variable standing for reduction axis *i*."""
    return prim.Variable(f"_r{i}")


def parse(text: str) -> ScalarExpression:
    """The scalar expression written in *text* (pymbolic's syntax)."""
    from pymbolic.parser import Parser
    return Parser()(text)


def make_reduce(inner_expr, op,
                bounds: Mapping[str, tuple[ScalarExpression, ScalarExpression]]
                ) -> Reduce:
    return Reduce(inner_expr, op, constantdict(bounds))


#: expression class -> its dataclass field names (None: not a dataclass)
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def expression_children(expr: object) -> tuple:
    """The direct parts of scalar expression *expr* (operands, and for a
    :class:`Reduce` its inner expression and bounds), for walks with an
    explicit stack; ``()`` for a leaf."""
    if isinstance(expr, prim.ExpressionNode):
        names = _FIELD_NAMES.get(type(expr))
        if names is None:
            names = _FIELD_NAMES[type(expr)] = (
                tuple(f.name for f in dataclasses.fields(expr))
                if dataclasses.is_dataclass(expr) else None)
        if names is not None:
            return tuple(getattr(expr, name) for name in names)
        return tuple(expr.__getinitargs__())
    if isinstance(expr, (tuple, list)):
        return tuple(expr)
    if isinstance(expr, Mapping):
        return tuple(expr.values())
    return ()



def expression_size(expr: object, limit: int | None = None) -> int:
    """The number of nodes of scalar expression *expr* counted as a tree
    (a subexpression used twice counts twice, as code generators see
    it), by an explicit stack; stops counting above *limit*."""
    count = 0
    bound = limit if limit is not None else float("inf")
    stack = [expr]
    pop, extend = stack.pop, stack.extend
    # (hot: the kernel budget sizes every instruction of a compile. The
    # same count as walking expression_children, with the common leaves
    # skipped and the parts of dataclass nodes read by one attrgetter)
    getters = _PARTS_GETTER
    while stack:
        node = pop()
        count += 1
        if count > bound:
            break
        kind = type(node)
        getter = getters.get(kind)
        if getter is None:
            getter = getters[kind] = _parts_getter(node)
        if getter is not _no_parts:
            extend(getter(node))
    return count


# the getters of _PARTS_GETTER but attrgetters of dataclass fields
# (_no_parts is also compared by identity: leaves cost no call)
def _no_parts(node: object) -> tuple:
    return ()


def _one_part(node: object) -> tuple:  # prim.Variable: its name
    return (node.name,)  # type: ignore[attr-defined]  # (only given Variables)


#: type of an expression's part -> how expression_size reads its parts
_PARTS_GETTER: dict[type, Callable[[object], tuple]] = {
    int: _no_parts, float: _no_parts, str: _no_parts, bool: _no_parts,
    prim.Variable: _one_part}


def _parts_getter(node: object) -> Callable[[object], tuple]:
    """How :func:`expression_size` reads the parts of nodes of *node*'s
    type: a getter returning what :func:`expression_children` returns."""
    if isinstance(node, prim.ExpressionNode) and dataclasses.is_dataclass(node):
        names = tuple(f.name for f in dataclasses.fields(node))
        if len(names) >= 2:
            return operator.attrgetter(*names)
        # (one field: attrgetter would return it bare, not in a tuple)
    elif isinstance(node, (np.generic, complex)):
        return _no_parts
    return expression_children


# {{{ mappers extended to Reduce / TypeCast (pytato's mapper families)

#: Matches the name of an index variable of an index lambda (``_0``, ``_1``,
#: ...), with the axis number as group ``index``.
IDX_LAMBDA_AXIS_INDEX = re.compile(r"^(_(?P<index>0|[1-9][0-9]*))$")
#: Matches an index variable or a reduction variable (``_r0``, ...).
IDX_LAMBDA_REDUCTION_AXIS_INDEX = re.compile(r"^(_r?(?P<index>0|[1-9][0-9]*))$")
#: The classes of integer constants.
INT_CLASSES = (int, np.integer)
#: The classes of scalar constants (pymbolic's valid constants).
SCALAR_CLASSES = prim.VALID_CONSTANT_CLASSES


def is_scalar_constant(x: object) -> TypeIs[Scalar]:
    """Whether *x* is a scalar constant (an instance of
    :data:`SCALAR_CLASSES`); tells the type checker so."""
    return isinstance(x, SCALAR_CLASSES)


class WalkMapper(_PymbolicWalkMapper[[]]):
    """pymbolic's walk, also through :class:`Reduce` (bounds and body)
    and :class:`TypeCast`."""

    def map_reduce(self, expr: Reduce) -> None:
        if not self.visit(expr):
            return
        for lo, hi in expr.bounds.values():
            self.rec(lo)
            self.rec(hi)
        self.rec(expr.inner_expr)
        self.post_visit(expr)

    def map_type_cast(self, expr: TypeCast) -> None:
        if not self.visit(expr):
            return
        self.rec(expr.inner_expr)
        self.post_visit(expr)


class CombineMapper(_PymbolicCombineMapper[ResultT, P]):
    """pymbolic's combine mapper; a :class:`Reduce` combines its bounds
    and its body, a :class:`TypeCast` is its operand's result."""

    def map_type_cast(self, expr: TypeCast, *args: P.args, **kwargs: P.kwargs
                      ) -> ResultT:
        return self.rec(expr.inner_expr, *args, **kwargs)

    def map_reduce(self, expr: Reduce, *args: P.args, **kwargs: P.kwargs
                   ) -> ResultT:
        return self.combine([
            *(self.rec(bound, *args, **kwargs)
              for _, bound in sorted(expr.bounds.items())),
            self.rec(expr.inner_expr, *args, **kwargs)])


class IdentityMapper(_PymbolicIdentityMapper[P]):
    """pymbolic's identity (copying) mapper, rebuilding :class:`Reduce`
    and :class:`TypeCast` from their mapped parts."""

    def map_reduce(self, expr: Reduce, *args: P.args, **kwargs: P.kwargs
                   ) -> Expression:
        inner = self.rec(expr.inner_expr, *args, **kwargs)
        bounds = {name: (self.rec(lo, *args, **kwargs),
                         self.rec(hi, *args, **kwargs))
                  for name, (lo, hi) in expr.bounds.items()}
        if inner is expr.inner_expr and all(
                new[0] is old[0] and new[1] is old[1]
                for new, old in zip(bounds.values(), expr.bounds.values())):
            return expr
        return Reduce(inner, expr.op, constantdict(bounds))

    def map_type_cast(self, expr: TypeCast, *args: P.args, **kwargs: P.kwargs
                      ) -> Expression:
        inner = self.rec(expr.inner_expr, *args, **kwargs)
        return expr if inner is expr.inner_expr else TypeCast(expr.dtype, inner)


class DependencyMapper(_PymbolicDependencyMapper[P]):
    """pymbolic's dependency mapper (the variables an expression uses).
    As pytato's: a :class:`Reduce` contributes its body's and bounds'
    variables (its reduction variables included); with
    ``include_idx_lambda_indices=False`` index and reduction variables
    (``_0``, ``_r0``, ...) are left out."""

    def __init__(self, *, include_idx_lambda_indices: bool = True,
                 include_subscripts: bool = True, include_lookups: bool = True,
                 include_calls: bool | Literal["descend_args"] = True,
                 include_cses: bool = False,
                 composite_leaves: bool | None = False) -> None:
        super().__init__(include_subscripts=include_subscripts,
                         include_lookups=include_lookups,
                         include_calls=include_calls,
                         include_cses=include_cses,
                         composite_leaves=composite_leaves)
        self.include_idx_lambda_indices = include_idx_lambda_indices

    def map_variable(self, expr: prim.Variable, *args: P.args,
                     **kwargs: P.kwargs):
        if not self.include_idx_lambda_indices \
                and IDX_LAMBDA_REDUCTION_AXIS_INDEX.fullmatch(expr.name):
            return set()
        return super().map_variable(expr, *args, **kwargs)

    def map_reduce(self, expr: Reduce, *args: P.args, **kwargs: P.kwargs):
        bounds = set()
        for lo, hi in expr.bounds.values():
            bounds |= set(self.rec(lo, *args, **kwargs))
            bounds |= set(self.rec(hi, *args, **kwargs))
        return self.combine([self.rec(expr.inner_expr, *args, **kwargs), bounds])

    def map_type_cast(self, expr: TypeCast, *args: P.args, **kwargs: P.kwargs):
        return self.rec(expr.inner_expr, *args, **kwargs)

    def map_nan(self, expr, *args, **kwargs):
        return set()


class _FreeVariableMapper(DependencyMapper[[]]):
    """The variables an expression depends on from outside: reduction
    variables bound by a :class:`Reduce` are not."""

    def map_reduce(self, expr: Reduce):
        inner = set(self.rec(expr.inner_expr)) - {
            prim.Variable(name) for name in expr.bounds}
        for lo, hi in expr.bounds.values():
            inner |= set(self.rec(lo)) | set(self.rec(hi))
        return inner


def get_dependencies(expr: ScalarExpression) -> frozenset[str]:
    """Names of the free variables of *expr* (array names and index
    variables; not the reduction variables a :class:`Reduce` binds)."""
    mapper = _FreeVariableMapper(include_subscripts=False, include_lookups=False,
                                 include_calls="descend_args")
    # without subscripts, lookups, calls and CSEs every dependency is a Variable
    return frozenset(cast(prim.Variable, v).name for v in mapper(expr))


class InductionVariableCollector(CombineMapper[frozenset, []]):
    """Maps an expression to the frozenset of the names of the reduction
    variables its :class:`Reduce` nodes bind."""

    def combine(self, values) -> frozenset:
        return frozenset().union(*values)

    def map_reduce(self, expr: Reduce) -> frozenset:
        return frozenset(expr.bounds) | super().map_reduce(expr)

    def map_algebraic_leaf(self, expr: prim.AlgebraicLeaf) -> frozenset:
        return frozenset()

    def map_constant(self, expr: object) -> frozenset:
        return frozenset()

    def map_nan(self, expr: prim.NaN) -> frozenset:
        return frozenset()


def get_reduction_induction_variables(expr: ScalarExpression) -> frozenset:
    """The names of the reduction variables bound inside *expr*."""
    return InductionVariableCollector()(expr)


class EvaluationMapper(_PymbolicEvaluationMapper[ResultT]):
    """pymbolic's evaluator over a *context* (name -> value). A
    :class:`TypeCast` converts to its dtype; a :class:`Reduce` evaluates
    its body at every point of its (evaluated) bounds and reduces the
    values with the operation's NumPy reduction (an empty range gives the
    operation's neutral element)."""

    def map_type_cast(self, expr: TypeCast) -> Any:
        return np.asarray(self.rec(expr.inner_expr)).astype(expr.dtype)[()]

    def map_reduce(self, expr: Reduce) -> ResultT:
        names = list(expr.bounds)
        # (bounds evaluate to integers)
        ranges = [range(int(cast(SupportsInt, self.rec(lo))),
                        int(cast(SupportsInt, self.rec(hi))))
                  for lo, hi in expr.bounds.values()]
        # the context is the caller's mutable dict (bound while reducing)
        context = cast(dict[str, object], self.context)
        saved = {name: context[name] for name in names
                 if name in context}
        values = []
        try:
            for point in itertools.product(*ranges):
                context.update(zip(names, point))
                values.append(self.rec(expr.inner_expr))
        finally:
            for name in names:
                context.pop(name, None)
            context.update(saved)
        if not values:
            neutral = expr.op.neutral_element(np.dtype(np.float64))
            if neutral is None:
                raise EmptyReductionError(
                    f"{expr.op} over the empty range {dict(expr.bounds)}")
            return neutral
        return expr.op.numpy_reduce(np.asarray(values))


def evaluate(expr: ScalarExpression, context: Mapping[str, object] | None = None
             ) -> object:
    """The value of *expr* with the variables in *context*."""
    return EvaluationMapper(dict(context or {}))(expr)


class SubstitutionMapper(_PymbolicSubstitutionMapper):
    def map_reduce(self, expr: Reduce):
        return Reduce(self.rec(expr.inner_expr), expr.op,
                      constantdict({k: (self.rec(lo), self.rec(hi))
                                    for k, (lo, hi) in expr.bounds.items()}))

    def map_type_cast(self, expr: TypeCast):
        return TypeCast(expr.dtype, self.rec(expr.inner_expr))


def substitute(expr: ScalarExpression,
               variable_assignments: Mapping[str, ScalarExpression] | None
               ) -> ScalarExpression:
    """*expr* with the variables named in *variable_assignments* replaced."""
    from pymbolic.mapper.substitutor import make_subst_func
    return SubstitutionMapper(make_subst_func(variable_assignments or {}))(expr)


class DistributeMapper(_PymbolicDistributeMapper):
    """pymbolic's distributor; the body of a :class:`Reduce` and the
    operand of a :class:`TypeCast` are distributed in place (a reduction
    is a sum over its body, so expanding the body keeps its value)."""

    def map_reduce(self, expr: Reduce) -> Expression:
        return Reduce(self.rec(expr.inner_expr), expr.op, expr.bounds)

    def map_type_cast(self, expr: TypeCast) -> Expression:
        return TypeCast(expr.dtype, self.rec(expr.inner_expr))


class _ConstantFolder(_PymbolicConstantFolder):
    """pymbolic's constant folder; a :class:`Reduce` or :class:`TypeCast`
    is an opaque (non-constant) leaf."""

    def is_constant(self, expr: Expression) -> bool:
        return not DependencyMapper()(expr)

    def map_reduce(self, expr: Reduce) -> Expression:
        return expr

    def map_type_cast(self, expr: TypeCast) -> Expression:
        return expr


class TermCollector(_PymbolicTermCollector):
    """pymbolic's collector of like terms; a :class:`Reduce` or
    :class:`TypeCast` is one opaque factor."""

    def get_dependencies(self, expr: Expression
                         ) -> AbstractSet[prim.AlgebraicLeaf
                                          | prim.CommonSubexpression]:
        return DependencyMapper()(expr)

    def split_term(self, mul_term: Expression) -> tuple[
            AbstractSet[tuple[ArithmeticExpression, ArithmeticExpression]],
            ArithmeticExpression]:
        if isinstance(mul_term, (Reduce, TypeCast)):
            # pymbolic splits products, powers and leaves; ours are leaves
            return self.split_term(prim.Product((mul_term,)))
        return super().split_term(mul_term)

    def map_reduce(self, expr: Reduce) -> Expression:
        return expr

    def map_type_cast(self, expr: TypeCast) -> Expression:
        return expr


def distribute(expr: ScalarExpression, parameters: frozenset = frozenset(),
               commutative: bool = True) -> ScalarExpression:
    """*expr* with products distributed over sums (``a*(b+c)`` ->
    ``a*b + a*c``), as pymbolic's distributor; with *commutative*, like
    terms are collected (*parameters* are treated as constants)."""
    if commutative:
        return DistributeMapper(TermCollector(parameters),
                                _ConstantFolder())(expr)
    return DistributeMapper(lambda x: x, _ConstantFolder())(expr)


class StringifyMapper(_PymbolicStringifyMapper[[]]):
    """pymbolic's stringifier; prints a :class:`Reduce` as
    ``op[var:lo..hi](body)``, a :class:`TypeCast` as ``cast(dtype, x)``, and
    math functions without their ``pytato.c99.`` prefix."""

    def map_reduce(self, expr: Reduce, enclosing_prec: int, *args: object
                   ) -> str:
        bounds = ", ".join(f"{k}:{self.rec(lo, 0)}..{self.rec(hi, 0)}"
                           for k, (lo, hi) in expr.bounds.items())
        return f"{expr.op}[{bounds}]({self.rec(expr.inner_expr, 0)})"

    def map_type_cast(self, expr: TypeCast, enclosing_prec: int,
                      *args: object) -> str:
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


_STRINGIFIER: StringifyMapper = StringifyMapper()

# }}}
