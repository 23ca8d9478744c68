"""The mapper family of pytato_like.transform, against brute-force
references computed from ``children_of`` on small hand-made and random DAGs.
(Deep DAGs: tests/test_transform_deep.py.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like.array import ARRAY, VALUE, Array, children_of
from pytato_like.diagnostic import NotAnArrayError, UnsupportedArrayError

# {{{ helpers


def all_nodes(roots):
    """Every array reachable from *roots*, by brute force (small DAGs)."""
    seen = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(children_of(node))
    return list(seen.values())


def reachable_from(node):
    return {id(n) for n in all_nodes([node])}


def random_dag(seed, n_ops=25):
    """A random DAG over two placeholders and a data wrapper, all of shape
    (3,), mixing elementwise ops, reductions, indexing, stacking and
    reshapes; returns (list of all built arrays, inputs dict)."""
    rnd = random.Random(seed)
    a = pt.make_placeholder("a", (3,))
    b = pt.make_placeholder("b", (3,))
    c = pt.make_data_wrapper(np.arange(3.0))
    pool = [a, b, c]
    for _ in range(n_ops):
        x, y = rnd.choice(pool), rnd.choice(pool)
        op = rnd.randrange(8)
        if op == 0:
            z = x + y
        elif op == 1:
            z = x * 0.5 - y
        elif op == 2:
            z = pt.sin(x)
        elif op == 3:
            z = x[::-1]
        elif op == 4:
            z = pt.stack([x, y])[1]
        elif op == 5:
            z = x.reshape(3, 1).reshape(3)
        elif op == 6:
            z = x + pt.sum(y)
        else:
            z = pt.roll(x, 1)
        pool.append(z)
    inputs = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([-1.0, 0.5, 4.0])}
    return pool, inputs


def all_node_kinds():
    """One DAG containing every node class of the IR."""
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    m = pt.make_placeholder("m", (3, 4), np.float64)
    d = pt.make_data_wrapper(np.arange(4.0))
    idx = pt.make_data_wrapper(np.array([2, 0]))
    e = pt.einsum("ij,j->i", m, d)                       # Einsum
    r = m.reshape(4, 3)                                   # Reshape
    t = m.T                                               # AxisPermutation
    rl = pt.roll(m, 1, axis=1)                            # Roll
    bi = m[1:, ::2]                                       # BasicIndex
    ca = m[:, idx]                                        # contiguous adv.
    nc = pt.make_placeholder("k", (3, 4, 5))[idx, :, idx]  # non-contiguous
    cc = pt.concatenate([m, m * 2], axis=0)               # Concatenate
    st = pt.stack([e, e + 1])                             # Stack
    dd = pt.make_dict_of_named_arrays({"e": e})
    na = dd["e"]                                          # NamedArray
    il = x * 2                                            # IndexLambda, SizeParam
    return [e, r, t, rl, bi, ca, nc, cc, st, na, il]

# }}}


# {{{ dispatch

def test_mapper_dispatches_on_mapper_method():
    class Names(tr.Mapper):
        def map_placeholder(self, expr):
            return expr.name

    assert Names()(pt.make_placeholder("p", (2,))) == "p"


def test_mapper_without_method_raises_unsupported_array_error():
    x = pt.make_placeholder("x", (2,))
    with pytest.raises(UnsupportedArrayError, match="map_index_lambda.*IndexLambda"):
        tr.Mapper()(x + 1)


def test_mapper_map_foreign_raises_for_non_arrays():
    with pytest.raises(NotAnArrayError, match="int"):
        tr.Mapper()(3)


class _Twice(Array):
    """A node class the transform library has never heard of: twice its
    operand."""

    __slots__ = ("operand", "note")
    _mapper_method = "map_twice"
    _fields = (("operand", ARRAY), ("note", VALUE))

    def __init__(self, operand, note="", axes=None, tags=frozenset()):
        self.operand = operand
        self.note = note
        self.shape = operand.shape
        self.dtype = operand.dtype
        self._finish_init(axes, tags)


def test_builtin_mappers_handle_unknown_node_classes_generically():
    x = pt.make_placeholder("x", (2,))
    y = _Twice(x + 1, note="hi")
    z = y * 3

    assert tr.CopyMapper()(z) is z
    deps = tr.DependencyMapper()(z)
    assert {id(n) for n in deps} == reachable_from(z)

    class Rename(tr.CopyMapper):
        def map_placeholder(self, expr):
            return pt.make_placeholder("w", expr.shape, expr.dtype)

    new = Rename()(z)
    twice = new.bindings["_in0"]
    assert isinstance(twice, _Twice) and twice.note == "hi"
    assert tr.InputGatherer()(new) == {pt.make_placeholder("w", (2,))}



def test_builtin_mappers_handle_distributed_nodes():
    x = pt.make_placeholder("x", (2,))
    recv = pt.make_distributed_recv(0, "halo", (2,), np.float64)
    sent = x * 3
    holder = pt.staple_distributed_send(sent, dest_rank=1, comm_tag="t",
                                        stapled_to=recv + x)
    y = holder * 2
    assert tr.CopyMapper()(y) is y
    assert {id(n) for n in tr.DependencyMapper()(y)} == reachable_from(y)
    assert id(sent) in reachable_from(y)  # the sent data is part of the DAG

    new = RenamePlaceholders()(y)
    new_holder = new.bindings["_in0"]
    assert type(new_holder) is type(holder)
    assert new_holder.send.data.bindings["_in0"].name == "x_new"
    assert new_holder.send.dest_rank == 1 and new_holder.send.comm_tag == "t"
    assert {getattr(p, "name", None) for p in tr.InputGatherer()(new)} == {"x_new"}

# }}}


# {{{ copy mappers

def test_copy_mapper_returns_identical_object_for_every_node_class():
    for expr in all_node_kinds():
        assert tr.CopyMapper()(expr) is expr


def test_copy_mapper_returns_identical_dict_of_named_arrays():
    x = pt.make_placeholder("x", (2,))
    d = pt.make_dict_of_named_arrays({"a": x + 1, "b": x * 2})
    assert tr.CopyMapper()(d) is d


class RenamePlaceholders(tr.CopyMapper):
    def map_placeholder(self, expr):
        return pt.make_placeholder(expr.name + "_new", self.rec_shape(expr.shape),
                                   expr.dtype)

    def rec_shape(self, shape):
        return tuple(self.rec(s) if isinstance(s, Array) else s for s in shape)


def test_user_copy_mapper_renaming_placeholders_keeps_values():
    pool, inputs = random_dag(seed=3)
    result = pt.make_dict_of_named_arrays({f"o{i}": v for i, v in
                                           enumerate(pool[-4:])})
    renamed = RenamePlaceholders()(result)
    assert isinstance(renamed, pt.DictOfNamedArrays)
    names = {p.name for p in tr.InputGatherer()(renamed)
             if isinstance(p, pt.Placeholder)}
    old_names = {p.name for p in tr.InputGatherer()(result)
                 if isinstance(p, pt.Placeholder)}
    assert old_names and names == {name + "_new" for name in old_names}
    expected = pt.generate_numpy(result)(**inputs)
    got = pt.generate_numpy(renamed)(**{k + "_new": v for k, v in inputs.items()
                                         if k + "_new" in names})
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name])


def test_copy_mapper_maps_each_node_once():
    x = pt.make_placeholder("x", (2,))
    shared = x + 1
    y = shared * shared + pt.sin(shared)
    calls = []

    class Counting(tr.CopyMapper):
        def map_index_lambda(self, expr):
            calls.append(expr)
            return super().map_index_lambda(expr)

    assert Counting()(y) is y
    assert len(calls) == len({id(c) for c in calls}) == 4


def test_shallow_dags_are_traversed_in_the_user_methods_order():
    # below MAX_REC_NESTING levels the user's recursion drives the
    # traversal: a parent's method is entered before its children's
    from pytato_like.transform.mapper import MAX_REC_NESTING

    x = pt.make_placeholder("x", (2,))
    chain = [x]
    for _ in range(MAX_REC_NESTING // 2):
        chain.append(pt.sin(chain[-1]))
    entered = []

    class Log(tr.CopyMapper):
        def map_index_lambda(self, expr):
            entered.append(expr)
            return super().map_index_lambda(expr)

    Log()(chain[-1])
    assert entered == chain[:0:-1]


def test_copy_mapper_rebuilds_named_array_through_its_container():
    x = pt.make_placeholder("x", (2,))
    d = pt.make_dict_of_named_arrays({"a": x + 1, "b": x - 1})
    y = d["a"] * 2
    new = RenamePlaceholders()(y)
    named = new.bindings["_in0"]
    assert isinstance(named, pt.NamedArray) and named.name == "a"
    assert set(named._container.keys()) == {"a", "b"}
    got = pt.generate_numpy(new)(x_new=np.array([1.0, 2.0]))
    np.testing.assert_allclose(got, [4.0, 6.0])


def test_copy_mapper_with_extra_args_passes_arguments_down():
    class Suffix(tr.CopyMapperWithExtraArgs):
        def map_placeholder(self, expr, suffix):
            return pt.make_placeholder(expr.name + suffix, expr.shape, expr.dtype)

    x = pt.make_placeholder("x", (2,))
    y = pt.sin(x) + x
    mapper = Suffix()
    new1 = mapper(y, "_1")
    new2 = mapper(y, suffix="_2")
    assert {p.name for p in tr.InputGatherer()(new1)} == {"x_1"}
    assert {p.name for p in tr.InputGatherer()(new2)} == {"x_2"}
    assert mapper(y, "_1") is new1  # cached per arguments


def test_edge_cached_mapper_sees_every_edge_once_per_user():
    pool, _ = random_dag(seed=5)
    root = pool[-1]
    edges = []

    class Edges(tr.EdgeCachedMapper):
        def handle_edge(self, expr, child):
            edges.append((id(expr), id(child)))
            return self.rec(child)

    assert Edges()(root) is root
    expected = [(id(n), id(c)) for n in all_nodes([root]) for c in children_of(n)]
    assert sorted(edges) == sorted(expected)


def test_edge_cached_mapper_can_cut_edges():
    x = pt.make_placeholder("x", (3,))
    y = pt.sin(x) + 1
    z = y * y

    class CutAtSin(tr.EdgeCachedMapper):
        def handle_edge(self, expr, child):
            if isinstance(child, pt.IndexLambda) and "sin" in str(child.expr):
                return pt.make_placeholder("cut", child.shape, child.dtype)
            return self.rec(child)

    new = CutAtSin()(z)
    assert {p.name for p in tr.InputGatherer()(new)} == {"cut"}
    val = pt.generate_numpy(new)(cut=np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(val, (np.array([0.0, 1.0, 2.0]) + 1) ** 2)


def test_map_and_copy_applies_map_fn_once_per_node():
    pool, inputs = random_dag(seed=7)
    root = pool[-1]
    seen = []
    b2 = pt.make_placeholder("b2", (3,))

    def swap_b(expr):
        seen.append(id(expr))
        if isinstance(expr, pt.Placeholder) and expr.name == "b":
            return b2
        return expr

    new = tr.map_and_copy(root, swap_b)
    assert len(seen) == len(set(seen)) == len(all_nodes([root]))
    names = {getattr(p, "name", None) for p in tr.InputGatherer()(new)}
    assert "b" not in names
    expected = pt.generate_numpy(root)(**inputs)
    feed = {"a": inputs["a"], "b2": inputs["b"]}
    got = pt.generate_numpy(new)(**{k: v for k, v in feed.items() if k in names})
    np.testing.assert_allclose(got, expected)


def test_copy_dict_of_named_arrays_copies_every_entry():
    x = pt.make_placeholder("x", (2,))
    d = pt.make_dict_of_named_arrays({"a": x + 1, "b": pt.exp(x)})
    new = tr.copy_dict_of_named_arrays(d, RenamePlaceholders())
    assert set(new.keys()) == {"a", "b"}
    got = pt.generate_numpy(new)(x_new=np.array([0.0, 1.0]))
    np.testing.assert_allclose(got["a"], [1.0, 2.0])
    np.testing.assert_allclose(got["b"], np.exp([0.0, 1.0]))

# }}}


# {{{ combine mappers

def test_user_combine_mapper_counting_paths_matches_hand_count():
    x = pt.make_placeholder("x", (2,))
    a = x + 1          # 1 path to x
    b = a * a          # binds a once -> 1 path
    c = b + a          # paths to x: via b (1) and via a (1) -> 2

    class PathsToInputs(tr.CombineMapper):
        def combine(self, *args):
            return sum(args)

        def map_placeholder(self, expr):
            return 1

    assert PathsToInputs()(c) == 2


def test_user_combine_mapper_collecting_nodes_equals_brute_force():
    class Nodes(tr.CombineMapper):
        def combine(self, *args):
            return frozenset().union(*args)

        def map_index_lambda(self, expr):
            return self.combine(frozenset([id(expr)]),
                                super().map_index_lambda(expr))

    for seed in range(5):
        pool, _ = random_dag(seed)
        root = pool[-1]
        expected = {id(n) for n in all_nodes([root])
                    if isinstance(n, pt.IndexLambda)}
        assert Nodes()(root) == expected


@pytest.mark.parametrize("seed", range(8))
def test_dependency_mapper_equals_brute_force_reachability(seed):
    pool, _ = random_dag(seed)
    for root in pool[-5:]:
        deps = tr.DependencyMapper()(root)
        assert {id(n) for n in deps} <= reachable_from(root)
        # up to structural equality, every reachable node is present
        for node in all_nodes([root]):
            assert node in deps
        # the per-node (cached recursion) path gives the same set
        assert tr.DependencyMapper().rec(root) == deps


def test_subset_dependency_mapper_intersects_with_universe():
    pool, _ = random_dag(seed=11)
    root = pool[-1]
    universe = frozenset(pool[::3])
    got = tr.SubsetDependencyMapper(universe)(root)
    expected = frozenset(n for n in all_nodes([root]) if n in universe)
    assert got == expected
    assert tr.SubsetDependencyMapper(universe).rec(root) == expected


def test_input_and_size_param_gatherers():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,))
    w = pt.make_data_wrapper(np.ones(3))
    y = (x * 2).sum() + w
    assert tr.InputGatherer()(y) == {x, w, n}
    assert tr.SizeParamGatherer()(y) == {n}
    assert tr.SizeParamGatherer()(w) == frozenset()


def test_get_dependencies_per_output():
    x = pt.make_placeholder("x", (2,))
    z = pt.make_placeholder("z", (2,))
    a = x + 1
    b = a * z
    deps = tr.get_dependencies(pt.make_dict_of_named_arrays({"a": a, "b": b}))
    assert deps["a"] == {a, x}
    assert deps["b"] == {b, a, x, z}

# }}}


# {{{ walks

def _diamond():
    x = pt.make_placeholder("x", (2,))
    left = x + 1
    right = x * 2
    return x, left, right, left + right


def test_walk_mapper_visits_once_per_path_and_post_visits_after_children():
    x, left, right, top = _diamond()
    events = []

    class Log(tr.WalkMapper):
        def visit(self, expr):
            events.append(("visit", id(expr)))
            return True

        def post_visit(self, expr):
            events.append(("post", id(expr)))

    Log()(top)
    visits = [i for kind, i in events if kind == "visit"]
    assert visits.count(id(x)) == 2 and visits.count(id(top)) == 1
    assert visits.count(id(left)) == visits.count(id(right)) == 1
    assert events[0] == ("visit", id(top)) and events[-1] == ("post", id(top))
    # each node's post_visit comes after a post_visit of each of its children
    for k, (kind, i) in enumerate(events):
        if kind == "post":
            node = {id(n): n for n in (x, left, right, top)}[i]
            for child in children_of(node):
                assert ("post", id(child)) in events[:k]


def test_walk_mapper_visit_returning_false_prunes():
    x, left, right, top = _diamond()
    visited = []

    class StopAtLeft(tr.WalkMapper):
        def visit(self, expr):
            visited.append(id(expr))
            return expr is not left

    StopAtLeft()(top)
    assert visited.count(id(x)) == 1  # only through `right`


def test_cached_walk_mapper_visits_each_node_once():
    pool, _ = random_dag(seed=2)
    root = pool[-1]
    visited = []

    class Log(tr.CachedWalkMapper):
        def visit(self, expr):
            visited.append(id(expr))
            return True

    Log()(root)
    assert sorted(visited) == sorted(reachable_from(root))


def test_walk_mapper_calls_overridden_map_methods():
    x, left, right, top = _diamond()
    seen = []

    class Placeholders(tr.WalkMapper):
        def map_placeholder(self, expr):
            seen.append(expr.name)

    Placeholders()(top)
    assert seen == ["x", "x"]


@pytest.mark.parametrize("seed", range(5))
def test_topo_sort_mapper_respects_every_edge(seed):
    pool, _ = random_dag(seed)
    roots = pool[-3:]
    result = pt.make_dict_of_named_arrays({f"r{i}": r for i, r in enumerate(roots)})
    mapper = tr.TopoSortMapper()
    mapper(result)
    order = mapper.topological_order
    assert order[-1] is result
    arrays = order[:-1]
    position = {id(n): i for i, n in enumerate(arrays)}
    assert len(position) == len(arrays)
    assert set(position) == {id(n) for n in all_nodes(roots)}
    for node in arrays:
        for child in children_of(node):
            assert position[id(child)] < position[id(node)]

# }}}


# {{{ users

def test_users_collector_equals_brute_force():
    pool, _ = random_dag(seed=4)
    root = pool[-1]
    collector = tr.UsersCollector()
    collector(root)
    expected = {}
    for node in all_nodes([root]):
        for child in children_of(node):
            expected.setdefault(child, set()).add(node)
    assert collector.node_to_users == expected


def test_users_collector_dict_result_uses_its_arrays():
    x = pt.make_placeholder("x", (2,))
    a = x + 1
    d = pt.make_dict_of_named_arrays({"a": a, "b": a * 2})
    collector = tr.UsersCollector()
    collector(d)
    assert collector.node_to_users[a] == {d, d._data["b"]}
    assert collector.node_to_users[x] == {a}


def test_rec_get_user_nodes_and_tag_user_nodes():
    x = pt.make_placeholder("x", (2,))
    z = pt.make_placeholder("z", (2,))
    a = x + 1
    b = a * 2
    c = z - 1
    top = b + c
    assert tr.rec_get_user_nodes(top, a) == {b, top}
    assert tr.rec_get_user_nodes(top, z) == {c, top}
    collector = tr.UsersCollector()
    collector(top)
    tags = tr.tag_user_nodes(collector.node_to_users, "T", a)
    assert set(tags) == {a, b, top}
    assert all(v == {"T"} for v in tags.values())
    tr.tag_user_nodes(collector.node_to_users, "U", c, tags)
    assert tags[top] == {"T", "U"} and tags[c] == {"U"}

# }}}

# vim: foldmethod=marker


def test_a_rebuilt_index_lambda_keeps_every_field_but_its_children():
    """Copy mappers and materialize_with_mpms rebuild index lambdas without
    Array.copy: the new node has the old one's expression, dtype, axes,
    reductions, tags and creation site, the new children (also in a
    symbolic shape), and equals what Array.copy makes."""
    from pytato_like.array import set_traceback_tag_enabled
    from pytato_like.tags import CreatedAt, ImplStored
    from pytools.tag import UniqueTag

    class Marked(UniqueTag):
        pass

    set_traceback_tag_enabled(True)
    try:
        n = pt.make_size_param("n")
        x = pt.make_placeholder("x", (n, 3))
        total = pt.sum(x * x, axis=1)
        (rvar,) = total.var_to_reduction_descr
        y = (total.with_tagged_reduction(rvar, Marked())
             .with_tagged_axis(0, Marked()).tagged(Marked()))
    finally:
        set_traceback_tag_enabled(False)
    assert type(y) is pt.IndexLambda

    new = RenamePlaceholders()(y)
    (child,) = new.bindings.values()  # x * x, rebuilt on x_new
    assert {p.name for p in tr.InputGatherer()(child)} == {"x_new", "n"}
    expected = y.copy(bindings={name: child for name in y.bindings})
    assert new == expected and hash(new) == hash(expected)
    assert new.expr is y.expr and new.dtype == y.dtype
    assert new.axes == y.axes and new.tags == y.tags
    assert new.var_to_reduction_descr == y.var_to_reduction_descr
    assert new.non_equality_tags == y.non_equality_tags
    assert any(isinstance(t, CreatedAt) for t in new.non_equality_tags)
    # the symbolic extent is mapped too (n is not renamed: the same node)
    assert new.shape == y.shape

    # MPMS: a node of two inputs and two users is stored, its users
    # rebuilt on it (with a symbolic shape through a copy mapper, with
    # integer ones in the pass's own loop)
    for extent in (n, 4):
        set_traceback_tag_enabled(True)
        try:
            x = pt.make_placeholder("x", (extent,))
            twice = (x * x).tagged(Marked()) + pt.make_placeholder(
                "z", (extent,))
            user = twice * 3
        finally:
            set_traceback_tag_enabled(False)
        out = pt.materialize_with_mpms(pt.make_dict_of_named_arrays(
            {"a": twice, "b": user}))
        stored_twice = out["a"].expr
        assert stored_twice.tags_of_type(ImplStored)
        assert stored_twice == twice.tagged(ImplStored())
        assert stored_twice.non_equality_tags == twice.non_equality_tags
        rebuilt_user = out["b"].expr
        assert rebuilt_user == user.copy(bindings={
            name: stored_twice for name in user.bindings
            if user.bindings[name] is twice} | {
            name: b for name, b in user.bindings.items() if b is not twice})
        assert rebuilt_user.non_equality_tags == user.non_equality_tags
