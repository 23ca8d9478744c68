"""The one field-kind switch, the one output normaliser and the one
depth-first walk.

:class:`AllKinds` (defined here, not in the package) has one field of every
kind. Children, copying, equality, structural and cache keys, the
persistent hash, pickling, printing and description must all handle it
from its field table alone; each check is against what the fields hold,
written out by hand. The walk is checked against hand-built orders and on
100 000-deep chains at Python's default recursion limit.
"""

from __future__ import annotations

import dataclasses

import pickle

import numpy as np
import pytest
from constantdict import constantdict

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like._traversal import (
    PAUSED,
    depth_first,
    flatten_dags,
    topological_order,
    unflatten_dags,
)
from pytato_like.analysis import PytatoKeyBuilder, get_num_nodes
from pytato_like.array import (
    ARRAY,
    ARRAY_TUPLE,
    BINDINGS,
    IDENTITY,
    INDICES,
    SHAPE,
    VALUE,
    Array,
    NormalizedSlice,
    children_of,
    normalize_outputs,
    output_arrays,
)
from pytato_like.diagnostic import NotAnArrayError, VisualizationError
from pytato_like.partition import DagIndex
from pytato_like.target.loopy.cache import dag_key
from pytato_like.transform._graph import structural_representatives
from pytato_like.visualization._describe import normalize_result, operand_edges


class AllKinds(Array):
    """A node with one field of each kind (its value is never computed)."""

    __slots__ = ("label", "payload", "first", "pair", "named", "where")
    _mapper_method = "map_all_kinds"
    _fields = (("label", VALUE), ("payload", IDENTITY), ("first", ARRAY),
               ("pair", ARRAY_TUPLE), ("named", BINDINGS), ("shape", SHAPE),
               ("where", INDICES), ("dtype", VALUE))


PAYLOAD = np.arange(3.0)


def _inputs():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (4,))
    y = pt.make_placeholder("y", (4,))
    z = pt.make_placeholder("z", (4,))
    i = pt.make_placeholder("i", (2,), np.int64)
    return n, x, y, z, i


def _node(n, x, y, z, i, *, label="a", payload=PAYLOAD, named=None,
          where=None):
    named = {"p": z, "q": x} if named is None else named
    where = (1, NormalizedSlice(0, 3, 1), i, None) if where is None else where
    return AllKinds(label=label, payload=payload, first=x, pair=(y, x),
                    named=constantdict(named), shape=(n, 2), where=where, dtype=np.float64)


def test_children_follow_the_field_table():
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    # field order; bindings in insertion order; duplicates kept
    assert children_of(node) == (x, y, x, z, x, n, i)
    assert children_of(node, include_shape=False) == (x, y, x, z, x, i)
    assert tr.InputGatherer()(node) == frozenset({n, x, y, z, i})
    assert get_num_nodes(node) == 6


def test_children_of_a_node_whose_shape_is_all_ints():
    # (the getter skips a shape of ints: nothing of it is a child)
    n, x, y, z, i = _inputs()
    node = dataclasses.replace(_node(n, x, y, z, i), shape=(3, 2))
    assert children_of(node) == children_of(node, include_shape=False) \
        == (x, y, x, z, x, i)
    # a reshape to a size parameter and to ints, through the same getter
    flat = pt.make_placeholder("f", (2 * n,))
    (size,) = flat.shape
    assert children_of(flat) == (size,)
    assert children_of(flat, include_shape=False) == ()
    assert children_of(flat.reshape(n, 2)) == (flat, n)
    assert children_of(flat.reshape(n, 2), include_shape=False) == (flat,)
    assert children_of(x.reshape(2, 2)) == (x,)


def test_copy_maps_every_kind_and_keeps_the_rest():
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    assert tr.CopyMapper()(node) == node
    m = pt.make_size_param("m")
    w = pt.make_placeholder("w", (4,))
    j = pt.make_placeholder("j", (2,), np.int64)
    swap = {id(x): w, id(n): m, id(i): j}

    class Swap(tr.CopyMapper):
        def map_placeholder(self, expr):
            if id(expr) in swap:
                return swap[id(expr)]
            return super().map_placeholder(expr)

        def map_size_param(self, expr):
            if id(expr) in swap:
                return swap[id(expr)]
            return super().map_size_param(expr)

    new = Swap()(node)
    assert type(new) is AllKinds
    assert new.label == "a" and new.payload is PAYLOAD
    assert new.first is w and new.pair == (y, w)
    assert dict(new.named) == {"p": z, "q": w}
    assert list(new.named) == ["p", "q"]
    assert new.shape[0] is m and new.shape[1] == 2
    assert new.where[0] == 1 and new.where[1] == NormalizedSlice(0, 3, 1)
    assert new.where[2] is j and new.where[3] is None
    assert new == _node(m, w, y, z, j)


def test_fields_that_hold_no_array_are_kept_by_identity():
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    # nothing changed: every field value is the very same object
    copied = tr.CopyMapper()(node)
    assert copied is node or all(
        getattr(copied, name) is getattr(node, name)
        for name, _ in AllKinds._fields)
    assert pt.array.BINDINGS.map(node.named, lambda a: a) is node.named
    assert pt.array.INDICES.map(node.where, lambda a: a) is node.where
    assert pt.array.ARRAY_TUPLE.map(node.pair, lambda a: a) is node.pair


@pytest.mark.parametrize("change", [
    {"label": "b"},
    {"payload": PAYLOAD.copy()},          # equal contents, other object
    {"named": "order"},                   # same bindings, other insertion order
    {"named": "swap"},
    {"where": (1, NormalizedSlice(0, 3, 1), "i", 0)},
    {"where": (1, NormalizedSlice(0, 2, 1), "i", None)},
    {"where": (2, NormalizedSlice(0, 3, 1), "i", None)},
])
def test_equality_and_keys_per_kind(change):
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    kwargs = dict(change)
    equal = False
    if kwargs.get("named") == "order":
        kwargs["named"], equal = {"q": x, "p": z}, True
    elif kwargs.get("named") == "swap":
        kwargs["named"] = {"p": x, "q": z}
    if "where" in kwargs:
        kwargs["where"] = tuple(i if w == "i" else w for w in kwargs["where"])
    other = _node(n, x, y, z, i, **kwargs)
    twin = _node(n, x, y, z, i)
    assert node == twin and hash(node) == hash(twin)
    assert (node == other) is equal
    if equal:
        assert hash(node) == hash(other)
    # the keys built over the same field table agree with ==
    reps = structural_representatives(topological_order([node, other]))
    assert (reps[-1] is reps[topological_order([node, other]).index(node)]) \
        is equal
    key = PytatoKeyBuilder()
    assert key(node) == key(twin)
    if change != {"named": "order"}:  # (order renumbers the nodes in the key)
        assert (key(node) == key(other)) is ("payload" in change)

    def cache_key(a):
        return dag_key({"out": a}, topological_order([a]))

    assert cache_key(node) == cache_key(twin)
    if change != {"named": "order"}:  # (order renumbers the nodes in the key)
        assert (cache_key(node) == cache_key(other)) is ("payload" in change)


def test_persistent_hash_reads_identity_data_by_contents():
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    same = _node(n, x, y, z, i, payload=PAYLOAD.copy())
    other = _node(n, x, y, z, i, payload=PAYLOAD + 1)
    key = PytatoKeyBuilder()
    assert key(node) == key(same)
    assert key(node) != key(other)


def test_pickle_and_flat_records_round_trip():
    n, x, y, z, i = _inputs()
    node = _node(n, x, y, z, i)
    (back,) = unflatten_dags(*flatten_dags([node]))
    assert back == node and back is not node
    assert back.payload is PAYLOAD
    loaded = pickle.loads(pickle.dumps(node))
    # identity data comes back as a copy: equal contents, not equal nodes
    assert np.array_equal(loaded.payload, PAYLOAD)
    assert loaded.named.keys() == node.named.keys()
    assert [type(c).__name__ for c in children_of(loaded)] == [
        type(c).__name__ for c in children_of(node)]
    assert loaded.where[1] == NormalizedSlice(0, 3, 1) and loaded.where[3] is None


def test_string_shows_every_field():
    n, x, y, z, i = _inputs()
    text = repr(_node(n, x, y, z, i))
    assert text.startswith("%") or text.startswith("AllKinds(")
    assert "label='a'" in text
    assert "payload=array([0., 1., 2.])" in text
    assert "named={p: " in text and ", q: " in text
    assert "where=(1, 0:3:1, " in text and ", None)" in text
    assert "Placeholder(name='y'" in text and "SizeParam(name='n'" in text


def test_description_labels_every_array_slot():
    n, x, y, z, i = _inputs()
    edges = {id(c): (label, aux) for c, label, aux
             in operand_edges(_node(n, x, y, z, i))}
    assert edges[id(x)] == ("first, 1, q", False)
    assert edges[id(y)] == ("0", False)
    assert edges[id(z)] == ("p", False)
    assert edges[id(n)] == ("shape[0]", True)
    assert edges[id(i)] == ("index[2]", False)
    assert "AllKinds" in pt.get_ascii_graph(_node(n, x, y, z, i))


# {{{ the one output normaliser

def test_output_forms_normalise_alike():
    x = pt.make_placeholder("x", (4,))
    y = 2 * x
    assert normalize_outputs(y) == ({"_pt_out": y}, True)
    assert normalize_outputs({"a": y, "b": x}) == ({"a": y, "b": x}, False)
    named = pt.make_dict_of_named_arrays({"a": y, "b": y})
    assert normalize_outputs(named) == ({"a": y, "b": y}, False)
    assert output_arrays(named) == [y, y]
    assert normalize_result(named) == ([y], {id(y): ["a", "b"]})
    with pytest.raises(NotAnArrayError, match="list"):
        normalize_outputs([y])
    with pytest.raises(NotAnArrayError, match="'b'"):
        normalize_outputs({"a": y, "b": 3})
    with pytest.raises(VisualizationError, match="int"):
        normalize_result(3)
    # every user agrees: analysis, printing, code generation
    assert pt.analysis.get_num_nodes({"a": y}) == 2
    xv = np.arange(4.0)
    assert np.array_equal(pt.generate_numpy({"a": y})(x=xv)["a"], 2 * xv)

# }}}


# {{{ the one depth-first walk

def test_depth_first_order_and_entering():
    a = pt.make_placeholder("a", (2,))
    b = pt.make_placeholder("b", (2,))
    c = a + b
    d = c * a
    # children before users, the last child walked first, each node once
    assert [n for n, _ in depth_first([d])] == [a, b, c, d]
    assert [kids for n, kids in depth_first([d]) if n is d] == [(c, a)]
    # once per path
    assert [n for n, _ in depth_first([d], once=False)] == [a, b, a, c, d]
    # entering: a False answer prunes the node and its subtree
    assert [n for n, _ in depth_first([d], enter=lambda n: n is not c)] == [a, d]
    # pausing: the walk says so once, then goes on
    steps = list(depth_first([d], pause_after=2))
    assert steps.count(PAUSED) == 1
    assert [n for n, _ in steps if n is not None] == [a, b, c, d]


def _chain(n):
    x = pt.make_placeholder("x", (3,))
    y = x
    for _ in range(n):
        y = 0.5 * y
    return x, y


def test_walks_share_one_order_on_a_100000_deep_chain():
    x, y = _chain(100_000)
    order = topological_order([y])
    assert len(order) == 100_001 and order[0] is x and order[-1] is y
    index = DagIndex([y])
    assert index.order == order
    assert index.kids[0] == () and all(k == (i - 1,)
                                       for i, k in enumerate(index.kids) if i)

    seen = []

    class Post(tr.WalkMapper):
        def post_visit(self, expr):
            seen.append(expr)

    Post()(y)
    assert seen == order

    assert tr.CopyMapper()(y) == y


def test_all_kinds_node_on_a_100000_deep_chain():
    n, x, y, z, i = _inputs()
    node = x
    for k in range(100_000):
        node = _node(n, node, y, z, i, label=str(k % 3))
    (back,) = unflatten_dags(*flatten_dags([node]))
    assert back is not node and back == node
    # read three times by its user, each node is printed once
    assert pt.stringify(node).count("AllKinds(") == 100_000

# }}}

# vim: foldmethod=marker
