"""topological_order (its own loop) against depth_first's walk and the
definition: every node reachable once, each after all it refers to; any
depth at the default recursion limit."""

from __future__ import annotations

import sys

import pytest

import pytato_like as pt
from pytato_like._traversal import depth_first, topological_order
from pytato_like.array import children_of
from pytato_like.testing import make_random_dag
from pytato_like.transform._graph import data_operands


def check_order(order, roots, children):
    position = {id(n): i for i, n in enumerate(order)}
    assert len(position) == len(order)          # each node once
    reached, stack = set(), list(roots)         # exactly the reachable ones
    while stack:
        node = stack.pop()
        if id(node) not in reached:
            reached.add(id(node))
            stack.extend(children(node))
    assert reached == set(position)
    for node in order:                          # children first
        assert all(position[id(c)] < position[id(node)] for c in children(node))


@pytest.mark.parametrize("seed", range(30))
def test_same_order_as_depth_first_on_random_programs(seed):
    roots = list(make_random_dag(seed, n_ops=20).outputs.values())
    for children in (children_of, data_operands):
        order = topological_order(roots, children)
        walk = [node for node, _ in depth_first(roots, children)]
        assert [id(n) for n in order] == [id(n) for n in walk]
        check_order(order, roots, children)


def test_shared_roots_and_a_deep_chain():
    assert sys.getrecursionlimit() <= 10_000
    x = pt.make_placeholder("x", (3,))
    y = x
    for _ in range(100_000):
        y = y * 2 + x
    order = topological_order([y, x, y])
    assert order[0] is x and order[-1] is y
    assert len(order) == 200_001
    check_order(order, [y, x], children_of)
