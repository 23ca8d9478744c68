"""The one call path of a bound loopy program
(``BoundPyOpenCLProgram.__call__``, target/loopy/bound.py): the replay
cache keyed by the arguments' layout, placed outputs and frozen calls
(``reuse_outputs``) as keywords of it -- each case against NumPy, counting
which way a call ran (``replay_counts``)."""

from __future__ import annotations

import numpy as np
import pytest
from _replays import sized_sum_program

import pytato_like as pt
from pytato_like.diagnostic import (
    InputDTypeMismatchError,
    InputShapeMismatchError,
    MissingInputError,
)
from pytato_like.target.loopy import replay as replay_module
from pytato_like.target.loopy.bound import (
    BoundPyOpenCLExecutable,
    BoundPyOpenCLProgram,
)
from pytato_like.target.loopy.replay import KeptOutputs

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


def _inputs(queue, rng, n=40):
    uv, vv = rng.standard_normal(n), rng.standard_normal(n)
    return (uv, vv), {"u": cla.to_device(queue, uv),
                      "v": cla.to_device(queue, vv)}


def _steady(prg, queue, pool, inputs, placed=None):
    """A call as the distributed executor makes it from the second
    execution on."""
    return prg(queue, allocator=pool, out_host=False, placed_outputs=placed,
               reuse_outputs=True, **inputs)[1]


def test_one_call_entry_point():
    """Calling a program is ``__call__``; the former side entries are
    gone."""
    for cls in (BoundPyOpenCLProgram, BoundPyOpenCLExecutable):
        for name in ("call_placed", "call_steady"):
            assert not hasattr(cls, name), (cls, name)
    with pytest.raises(ImportError):
        import pytato_like.target.loopy.frozen  # noqa: F401
    prg = _stencil_program()
    assert not any(hasattr(prg, n) for n in ("call_placed", "call_steady"))


def test_the_same_layout_twice_replays(queue):
    prg = _stencil_program()
    rng = np.random.default_rng(1)
    for k in range(3):
        (uv, vv), inputs = _inputs(queue, rng)
        _, out = prg(queue, **inputs)
        for name, ref in _numpy(uv, vv).items():
            np.testing.assert_array_equal(out[name].get(), ref)
        assert prg.replay_counts() == {"host": 0, "full": 1, "replayed": k, "frozen": 0}
    # a copy starts its own cache and counts
    assert prg.copy().replay_counts() == {"host": 0, "full": 0, "replayed": 0,
                                          "frozen": 0}


def test_another_layout_is_not_replayed(queue):
    prg = sized_sum_program()
    for n, dtype in [(8, np.float64), (5, np.float64), (8, np.float64),
                     (5, np.float32)]:
        xv = np.arange(n, dtype=dtype)
        yv = np.linspace(0, 1, n).astype(dtype)
        before = prg.replay_counts()
        if dtype == np.float32:
            with pytest.raises(InputDTypeMismatchError, match="float32"):
                prg(queue, x=cla.to_device(queue, xv),
                    y=cla.to_device(queue, yv))
            continue
        _, out = prg(queue, x=cla.to_device(queue, xv),
                     y=cla.to_device(queue, yv))
        np.testing.assert_allclose(out["s"].get(), xv + 3 * yv)
        after = prg.replay_counts()
        # 8 then 5: two layouts, each recorded by a full call; 8 again is
        # a replay of the first
        replayed = after["replayed"] - before["replayed"]
        assert replayed == (1 if n == 8 and before["full"] == 2 else 0)


def test_placed_outputs_are_written_in_place(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    target = cla.empty(queue, (40,), np.float64)
    rng = np.random.default_rng(4)
    for k in range(3):
        (uv, vv), inputs = _inputs(queue, rng)
        _, out = prg(queue, allocator=pool, out_host=False,
                     placed_outputs={"b": target}, **inputs)
        # (the first call, which records the replay, runs it too)
        assert out["b"] is target
        np.testing.assert_array_equal(out["b"].get(), 2 * uv - vv)
        np.testing.assert_array_equal(out["a"].get(), _numpy(uv, vv)["a"])


def test_frozen_calls_give_numpys_results_in_the_same_arrays(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(5)
    (uv, vv), inputs = _inputs(queue, rng)
    first = _steady(prg, queue, pool, inputs)      # full call, recorded
    assert type(first) is not KeptOutputs
    out = _steady(prg, queue, pool, inputs)        # the replay, frozen
    assert type(out) is KeptOutputs
    for name, ref in _numpy(uv, vv).items():
        np.testing.assert_array_equal(out[name].get(), ref)
    uv2, vv2 = rng.standard_normal(40), rng.standard_normal(40)
    inputs["u"].set(uv2)
    inputs["v"].set(vv2)
    again = _steady(prg, queue, pool, inputs)
    assert again is out and all(again[k] is out[k] for k in out)
    for name, ref in _numpy(uv2, vv2).items():
        np.testing.assert_array_equal(again[name].get(), ref)
    # other arrays of the same layout are rebound (a solver passing each
    # step's results back in)
    (uv3, vv3), fresh = _inputs(queue, rng)
    again = _steady(prg, queue, pool, fresh)
    assert again is out
    for name, ref in _numpy(uv3, vv3).items():
        np.testing.assert_array_equal(again[name].get(), ref)
    assert prg.replay_counts() == {"host": 0, "full": 1, "replayed": 0, "frozen": 3}


def test_frozen_outputs_placed(queue):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(8)
    target = cla.empty(queue, (40,), np.float64)
    for k in range(3):
        (uv, vv), inputs = _inputs(queue, rng)
        out = _steady(prg, queue, pool, inputs, {"b": target})
        assert out["b"] is target
        np.testing.assert_array_equal(out["b"].get(), 2 * uv - vv)
    assert prg.replay_counts()["frozen"] == 2


@pytest.mark.parametrize("change", ["shape", "dtype", "missing", "strided",
                                    "queue"])
def test_another_layout_leaves_the_frozen_form(queue, change):
    prg = _stencil_program()
    pool = _pool(queue)
    rng = np.random.default_rng(7)
    (uv, vv), inputs = _inputs(queue, rng)
    _steady(prg, queue, pool, inputs)
    out = _steady(prg, queue, pool, inputs)
    assert type(out) is KeptOutputs
    before = {k: v.get() for k, v in out.items()}
    call_queue = queue
    if change == "shape":
        bad = dict(inputs, u=cla.to_device(queue, np.zeros(41)))
    elif change == "dtype":
        bad = dict(inputs, u=cla.to_device(queue, np.zeros(40, np.float32)))
    elif change == "missing":
        bad = {k: v for k, v in inputs.items() if k != "v"}
    elif change == "strided":
        uv = np.arange(80.0)[::2]
        bad = dict(inputs, u=cla.to_device(queue, np.arange(80.0))[::2])
    else:
        bad = inputs
        call_queue = cl.CommandQueue(queue.context)
    errors = {"shape": InputShapeMismatchError,
              "dtype": InputDTypeMismatchError, "missing": MissingInputError}
    if change in errors:
        with pytest.raises(errors[change]):
            _steady(prg, call_queue, pool, bad)
    else:
        res = _steady(prg, call_queue, pool, bad)
        call_queue.finish()
        assert res is not out
        for name, ref in _numpy(uv, vv).items():
            np.testing.assert_array_equal(res[name].get(), ref)
    # the frozen outputs were not written
    for k, v in out.items():
        np.testing.assert_array_equal(v.get(), before[k])


def test_what_cannot_be_frozen_runs_replayed(queue, monkeypatch):
    pool = _pool(queue)
    # run-time checks read values back after the call (a gather's index
    # range)
    x = pt.make_placeholder("x", (40,), np.float64)
    idx = pt.make_placeholder("idx", (5,), np.int64)
    checked = pt.generate_loopy({"g": x[idx] + 1})
    assert checked.checks
    gathered = {"x": cla.to_device(queue, np.arange(40.0)),
                "idx": cla.to_device(queue, np.arange(5) * 3)}
    for _ in range(3):
        out = _steady(checked, queue, pool, gathered)
        assert type(out) is not KeptOutputs
        np.testing.assert_array_equal(out["g"].get(), np.arange(5) * 3 + 1.0)
    assert checked.replay_counts() == {"host": 0, "full": 1, "replayed": 2, "frozen": 0}

    # temporaries over the limit would stay allocated
    monkeypatch.setattr(replay_module, "FROZEN_TEMPORARY_BYTES", 8)
    prg = _stencil_program()
    rng = np.random.default_rng(9)
    for _ in range(3):
        (uv, vv), inputs = _inputs(queue, rng)
        out = _steady(prg, queue, pool, inputs)
        assert type(out) is not KeptOutputs
        np.testing.assert_array_equal(out["a"].get(), _numpy(uv, vv)["a"])
    assert prg.replay_counts()["frozen"] == 0


def test_an_output_that_is_an_input_is_not_frozen(queue):
    """An output naming an input: the call hands back the input itself,
    never a kept array."""
    pool = _pool(queue)
    x = pt.make_placeholder("x", (40,), np.float64)
    prg = pt.generate_loopy({"x_again": x, "y": x + 1})
    xs = {"x": cla.to_device(queue, np.arange(40.0))}
    for k in range(3):
        xs["x"].set(np.arange(40.0) * (k + 2))
        out = _steady(prg, queue, pool, xs)
        np.testing.assert_array_equal(out["x_again"].get(),
                                      np.arange(40.0) * (k + 2))
        np.testing.assert_array_equal(out["y"].get(),
                                      np.arange(40.0) * (k + 2) + 1)


def test_frozen_calls_sharing_a_kernel_keep_their_own_arguments(queue):
    """Two programs of the same code share their compiled kernels; frozen
    calls of both, alternating with replayed calls that set the shared
    kernels' arguments, each compute from their own inputs."""
    pool = _pool(queue)
    rng = np.random.default_rng(10)
    first, second = _stencil_program(), _stencil_program()
    (u1, v1), in1 = _inputs(queue, rng)
    (u2, v2), in2 = _inputs(queue, rng)
    (u3, v3), in3 = _inputs(queue, rng)
    third = _stencil_program()
    for _ in range(3):
        out1 = _steady(first, queue, pool, in1)
        _, out3 = third(queue, allocator=pool, out_host=False, **in3)
        out2 = _steady(second, queue, pool, in2)
        for out, (uv, vv) in ((out1, (u1, v1)), (out2, (u2, v2)),
                              (out3, (u3, v3))):
            for name, ref in _numpy(uv, vv).items():
                np.testing.assert_array_equal(out[name].get(), ref)
    assert first.replay_counts()["frozen"] == 2
    assert second.replay_counts()["frozen"] == 2


def test_inputs_named_like_options_are_inputs(queue):
    a = pt.make_placeholder("allocator", (6,), np.float64)
    o = pt.make_placeholder("placed_outputs", (6,), np.float64)
    prg = pt.generate_loopy({"r": a - 2 * o})
    for k in range(3):
        av, ov = np.arange(6.0) + k, np.full(6, 0.5 * k)
        _, out = prg(queue, allocator=cla.to_device(queue, av),
                     placed_outputs=cla.to_device(queue, ov))
        assert isinstance(out["r"], cla.Array)
        np.testing.assert_array_equal(out["r"].get(), av - 2 * ov)
    assert prg.replay_counts()["replayed"] == 2
    # and through an executable bound to the queue's context
    executable = prg.bind_to_context(queue.context)
    av, ov = np.arange(6.0) - 1, np.full(6, 3.0)
    _, out = executable(queue, allocator=cla.to_device(queue, av),
                        placed_outputs=cla.to_device(queue, ov))
    np.testing.assert_array_equal(out["r"].get(), av - 2 * ov)
