"""pytato_like.analysis against hand counts and brute force on small DAGs.
(Deep DAGs: tests/test_transform_deep.py.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.analysis import (
    DirectPredecessorsGetter,
    get_num_nodes,
    get_nusers,
    is_einsum_similar_to_subscript,
)
from pytato_like.array import children_of
from pytato_like.diagnostic import NotAnArrayError, UnsupportedArrayError


def all_nodes(roots):
    seen = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(children_of(node))
    return list(seen.values())


def random_dag_with_duplicates(seed):
    """Random DAG in which some subexpressions are built twice (distinct
    objects, structurally equal)."""
    rnd = random.Random(seed)
    x = pt.make_placeholder("x", (3,))
    y = pt.make_placeholder("y", (3,))
    pool = [x, y]
    recipes = []
    for _ in range(20):
        i, j, op = rnd.randrange(len(pool)), rnd.randrange(len(pool)), rnd.randrange(3)
        recipes.append((i, j, op))
        a, b = pool[i], pool[j]
        pool.append([lambda: a + b, lambda: a * 2, lambda: pt.cos(a) - b][op]())
        if rnd.random() < 0.3:  # rebuild an earlier recipe: a duplicate
            i, j, op = rnd.choice(recipes)
            a, b = pool[i], pool[j]
            pool.append([lambda: a + b, lambda: a * 2, lambda: pt.cos(a) - b][op]())
    return pool


# {{{ get_nusers

def test_get_nusers_hand_counted():
    x = pt.make_placeholder("x", (3,))
    a = x + 1          # uses x
    b = a * x          # uses a, x
    c = b + a          # uses b, a
    nusers = get_nusers(c)
    assert nusers[x] == 2 and nusers[a] == 2 and nusers[b] == 1 and nusers[c] == 0
    assert len(nusers) == 4


def test_get_nusers_counts_dict_entries_and_shape_uses():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,))
    y = x * 2
    nusers = get_nusers(pt.make_dict_of_named_arrays({"y": y, "y2": y, "x": x}))
    assert nusers[y] == 2
    assert nusers[x] == 2          # y, and the result entry "x"
    assert nusers[n] == 2          # the shapes of x and of y


@pytest.mark.parametrize("seed", range(6))
def test_get_nusers_equals_brute_force(seed):
    pool = random_dag_with_duplicates(seed)
    root = pool[-1]
    expected = {}
    for node in all_nodes([root]):
        expected.setdefault(node, 0)
    for node in all_nodes([root]):
        for child in children_of(node):
            expected[child] += 1
    assert get_nusers(root) == expected


def test_get_nusers_rejects_non_arrays():
    with pytest.raises(NotAnArrayError, match="list"):
        get_nusers([1, 2])

# }}}


# {{{ get_num_nodes

def test_get_num_nodes_hand_counted():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,))
    y = pt.sin(x) + 1
    # n, x, sin(x), sin(x) + 1
    assert get_num_nodes(y) == 4
    assert get_num_nodes(pt.make_dict_of_named_arrays({"y": y, "x": x})) == 4


def test_get_num_nodes_count_duplicates():
    x = pt.make_placeholder("x", (3,))
    a1 = x + 1
    a2 = x + 1                      # equal to a1, another object
    assert a1 == a2 and a1 is not a2
    y = a1 * a2                     # binds both: distinct objects
    assert get_num_nodes(y, count_duplicates=True) == 4
    assert get_num_nodes(y, count_duplicates=False) == 3
    assert get_num_nodes(y) == 3


@pytest.mark.parametrize("seed", range(6))
def test_get_num_nodes_equals_brute_force(seed):
    pool = random_dag_with_duplicates(seed)
    roots = pool[-6:]
    nodes = all_nodes(roots)
    classes = []
    for node in nodes:
        if not any(node == rep for rep in classes):
            classes.append(node)
    result = pt.make_dict_of_named_arrays({f"r{i}": r for i, r in enumerate(roots)})
    assert get_num_nodes(result, count_duplicates=True) == len(nodes)
    assert get_num_nodes(result) == len(classes)
    assert len(classes) < len(nodes)  # the case exercises duplicates

# }}}


# {{{ is_einsum_similar_to_subscript

def test_einsum_similarity_up_to_renaming():
    a = pt.make_placeholder("a", (3, 4))
    b = pt.make_placeholder("b", (4, 5))
    e = pt.einsum("ij,jk->ik", a, b)
    assert is_einsum_similar_to_subscript(e, "ij,jk->ik")
    assert is_einsum_similar_to_subscript(e, "ab,bc->ac")
    assert is_einsum_similar_to_subscript(e, "xy, yz -> xz")
    assert not is_einsum_similar_to_subscript(e, "ij,jk->ki")   # output order
    assert not is_einsum_similar_to_subscript(e, "ij,kj->ik")   # b transposed
    assert not is_einsum_similar_to_subscript(e, "ij,jk,kl->il")
    assert not is_einsum_similar_to_subscript(e, "ij,jk->i")


def test_einsum_similarity_diagonals_and_reductions():
    s = pt.make_placeholder("s", (4, 4))
    diag = pt.einsum("ii->i", s)
    assert is_einsum_similar_to_subscript(diag, "jj->j")
    assert not is_einsum_similar_to_subscript(diag, "ij->i")
    v = pt.make_placeholder("v", (4,))
    dot = pt.einsum("i,i->", v, v)
    assert is_einsum_similar_to_subscript(dot, "k,k->")
    assert not is_einsum_similar_to_subscript(dot, "k,l->")


def test_einsum_similarity_rejects_other_nodes():
    x = pt.make_placeholder("x", (3,))
    with pytest.raises(UnsupportedArrayError, match="IndexLambda"):
        is_einsum_similar_to_subscript(x + 1, "i->i")

# }}}


# {{{ DirectPredecessorsGetter

def test_direct_predecessors_include_operands_and_shape_expressions():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,))
    z = pt.make_placeholder("z", (n,))
    y = x * z
    getter = DirectPredecessorsGetter()
    assert getter(y) == {x, z, n}
    assert getter(x) == {n}
    assert getter(n) == frozenset()
    idx = pt.make_data_wrapper(np.array([0, 1]))
    m = pt.make_placeholder("m", (3, 4))
    assert getter(m[idx, 1:]) == {m, idx}
    assert getter(pt.concatenate([m, m * 2])) == {m, children_of(
        pt.concatenate([m, m * 2]))[1]}


def test_direct_predecessors_of_named_results():
    x = pt.make_placeholder("x", (2,))
    d = pt.make_dict_of_named_arrays({"a": x + 1, "b": x})
    getter = DirectPredecessorsGetter()
    assert getter(d["a"]) == {d._data["a"]}
    assert getter(d) == {d._data["a"], x}


def test_direct_predecessors_of_send_holder_is_only_the_passthrough():
    x = pt.make_placeholder("x", (2,))
    sent = x * 3
    kept = x + 1
    holder = pt.staple_distributed_send(sent, dest_rank=1, comm_tag="t",
                                        stapled_to=kept)
    assert DirectPredecessorsGetter()(holder) == {kept}
    recv = pt.make_distributed_recv(0, "u", (2,), np.float64)
    assert DirectPredecessorsGetter()(recv) == frozenset()

# }}}

# vim: foldmethod=marker
