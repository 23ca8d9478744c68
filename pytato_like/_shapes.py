"""Shape components compared and broadcast: the rules every node constructor
and the front end share, below both (this module imports only
:mod:`pytato_like.array`). :mod:`pytato_like.utils` offers them under their
pytato names; see there for the documentation.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pymbolic.primitives as prim
from pytools import UniqueNameGenerator

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    IndexLambda,
    ShapeComponent,
    SizeParam,
    check_element_count,
)
from pytato_like.diagnostic import CannotBroadcastError, ShapeMismatchError
from pytato_like.scalar_expr import substitute

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from pymbolic.typing import Expression

__all__ = [
    "Polynomial",
    "are_shape_components_equal",
    "are_shapes_equal",
    "concrete_size",
    "dim_to_index_lambda_components",
    "get_shape_after_broadcasting",
    "is_one",
    "poly_mul",
    "size_polynomial",
]


def are_shape_components_equal(dim1: ShapeComponent, dim2: ShapeComponent) -> bool:
    """Whether two shape components are known to be equal: ints by value,
    size expressions by structure or, failing that, as polynomials in their
    size parameters (so ``3*n`` equals ``n*3`` and ``n + n + n``; see
    :func:`size_polynomial`) or, for expressions that are not polynomials,
    by value at several pseudo-random assignments of their size
    parameters."""
    if not isinstance(dim1, Array) and not isinstance(dim2, Array):
        return int(dim1) == int(dim2)
    if isinstance(dim1, Array) and isinstance(dim2, Array) and dim1 == dim2:
        return True
    p1 = size_polynomial(dim1)
    p2 = size_polynomial(dim2) if p1 is not None else None
    if p1 is not None and p2 is not None:
        return p1 == p2
    return _equal_at_sample_points(dim1, dim2)


# Two different polynomials of low degree agree at a random point of a large
# range with negligible probability (Schwartz-Zippel); four points make a
# false "equal" practically impossible for the affine/low-degree size
# expressions shapes use.
_SAMPLE_SEEDS = (12345, 67890, 424242, 777)


def _equal_at_sample_points(dim1: ShapeComponent, dim2: ShapeComponent) -> bool:
    import random

    from pymbolic.mapper.evaluator import EvaluationMapper

    exprs = []
    param_names_set: set[str] = set()
    for dim in (dim1, dim2):
        expr, bindings = dim_to_index_lambda_components(dim)
        exprs.append((expr, bindings))
        # (each dim names its bindings afresh: _in, _in_0, ...)
        param_names_set.update(sp.name for sp in bindings.values())
    param_names = sorted(param_names_set)
    for seed in _SAMPLE_SEEDS:
        rng = random.Random(seed)
        values = {name: rng.randrange(1, 2**20) for name in param_names}
        results = []
        for expr, bindings in exprs:
            context = {k: values[sp.name] for k, sp in bindings.items()}
            try:
                results.append(EvaluationMapper(context)(expr))
            except (ZeroDivisionError, TypeError, ValueError):
                return False
        if results[0] != results[1]:
            return False
    return True


# {{{ size expressions as polynomials

#: a polynomial in size parameters: {monomial: integer coefficient}, a
#: monomial a sorted tuple of (size parameter name, exponent)
Polynomial = dict


def poly_mul(p: Polynomial, q: Polynomial) -> Polynomial:
    """The product of the polynomials *p* and *q*."""
    result: Polynomial = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            powers = dict(m1)
            for name, e in m2:
                powers[name] = powers.get(name, 0) + e
            m = tuple(sorted(powers.items()))
            result[m] = result.get(m, 0) + c1 * c2
    return {m: c for m, c in result.items() if c}


def _poly_add(p: Polynomial, q: Polynomial) -> Polynomial:
    result = dict(p)
    for m, c in q.items():
        result[m] = result.get(m, 0) + c
    return {m: c for m, c in result.items() if c}


def _scalar_poly(expr: Expression, env: dict[str, Polynomial]) -> Polynomial | None:
    """*expr* (the scalar expression of one 0-d index lambda, its bindings'
    polynomials in *env*) as a polynomial; None if it is not one (a
    division, a call, ...). Recursive over one node's expression only."""
    import pymbolic.primitives as prim
    if isinstance(expr, (int, np.integer)) and not isinstance(expr, bool):
        return {(): int(expr)} if expr else {}
    if isinstance(expr, prim.Variable):
        return env.get(expr.name)
    if isinstance(expr, prim.Subscript) and expr.index in ((), None):
        return _scalar_poly(expr.aggregate, env)
    if isinstance(expr, (prim.Sum, prim.Product)):
        result: Polynomial | None = (
            {(): 1} if isinstance(expr, prim.Product) else {})
        for child in expr.children:
            p = _scalar_poly(child, env)
            if p is None or result is None:
                return None
            result = (poly_mul(result, p) if isinstance(expr, prim.Product)
                      else _poly_add(result, p))
        return result
    if isinstance(expr, prim.Power) and isinstance(expr.exponent, (int, np.integer)) \
            and 0 <= expr.exponent <= 64:
        base = _scalar_poly(expr.base, env)
        if base is None:
            return None
        result = {(): 1}
        for _ in range(int(expr.exponent)):
            result = poly_mul(result, base)
        return result
    return None


#: shape component -> (its polynomial or None, its size parameters by
#: name), for the components asked about (kept while the component lives)
_SIZE_POLYNOMIALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _size_polynomial_entry(dim: Array
                           ) -> tuple[Polynomial | None, dict[str, SizeParam]]:
    known = _SIZE_POLYNOMIALS
    entry = known.get(dim)
    if entry is not None:
        return entry
    cache: dict[int, tuple[Polynomial | None, dict[str, SizeParam]]] = {}
    stack = [dim]
    while stack:  # (depth-first with an explicit stack: any depth works)
        node = stack[-1]
        if id(node) in cache:
            stack.pop()
            continue
        if isinstance(node, SizeParam):
            cache[id(node)] = ({((node.name, 1),): 1}, {node.name: node})
            stack.pop()
            continue
        if not (isinstance(node, IndexLambda) and node.ndim == 0
                and not node.var_to_reduction_descr):
            cache[id(node)] = (None, {})
            stack.pop()
            continue
        pending = [b for b in node.bindings.values() if id(b) not in cache]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        env: dict[str, Polynomial] = {}
        params: dict[str, SizeParam] = {}
        poly: Polynomial | None = {}
        for name, b in node.bindings.items():
            b_poly, b_params = cache[id(b)]
            if b_poly is None:
                poly = None
                break
            env[name] = b_poly
            # (shared, not copied, when one binding brings them all)
            params = b_params if not params else {**params, **b_params}
        if poly is not None:
            poly = _scalar_poly(node.expr, env)
        cache[id(node)] = (poly, params)
    entry = known[dim] = cache[id(dim)]
    return entry


def size_polynomial(dim: ShapeComponent,
                    size_params: dict[str, SizeParam] | None = None
                    ) -> Polynomial | None:
    """Shape component *dim* (an int or an expression of size parameters)
    as a polynomial: ``{monomial: integer coefficient}``, a monomial a sorted
    tuple of ``(size parameter name, exponent)``; None if it is not one (a
    division, a call, ...). Its size parameters are recorded by name in
    *size_params* if given. The result is cached per node (do not modify
    it); the walk uses an explicit stack, so expressions of any depth
    work."""
    if not isinstance(dim, Array):
        return {(): int(dim)} if dim else {}
    poly, params = _size_polynomial_entry(dim)
    if size_params is not None:
        size_params.update(params)
    return poly


# }}}


def are_shapes_equal(shape1, shape2) -> bool:
    """Whether two shapes have equal length and equal components."""
    return len(shape1) == len(shape2) and all(
        are_shape_components_equal(d1, d2) for d1, d2 in zip(shape1, shape2))


def concrete_size(shape: Iterable[ShapeComponent]) -> int | None:
    """The number of elements of *shape*; None when a component is
    symbolic (a size known only at a call)."""
    total = 1
    for dim in shape:
        if not isinstance(dim, int):
            return None
        total *= dim
    return total


def is_one(dim: ShapeComponent) -> bool:
    """Whether the shape component *dim* is the integer 1 (a size
    parameter never is: it may take any value)."""
    return not isinstance(dim, Array) and dim == 1


def get_shape_after_broadcasting(exprs: Iterable[object]) -> tuple[ShapeComponent, ...]:
    """The NumPy broadcast shape of *exprs* (arrays and scalars)."""
    # (what has no shape attribute is a scalar or array-like)
    shapes = [e.shape if hasattr(e, "shape") else np.shape(cast("ArrayLike", e))
              for e in exprs]
    ndim = max((len(s) for s in shapes), default=0)
    result: list[ShapeComponent] = [1] * ndim
    for shape in shapes:
        for i, dim in enumerate(shape):
            j = ndim - len(shape) + i
            if is_one(dim):
                continue
            if is_one(result[j]):
                result[j] = dim
            elif not are_shape_components_equal(result[j], dim):
                raise CannotBroadcastError(
                    "operands could not be broadcast together with shapes "
                    + " ".join(str(tuple(s)) for s in shapes))
    if ndim > 1:
        check_element_count(tuple(result))
    return tuple(result)


def dim_to_index_lambda_components(
        expr: ShapeComponent, vng: UniqueNameGenerator | None = None
        ) -> tuple[Any, dict[str, SizeParam]]:
    """A scalar expression for the shape component *expr* and the
    size-parameter bindings it refers to."""
    # (Any: a size expression is integer arithmetic, but substitute() is
    # typed to return any pymbolic Expression, and callers read it as either)
    if not isinstance(expr, Array):
        return int(expr), {}
    if vng is None:
        vng = UniqueNameGenerator()
    bindings: dict[str, SizeParam] = {}
    scalar_of: dict[int, Expression] = {}
    for node in topological_order([expr]):
        if isinstance(node, SizeParam):
            name = vng("_in")
            bindings[name] = node
            scalar_of[id(node)] = prim.Variable(name)
        elif isinstance(node, IndexLambda) and node.ndim == 0:
            scalar_of[id(node)] = substitute(node.expr, {
                name: scalar_of[id(b)] for name, b in node.bindings.items()})
        else:
            raise ShapeMismatchError(
                f"shape component built from a {type(node).__name__} is not "
                "an expression of size parameters")
    return scalar_of[id(expr)], bindings


# vim: foldmethod=marker
