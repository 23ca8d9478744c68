"""The DAG as a mapping from each node to its users.

.. autoclass:: UsersCollector
.. autofunction:: tag_user_nodes
.. autofunction:: rec_get_user_nodes
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pytato_like.collector import paused_collection
from pytato_like._traversal import depth_first, topological_order
from pytato_like.array import Array, DictOfNamedArrays
from pytato_like.transform._graph import (
    stack_headroom,
    structural_representatives,
    walk_children,
)


class UsersCollector:
    """Maps a DAG to :attr:`node_to_users`: each node that is used to the
    set of nodes using its value (the arrays referring to it in their
    fields, including shape expressions and index arrays; a
    :class:`~pytato_like.array.DictOfNamedArrays` passed as root uses its
    arrays). Nodes are keys up to structural equality, as in pytato.

    .. attribute:: node_to_users
    """

    def __init__(self) -> None:
        self.node_to_users: dict[Array, set[Array | DictOfNamedArrays]] = {}

    @paused_collection
    @stack_headroom
    def __call__(self, expr: Array | DictOfNamedArrays) -> None:
        roots = (list(expr._data.values()) if isinstance(expr, DictOfNamedArrays)
                 else [expr])
        order = topological_order(roots)
        # keys and set members are one representative per equal class, so
        # building the mapping never compares distinct-but-equal sub-DAGs
        rep_of = {id(node): rep for node, rep
                  in zip(order, structural_representatives(order))}
        node_to_users = self.node_to_users
        for node in order:
            user = rep_of[id(node)]
            for child in walk_children(node):
                node_to_users.setdefault(rep_of[id(child)], set()).add(user)
        if isinstance(expr, DictOfNamedArrays):
            for ary in roots:
                node_to_users.setdefault(rep_of[id(ary)], set()).add(expr)

    rec = __call__


_N = TypeVar("_N")
_T = TypeVar("_T")


def tag_user_nodes(graph: Mapping[_N, set[_N]], tag: _T, starting_point: _N,
                   node_to_tags: dict[_N, set[_T]] | None = None
                   ) -> dict[_N, set[_T]]:
    """Add *tag* to the tag set of *starting_point* and of every node
    reachable from it in *graph* (a mapping from a node to the nodes its
    edges lead to, e.g. :attr:`UsersCollector.node_to_users`). Returns
    *node_to_tags* (a new dict when None)."""
    if node_to_tags is None:
        node_to_tags = {}
    tags = node_to_tags

    def enter(node: _N) -> bool:
        tags.setdefault(node, set()).add(tag)
        return True

    for _ in depth_first((starting_point,), lambda n: tuple(graph.get(n, ())),
                         enter):
        pass
    return node_to_tags


def rec_get_user_nodes(expr: Array | DictOfNamedArrays, node: Array) -> frozenset:
    """Every node of *expr* that uses the value of *node*, directly or
    indirectly (*node* itself excluded)."""
    collector = UsersCollector()
    collector(expr)
    users = collector.node_to_users
    return frozenset(user for user, _ in depth_first(
        users.get(node, ()), lambda u: tuple(users.get(u, ()))))
