"""The storage cost model and what it does to generated code: fused
chains stay in registers, shared work is stored, deep and exponentially
shared DAGs compile and run."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.tags import ImplInlined, ImplStored
from pytato_like.transform.materialize_cost import (
    CostModel,
    decide_storage,
    explain_materialization,
    materialize_with_cost_model,
)

cl = pytest.importorskip("pyopencl")


pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


DEPTH = 100_000


@pytest.fixture(scope="module")
def deep_chain():
    x = pt.make_placeholder("x", (64,), np.float64)
    y = x
    for _ in range(DEPTH):
        y = 0.5 * y + 1.0
    return x, y


def _stored_ids(result):
    outputs = [result] if isinstance(result, pt.Array) else list(result._data.values())
    costs = decide_storage(outputs)
    return {k for k, c in costs.items() if c.stored and c.reason != "input"}, costs


def test_elementwise_chain_is_fused_into_registers(queue):
    from pytato_like.target.loopy import generate_loopy
    x = pt.make_placeholder("x", (1000,), np.float64)
    y = x
    for i in range(10):
        y = pt.sin(y) * 0.5 + i
    prg = generate_loopy(y)
    # no temporaries: one kernel reading x and writing the result
    assert [b.kind for b in prg.plan.buffers.values()].count("temporary") == 0
    assert prg.source.count("__kernel") == 1
    assert "__global double *__restrict__" in prg.source
    xv = np.linspace(0, 1, 1000)
    _, (out,) = prg(queue, x=xv)
    np.testing.assert_allclose(out, pt.generate_numpy(y)(x=xv), rtol=1e-12)


def test_shared_expensive_node_read_by_stencil_is_stored():
    x = pt.make_placeholder("x", (100,), np.float64)
    t = pt.exp(pt.sin(x) * pt.cos(x) + pt.sqrt(pt.abs(x)))
    y = pt.roll(t, 1) + pt.roll(t, -1) - 2 * t
    stored, costs = _stored_ids(y)
    assert id(t) in stored
    assert costs[id(t)].reason == "reuse"
    assert not costs[id(t)].elementwise_uses


def test_cheap_single_use_nodes_are_inlined():
    x = pt.make_placeholder("x", (100,), np.float64)
    a = x + 1
    b = a * 2
    stored, _ = _stored_ids(b)
    assert id(a) not in stored and id(b) in stored


def test_tags_override_the_model():
    x = pt.make_placeholder("x", (100,), np.float64)
    a = (x + 1).tagged(ImplStored())
    t = pt.exp(pt.sin(x) * pt.cos(x)).tagged(ImplInlined())
    y = a * 2 + pt.roll(t, 1) + pt.roll(t, 2) + pt.roll(t, 3)
    stored, costs = _stored_ids(y)
    assert id(a) in stored and costs[id(a)].reason == "tag"
    assert id(t) not in stored


def test_reduction_used_by_several_users_is_stored():
    x = pt.make_placeholder("x", (50, 40), np.float64)
    s = pt.sum(x, axis=1)
    y = pt.make_dict_of_named_arrays({"a": s * 2, "b": s + x[:, 0]})
    stored, _ = _stored_ids(y)
    assert id(s) in stored


def test_inline_depth_is_capped():
    x = pt.make_placeholder("x", (10,), np.float64)
    y = x
    for _ in range(200):
        y = 0.5 * y + 1.0
    model = CostModel(max_inline_depth=20)
    costs = decide_storage([y], model)
    assert all(c.depth <= 20 + 2 for c in costs.values())
    n_stored = sum(c.stored and c.reason != "input" for c in costs.values())
    # one store every ~10 levels (each level nests two operations)
    assert 15 <= n_stored <= 45


def test_materialize_with_cost_model_tags_and_preserves_values():
    x = pt.make_placeholder("x", (30,), np.float64)
    t = pt.exp(pt.sin(x) * pt.cos(x) + x)
    y = pt.roll(t, 1) * pt.roll(t, 2) + t
    tagged = materialize_with_cost_model(y)
    n_tagged = sum(1 for node in _topo(tagged)
                   if any(isinstance(tg, ImplStored) for tg in node.tags))
    stored, _ = _stored_ids(y)
    assert n_tagged == len(stored)
    xv = np.linspace(-1, 1, 30)
    np.testing.assert_allclose(pt.generate_numpy(tagged)(x=xv),
                               pt.generate_numpy(y)(x=xv))


def _topo(result):
    from pytato_like._traversal import topological_order
    return topological_order([result])


def test_explanation_table_lists_decisions():
    x = pt.make_placeholder("x", (30,), np.float64)
    t = pt.exp(x)
    y = pt.roll(t, 1) * pt.roll(t, 2) * t
    text = explain_materialization(y)
    assert "decision" in text.splitlines()[0]
    assert "output" in text and "stored" in text


def test_materialize_deep_chain_at_default_recursion_limit(deep_chain):
    assert sys.getrecursionlimit() <= 1000 + 100  # the default, not raised
    _, y = deep_chain
    tagged = materialize_with_cost_model(y)
    assert tagged.shape == y.shape
    costs = decide_storage([y])
    n_stored = sum(c.stored and c.reason != "input" for c in costs.values())
    assert 1000 < n_stored < DEPTH // 5


def test_deep_chain_compiles_and_runs(queue, deep_chain):
    from pytato_like.target.loopy import generate_loopy
    x, y = deep_chain
    prg = generate_loopy(y)
    # long programs are cut into chunks of identical structure: few
    # distinct kernels, many launches
    assert len(prg.plan.kernels) <= 4
    assert len(prg.plan.launches) > 10
    xv = np.linspace(0, 1, 64)
    _, (out,) = prg(queue, x=xv)
    ref = xv.copy()
    for _ in range(DEPTH):
        ref = 0.5 * ref + 1.0
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_no_exponential_recomputation(queue):
    from pytato_like.target.loopy import generate_loopy
    x = pt.make_placeholder("x", (100,), np.float64)
    y = x
    for _ in range(60):  # each level uses the previous one three times
        y = y * y * 0.25 + y * 0.5
    prg = generate_loopy(y)
    assert prg.plan.n_instructions <= 61
    xv = np.linspace(0, 0.5, 100)
    _, (out,) = prg(queue, x=xv)
    ref = xv.copy()
    for _ in range(60):
        ref = ref * ref * 0.25 + ref * 0.5
    np.testing.assert_allclose(out, ref, rtol=1e-12)
