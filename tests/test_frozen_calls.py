"""Frozen part calls (target/loopy/frozen.py): a program's call with its
outputs, temporaries and argument tuples fixed, as the distributed steady
loop makes them -- each case against NumPy, and what may not be frozen
refused."""

from __future__ import annotations

import numpy as np
import pytest
from _replays import sized_sum_program

import pytato_like as pt
from pytato_like.target.loopy import frozen as frozen_module
from pytato_like.target.loopy.frozen import FrozenCall

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
cl_tools = pytest.importorskip("pyopencl.tools")


def _stencil_program():
    """Two inputs, two outputs, a temporary (the stored array, read
    reversed)."""
    u = pt.make_placeholder("u", (40,), np.float64)
    v = pt.make_placeholder("v", (40,), np.float64)
    t = (u * v + 1).tagged(pt.tags.ImplStored())
    return pt.generate_loopy({"a": t[::-1] + t, "b": 2 * u - v})


def _numpy(uv, vv):
    t = uv * vv + 1
    return {"a": t[::-1] + t, "b": 2 * uv - vv}


def _pool(queue):
    return cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))


def _inputs(queue, rng):
    uv, vv = rng.standard_normal(40), rng.standard_normal(40)
    return (uv, vv), {"u": cla.to_device(queue, uv),
                      "v": cla.to_device(queue, vv)}


def _frozen(queue, prg, pool, inputs, placed=None):
    prg.call_steady(queue, {}, pool, inputs)
    prg.call_steady(queue, {}, pool, inputs)      # recorded, then replayed
    frozen = FrozenCall.freeze(prg, queue, pool, inputs, placed or {})
    assert frozen is not None
    return frozen


def test_frozen_calls_give_numpys_results_in_the_same_arrays(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(5)
    (uv, vv), inputs = _inputs(queue, rng)
    frozen = _frozen(queue, prg, pool, inputs)
    n_calls = prg.stats.n_calls
    out = frozen(queue, inputs)
    for name, ref in _numpy(uv, vv).items():
        np.testing.assert_array_equal(out[name].get(), ref)
    # the inputs changed in place: the same arrays, new values
    uv2, vv2 = rng.standard_normal(40), rng.standard_normal(40)
    inputs["u"].set(uv2)
    inputs["v"].set(vv2)
    again = frozen(queue, inputs)
    assert again is out and all(again[k] is out[k] for k in out)
    for name, ref in _numpy(uv2, vv2).items():
        np.testing.assert_array_equal(again[name].get(), ref)
    assert frozen.n_calls == 2 and prg.stats.n_calls == n_calls + 2


def test_other_arrays_of_the_same_layout_are_rebound(queue):
    """A solver passes each step's results back in: new arrays, the same
    layout; the frozen call reads them."""
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(6)
    _, inputs = _inputs(queue, rng)
    frozen = _frozen(queue, prg, pool, inputs)
    for _ in range(3):
        (uv, vv), fresh = _inputs(queue, rng)
        out = frozen(queue, fresh)
        assert out is not None
        for name, ref in _numpy(uv, vv).items():
            np.testing.assert_array_equal(out[name].get(), ref)


def test_sizes_are_part_of_the_layout(queue):
    """A size parameter's value is part of the layout: the same value
    (a NumPy integer too) is rebound, another refused."""
    prg = sized_sum_program()
    pool = _pool(queue)
    xv, yv = np.arange(8.0), np.linspace(0, 1, 8)
    inputs = {"x": cla.to_device(queue, xv), "y": cla.to_device(queue, yv),
              "n": 8}
    frozen = _frozen(queue, prg, pool, inputs)
    out = frozen(queue, dict(inputs, n=np.int64(8)))
    np.testing.assert_array_equal(out["s"].get(), xv + 3 * yv)
    assert frozen(queue, dict(inputs, n=9)) is None


@pytest.mark.parametrize("change", ["shape", "dtype", "missing", "strided",
                                    "queue"])
def test_another_layout_or_queue_is_refused_with_nothing_enqueued(queue,
                                                                  change):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(7)
    (uv, vv), inputs = _inputs(queue, rng)
    frozen = _frozen(queue, prg, pool, inputs)
    out = frozen(queue, inputs)
    before = {k: v.get() for k, v in out.items()}
    other_queue = queue
    if change == "shape":
        bad = dict(inputs, u=cla.to_device(queue, np.zeros(41)))
    elif change == "dtype":
        bad = dict(inputs, u=cla.to_device(queue, np.zeros(40, np.float32)))
    elif change == "missing":
        bad = {k: v for k, v in inputs.items() if k != "v"}
    elif change == "strided":
        bad = dict(inputs, u=cla.to_device(queue, np.zeros(80))[::2])
    else:
        bad = inputs
        other_queue = cl.CommandQueue(queue.context)
    assert frozen(other_queue, bad) is None
    # nothing ran: the outputs hold the last call's values
    for k, v in out.items():
        np.testing.assert_array_equal(v.get(), before[k])
    # and the inputs that fit still work
    again = frozen(queue, inputs)
    np.testing.assert_array_equal(again["b"].get(), 2 * uv - vv)


def test_placed_outputs_are_computed_in_place(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(8)
    (uv, vv), inputs = _inputs(queue, rng)
    target = cla.empty(queue, (40,), np.float64)
    frozen = _frozen(queue, prg, pool, inputs, placed={"b": target})
    out = frozen(queue, inputs)
    assert out["b"] is target
    np.testing.assert_array_equal(target.get(), 2 * uv - vv)


def test_what_cannot_be_frozen_is_refused(queue, monkeypatch):
    pool = _pool(queue)
    rng = np.random.default_rng(9)
    _, inputs = _inputs(queue, rng)

    # no replay yet: nothing to freeze (but it may be frozen later)
    prg = _stencil_program()
    assert FrozenCall.freeze(prg, queue, pool, inputs, {}) is None
    assert FrozenCall.can_freeze(prg, queue)

    # run-time checks read values back after the call (a gather's index
    # range, here)
    x = pt.make_placeholder("x", (40,), np.float64)
    idx = pt.make_placeholder("idx", (5,), np.int64)
    checked = pt.generate_loopy({"g": x[idx] + 1})
    assert checked.checks
    gathered = {"x": cla.to_device(queue, np.arange(40.0)),
                "idx": cla.to_device(queue, np.arange(5))}
    checked.call_steady(queue, {}, pool, gathered)
    checked.call_steady(queue, {}, pool, gathered)
    assert not FrozenCall.can_freeze(checked, queue)
    assert FrozenCall.freeze(checked, queue, pool, gathered, {}) is None

    # temporaries over the limit would stay allocated
    prg.call_steady(queue, {}, pool, inputs)
    assert any(launch[4] for launch in prg._last_replay.launches)
    monkeypatch.setattr(frozen_module, "FROZEN_TEMPORARY_BYTES", 8)
    assert not FrozenCall.can_freeze(prg, queue)
    assert FrozenCall.freeze(prg, queue, pool, inputs, {}) is None
    monkeypatch.undo()
    assert FrozenCall.freeze(prg, queue, pool, inputs, {}) is not None

    # an out-of-order queue would need events between the launches
    try:
        ooo = cl.CommandQueue(
            queue.context, properties=cl.command_queue_properties
            .OUT_OF_ORDER_EXEC_MODE_ENABLE)
    except cl.Error:
        pass
    else:
        assert not FrozenCall.can_freeze(prg, ooo)


def test_an_output_that_is_an_input_is_a_kept_copy(queue):
    """An output naming an input is computed into a buffer of its own,
    which the frozen call keeps: never the caller's input array."""
    pool = _pool(queue)
    x = pt.make_placeholder("x", (40,), np.float64)
    prg = pt.generate_loopy({"x_again": x, "y": x + 1})
    xs = {"x": cla.to_device(queue, np.arange(40.0))}
    frozen = _frozen(queue, prg, pool, xs)
    for k in range(2):
        xs["x"].set(np.arange(40.0) * (k + 2))
        out = frozen(queue, xs)
        assert out["x_again"] is not xs["x"]
        np.testing.assert_array_equal(out["x_again"].get(),
                                      np.arange(40.0) * (k + 2))
        np.testing.assert_array_equal(out["y"].get(),
                                      np.arange(40.0) * (k + 2) + 1)


def test_calls_sharing_a_kernel_keep_their_own_arguments(queue):
    """Two programs of the same code share their compiled kernels; frozen
    calls of both, alternating with full calls that set the shared
    kernels' arguments, each compute from their own inputs."""
    pool = _pool(queue)
    rng = np.random.default_rng(10)
    first, second = _stencil_program(), _stencil_program()
    (u1, v1), in1 = _inputs(queue, rng)
    (u2, v2), in2 = _inputs(queue, rng)
    frozen1 = _frozen(queue, first, pool, in1)
    frozen2 = _frozen(queue, second, pool, in2)
    shared = {id(step[0]) for launch in first._last_replay.launches
              for step in launch[-1]}
    assert shared & {id(step[0]) for launch in second._last_replay.launches
                     for step in launch[-1]}, "no kernel shared: nothing tested"
    (u3, v3), in3 = _inputs(queue, rng)
    for _ in range(2):
        out1 = frozen1(queue, in1)
        _, out3 = second.call_steady(queue, {}, pool, in3)
        out2 = frozen2(queue, in2)
        for out, (uv, vv) in ((out1, (u1, v1)), (out2, (u2, v2)),
                              (out3, (u3, v3))):
            for name, ref in _numpy(uv, vv).items():
                np.testing.assert_array_equal(out[name].get(), ref)
