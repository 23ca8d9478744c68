"""The executor's steady state: later executions of a partition, as the
prepared mode of the part scheduler with hooks made for them.

A solver calls :func:`~pytato_like.execute_distributed_partition` with the
same partition and part programs step after step. The first execution
settles everything a part costs besides its kernels: which parts only
forward received values, which outputs a part program computes straight
into its messages' buffers (see ``comm._PaddedMessage``), which part waits
for which message. From the second execution on, when every message of the
plan travels in such a buffer and every part program is generated loopy
code (:class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`), the
parts run through the one part loop of the scheduler in its prepared mode
(:meth:`~pytato_like.scheduler.PreparedParts.run`, the same tables the
first execution's :func:`~pytato_like.scheduler.run_parts` used) with the
:class:`SteadyParts` hooks of this module instead of the general
``_MPIHooks``:

* the same order rule, messages, trace records and statistics, the same
  failure handling (the executor's: a wait is
  :func:`~pytato_like.distributed.safety.poll_until` and sees other ranks'
  failure notices and a cancel) -- the loop is the scheduler's;
* per part only what must happen each time: per-part tables instead of
  the contract hooks, the program called with its placed outputs
  (``placed_outputs``) -- a part whose outputs stay inside the execution
  also with ``reuse_outputs=True``, a frozen call once its replay fits
  (:class:`~pytato_like.target.loopy.replay.FrozenLaunches`: its buffers and
  kernel arguments kept from one execution to the next; switched off by
  ``PYTATO_LIKE_FREEZE_PARTS=0``),
  the copies of its messages to the host enqueued, the sends whose copy
  has completed started, one non-blocking test of the first
  :data:`POLLED_RECEIVES` receives not arrived yet;
* the receives handled here, on the exchange's persistent requests,
  without its waiting lists rebuilt on each arrival: a receive found
  complete is checked and unpacked by the exchange
  (:meth:`~pytato_like.distributed.comm.Exchange.check_arrival`,
  :meth:`~pytato_like.distributed.comm.Exchange.take_in`); a wait first
  starts every send whose copy is under way (never wait for a peer while
  the data it waits for waits here) and tests the first receives on every
  poll, all of them every :data:`FULL_TEST_EVERY`-th. Sends go through
  the exchange. The receives not taken in go back to the exchange at the
  end, whose ``finish`` waits for them and for the sends (and whose
  ``abandon`` cancels them after a failure).

Measured on the halo benchmark (2 ranks, 10^5 cells per rank, one-cell
halos every step, 2 parts per step): see doc/distributed.rst ("Where the
time goes").

.. autoclass:: SteadyParts
    :members: for_execution, run

.. autodata:: POLLED_RECEIVES
.. autodata:: FULL_TEST_EVERY
.. autodata:: FREEZE_SETTING
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, cast

from pytato_like._env import env_flag
from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed.comm import (
    LazyDescription,
    describe_waiting,
    test_receives,
)
from pytato_like.scheduler import (
    PartHooks,
    PreparedHooks,
    PreparedParts,
    prepare_parts,
)
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

if TYPE_CHECKING:
    import pyopencl as cl
    import pyopencl.array as cla
    from pyopencl.typing import Allocator

    from pytato_like.distributed.comm import (
        Exchange,
        MessagePlan,
        PartMessages,
        PartValue,
        PostedReceive,
    )
    from pytato_like.distributed.partition import DistributedGraphPartition
    from pytato_like.partition import GraphPart
    from pytato_like.runtime.trace import TraceRecord, TraceRecorder
    from pytato_like.target.program import BoundProgram
from pytato_like.target.loopy.lazy import LazyPartProgram
from pytato_like.target.loopy.replay import KeptOutputs

#: how many of the receives not arrived yet (in the plan's order, which is
#: the order the parts need them in) the loop tests after each part: a
#: later one cannot have arrived much earlier, and testing all of a long
#: execution's receives after every part costs more than it finds
POLLED_RECEIVES = 4
#: the switch for frozen part calls (on by default; see
#: :class:`~pytato_like.target.loopy.replay.FrozenLaunches`)
FREEZE_SETTING = "PYTATO_LIKE_FREEZE_PARTS"
#: a blocking wait tests every receive every this many polls (the first
#: :data:`POLLED_RECEIVES` on the others)
FULL_TEST_EVERY = 4


class _PlanTables(PartHooks):
    """The awaited names and the table cache of a message plan: what
    :func:`~pytato_like.scheduler.prepare_parts` reads (the same
    prepared tables as the first execution's hooks)."""

    def __init__(self, plan: MessagePlan) -> None:
        super().__init__()
        self.plan = plan

    def awaited_names(self, pid: Hashable, part: GraphPart) -> tuple[str, ...]:
        # (set by the plan's first execution, before any steady loop)
        return cast("dict[Hashable, tuple[str, ...]]",
                    self.plan.awaited_names)[pid]

    def table_cache(self) -> dict:
        return self.plan.scheduler_tables


class SteadyParts:
    """This rank's parts of one partition with one set of part programs,
    as integer-indexed tables beside the scheduler's
    :class:`~pytato_like.scheduler.PreparedParts` (made once per message
    plan and program set, see :meth:`for_execution`)."""

    def __init__(self, partition: DistributedGraphPartition,
                 prg_per_partition: Mapping[Hashable, BoundProgram],
                 plan: MessagePlan, prepared: PreparedParts) -> None:
        self.prepared = prepared
        order = prepared.order
        parts = partition.parts
        # (set by the first execution: for_execution checked it)
        forwarding = cast("dict[Hashable, dict[str, str]]",
                          plan.forwarding_parts)
        self.order = order
        # (Any, not BoundPyOpenCLProgram | None: None for a forwarding
        # part, which run_part tells by steady.forward, not by this)
        self.programs: list[Any] = []
        #: per part: ``((output, input), ...)`` if it forwards, else None
        self.forward: list[tuple[tuple[str, str], ...] | None] = []
        self.placed: list[dict[str, cla.Array]] = []
        #: per part: the messages it sends (in padded buffers)
        self.outgoing: list[PartMessages] = []
        #: per part: whether its program may be frozen (its outputs are
        #: used inside the execution only: results must be new arrays)
        self.freezable: list[bool] = []
        #: per part: the outputs its program keeps (frozen calls)
        self.kept: list[KeptOutputs | None] = [None] * len(order)
        overall = frozenset(partition.overall_output_names)
        freezing = env_flag(FREEZE_SETTING, True)
        for pid in order:
            part = parts[pid]
            names = forwarding.get(pid)
            if names is not None:
                self.forward.append(tuple(names.items()))
                self.programs.append(None)
            else:
                self.forward.append(None)
                self.programs.append(prg_per_partition[pid])
            self.placed.append(plan.placed_outputs(pid))
            self.outgoing.append(tuple(plan.outgoing.get(pid, ())))
            self.freezable.append(
                freezing and names is None
                and overall.isdisjoint(part.output_names))

    @classmethod
    def for_execution(cls, partition: DistributedGraphPartition,
                      prg_per_partition: Mapping[Hashable, BoundProgram],
                      plan: MessagePlan,
                      input_names: frozenset[str]) -> SteadyParts | None:
        """The steady hooks for this execution, or ``None`` if the general
        hooks must run it: the plan's first execution (it settles what
        these are made from), messages that are not all in padded
        buffers, a rank sending to itself, a part program that is not
        generated loopy code, an input missing (the general hooks raise
        the error naming it)."""
        if (plan.n_executions < 1 or not plan.packed
                or not plan.pack_on_device or plan.queue is None
                or plan.local_recv or plan.local_sends
                or plan.forwarding_parts is None):
            return None
        if any(msg.padded is None for msg in plan.incoming) or any(
                msg.padded is None for msgs in plan.outgoing.values()
                for msg in msgs):
            return None
        key = tuple(id(prg_per_partition.get(pid))
                    for pid in partition.toposorted_part_ids)
        cached = plan.steady_loops.get(key)
        if cached is not None:
            steady, programs, provided = cached
            # (ids of live objects: the programs are held by the entry)
            if provided <= input_names:
                return steady
            return None
        for pid in partition.toposorted_part_ids:
            if pid in plan.forwarding_parts:
                continue
            prg = prg_per_partition.get(pid)
            if not isinstance(prg, BoundPyOpenCLProgram) or isinstance(
                    prg, LazyPartProgram):
                return None
        received = frozenset(name for msg in plan.incoming
                             for name in msg.names)
        # the names parts wait for that are not received: user inputs
        provided = frozenset(
            n for names in cast("dict[Hashable, tuple[str, ...]]",
                                plan.awaited_names).values()
            for n in names
            if n not in received)
        if not provided <= input_names:
            return None
        # (the tables the first execution's run_parts made, if it was
        # given the same input names)
        prepared = prepare_parts(partition, _PlanTables(plan),
                                 frozenset(input_names))
        steady = cls(partition, prg_per_partition, plan, prepared)
        plan.steady_loops[key] = (steady, [prg_per_partition.get(pid) for pid
                                           in partition.toposorted_part_ids],
                                  provided)
        return steady

    def run(self, exchange: Exchange, queue: cl.CommandQueue | None,
            allocator: Allocator | None, values: dict[str, object],
            recorder: TraceRecorder) -> int:
        """Run every part (*values*: the inputs, filled with every part
        output and arrival); the number of parts run. Takes over the
        receives *exchange* posted and hands back those not taken in for
        its ``finish`` (or ``abandon``); the sends go through the exchange
        (its ``finish`` waits for what is still under way)."""
        hooks = _SteadyHooks(self, exchange, queue, allocator, recorder)
        try:
            return self.prepared.run(hooks, values)
        finally:
            exchange.count_program_calls(hooks.enqueue_ns,
                                         hooks.enqueue_cpu_ns,
                                         hooks.launch_ns)
            hooks.hand_back()


class _SteadyHooks(PreparedHooks):
    """One execution by :class:`SteadyParts`: the parts and this rank's
    messages, with as little bookkeeping per part as the order rule, the
    trace and the failure handling allow."""

    def __init__(self, steady: SteadyParts, exchange: Exchange,
                 queue: cl.CommandQueue | None, allocator: Allocator | None,
                 recorder: TraceRecorder) -> None:
        self.steady = steady
        self.exchange = exchange
        self.queue = queue
        self.allocator = allocator
        self.recorder = recorder
        self.part_record = recorder.part
        self.order = steady.order
        #: the posted receives in the plan's order: (message, request,
        #: record); ``arrived[k]`` once the k-th has been taken in
        self.receives = exchange._recv_waiting
        self.requests = [req for _, req, _ in self.receives]
        self.statuses = exchange._recv_statuses
        self.arrived = [False] * len(self.receives)
        #: the first receive not arrived yet
        self.first_waiting = 0
        self.records: dict[int, TraceRecord] = {}
        self.enqueue_ns = self.enqueue_cpu_ns = self.launch_ns = 0

    # {{{ the parts

    def part_ready(self, i: int) -> None:
        self.records[i] = self.part_record(self.order[i])

    def run_part(self, i: int, values: dict[str, object]) -> Mapping[str, object]:
        steady = self.steady
        rec = self.records.pop(i)
        rec.start()
        fwd = steady.forward[i]
        if fwd is not None:
            outputs: Mapping[str, object] = {out: values[name]
                                          for out, name in fwd}
        else:
            t0 = time.perf_counter_ns()
            c0 = time.thread_time_ns()
            prg = steady.programs[i]
            # (an input named like an option is the input)
            kwargs: dict[str, object] = {
                "allocator": self.allocator, "out_host": False,
                "placed_outputs": steady.placed[i],
                "reuse_outputs": steady.freezable[i]}
            kwargs.update({name: values[name]
                           for name in steady.prepared.input_names[i]
                           if name in values})
            _, outputs = prg(self.queue, **kwargs)
            self.launch_ns += prg.last_launch_ns()
            kept = steady.kept[i]
            if type(outputs) is KeptOutputs:
                if outputs is not kept:
                    self.keep(i, outputs)
            elif kept is not None:
                self.keep(i, None)
            self.enqueue_ns += time.perf_counter_ns() - t0
            self.enqueue_cpu_ns += time.thread_time_ns() - c0
        rec.complete()
        messages = steady.outgoing[i]
        if messages:
            # (their copies to the host enqueued; the sends start once
            # those complete)
            exchange = self.exchange
            t0 = time.perf_counter_ns()
            if exchange.send_placed(messages, outputs):
                exchange.overhead_ns["pack"] += time.perf_counter_ns() - t0
            else:
                exchange.send_part_outputs(self.order[i], outputs)
        return outputs

    def keep(self, i: int, outputs: KeptOutputs | None) -> None:
        """Part *i*'s program keeps *outputs* from now on (a frozen call,
        see :class:`~pytato_like.target.loopy.replay.FrozenLaunches`; none
        if ``None``): results that are kept arrays are copied before they
        are handed out (a part forwarding one)."""
        steady = self.steady
        kept_arrays = self.exchange.plan.kept_arrays
        old = steady.kept[i]
        if old is not None:
            for ary in old.values():
                kept_arrays.pop(id(ary), None)
        steady.kept[i] = outputs
        if outputs is not None:
            for ary in outputs.values():
                kept_arrays[id(ary)] = ary

    # }}}

    # {{{ receiving

    def n_pending(self) -> int:
        return len(self.requests) - self.first_waiting

    def blocked(self, waiting: dict[Hashable, list[str]]) -> NoReturn:
        raise DistributedPartitionError(
            f"rank {self.exchange.rank}: parts {sorted(waiting, key=repr)} "
            "wait for values nothing provides")

    def arrivals(self, block: bool) -> list[tuple[str, PartValue]]:
        if block:
            return self.wait_for_messages()
        self.exchange.start_ready_device_sends(False)
        if self.first_waiting < len(self.requests):
            return self.poll_receives()
        return []

    def poll_receives(self) -> list[tuple[str, PartValue]]:
        """Test the first few receives not arrived yet (the plan's order
        is the order the parts need them in) and take in those that have."""
        t0 = time.perf_counter_ns()
        overhead = self.exchange.overhead_ns
        unpack0 = overhead["unpack"]
        lo = self.first_waiting
        found = self._test(lo, lo + POLLED_RECEIVES)
        got = self.take_in(found, lo) if found else []
        # (unpacking is counted on its own)
        overhead["poll"] += (time.perf_counter_ns() - t0
                             - overhead["unpack"] + unpack0)
        return got

    def _test(self, lo: int, hi: int) -> list[int]:
        """Indices (from *lo*) of the receives in ``[lo, hi)`` complete now;
        their statuses fill :attr:`statuses` in that order. (Receives taken
        in already are inactive: tests skip them.)"""
        return test_receives(self.exchange.rank, self.requests[lo:hi],
                             self.statuses)

    def take_in(self, found: list[int], lo: int
                ) -> list[tuple[str, PartValue]]:
        """Check and unpack the receives *found* (indices from *lo*,
        statuses in :attr:`statuses` in the same order): their values by
        name."""
        receives, arrived, statuses = self.receives, self.arrived, self.statuses
        exchange = self.exchange
        got: list[tuple[str, PartValue]] = []
        for n, j in enumerate(found):
            k = lo + j
            msg, _, rec = receives[k]
            exchange.check_arrival(msg, statuses[n])
            arrived[k] = True
            # (only plans whose messages are all padded run here)
            got.extend(zip(msg.names, exchange.take_in_padded(msg, rec)))
        n = len(arrived)
        lo = self.first_waiting
        while lo < n and arrived[lo]:
            lo += 1
        self.first_waiting = lo
        return got

    def wait_for_messages(self) -> list[tuple[str, PartValue]]:
        """Block until a receive has arrived (no part can run before),
        starting this rank's own sends first: never wait for a peer while
        the data it waits for waits here."""
        exchange = self.exchange
        exchange.start_ready_device_sends(True)
        found: list[int] = []
        lo = self.first_waiting

        n_tests = 0
        n_receives = len(self.requests)

        def test() -> bool:
            nonlocal n_tests
            # the first few (those needed next, nearly always) each time,
            # all of them every few polls
            hi = n_receives if n_tests % FULL_TEST_EVERY == 0 else (
                lo + POLLED_RECEIVES)
            n_tests += 1
            got = self._test(lo, hi)
            if got:
                found.extend(got)
                return True
            return False

        with self.recorder.wait("wait for messages"):
            exchange._wait(test, self.peers_waited_for,
                           LazyDescription(self.describe_wait))
        return self.take_in(found, lo)

    def not_arrived(self) -> list[PostedReceive]:
        """The posted receives not taken in yet: (message, request,
        record)."""
        return [entry for entry, done in zip(self.receives, self.arrived,
                                             strict=True) if not done]

    def peers_waited_for(self) -> set[int]:
        return {msg.src for msg, _, _ in self.not_arrived()}

    def describe_wait(self) -> str:
        return describe_waiting(msg for msg, _, _ in self.not_arrived())

    # }}}

    def hand_back(self) -> None:
        """Give the exchange the receives not taken in (waited for by its
        ``finish``, cancelled by its ``abandon`` if the execution
        failed)."""
        exchange = self.exchange
        waiting = self.not_arrived()
        exchange._recv_waiting = waiting
        exchange._recv_requests = [req for _, req, _ in waiting]
        exchange._recv_statuses = self.statuses[:len(waiting)]
