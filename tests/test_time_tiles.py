"""Consecutive stencil steps fused into one tiled kernel
(target/loopy/time_tiles.py): the same values as NumPy at sizes around
the tile, with ghost cells, several fields and dtypes, skip connections
and intermediate outputs; the kernels have the shape the speed depends on
(one launch per run, intermediate steps in private scratch arrays, two
per field for a chain); and the pass needs no recursion on deep chains."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from _kernel_source import kernels
from hypothesis import given, settings
from hypothesis import strategies as st

import pytato_like as pt
from pytato_like.target.loopy import time_tiles
from pytato_like.target.loopy.codegen import BufferSpec
from pytato_like.target.loopy.instructions import Instruction
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.rolled_stages import MIN_ROLLED_STAGES

cl = pytest.importorskip("pyopencl")

TILE = CodegenOptions.from_environment().time_tile
STAGES = CodegenOptions.from_environment().time_tile_stages


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def heat_step(u):
    return u[1:-1] + 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])


def heat_steps_numpy(u, steps):
    for _ in range(steps):
        u = u[1:-1] + 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
    return u


def chain(n, steps, fields=1, dtype=np.float64):
    inputs = [pt.make_placeholder(f"u{f}", (n + 2 * steps,), dtype)
              for f in range(fields)]
    outputs = {}
    for f, u in enumerate(inputs):
        for _ in range(steps):
            u = heat_step(u)
        outputs[f"o{f}"] = u
    return outputs


@pytest.mark.parametrize("n", [1, 5, TILE - 1, TILE, TILE + 1, 3 * TILE + 7])
@pytest.mark.parametrize("steps", [2, 8])
def test_chain_matches_numpy_around_the_tile(queue, n, steps):
    prg = pt.generate_loopy(chain(n, steps, fields=2))
    assert len(prg.plan.launches) == 1
    rng = np.random.default_rng(n + steps)
    host = {f"u{f}": rng.random(n + 2 * steps) for f in range(2)}
    _, out = prg(queue, **host)
    for f in range(2):
        np.testing.assert_allclose(out[f"o{f}"],
                                   heat_steps_numpy(host[f"u{f}"], steps),
                                   rtol=1e-14, atol=0)


def test_a_long_chain_is_cut_into_runs(queue):
    steps = STAGES + 5
    prg = pt.generate_loopy(chain(1000, steps))
    assert len(prg.plan.launches) == 2
    uv = np.random.default_rng(0).random(1000 + 2 * steps)
    _, out = prg(queue, u0=uv)
    np.testing.assert_allclose(out["o0"], heat_steps_numpy(uv, steps),
                               rtol=1e-14, atol=0)


@pytest.mark.parametrize("roll", [False, True])
def test_intermediate_steps_live_in_two_scratch_arrays_per_field(roll):
    (kernel,) = kernels(pt.generate_loopy(
        chain(10_000, 8, fields=3),
        options={"time_tile_roll": roll}).get_source())
    declared = [line for line in kernel.splitlines()
                if line.strip().startswith("double _pt_scratch")]
    # one work-item per tile, the id read once
    assert "reqd_work_group_size(1, 1, 1)" in kernel
    assert kernel.count("gid(0)") == 1
    if roll:
        # one array of two rows per field; the first and last steps, and
        # one loop over the six between (around its window loop)
        assert len(declared) == 3
        assert all("[2 * " in line for line in declared)
        assert kernel.count("for (") == 4
        assert kernel.count("for (int _pt_step = 1;") == 1
    else:
        # two arrays per field, one loop per step
        assert len(declared) == 2 * 3
        assert kernel.count("for (") == 8
    # only the inputs are read from and the outputs written to memory
    assert kernel.count("__global double const") == 3
    assert kernel.count("__global double *") == 3


def test_mixed_dtypes_and_inputs_read_inside_steps(queue):
    n = 2 * TILE + 3
    a = pt.make_placeholder("a", (n + 6,), np.float32)
    b = pt.make_placeholder("b", (n + 6,), np.int64)
    c = pt.make_placeholder("c", (n + 6,), np.float64)  # a coefficient
    ua, ub = a, b
    for k in range(3):
        ua = ua[1:-1] * 0.5 + ua[2:] * 0.25 + ua[:-2] * 0.25
        ub = ub[:-2] + 3 * ub[2:] - ub[1:-1]
        ub = ub + (ua > 0.5)  # reads another field of the same step
        # the coefficient sliced to the step's extent
        ua = ua * c[k + 1:n + 6 - k - 1].astype(np.float32)
    prg = pt.generate_loopy({"a": ua, "b": ub})
    rng = np.random.default_rng(1)
    av = rng.random(n + 6, dtype=np.float32)
    bv = rng.integers(-5, 5, n + 6)
    cv = rng.random(n + 6)
    _, out = prg(queue, a=av, b=bv, c=cv)
    ra, rb = av, bv
    for k in range(3):
        ra = ra[1:-1] * np.float32(0.5) + ra[2:] * np.float32(0.25) \
            + ra[:-2] * np.float32(0.25)
        rb = rb[:-2] + 3 * rb[2:] - rb[1:-1]
        rb = rb + (ra > 0.5)
        ra = ra * cv[k + 1:n + 6 - k - 1].astype(np.float32)
    np.testing.assert_allclose(out["a"], ra, rtol=1e-6)
    np.testing.assert_array_equal(out["b"], rb)


def test_skip_connections_widen_the_windows(queue):
    n = 3 * TILE
    u0 = pt.make_placeholder("u", (n + 12,), np.float64)
    u1 = heat_step(u0)
    u2 = heat_step(u1) + u0[2:-2]
    u3 = heat_step(u2) - u1[2:-2] * 0.5  # reads two steps back, shifted
    u4 = u3[:-3] + u3[3:] + u1[3:-4]
    prg = pt.generate_loopy(u4)
    assert len(prg.plan.launches) == 1
    uv = np.random.default_rng(2).random(n + 12)
    r1 = heat_steps_numpy(uv, 1)
    r2 = heat_steps_numpy(r1, 1) + uv[2:-2]
    r3 = heat_steps_numpy(r2, 1) - r1[2:-2] * 0.5
    r4 = r3[:-3] + r3[3:] + r1[3:-4]
    _, (out,) = prg(queue, u=uv)
    np.testing.assert_allclose(out, r4, rtol=1e-14)


def test_an_intermediate_output_ends_a_run(queue):
    n = 2000
    u0 = pt.make_placeholder("u", (n + 8,), np.float64)
    u = u0
    steps = []
    for _ in range(4):
        u = heat_step(u)
        steps.append(u)
    # the second step is also an output: written to memory, so the run
    # ends there and a second run fuses the last two steps
    prg = pt.generate_loopy({"mid": steps[1], "end": steps[3]})
    assert len(prg.plan.launches) == 2
    uv = np.random.default_rng(3).random(n + 8)
    _, out = prg(queue, u=uv)
    np.testing.assert_allclose(out["mid"], heat_steps_numpy(uv, 2), rtol=1e-14)
    np.testing.assert_allclose(out["end"], heat_steps_numpy(uv, 4), rtol=1e-14)


def test_rolls_and_other_axes_are_left_alone(queue):
    # a periodic (roll) step is written piece by piece, a 2-d step has
    # two axes: neither is fused, and both still match NumPy
    u = pt.make_placeholder("u", (5000,), np.float64)
    v = u
    for _ in range(3):
        v = v + 0.25 * (pt.roll(v, 1) - 2 * v + pt.roll(v, -1))
    x = pt.make_placeholder("x", (40, 50), np.float64)
    y = x
    for _ in range(3):
        y = y[1:-1, 1:-1] + y[2:, 2:]
    prg = pt.generate_loopy({"v": v, "y": y})
    assert "_pt_scratch" not in prg.get_source()
    rng = np.random.default_rng(4)
    uv, xv = rng.random(5000), rng.random((40, 50))
    rv, ry = uv, xv
    for _ in range(3):
        rv = rv + 0.25 * (np.roll(rv, 1) - 2 * rv + np.roll(rv, -1))
        ry = ry[1:-1, 1:-1] + ry[2:, 2:]
    _, out = prg(queue, u=uv, x=xv)
    np.testing.assert_allclose(out["v"], rv, rtol=1e-14)
    np.testing.assert_allclose(out["y"], ry, rtol=1e-14)


def test_tile_zero_turns_fusion_off():
    code = ("import sys; sys.path.insert(0, 'tests')\n"
            "from test_time_tiles import chain\n"
            "import pytato_like as pt\n"
            "print(len(pt.generate_loopy(chain(10000, 6)).plan.launches))\n")
    env = dict(os.environ, PYTATO_LIKE_TIME_TILE="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    launches = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                              capture_output=True, text=True, cwd=root,
                              timeout=300).stdout
    assert int(launches) == 6


def test_the_time_tile_option(queue):
    outputs = chain(3000, 6)
    assert len(pt.generate_loopy(outputs, options={"time_tile": 0})
               .plan.launches) == 6
    prg = pt.generate_loopy(outputs, options={"time_tile": 1024})
    (kernel,) = kernels(prg.get_source())
    assert "1024 * _pt_group_id_0" in kernel
    uv = np.random.default_rng(5).random(3012)
    _, out = prg(queue, u0=uv)
    np.testing.assert_allclose(out["o0"], heat_steps_numpy(uv, 6), rtol=1e-14)
    for bad in (-1, 2.5, "512", True):
        with pytest.raises(pt.diagnostic.ConfigurationError, match="time_tile"):
            pt.generate_loopy(outputs, options={"time_tile": bad})


# {{{ a concatenation's pieces as the first stage

def padded_chain(n, halo, steps, fields=1, stored=True, ghost_dtype=np.float64):
    """The halo-extended steps of examples/distributed_heat.py: each field
    concatenated with its ghost cells (a stored concatenation written
    piece by piece), then *steps* steps."""
    from pytato_like.tags import ImplStored
    outputs = {}
    for f in range(fields):
        u = pt.make_placeholder(f"u{f}", (n,), np.float64)
        left = pt.make_placeholder(f"l{f}", (halo,), ghost_dtype)
        right = pt.make_placeholder(f"r{f}", (halo,), ghost_dtype)
        ext = pt.concatenate([left, 2 * u, right])
        if stored:
            ext = ext.tagged(ImplStored())
        for _ in range(steps):
            ext = heat_step(ext)
        outputs[f"o{f}"] = ext
    return outputs


def padded_inputs(n, halo, fields, seed, ghost_dtype=np.float64):
    rng = np.random.default_rng(seed)
    host = {}
    for f in range(fields):
        host[f"u{f}"] = rng.random(n)
        host[f"l{f}"] = rng.random(halo).astype(ghost_dtype)
        host[f"r{f}"] = rng.random(halo).astype(ghost_dtype)
    return host


def padded_reference(host, f, steps):
    ext = np.concatenate([host[f"l{f}"], 2 * host[f"u{f}"], host[f"r{f}"]])
    return heat_steps_numpy(ext.astype(np.float64), steps)


@pytest.mark.parametrize("n", [TILE * 3 + 5, 100_000])
@pytest.mark.parametrize(("halo", "steps"), [(1, 1), (8, 8), (8, 3)])
def test_concatenation_pieces_are_the_first_stage(queue, n, halo, steps):
    prg = pt.generate_loopy(padded_chain(n, halo, steps, fields=2))
    # one launch: no kernel writing the concatenation first
    assert len(prg.plan.launches) == 1
    (kernel,) = kernels(prg.get_source())
    # the concatenation lives in scratch arrays only: the global arrays
    # are the 6 inputs and the 2 outputs
    assert kernel.count("__global double const") == 6
    assert kernel.count("__global double *") == 2
    # one loop per piece range, shared by both fields, and no conditional
    # around the copies (loopy's guards on a window-and-piece domain made
    # the pieces stage cost more than several of the steps)
    assert kernel.count("for (int _pt_w0_") == 3
    assert "if (" not in kernel
    host = padded_inputs(n, halo, 2, n + steps)
    _, out = prg(queue, **host)
    for f in range(2):
        np.testing.assert_array_equal(out[f"o{f}"], padded_reference(host, f, steps))


def test_pieces_of_another_dtype_and_an_unstored_concatenation(queue):
    n = 5000
    for stored in (True, False):
        prg = pt.generate_loopy(padded_chain(n, 4, 4, stored=stored,
                                             ghost_dtype=np.float32))
        assert len(prg.plan.launches) == 1
        host = padded_inputs(n, 4, 1, 7, ghost_dtype=np.float32)
        _, out = prg(queue, **host)
        np.testing.assert_array_equal(out["o0"], padded_reference(host, 0, 4))


def test_a_concatenation_read_elsewhere_is_written_first(queue):
    # the concatenation is also an output (and, in the second program,
    # read unshifted by a reduction): it is written to memory by its
    # pieces, and the steps read it from there
    n, halo, steps = 4000, 8, 4
    u, left, right = (pt.make_placeholder("u0", (n,), np.float64),
                      pt.make_placeholder("l0", (halo,), np.float64),
                      pt.make_placeholder("r0", (halo,), np.float64))
    host = padded_inputs(n, halo, 1, 11)
    from pytato_like.tags import ImplStored
    cat = pt.concatenate([left, 2 * u, right]).tagged(ImplStored())
    stepped = cat
    for _ in range(steps):
        stepped = heat_step(stepped)
    reference = padded_reference(host, 0, steps)
    whole = np.concatenate([host["l0"], 2 * host["u0"], host["r0"]])
    for extra in ({"cat": cat}, {"total": pt.sum(cat)}):
        prg = pt.generate_loopy({"o0": stepped, **extra})
        assert len(prg.plan.launches) > 1
        _, out = prg(queue, **host)
        np.testing.assert_array_equal(out["o0"], reference)
        if "cat" in extra:
            np.testing.assert_array_equal(out["cat"], whole)
        else:
            np.testing.assert_allclose(out["total"], whole.sum(), rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, TILE + 3), min_size=2, max_size=5),
       st.integers(1, 6), st.integers(0, 2))
def test_random_piece_layouts_match_numpy(queue, lengths, steps, store_step):
    """Concatenations of 2-5 pieces of random lengths (each piece an
    expression of its input), then a chain; sometimes a stored step."""
    from pytato_like.tags import ImplStored
    total = sum(lengths)
    if total - 2 * steps < 1:
        return
    pieces = [pt.make_placeholder(f"p{j}", (m,), np.float64)
              for j, m in enumerate(lengths)]
    rng = np.random.default_rng(total)
    host = {f"p{j}": rng.random(m) for j, m in enumerate(lengths)}
    ext = pt.concatenate([p * (j + 1) for j, p in enumerate(pieces)]
                         ).tagged(ImplStored())
    ref = np.concatenate([host[f"p{j}"] * (j + 1) for j in range(len(lengths))])
    for k in range(steps):
        ext = heat_step(ext)
        ref = heat_step(ref)
        if k == store_step:
            ext = ext.tagged(ImplStored())
    prg = pt.generate_loopy({"o": ext})
    _, out = prg(queue, **host)
    np.testing.assert_array_equal(out["o"], ref)

# }}}


# {{{ a run whose last step is a piece of the output

def _deep_output(n, steps, fields, lengths):
    """Per field: a chain of *steps* over ``u`` (its last step *n* rows)
    placed between two pieces of *lengths* rows -- an output as the
    distributed partitioner's deep split leaves it."""
    outputs = {}
    for f in range(fields):
        u = pt.make_placeholder(f"u{f}", (n + 2 * steps,), np.float64)
        left = pt.make_placeholder(f"l{f}", (lengths[0],), np.float64)
        right = pt.make_placeholder(f"r{f}", (lengths[1],), np.float64)
        for _ in range(steps):
            u = heat_step(u)
        outputs[f"o{f}"] = pt.concatenate([2 * left, u, right + 1])
    return outputs


def _deep_output_inputs(n, steps, fields, lengths, seed):
    rng = np.random.default_rng(seed)
    host = {}
    for f in range(fields):
        host[f"u{f}"] = rng.random(n + 2 * steps)
        host[f"l{f}"] = rng.random(lengths[0])
        host[f"r{f}"] = rng.random(lengths[1])
    return host


@pytest.mark.parametrize(("n", "steps", "lengths"), [
    (TILE * 3 + 5, 8, (7, 9)), (100_000, 4, (16, 3)), (5000, 1, (1, 1)),
    (TILE + 1, 2, (2, 600))])
def test_a_chain_ending_in_a_piece_writes_the_output_at_its_offset(
        queue, n, steps, lengths):
    fields = 2
    outputs = _deep_output(n, steps, fields, lengths)
    prg = pt.generate_loopy(outputs)
    tiled = [k for k in kernels(prg.get_source()) if "_pt_scratch" in k]
    host = _deep_output_inputs(n, steps, fields, lengths, n + steps)
    _, out = prg(queue, **host)
    for f in range(fields):
        want = np.concatenate([2 * host[f"l{f}"],
                               heat_steps_numpy(host[f"u{f}"], steps),
                               host[f"r{f}"] + 1])
        np.testing.assert_array_equal(out[f"o{f}"], want)
    if steps == 1:
        assert not tiled    # (one step: nothing to fuse)
        return
    # one tiled kernel reads the inputs and writes the outputs' middle
    # pieces itself: no buffer holds the chain's last step
    (kernel,) = tiled
    assert kernel.count("__global double const") == fields
    assert kernel.count("__global double *") == fields
    unfused = pt.generate_loopy(outputs, options={"time_tile": 0})
    assert len(prg.plan.launches) < len(unfused.plan.launches)
    _, out0 = unfused(queue, **host)
    for f in range(fields):
        np.testing.assert_array_equal(out[f"o{f}"], out0[f"o{f}"])


def test_a_chain_ending_in_a_range_of_a_stencil_over_pieces(queue):
    # the output reads a concatenation of halos and the chain through
    # selects: it is cut into ranges (read pieces), and the middle range
    # -- the chain's next step at an offset -- ends the chain's run
    n, steps = 3000, 5
    u = pt.make_placeholder("u", (n + 2 * steps,), np.float64)
    g = pt.make_placeholder("g", (2,), np.float64)
    x = u
    for _ in range(steps):
        x = heat_step(x)
    out = heat_step(pt.concatenate([g[:1], x, g[1:]]))
    prg = pt.generate_loopy({"o": out})
    rng = np.random.default_rng(5)
    host = {"u": rng.random(n + 2 * steps), "g": rng.random(2)}
    _, got = prg(queue, **host)
    ext = np.concatenate([host["g"][:1], heat_steps_numpy(host["u"], steps),
                          host["g"][1:]])
    np.testing.assert_array_equal(got["o"], heat_step(ext))
    (kernel,) = [k for k in kernels(prg.get_source()) if "_pt_scratch" in k]
    # it writes the output (no temporary for the last step of the chain)
    assert kernel.count("__global double *") == 1

@pytest.mark.parametrize(("n", "m", "steps"), [
    (3000, 40, 6), (TILE + 1, 5, 8), (100_000, 8, STAGES)])
def test_independent_chains_sharing_levels_are_each_one_run(queue, n, m,
                                                           steps):
    # the distributed deep split's last part: per step, the boundary
    # strips (short) and the deep rows (long) are chunks of one level,
    # independent of each other; each chain is still one run (where the
    # strips' run ends in the output, its last stage writes both pieces)
    u = pt.make_placeholder("u", (n + 2 * steps,), np.float64)
    left = pt.make_placeholder("l", (m + 2 * steps,), np.float64)
    right = pt.make_placeholder("r", (m + 2 * steps,), np.float64)
    chains = [u, left, right]
    for _ in range(steps):
        chains = [heat_step(c) for c in chains]
    deep, strip_l, strip_r = chains
    prg = pt.generate_loopy({"o": pt.concatenate([strip_l, deep, strip_r])})
    rng = np.random.default_rng(n + m)
    host = {"u": rng.random(n + 2 * steps), "l": rng.random(m + 2 * steps),
            "r": rng.random(m + 2 * steps)}
    _, got = prg(queue, **host)
    want = np.concatenate([heat_steps_numpy(host[k], steps)
                           for k in ("l", "u", "r")])
    np.testing.assert_array_equal(got["o"], want)
    # one tiled kernel per chain: no step of either in a kernel of its own
    assert len(prg.plan.launches) == 2
    tiled = [k for k in kernels(prg.get_source()) if "_pt_scratch" in k]
    assert len(tiled) == 2


# }}}


# {{{ random chains against NumPy

@st.composite
def random_chains(draw):
    """A chain of steps on one or two fields: each step of a field is a
    sum of shifted slices of the field's previous steps (up to two back)
    and maybe of the other field's step, with a random extent shrink."""
    n_fields = draw(st.integers(1, 2))
    n_steps = draw(st.integers(2, 6))
    steps = []
    for _ in range(n_steps):
        terms = draw(st.lists(st.tuples(st.integers(1, 2), st.integers(0, 3),
                                        st.floats(-2, 2, width=32)),
                              min_size=1, max_size=3))
        cross = draw(st.booleans())
        steps.append((terms, cross))
    n = draw(st.integers(1, 3 * TILE))
    return n_fields, steps, n


def _evaluate(steps, fields, slice_, cross_add):
    """The chain's outputs, on pt arrays or NumPy arrays alike."""
    history = [list(fields)]
    for terms, cross in steps:
        new = []
        for f in range(len(fields)):
            # the new step is as long as its shortest term
            lengths = []
            for back, shift, _ in terms:
                src = history[max(len(history) - back, 0)][f]
                lengths.append(src.shape[0] - shift)
            length = min(lengths)
            value = None
            for back, shift, coef in terms:
                src = history[max(len(history) - back, 0)][f]
                term = slice_(src, shift, length) * coef
                value = term if value is None else value + term
            new.append(value)
        if cross and len(new) == 2:
            new[1] = cross_add(new[1], new[0])
        history.append(new)
    return history[-1]


@settings(max_examples=25, deadline=None)
@given(random_chains())
def test_random_chains_match_numpy(queue, drawn):
    _check_chain_against_numpy(queue, *drawn)


def _check_chain_against_numpy(queue, n_fields, steps, n):
    """The chain *steps* (see :func:`_evaluate`) of *n_fields* fields of
    ``n + 3 * len(steps)`` random values: the loopy target's outputs equal
    NumPy's."""
    size = n + 3 * len(steps)
    rng = np.random.default_rng(n)
    host = [rng.random(size) for _ in range(n_fields)]
    placeholders = [pt.make_placeholder(f"u{f}", (size,), np.float64)
                    for f in range(n_fields)]
    outs = _evaluate(steps, placeholders,
                     lambda a, s, m: a[s:s + m], lambda a, b: a + b[:a.shape[0]])
    refs = _evaluate(steps, host,
                     lambda a, s, m: a[s:s + m], lambda a, b: a + b[:a.shape[0]])
    if any(o.shape[0] < 1 for o in outs):
        return
    prg = pt.generate_loopy({f"o{f}": o for f, o in enumerate(outs)})
    _, out = prg(queue, **{f"u{f}": h for f, h in enumerate(host)})
    for f, ref in enumerate(refs):
        np.testing.assert_allclose(out[f"o{f}"], ref, rtol=1e-13, atol=1e-13)

# }}}


# {{{ alike middle steps rolled into one loop (rolled_stages.py)

def _rolled(prg) -> bool:
    return "_pt_step" in prg.get_source()


@pytest.mark.parametrize("n", [1, TILE - 1, TILE + 1, 3 * TILE + 7])
@pytest.mark.parametrize("steps", [4, 5, 7, STAGES])
def test_rolled_chain_equals_unrolled_and_numpy(queue, n, steps):
    rng = np.random.default_rng(n * steps)
    host = {f"u{f}": rng.random(n + 2 * steps) for f in range(2)}
    outs = {}
    for roll in (False, True):
        prg = pt.generate_loopy(chain(n, steps, fields=2),
                                options={"time_tile_roll": roll})
        if not roll:
            # the stages of the fused run, a loop each (tiny arrays may
            # be merged into one sequential kernel instead)
            stages = len(set(re.findall(r"_pt_w\d+", prg.get_source())))
        # (the first and last steps stay apart; fewer than
        # MIN_ROLLED_STAGES between them cost less unrolled)
        assert _rolled(prg) == (roll and stages - 2 >= MIN_ROLLED_STAGES)
        _, outs[roll] = prg(queue, **host)
    assert stages == steps or n == 1
    for f in range(2):
        want = heat_steps_numpy(host[f"u{f}"], steps)
        np.testing.assert_array_equal(outs[True][f"o{f}"], outs[False][f"o{f}"])
        np.testing.assert_allclose(outs[True][f"o{f}"], want, rtol=1e-14, atol=0)


def test_three_steps_are_not_rolled():
    # one middle step: nothing to loop over
    prg = pt.generate_loopy(chain(1000, 3))
    assert not _rolled(prg)


def test_steps_that_differ_are_not_rolled(queue):
    # the coefficient changes with the step: the stages are not alike
    n, steps = 2000, 8
    u = pt.make_placeholder("u", (n + 2 * steps,), np.float64)
    uv = np.random.default_rng(3).random(n + 2 * steps)
    ref = uv
    for k in range(steps):
        c = 0.1 + 0.01 * k
        u = u[1:-1] + c * (u[:-2] - 2 * u[1:-1] + u[2:])
        ref = ref[1:-1] + c * (ref[:-2] - 2 * ref[1:-1] + ref[2:])
    prg = pt.generate_loopy({"o": u})
    assert len(prg.plan.launches) == 1 and not _rolled(prg)
    _, out = prg(queue, u=uv)
    np.testing.assert_allclose(out["o"], ref, rtol=1e-14, atol=0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3),
       st.lists(st.tuples(st.integers(1, 2), st.integers(0, 3),
                          st.floats(-2, 2, width=32)), min_size=1, max_size=3),
       st.booleans(), st.integers(3, 10), st.integers(1, 3 * TILE))
def test_random_alike_steps_match_numpy(queue, n_fields, terms, cross, n_steps,
                                        n):
    # every step the same (terms reading one or two steps back, fields
    # coupled or not): rolled where the stages are alike, NumPy's values
    _check_chain_against_numpy(queue, n_fields, [(terms, cross)] * n_steps, n)


def test_the_rolled_loop_is_one_kernel_for_any_step_count():
    # the loop's bounds are in the domain: runs of 6 and of 9 steps differ
    # in one bound only
    a = kernels(pt.generate_loopy(chain(5000, 6)).get_source())
    b = kernels(pt.generate_loopy(chain(5000, 9)).get_source())
    assert len(a) == len(b) == 1
    for kernel in (a[0], b[0]):
        assert kernel.count("for (") == 4

# }}}


# {{{ the pass on a deep chain

def test_pass_on_a_100_000_step_chain_needs_no_recursion():
    # instructions as the lowering makes them: step k reads step k - 1 at
    # i, i + 1 and i + 2; only the last step is an output
    import pymbolic.primitives as prim
    depth = 100_000
    c0 = prim.Variable("_pt_c0")
    buffers = {}
    insns = []
    # step 0 reads a concatenation of two pieces, written by chunk 0
    from pytato_like.target.loopy.instructions import Placement
    cat_extent = 2 * depth + 3
    cat = pt.make_placeholder("cat", (cat_extent,), np.float64)
    buffers["cat"] = BufferSpec("cat", (cat_extent,), np.float64, "temporary")
    group = []
    for offset, length in ((0, 5), (5, cat_extent - 5)):
        piece = Instruction(cat, ["cat"], prim.Variable("x"), ("_pt_c0",),
                            (length,), [], [], set(),
                            placement=Placement(0, offset), pieces=group)
        group.append(piece)
    insns.extend(group)
    previous = cat
    for k in range(depth):
        extent = 2 * (depth - k) + 1
        node = pt.make_placeholder(f"s{k}", (extent,), np.float64)
        name = f"t{k}"
        buffers[name] = BufferSpec(name, (extent,), np.float64,
                                   "output" if k == depth - 1 else "temporary")
        refs = [(id(previous), (c0 + c,)) for c in (0, 1, 2)]
        insn = Instruction(node, [name], prim.Variable("x"), ("_pt_c0",),
                           (extent,), refs, [], set())
        insn.level = insn.chunk = k + 1
        insns.append(insn)
        previous = node
    runs = time_tiles.tile_time_steps(insns, buffers, tile=TILE)
    assert len(runs) == -(-depth // STAGES)
    assert insns[-1].chunk == len(runs) - 1
    assert all(r.widths[0] == 2 * (r.n_stages - 1) for r in runs)
    # the first run computes the concatenation's pieces first: their
    # chunk is gone, and so is the concatenation's buffer
    assert runs[0].pieces == group and runs[0].n_stages == STAGES + 1
    assert all(not r.pieces for r in runs[1:])
    assert insns[:2] == group and group[0].chunk == 0 and group[1].stage == 0
    assert "cat" not in buffers
    # the steps inside the runs lost their buffers, the run ends kept them
    kept = {n for n, b in buffers.items()}
    assert len(kept) == len(runs)

# }}}
