"""Reductions (sum, prod, max, min, any, all, mean) with NumPy semantics.

A reduction is an :class:`~pytato_like.array.IndexLambda` whose expression
contains a :class:`~pytato_like.scalar_expr.Reduce`; the reduction operation
objects below name the operation and its neutral element.

.. autoclass:: ReductionOperation
.. autofunction:: sum
.. autofunction:: prod
.. autofunction:: amax
.. autofunction:: amin
.. autofunction:: any
.. autofunction:: all
.. autofunction:: mean
"""

from __future__ import annotations

import builtins
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pymbolic.primitives as prim
from constantdict import constantdict

from pytato_like._creation import full
from pytato_like._frontend import as_operand
from pytato_like.array import (
    NO_TAGS,
    Array,
    IndexLambda,
    ReductionDescriptor,
)
from pytato_like.cmath import maximum, minimum
from pytato_like.diagnostic import (
    EmptyReductionError,
    NotAReductionAxis,
    PytatoLikeError,
)
from pytato_like.scalar_expr import TypeCast, index_var, make_reduce, reduction_var
from pytato_like.utils import dim_to_index_lambda_components, normalize_axes

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pymbolic.typing import Expression

    from pytato_like.array import Operand, ShapeComponent
    from pytato_like.dtype import DTypeLike

    #: the axes to reduce: one, several, or None for all
    AxisArg = int | Sequence[int] | None
    #: reduction descriptors by axis (pytato's ``axis_to_reduction_descr``)
    DescrArg = Mapping[int, ReductionDescriptor] | None


class ReductionOperation:
    """A reduction operation: its name, NumPy reduce function and neutral
    element (None when it has none, as for max and min)."""

    def __init__(self, name: str, numpy_reduce, neutral) -> None:
        self.name = name
        self.numpy_reduce = numpy_reduce
        self._neutral = neutral

    def neutral_element(self, dtype: np.dtype):
        return None if self._neutral is None else dtype.type(self._neutral)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReductionOperation) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("ReductionOperation", self.name))

    def __reduce__(self):
        return (_reduction_operation_by_name, (self.name,))


SumReductionOperation = ReductionOperation("sum", np.sum, 0)
ProductReductionOperation = ReductionOperation("product", np.prod, 1)
MaxReductionOperation = ReductionOperation("max", np.max, None)
MinReductionOperation = ReductionOperation("min", np.min, None)
AllReductionOperation = ReductionOperation("all", np.all, True)
AnyReductionOperation = ReductionOperation("any", np.any, False)

REDUCTION_OPERATIONS = {op.name: op for op in (
    SumReductionOperation, ProductReductionOperation, MaxReductionOperation,
    MinReductionOperation, AllReductionOperation, AnyReductionOperation)}


def _reduction_operation_by_name(name: str) -> ReductionOperation:
    return REDUCTION_OPERATIONS[name]


@lru_cache(maxsize=256)
def _accumulation_dtype(numpy_reduce, dtype: np.dtype) -> np.dtype:
    return numpy_reduce(np.zeros(1, dtype)).dtype


def _reduce(op: ReductionOperation, a: Operand, axis, keepdims: bool,
            what: str, dtype=None, initial: Operand | None = None,
            axis_to_reduction_descr=None) -> Array:
    a = as_operand(a)
    if not isinstance(a, Array):
        if initial is not None:
            return op.numpy_reduce(a, initial=initial)
        return op.numpy_reduce(a)
    axes = normalize_axes(axis, a.ndim, f"{what}() of an array of shape {a.shape}")
    if initial is not None and initial != op.neutral_element(a.dtype):
        return _reduce_with_initial(op, a, axes, keepdims, what, dtype, initial,
                                    axis_to_reduction_descr)
    if dtype is not None:
        out_dtype = np.dtype(dtype)
    elif op.name in ("any", "all"):
        out_dtype = np.dtype(bool)
    else:
        out_dtype = _accumulation_dtype(op.numpy_reduce, a.dtype)
    if op.neutral_element(out_dtype) is None:
        for ax in axes:
            if a.shape[ax] == 0:
                raise EmptyReductionError(
                    f"{what}() over axis {ax} of length 0 (array shape "
                    f"{a.shape}) has no identity")

    bindings: dict[str, Array] = {"_in0": a}
    if _is_static(a.shape):
        # programs repeat the same few reductions: build each expression once
        expr, out_shape, descr = _static_reduction(op, a.dtype, a.shape, axes,
                                                   keepdims, out_dtype)
    else:
        expr, out_shape, descr = _reduction_expr(op, a.dtype, a.shape, axes,
                                                 keepdims, out_dtype, bindings)
    if axis_to_reduction_descr:
        descr = _with_given_descriptors(descr, axes, axis_to_reduction_descr,
                                        what, a)
    return IndexLambda(expr, out_shape, out_dtype, bindings, descr, None, NO_TAGS)


def _with_given_descriptors(descr, axes: tuple[int, ...],
                            axis_to_reduction_descr, what: str, a: Array):
    """*descr* (reduction variable -> descriptor) with the descriptors the
    user gave per reduced axis of *a*."""
    new = dict(descr or {})
    for ax, rd in axis_to_reduction_descr.items():
        norm = ax % a.ndim if isinstance(ax, int) and -a.ndim <= ax < a.ndim \
            else ax
        if norm not in axes:
            raise NotAReductionAxis(
                f"{what}(): axis {ax!r} of the array of shape {a.shape} is not "
                f"reduced over (reduced axes: {axes})")
        if not isinstance(rd, ReductionDescriptor):
            raise NotAReductionAxis(
                f"{what}(): descriptor for axis {ax} is a "
                f"{type(rd).__name__}, not a ReductionDescriptor")
        new[reduction_var(axes.index(norm)).name] = rd
    return constantdict(new)


def _reduce_with_initial(op, a, axes, keepdims, what, dtype, initial,
                         axis_to_reduction_descr) -> Array:
    """NumPy's ``initial=``: the reduction also takes *initial* in; over an
    empty axis the result is *initial* itself (also for max/min)."""
    if op.name in ("any", "all"):
        raise PytatoLikeError(f"{what}() takes no initial value")
    empty = False
    for ax in axes:
        if not isinstance(a.shape[ax], Array) and a.shape[ax] == 0:
            empty = True
    if empty and op.neutral_element(a.dtype) is None:
        # max/min over nothing is *initial*; written as an (empty, so zero)
        # sum plus *initial* so the program still takes *a* as its input
        out_dtype = a.dtype if dtype is None else np.dtype(dtype)
        nothing = _reduce(SumReductionOperation, a, axes, keepdims, what,
                          out_dtype)
        return nothing + full(nothing.shape, initial, out_dtype)
    reduced = _reduce(op, a, axes, keepdims, what, dtype,
                      axis_to_reduction_descr=axis_to_reduction_descr)
    combine = {"sum": lambda x: x + initial, "product": lambda x: x * initial,
               "max": lambda x: maximum(x, initial),
               "min": lambda x: minimum(x, initial)}[op.name]
    result = combine(reduced)
    if result.dtype != reduced.dtype and not isinstance(initial, Array):
        # a Python scalar initial does not change the result dtype in NumPy
        result = result.astype(reduced.dtype)
    return result


def _is_static(shape: tuple) -> bool:
    # (the builtins all/any are shadowed in this module)
    for d in shape:
        if not isinstance(d, int):
            return False
    return True


@lru_cache(maxsize=1024)
def _static_reduction(op, dtype, shape, axes, keepdims, out_dtype):
    return _reduction_expr(op, dtype, shape, axes, keepdims, out_dtype, {})


def _reduction_expr(op: ReductionOperation, dtype: np.dtype, shape: tuple,
                    axes: tuple[int, ...], keepdims: bool, out_dtype: np.dtype,
                    bindings: dict[str, Array]):
    """``(expr, out_shape, var_to_reduction_descr)`` of the reduction of an
    array bound as ``_in0``; size parameters of symbolic axis lengths are
    added to *bindings*."""
    index = []
    bounds: dict[str, tuple[int, Expression]] = {}
    out_shape = []
    n_out = 0
    for ax, dim in enumerate(shape):
        if ax in axes:
            var = reduction_var(len(bounds))
            bounds[var.name] = (0, _bound_expr(dim, bindings))
            index.append(var)
            if keepdims:
                out_shape.append(1)
                n_out += 1
        else:
            index.append(index_var(n_out))
            out_shape.append(dim)
            n_out += 1
    inner: Expression = prim.Subscript(prim.Variable("_in0"), tuple(index)) if index \
        else prim.Variable("_in0")
    if op.name in ("any", "all"):
        if dtype.kind != "b":
            inner = prim.Comparison(inner, "!=", dtype.type(0))
    elif dtype != out_dtype:
        inner = TypeCast(out_dtype, inner)
    expr: Expression
    if bounds:
        expr = make_reduce(inner, op, bounds)
        descr = constantdict({name: _DEFAULT_DESCR for name in bounds})
    else:
        expr, descr = inner, None
    return expr, tuple(out_shape), descr


_DEFAULT_DESCR = ReductionDescriptor()


def _bound_expr(dim: ShapeComponent, bindings: dict[str, Array]) -> Expression:
    """A reduction bound for axis length *dim*: the int itself, or a scalar
    expression of size parameters that are added to *bindings*."""
    if isinstance(dim, int):
        return dim
    from pytools import UniqueNameGenerator

    expr, dim_bindings = dim_to_index_lambda_components(
        dim, UniqueNameGenerator(set(bindings)))
    bindings.update(dim_bindings)
    return expr


def sum(a: Operand, axis: AxisArg = None, dtype: DTypeLike | None = None,  # noqa: A001
        keepdims: bool = False, initial: Operand | None = 0,
        axis_to_reduction_descr: DescrArg = None, **kwargs: AxisArg) -> Array:
    """Sum over *axis* (all axes when None), with NumPy's accumulation
    dtype (e.g. int64 for small integers), plus *initial*.
    *axis_to_reduction_descr* maps reduced axes of *a* to the
    :class:`~pytato_like.array.ReductionDescriptor` of their reduction."""
    _check_kwargs(kwargs, "sum")
    return _reduce(SumReductionOperation, a, _axis(axis, kwargs), keepdims,
                   "sum", dtype, initial, axis_to_reduction_descr)


def prod(a: Operand, axis: AxisArg = None, dtype: DTypeLike | None = None,
         keepdims: bool = False, initial: Operand | None = 1,
         axis_to_reduction_descr: DescrArg = None, **kwargs: AxisArg) -> Array:
    """Product over *axis*, times *initial*."""
    _check_kwargs(kwargs, "prod")
    return _reduce(ProductReductionOperation, a, _axis(axis, kwargs), keepdims,
                   "prod", dtype, initial, axis_to_reduction_descr)


def amax(a: Operand, axis: AxisArg = None, keepdims: bool = False,
         initial: Operand | None = None, axis_to_reduction_descr: DescrArg = None,
         **kwargs: AxisArg) -> Array:
    """Maximum over *axis* (NaN propagates, as in NumPy); with *initial*,
    also of *initial* (which makes empty axes allowed)."""
    _check_kwargs(kwargs, "amax")
    return _reduce(MaxReductionOperation, a, _axis(axis, kwargs), keepdims,
                   "amax", None, initial, axis_to_reduction_descr)


def amin(a: Operand, axis: AxisArg = None, keepdims: bool = False,
         initial: Operand | None = None, axis_to_reduction_descr: DescrArg = None,
         **kwargs: AxisArg) -> Array:
    """Minimum over *axis* (and *initial*, when given)."""
    _check_kwargs(kwargs, "amin")
    return _reduce(MinReductionOperation, a, _axis(axis, kwargs), keepdims,
                   "amin", None, initial, axis_to_reduction_descr)


def any(a: Operand, axis: AxisArg = None, keepdims: bool = False,  # noqa: A001
        axis_to_reduction_descr: DescrArg = None) -> Array:
    """Whether any element along *axis* is nonzero."""
    return _reduce(AnyReductionOperation, a, axis, keepdims, "any",
                   axis_to_reduction_descr=axis_to_reduction_descr)


def all(a: Operand, axis: AxisArg = None, keepdims: bool = False,  # noqa: A001
        axis_to_reduction_descr: DescrArg = None) -> Array:
    """Whether every element along *axis* is nonzero."""
    return _reduce(AllReductionOperation, a, axis, keepdims, "all",
                   axis_to_reduction_descr=axis_to_reduction_descr)


def mean(a: Array | np.ndarray | np.generic, axis: AxisArg = None,
         keepdims: bool = False) -> Array:
    """Arithmetic mean over *axis* (float64 for integer input)."""
    total = sum(a, axis=axis, keepdims=keepdims)
    axes = normalize_axes(axis, a.ndim)
    count = 1
    for ax in axes:
        count = count * a.shape[ax]
    if not isinstance(a, Array):
        return total / count
    if total.dtype.kind in "iub":
        total = total.astype(np.float64)
    return total / count


def _axis(axis, kwargs):
    # pytato spells it ``axes`` in places
    return kwargs.get("axes", axis)


def _check_kwargs(kwargs, what):
    unknown = set(kwargs) - {"axes"}
    if unknown:

        raise PytatoLikeError(f"{what}() got unexpected arguments {sorted(unknown)}")


del builtins
