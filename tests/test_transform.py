"""Rewrites of pytato_like.transform: MPMS materialization, lowering to
IndexLambda, einsum broadcast removal, dead code elimination, data wrapper
deduplication. Values are checked on the NumPy target against the
unrewritten DAG; materialization against hand-worked examples and a
brute-force implementation of the rule."""

from __future__ import annotations

import random

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like._traversal import topological_order
from pytato_like.array import children_of
from pytato_like.diagnostic import CannotBeLoweredToIndexLambda
from pytato_like.tags import ImplStored
from pytato_like.transform.dead_code_elimination import eliminate_dead_code
from pytato_like.transform.lower_to_index_lambda import to_index_lambda
from pytato_like.transform.remove_broadcasts_einsum import (
    rewrite_einsums_with_no_broadcasts,
)

# {{{ materialize_with_mpms


def stored(ary):
    return bool(ary.tags_of_type(ImplStored))


def nodes_by_original(old_roots, new_roots):
    """Old node id -> the new node in the same position (the DAGs have the
    same structure; materialization only adds tags)."""
    pairs = {}
    stack = list(zip(old_roots, new_roots, strict=True))
    while stack:
        old, new = stack.pop()
        if id(old) in pairs:
            continue
        assert type(old) is type(new)
        pairs[id(old)] = new
        stack.extend(zip(children_of(old), children_of(new), strict=True))
    return pairs


def test_mpms_materializes_the_seed_example():
    # I1, I2 -> T -> O1, O2: T has two materialized predecessors and two
    # successors
    i1 = pt.make_placeholder("i1", (4,))
    i2 = pt.make_placeholder("i2", (4,))
    t = i1 + i2
    out = pt.make_dict_of_named_arrays({"o1": t * 2, "o2": t - 1})
    new = tr.materialize_with_mpms(out)
    t_new = new._data["o1"].bindings["_in0"]
    assert stored(t_new)
    assert new._data["o2"].bindings["_in0"] is t_new
    assert not stored(new._data["o1"]) and not stored(new._data["o2"])


def test_mpms_one_materialized_predecessor_is_not_enough():
    x = pt.make_placeholder("x", (4,))
    a = x + 1
    out = pt.make_dict_of_named_arrays({"o1": a * 2, "o2": a - 1})
    assert tr.materialize_with_mpms(out) is out


def test_mpms_predecessors_propagate_through_unmaterialized_nodes():
    x = pt.make_placeholder("x", (4,))
    y = pt.make_placeholder("y", (4,))
    a = x + y          # one successor: stays inline
    b = a * 2          # sees x and y through a; two successors
    out = pt.make_dict_of_named_arrays({"c": b + 1, "d": b - 1})
    new = tr.materialize_with_mpms(out)
    b_new = new._data["c"].bindings["_in0"]
    assert stored(b_new) and not stored(b_new.bindings["_in0"])


def test_mpms_same_predecessor_through_two_paths_counts_once():
    x = pt.make_placeholder("x", (4,))
    c = (x + 1) + (x * 2)   # materialized predecessors: {x}
    out = pt.make_dict_of_named_arrays({"o1": c * 2, "o2": c - 1})
    assert tr.materialize_with_mpms(out) is out


def test_mpms_existing_impl_stored_counts_as_materialized():
    x = pt.make_placeholder("x", (4,))
    a = (x + 1).tagged(ImplStored())
    d = a + x * 3           # {a, x}: two materialized predecessors
    out = pt.make_dict_of_named_arrays({"o1": d * 2, "o2": d - 1})
    new = tr.materialize_with_mpms(out)
    assert stored(new._data["o1"].bindings["_in0"])

    a_plain = x + 1         # without the tag: {x} only
    d_plain = a_plain + x * 3
    out_plain = pt.make_dict_of_named_arrays({"o1": d_plain * 2, "o2": d_plain - 1})
    assert tr.materialize_with_mpms(out_plain) is out_plain


def test_mpms_leaves_nodes_tagged_inlined_alone():
    from pytato_like.tags import ImplInlined

    i1 = pt.make_placeholder("i1", (4,))
    i2 = pt.make_placeholder("i2", (4,))
    t = (i1 + i2).tagged(ImplInlined())
    out = pt.make_dict_of_named_arrays({"o1": t * 2, "o2": t - 1})
    assert tr.materialize_with_mpms(out) is out


def test_mpms_an_output_counts_as_a_successor():
    i1 = pt.make_placeholder("i1", (4,))
    i2 = pt.make_placeholder("i2", (4,))
    t = i1 * i2
    new = tr.materialize_with_mpms(pt.make_dict_of_named_arrays(
        {"t": t, "u": t + 1}))
    assert stored(new._data["t"])
    assert new._data["u"].bindings["_in0"] is new._data["t"]


def mpms_reference(roots, output_uses):
    """The MPMS rule with explicit predecessor sets (small DAGs only)."""
    from pytato_like.transform._graph import data_operands

    order = topological_order(roots)
    nsucc = dict(output_uses)
    for node in order:
        for op in data_operands(node):
            nsucc[id(op)] = nsucc.get(id(op), 0) + 1
    materialized, preds, selected = set(), {}, set()
    for node in order:
        if isinstance(node, pt.InputArgumentBase):
            materialized.add(id(node))
            continue
        p = set()
        for op in data_operands(node):
            p |= {id(op)} if id(op) in materialized else preds.get(id(op), set())
        preds[id(node)] = p
        if len(p) > 1 and nsucc.get(id(node), 0) > 1:
            selected.add(id(node))
            materialized.add(id(node))
    return selected


@pytest.mark.parametrize("seed", range(10))
def test_mpms_matches_brute_force_rule_on_random_dags(seed):
    rnd = random.Random(seed)
    pool = [pt.make_placeholder(f"p{i}", (3,)) for i in range(3)]
    for _ in range(30):
        x, y = rnd.choice(pool), rnd.choice(pool)
        pool.append(rnd.choice([lambda: x + y, lambda: x * y, lambda: pt.sin(x),
                                lambda: pt.stack([x, y])[0]])())
    outs = {f"o{i}": v for i, v in enumerate(rnd.sample(pool[3:], 4))}
    result = pt.make_dict_of_named_arrays(outs)
    uses = {}
    for v in outs.values():
        uses[id(v)] = uses.get(id(v), 0) + 1
    expected = mpms_reference(list(outs.values()), uses)
    new = tr.materialize_with_mpms(result)
    pairs = nodes_by_original(list(outs.values()), list(new._data.values()))
    got = {i for i, n in pairs.items() if stored(n)}
    assert got == expected
    inputs = {f"p{i}": np.arange(3.0) + i for i in range(3)}
    names = {p.name for p in tr.InputGatherer()(result)}
    feed = {k: v for k, v in inputs.items() if k in names}
    want = pt.generate_numpy(result)(**feed)
    have = pt.generate_numpy(new)(**feed)
    for k in want:
        np.testing.assert_allclose(have[k], want[k])

# }}}


# {{{ to_index_lambda

IDX = np.array([2, 0, -1])
IDX2 = np.array([[1], [-2]])


def lowering_cases():
    """(description, builder(placeholders) -> expr, inputs)"""
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 4))
    k = rng.standard_normal((3, 4, 5))
    v = rng.standard_normal(4)
    i32 = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    bools = rng.random((3, 4)) > 0.5
    col = rng.standard_normal((3, 1))
    sq = rng.standard_normal((4, 4))
    return [
        ("einsum matvec", lambda p: pt.einsum("ij,j->i", p["m"], p["v"])),
        ("einsum matmul", lambda p: p["m"] @ p["m"].T),
        ("einsum broadcast", lambda p: pt.einsum("ij,ij->ij", p["col"], p["m"])),
        ("einsum diagonal", lambda p: pt.einsum("ii->i", p["sq"])),
        ("einsum trace", lambda p: pt.einsum("ii->", p["sq"])),
        ("einsum mixed dtype", lambda p: pt.einsum("ij,ij->i", p["i32"], p["f32"])),
        ("einsum bool", lambda p: pt.einsum("ij,ij->i", p["bools"], p["bools"])),
        ("einsum outer", lambda p: pt.einsum("i,j->ij", p["v"], p["v"])),
        ("reshape C", lambda p: p["k"].reshape(6, 10)),
        ("reshape F", lambda p: pt.reshape(p["k"], (5, 12), order="F")),
        ("reshape unit axes", lambda p: pt.expand_dims(p["m"], (0, 2))),
        ("squeeze", lambda p: pt.squeeze(p["col"])),
        ("transpose", lambda p: pt.transpose(p["k"], (2, 0, 1))),
        ("roll", lambda p: pt.roll(p["m"], 3, axis=1)),
        ("roll negative", lambda p: pt.roll(p["k"], -2, axis=0)),
        ("basic slices", lambda p: p["m"][1:, ::2]),
        ("basic negative step", lambda p: p["k"][::-2, 1, 3:0:-1]),
        ("basic int", lambda p: p["m"][2]),
        ("advanced contiguous", lambda p: p["m"][:, IDX]),
        ("advanced with int", lambda p: p["k"][1, IDX, :]),
        ("advanced 2d broadcast", lambda p: p["k"][:, IDX2, IDX[:1]]),
        ("advanced non-contiguous", lambda p: p["k"][IDX, :, IDX]),
        ("advanced non-contiguous broadcast", lambda p: p["k"][IDX2, 1:3, IDX]),
        ("concatenate axis 0", lambda p: pt.concatenate([p["m"], p["i32"], p["f32"]])),
        ("concatenate axis 1", lambda p: pt.concatenate([p["m"], p["col"]], axis=1)),
        ("stack", lambda p: pt.stack([p["m"], p["f32"], p["i32"]], axis=1)),
        ("named array", lambda p: pt.make_dict_of_named_arrays(
            {"a": p["m"] + 1})["a"]),
    ], {"m": m, "k": k, "v": v, "i32": i32, "f32": f32, "bools": bools,
        "col": col, "sq": sq}


CASES, VALUES = lowering_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_to_index_lambda_evaluates_equal(case):
    _, build = case
    placeholders = {name: pt.make_placeholder(name, val.shape, val.dtype)
                    for name, val in VALUES.items()}
    expr = build(placeholders)
    assert not isinstance(expr, pt.IndexLambda)
    lowered = to_index_lambda(expr)
    assert isinstance(lowered, pt.IndexLambda)
    assert lowered.shape == expr.shape and lowered.dtype == expr.dtype
    names = {p.name for p in tr.InputGatherer()(expr)
             if isinstance(p, pt.Placeholder)}
    feed = {k: v for k, v in VALUES.items() if k in names}
    expected = pt.generate_numpy(expr)(**feed)
    got = pt.generate_numpy(lowered)(**feed)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_to_index_lambda_covers_every_node_class_of_the_ir():
    placeholders = {name: pt.make_placeholder(name, val.shape, val.dtype)
                    for name, val in VALUES.items()}
    lowered_classes = {type(build(placeholders)) for _, build in CASES}
    assert lowered_classes == {
        pt.Einsum, pt.Reshape, pt.AxisPermutation, pt.Roll, pt.BasicIndex,
        pt.AdvancedIndexInContiguousAxes, pt.AdvancedIndexInNoncontiguousAxes,
        pt.Concatenate, pt.Stack, pt.NamedArray}


def test_to_index_lambda_with_symbolic_extents():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3))
    value = np.arange(15.0).reshape(5, 3)
    # (Reshape built directly: the front end compares symbolic sizes
    # structurally and does not see that 3*n == n*3)
    for expr in (pt.Reshape(x, (x.size,)), pt.roll(x, 2, axis=0),
                 pt.concatenate([x, x * 2], axis=0),
                 pt.einsum("ij->j", x), x[:, 1:]):
        lowered = to_index_lambda(expr)
        np.testing.assert_allclose(pt.generate_numpy(lowered)(x=value),
                                   pt.generate_numpy(expr)(x=value))


def test_to_index_lambda_keeps_tags_and_axes():
    m = pt.make_placeholder("m", (3, 4))
    expr = m.T.tagged(ImplStored()).with_tagged_axis(0, ImplStored())
    lowered = to_index_lambda(expr)
    assert lowered.tags == expr.tags and lowered.axes == expr.axes


def test_to_index_lambda_returns_index_lambdas_unchanged():
    x = pt.make_placeholder("x", (2,))
    y = x + 1
    assert to_index_lambda(y) is y


@pytest.mark.parametrize("make", [
    lambda: pt.make_placeholder("x", (2, 3)),
    lambda: pt.make_data_wrapper(np.ones((2, 3))),
    lambda: pt.make_size_param("n"),
])
def test_inputs_cannot_be_lowered(make):
    expr = make()
    with pytest.raises(CannotBeLoweredToIndexLambda, match=type(expr).__name__):
        to_index_lambda(expr)

# }}}


# {{{ rewrite_einsums_with_no_broadcasts

def test_einsum_broadcast_removal_seed_example():
    a = pt.make_placeholder("a", (10, 4, 1), np.float64)
    b = pt.make_placeholder("b", (10, 1, 4), np.float64)
    expr = pt.einsum("ijk,ijk->i", a, b)
    new = pt.rewrite_einsums_with_no_broadcasts(expr)
    assert pt.analysis.is_einsum_similar_to_subscript(new, "ij,ik->i")
    assert not pt.analysis.is_einsum_similar_to_subscript(new, "ijk,ijk->i")
    rng = np.random.default_rng(1)
    av, bv = rng.standard_normal((10, 4, 1)), rng.standard_normal((10, 1, 4))
    np.testing.assert_allclose(pt.generate_numpy(new)(a=av, b=bv),
                               np.einsum("ijk,ijk->i", av, bv))


def test_einsum_broadcast_removal_inside_a_dag():
    a = pt.make_placeholder("a", (3, 1))
    b = pt.make_placeholder("b", (1, 5))
    c = pt.make_placeholder("c", (3, 5))
    expr = pt.sin(pt.einsum("ij,ij,ij->j", a, b, c)) + 1
    new = rewrite_einsums_with_no_broadcasts(expr)
    einsum = new.bindings["_in0"].bindings["_in0"]
    assert pt.analysis.is_einsum_similar_to_subscript(einsum, "i,j,ij->j")
    rng = np.random.default_rng(2)
    vals = {"a": rng.standard_normal((3, 1)), "b": rng.standard_normal((1, 5)),
            "c": rng.standard_normal((3, 5))}
    np.testing.assert_allclose(pt.generate_numpy(new)(**vals),
                               pt.generate_numpy(expr)(**vals))


def test_einsum_without_broadcasts_is_returned_unchanged():
    a = pt.make_placeholder("a", (3, 4))
    expr = pt.einsum("ij,jk->ik", a, a.T) * 2
    assert rewrite_einsums_with_no_broadcasts(expr) is expr

# }}}


# {{{ eliminate_dead_code

def test_dead_code_elimination_drops_unused_bindings():
    x = pt.make_placeholder("x", (3,))
    unused = pt.make_placeholder("unused", (3,)) * 2
    base = x + 1
    lam = pt.IndexLambda(base.expr, base.shape, base.dtype,
                         {"_in0": x, "_in1": unused})
    y = lam * 3
    new = eliminate_dead_code(y)
    assert {p.name for p in tr.InputGatherer()(new)} == {"x"}
    assert set(new.bindings["_in0"].bindings) == {"_in0"}
    xv = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(pt.generate_numpy(new)(x=xv), (xv + 1) * 3)


def test_dead_code_elimination_keeps_bindings_used_only_in_reduction_bounds():
    x = pt.make_placeholder("x", (4,))
    s = pt.sum(x)
    assert eliminate_dead_code(s) is s


def test_dead_code_elimination_removes_named_array_indirections():
    x = pt.make_placeholder("x", (3,))
    big = pt.make_placeholder("big", (1000,)) * 2
    d = pt.make_dict_of_named_arrays({"a": x + 1, "big": big})
    y = d["a"] * 2
    new = eliminate_dead_code(y)
    assert new.bindings["_in0"] is d._data["a"]
    assert not any(isinstance(n, pt.NamedArray) for n in topological_order([new]))
    xv = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(pt.generate_numpy(new)(x=xv),
                               pt.generate_numpy(y)(x=xv))


def test_dead_code_elimination_keeps_tagged_named_arrays():
    x = pt.make_placeholder("x", (3,))
    d = pt.make_dict_of_named_arrays({"a": x + 1})
    y = d["a"].tagged(ImplStored()) * 2
    assert eliminate_dead_code(y) is y


def test_dead_code_elimination_is_identity_on_live_dags():
    x = pt.make_placeholder("x", (3,))
    y = pt.make_dict_of_named_arrays({"a": pt.sin(x) * x, "b": x[::-1]})
    assert pt.eliminate_dead_code(y) is y

# }}}


# {{{ deduplicate_data_wrappers

def _data_wrappers(expr):
    return [n for n in topological_order(list(expr._data.values())
                                         if isinstance(expr, pt.DictOfNamedArrays)
                                         else [expr])
            if isinstance(n, pt.DataWrapper)]


def test_deduplicate_merges_wrappers_of_the_same_memory():
    data = np.arange(6.0)
    w1 = pt.make_data_wrapper(data)
    w2 = pt.make_data_wrapper(data[:])          # same memory, other object
    w3 = pt.make_data_wrapper(data.copy())      # same values, other memory
    w4 = pt.make_data_wrapper(data[::2])        # same address, other strides
    expr = pt.make_dict_of_named_arrays({"a": w1 + w2 + w3, "b": w4 * 2})
    assert len(_data_wrappers(expr)) == 4
    new = tr.deduplicate_data_wrappers(expr)
    wrappers = _data_wrappers(new)
    assert len(wrappers) == 3
    assert {id(w.data) for w in wrappers} == {id(data), id(w3.data), id(w4.data)}
    got = pt.generate_numpy(new)()
    np.testing.assert_allclose(got["a"], 3 * data)
    np.testing.assert_allclose(got["b"], 2 * data[::2])


def test_deduplicate_keeps_differently_named_wrappers():
    data = np.arange(3.0)
    expr = pt.make_data_wrapper(data, name="u") + pt.make_data_wrapper(data, name="v")
    assert tr.deduplicate_data_wrappers(expr) is expr

# }}}

# vim: foldmethod=marker
