"""``BoundPyOpenCLProgram.call_steady`` (target/loopy/bound.py): the
distributed steady loop's entry, which hands its inputs to the replay run
last and falls back to ``call_placed`` when that replay does not fit --
each case against NumPy, and counting which path ran."""

from __future__ import annotations

import numpy as np
import pytest
from _replays import n_replayed, sized_sum_program

import pytato_like as pt
from pytato_like.diagnostic import InputDTypeMismatchError, MissingInputError

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
cl_tools = pytest.importorskip("pyopencl.tools")


def _stencil_program():
    """Two inputs, two outputs, a stored temporary between two launches."""
    u = pt.make_placeholder("u", (40,), np.float64)
    v = pt.make_placeholder("v", (40,), np.float64)
    t = (u[1:] * v[:-1] + 1).tagged(pt.tags.ImplStored())
    return pt.generate_loopy({"a": t[1:] - t[:-1], "b": 2 * u - v})


def _numpy(uv, vv):
    t = uv[1:] * vv[:-1] + 1
    return {"a": t[1:] - t[:-1], "b": 2 * uv - vv}


def _pool(queue):
    return cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))


def test_steady_calls_give_numpys_results_and_replay(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(3)
    kept = []
    for _ in range(4):
        uv, vv = rng.standard_normal(40), rng.standard_normal(40)
        inputs = {"u": cla.to_device(queue, uv), "v": cla.to_device(queue, vv)}
        before = dict(inputs)
        _, out = prg.call_steady(queue, {}, pool, inputs)
        assert inputs == before         # the caller's dict is not changed
        assert all(ary.allocator is pool for ary in out.values())
        kept.append((out, _numpy(uv, vv)))
    for out, expected in kept:
        for name, ref in expected.items():
            np.testing.assert_array_equal(out[name].get(), ref)
    # the first call records, the three others replay
    assert n_replayed(prg) == 3


def test_steady_calls_compute_into_placed_arrays(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    target = cla.empty(queue, (40,), np.float64)
    rng = np.random.default_rng(4)
    for k in range(3):
        uv, vv = rng.standard_normal(40), rng.standard_normal(40)
        _, out = prg.call_steady(queue, {"b": target}, pool,
                                 {"u": cla.to_device(queue, uv),
                                  "v": cla.to_device(queue, vv)})
        # (the first, full call allocates its own outputs)
        assert (out["b"] is target) == (k > 0)
        np.testing.assert_array_equal(out["b"].get(), 2 * uv - vv)


@pytest.mark.parametrize("change", ["shape", "dtype", "order", "missing"])
def test_inputs_the_last_replay_does_not_fit_take_the_full_call(queue, change):
    prg = sized_sum_program()
    pool = _pool(queue)
    xv, yv = np.arange(8.0), np.linspace(0, 1, 8)
    inputs = {"x": cla.to_device(queue, xv), "y": cla.to_device(queue, yv)}
    prg.call_steady(queue, {}, pool, inputs)
    prg.call_steady(queue, {}, pool, inputs)
    assert n_replayed(prg) == 1
    if change == "shape":
        xv, yv = np.arange(5.0), np.ones(5)
        inputs = {"x": cla.to_device(queue, xv), "y": cla.to_device(queue, yv)}
    elif change == "dtype":
        xv = np.arange(8.0, dtype=np.float32)
        inputs = {"x": cla.to_device(queue, xv), "y": inputs["y"]}
    elif change == "order":
        inputs = {"y": inputs["y"], "x": inputs["x"]}
    else:
        inputs = {"x": inputs["x"]}
    if change == "missing":
        with pytest.raises(MissingInputError, match="'y'"):
            prg.call_steady(queue, {}, pool, inputs)
        return
    if change == "dtype":
        with pytest.raises(InputDTypeMismatchError, match="'x'.*float32"):
            prg.call_steady(queue, {}, pool, inputs)
        return
    _, out = prg.call_steady(queue, {}, pool, inputs)
    np.testing.assert_array_equal(out["s"].get(), xv + 3 * yv)


def test_inputs_named_like_options_take_the_full_call(queue):
    a = pt.make_placeholder("allocator", (6,), np.float64)
    o = pt.make_placeholder("out_host", (6,), np.float64)
    prg = pt.generate_loopy({"r": a - 2 * o})
    pool = _pool(queue)
    for k in range(3):
        av, ov = np.arange(6.0) + k, np.full(6, 0.5 * k)
        _, out = prg.call_steady(queue, {}, pool,
                                 {"allocator": cla.to_device(queue, av),
                                  "out_host": cla.to_device(queue, ov)})
        # the inputs are inputs, not options: results stay on the device
        assert isinstance(out["r"], cla.Array)
        np.testing.assert_array_equal(out["r"].get(), av - 2 * ov)


def test_without_an_allocator_the_queues_pool_serves(queue):
    prg = _stencil_program()
    rng = np.random.default_rng(5)
    for _ in range(3):
        uv, vv = rng.standard_normal(40), rng.standard_normal(40)
        _, out = prg.call_steady(queue, {}, None,
                                 {"u": cla.to_device(queue, uv),
                                  "v": cla.to_device(queue, vv)})
        for name, ref in _numpy(uv, vv).items():
            np.testing.assert_array_equal(out[name].get(), ref)
    assert n_replayed(prg) == 2
