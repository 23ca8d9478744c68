"""materialize_with_mpms's one-pass retagging against references.

The pass chooses the nodes to store from one walk and rebuilds the DAG in
the same walk's order. Checked here against two independent references:

* the rule written out with explicit predecessor sets (:func:`reference_choice`,
  quadratic, small DAGs only) for which nodes are chosen;
* a plain :class:`~pytato_like.transform.CopyMapper` that adds the tag to the
  chosen nodes (:class:`CopyTagger`, how the pass rebuilt the DAG before) for
  the rebuilt DAG, node by node, including where the pass hands over to the
  copy mapper (function calls, symbolic shapes);

and the rewritten programs' values against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like._traversal import topological_order
from pytato_like.array import children_of
from pytato_like.tags import ImplStored
from pytato_like.testing import make_random_dag
from pytato_like.transform._graph import data_operands


def reference_choice(roots, output_uses):
    """Ids of the nodes the MPMS rule stores, from explicit predecessor
    sets and successor counts (the module documentation's definition)."""
    order = topological_order(roots, data_operands)
    nsucc = dict(output_uses)
    for node in order:
        for op in data_operands(node):
            nsucc[id(op)] = nsucc.get(id(op), 0) + 1
    materialized, preds, chosen = set(), {}, set()
    for node in order:
        if (isinstance(node, pt.InputArgumentBase)
                or isinstance(node, pt.DistributedRecv)):
            materialized.add(id(node))
            continue
        p = set()
        for op in data_operands(node):
            p |= {id(op)} if id(op) in materialized else preds.get(id(op), set())
        preds[id(node)] = p
        if node.tags_of_type(pt.tags.ImplementationStrategy):
            if ImplStored() in node.tags:
                materialized.add(id(node))
            continue
        if len(p) > 1 and nsucc.get(id(node), 0) > 1:
            chosen.add(id(node))
            materialized.add(id(node))
    return chosen


class CopyTagger(tr.CopyMapper):
    """A copy of the DAG with ImplStored added to the nodes given by id."""

    def __init__(self, ids):
        super().__init__()
        self.ids = ids

    def clone_for_callee(self, function):
        return type(self)(self.ids)

    def _map_default(self, expr):
        if id(expr) in self.ids:
            return tr.copy.rebuild_with(expr, self.rec,
                                        tags=expr.tags | {ImplStored()})
        return super()._map_default(expr)


def roots_and_uses(result):
    roots = list(result._data.values())
    uses = {}
    for r in roots:
        uses[id(r)] = uses.get(id(r), 0) + 1
    return roots, uses


def assert_same_dag(got, want):
    """Same structure, same tags, and sharing exactly where *want* shares:
    two positions hold one object in *got* iff they do in *want*."""
    assert got == want
    pairs = {}
    stack = [(got, want)]
    while stack:
        g, w = stack.pop()
        if id(w) in pairs:
            assert pairs[id(w)] is g
            continue
        pairs[id(w)] = g
        assert type(g) is type(w) and g.tags == w.tags
        gk = (children_of(g) if isinstance(g, pt.Array)
              else tuple(g._data.values()))
        wk = (children_of(w) if isinstance(w, pt.Array)
              else tuple(w._data.values()))
        stack.extend(zip(gk, wk, strict=True))
    assert len({id(g) for g in pairs.values()}) == len(pairs)


def check_against_references(result):
    roots, uses = roots_and_uses(result)
    chosen = reference_choice(roots, uses)
    got = pt.materialize_with_mpms(result)
    want = CopyTagger(chosen)(result) if chosen else result
    assert_same_dag(got, want)
    if not chosen:
        assert got is result
    return got, chosen


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_match_the_references_and_numpy(seed):
    dag = make_random_dag(seed, n_ops=16, n_inputs=3, max_outputs=3)
    got, _ = check_against_references(dag.result)
    if dag.expected_error is None:
        dag.check(pt.generate_numpy(got)(**dag.inputs))


def ladder(depth, width=3, shape=(5,)):
    """Each level combines neighbours, so every node has two users."""
    arrays = [pt.make_placeholder(f"x{k}", shape) for k in range(width)]
    for level in range(depth):
        arrays = [arrays[k] * (level % 3 + 1) + arrays[(k + 1) % width]
                  if k % 2 else arrays[k] - arrays[(k + 1) % width]
                  for k in range(width)]
    return pt.make_dict_of_named_arrays(
        {f"o{k}": a for k, a in enumerate(arrays)})


def ladder_numpy(depth, values, width=3):
    arrays = list(values)
    for level in range(depth):
        arrays = [arrays[k] * (level % 3 + 1) + arrays[(k + 1) % width]
                  if k % 2 else arrays[k] - arrays[(k + 1) % width]
                  for k in range(width)]
    return arrays


def test_bench_dag_matches_the_copy_mapper_choice():
    # the benchmark's DAG (bench_transform.build): every inner node stored
    from bench.bench_transform import WIDTH, build

    result = build(50)
    got, chosen = check_against_references(result)
    assert len(chosen) == WIDTH * 49
    values = {f"a{k}": np.arange(8.0) + k for k in range(WIDTH)}
    arrays = [values[f"a{k}"] for k in range(WIDTH)]
    for _ in range(50):
        arrays = [arrays[k] + arrays[(k + 1) % WIDTH] for k in range(WIDTH)]
    out = pt.generate_numpy(got)(**values)
    for k in range(WIDTH):
        np.testing.assert_array_equal(out[f"o{k}"], arrays[k])


def test_user_tags_shared_outputs_and_an_array_root():
    from pytato_like.tags import ImplInlined

    x = pt.make_placeholder("x", (4,))
    y = pt.make_placeholder("y", (4,))
    inlined = (x + y).tagged(ImplInlined())
    kept = (x * y).tagged(ImplStored())
    t = inlined * kept + x
    u = t * 2
    # t is two results' value and one operand (stored: its predecessors
    # are x and the stored x*y); u, twice a result, reads t alone
    result = pt.make_dict_of_named_arrays({"t": t, "t2": t, "u": u, "u2": u})
    got, chosen = check_against_references(result)
    assert chosen == {id(t)}
    xv, yv = np.arange(4.0), np.arange(4.0) + 3
    out = pt.generate_numpy(got)(x=xv, y=yv)
    np.testing.assert_allclose(out["u"], ((xv + yv) * (xv * yv) + xv) * 2)
    # an array alone is one result: nothing has two users here
    single = (x + y) * 2
    assert pt.materialize_with_mpms(single) is single
    # with two users below it, the Array root comes back retagged below
    s = x + y
    root = s * s
    new = pt.materialize_with_mpms(root)
    want = CopyTagger(reference_choice([root], {id(root): 1}))(root)
    assert_same_dag(new, want)


def test_calls_and_symbolic_shapes_take_the_copy_mapper_path():
    # a function call's results are NamedArrays of the call
    def f(a, b):
        return a + b

    x = pt.make_placeholder("x", (3,))
    y = pt.make_placeholder("y", (3,))
    s = pt.trace_call(f, x * 2, y)
    z = s * x
    result = pt.make_dict_of_named_arrays({"a": z + 1, "b": z - 1})
    got, chosen = check_against_references(result)
    assert id(z) in chosen
    xv, yv = np.arange(3.0), np.arange(3.0) + 1
    out = pt.generate_numpy(got)(x=xv, y=yv)
    np.testing.assert_allclose(out["a"], (2 * xv + yv) * xv + 1)

    # a symbolic extent
    n = pt.make_size_param("n")
    p = pt.make_placeholder("p", (n,))
    q = pt.make_placeholder("q", (n,))
    w = p * q
    check_against_references(pt.make_dict_of_named_arrays(
        {"a": w + 1, "b": w * 2}))


def test_deep_ladder_at_the_default_recursion_limit():
    # 100 000 levels of two nodes each; every node below the outputs has two
    # users and two stored (or input) predecessors
    depth = 100_000
    a = pt.make_placeholder("a", (2,))
    b = pt.make_placeholder("b", (2,))
    for _ in range(depth):
        a, b = a + b, a - b
    result = pt.make_dict_of_named_arrays({"a": a, "b": b})
    got = pt.materialize_with_mpms(result)
    stored = [n for n in topological_order(list(got._data.values()))
              if n.tags_of_type(ImplStored)]
    assert len(stored) == 2 * (depth - 1)
    assert not got._data["a"].tags and not got._data["b"].tags
