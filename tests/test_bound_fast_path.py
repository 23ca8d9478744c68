"""The fast path of repeated calls of a loopy bound program (recorded
launches replayed, target/loopy/replay.py): the same results as NumPy and
as the full call, the full call for any other layout, and every call
option kept (wait_for, out_host, allocator, run-time checks, peak memory)."""

from __future__ import annotations

import numpy as np
import pytest
from _replays import n_replayed, recorded_replays

import pytato_like as pt
from pytato_like import diagnostic

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def _stencil(u, steps):
    # stored steps: temporaries between launches
    for _ in range(steps):
        u = (u + 0.25 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))).tagged(
            pt.tags.ImplStored())
    return u


def _numpy_stencil(u, steps):
    for _ in range(steps):
        u = u + 0.25 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def test_replay_of_device_inputs_matches_numpy_for_changing_values(queue):
    n = 1000
    u = pt.make_placeholder("u", (n,), np.float64)
    v = pt.make_placeholder("v", (n,), np.float64)
    prg = pt.generate_loopy({"a": _stencil(u, 4) * v, "b": u - 2 * v,
                             "c": pt.sum(v * v)})
    assert len(prg.plan.launches) > 1
    rng = np.random.default_rng(0)
    kept = []
    for call in range(5):
        uv, vv = rng.standard_normal(n), rng.standard_normal(n)
        _, out = prg(queue, u=cla.to_device(queue, uv),
                     v=cla.to_device(queue, vv))
        assert isinstance(out["a"], cla.Array)
        kept.append((uv, vv, out))
        assert n_replayed(prg) == call          # the first call records
    # every call's outputs are its own (no buffer reused under them)
    for uv, vv, out in kept:
        np.testing.assert_allclose(out["a"].get(), _numpy_stencil(uv, 4) * vv,
                                   rtol=1e-12)
        np.testing.assert_allclose(out["b"].get(), uv - 2 * vv, rtol=1e-12)
        np.testing.assert_allclose(out["c"].get(), np.sum(vv * vv),
                                   rtol=1e-12)


def test_replay_of_host_inputs_gives_host_outputs(queue):
    x = pt.make_placeholder("x", (50, 3), np.float32)
    prg = pt.generate_loopy(2 * x + 1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        xv = rng.standard_normal((50, 3)).astype(np.float32)
        _, (got,) = prg(queue, x=xv)
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, 2 * xv + 1, rtol=1e-6)
        # out_host=False keeps the replayed result on the device
        _, (dev,) = prg(queue, x=xv, out_host=False)
        assert isinstance(dev, cla.Array)
        np.testing.assert_allclose(dev.get(), 2 * xv + 1, rtol=1e-6)
    assert n_replayed(prg) == 5


def test_peak_memory_of_a_replay_is_that_of_the_full_call(queue):
    n, steps = 4096, 6
    u = pt.make_placeholder("u", (n,), np.float64)
    prg = pt.generate_loopy(_stencil(u, steps))
    uv = np.linspace(0, 1, n)
    _, (first,) = prg(queue, u=uv)
    full_peak = prg.stats.peak_device_bytes
    # input, output and at least one temporary
    assert full_peak >= 3 * uv.nbytes
    _, (again,) = prg(queue, u=uv + 1)
    assert n_replayed(prg) == 1
    assert prg.stats.peak_device_bytes == full_peak
    np.testing.assert_allclose(again, _numpy_stencil(uv + 1, steps),
                               rtol=1e-12)
    assert len(prg.stats.calls) == 2


def test_another_shape_takes_the_full_call(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    prg = pt.generate_loopy(pt.sum(x) + x * 3)
    for length in (10, 10, 37, 10, 37, 5):
        xv = np.arange(length, dtype=np.float64)
        _, (got,) = prg(queue, x=cla.to_device(queue, xv))
        np.testing.assert_allclose(got.get(), np.sum(xv) + xv * 3)
        assert got.shape == (length,)
    # one replay per layout (sizes 10 and 37 came again, 5 did not)
    assert n_replayed(prg) == 3
    assert len(recorded_replays(prg)) == 3


def test_a_wrong_shape_or_dtype_after_replays_still_raises(queue):
    x = pt.make_placeholder("x", (8,), np.float64)
    prg = pt.generate_loopy(x + 1)
    for _ in range(3):
        prg(queue, x=cla.zeros(queue, 8, np.float64))
    assert n_replayed(prg) == 2
    with pytest.raises(diagnostic.InputShapeMismatchError, match="'x'"):
        prg(queue, x=cla.zeros(queue, 9, np.float64))
    with pytest.raises(diagnostic.InputDTypeMismatchError, match="'x'"):
        prg(queue, x=cla.zeros(queue, 8, np.float32))
    with pytest.raises(diagnostic.MissingInputError):
        prg(queue)


def test_offset_and_strided_inputs_take_the_full_call(queue):
    x = pt.make_placeholder("x", (6,), np.float64)
    prg = pt.generate_loopy(x * 10)
    base = np.arange(20, dtype=np.float64)
    dev = cla.to_device(queue, base)
    prg(queue, x=dev[:6])
    prg(queue, x=dev[:6])
    assert n_replayed(prg) == 1
    for view, ref in ((dev[4:10], base[4:10]), (dev[1:13:2], base[1:13:2])):
        for _ in range(2):
            _, (got,) = prg(queue, x=view)
            np.testing.assert_array_equal(got.get(), ref * 10)
    # a strided host array too
    for _ in range(2):
        _, (got,) = prg(queue, x=base[::3][:6])
        np.testing.assert_array_equal(got, base[::3][:6] * 10)
    assert n_replayed(prg) == 1


def test_run_time_checks_raise_on_the_replay(queue):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.int64)
    prg = pt.generate_loopy(a[i] * 2)
    assert prg.checks
    av = cla.to_device(queue, np.arange(10.0))
    good = np.array([1, -10, 9])
    for _ in range(2):
        _, (got,) = prg(queue, a=av, i=cla.to_device(queue, good))
        np.testing.assert_array_equal(got.get(), 2 * np.arange(10.0)[good])
    assert n_replayed(prg) == 1
    with pytest.raises(diagnostic.IndexOutOfBoundsError,
                       match="index 11 is out of bounds for axis 0 with "
                             "size 10"):
        prg(queue, a=av, i=cla.to_device(queue, np.array([0, 11, 2])))
    assert n_replayed(prg) == 2       # raised from the replay


def test_replay_waits_for_the_callers_events(queue):
    x = pt.make_placeholder("x", (100,), np.float64)
    prg = pt.generate_loopy(x * x)
    xv = cla.to_device(queue, np.arange(100.0))
    prg(queue, x=xv)
    gate = cl.UserEvent(queue.context)
    evt, (got,) = prg(queue, x=xv, wait_for=[gate])
    assert n_replayed(prg) == 1
    # held back by the gate until it is set
    assert evt.command_execution_status != \
        cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    evt.wait()
    np.testing.assert_array_equal(got.get(), np.arange(100.0) ** 2)


def test_replay_allocates_from_the_callers_allocator(queue):
    import pyopencl.tools as cl_tools
    x = pt.make_placeholder("x", (256,), np.float64)
    prg = pt.generate_loopy(_stencil(x, 3) + 1)
    allocated = []
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))

    def allocator(nbytes):
        allocated.append(nbytes)
        return pool(nbytes)

    xv = cla.to_device(queue, np.ones(256))
    prg(queue, x=xv, allocator=allocator)
    n_full = len(allocated)
    _, (got,) = prg(queue, x=xv, allocator=allocator)
    assert n_replayed(prg) == 1
    # output and temporaries: as many allocations as the full call
    assert len(allocated) == 2 * n_full > 0
    assert got.allocator is allocator
    np.testing.assert_allclose(got.get(), _numpy_stencil(np.ones(256), 3) + 1)


def test_bound_data_and_passed_through_inputs_replay(queue):
    x = pt.make_placeholder("x", (5,), np.float64)
    w = pt.make_data_wrapper(np.arange(5.0), name="w")
    prg = pt.generate_loopy({"y": x * w, "same": x, "data": w})
    for k in range(3):
        xv = cla.to_device(queue, np.full(5, float(k)))
        _, out = prg(queue, x=xv)
        np.testing.assert_array_equal(out["y"].get(), k * np.arange(5.0))
        np.testing.assert_array_equal(out["same"].get(), np.full(5, float(k)))
        np.testing.assert_array_equal(out["data"].get(), np.arange(5.0))
    assert n_replayed(prg) == 2


def test_a_copy_with_another_program_does_not_replay_the_old_one(queue):
    x = pt.make_placeholder("x", (16,), np.float64)
    prg = pt.generate_loopy(x + 1)
    xv = cla.to_device(queue, np.zeros(16))
    prg(queue, x=xv)
    prg(queue, x=xv)
    rebound = pt.generate_loopy(x * pt.make_data_wrapper(np.full(16, 2.0),
                                                         name="d"))
    prg2 = rebound.copy(bound_arguments={"d": np.full(16, 5.0)})
    for _ in range(2):
        _, (got,) = prg2(queue, x=cla.to_device(queue, np.ones(16)))
        np.testing.assert_array_equal(got.get(), np.full(16, 5.0))
    for _ in range(2):
        _, (got,) = rebound(queue, x=cla.to_device(queue, np.ones(16)))
        np.testing.assert_array_equal(got.get(), np.full(16, 2.0))
    assert n_replayed(prg2) == 1 and n_replayed(rebound) == 1


def test_placed_outputs_compute_outputs_into_the_given_arrays(queue):
    x = pt.make_placeholder("x", (32,), np.float64)
    prg = pt.generate_loopy({"a": 2 * x, "b": x + 1, "same": x})
    xv = cla.to_device(queue, np.arange(32.0))
    targets = {"a": cla.empty(queue, (32,), np.float64),
               "b": cla.empty(queue, (32,), np.float64),
               "same": cla.empty(queue, (32,), np.float64)}
    # the first call records its replay and runs it: in place too
    _, out = prg(queue, placed_outputs=targets, x=xv)
    assert out["a"] is targets["a"] and out["b"] is targets["b"]
    np.testing.assert_array_equal(out["same"].get(), np.arange(32.0))
    np.testing.assert_array_equal(out["a"].get(), 2 * np.arange(32.0))
    for k in range(3):
        xk = cla.to_device(queue, np.arange(32.0) + k)
        _, out = prg(queue, placed_outputs=targets, x=xk)
        # computed in place
        assert out["a"] is targets["a"] and out["b"] is targets["b"]
        np.testing.assert_array_equal(out["same"].get(), np.arange(32.0) + k)
        np.testing.assert_array_equal(targets["a"].get(),
                                      2 * (np.arange(32.0) + k))
        np.testing.assert_array_equal(targets["b"].get(), np.arange(32.0)
                                      + k + 1)
    assert n_replayed(prg) == 3
    # an array of the wrong shape or dtype is not used
    wrong = {"a": cla.empty(queue, (31,), np.float64),
             "b": cla.empty(queue, (32,), np.float32)}
    _, out = prg(queue, placed_outputs=wrong, x=xv)
    assert out["a"] is not wrong["a"] and out["b"] is not wrong["b"]
    np.testing.assert_array_equal(out["b"].get(), np.arange(32.0) + 1)
