"""Every mapper, rewrite and analysis of pytato_like.transform / analysis /
equality on a DAG 100 000 levels deep, at Python's default recursion limit
-- including user subclasses written pytato-style (``map_*`` methods that
recurse with ``self.rec``)."""

from __future__ import annotations

import sys

import pytest

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like.analysis import get_num_nodes, get_nusers
from pytato_like.equality import EqualityComparer
from pytato_like.tags import ImplStored

DEPTH = 100_000
N_NODES = 2 * DEPTH + 1   # the placeholder and two index lambdas per level


def chain():
    x = pt.make_placeholder("x", (4,))
    y = x
    for _ in range(DEPTH):
        y = 0.5 * y + 1.0
    return x, y


@pytest.fixture(scope="module")
def deep():
    assert sys.getrecursionlimit() <= 1000
    return chain()


def frame_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


# {{{ built-in mappers

def test_copy_mapper_identity(deep):
    x, y = deep
    assert tr.CopyMapper()(y) is y


def test_dependency_and_input_gatherers(deep):
    x, y = deep
    assert len(tr.DependencyMapper()(y)) == N_NODES
    assert tr.InputGatherer()(y) == {x}
    assert tr.SizeParamGatherer()(y) == frozenset()
    assert tr.SubsetDependencyMapper(frozenset([x, y]))(y) == {x, y}


def test_walk_mappers(deep):
    x, y = deep
    visits = []

    class Count(tr.WalkMapper):
        def visit(self, expr):
            visits.append(1)
            return True

    Count()(y)
    assert len(visits) == N_NODES

    visited = []

    class CachedCount(tr.CachedWalkMapper):
        def visit(self, expr):
            visited.append(1)
            return True

    CachedCount()(y)
    assert len(visited) == N_NODES

    topo = tr.TopoSortMapper()
    topo(y)
    assert len(topo.topological_order) == N_NODES
    assert topo.topological_order[0] is x and topo.topological_order[-1] is y


def test_users_collector_and_user_queries(deep):
    x, y = deep
    collector = tr.UsersCollector()
    collector(y)
    assert len(collector.node_to_users) == N_NODES - 1
    assert all(len(users) == 1 for users in collector.node_to_users.values())
    assert len(tr.rec_get_user_nodes(y, x)) == N_NODES - 1
    tags = tr.tag_user_nodes(collector.node_to_users, "T", x)
    assert len(tags) == N_NODES


def test_edge_cached_and_map_and_copy(deep):
    x, y = deep
    n_edges = []

    class Edges(tr.EdgeCachedMapper):
        def handle_edge(self, expr, child):
            n_edges.append(1)
            return self.rec(child)

    assert Edges()(y) is y
    assert len(n_edges) == N_NODES - 1

    z = pt.make_placeholder("z", (4,))
    new = tr.map_and_copy(y, lambda e: z if e is x else e)
    assert tr.InputGatherer()(new) == {z}

# }}}


# {{{ user subclasses, pytato style

def test_user_copy_mapper_subclass(deep):
    x, y = deep
    depths = []

    class Rename(tr.CopyMapper):
        def map_placeholder(self, expr):
            return pt.make_placeholder("w", expr.shape, expr.dtype)

        def map_index_lambda(self, expr):
            depths.append(frame_depth())
            return expr.copy(bindings={k: self.rec(v)
                                       for k, v in expr.bindings.items()})

    new = Rename()(y)
    # every level was rebuilt: the new DAG reaches the new placeholder only
    assert tr.InputGatherer()(new) == {pt.make_placeholder("w", (4,))}
    assert len(depths) == N_NODES - 1
    # nesting stays bounded: far below the recursion limit
    assert max(depths) - min(depths) < 300


def test_user_copy_mapper_with_extra_args_subclass(deep):
    x, y = deep

    class Suffix(tr.CopyMapperWithExtraArgs):
        def map_placeholder(self, expr, suffix):
            return pt.make_placeholder("x" + suffix, expr.shape, expr.dtype)

    new = Suffix()(y, "_s")
    assert {p.name for p in tr.InputGatherer()(new)} == {"x_s"}


def test_user_combine_mapper_subclass(deep):
    x, y = deep

    class CountLambdas(tr.CombineMapper):
        def combine(self, *args):
            return sum(args)

        def map_placeholder(self, expr):
            return 0

        def map_index_lambda(self, expr):
            return 1 + self.combine(*(self.rec(b) for b in expr.bindings.values()))

    assert CountLambdas()(y) == N_NODES - 1


def test_user_cached_mapper_subclass(deep):
    x, y = deep

    class Depth(tr.CachedMapper):
        def map_placeholder(self, expr):
            return 0

        def map_index_lambda(self, expr):
            return 1 + max(self.rec(b) for b in expr.bindings.values())

    assert Depth()(y) == N_NODES - 1


def test_user_walk_mapper_overriding_map_method(deep):
    x, y = deep
    count = []

    class Lambdas(tr.WalkMapper):
        def map_index_lambda(self, expr):
            count.append(1)
            for b in expr.bindings.values():
                self.rec(b)

    Lambdas()(y)
    assert len(count) == N_NODES - 1

# }}}


# {{{ rewrites and analyses

def test_rewrites_are_identity_on_the_chain(deep):
    x, y = deep
    assert pt.eliminate_dead_code(y) is y
    assert pt.rewrite_einsums_with_no_broadcasts(y) is y
    assert tr.deduplicate_data_wrappers(y) is y
    result = pt.make_dict_of_named_arrays({"y": y})
    # one successor per node: nothing to materialize
    assert pt.materialize_with_mpms(result) is result


def test_analyses(deep):
    x, y = deep
    assert get_num_nodes(y) == N_NODES
    assert get_num_nodes(y, count_duplicates=True) == N_NODES
    nusers = get_nusers(y)
    assert nusers[x] == 1 and nusers[y] == 0 and len(nusers) == N_NODES


def test_equality_against_a_rebuilt_chain(deep):
    x, y = deep
    _, y2 = chain()
    assert y2 is not y
    assert EqualityComparer()(y, y2)
    assert not EqualityComparer()(y, y2 * 1.0)


def test_materialize_with_mpms_on_a_deep_ladder():
    a = pt.make_placeholder("a", (2,))
    b = pt.make_placeholder("b", (2,))
    depth = DEPTH // 2
    for _ in range(depth):
        a, b = a + b, a * b
    result = pt.make_dict_of_named_arrays({"a": a, "b": b})
    new = pt.materialize_with_mpms(result)
    # every level but the last has two successors and two stored predecessors
    stored = [n for n in tr.DependencyMapper()(new)
              if n.tags_of_type(ImplStored)]
    assert len(stored) == 2 * (depth - 1)
    assert not new._data["a"].tags and not new._data["b"].tags
    assert all(n.tags_of_type(ImplStored)
               for n in (new._data["a"].bindings["_in0"],
                         new._data["a"].bindings["_in1"]))

# }}}

# vim: foldmethod=marker
