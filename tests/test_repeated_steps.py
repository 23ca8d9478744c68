"""Programs that repeat one step (:mod:`pytato_like.target.loopy.repeated_steps`):
a DAG ending in a long run of alike steps is generated as a head and a
body of a few steps, whose launches the plan repeats.

Checked: the run is found (period, blocks, carried values, invariants)
and not found where the steps differ or an output sits early inside the
run;
a spliced program gives NumPy's values, bitwise those of the program
generated whole (``repeated_steps_min=0``), with its launches; carried
values of two fields, a leapfrog reading two steps back (found as a
period of two steps), invariants that are placeholders, data wrappers or
computed before the loop, a computed starting value, a run whose length
is no multiple of the body's, outputs after the loop (a reduction, a
boolean) and the same output under two names, a reduction and an einsum
in each step, an input named as the body's own placeholders would be,
random steps; a 100 000-step chain at
Python's default recursion limit; the option's environment variable."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like._traversal import topological_order
from pytato_like.target.loopy.repeated_steps import find_step_run

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

N = 257   # cells (odd: rolls wrap at an odd place)


def _stencil(m, u, c=0.1):
    return u + c * (m.roll(u, 1) - 2 * u + m.roll(u, -1))


def _both(queue, outputs, inputs, min_blocks=8):
    """The program of *outputs* generated with runs found from
    *min_blocks* blocks and whole (its plan phases, results, launches)."""
    got = {}
    for label, setting in (("repeated", min_blocks), ("whole", 0)):
        prg = pt.generate_loopy(outputs, options={
            "repeated_steps_min": setting, "host_first_call": False})
        _, out = prg(queue, **inputs)
        got[label] = (prg, out)
    return got


def _check(queue, outputs, inputs, ref, min_blocks=8, spliced=True):
    got = _both(queue, outputs, inputs, min_blocks)
    prg, out = got["repeated"]
    whole_prg, whole = got["whole"]
    assert ("repeated_steps" in prg.plan.phase_times) == spliced
    assert "repeated_steps" not in whole_prg.plan.phase_times
    for name, value in ref.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-12, atol=1e-12)
        # the same kernels on the same values
        np.testing.assert_array_equal(out[name], whole[name])
    return prg, whole_prg


# {{{ finding the run

def test_run_of_a_stencil_loop():
    u = x = pt.make_placeholder("x", (N,), np.float64)
    for _ in range(40):
        u = _stencil(pt, u)
    order = topological_order([u])
    run = find_step_run(order, [u], 8)
    assert run is not None
    # one step: 2 rolls, 2 * u, two sums, c * (...), u + ...
    assert run.blocks * run.period == len(order) - run.start
    assert run.blocks == 40
    # the step reads the step before's u, the node before its first
    assert run.carried == (1,)
    assert order[run.start - 1] is x
    assert find_step_run(order, [u], 41) is None
    # (at least 2 * MAX_LAG blocks: the body repeats at least twice)
    assert find_step_run(order, [u], 2) == run


def test_no_run_where_steps_differ():
    u = pt.make_placeholder("x", (N,), np.float64)
    for k in range(40):
        u = _stencil(pt, u, c=0.1 + k)    # another constant each step
    assert find_step_run(topological_order([u]), [u], 8) is None


@pytest.mark.parametrize(("steps", "at", "spliced"),
                         [(80, 19, False), (40, 37, True)])
def test_output_inside_the_run(queue, rng, steps, at, spliced):
    """An output after step *at*: the run must end within a few blocks
    after it (those the body's last repetition computes), the rest of the
    steps after the run; at step 38 of 40 it does, at step 20 of 80 no
    run does."""
    x0 = rng.standard_normal(N)
    u = pt.make_placeholder("x", (N,), np.float64)
    mid = None
    ref = x0
    for k in range(steps):
        u = _stencil(pt, u)
        ref = _stencil(np, ref)
        if k == at:
            mid, ref_mid = u, ref
    outputs = {"u": u, "mid": mid}
    run = find_step_run(topological_order(list(outputs.values())),
                        list(outputs.values()), 8)
    assert (run is not None) == spliced
    _check(queue, outputs, {"x": x0}, {"u": ref, "mid": ref_mid},
           spliced=spliced)


def test_invariant_inside_the_run_is_refused():
    # every step reads the first step's value: not a run of alike steps
    u = pt.make_placeholder("x", (N,), np.float64)
    first = _stencil(pt, u)
    u = first
    for _ in range(40):
        u = u + 0.5 * first
    run = find_step_run(topological_order([u]), [u], 8)
    assert run is None or run.start > 0 and all(
        i < run.start for i in run.invariants)

# }}}


# {{{ spliced programs

@pytest.mark.parametrize("steps", [40, 37, 300])
def test_stencil_loop_equals_whole_program(queue, rng, steps):
    x0 = rng.standard_normal(N)
    u = pt.make_placeholder("x", (N,), np.float64)
    ref = x0
    for _ in range(steps):
        u = _stencil(pt, u)
        ref = _stencil(np, ref)
    prg, whole = _check(queue, {"u": u}, {"x": x0}, {"u": ref})
    # time tiles fuse steps (here the cells fit one tile); a fused run
    # ends where the body ends, at most once per repetition
    repetitions = steps // max(1, min(64, steps // 4))
    assert whole.stats.n_launches <= prg.stats.n_launches \
        <= whole.stats.n_launches + repetitions + 1


@pytest.mark.parametrize("forcing_per_step", [False, True])
def test_two_carried_fields_and_invariants(queue, rng, forcing_per_step):
    """Two fields, an output computed after the loop, invariants that are
    an input, bound data and arrays computed before the loop, and a
    computed start. A forcing ``d * w`` recomputed in every step (from
    invariants alone) lands anywhere in the topological order: no run
    (the program is generated whole, correctly)."""
    x0, w0 = rng.standard_normal(N), rng.standard_normal(N)
    d0 = rng.standard_normal(N)
    x = pt.make_placeholder("x", (N,), np.float64)
    w = pt.make_placeholder("w", (N,), np.float64)     # an input every step reads
    d = pt.make_data_wrapper(d0)                        # bound data too
    scale = 2 * pt.sin(w)                              # computed before the loop
    force = d * w
    y, v = 3 * x, pt.zeros_like(x)                     # a computed start
    ry, rv = 3 * x0, np.zeros_like(x0)
    for _ in range(50):
        y, v = (y + 0.01 * v * scale,
                v - 0.01 * (pt.roll(y, 1) - 2 * y + pt.roll(y, -1))
                + (d * w if forcing_per_step else force))
        ry, rv = (ry + 0.01 * rv * (2 * np.sin(w0)),
                  rv - 0.01 * (np.roll(ry, 1) - 2 * ry + np.roll(ry, -1))
                  + d0 * w0)
    outputs = {"y": y, "v": v, "energy": pt.sum(y * y + v * v)}
    ref = {"y": ry, "v": rv, "energy": np.sum(ry * ry + rv * rv)}
    _check(queue, outputs, {"x": x0, "w": w0}, ref,
           spliced=not forcing_per_step)


def test_leapfrog_reading_two_steps_back(queue, rng):
    # u_{k+1} = 2 u_k - u_{k-1} + c lap(u_k): found with two steps a block
    x0 = rng.standard_normal(N)
    x = pt.make_placeholder("x", (N,), np.float64)
    prev, cur = x, x + 0.0
    rprev, rcur = x0, x0 + 0.0
    for _ in range(60):
        prev, cur = cur, (2 * cur - prev
                          + 0.01 * (pt.roll(cur, 1) - 2 * cur + pt.roll(cur, -1)))
        rprev, rcur = rcur, (2 * rcur - rprev
                             + 0.01 * (np.roll(rcur, 1) - 2 * rcur
                                       + np.roll(rcur, -1)))
    _check(queue, {"u": cur}, {"x": x0}, {"u": rcur})


def test_reduction_in_each_step_and_outputs_alike(queue, rng):
    """A step normalising by a sum (a reduction in the body), the last
    value under two names, and a boolean computed after the loop."""
    x0 = rng.standard_normal(64)
    x = pt.make_placeholder("x", (64,), np.float64)
    u, ref = x, x0
    for _ in range(30):
        u = u / (1 + 0.1 * pt.sum(u * u)) + 0.01 * pt.roll(u, 1)
        ref = ref / (1 + 0.1 * np.sum(ref * ref)) + 0.01 * np.roll(ref, 1)
    prg, _ = _check(queue, {"a": u, "b": u, "positive": u > 0}, {"x": x0},
                    {"a": ref, "b": ref, "positive": ref > 0})
    _, out = prg(queue, x=x0)
    assert out["positive"].dtype == np.bool_
    assert out["a"] is not out["b"]


def test_small_operator_loop(queue, rng):
    """40 DG-like steps ``u + dt einsum("ij,ej->ei", D, u)``, the operator
    bound data (an invariant input of the body)."""
    d0 = rng.standard_normal((10, 10)) / 10
    u0 = rng.standard_normal((300, 10))
    d = pt.make_data_wrapper(d0)
    u = pt.make_placeholder("u", u0.shape, np.float64)
    ref = u0
    for _ in range(40):
        u = u + 0.01 * pt.einsum("ij,ej->ei", d, u)
        ref = ref + 0.01 * np.einsum("ij,ej->ei", d0, ref)
    _check(queue, {"u": u}, {"u": u0}, {"u": ref})


def test_input_named_like_the_runs_own_inputs(queue, rng):
    """An input every step reads, named as the body's placeholder of the
    value carried from the step before would be: the body's own
    placeholders take another prefix."""
    name = "_pt_rs_carry_in1"
    x0, c0 = rng.standard_normal(N), rng.standard_normal(N)
    x = pt.make_placeholder("x", (N,), np.float64)
    c = pt.make_placeholder(name, (N,), np.float64)
    u, ref = x, x0
    for _ in range(40):
        u = u + 0.01 * pt.roll(u, 1) * (c + u)
        ref = ref + 0.01 * np.roll(ref, 1) * (c0 + ref)
    _check(queue, {"u": u}, {"x": x0, name: c0}, {"u": ref})


def _random_step(seed: int):
    """A random step of two fields: a coupling of the two (``a, b = b, a +
    c roll(a)``), then three random elementwise operations, rolls or
    wheres."""
    r = np.random.default_rng(seed)
    ops = [4] + [int(op) for op in r.integers(0, 5, size=3)]
    shifts = [int(s) for s in r.integers(-3, 4, size=4)]
    coef = [float(c) for c in r.uniform(-0.1, 0.1, size=4)]

    def step(m, a, b):
        for k, op in enumerate(ops):
            if op == 0:
                a = a + coef[k] * m.roll(b, shifts[k])
            elif op == 1:
                b = b - coef[k] * m.cos(a) * b
            elif op == 2:
                a = m.where(a > 0, a, coef[k] * a)
            elif op == 3:
                b = b + coef[k] * m.sin(a)
            else:
                a, b = b, a + coef[k] * m.roll(a, shifts[k])
        return a, b
    return step


def test_random_steps(queue):
    """12 random steps, each repeated 40 times: every program gives
    NumPy's values, and those found as runs (some steps split into two
    chains that do not read each other, laid out one after the other:
    no run) the values of the program generated whole."""
    spliced = 0
    for seed in range(12):
        step = _random_step(seed)
        r = np.random.default_rng(100 + seed)
        a0, b0 = r.standard_normal(N), r.standard_normal(N)
        a = pt.make_placeholder("a", (N,), np.float64)
        b = pt.make_placeholder("b", (N,), np.float64)
        ra, rb = a0, b0
        for _ in range(40):
            a, b = step(pt, a, b)
            ra, rb = step(np, ra, rb)
        got = _both(queue, {"a": a, "b": b}, {"a": a0, "b": b0})
        for _prg, out in got.values():
            np.testing.assert_allclose(out["a"], ra, rtol=1e-11, atol=1e-11)
            np.testing.assert_allclose(out["b"], rb, rtol=1e-11, atol=1e-11)
        if "repeated_steps" in got["repeated"][0].plan.phase_times:
            spliced += 1
            for name in "ab":
                np.testing.assert_array_equal(got["repeated"][1][name],
                                              got["whole"][1][name])
    assert spliced >= 5


def test_deep_chain_is_repeated(queue, deep_chain):
    """The 100 000-step chain of the shared fixture: found and spliced
    at Python's default recursion limit, by default (from 256 steps)."""
    x, y = deep_chain
    x0 = np.array([1.0, -2.0, 0.5])
    prg = pt.generate_loopy(y, options={"host_first_call": False})
    assert "repeated_steps" in prg.plan.phase_times
    _, (out,) = prg(queue, x=x0)
    # y -> 2 is the fixed point of 0.5 y + 1: after 100 000 steps, 2
    np.testing.assert_allclose(out, 2.0)
    # the same launches as the chain generated whole would have (kernels
    # of as many steps): at most a fifth more
    whole_per_call = 100_000 / 617
    assert prg.stats.n_launches <= 1.25 * whole_per_call


def test_option_from_the_environment(monkeypatch):
    from pytato_like.target.loopy.options import CodegenOptions
    monkeypatch.setenv("PYTATO_LIKE_REPEATED_STEPS_MIN", "0")
    assert CodegenOptions.from_user(None).repeated_steps_min == 0
    monkeypatch.setenv("PYTATO_LIKE_REPEATED_STEPS_MIN", "12")
    assert CodegenOptions.from_user(None).repeated_steps_min == 12

# }}}
