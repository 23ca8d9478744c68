"""Read-only questions about an array DAG.

All functions here walk the DAG once with explicit stacks (linear time, any
depth). Results keyed by nodes use one representative per class of
structurally equal nodes, as pytato's (equality-keyed) results do.

.. autofunction:: get_nusers
.. autofunction:: get_num_nodes
.. autofunction:: is_einsum_similar_to_subscript
.. autoclass:: DirectPredecessorsGetter
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytato_like._traversal import topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    Einsum,
    EinsumElementwiseAxis,
    children_of,
)
from pytato_like.diagnostic import NotAnArrayError, UnsupportedArrayError
from pytato_like.transform._graph import (
    gc_paused,
    stack_headroom,
    structural_representatives,
    walk_children,
)
from pytato_like.transform.mapper import ARRAY_MAPPER_METHODS, Mapper

__all__ = [
    "DirectPredecessorsGetter",
    "get_num_nodes",
    "get_nusers",
    "is_einsum_similar_to_subscript",
]


def _roots(outputs: Any, what: str) -> list[Array]:
    if isinstance(outputs, DictOfNamedArrays):
        return list(outputs._data.values())
    if isinstance(outputs, Array):
        return [outputs]
    raise NotAnArrayError(f"{what} expects an Array or a DictOfNamedArrays, got "
                          f"a {type(outputs).__name__}")


@gc_paused
@stack_headroom
def get_nusers(outputs: Array | DictOfNamedArrays) -> Mapping[Array, int]:
    """For every node of the DAG *outputs*, the number of times a node uses
    its value: one per reference in another node's fields (operands, shape
    expressions, index arrays; an array bound twice counts twice), plus one
    per entry of *outputs* when it is a
    :class:`~pytato_like.array.DictOfNamedArrays`. Nodes nobody uses map to
    0."""
    roots = _roots(outputs, "get_nusers")
    order = topological_order(roots)
    reps = structural_representatives(order)
    rep_of = {id(node): rep for node, rep in zip(order, reps)}
    # counted per representative id, so that building the result never
    # compares distinct-but-equal sub-DAGs
    count: dict[int, int] = {id(rep): 0 for rep in reps}
    for node in order:
        for child in children_of(node):
            count[id(rep_of[id(child)])] += 1
    if isinstance(outputs, DictOfNamedArrays):
        for ary in roots:
            count[id(rep_of[id(ary)])] += 1
    result: dict[Array, int] = {}
    for rep in reps:
        if rep not in result:
            result[rep] = count[id(rep)]
    return result


@gc_paused
@stack_headroom
def get_num_nodes(outputs: Array | DictOfNamedArrays,
                  count_duplicates: bool = False) -> int:
    """The number of array nodes in the DAG *outputs* (shape expressions and
    index arrays included). With *count_duplicates*, distinct objects that
    are structurally equal are counted separately; without, once."""
    order = topological_order(_roots(outputs, "get_num_nodes"))
    if count_duplicates:
        return len(order)
    return sum(1 for node, rep in zip(order, structural_representatives(order))
               if node is rep)


def _parse_subscripts(subscripts: str) -> tuple[list[str], str]:
    from pytato_like._einsum import _parse_subscripts as parse
    spec = subscripts.replace(" ", "")
    n_operands = spec.split("->")[0].count(",") + 1
    return parse(subscripts, n_operands)


def is_einsum_similar_to_subscript(expr: Einsum, subscripts: str) -> bool:
    """Whether an einsum with *subscripts* over ``expr.args`` computes the
    same as *expr*: same operand count, output axes in the same order and
    the same reduction indices shared between the same operand axes (up to
    renaming)."""
    if not isinstance(expr, Einsum):
        raise UnsupportedArrayError(
            f"is_einsum_similar_to_subscript expects an Einsum, got a "
            f"{type(expr).__name__} of shape {getattr(expr, 'shape', None)}")
    in_specs, out_spec = _parse_subscripts(subscripts)
    if len(in_specs) != len(expr.args) or len(out_spec) != expr.ndim:
        return False
    letter_to_descr: dict[str, Any] = {
        c: EinsumElementwiseAxis(i) for i, c in enumerate(out_spec)}
    descr_to_letter = {d: c for c, d in letter_to_descr.items()}
    for spec, acc in zip(in_specs, expr.access_descriptors, strict=True):
        if len(spec) != len(acc):
            return False
        for c, descr in zip(spec, acc, strict=True):
            if letter_to_descr.setdefault(c, descr) != descr:
                return False
            if descr_to_letter.setdefault(descr, c) != c:
                return False
    return True


class DirectPredecessorsGetter(Mapper):
    """Maps a node to the frozenset of the nodes its value is computed from
    directly: its operands, index arrays and shape expressions (for a
    :class:`~pytato_like.array.NamedArray` the array it names, for a
    :class:`~pytato_like.array.DictOfNamedArrays` its arrays). A
    send-reference holder's predecessor is its passthrough data only: no
    data flows from the sent array into its value."""

    def _predecessors(self, expr: Any) -> frozenset:
        return frozenset(walk_children(expr))

    def handle_unsupported_array(self, expr: Any) -> frozenset:
        return self._predecessors(expr)

    def map_distributed_send_ref_holder(self, expr: Any) -> frozenset:
        return frozenset([expr.passthrough_data]) | frozenset(
            d for d in expr.shape if isinstance(d, Array))

    def rec(self, expr: Any) -> frozenset:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return super().rec(expr)


for _name in ARRAY_MAPPER_METHODS:
    if _name not in DirectPredecessorsGetter.__dict__:
        setattr(DirectPredecessorsGetter, _name,
                DirectPredecessorsGetter._predecessors)
del _name
