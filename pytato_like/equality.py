"""Structural equality of two DAGs.

.. autoclass:: EqualityComparer
"""

from __future__ import annotations

from pytato_like.collector import paused_collection
from pytato_like._traversal import structurally_equal_many
from pytato_like.array import Array, DictOfNamedArrays
from pytato_like.transform._graph import stack_headroom

__all__ = ["EqualityComparer"]


class EqualityComparer:
    """``EqualityComparer()(expr1, expr2)`` tells whether two arrays (or two
    :class:`~pytato_like.array.DictOfNamedArrays`) are structurally equal:
    same node classes, fields, shapes, dtypes, axes and tags, all the way
    down.

    Each pair of nodes is compared at most once, with an explicit stack: the
    cost is linear in the number of nodes (not exponential in the depth, as
    a naive recursive comparison of a DAG with shared nodes would be), and
    any depth works.
    """

    @paused_collection
    @stack_headroom
    def __call__(self, expr1: object, expr2: object) -> bool:
        if expr1 is expr2:
            return True
        if isinstance(expr1, Array) and isinstance(expr2, Array):
            return structurally_equal_many([expr1], [expr2])
        if isinstance(expr1, DictOfNamedArrays) \
                and isinstance(expr2, DictOfNamedArrays):
            if expr1.keys() != expr2.keys() or expr1.tags != expr2.tags:
                return False
            names = list(expr1.keys())
            return structurally_equal_many([expr1._data[n] for n in names],
                                           [expr2._data[n] for n in names])
        if isinstance(expr1, (Array, DictOfNamedArrays)) \
                or isinstance(expr2, (Array, DictOfNamedArrays)):
            return False
        return bool(expr1 == expr2)

    rec = __call__
