"""Small chunks merged into one kernel of sequential loops
(target/loopy/chunks.py, ``merge_small_chunks``): the same values as
NumPy and as the unmerged program, one launch where there were several,
data written by one loop and read by a later one at other indices (no
barrier in one work-item), concatenations written piece by piece and read
afterwards, the option and its errors, and the pass on a chain of 100 000
chunks without recursion."""

from __future__ import annotations

import numpy as np
import pytest
from _kernel_source import kernels

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy import chunks as chunks_module
from pytato_like.tags import ImplStored

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def _boundary_step(n):
    """A boundary part as the distributed partitioner makes them: a strip
    of a stencil step (one loop group), then the cells sent (another)."""
    u = pt.make_placeholder("u", (n + 2,), np.float64)
    g = pt.make_placeholder("g", (1,), np.float64)
    strip = (u[1:-1] + 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
             + pt.concatenate([g, pt.zeros(n - 1)])).tagged(ImplStored())
    return {"strip": strip, "first": strip[:1], "last": 3 * strip[-2:]}


def _run(prg, queue, **inputs):
    _, out = prg(queue, **inputs)
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("n", [3, 7, 300])
def test_a_strip_and_its_sent_cells_are_one_launch(queue, n):
    outputs = _boundary_step(n)
    rng = np.random.default_rng(n)
    inputs = {"u": rng.random(n + 2), "g": rng.random(1)}
    merged = pt.generate_loopy(outputs)
    apart = pt.generate_loopy(outputs, options={"small_chunk_elements": 0})
    assert len(merged.plan.launches) == 1
    assert len(apart.plan.launches) > 1
    # one work-item runs the loops one after the other
    (kernel,) = kernels(merged.get_source())
    assert "get_group_id" not in kernel and "get_local_id" not in kernel
    want = pt.generate_numpy(outputs)(**inputs)
    got, got_apart = _run(merged, queue, **inputs), _run(apart, queue, **inputs)
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name])
        np.testing.assert_array_equal(got[name], got_apart[name])


def test_a_small_concatenation_and_its_shifted_reader_in_one_kernel(queue):
    # (a small concatenation is one instruction with selects; its reader
    # reads it at shifted indices, a loop of its own after it)
    a = pt.make_placeholder("a", (30,), np.float64)
    b = pt.make_placeholder("b", (40,), np.float64)
    cat = pt.concatenate([2 * a, b - 1]).tagged(ImplStored())
    out = cat[1:] * cat[:-1]
    prg = pt.generate_loopy({"o": out, "c": cat},
                            options={"small_chunk_elements": 1024})
    rng = np.random.default_rng(3)
    inputs = {"a": rng.random(30), "b": rng.random(40)}
    got = _run(prg, queue, **inputs)
    ref = np.concatenate([2 * inputs["a"], inputs["b"] - 1])
    np.testing.assert_array_equal(got["c"], ref)
    np.testing.assert_array_equal(got["o"], ref[1:] * ref[:-1])
    assert len(prg.plan.launches) == 1


def test_pieces_of_a_concatenation_then_a_reader(queue, monkeypatch):
    # a concatenation written piece by piece (each piece a loop of its
    # own), read at shifted indices by the next loop: every piece is
    # written before the reader's loop starts. (With the time tiles, the
    # pieces are the first stage of the reader's kernel instead; a piece
    # length nothing else in the kernel has is a size argument of its
    # own there -- its loop's domain once named a parameter the kernel
    # did not have.)
    monkeypatch.setenv("PYTATO_LIKE_PIECES_MIN_SIZE", "8")
    a = pt.make_placeholder("a", (30,), np.float64)
    b = pt.make_placeholder("b", (40,), np.float64)
    cat = pt.concatenate([2 * a, b - 1, a[:5]]).tagged(ImplStored())
    out = cat[2:] - cat[:-2]
    rng = np.random.default_rng(4)
    inputs = {"a": rng.random(30), "b": rng.random(40)}
    # (without the time tiles, which would compute the pieces in the
    # reader's kernel themselves)
    merged = pt.generate_loopy({"o": out}, options={"time_tile": 0})
    apart = pt.generate_loopy({"o": out}, options={"small_chunk_elements": 0,
                                                   "time_tile": 0})
    tiled = pt.generate_loopy({"o": out})
    assert len(merged.plan.launches) == 1 < len(apart.plan.launches)
    assert len(tiled.plan.launches) == 1
    ref = np.concatenate([2 * inputs["a"], inputs["b"] - 1, inputs["a"][:5]])
    for prg in (merged, apart, tiled):
        np.testing.assert_array_equal(_run(prg, queue, **inputs)["o"],
                                      ref[2:] - ref[:-2])


def test_chunks_beyond_the_limit_stay_apart(queue):
    u = pt.make_placeholder("u", (3000,), np.float64)
    step = (u[1:-1] * 2).tagged(ImplStored())
    out = step[1:] + step[:-1]
    prg = pt.generate_loopy({"o": out}, options={"small_chunk_elements": 1024,
                                                 "time_tile": 0})
    assert len(prg.plan.launches) == 2
    prg = pt.generate_loopy({"o": out}, options={"small_chunk_elements": 10_000,
                                                 "time_tile": 0})
    assert len(prg.plan.launches) == 1
    uv = np.random.default_rng(5).random(3000)
    s = uv[1:-1] * 2
    np.testing.assert_array_equal(_run(prg, queue, u=uv)["o"], s[1:] + s[:-1])


def test_reductions_are_not_merged(queue):
    u = pt.make_placeholder("u", (50,), np.float64)
    total = pt.sum(u * 2)
    out = u[:3] + total
    prg = pt.generate_loopy({"o": out, "t": total})
    uv = np.random.default_rng(6).random(50)
    got = _run(prg, queue, u=uv)
    np.testing.assert_allclose(got["t"], (uv * 2).sum(), rtol=1e-14)
    np.testing.assert_allclose(got["o"], uv[:3] + (uv * 2).sum(), rtol=1e-14)
    assert len(prg.plan.launches) >= 2


@pytest.mark.parametrize("bad", [-1, 2.5, "64", True])
def test_the_option_must_be_a_non_negative_int(bad):
    with pytest.raises(ConfigurationError, match="small_chunk_elements"):
        pt.generate_loopy(_boundary_step(5),
                          options={"small_chunk_elements": bad})


def test_pass_on_100_000_chunks_needs_no_recursion():
    import sys

    import pymbolic.primitives as prim

    from pytato_like.target.loopy.instructions import Instruction
    assert sys.getrecursionlimit() <= 10_000
    depth = 100_000
    insns = []
    for k in range(depth):
        node = pt.make_placeholder(f"s{k}", (3,), np.float64)
        insn = Instruction(node, [f"t{k}"], prim.Variable("x"), ("_pt_c0",),
                           (3,), [], [], set())
        insn.level = insn.chunk = k
        insns.append(insn)
    merged = chunks_module.merge_small_chunks(insns, max_insns=128,
                                              max_elements=30)
    # ten chunks of 3 elements per kernel
    assert merged == depth - depth // 10
    assert insns[-1].chunk == depth // 10 - 1
    assert all(i.sequential for i in insns)
