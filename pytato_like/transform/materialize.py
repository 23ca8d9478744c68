"""Materialization by the MPMS rule (multiple predecessors, multiple
successors).

:func:`materialize_with_mpms` tags with :class:`~pytato_like.tags.ImplStored`
every array that has more than one *materialized predecessor* and more than
one *successor*, deciding greedily from the inputs towards the outputs:

* A node's **successors** are its uses as a data operand (one per binding,
  einsum argument, indexed array, index array, concatenated array, ...;
  using an array twice counts twice), plus one per entry of the result
  :class:`~pytato_like.array.DictOfNamedArrays` that names it (an
  :class:`~pytato_like.array.Array` passed alone is one result).
* The **materialized** nodes are the inputs
  (:class:`~pytato_like.array.InputArgumentBase`) and receives, the nodes
  already tagged :class:`~pytato_like.tags.ImplStored`, and the nodes this
  rule selects. Nodes tagged :class:`~pytato_like.tags.ImplInlined` are
  left as the user decided.
* A node's **materialized predecessors** are the distinct materialized
  nodes reachable from it through non-materialized data operands only: the
  operand itself if it is materialized, otherwise that operand's
  materialized predecessors.

Shape expressions are neither operands nor tagged. The rule only needs to
know whether a node has zero, one, or more than one materialized
predecessors, so each node carries at most one of them (or "many") and the
pass is linear in the size of the DAG.

The same rule as a mapper (pytato's :class:`MPMSMaterializer`), for code
that drives it itself: it maps each node to an
:class:`MPMSMaterializerAccumulator` (the node's materialized predecessors
and the rewritten node), given each node's list of successors. Like
pytato's, a successor that indexes a node and is *k* times larger counts as
*k* successors. :func:`materialize_with_mpms` computes the same decisions in
one linear pass without building predecessor sets.

.. autofunction:: materialize_with_mpms
.. autoclass:: MPMSMaterializerAccumulator
.. autoclass:: MPMSMaterializer
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, cast
from pytato_like.collector import paused_collection
from pytato_like._traversal import depth_first

if sys.version_info >= (3, 11):
    from typing import Never
else:  # requires-python is 3.10
    from typing_extensions import Never

from pytato_like.array import (
    Array,
    DictOfNamedArrays,
    IndexBase,
    IndexLambda,
    InputArgumentBase,
    NamedArray,
)
from pytato_like.diagnostic import NotAnArrayError
from pytato_like.tags import ImplementationStrategy, ImplStored
from pytato_like.transform._graph import (
    data_operands,
    stack_headroom,
)
from pytato_like.transform.copy import (
    CopyMapper,
    index_lambda_with,
    rebuild_with,
)
from pytato_like.transform.mapper import CachedMapper, with_default_map_methods

if TYPE_CHECKING:
    from pytato_like.function import FunctionDefinition
    from pytato_like.transform.mapper import ArrayOrNames, CachedMapperCache

_MANY = object()  # "more than one materialized predecessor"
_STORED = frozenset([ImplStored()])


def _is_materialized_leaf(expr: Array) -> bool:
    return (isinstance(expr, InputArgumentBase)
            or expr._mapper_method == "map_distributed_recv")


_Order = list[tuple[Array, Sequence[Array]]]


def _data_order(roots: list[Array]) -> _Order:
    """``(node, its data operands)`` for every node below *roots* reached
    through data operands, operands first: the operands are found once
    (they cost more than the rest of the rule)."""
    return list(depth_first(roots, data_operands))


def mpms_selection(roots: list[Array], output_uses: dict[int, int]
                   ) -> set[int]:
    """The ids of the nodes below *roots* that the MPMS rule materializes;
    *output_uses* counts result entries per node id."""
    return _select(_data_order(roots), output_uses)


def _select(order: _Order,
            output_uses: dict[int, int]) -> set[int]:
    """:func:`mpms_selection` on the walk :func:`_data_order` made."""
    # (Counter counts an iterable in C)
    nsuccessors = Counter(map(id, chain.from_iterable(
        operands for _, operands in order)))
    nsuccessors.update(output_uses)

    # id -> None (no materialized predecessor), a node id (exactly one) or
    # _MANY; for a materialized node: its own id, which is what users see
    frontier: dict[int, object] = {}
    selected: set[int] = set()
    for node, operands in order:
        if (isinstance(node, InputArgumentBase)
                or node._mapper_method == "map_distributed_recv"):
            frontier[id(node)] = id(node)
            continue
        preds: object = None
        for operand in operands:
            f = frontier[id(operand)]
            if f is None or f == preds:
                continue
            if preds is None:
                preds = f
            else:
                preds = _MANY
                break
        strategy = node.tags and node.tags_of_type(ImplementationStrategy)
        if strategy:
            # the user decided: stored nodes are materialized, inlined not
            is_stored = ImplStored() in strategy
        else:
            is_stored = preds is _MANY and nsuccessors[id(node)] > 1
            if is_stored:
                selected.add(id(node))
        frontier[id(node)] = id(node) if is_stored else preds
    return selected


def _retag_in_order(order: _Order,
                    selected: set[int]) -> dict[int, Array] | None:
    """Old node id -> new node for the nodes of *order* that change: the
    *selected* ones get :class:`~pytato_like.tags.ImplStored`, their users
    are rebuilt on the new operands. One pass over the walk the selection
    made, so nothing is walked twice; what a copy mapper would return for
    every node (same nodes, same tags), without its per-node dispatch.

    None when a node has children that are no data operands (a
    :class:`~pytato_like.array.NamedArray` of a call, a symbolic shape):
    those are left to :class:`_Tagger`.
    """
    new_of: dict[int, Array] = {}
    get = new_of.get
    # node tags -> with ImplStored (most nodes share one set of tags)
    stored_tags: dict[frozenset, frozenset] = {}

    def mapped(ary: Array) -> Array:
        return get(id(ary), ary)

    for node, operands in order:
        if isinstance(node, NamedArray):  # also the results of calls
            return None
        for extent in node.shape:
            if type(extent) is not int:
                return None
        if id(node) in selected:
            tags = stored_tags.get(node.tags)
            if tags is None:
                tags = stored_tags[node.tags] = node.tags | _STORED
        else:
            for operand in operands:
                if id(operand) in new_of:
                    break
            else:
                continue  # nothing below changed: the node stays
            tags = node.tags
        if type(node) is IndexLambda:
            # (the common node, its bindings mapped here: no call per
            # binding)
            bindings = node.bindings
            new_bindings = {name: get(id(ary), ary)
                            for name, ary in bindings.items()}
            new = index_lambda_with(node, new_bindings, node.shape, tags)
        else:
            new = rebuild_with(node, mapped, tags=tags)
        new_of[id(node)] = new
    return new_of


class _Tagger(CopyMapper):
    """Copies a DAG, adding :class:`~pytato_like.tags.ImplStored` to the
    nodes whose ids are given."""

    def __init__(self, ids: set[int]) -> None:
        super().__init__()
        self.ids = ids

    def clone_for_callee(self, function: FunctionDefinition) -> _Tagger:
        return type(self)(self.ids)

    def _map_default(self, expr: ArrayOrNames) -> ArrayOrNames:
        if id(expr) in self.ids:
            # one construction for new children and the tag
            return rebuild_with(expr, self.rec, tags=expr.tags | _STORED)
        return super()._map_default(expr)


@paused_collection
@stack_headroom
def materialize_with_mpms(expr: DictOfNamedArrays | Array) -> DictOfNamedArrays | Array:
    """*expr* with :class:`~pytato_like.tags.ImplStored` added to the nodes
    the MPMS rule selects (see the module documentation).

    .. warning::

        The rule is greedy and can be too eager: with inputs ``I1``, ``I2``
        feeding ``T`` whose two users are the outputs ``O1``, ``O2``,
        storing ``T`` costs one write more than recomputing it in each
        output (4 reads and 3 writes instead of 4 reads and 2 writes).
    """
    if isinstance(expr, DictOfNamedArrays):
        roots = list(expr._data.values())
    elif isinstance(expr, Array):
        roots = [expr]
    else:
        raise NotAnArrayError(
            f"materialize_with_mpms expects a DictOfNamedArrays or an Array, "
            f"got a {type(expr).__name__}")
    output_uses: dict[int, int] = {}
    for ary in roots:  # an Array passed alone is one result
        output_uses[id(ary)] = output_uses.get(id(ary), 0) + 1
    order = _data_order(roots)
    selected = _select(order, output_uses)
    if not selected:
        return expr
    retagged = _retag_in_order(order, selected)
    if retagged is None:
        # calls or symbolic shapes: their extra children go through the
        # copy mapper's own rules
        # (a copy maps a dict of named arrays to one)
        return cast("DictOfNamedArrays | Array", _Tagger(selected)(expr))
    if isinstance(expr, Array):
        return retagged.get(id(expr), expr)
    return rebuild_with(expr, lambda ary: retagged.get(id(ary), ary))


# {{{ the rule as a mapper

@dataclasses.dataclass(frozen=True)
class MPMSMaterializerAccumulator:
    """What :class:`MPMSMaterializer` maps a node to.

    .. attribute:: materialized_predecessors

        The materialized nodes the node's value is computed from (the node
        itself if it is materialized).

    .. attribute:: expr

        The node rewritten, tagged :class:`~pytato_like.tags.ImplStored` if
        the rule stores it.
    """

    materialized_predecessors: frozenset[Array]
    expr: Array


@with_default_map_methods
class MPMSMaterializer(CachedMapper[MPMSMaterializerAccumulator, Never, []]):
    """Applies the MPMS rule node by node.

    :arg successors: node -> list of the nodes using it (one entry per
        use), e.g. from :func:`pytato_like.analysis.get_list_of_users`;
        nodes missing have no successor.
    :arg already_materialized_nodes: nodes that count as materialized
        whatever the rule says (inputs, outputs, stored nodes).
    """

    def __init__(self, successors: Mapping[Array, list],
                 already_materialized_nodes: frozenset[Array],
                 _cache: CachedMapperCache | None = None) -> None:
        super().__init__(_cache=_cache)
        self.successors = successors
        self.already_materialized_nodes = already_materialized_nodes

    def _nsuccessors(self, expr: Array) -> int:
        n = 0
        for user in self.successors.get(expr, ()):
            # an index that reads the node many times over counts that often
            if isinstance(user, IndexBase) and isinstance(user.size, int) \
                    and isinstance(expr.size, int):
                n += user.size // expr.size if expr.size else 0
            else:
                n += 1
        return n

    def _map_default(self, expr: ArrayOrNames) -> MPMSMaterializerAccumulator:
        if isinstance(expr, (DictOfNamedArrays, NamedArray)):
            raise NotAnArrayError(
                f"MPMSMaterializer maps arrays; got a {type(expr).__name__} "
                "(map its arrays one by one)")
        if not isinstance(expr, Array):
            return self.map_foreign(expr)
        if _is_materialized_leaf(expr):
            return MPMSMaterializerAccumulator(frozenset([expr]), expr)
        mapped = {}
        for child in data_operands(expr):
            mapped[id(child)] = self.rec(child)
        # shape expressions are rebuilt but are no operands of the rule
        new_expr = rebuild_with(
            expr, lambda c: (mapped[id(c)] if id(c) in mapped
                             else self.rec(c)).expr)
        if expr in self.already_materialized_nodes \
                or ImplStored() in expr.tags:
            return MPMSMaterializerAccumulator(frozenset([new_expr]), new_expr)
        preds = frozenset().union(
            *(acc.materialized_predecessors for acc in mapped.values()))
        strategy = expr.tags_of_type(ImplementationStrategy)
        if not strategy and len(preds) > 1 and self._nsuccessors(expr) > 1:
            new_expr = new_expr.tagged(ImplStored())
            return MPMSMaterializerAccumulator(frozenset([new_expr]), new_expr)
        return MPMSMaterializerAccumulator(preds, new_expr)

# }}}
