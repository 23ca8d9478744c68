"""The optional optimisations of code generation as declared plan passes
(target/loopy/passes.py, target/loopy/plan.py): each default pass switched
off by name on a program where it applies keeps NumPy's result and the
plan report says why it was skipped; a pass declared here, with no edit of
the package, reorders independent kernels; an unknown name is refused
naming the known ones; a 100 000-deep chain goes through the passes at the
default recursion limit; plan values are frozen and a pass leaves the plan
it was given as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy.passes import (
    DEFAULT_PASSES,
    PlanPass,
    renumber_chunks,
    run_passes,
)
from pytato_like.target.loopy.plan import PassOutcome, PlanReport

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def _outputs(result):
    return result if isinstance(result, dict) else {"out": result}


# {{{ programs on which each default pass applies

def heat_chain(n=3000, steps=6):
    """A 1-D stencil time loop: the time tiles fuse its steps."""
    u0 = pt.make_placeholder("u", (n + 2 * steps,))
    u = u0
    for _ in range(steps):
        u = u[1:-1] + 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])

    def reference(uv):
        for _ in range(steps):
            uv = uv[1:-1] + 0.25 * (uv[:-2] - 2 * uv[1:-1] + uv[2:])
        return uv
    return {"u": u0}, {"out": u}, lambda host: {"out": reference(host["u"])}


def roll_reader(n=5000):
    """An output reading a roll through selects: cut into read pieces."""
    x = pt.make_placeholder("x", (n,))
    y = 2 * pt.roll(x, 1) - pt.roll(x, -1)
    return ({"x": x}, {"out": y},
            lambda host: {"out": 2 * np.roll(host["x"], 1)
                          - np.roll(host["x"], -1)})


def small_kernels(count=6):
    """Independent small outputs of different shapes: one kernel each,
    merged into one sequential kernel."""
    xs = {f"x{k}": pt.make_placeholder(f"x{k}", (10 + k,)) for k in range(count)}
    outs = {f"o{k}": pt.sin(xs[f"x{k}"]) + k for k in range(count)}
    return xs, outs, lambda host: {
        f"o{k}": np.sin(host[f"x{k}"]) + k for k in range(count)}


PROGRAMS = {"time_tiles": heat_chain, "read_pieces": roll_reader,
            "small_chunks": small_kernels}

# }}}


def _compile_and_run(queue, program, options=None):
    inputs, outputs, reference = program()
    prg = pt.generate_loopy(outputs, options=options)
    rng = np.random.default_rng(7)
    host = {name: rng.random(ph.shape) for name, ph in inputs.items()}
    _, got = prg(queue, **host)
    got = _outputs(got)
    for name, want in reference(host).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-13, atol=1e-14)
    return prg


def test_the_default_passes_are_declared_in_order():
    assert [p.name for p in DEFAULT_PASSES] == [
        "read_pieces", "time_tiles", "small_chunks"]
    assert all(p.summary and "\n" not in p.summary for p in DEFAULT_PASSES)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_pass_switched_off_keeps_numpys_result(queue, name):
    program = PROGRAMS[name]
    on = _compile_and_run(queue, program)
    off = _compile_and_run(queue, program, {"disabled_passes": [name]})
    applied = on.plan.pass_report[name]
    assert applied.applied and not applied.reason.startswith("nothing")
    skipped = off.plan.pass_report[name]
    assert not skipped.applied
    assert "disabled" in skipped.reason
    # the other passes still ran or said why not
    assert {o.name for o in off.plan.pass_report.outcomes} == {
        p.name for p in DEFAULT_PASSES}
    # the pass changed the plan where it applied
    assert (len(on.plan.launches), on.plan.n_instructions) != (
        len(off.plan.launches), off.plan.n_instructions)


def test_a_pass_that_does_not_apply_says_why(queue):
    prg = _compile_and_run(queue, roll_reader, {"time_tile": 0})
    outcome = prg.plan.pass_report["time_tiles"]
    assert not outcome.applied
    assert "time_tile option is 0" in outcome.reason


# {{{ a pass declared here

def _chunk_order_reversed(plan, options):
    """The chunks in a dependency order taking the latest ready chunk
    first: independent kernels run in reverse order."""
    chunks = plan.chunks
    writers: dict[int, set[int]] = {}
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            if insn.node is not None:
                writers.setdefault(id(insn.node), set()).add(k)
    waits = [{j for insn in chunk for nid, _ in insn.refs
              for j in writers.get(nid, ()) if j != k}
             for k, chunk in enumerate(chunks)]
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(chunks):
        ready = [k for k in range(len(chunks))
                 if k not in done and waits[k] <= done]
        order.append(ready[-1])
        done.add(ready[-1])
    insns, writer_of, buffers = plan.copied_instructions()
    copy_of = {id(old): new for old, new in zip(plan.instructions, insns,
                                                strict=True)}
    new_chunks = [[copy_of[id(i)] for i in chunks[k]] for k in order]
    renumber_chunks(new_chunks)
    return dataclasses.replace(
        plan, instructions=tuple(i for c in new_chunks for i in c),
        writer_of=writer_of, buffers=buffers)


REVERSE = PlanPass("reverse_independent_kernels", "chunked",
                   "independent kernels launched in reverse order",
                   _chunk_order_reversed)


def _first_launch_writing(plan, output):
    buf = plan.outputs[output]
    return min(k for k, launch in enumerate(plan.launches)
               if buf in launch.bindings.values())


def test_a_pass_declared_in_a_test_reorders_independent_kernels(queue):
    def program():
        x = pt.make_placeholder("x", (3000,))
        y = pt.make_placeholder("y", (5000,))
        a = pt.sin(x)
        outs = {"a": a, "b": 2 * pt.cos(y), "d": a[1:] - a[:-1]}

        def reference(host):
            av = np.sin(host["x"])
            return {"a": av, "b": 2 * np.cos(host["y"]), "d": av[1:] - av[:-1]}
        return {"x": x, "y": y}, outs, reference

    plain = _compile_and_run(queue, program)
    reordered = _compile_and_run(
        queue, program, {"passes": [*DEFAULT_PASSES, REVERSE]})
    assert reordered.plan.pass_report["reverse_independent_kernels"].applied

    def order(plan):
        return sorted("abd", key=lambda o: _first_launch_writing(plan, o))
    assert order(plain.plan)[0] == "a"
    # b is independent of a and d: it moved first; d still follows a
    assert order(reordered.plan) == ["b", "a", "d"]

# }}}


def test_an_unknown_pass_name_is_refused_naming_the_known_ones():
    x = pt.make_placeholder("x", (10,))
    with pytest.raises(ConfigurationError, match="no_such_pass") as info:
        pt.generate_loopy(x + 1, options={"disabled_passes": ["no_such_pass"]})
    for p in DEFAULT_PASSES:
        assert p.name in str(info.value)


def test_run_passes_refuses_an_unknown_name_and_a_doubled_pass():
    with pytest.raises(ConfigurationError, match="time_tile"):
        run_passes(None, None, DEFAULT_PASSES, disabled=["time_tile"])
    with pytest.raises(ConfigurationError, match="read_pieces"):
        run_passes(None, None, [*DEFAULT_PASSES, DEFAULT_PASSES[0]])


def test_a_100000_deep_chain_goes_through_the_passes(queue, deep_chain):
    import sys
    assert sys.getrecursionlimit() <= 10_000
    x, y = deep_chain
    prg = pt.generate_loopy(y, options={"passes": [*DEFAULT_PASSES, REVERSE]})
    assert prg.plan.pass_report["reverse_independent_kernels"].applied
    xv = np.linspace(0, 1, 3)
    _, (out,) = prg(queue, x=xv)
    ref = xv.copy()
    for _ in range(100_000):
        ref = 0.5 * ref + 1.0
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_plan_values_are_frozen_and_passes_leave_their_input_alone(
        queue, monkeypatch):
    # (a plan from the disk cache of an earlier run would skip the passes)
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "0")
    seen = []

    def keep(plan, options):
        seen.append((plan, [(id(i), i.chunk, tuple(i.targets), i.sequential,
                             i.tiled) for i in plan.instructions],
                     dict(plan.buffers)))
        return plan

    first = PlanPass("keep_what_came_in", "chunked", "records its input", keep)
    prg = _compile_and_run(queue, small_kernels,
                           {"passes": [first, *DEFAULT_PASSES]})
    plan, snapshot, buffers = seen[0]
    # small_chunks merged the kernels after the plan was recorded ...
    assert prg.plan.pass_report["small_chunks"].applied
    assert len(prg.plan.launches) < len(plan.chunks)
    # ... without changing the recorded plan or its instructions
    assert [(id(i), i.chunk, tuple(i.targets), i.sequential, i.tiled)
            for i in plan.instructions] == snapshot
    assert dict(plan.buffers) == buffers
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.instructions = ()
    with pytest.raises(TypeError):
        plan.buffers["new"] = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        prg.plan.launches = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        prg.plan.kernels[0].device_code = ""
    report = prg.plan.pass_report
    assert isinstance(report, PlanReport)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.outcomes = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        PassOutcome("x", True, "y").applied = False


def test_a_pass_must_return_a_plan_of_its_stage(queue):
    bad = PlanPass("bad", "chunked", "returns nothing", lambda plan, options: None)
    x = pt.make_placeholder("x", (10,))
    with pytest.raises(ConfigurationError, match="bad"):
        pt.generate_loopy(x + 1, options={"passes": [bad]})

# vim: foldmethod=marker
