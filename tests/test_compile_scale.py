"""Compiling at application scale (issue 39): many inputs, long chains,
many pieces.

- kernels are bounded in size (expression nodes, arrays read;
  :class:`~pytato_like.target.loopy.chunks.KernelBudget`): a sum of many
  inputs and a long elementwise chain are a few distinct kernels launched
  several times, equal to NumPy;
- many host inputs are uploaded by one copy
  (:class:`~pytato_like.target.loopy.device.PackedUpload`), also on
  replayed calls with new values, booleans and inputs passed through;
- the passes are iterative: expression sizes of 100 000-deep scalar
  expressions, the budget over 100 000 instructions;
- a concatenation of many pieces lowers to a balanced tree of selects
  (no recursion as deep as the pieces), whose pieces the cost model does
  not take for broadcasts; runs of look-alike slices are one expression
  of the piece number (:mod:`~pytato_like.transform.piece_runs`).
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pymbolic.primitives as prim
import pytest

import pytato_like as pt
from pytato_like.scalar_expr import expression_children, expression_size
from pytato_like.target.loopy import chunks as chunks_module
from pytato_like.target.loopy.options import CodegenOptions

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def _sum_of_inputs(count, n=50, dtype=np.float64):
    xs = [pt.make_placeholder(f"x{k}", (n,), dtype) for k in range(count)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


def _host_inputs(count, n=50, seed=0):
    rng = np.random.default_rng(seed)
    return {f"x{k}": rng.standard_normal(n) for k in range(count)}


def _kernel_arguments(source: str) -> list[int]:
    """The number of arguments of each kernel of an OpenCL text."""
    return [match.group(1).count(",") + 1
            for match in re.finditer(r"__kernel [^{]*?\w+\s*\(([^()]*)\)\s*\{",
                                     source)]


def test_sum_of_many_inputs_is_few_kernels_of_bounded_arguments(queue):
    count = 300
    prg = pt.generate_loopy(_sum_of_inputs(count))
    # one kernel per chunk structure, not one kernel with 300 arguments
    assert prg.stats.n_kernels <= 3
    max_reads = CodegenOptions.from_environment().max_kernel_reads
    assert prg.stats.n_launches >= count // max_reads
    assert max(_kernel_arguments(prg.source)) <= max_reads + 4
    data = _host_inputs(count)
    _, (out,) = prg(queue, **data)
    np.testing.assert_allclose(out, sum(data[f"x{k}"] for k in range(count)),
                               rtol=1e-12)


def test_long_elementwise_chain_is_one_kernel_launched_many_times(queue):
    depth = 3000
    x = pt.make_placeholder("x", (64,), np.float64)
    y = x
    for _ in range(depth):
        y = 0.5 * y + 1.0
    prg = pt.generate_loopy(y, options={"time_tile": 0})
    # kernels of at most max_kernel_operations nodes: several launches,
    # but only the first, the middle and the last chunk differ
    assert prg.stats.n_launches > 1
    assert prg.stats.n_kernels <= 3
    xv = np.random.default_rng(1).random(64)
    ref = xv.copy()
    for _ in range(depth):
        ref = 0.5 * ref + 1.0
    _, (out,) = prg(queue, x=xv)
    np.testing.assert_allclose(out, ref, rtol=1e-13)


def test_packed_upload_of_many_inputs_replayed_with_new_values(queue):
    count = 40
    prg = pt.generate_loopy(_sum_of_inputs(count))
    for seed in range(3):   # the first call records, the next replay
        data = _host_inputs(count, seed=seed)
        _, (out,) = prg(queue, **data)
        np.testing.assert_allclose(out, sum(data[f"x{k}"] for k in range(count)),
                                   rtol=1e-12)


def test_packed_upload_mixes_host_device_and_boolean_inputs(queue):
    import pyopencl.array as cla
    xs = [pt.make_placeholder(f"x{k}", (7,), np.float32) for k in range(5)]
    mask = pt.make_placeholder("m", (7,), np.bool_)
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    y = pt.where(mask, total, -total)
    rng = np.random.default_rng(2)
    data = {f"x{k}": rng.random(7).astype(np.float32) for k in range(5)}
    data["m"] = rng.random(7) > 0.5
    ref = sum(data[f"x{k}"] for k in range(5))
    ref = np.where(data["m"], ref, -ref)
    prg = pt.generate_loopy(y)
    for _ in range(2):
        _, (out,) = prg(queue, **data)
        np.testing.assert_allclose(out, ref, rtol=1e-6)
    mixed = dict(data, x3=cla.to_device(queue, data["x3"]))
    _, (out,) = prg(queue, **mixed)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-6)


def test_inputs_passed_through_keep_their_values(queue):
    xs = [pt.make_placeholder(f"x{k}", (9,), np.float64) for k in range(6)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    prg = pt.generate_loopy({"sum": total, "x2": xs[2]})
    results = []
    for seed in range(3):
        data = {f"x{k}": np.random.default_rng(seed).random(9) + k
                for k in range(6)}
        _, out = prg(queue, out_host=False, **data)
        results.append((data, out))
    # every call's results are its own (no buffer shared between calls)
    for data, out in results:
        np.testing.assert_array_equal(out["x2"].get(), data["x2"])
        np.testing.assert_allclose(out["sum"].get(),
                                   sum(data[f"x{k}"] for k in range(6)),
                                   rtol=1e-12)


def test_expression_size_of_a_deep_expression_needs_no_recursion():
    assert sys.getrecursionlimit() <= 10_000
    depth = 100_000
    expr: object = prim.Variable("x")
    for _ in range(depth):
        expr = prim.Sum((expr, 1))
    # per level: the sum, its tuple of children and the constant; the
    # variable and its name at the bottom
    assert expression_size(expr) == 3 * depth + 2
    assert expression_size(expr, limit=50) == 51


def _size_by_children(expr, limit=None):
    # the definition: every node of the tree expression_children spans
    count, stack = 0, [expr]
    while stack:
        node = stack.pop()
        count += 1
        if limit is not None and count > limit:
            break
        stack.extend(expression_children(node))
    return count


def test_expression_size_counts_what_expression_children_spans():
    from pymbolic.primitives import Comparison, If, LogicalNot

    from pytato_like.scalar_expr import Reduce, TypeCast, make_reduce
    x, y = prim.Variable("x"), prim.Variable("_0")
    exprs = [
        x, 3, 2.5, 1j, np.float32(2), True, "s",
        x[y + 1] * 2 - x[(y, 0)],
        If(Comparison(y, "<", 4), x[y], np.float64(0.5)),
        LogicalNot(Comparison(x, "==", 1)),
        make_reduce(x[prim.Variable("_r0")], "sum", {"_r0": (0, 10)}),
        TypeCast(np.dtype(np.float32), x + 1),
        prim.Call(prim.Variable("sin"), (x ** 2,)),
        (x, (y, 3)), [x, 1],
    ]
    assert any(isinstance(e, Reduce) for e in exprs)
    for expr in exprs:
        for limit in (None, 0, 1, 2, 5, 12):
            assert expression_size(expr, limit) == \
                _size_by_children(expr, limit), (expr, limit)


def test_budget_over_100_000_instructions_needs_no_recursion():
    from pytato_like.target.loopy.instructions import Instruction
    assert sys.getrecursionlimit() <= 10_000
    depth = 100_000
    insns = []
    previous = None
    for k in range(depth):
        node = pt.make_placeholder(f"s{k}", (3,), np.float64)
        refs = [] if previous is None else [(id(previous), (prim.Variable("_pt_c0"),))]
        insn = Instruction(node, [f"t{k}"], prim.Sum((prim.Variable("x"), 1)),
                           ("_pt_c0",), (3,), refs, [], set())
        insns.append(insn)
        previous = node
    insn_of = {id(i.node): i for i in insns}
    chunks_module.assign_chunks(insns, insn_of, max_insns=10**9, max_ops=40,
                                max_args=10**9)
    # each expression has 5 nodes (the sum, its tuple, the variable, its
    # name and 1): eight instructions per kernel of at most 40 nodes
    assert expression_size(insns[0].expr) == 5
    per_chunk = 8
    assert insns[-1].chunk == -(-depth // per_chunk) - 1


def _select_depth(expr) -> int:
    """The nesting depth of selects in *expr* (an explicit stack)."""
    deepest = 0
    stack = [(expr, 0)]
    while stack:
        e, depth = stack.pop()
        if isinstance(e, prim.If):
            depth += 1
            deepest = max(deepest, depth)
        stack.extend((child, depth) for child in expression_children(e))
    return deepest


def test_many_piece_concatenation_lowers_to_a_balanced_select():
    from pytato_like.transform.lower_to_index_lambda import to_index_lambda
    count = 5000
    # pieces of two alternating widths: no run of look-alike pieces
    widths = [1 + k % 2 for k in range(count)]
    xs = [pt.make_placeholder(f"x{k}", (w,), np.float64)
          for k, w in enumerate(widths)]
    lam = to_index_lambda(pt.concatenate(xs))
    hash(lam)   # no recursion as deep as the pieces
    assert _select_depth(lam.expr) == 13    # ceil(log2(5000))
    rng = np.random.default_rng(5)
    values = {f"x{k}": rng.random(w) for k, w in enumerate(widths)}
    out = pt.generate_numpy(lam)(**values)
    np.testing.assert_array_equal(out, np.concatenate(list(values.values())))


def test_many_look_alike_slices_lower_to_one_expression():
    from pytato_like.transform.lower_to_index_lambda import to_index_lambda
    count = 5000
    x = pt.make_placeholder("x", (2 * count,), np.float64)
    pieces = [x[2 * k:2 * k + 2] for k in reversed(range(count))]
    lam = to_index_lambda(pt.concatenate(pieces))
    # one run (slices 4999 .. 1) and the offset-free slice x[0:2]
    assert _select_depth(lam.expr) == 1
    assert expression_size(lam.expr) < 50    # not 5000 pieces
    xv = np.arange(2 * count, dtype=np.float64)
    out = pt.generate_numpy(lam)(x=xv)
    np.testing.assert_array_equal(
        out, np.concatenate([xv[2 * k:2 * k + 2] for k in reversed(range(count))]))


def test_many_piece_concatenation_and_stack_on_the_device(queue):
    count = 60
    x = pt.make_placeholder("x", (3 * count,), np.float64)
    pieces = [(k + 1) * x[3 * k:3 * k + 3] for k in reversed(range(count))]
    cat = pt.concatenate(pieces)
    stacked = pt.stack(pieces)
    prg = pt.generate_loopy({"cat": cat, "stacked": stacked})
    xv = np.random.default_rng(3).random(3 * count)
    ref = [(k + 1) * xv[3 * k:3 * k + 3] for k in reversed(range(count))]
    _, out = prg(queue, x=xv)
    np.testing.assert_allclose(out["cat"], np.concatenate(ref), rtol=1e-15)
    np.testing.assert_allclose(out["stacked"], np.stack(ref), rtol=1e-15)


def test_concatenation_pieces_are_not_counted_as_broadcast_reuse():
    from pytato_like.transform.materialize_cost import decide_storage
    x = pt.make_placeholder("x", (120,), np.float64)
    pieces = [2.0 * x[10 * k:10 * k + 10] for k in range(12)]
    cat = pt.concatenate(pieces)
    costs = decide_storage([cat])
    # each piece is read once per element of its own range: inlined
    assert not any(costs[id(p)].stored for p in pieces)
    assert all(costs[id(p)].uses == 1 for p in pieces)


def test_steps_of_a_time_loop_replay_one_chunk_spec(queue, monkeypatch):
    """The steps of a stencil are chunks equal up to program names: the
    part of their spec after the instructions is made once and replayed
    with each step's own buffers (results as NumPy)."""
    from pytato_like.target.loopy.chunk_spec import ChunkSpecBuilder
    finished = []
    original = ChunkSpecBuilder._finish

    def counting(self, *args, **kwargs):
        finished.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ChunkSpecBuilder, "_finish", counting)
    steps, n, c = 200, 300, 0.1
    u = pt.make_placeholder("u", (n,), np.float64)
    v = u
    for _ in range(steps):
        v = v + c * (pt.roll(v, 1) - 2 * v + pt.roll(v, -1))
    prg = pt.generate_loopy(v, options={"time_tile": 0})
    # (small steps are merged a few to a kernel: still tens of chunks)
    assert prg.stats.n_launches > 20
    assert len(finished) <= 3, len(finished)
    uv = np.random.default_rng(7).standard_normal(n)
    ref = uv.copy()
    for _ in range(steps):
        ref = ref + c * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))
    _, (out,) = prg(queue, u=uv)
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
