"""One DAG through every mapper family, the hashing, equality, pickling,
printing, materialisation and drawing (shared by the tests of node kinds
added after the mappers: sparse products, loopy calls)."""

from __future__ import annotations

import pickle

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like._traversal import topological_order
from pytato_like.transform._graph import walk_children
from pytato_like.transform.materialize_cost import decide_storage


def run_every_mapper(expr, node_type, n_expected, input_names):
    """Map *expr* (an array holding *n_expected* nodes of *node_type*, the
    kind under test) with each built-in family and check what each says
    against a plain topological walk."""
    nodes = topological_order([expr])
    n_nodes = len(nodes)
    assert sum(isinstance(n, node_type) for n in nodes) == n_expected

    # copy family: unchanged DAGs come back as themselves
    assert tr.CopyMapper()(expr) is expr

    class Counting(tr.CachedMapAndCopyMapper):
        pass
    seen = []
    assert Counting(lambda n: (seen.append(n), n)[1])(expr) is expr
    assert len(seen) == n_nodes

    class Extra(tr.CopyMapperWithExtraArgs):
        pass
    assert Extra()(expr, 0) is expr

    class Edges(tr.EdgeCachedMapper):
        def handle_edge(self, expr, child):
            return self.rec(child)
    assert Edges()(expr) == expr

    # combine family
    deps = tr.DependencyMapper()(expr)
    assert len(deps) == n_nodes
    assert {d.name for d in tr.InputGatherer()(expr)} == set(input_names)
    assert tr.SizeParamGatherer()(expr) == frozenset()
    assert len(tr.SubsetDependencyMapper(frozenset(nodes[:10]))(expr)) == 10

    class CountKind(tr.CombineMapper):
        """pytato's style: an overridden method calling ``self.rec``
        (counts are summed: the DAGs tested here share only inputs)."""
        def combine(self, *args):
            return sum(args)

        def map_placeholder(self, e):
            return 0

        map_data_wrapper = map_placeholder

        def _map_kind(self, e):
            return 1 + self.combine(*(self.rec(c) for c in walk_children(e)))
    setattr(CountKind, node_type._mapper_method, CountKind._map_kind)
    assert CountKind()(expr) == n_expected

    # walk family
    visited = []

    class Visit(tr.CachedWalkMapper):
        def post_visit(self, e, *args):
            visited.append(e)
    Visit()(expr)
    assert len(visited) == n_nodes
    topo = tr.TopoSortMapper()
    topo(expr)
    order = topo.topological_order
    assert len(order) == n_nodes and {id(n) for n in order} == set(map(id, nodes))
    position = {id(n): i for i, n in enumerate(order)}
    assert all(position[id(c)] < position[id(n)]
               for n in order for c in walk_children(n))
    users = tr.UsersCollector()
    users(expr)
    assert sum(len(v) for v in users.node_to_users.values()) >= n_nodes - 1

    # structure
    rebuilt = pickle.loads(pickle.dumps(expr))
    assert rebuilt == expr and hash(rebuilt) == hash(expr)
    assert pt.equality.EqualityComparer()(rebuilt, expr)
    assert type(expr).__name__ in repr(expr)
    assert pt.analysis.get_num_nodes(expr) == n_nodes
    assert pt.eliminate_dead_code(expr) == expr
    costs = decide_storage([expr])
    assert all(costs[id(n)].stored for n in nodes if isinstance(n, node_type))
    assert pt.get_dot_graph(expr).count(node_type.__name__) >= n_expected
