"""Pausing Python's garbage collector during repeated executions
(pytato_like/collector.py): the switch itself (nesting, threads, a
collector the program disabled, the environment setting) and the
executions that pause it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError
from pytato_like.distributed import (
    execute_distributed_partition,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
)
from pytato_like.collector import collection_paused, pausing_enabled


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_pause_turns_collection_off_and_back_on(collector_enabled):
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        # the outer pause is still under way
        assert not gc.isenabled()
    assert gc.isenabled()
    with collection_paused(False):
        assert gc.isenabled()


def test_a_collector_the_program_disabled_stays_disabled(collector_enabled):
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_pause_ends_on_an_exception(collector_enabled):
    with pytest.raises(KeyError), collection_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_overlapping_pauses_of_two_threads(collector_enabled):
    inside, leave = threading.Event(), threading.Event()

    def other():
        with collection_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(10)
    with collection_paused():
        assert not gc.isenabled()
    # the other thread's pause is still under way
    assert not gc.isenabled()
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_the_environment_switch(monkeypatch):
    monkeypatch.delenv("PYTATO_LIKE_PAUSE_GC", raising=False)
    assert pausing_enabled()
    monkeypatch.setenv("PYTATO_LIKE_PAUSE_GC", "0")
    assert not pausing_enabled()
    monkeypatch.setenv("PYTATO_LIKE_PAUSE_GC", "sometimes")
    with pytest.raises(ConfigurationError,
                       match="PYTATO_LIKE_PAUSE_GC='sometimes'"):
        pausing_enabled()


class _Watched:
    """A part program that notes whether the collector was on when called."""

    def __init__(self, prg, seen):
        self.prg = prg
        self.seen = seen

    def __call__(self, queue, **kwargs):
        self.seen.append(gc.isenabled())
        return self.prg(queue, **kwargs)


def _periodic_heat(n, steps):
    u = pt.make_placeholder("u", (n,))
    for k in range(steps):
        u = staple_distributed_send(u[:1], 0, ("left", k), u)
        u = staple_distributed_send(u[-1:], 0, ("right", k), u)
        ext = pt.concatenate([make_distributed_recv(0, ("right", k), (1,)),
                              u, make_distributed_recv(0, ("left", k), (1,))])
        u = u + 0.25 * (ext[:-2] - 2 * u + ext[2:])
    return {"u": u}


@pytest.mark.parametrize("setting", [None, "0"])
def test_executions_after_the_first_run_with_the_collector_paused(
        collector_enabled, monkeypatch, setting):
    if setting is None:
        monkeypatch.delenv("PYTATO_LIKE_PAUSE_GC", raising=False)
    else:
        monkeypatch.setenv("PYTATO_LIKE_PAUSE_GC", setting)
    n, steps = 64, 3
    partition = find_distributed_partition(None, _periodic_heat(n, steps))
    partition, _ = number_distributed_tags(None, partition, 3)
    seen: list[bool] = []
    prgs = {pid: _Watched(prg, seen) for pid, prg in
            generate_code_for_partition(partition, target="numpy").items()}
    u = np.random.default_rng(0).standard_normal(n)
    want = u
    for _ in range(steps):
        want = want + 0.25 * (np.roll(want, 1) - 2 * want + np.roll(want, -1))
    per_execution = []
    for _ in range(3):
        seen.clear()
        got = execute_distributed_partition(partition, prgs, None, None,
                                            input_args={"u": u})
        np.testing.assert_allclose(got["u"], want, rtol=1e-14, atol=1e-14)
        per_execution.append(set(seen))
        assert gc.isenabled()       # back on after each
    paused = setting is None
    assert per_execution == [{True}] + [{not paused}] * 2


def test_the_decorator_pauses_each_call(collector_enabled, monkeypatch):
    from pytato_like.collector import paused_collection

    @paused_collection
    def work(x):
        """Doc."""
        if x < 0:
            raise ValueError(x)
        return gc.isenabled(), x

    assert work.__name__ == "work" and work.__doc__ == "Doc."
    assert work(1) == (False, 1)
    assert gc.isenabled()
    with pytest.raises(ValueError):
        work(-1)
    assert gc.isenabled()
    # the setting is read at each call
    monkeypatch.setenv("PYTATO_LIKE_PAUSE_GC", "0")
    assert work(2) == (True, 2)


@pytest.mark.parametrize("setting", [None, "0"])
def test_code_generation_and_the_first_call_run_with_the_collector_paused(
        collector_enabled, monkeypatch, queue, setting):
    # a DAG's key (code generation) and the recording of its first call
    from pytato_like.target.loopy import cache
    from pytato_like.target.loopy.replay import LaunchReplay
    if setting is None:
        monkeypatch.delenv("PYTATO_LIKE_PAUSE_GC", raising=False)
    else:
        monkeypatch.setenv("PYTATO_LIKE_PAUSE_GC", setting)
    seen: dict[str, bool] = {}
    dag_key, record = cache.dag_key, LaunchReplay.record

    def watched_key(*args, **kwargs):
        seen["key"] = gc.isenabled()
        return dag_key(*args, **kwargs)

    def watched_record(*args, **kwargs):
        seen["record"] = gc.isenabled()
        return record(*args, **kwargs)
    monkeypatch.setattr(cache, "dag_key", watched_key)
    monkeypatch.setattr(LaunchReplay, "record", staticmethod(watched_record))
    x = pt.make_placeholder("x", (50,), np.float64)
    y = x
    for _ in range(30):
        y = 0.5 * pt.roll(y, 1) + 0.25 * y
    prg = pt.generate_loopy(y)
    assert gc.isenabled()
    a = np.random.default_rng(1).standard_normal(50)
    _, (got,) = prg(queue, x=a)
    assert gc.isenabled()
    want = a
    for _ in range(30):
        want = 0.5 * np.roll(want, 1) + 0.25 * want
    np.testing.assert_allclose(got, want, rtol=1e-13)
    paused = setting is None
    assert seen == {"key": not paused, "record": not paused}
