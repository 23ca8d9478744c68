"""The replay's own launches (target/loopy/replay.py): kernels enqueued
from what loopy's launchers were seen to do (captured at record time),
outputs made as copies of a recorded array, the layout checked against
the last replay directly -- each against NumPy, and each falling back
(to loopy's launcher, to the layout key, to the full call) when what it
assumes does not hold."""

from __future__ import annotations

import numpy as np
import pytest
from _replays import n_replayed, recorded_replays

import pytato_like as pt
from pytato_like.target.loopy import replay as replay_module
from pytato_like.target.loopy.replay import capture_launcher

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def _parametric_program():
    """Several launches, temporaries between them, a reduction and a size
    parameter (passed to kernels as a scalar argument)."""
    n = pt.make_size_param("n")
    u = pt.make_placeholder("u", (n,), np.float64)
    v = pt.make_placeholder("v", (n,), np.float64)
    t1 = (u * v + 1).tagged(pt.tags.ImplStored())
    t2 = (2 * t1 - u).tagged(pt.tags.ImplStored())
    return pt.generate_loopy({"a": t2 * t1, "b": u - 2 * v,
                              "s": pt.sum(t2 * v)})


def _numpy_parametric(uv, vv):
    t1 = uv * vv + 1
    t2 = 2 * t1 - uv
    return {"a": t2 * t1, "b": uv - 2 * vv, "s": np.sum(t2 * vv)}


def _check(out, expected):
    for name, ref in expected.items():
        np.testing.assert_allclose(out[name].get(), ref, rtol=1e-12,
                                   atol=1e-12)


def test_captured_launches_give_numpys_results(queue):
    prg = _parametric_program()
    assert len(prg.plan.launches) >= 2
    assert any(b.kind == "temporary" for b in prg.plan.buffers.values())
    rng = np.random.default_rng(0)
    kept = []
    for length in (300, 300, 300, 300, 41, 41, 300):
        uv, vv = rng.standard_normal(length), rng.standard_normal(length)
        _, out = prg(queue, u=cla.to_device(queue, uv),
                     v=cla.to_device(queue, vv))
        kept.append((out, _numpy_parametric(uv, vv)))
    # every call's outputs are its own: checked after all of them ran
    for out, expected in kept:
        _check(out, expected)
    replays = recorded_replays(prg)
    assert len(replays) == 2 and n_replayed(prg) == 5
    # every launch replayed without loopy's launcher, with the size as a
    # scalar argument of at least one kernel
    steps = [launch[-1] for r in replays for launch in r.launches]
    assert all(s is not None for s in steps)
    assert any(step[3] is not None for s in steps for step in s)


def test_replay_outputs_are_arrays_of_their_own(queue):
    import pyopencl.tools as cl_tools
    x = pt.make_placeholder("x", (64,), np.float64)
    prg = pt.generate_loopy({"y": 3 * x, "z": x + 1})
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    other = cl.CommandQueue(queue.context)
    xv = cla.to_device(queue, np.arange(64.0))
    prg(queue, x=xv, allocator=pool)
    _, first = prg(queue, x=xv, allocator=pool)
    _, second = prg(other, x=xv.with_queue(other), allocator=pool)
    assert n_replayed(prg) == 2
    for out, q in ((first, queue), (second, other)):
        for ary in out.values():
            assert type(ary) is cla.Array
            assert ary.queue is q and ary.allocator is pool
            assert ary.shape == (64,) and ary.strides == (8,)
            assert ary.dtype == np.float64 and ary.offset == 0
            assert ary.events == []
    assert first["y"].events is not second["y"].events
    assert first["y"].base_data is not second["y"].base_data
    # arrays work as pyopencl arrays: arithmetic, views, copies
    np.testing.assert_array_equal((first["y"] + first["z"]).get(),
                                  4 * np.arange(64.0) + 1)
    np.testing.assert_array_equal(second["y"][10:12].get(), [30.0, 33.0])
    np.testing.assert_array_equal(second["z"].copy().get(),
                                  np.arange(64.0) + 1)


@pytest.mark.parametrize("change", ["dtype", "shape", "offset", "strides",
                                    "host", "other_queue", "other_name",
                                    "size_param"])
def test_a_changed_layout_is_not_replayed_as_the_last_one(queue, change):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    y = pt.make_placeholder("y", (n,), np.float64)
    prg = pt.generate_loopy({"out": 2 * x + y})
    xv = np.linspace(0, 1, 12)
    yv = np.arange(12.0)
    dx, dy = cla.to_device(queue, xv), cla.to_device(queue, yv)
    for _ in range(3):
        prg(queue, x=dx, y=dy)
    assert n_replayed(prg) == 2
    last = prg._last_replay
    big_host = np.arange(30.0)
    big = cla.to_device(queue, big_host)
    kwargs = {"x": dx, "y": dy}
    xref, yref = xv, yv
    # a layout of its own (its full call, then its own replay), except
    # for another queue of the context: the same replay, found by the
    # layout key
    replayed_here = False
    if change == "dtype":
        kwargs["x"] = cla.to_device(queue, xv.astype(np.float32))
    elif change == "shape":
        kwargs = {"x": cla.to_device(queue, xv[:5]),
                  "y": cla.to_device(queue, yv[:5])}
        xref, yref = xv[:5], yv[:5]
    elif change == "offset":
        kwargs["y"], yref = big[3:15], big_host[3:15]
    elif change == "strides":
        kwargs["y"], yref = big[::2][:12], big_host[::2][:12]
    elif change == "host":
        kwargs["y"] = yv
    elif change == "other_queue":
        kwargs["x"] = dx.with_queue(cl.CommandQueue(queue.context))
        replayed_here = True
    elif change == "other_name":
        kwargs = {"y": dy, "x": dx}          # another order of the names
    elif change == "size_param":
        kwargs["n"] = 12
    for _ in range(2):
        runs = last.n_runs
        if change == "dtype":
            from pytato_like import diagnostic
            with pytest.raises(diagnostic.InputDTypeMismatchError,
                               match="'x'"):
                prg(queue, **kwargs)
        else:
            _, out = prg(queue, **kwargs)
            np.testing.assert_allclose(out["out"].get(), 2 * xref + yref)
        assert last.n_runs == runs + replayed_here
    # and it is still there for the recorded layout
    runs = last.n_runs
    _, out = prg(queue, x=dx, y=dy)
    np.testing.assert_allclose(out["out"].get(), 2 * xv + yv)
    assert prg._last_replay is last and last.n_runs == runs + 1


def test_a_launcher_the_capture_does_not_know_runs_itself(queue,
                                                          monkeypatch):
    # as if loopy's launchers did something the capture refuses: the
    # replay calls them
    monkeypatch.setattr(replay_module, "capture_launcher",
                        lambda *args: None)
    prg = _parametric_program()
    rng = np.random.default_rng(3)
    for _ in range(3):
        uv, vv = rng.standard_normal(77), rng.standard_normal(77)
        _, out = prg(queue, u=cla.to_device(queue, uv),
                     v=cla.to_device(queue, vv))
        _check(out, _numpy_parametric(uv, vv))
    assert n_replayed(prg) == 2
    assert all(launch[-1] is None for r in recorded_replays(prg)
               for launch in r.launches)


def _launcher(body: str):
    """A launcher in the shape loopy generates, with *body*."""
    namespace: dict = {}
    exec("def _lpy_host_k(_lpy_cl_kernels, queue, _pt_a0, _pt_s0, "
         "wait_for=None, allocator=None):\n"
         "    _lpy_knl = _lpy_cl_kernels.k\n" + body, namespace)
    return namespace["_lpy_host_k"]


class _Kernels:
    class k:         # noqa: N801 (a kernel's name)
        num_args = 2


_ENQUEUE = ("    _lpy_evt = _lpy_cl.enqueue_nd_range_kernel(queue, _lpy_knl, "
            "(4,), (2,), None, wait_for, True, True)\n")


def test_capture_of_a_plain_launcher():
    host = _launcher("    _lpy_knl._set_arg_multi((0, _pt_a0))\n"
                     "    _lpy_knl._set_arg_buf_pack_multi((1, b'i', _pt_s0))\n"
                     + _ENQUEUE + "    return _lpy_evt\n")
    steps = capture_launcher(host, _Kernels, {"_pt_s0": 7}, [("_pt_a0", 3)])
    assert steps is not None and len(steps) == 1
    knl, template, fills, packed, gsize, lsize, offset, g_times_l, \
        allow_empty = steps[0]
    assert knl is _Kernels.k
    assert template == [0, None] and fills == ((1, 3),)
    assert packed == (1, b"i", 7)
    assert (gsize, lsize, offset, g_times_l, allow_empty) == (
        (4,), (2,), None, True, True)


@pytest.mark.parametrize("body", [
    # asks the allocator for memory
    "    allocator(16)\n" + _ENQUEUE + "    return _lpy_evt\n",
    # another pyopencl function
    "    _lpy_cl.enqueue_copy(queue, _pt_a0, _pt_a0)\n" + _ENQUEUE
    + "    return _lpy_evt\n",
    # looks at the queue
    "    queue.device\n" + _ENQUEUE + "    return _lpy_evt\n",
    # a buffer passed as a scalar, a size as a buffer
    "    _lpy_knl._set_arg_buf_pack_multi((0, b'i', _pt_a0))\n" + _ENQUEUE
    + "    return _lpy_evt\n",
    "    _lpy_knl._set_arg_multi((0, _pt_s0))\n" + _ENQUEUE
    + "    return _lpy_evt\n",
    # enqueues nothing, or returns something else than its event
    "    return None\n",
    _ENQUEUE + "    return wait_for\n",
    # a second enqueue not waiting for the first
    _ENQUEUE + _ENQUEUE + "    return _lpy_evt\n",
    # arguments set after the last enqueue
    _ENQUEUE + "    _lpy_knl._set_arg_multi((0, _pt_a0))\n"
    + "    return _lpy_evt\n",
    # a global size computed from a buffer
    "    _lpy_evt = _lpy_cl.enqueue_nd_range_kernel(queue, _lpy_knl, "
    "(_pt_a0,), (2,), None, wait_for, True, True)\n    return _lpy_evt\n",
    # an error
    "    raise RuntimeError('no')\n",
])
def test_capture_refuses_what_it_does_not_reproduce(body):
    host = _launcher(body)
    assert capture_launcher(host, _Kernels, {"_pt_s0": 7},
                            [("_pt_a0", 3)]) is None


def test_capture_of_two_enqueues_waiting_in_turn():
    host = _launcher("    _lpy_knl._set_arg_multi((0, _pt_a0))\n" + _ENQUEUE
                     + "    wait_for = [_lpy_evt]\n"
                     "    _lpy_knl._set_arg_multi((0, _pt_a0))\n" + _ENQUEUE
                     + "    return _lpy_evt\n")
    steps = capture_launcher(host, _Kernels, {"_pt_s0": 7}, [("_pt_a0", 5)])
    assert steps is not None and len(steps) == 2
    assert all(step[2] == ((1, 5),) for step in steps)



def test_one_capture_gets_each_launch_its_own_slots():
    host = _launcher("    _lpy_knl._set_arg_multi((0, _pt_a0))\n"
                     "    _lpy_knl._set_arg_buf_pack_multi((1, b'i', _pt_s0))\n"
                     + _ENQUEUE + "    return _lpy_evt\n")
    # captured once with positions for slots, as a replay does per form
    # of launch; each launch puts its own slots in
    by_position = capture_launcher(host, _Kernels, {"_pt_s0": 7},
                                   [("_pt_a0", 0)])
    first = replay_module._slotted(by_position, [3])
    second = replay_module._slotted(by_position, [9])
    # another size value is another capture (it is packed into the steps)
    third = capture_launcher(host, _Kernels, {"_pt_s0": 8}, [("_pt_a0", 9)])
    assert first[0][2] == ((1, 3),) and second[0][2] == ((1, 9),)
    assert second[0][3] == (1, b"i", 7) and third[0][3] == (1, b"i", 8)
    assert first[0][1] is second[0][1]      # one template, read only
    # the same as a capture with that slot
    assert second == capture_launcher(host, _Kernels, {"_pt_s0": 7},
                                      [("_pt_a0", 9)])


def test_placed_arrays_are_checked_when_they_change(queue):
    x = pt.make_placeholder("x", (16,), np.float64)
    prg = pt.generate_loopy({"a": 2 * x, "b": x - 1})
    xv = cla.to_device(queue, np.arange(16.0))
    good = cla.empty(queue, (16,), np.float64)
    wrong = cla.empty(queue, (8,), np.float64)
    prg(queue, placed_outputs={"a": good}, x=xv)
    for placed, computed_into in (({"a": good}, good), ({"a": wrong}, None),
                                  ({"a": good}, good),
                                  ({"a": cla.empty(queue, (16,), np.float32)},
                                   None)):
        xk = cla.to_device(queue, np.arange(16.0) * 3)
        _, out = prg(queue, placed_outputs=placed, x=xk)
        if computed_into is None:
            assert out["a"] is not placed["a"]
        else:
            assert out["a"] is computed_into
        np.testing.assert_array_equal(out["a"].get(), 6 * np.arange(16.0))
        np.testing.assert_array_equal(out["b"].get(), 3 * np.arange(16.0) - 1)
    assert n_replayed(prg) == 4


def test_the_same_array_for_two_inputs_counts_once_in_the_peak(queue):
    x = pt.make_placeholder("x", (1000,), np.float64)
    y = pt.make_placeholder("y", (1000,), np.float64)
    prg = pt.generate_loopy(x * y + 1)
    a = cla.to_device(queue, np.full(1000, 3.0))
    b = cla.to_device(queue, np.full(1000, 2.0))
    prg(queue, x=a, y=a)
    shared_peak = prg.stats.peak_device_bytes
    _, (got,) = prg(queue, x=a, y=b)           # replayed
    distinct_peak = prg.stats.peak_device_bytes
    assert distinct_peak == shared_peak + a.nbytes
    np.testing.assert_array_equal(got.get(), np.full(1000, 7.0))
    _, (got,) = prg(queue, x=a, y=a)
    assert prg.stats.peak_device_bytes == shared_peak
    np.testing.assert_array_equal(got.get(), np.full(1000, 10.0))
    _, (got,) = prg(queue, x=b, y=a)
    assert prg.stats.peak_device_bytes == distinct_peak
    np.testing.assert_array_equal(got.get(), np.full(1000, 7.0))
    assert n_replayed(prg) == 3
    # the full call's figures
    prg.__dict__["_replays"] = {}
    prg._last_replay = None
    prg(queue, x=b, y=a)
    assert prg.stats.peak_device_bytes == distinct_peak
    assert n_replayed(prg) == 0


def test_inputs_named_like_options_on_the_replay(queue):
    names = ("allocator", "wait_for", "out_host")
    phs = {n: pt.make_placeholder(n, (3,), np.float64) for n in names}
    prg = pt.generate_loopy(phs["allocator"] + 2 * phs["wait_for"]
                            + 3 * phs["out_host"])
    for k in range(3):
        values = {n: cla.to_device(queue, np.full(3, float(i + k)))
                  for i, n in enumerate(names)}
        _, (got,) = prg(queue, **values)
        np.testing.assert_array_equal(got.get(),
                                      np.full(3, k + 2 * (1 + k)
                                              + 3 * (2 + k)))
    assert n_replayed(prg) == 2


def test_a_time_loops_launches_share_their_capture_with_own_slots(queue,
                                                                  monkeypatch):
    # 300 steps of a stencil over a size parameter: the steps' launches
    # are of a few forms, captured once each, and every launch sets its
    # own buffers (temporaries of its step) and the sizes of this call
    n = pt.make_size_param("n")
    u = pt.make_placeholder("u", (n, 8), np.float64)
    x = u
    for _ in range(300):
        x = x + 0.1 * (pt.roll(x, 1, axis=0) + pt.roll(x, -1, axis=0)
                       - 2 * x)
    prg = pt.generate_loopy(x)
    captures = []
    real_capture = replay_module.capture_launcher

    def counted(*args):
        captures.append(args)
        return real_capture(*args)

    rng = np.random.default_rng(5)
    monkeypatch.setattr(replay_module, "capture_launcher", counted)
    for length in (40, 40, 17):
        uv = rng.standard_normal((length, 8))
        _, (out,) = prg(queue, u=cla.to_device(queue, uv))
        expected = uv
        for _ in range(300):
            expected = expected + 0.1 * (np.roll(expected, 1, axis=0)
                                         + np.roll(expected, -1, axis=0)
                                         - 2 * expected)
        np.testing.assert_allclose(out.get(), expected, rtol=1e-11,
                                   atol=1e-11)
    (replay, *_), sizes = recorded_replays(prg), set()
    assert len(replay.launches) >= 300
    # one capture per form of launch (kernel, size) and recorded layout,
    # not one per launch
    assert 0 < len(captures) <= 2 * len(prg.plan.kernels)
    for _, _, constant_args, buffer_args, _, _, direct in replay.launches:
        assert direct is not None
        sizes.update(constant_args.values())
        # each captured enqueue fills slots of this launch's buffers only
        filled = {s for _, _, fills, *_ in direct for _, s in fills}
        assert filled <= {s for _, s in buffer_args}
    assert sizes <= {40, 17} and sizes
    # the steps' temporaries: many slots among the launches
    assert len({s for launch in replay.launches for _, s in launch[3]}) > 10
