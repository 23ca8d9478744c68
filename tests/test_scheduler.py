"""The one part scheduler (pytato_like.scheduler.run_parts): dependency
order, hooks (arrivals, forwarding, input preparation), errors, and a
partition of 10 000 chained parts. References: NumPy and the NumPy target
on the unpartitioned DAG."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import MissingInputError, PartitionInducedCycleError
from pytato_like.partition import (
    GraphPart,
    GraphPartition,
    execute_partition,
    find_partition,
    generate_code_for_partition,
)
from pytato_like.scheduler import PartHooks, run_parts


def _chain_partition(n):
    """``y = 0.5 * y + 1`` *n* times, each update its own part."""
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for _ in range(n):
        y = 0.5 * y + 1.0
    counter = itertools.count()
    pids: dict[int, int] = {}

    def part_of(node):
        # one part per update (its product and its sum)
        if id(node) not in pids:
            pids[id(node)] = next(counter) // 2
        return pids[id(node)]
    return y, find_partition({"y": y}, part_of)


def _chain_reference(xv, n):
    y = xv.copy()
    for _ in range(n):
        y = 0.5 * y + 1.0
    return y


def test_ten_thousand_chained_parts_on_the_numpy_target():
    n = 10_000
    y, partition = _chain_partition(n)
    assert len(partition.parts) == n
    prgs = generate_code_for_partition(partition, target="numpy")
    xv = np.array([-3.0, 0.0, 5.0])
    got = execute_partition(partition, prgs, None, {"x": xv})
    np.testing.assert_allclose(got["y"], _chain_reference(xv, n), rtol=1e-14)
    # the parts ran in the only order the chain allows
    order = []

    class Recording(PartHooks):
        def part_done(self, pid, outputs, event):
            order.append(pid)
    values, n_run = run_parts(partition, prgs, Recording(), {"x": xv})
    assert n_run == n and order == partition.toposorted_part_ids
    np.testing.assert_allclose(values["y"], got["y"], rtol=0)


def test_without_arrivals_parts_run_in_toposorted_order():
    x = pt.make_placeholder("x", (4,), np.float64)
    a, b = 2 * x, x + 3
    c = a * b
    parts = {id(a): "a", id(b): "b", id(c): "c"}
    partition = find_partition({"c": c, "b": b},
                               lambda node: parts.get(id(node), "c"))
    prgs = generate_code_for_partition(partition, target="numpy")
    order = []

    class Recording(PartHooks):
        def part_ready(self, pid):
            order.append(("ready", pid))

        def part_done(self, pid, outputs, event):
            order.append(("done", pid))
    xv = np.arange(4.0)
    values, _ = run_parts(partition, prgs, Recording(), {"x": xv})
    done = [pid for what, pid in order if what == "done"]
    assert done == partition.toposorted_part_ids
    assert order.index(("ready", "c")) > order.index(("done", "a"))
    np.testing.assert_allclose(values["c"], (2 * xv) * (xv + 3))
    np.testing.assert_allclose(
        values["c"], pt.generate_numpy(c)(x=xv), rtol=0)


def _received_partition():
    """Part "early" reads only x; part "late" reads a value received from
    elsewhere under the name "recv" (as a distributed part does)."""
    x = pt.make_placeholder("x", (3,), np.float64)
    r = pt.make_placeholder("recv", (3,), np.float64)
    early, late = x * 2, r + 1
    parts = {
        "late": GraphPart("late", frozenset(), frozenset(),
                          frozenset({"recv"}), frozenset({"l"})),
        "early": GraphPart("early", frozenset(), frozenset({"x"}),
                           frozenset(), frozenset({"e"})),
    }
    partition = GraphPartition(parts=parts,
                               name_to_output={"l": late, "e": early},
                               overall_output_names=("l", "e"),
                               toposorted_part_ids=["late", "early"])
    prgs = generate_code_for_partition(partition, target="numpy")
    return partition, prgs


class _Arrivals(PartHooks):
    """Delivers "recv" on the first blocking call, as an MPI exchange
    delivers a message."""

    def __init__(self, value):
        super().__init__()
        self.pending = {"recv": value}
        self.log = []

    def awaited_names(self, pid, part):
        return part.partition_input_names

    def n_pending(self):
        return len(self.pending)

    def arrivals(self, block):
        self.log.append(("arrivals", block))
        if not block:
            return []
        got, self.pending = list(self.pending.items()), {}
        return got

    def part_done(self, pid, outputs, event):
        self.log.append(("done", pid))


def test_a_part_waiting_for_an_arrival_lets_ready_parts_run_first():
    partition, prgs = _received_partition()
    rv = np.array([1.0, 2.0, 3.0])
    hooks = _Arrivals(rv)
    values, n_run = run_parts(partition, prgs, hooks,
                              {"x": np.ones(3)})
    assert n_run == 2
    # "late" comes first in toposorted order but waits for its message
    assert [e for e in hooks.log if e[0] == "done"] == [
        ("done", "early"), ("done", "late")]
    assert ("arrivals", True) in hooks.log
    np.testing.assert_allclose(values["l"], rv + 1)
    np.testing.assert_allclose(values["e"], 2 * np.ones(3))


def test_arrivals_are_polled_after_every_part_even_with_nothing_pending():
    # the MPI executor's exchange starts ready sends in the non-blocking
    # call: it must come after every part, the last one included
    partition, prgs = _received_partition()
    hooks = _Arrivals(np.zeros(3))
    run_parts(partition, prgs, hooks, {"x": np.ones(3)})
    log = hooks.log
    for pid in ("early", "late"):
        i = log.index(("done", pid))
        assert log[i + 1] == ("arrivals", False), log
    # "late" ran after its value arrived, with nothing pending any more
    assert log.index(("arrivals", True)) < log.index(("done", "late"))


def test_nothing_pending_and_nothing_ready_is_an_error_naming_the_part():
    partition, prgs = _received_partition()
    hooks = _Arrivals(None)
    hooks.pending = {}
    with pytest.raises(MissingInputError, match="late.*recv"):
        run_parts(partition, prgs, hooks, {"x": np.ones(3)})


def test_needed_pids_in_a_cycle_are_reported():
    x = pt.make_placeholder("x", (2,), np.float64)
    parts = {
        "p": GraphPart("p", frozenset({"q"}), frozenset({"x"}), frozenset(),
                       frozenset({"a"})),
        "q": GraphPart("q", frozenset({"p"}), frozenset({"x"}), frozenset(),
                       frozenset({"b"})),
    }
    partition = GraphPartition(parts=parts,
                               name_to_output={"a": x + 1, "b": x + 2},
                               overall_output_names=("a", "b"),
                               toposorted_part_ids=["p", "q"])
    with pytest.raises(PartitionInducedCycleError, match="cycle"):
        run_parts(partition, {}, PartHooks(), {"x": np.ones(2)})


def test_forwarded_outputs_skip_the_program():
    partition, prgs = _received_partition()
    rv = np.array([4.0, 5.0, 6.0])

    class Forwarding(_Arrivals):
        def forwarded_outputs(self, pid, part, values):
            if pid == "late":
                return {"l": values["recv"]}
            return None

    # the program of "late" would add 1; forwarding passes the value on
    values, _ = run_parts(partition, {"early": prgs["early"]},
                          Forwarding(rv), {"x": np.ones(3)})
    np.testing.assert_array_equal(values["l"], rv)


def test_prepare_inputs_replaces_values_and_call_options_reach_the_program():
    x = pt.make_placeholder("x", (3,), np.float64)
    partition = find_partition({"y": x * 3}, lambda node: "only")
    seen = {}

    class Program:
        """A program of another target, called through the contract."""

        def __call__(self, queue, /, *, allocator=None, wait_for=None,
                     out_host=None, **inputs):
            seen.update(queue=queue, allocator=allocator, wait_for=wait_for,
                        out_host=out_host)
            return "event", {"y": inputs["x"] * 3}

    class Hooks(PartHooks):
        def prepare_inputs(self, pid, inputs):
            inputs["x"] = inputs["x"] + 10     # e.g. a copy to the device
            return ["copied"]

        def call_options(self, pid, prg):
            return {"allocator": "pool"}

        def part_done(self, pid, outputs, event):
            seen["event"] = event

    xv = np.arange(3.0)
    values, _ = run_parts(partition, {"only": Program()}, Hooks("q"),
                          {"x": xv})
    np.testing.assert_allclose(values["y"], (xv + 10) * 3)
    assert seen == {"queue": "q", "allocator": "pool", "wait_for": ["copied"],
                    "out_host": False, "event": "event"}

    class Placed(Hooks):
        # an executor's own entry point (as the MPI executor's placed call)
        def call_program(self, pid, prg, queue, kwargs):
            seen["kwargs"] = sorted(kwargs)
            return "placed event", {"y": kwargs["x"] * 4}

    seen.clear()
    values, _ = run_parts(partition, {"only": Program()}, Placed(None),
                          {"x": xv})
    np.testing.assert_allclose(values["y"], (xv + 10) * 4)
    assert seen == {"kwargs": ["allocator", "out_host", "wait_for", "x"],
                    "event": "placed event"}



class _CachedArrivals(_Arrivals):
    """:class:`_Arrivals` whose scheduler tables outlive a run, as the MPI
    executor keeps them with its message plan."""

    def __init__(self, value, cache):
        super().__init__(value)
        self.cache = cache

    def table_cache(self):
        return self.cache


def test_tables_kept_between_runs_give_the_same_schedule_and_values():
    partition, prgs = _received_partition()
    cache: dict = {}
    runs = []
    for rv in (np.array([1.0, 2.0, 3.0]), np.array([-4.0, 0.5, 9.0])):
        hooks = _CachedArrivals(rv, cache)
        values, n_run = run_parts(partition, prgs, hooks, {"x": np.ones(3)})
        assert n_run == 2
        np.testing.assert_allclose(values["l"], rv + 1)
        np.testing.assert_allclose(values["e"], 2 * np.ones(3))
        runs.append([e for e in hooks.log if e[0] == "done"])
    # one set of tables, made on the first run and used by the second
    assert len(cache) == 1
    assert runs[0] == runs[1] == [("done", "early"), ("done", "late")]


def test_tables_depend_on_the_names_provided():
    """The received name given as an input: "late" need not wait, and the
    tables made for that run are not those of a run that waits."""
    partition, prgs = _received_partition()
    cache: dict = {}
    rv = np.array([1.0, 2.0, 3.0])
    hooks = _CachedArrivals(rv, cache)
    hooks.pending = {}
    values, _ = run_parts(partition, prgs, hooks,
                          {"x": np.ones(3), "recv": rv})
    assert ("arrivals", True) not in hooks.log
    np.testing.assert_allclose(values["l"], rv + 1)
    hooks = _CachedArrivals(rv, cache)
    values, _ = run_parts(partition, prgs, hooks, {"x": np.ones(3)})
    assert ("arrivals", True) in hooks.log
    np.testing.assert_allclose(values["l"], rv + 1)
    assert len(cache) == 2
    # a missing received name is still reported with cached tables
    hooks = _CachedArrivals(None, cache)
    hooks.pending = {}
    with pytest.raises(MissingInputError, match="late.*recv"):
        run_parts(partition, prgs, hooks, {"x": np.ones(3)})
