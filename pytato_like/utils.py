"""Shape helpers shared by the front end and the transforms.

.. autofunction:: are_shape_components_equal
.. autofunction:: are_shapes_equal
.. autofunction:: size_polynomial
.. autofunction:: get_shape_after_broadcasting
.. autofunction:: dim_to_index_lambda_components
.. autofunction:: normalize_axis
.. autofunction:: normalize_axes
.. autofunction:: get_indexing_expression
.. autofunction:: get_common_dtype_of_ary_or_scalars
.. autofunction:: broadcast_binary_op
.. autofunction:: get_einsum_subscript_str
.. autofunction:: get_einsum_specification
.. autofunction:: normalized_slice_does_not_change_axis
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pymbolic.primitives as prim
from pytools import UniqueNameGenerator

from pytato_like.array import (
    Array,
    Einsum,
    EinsumElementwiseAxis,
    IndexLambda,
    ShapeComponent,
    SizeParam,
    check_element_count,
    check_tags,
)
from pytato_like.diagnostic import (
    AxisError,
    CannotBroadcastError,
    ShapeMismatchError,
    UnsupportedArrayError,
)
from pytato_like.scalar_expr import index_var, substitute

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from pymbolic.typing import Expression

    from pytato_like.array import EinsumAxisDescriptor


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


def normalize_axis(axis: object, ndim: int, what: str = "array") -> int:
    """*axis* in ``range(ndim)``, accepting negative values as NumPy does."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise AxisError(f"axis {axis!r} is not an integer")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for {what} of "
                        f"dimension {ndim}")
    return axis % ndim


def normalize_axes(axis: int | np.integer | Iterable[int | np.integer] | None,
                   ndim: int, what: str = "array") -> tuple[int, ...]:
    """*axis* (None, an int or a tuple of ints) as a sorted tuple of distinct
    non-negative axes; None means all axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    result = tuple(normalize_axis(a, ndim, what) for a in axis)
    if len(set(result)) != len(result):
        raise AxisError(f"repeated axis in {tuple(axis)} for {what} of "
                        f"dimension {ndim}")
    return tuple(sorted(result))


def dim_to_index_lambda_components(
        expr: ShapeComponent, vng: UniqueNameGenerator | None = None
        ) -> tuple[Any, dict[str, SizeParam]]:
    # (Any: a size expression is integer arithmetic, but substitute() is
    # typed to return any pymbolic Expression, and callers read it as either)
    """A scalar expression for the shape component *expr* and the
    size-parameter bindings it refers to."""
    if not isinstance(expr, Array):
        return int(expr), {}
    if vng is None:
        vng = UniqueNameGenerator()
    from pytato_like._traversal import topological_order

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


# {{{ pytato's front-end helpers

def get_indexing_expression(shape, result_shape) -> tuple[int | prim.Variable, ...]:
    """The index expressions reading an array of *shape* inside an index
    lambda of *result_shape* under NumPy broadcasting: ``0`` along axes of
    length 1 that are broadcast, the result's index variable ``_i``
    elsewhere (axes aligned from the right)."""
    shape = tuple(shape)
    result_shape = tuple(result_shape)
    if len(shape) > len(result_shape):
        raise CannotBroadcastError(
            f"an array of shape {shape} cannot be read in a result of shape "
            f"{result_shape} (more dimensions)")
    offset = len(result_shape) - len(shape)
    indices: list[int | prim.Variable] = []  # 0 (broadcast) or an index variable
    for i, dim in enumerate(shape):
        out_dim = result_shape[offset + i]
        if is_one(dim) and not is_one(out_dim):
            indices.append(0)
        elif are_shape_components_equal(dim, out_dim):
            indices.append(index_var(offset + i))
        else:
            raise CannotBroadcastError(
                f"axis {i} of shape {shape} (length {dim}) does not broadcast "
                f"to length {out_dim} of result shape {result_shape}")
    return tuple(indices)


def get_common_dtype_of_ary_or_scalars(ary_or_scalars) -> np.dtype:
    """The dtype NumPy gives the result of combining *ary_or_scalars*
    (arrays by their dtype, Python scalars weakly, as NumPy 2 does)."""
    operands = [a.dtype if isinstance(a, Array) else a for a in ary_or_scalars]
    return np.result_type(*operands)


def broadcast_binary_op(a1, a2, op, get_result_type, *,
                        tags=frozenset(), non_equality_tags=frozenset(),
                        cast_to_result_dtype: bool = True,
                        is_pow: bool = False):
    """``op(a1, a2)`` as an index lambda over the broadcast shape of the
    operands (arrays or scalars). *op* combines two scalar expressions (e.g.
    :func:`operator.add`); ``get_result_type(a1, a2)`` gives the result
    dtype. With *cast_to_result_dtype*, operands are first converted to the
    result dtype (for *is_pow*, only the base is, as NumPy computes
    ``int ** int`` in integers). Two scalars give ``op(a1, a2)`` itself."""
    from pytato_like._frontend import ElementwiseBuilder, as_operand
    a1 = as_operand(a1)
    a2 = as_operand(a2)
    if not isinstance(a1, Array) and not isinstance(a2, Array):
        return op(a1, a2)
    result_dtype = np.dtype(get_result_type(a1, a2))
    shape = get_shape_after_broadcasting([a1, a2])
    builder = ElementwiseBuilder((a1, a2), shape, "broadcast_binary_op")

    def operand(x, cast):
        if isinstance(x, Array):
            return builder.access(x, result_dtype if cast else x.dtype)
        if cast:
            return np.dtype(result_dtype).type(x)
        return x

    x1 = operand(a1, cast_to_result_dtype)
    x2 = operand(a2, cast_to_result_dtype and not is_pow)
    result = builder.build(op(x1, x2), result_dtype)
    tags = check_tags(tags)
    if tags or non_equality_tags:
        result = result.copy(tags=tags, non_equality_tags=frozenset(
            non_equality_tags))
    return result


def _einsum_letters():
    import string
    alphabet = string.ascii_lowercase
    # start at 'i' as hand-written einsums do, then the rest
    return (alphabet[8:] + alphabet[:8] + string.ascii_uppercase)


def get_einsum_subscript_str(expr) -> str:
    """A subscript string that rebuilds the einsum *expr* with
    :func:`~pytato_like.einsum` from ``expr.args``. Letters are given in
    order of first appearance starting at ``i`` (so ``pt.einsum("ij,jk->ik",
    a, b)`` gives back ``"ij,jk->ik"``), not necessarily the original
    ones."""
    if not isinstance(expr, Einsum):
        raise UnsupportedArrayError(
            f"get_einsum_subscript_str expects an Einsum, got a "
            f"{type(expr).__name__} of shape {getattr(expr, 'shape', None)}")
    letters = iter(_einsum_letters())
    letter_of: dict[EinsumAxisDescriptor, str] = {}
    in_specs = []
    for acc in expr.access_descriptors:
        spec = ""
        for descr in acc:
            if descr not in letter_of:
                letter_of[descr] = next(letters)
            spec += letter_of[descr]
        in_specs.append(spec)
    out_spec = ""
    for i in range(expr.ndim):
        descr = EinsumElementwiseAxis(i)
        if descr not in letter_of:  # pragma: no cover (every output axis is read)
            letter_of[descr] = next(letters)
        out_spec += letter_of[descr]
    return ",".join(in_specs) + "->" + out_spec


#: pytato's newer name of :func:`get_einsum_subscript_str`
get_einsum_specification = get_einsum_subscript_str


def normalized_slice_does_not_change_axis(normalized_slice, axis_len) -> bool:
    """Whether indexing an axis of length *axis_len* with the
    :class:`~pytato_like.array.NormalizedSlice` *normalized_slice* keeps the
    axis as it is (start 0, step 1, stop at the end)."""
    if normalized_slice.step != 1 or normalized_slice.start != 0:
        return False
    if normalized_slice.stop is None:  # full slice of a symbolic axis
        return True
    return are_shape_components_equal(normalized_slice.stop, axis_len)

# }}}
