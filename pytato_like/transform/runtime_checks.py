"""Run-time checks that make compiled programs fail where NumPy fails.

NumPy raises on two kinds of values that compiled kernels would silently
turn into numbers: gather indices out of range (``IndexError: index 100 is
out of bounds for axis 0 with size 10``) and integer powers with negative
integer exponents (``ValueError: Integers to negative integer powers are
not allowed.``). :func:`add_runtime_checks` adds, for each gather index
array and each integer power in a DAG, small reductions as extra outputs
of the program (the largest and smallest index, plus the axis length when
it is a size parameter; the smallest exponent, also over the ranges of
the reductions a power sits in);
the bound program reads them back after its launches and raises the error
NumPy would have raised (:func:`raise_failed_checks`).

The checks cost one reduction over each index array and exponent, plus a
read-back of a few numbers that makes the call wait for its kernels;
programs built with ``options={"runtime_checks": False}`` skip them. An
index array whose values are known when the program is built (a
:class:`~pytato_like.array.DataWrapper` of NumPy data, such as a mesh's
connectivity) is checked once, on the host, then: in range, it adds no
reduction (on the mesh benchmark's 10^5 elements the per-call reductions
over its four connectivity arrays took more than half of each call's time).

.. autoclass:: RuntimeCheck
.. autofunction:: add_runtime_checks
.. autofunction:: raise_failed_checks
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, SupportsInt, cast

import numpy as np
import pymbolic.primitives as prim

from pytato_like.array import (
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    DataWrapper,
    IndexLambda,
    ReductionDescriptor,
)
from pytato_like.diagnostic import IndexOutOfBoundsError, NegativeIntegerPowerError
from pytato_like.reductions import MinReductionOperation, amax, amin
from pytato_like.scalar_expr import Reduce, TypeCast, expression_children, make_reduce

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytato_like.scalar_expr import ScalarExpression

__all__ = ["CHECK_PREFIX", "RuntimeCheck", "add_runtime_checks",
           "raise_failed_checks"]

#: name prefix of the outputs holding check values
CHECK_PREFIX = "_pt_check"


@dataclasses.dataclass(frozen=True)
class RuntimeCheck:
    """One check: the output names of its values and how to judge them.

    *kind* is ``"index"`` (outputs: largest and smallest index, valid in
    ``[-size, size)``, and the axis length when it is only known at run
    time) or ``"power"`` (output: smallest exponent, also over the ranges
    of the reductions the power sits in; must be non-negative)."""

    kind: str
    outputs: tuple[str, ...]
    size: int = 0
    axis: int = 0
    what: str = ""
    #: for an axis whose length is a size parameter (or an expression of
    #: them): the output holding that length at run time
    size_output: str | None = None
    #: entries of the index array when known (an empty one cannot fail)
    n_indices: int | None = None


def _index_checks(node: AdvancedIndexInContiguousAxes
                  | AdvancedIndexInNoncontiguousAxes, count: int, done: set[tuple[int, int]]
                  ) -> list[tuple[RuntimeCheck, dict]]:
    found: list[tuple[RuntimeCheck, dict]] = []
    for axis, (idx, dim) in enumerate(zip(node.indices, node.array.shape,
                                          strict=True)):
        if not isinstance(idx, Array) or (isinstance(dim, int) and dim == 0):
            continue
        key = (id(idx), dim if isinstance(dim, int) else id(dim))
        if key in done:
            continue    # the same index array into an axis of the same size
        done.add(key)
        if isinstance(dim, int) and _known_in_range(idx, dim):
            continue    # constant data, checked here once: cannot fail
        # 0 starts both reductions: it is a valid index (dim > 0), so an
        # empty index array passes, and no extreme constant overflows
        name = f"{CHECK_PREFIX}{count + len(found)}"
        outputs = {f"{name}_hi": amax(idx, initial=0)}
        if idx.dtype.kind != "u":
            # unsigned indices cannot be negative (and loopy has no
            # neutral element for an unsigned min reduction)
            outputs[f"{name}_lo"] = amin(idx, initial=0)
        size_output = None
        if not isinstance(dim, int):
            # a size parameter: its value is read back with the others
            size_output = f"{name}_size"
            outputs[size_output] = dim + 0
        n_indices = None
        if all(isinstance(d, int) for d in idx.shape):
            n_indices = int(np.prod(idx.shape, dtype=np.int64))
        what = (f"index array of shape {idx.shape} indexing an array of "
                f"shape {node.array.shape}")
        found.append((RuntimeCheck(
            "index", tuple(outputs), dim if isinstance(dim, int) else 0, axis,
            what, size_output, n_indices), outputs))
    return found


def _known_in_range(idx: Array, dim: int) -> bool:
    """Whether *idx* wraps host data whose every index is valid for an
    axis of length *dim* (data wrappers are immutable, so a check over
    them passes at every call)."""
    data = getattr(idx, "data", None) if isinstance(idx, DataWrapper) \
        else None
    if not isinstance(data, np.ndarray) or data.dtype.kind not in "iu":
        return False
    if data.size == 0:
        return True
    return int(data.min()) >= -dim and int(data.max()) < dim


def _expr_dtype(expr: object, bindings: dict[str, Array]) -> np.dtype | None:
    """The dtype NumPy gives scalar expression *expr* (None when unsure:
    no check is made then)."""
    if isinstance(expr, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(expr, (int, np.integer)):
        return np.dtype(np.int64) if isinstance(expr, int) else expr.dtype
    if isinstance(expr, (float, np.floating)):
        return np.dtype(np.float64) if isinstance(expr, float) else expr.dtype
    if isinstance(expr, prim.Subscript) and isinstance(expr.aggregate,
                                                        prim.Variable):
        ary = bindings.get(expr.aggregate.name)
        return None if ary is None else ary.dtype
    if isinstance(expr, prim.Variable):
        ary = bindings.get(expr.name)
        if ary is not None:
            return ary.dtype
        return np.dtype(np.int64) if expr.name.startswith("_") else None
    if isinstance(expr, TypeCast):   # promotions: int8 ** int32 casts
        return np.dtype(expr.dtype)
    children = None
    if isinstance(expr, (prim.Sum, prim.Product, prim.Min, prim.Max)):
        children = expr.children
    elif isinstance(expr, (prim.FloorDiv, prim.Remainder, prim.Power)):
        children = (expr.numerator, expr.denominator) \
            if not isinstance(expr, prim.Power) else (expr.base, expr.exponent)
    if children is None:
        return None
    dtypes = [_expr_dtype(c, bindings) for c in children]
    if any(d is None for d in dtypes):
        return None
    # Python scalars are weak in NumPy 2: an int literal keeps the
    # array's integer type, which is all that matters here (the kind)
    return np.result_type(*dtypes)


def _powers(expr: ScalarExpression) -> list[tuple[prim.Power, tuple]]:
    """The powers in *expr*, each with the bounds of the reductions it
    sits in (``((name, (lower, upper)), ...)``, outermost first)."""
    found: list[tuple[prim.Power, tuple]] = []
    stack: list[tuple[object, tuple]] = [(expr, ())]
    while stack:
        e, bounds = stack.pop()
        if isinstance(e, prim.Power):
            found.append((e, bounds))
        if isinstance(e, Reduce):
            stack.append((e.inner_expr, bounds + tuple(e.bounds.items())))
            stack.extend((b, bounds) for lo_hi in e.bounds.values()
                         for b in lo_hi)
            continue
        stack.extend((c, bounds) for c in expression_children(e))
    return found


def _power_checks(node: IndexLambda, count: int
                  ) -> list[tuple[RuntimeCheck, dict]]:
    found: list[tuple[RuntimeCheck, dict]] = []
    bindings = dict(node.bindings)
    for power, bounds in _powers(node.expr):
        base_t = _expr_dtype(power.base, bindings)
        exp_t = _expr_dtype(power.exponent, bindings)
        if base_t is None or exp_t is None or base_t.kind not in "iu" \
                or exp_t.kind != "i":
            continue
        if isinstance(power.exponent, (int, np.integer)) and power.exponent >= 0:
            continue
        # as int64: loopy has no min neutral element for narrow types
        expr: prim.ExpressionNode = TypeCast(np.dtype(np.int64), power.exponent)
        descr = None
        if bounds:
            # inside reductions: the smallest exponent over their ranges
            # (an empty range gives the neutral element: nothing raised)
            expr = make_reduce(expr, MinReductionOperation, dict(bounds))
            descr = {name: ReductionDescriptor() for name, _ in bounds}
        exponent = IndexLambda(expr, node.shape, np.dtype(np.int64), bindings,
                               descr)
        name = f"{CHECK_PREFIX}{count + len(found)}_min"
        found.append((RuntimeCheck("power", (name,)),
                      {name: amin(exponent, initial=0)}))
    return found


def _integer_binding(node: IndexLambda) -> bool:
    # (a loop: 2.5x faster than any() over a generator, and this runs for
    # every index lambda of every program)
    for binding in node.bindings.values():
        if binding.dtype.kind in "iu":
            return True
    return False


def add_runtime_checks(outputs: dict[str, Array], order: list[Array]
                       ) -> tuple[dict[str, Array], list[RuntimeCheck]]:
    """*outputs* with the check values of the DAG (in topological *order*)
    added, and the checks to judge them by."""
    checks: list[RuntimeCheck] = []
    extra: dict[str, Array] = {}
    done: set[tuple[int, int]] = set()
    for node in order:
        t = type(node)
        if t is AdvancedIndexInContiguousAxes \
                or t is AdvancedIndexInNoncontiguousAxes:
            new = _index_checks(
                cast("AdvancedIndexInContiguousAxes"
                     " | AdvancedIndexInNoncontiguousAxes", node),
                len(checks), done)
        elif t is IndexLambda and (node.dtype.kind in "iu"
                                   or _integer_binding(cast(IndexLambda,
                                                            node))):
            # an integer power needs an integer operand somewhere
            new = _power_checks(cast(IndexLambda, node), len(checks))
        else:
            continue
        for check, arrays in new:
            checks.append(check)
            extra.update(arrays)
    if not checks:
        return outputs, []
    return {**outputs, **extra}, checks


def raise_failed_checks(checks: list[RuntimeCheck],
                        values: Mapping[str, SupportsInt]) -> None:
    """Raise the error NumPy raises for the first failed check; *values*
    maps check output names to host numbers."""
    for check in checks:
        if check.kind == "index":
            extremes = [o for o in check.outputs if o != check.size_output]
            hi = int(values[extremes[0]])
            lo = int(values[extremes[1]]) if len(extremes) > 1 else 0
            size = check.size
            if check.size_output is not None:
                size = int(values[check.size_output])
                if size == 0 and check.n_indices:
                    # every index is out of range of an empty axis (the
                    # reductions start at 0, so say which index is)
                    bad: int | None = lo if lo < 0 else hi
                else:
                    bad = hi if hi >= size else lo if lo < -size else None
            else:
                bad = hi if hi >= size else lo if lo < -size else None
            if bad is not None:
                raise IndexOutOfBoundsError(
                    f"index {bad} is out of bounds for axis {check.axis} with "
                    f"size {size} ({check.what})")
        elif check.kind == "power":
            if int(values[check.outputs[0]]) < 0:
                raise NegativeIntegerPowerError(
                    "Integers to negative integer powers are not allowed.")
