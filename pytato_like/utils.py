"""Shape helpers shared by the front end and the transforms.

.. autofunction:: are_shape_components_equal
.. autofunction:: are_shapes_equal
.. autofunction:: get_shape_after_broadcasting
.. autofunction:: dim_to_index_lambda_components
.. autofunction:: normalize_axis
.. autofunction:: normalize_axes
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pymbolic.primitives as prim
from pytools import UniqueNameGenerator

from pytato_like.array import Array, IndexLambda, ShapeComponent, SizeParam
from pytato_like.diagnostic import (
    AxisError,
    CannotBroadcastError,
    ShapeMismatchError,
)


def are_shape_components_equal(dim1: ShapeComponent, dim2: ShapeComponent) -> bool:
    """Whether two shape components are known to be equal: ints by value,
    size expressions by structure or, failing that, by value at several
    pseudo-random assignments of their size parameters (so ``3*n`` equals
    ``n*3`` and ``n + n + n``)."""
    if not isinstance(dim1, Array) and not isinstance(dim2, Array):
        return int(dim1) == int(dim2)
    if isinstance(dim1, Array) and isinstance(dim2, Array) and dim1 == dim2:
        return True
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
    params: dict[str, str] = {}
    for dim in (dim1, dim2):
        expr, bindings = dim_to_index_lambda_components(dim)
        exprs.append((expr, bindings))
        for name, size_param in bindings.items():
            params[name] = size_param.name
    param_names = sorted(set(params.values()))
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


def are_shapes_equal(shape1, shape2) -> bool:
    """Whether two shapes have equal length and equal components."""
    return len(shape1) == len(shape2) and all(
        are_shape_components_equal(d1, d2) for d1, d2 in zip(shape1, shape2))


def _is_one(dim: ShapeComponent) -> bool:
    return not isinstance(dim, Array) and dim == 1


def get_shape_after_broadcasting(exprs: Iterable[Any]) -> tuple[ShapeComponent, ...]:
    """The NumPy broadcast shape of *exprs* (arrays and scalars)."""
    shapes = [e.shape if hasattr(e, "shape") else np.shape(e) for e in exprs]
    ndim = max((len(s) for s in shapes), default=0)
    result: list[ShapeComponent] = [1] * ndim
    for shape in shapes:
        for i, dim in enumerate(shape):
            j = ndim - len(shape) + i
            if _is_one(dim):
                continue
            if _is_one(result[j]):
                result[j] = dim
            elif not are_shape_components_equal(result[j], dim):
                raise CannotBroadcastError(
                    "operands could not be broadcast together with shapes "
                    + " ".join(str(tuple(s)) for s in shapes))
    return tuple(result)


def normalize_axis(axis: Any, ndim: int, what: str = "array") -> int:
    """*axis* in ``range(ndim)``, accepting negative values as NumPy does."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise AxisError(f"axis {axis!r} is not an integer")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for {what} of "
                        f"dimension {ndim}")
    return axis % ndim


def normalize_axes(axis: Any, ndim: int, what: str = "array") -> tuple[int, ...]:
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
    """A scalar expression for the shape component *expr* and the
    size-parameter bindings it refers to."""
    if not isinstance(expr, Array):
        return int(expr), {}
    if vng is None:
        vng = UniqueNameGenerator()
    from pytato_like._traversal import topological_order
    from pytato_like.scalar_expr import substitute

    bindings: dict[str, SizeParam] = {}
    scalar_of: dict[int, Any] = {}
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
