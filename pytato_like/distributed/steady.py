"""The executor's steady state: later executions of a partition, by a loop
made for them.

A solver calls :func:`~pytato_like.execute_distributed_partition` with the
same partition and part programs step after step. The first execution
settles everything a part costs besides its kernels: which parts only
forward received values, which outputs a part program computes straight
into its messages' buffers (see ``comm._PaddedMessage``), which part waits
for which message. From the second execution on, when every message of the
plan travels in such a buffer and every part program is generated loopy
code (:class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`),
:class:`SteadyLoop` runs this rank's parts instead of the general scheduler
(:func:`~pytato_like.scheduler.run_parts` with the executor's hooks):

* the same order rule -- the runnable part that comes first in
  :attr:`~pytato_like.partition.GraphPartition.toposorted_part_ids` runs
  next; the rank blocks only when no part can run -- the same messages,
  trace records and statistics, the same failure handling (the
  executor's: a wait is :func:`~pytato_like.distributed.safety.poll_until`
  and sees other ranks' failure notices and a cancel);
* per part only what must happen each time: integer counters instead of
  the scheduler's tables, the program called with its placed outputs
  -- a part whose outputs stay inside the execution as a
  :class:`~pytato_like.target.loopy.frozen.FrozenCall` (its buffers and
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

.. autoclass:: SteadyLoop
    :members: for_execution, run

.. autodata:: POLLED_RECEIVES
.. autodata:: FULL_TEST_EVERY
.. autodata:: FREEZE_SETTING
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Hashable, Mapping
from typing import Any

from pytato_like._env import env_flag
from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed.comm import (
    _Described,
    describe_waiting,
    test_receives,
)
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.frozen import FrozenCall
from pytato_like.target.loopy.lazy import LazyPartProgram

#: how many of the receives not arrived yet (in the plan's order, which is
#: the order the parts need them in) the loop tests after each part: a
#: later one cannot have arrived much earlier, and testing all of a long
#: execution's receives after every part costs more than it finds
POLLED_RECEIVES = 4
#: the switch for frozen part calls (on by default; see
#: :mod:`pytato_like.target.loopy.frozen`)
FREEZE_SETTING = "PYTATO_LIKE_FREEZE_PARTS"
#: a blocking wait tests every receive every this many polls (the first
#: :data:`POLLED_RECEIVES` on the others)
FULL_TEST_EVERY = 4


class SteadyLoop:
    """This rank's parts of one partition with one set of part programs,
    as integer-indexed tables (made once per message plan and program set,
    see :meth:`for_execution`)."""

    def __init__(self, partition: Any, prg_per_partition: Mapping[Hashable, Any],
                 plan: Any, received: frozenset[str]) -> None:
        order = list(partition.toposorted_part_ids)
        index = {pid: i for i, pid in enumerate(order)}
        parts = partition.parts
        forwarding = plan.forwarding_parts
        self.order = order
        self.programs: list[Any] = []
        #: per part: ``((output, input), ...)`` if it forwards, else None
        self.forward: list[tuple[tuple[str, str], ...] | None] = []
        self.input_names: list[tuple[str, ...]] = []
        self.placed: list[dict[str, Any]] = []
        self.dependents: list[list[int]] = [[] for _ in order]
        #: per part: the messages it sends (in padded buffers)
        self.outgoing: list[tuple[Any, ...]] = []
        #: per part: whether its program may be frozen (its outputs are
        #: used inside the execution only: results must be new arrays)
        #: and the frozen call once made
        self.freezable: list[bool] = []
        self.frozen: list[FrozenCall | None] = [None] * len(order)
        overall = frozenset(partition.overall_output_names)
        freezing = env_flag(FREEZE_SETTING, True)
        self.waiting: list[int] = []
        # received name -> the parts reading it
        readers: dict[str, list[int]] = {}
        for i, pid in enumerate(order):
            part = parts[pid]
            for q in part.needed_pids:
                self.dependents[index[q]].append(i)
            names = forwarding.get(pid)
            if names is not None:
                self.forward.append(tuple(names.items()))
                self.programs.append(None)
            else:
                self.forward.append(None)
                self.programs.append(prg_per_partition[pid])
            self.input_names.append(tuple(sorted(part.all_input_names())))
            self.placed.append(plan.placed_outputs(pid))
            self.outgoing.append(tuple(plan.outgoing.get(pid, ())))
            self.freezable.append(
                freezing and names is None
                and overall.isdisjoint(part.output_names))
            awaited = [n for n in plan.awaited_names[pid] if n in received]
            for name in awaited:
                readers.setdefault(name, []).append(i)
            self.waiting.append(len(part.needed_pids) + len(awaited))
        #: per received message (the plan's order): the parts each of its
        #: values releases (a part once per value it reads)
        self.on_arrival: list[tuple[int, ...]] = [
            tuple(j for name in msg.names for j in readers.get(name, ()))
            for msg in plan.incoming]

    @classmethod
    def for_execution(cls, partition: Any,
                      prg_per_partition: Mapping[Hashable, Any], plan: Any,
                      input_names: Any) -> SteadyLoop | None:
        """The loop for this execution, or ``None`` if the general
        scheduler must run it: the plan's first execution (it settles
        what the loop is made from), messages that are not all in padded
        buffers, a rank sending to itself, a part program that is not
        generated loopy code, an input missing (the general scheduler
        raises the error naming it)."""
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
            loop, programs, provided = cached
            # (ids of live objects: the programs are held by the entry)
            if provided <= input_names:
                return loop
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
            n for names in plan.awaited_names.values() for n in names
            if n not in received)
        if not provided <= input_names:
            return None
        loop = cls(partition, prg_per_partition, plan, received)
        plan.steady_loops[key] = (loop, [prg_per_partition.get(pid) for pid in
                                         partition.toposorted_part_ids],
                                  provided)
        return loop

    def run(self, exchange: Any, queue: Any, allocator: Any,
            values: dict[str, Any], recorder: Any) -> int:
        """Run every part (*values*: the inputs, filled with every part
        output and arrival); the number of parts run. Takes over the
        receives *exchange* posted and hands back those not taken in for
        its ``finish`` (or ``abandon``); the sends go through the exchange
        (its ``finish`` waits for what is still under way)."""
        run = _SteadyRun(self, exchange, queue, allocator, values, recorder)
        try:
            return run.run_parts()
        finally:
            run.hand_back()


class _SteadyRun:
    """One execution by a :class:`SteadyLoop`: the parts and this rank's
    messages, with as little bookkeeping per part as the order rule, the
    trace and the failure handling allow."""

    def __init__(self, loop: SteadyLoop, exchange: Any, queue: Any,
                 allocator: Any, values: dict[str, Any], recorder: Any
                 ) -> None:
        self.loop = loop
        self.exchange = exchange
        self.queue = queue
        self.allocator = allocator
        self.values = values
        self.recorder = recorder
        self.waiting = loop.waiting.copy()
        #: the posted receives in the plan's order: (message, request,
        #: record); ``arrived[k]`` once the k-th has been taken in
        self.receives = exchange._recv_waiting
        self.requests = [req for _, req, _ in self.receives]
        self.statuses = exchange._recv_statuses
        self.arrived = [False] * len(self.receives)
        #: the first receive not arrived yet
        self.first_waiting = 0
        self.records: dict[int, Any] = {}
        self.ready: list[int] = []

    # {{{ the parts

    def run_parts(self) -> int:
        loop = self.loop
        order, programs, forward = loop.order, loop.programs, loop.forward
        input_names, placed = loop.input_names, loop.placed
        dependents, outgoing = loop.dependents, loop.outgoing
        values, queue, ready = self.values, self.queue, self.ready
        records = self.records
        exchange = self.exchange
        overhead = exchange.overhead_ns
        send_placed = exchange.send_placed
        send_part_outputs = exchange.send_part_outputs
        start_ready_sends = exchange.start_ready_device_sends
        part_record = self.recorder.part
        release = self.release
        perf_ns, cpu_ns = time.perf_counter_ns, time.thread_time_ns
        heappop = heapq.heappop
        allocator = self.allocator
        frozen, freezable = loop.frozen, loop.freezable
        for i, n in enumerate(self.waiting):
            if not n:
                records[i] = part_record(order[i])
                ready.append(i)     # ascending: a heap already
        n_parts = len(order)
        n_done = 0
        enqueue_ns = enqueue_cpu_ns = launch_ns = 0
        try:
            while n_done < n_parts:
                if not ready:
                    self.wait_for_messages()
                    continue
                i = heappop(ready)
                rec = records.pop(i)
                rec.start()
                fwd = forward[i]
                if fwd is not None:
                    outputs = {out: values[name] for out, name in fwd}
                else:
                    t0 = perf_ns()
                    c0 = cpu_ns()
                    called = (self.call_frozen(i)
                              if frozen[i] is not None or freezable[i]
                              else None)
                    if called is not None:
                        outputs, ns = called
                        launch_ns += ns
                    else:
                        prg = programs[i]
                        _, outputs = prg.call_steady(
                            queue, placed[i], allocator,
                            {name: values[name] for name in input_names[i]
                             if name in values})
                        launch_ns += prg.last_launch_ns()
                    enqueue_ns += perf_ns() - t0
                    enqueue_cpu_ns += cpu_ns() - c0
                rec.complete()
                values.update(outputs)
                messages = outgoing[i]
                if messages:
                    # (their copies to the host enqueued; the sends start
                    # once those complete)
                    t0 = perf_ns()
                    if send_placed(messages, outputs):
                        overhead["pack"] += perf_ns() - t0
                    else:
                        send_part_outputs(order[i], outputs)
                release(dependents[i])
                n_done += 1
                start_ready_sends(False)
                if self.first_waiting < len(self.requests):
                    self.poll_receives()
        finally:
            exchange.count_program_calls(enqueue_ns, enqueue_cpu_ns,
                                         launch_ns)
        return n_done

    # }}}

    def call_frozen(self, i: int) -> tuple[dict[str, Any], int] | None:
        """Part *i*'s frozen call -- made now if it has none yet and may
        have one, made again if its inputs' layout changed -- run: its
        outputs and the nanoseconds its enqueues took; ``None`` if it is
        not frozen (nothing ran)."""
        loop, values = self.loop, self.values
        frozen_call = loop.frozen[i]
        if frozen_call is not None:
            outputs = frozen_call(self.queue, values)
            if outputs is not None:
                return outputs, frozen_call.launch_ns
            self.thaw(i)            # another input layout
        if not loop.freezable[i]:
            return None
        frozen_call = self.freeze(i, {name: values[name]
                                      for name in loop.input_names[i]
                                      if name in values})
        if frozen_call is None:
            return None
        outputs = frozen_call(self.queue, values)
        if outputs is None:
            self.thaw(i)
            return None
        return outputs, frozen_call.launch_ns

    def freeze(self, i: int, inputs: dict[str, Any]) -> FrozenCall | None:
        """Freeze the program of part *i* for *inputs* (see
        :mod:`~pytato_like.target.loopy.frozen`); ``None`` if it cannot be
        (then it is called as usual from now on)."""
        loop = self.loop
        frozen_call = FrozenCall.freeze(loop.programs[i], self.queue,
                                        self.allocator, inputs, loop.placed[i])
        if frozen_call is None:
            # (never, or not before another call has made its replay)
            loop.freezable[i] = FrozenCall.can_freeze(loop.programs[i],
                                                      self.queue)
            return None
        loop.frozen[i] = frozen_call
        # results that are kept arrays are copied before they are handed
        # out (a part forwarding one, a program passing one through)
        for ary in frozen_call.arrays():
            self.exchange.plan.kept_arrays[id(ary)] = ary
        return frozen_call

    def thaw(self, i: int) -> None:
        """Drop part *i*'s frozen call (it may be frozen again)."""
        loop = self.loop
        frozen_call = loop.frozen[i]
        loop.frozen[i] = None
        if frozen_call is not None:
            for ary in frozen_call.arrays():
                self.exchange.plan.kept_arrays.pop(id(ary), None)

    def release(self, parts: Any) -> None:
        """Each of *parts* waits for one thing less (one that no longer
        waits is runnable: its record posted, it joins the ready heap)."""
        waiting = self.waiting
        for j in parts:
            waiting[j] -= 1
            if not waiting[j]:
                self.records[j] = self.recorder.part(self.loop.order[j])
                heapq.heappush(self.ready, j)

    # }}}

    # {{{ receiving

    def poll_receives(self) -> None:
        """Test the first few receives not arrived yet (the plan's order
        is the order the parts need them in) and take in those that have."""
        t0 = time.perf_counter_ns()
        overhead = self.exchange.overhead_ns
        unpack0 = overhead["unpack"]
        lo = self.first_waiting
        found = self._test(lo, lo + POLLED_RECEIVES)
        if found:
            self.take_in(found, lo)
        # (unpacking is counted on its own)
        overhead["poll"] += (time.perf_counter_ns() - t0
                             - overhead["unpack"] + unpack0)

    def _test(self, lo: int, hi: int) -> list[int]:
        """Indices (from *lo*) of the receives in ``[lo, hi)`` complete now;
        their statuses fill :attr:`statuses` in that order. (Receives taken
        in already are inactive: tests skip them.)"""
        return test_receives(self.exchange.rank, self.requests[lo:hi],
                             self.statuses)

    def take_in(self, found: list[int], lo: int) -> None:
        """Check, unpack and deliver the receives *found* (indices from
        *lo*, statuses in :attr:`statuses` in the same order)."""
        receives, arrived, statuses = self.receives, self.arrived, self.statuses
        exchange = self.exchange
        on_arrival = self.loop.on_arrival
        for n, j in enumerate(found):
            k = lo + j
            msg, _, rec = receives[k]
            exchange.check_arrival(msg, statuses[n])
            arrived[k] = True
            # (the loop runs only plans whose messages are all padded)
            self.values.update(zip(msg.names,
                                   exchange.take_in_padded(msg, rec)))
            self.release(on_arrival[k])
        n = len(arrived)
        lo = self.first_waiting
        while lo < n and arrived[lo]:
            lo += 1
        self.first_waiting = lo

    def wait_for_messages(self) -> None:
        """Block until a receive has arrived (no part can run before),
        starting this rank's own sends first: never wait for a peer while
        the data it waits for waits here."""
        exchange = self.exchange
        if self.first_waiting >= len(self.requests):
            loop = self.loop
            raise DistributedPartitionError(
                f"rank {exchange.rank}: parts "
                f"{sorted(loop.order[j] for j, n in enumerate(self.waiting) if n)}"
                " wait for values nothing provides")
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
                           _Described(self.describe_wait))
        self.take_in(found, lo)

    def not_arrived(self) -> list[tuple[Any, Any, Any]]:
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
