"""Large full reductions (and large reductions to a few values)
rewritten as two parallel stages.

A reduction of a whole array to one value (``pt.sum(x)``, ``pt.amax(x)``,
``pt.any(x)``, ...) is one loop, which code generation gives to a single
work-item: on a many-core device it runs at the speed of one core.
:func:`split_full_reductions` rewrites every such reduction over at least
:data:`SPLIT_THRESHOLD` elements (static sizes) into

1. ``P`` partial reductions of ``k = N // P`` consecutive elements each (an
   array of shape ``(P,)``: one work-item per chunk, all in parallel; the
   reduced expression is computed inside, never stored),
2. a reduction of the ``P`` partial values and of the ``N - P k`` elements
   left over,

and likewise each output of a reduction over some axes with at most
:data:`MAX_OUTPUTS` outputs (the partial results then have the output
axes and a last chunk axis),

which gives the same value up to the order of the operations (the same for
``max``/``min``/``any``/``all``, rounding for floating-point sums, which
the accumulation in double precision of single-precision sums keeps below
NumPy's own error). NaN propagation is unchanged: each stage propagates
NaN as the original reduction does.

.. autodata:: SPLIT_THRESHOLD
.. autodata:: CHUNKS
.. autodata:: MAX_OUTPUTS
.. autofunction:: split_full_reductions
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

import pymbolic.primitives as prim

from pytato_like._shape_ops import concatenate, reshape
from pytato_like.array import Array, IndexLambda
from pytato_like.scalar_expr import (
    Reduce,
    expression_children,
    make_reduce,
    substitute,
)
from pytato_like.tags import ImplStored
from pytato_like.transform.copy import CopyMapper

if TYPE_CHECKING:
    from pymbolic.typing import ArithmeticExpression

__all__ = ["CHUNKS", "MAX_OUTPUTS", "SPLIT_THRESHOLD", "split_full_reductions"]

#: reductions of fewer elements stay in one loop
SPLIT_THRESHOLD = 2**15
#: the number of partial reductions (chunks) of a split reduction
CHUNKS = 1024
#: the least number of elements per chunk (smaller reductions use fewer
#: chunks)
MIN_CHUNK = 32
#: reductions over some axes are split too when they have at most this
#: many outputs (e.g. ``sum(x, axis=0)`` of a tall thin ``x``)
MAX_OUTPUTS = 16


def _few_outputs(shape: tuple) -> bool:
    """Whether an output of *shape* has too few elements to occupy the
    device (one work-item each) and is static."""
    count = 1
    for s in shape:
        if type(s) is not int:
            return False
        count *= s
    return count <= MAX_OUTPUTS


def _candidate(node: Array) -> TypeGuard[IndexLambda]:
    """Whether *node* is a full reduction worth splitting."""
    if type(node) is not IndexLambda or not _few_outputs(node.shape):
        return False
    expr = node.expr
    if not isinstance(expr, Reduce):
        return False
    count = 1
    for lo, hi in expr.bounds.values():
        if type(lo) is not int or type(hi) is not int:
            return False
        count *= max(hi - lo, 0)
    if count < SPLIT_THRESHOLD:
        return False
    # a reduction nested in the reduced expression stays as it is
    stack = [expr.inner_expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Reduce):
            return False
        stack.extend(expression_children(e))
    return True


def _flat_substitution(bounds: dict[str, tuple[int, int]],
                       flat: ArithmeticExpression
                       ) -> dict[str, ArithmeticExpression]:
    """Each reduction variable as a function of the flat (C order) position
    *flat* in the reduced range."""
    names = list(bounds)
    extents = [hi - lo for lo, hi in bounds.values()]
    result = {}
    stride = 1
    for i in reversed(range(len(names))):
        lo = bounds[names[i]][0]
        value = flat if stride == 1 else prim.FloorDiv(flat, stride)
        if i > 0:
            value = prim.Remainder(value, extents[i])
        result[names[i]] = value + lo if lo else value
        stride *= extents[i]
    return result


def _split(node: IndexLambda) -> Array:
    red: Reduce = node.expr
    bounds = {name: (lo, hi) for name, (lo, hi) in red.bounds.items()}
    total = 1
    for lo, hi in bounds.values():
        total *= hi - lo
    out_shape = node.shape
    d = len(out_shape)
    n_out = 1
    for s in out_shape:
        n_out *= s
    chunks = max(1, min(CHUNKS // max(n_out, 1), total // MIN_CHUNK))
    size = total // chunks
    rest = total - chunks * size
    var = prim.Variable("_r0")
    descr = {"_r0": next(iter(node.var_to_reduction_descr.values()))} \
        if node.var_to_reduction_descr else None

    def chunk_reduction(flat: ArithmeticExpression, extent: int, shape: tuple
                        ) -> IndexLambda:
        inner = substitute(red.inner_expr, _flat_substitution(bounds, flat))
        # stored: inlined into the final reduction it would be one loop again
        return IndexLambda(make_reduce(inner, red.op, {"_r0": (0, extent)}),
                           shape, node.dtype, node.bindings,
                           var_to_reduction_descr=descr,
                           tags=frozenset({ImplStored()}))

    # the partial results have the output axes (index variables _0 ..
    # _{d-1}, as in the original expression) and the chunk axis _{d} last
    partial = chunk_reduction(prim.Variable(f"_{d}") * size + var, size,
                              (*out_shape, chunks))
    parts: Array = partial
    if rest:
        tail = chunk_reduction(chunks * size + var, rest, out_shape)
        parts = concatenate([partial, reshape(tail, (*out_shape, 1))], axis=d)
    n = parts.shape[d]
    out_vars = tuple(prim.Variable(f"_{i}") for i in range(d))
    return IndexLambda(make_reduce(prim.Subscript(prim.Variable("_in0"),
                                                  (*out_vars, var)),
                              red.op, {"_r0": (0, n)}),
                       out_shape, node.dtype, {"_in0": parts},
                       var_to_reduction_descr=descr, axes=node.axes,
                       tags=node.tags, non_equality_tags=node.non_equality_tags)


class _Splitter(CopyMapper):
    def map_index_lambda(self, expr: IndexLambda) -> Array:
        new = super().map_index_lambda(expr)
        if _candidate(new):
            return _split(new)
        return new


def split_full_reductions(outputs: dict[str, Array], order: list[Array]
                          ) -> dict[str, Array]:
    """*outputs* (name -> array, in topological *order*) with every large
    full reduction split in two parallel stages (see the module
    documentation); *outputs* itself when there is none."""
    if not any(_candidate(node) for node in order
               if type(node) is IndexLambda):
        return outputs
    mapper = _Splitter()
    return {name: mapper(ary) for name, ary in outputs.items()}
