"""Offsets as kernel arguments (target/loopy/chunk_spec.py,
``_OffsetsAsSizes``): chunks that differ only in the offsets added in
their indices and conditions -- and in their one-dimensional extents --
are one kernel, each launch bound to its own values; checked against
NumPy, and against the kernel names (named after their structure)."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy.codegen import build_plan

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def _kernel_names(prg_or_plan):
    plan = getattr(prg_or_plan, "plan", prg_or_plan)
    return {re.search(r"void .*?(_pt_kernel_\w+)\(", k.device_code).group(1)
            for k in plan.kernels}


def _run(queue, outputs, inputs):
    prg = pt.generate_loopy(outputs)
    _, out = prg(queue, **{k: cla.to_device(queue, v)
                           for k, v in inputs.items()})
    return prg, {k: v.get() for k, v in out.items()}


@pytest.mark.parametrize("width", [1, 2, 13])
def test_slices_at_other_offsets_share_a_kernel(queue, width):
    rng = np.random.default_rng(width)
    xv = rng.standard_normal(200)
    names = []
    for start in (5, 17, 150):
        x = pt.make_placeholder("x", (200,), np.float64)
        prg, got = _run(queue, {"y": x[start:start + width] * 3.0 + 1.0},
                        {"x": xv})
        np.testing.assert_array_equal(got["y"],
                                      xv[start:start + width] * 3.0 + 1.0)
        names.append(_kernel_names(prg))
    assert names[0] == names[1] == names[2] and len(names[0]) == 1


def test_strips_of_a_shrinking_step_share_a_kernel(queue):
    # a strip of the field and a ghost cell after it, read one cell to the
    # right: the ghost starts where the strip ends, at another offset for
    # each width
    rng = np.random.default_rng(0)
    names = []
    for width in (13, 12, 11):
        s = pt.make_placeholder("s", (width,), np.float64)
        g = pt.make_placeholder("g", (1,), np.float64)
        ext = pt.concatenate([s, g])
        sv, gv = rng.standard_normal(width), rng.standard_normal(1)
        prg, got = _run(queue, {"y": ext[1:] - 2.0 * ext[:-1]},
                        {"s": sv, "g": gv})
        ev = np.concatenate([sv, gv])
        np.testing.assert_array_equal(got["y"], ev[1:] - 2.0 * ev[:-1])
        names.append(_kernel_names(prg))
    assert names[0] == names[1] == names[2]


def test_strides_and_wrapped_offsets_stay_literal():
    x = pt.make_placeholder("x", (300,), np.float64)
    text = "\n".join(k.device_code for k in build_plan(
        {"a": x[3:203:2] + 1.0, "b": pt.roll(x, 7) * 2.0})[0].kernels)
    # the slice's stride, and the roll's wrap-around (300 - 7 = 293)
    assert re.search(r"\b2 \* _pt_g0_0", text)
    assert "+ 293" in text


def test_a_deep_split_partition_shares_its_strip_kernels():
    from pytato_like.distributed import (
        find_distributed_partition,
        generate_code_for_partition,
        make_distributed_recv,
        number_distributed_tags,
        staple_distributed_send,
    )
    n, steps = 40_000, 6
    u = pt.make_placeholder("u", (n,))
    for k in range(steps):
        u = staple_distributed_send(u[:1], 0, ("l", k), u)
        u = staple_distributed_send(u[-1:], 0, ("r", k), u)
        ext = pt.concatenate([make_distributed_recv(0, ("r", k), (1,)), u,
                              make_distributed_recv(0, ("l", k), (1,))])
        u = u + 0.25 * (ext[:-2] - 2 * u + ext[2:])
    partition = find_distributed_partition(None, {"u": u})
    partition, _ = number_distributed_tags(None, partition, 3)
    prgs = generate_code_for_partition(partition, target="loopy",
                                       lazy=False)
    # the parts of the steps that receive and send: one kernel each, its
    # strips and the copies of the cells sent (two small loop groups, one
    # kernel: chunks.merge_small_chunks)
    strip_parts = [frozenset(_kernel_names(prg)) for pid, prg in prgs.items()
                   if partition.parts[pid].name_to_send_nodes
                   and partition.parts[pid].name_to_recv_node]
    assert len(strip_parts) == steps - 1
    assert all(len(names) == 1 for names in strip_parts)
    # one kernel from the second sending step on (the first reads the
    # input field)
    assert collections.Counter(strip_parts).most_common(1)[0][1] == steps - 2


def test_which_constants_become_arguments():
    # the rule on expressions: offsets of magnitude 2 to 2^31 - 1 added in
    # indices and conditions; coefficients, 0 and +-1, larger constants and
    # values outside indices and conditions stay literal
    import pymbolic.primitives as prim

    from pytato_like.target.loopy.chunk_spec import (
        ChunkScope,
        _OffsetsAsSizes,
    )
    from pytato_like.target.loopy.naming import ProgramNames
    from types import SimpleNamespace
    names = ProgramNames(SimpleNamespace(size_params={}, placeholders={},
                                         data_wrappers=[]))
    scope = ChunkScope(names, canonical=True)
    i, a = prim.Variable("i"), prim.Variable("a")
    mapper = _OffsetsAsSizes(scope)
    expr = prim.If(prim.Comparison(i, "<", 11),
                   a[i + 11] + a[2 * i - 7] + a[i + 1] + 5,
                   a[i + 2**40])
    got = mapper(expr)
    sizes = {v: prim.Variable(scope.local(n, "s"))
             for n, v in scope.const_sizes.items()}
    assert set(sizes) == {11, 7}
    want = prim.If(prim.Comparison(i, "<", sizes[11]),
                   a[i + sizes[11]] + a[2 * i - sizes[7]] + a[i + 1] + 5,
                   a[i + 2**40])
    assert str(got) == str(want)
