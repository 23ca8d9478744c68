"""Einsums without broadcast operand axes.

An einsum operand axis of extent 1 whose index has a longer extent in
another operand is broadcast. :func:`rewrite_einsums_with_no_broadcasts`
removes such axes: the operand is indexed at 0 along them and their access
descriptors are dropped, so every remaining operand axis runs over the full
extent of its index. The value of the expression does not change.

.. autofunction:: rewrite_einsums_with_no_broadcasts
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytato_like.collector import paused_collection
from pytato_like.array import (
    BasicIndex,
    Einsum,
    EinsumElementwiseAxis,
    NormalizedSlice,
)
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.mapper import ArrayOrNamesTc
from pytato_like.utils import is_one

if TYPE_CHECKING:
    from pytato_like.array import ShapeComponent


def _full_slice(dim: ShapeComponent) -> NormalizedSlice:
    if isinstance(dim, int):
        return NormalizedSlice(0, dim, 1)
    return NormalizedSlice(0, None, 1)


class EinsumBroadcastRemover(CopyMapper):
    """Copies a DAG, rewriting each :class:`~pytato_like.array.Einsum` so
    that none of its operands is broadcast along an axis."""

    def map_einsum(self, expr: Einsum) -> Einsum:
        args = [self.rec(arg) for arg in expr.args]
        extents = expr._get_reduction_extents()
        new_access = []
        new_args = []
        for acc, arg in zip(expr.access_descriptors, args, strict=True):
            keep = []
            for descr, dim in zip(acc, arg.shape, strict=True):
                full = (expr.shape[descr.dim]
                        if isinstance(descr, EinsumElementwiseAxis)
                        else extents[descr])
                keep.append(not (is_one(dim) and not is_one(full)))
            if all(keep):
                new_access.append(acc)
                new_args.append(arg)
                continue
            indices = tuple(_full_slice(dim) if k else 0
                            for k, dim in zip(keep, arg.shape, strict=True))
            new_args.append(BasicIndex(arg, indices))
            new_access.append(tuple(d for d, k in zip(acc, keep, strict=True) if k))
        new_access_t = tuple(new_access)
        if new_access_t == expr.access_descriptors and all(
                a is b for a, b in zip(new_args, expr.args, strict=True)):
            return expr
        return Einsum(new_access_t, tuple(new_args), expr.redn_axis_to_redn_descr,
                      axes=expr.axes, tags=expr.tags)


@paused_collection
def rewrite_einsums_with_no_broadcasts(expr: ArrayOrNamesTc) -> ArrayOrNamesTc:
    """*expr* with every einsum rewritten so that no operand axis is
    broadcast (see the module documentation).

    >>> import numpy as np, pytato_like as pt
    >>> a = pt.make_placeholder("a", (10, 4, 1), np.float64)
    >>> b = pt.make_placeholder("b", (10, 1, 4), np.float64)
    >>> new_expr = pt.rewrite_einsums_with_no_broadcasts(
    ...     pt.einsum("ijk,ijk->i", a, b))
    >>> pt.analysis.is_einsum_similar_to_subscript(new_expr, "ij,ik->i")
    True
    """
    return EinsumBroadcastRemover()(expr)
