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
  the scheduler's tables, the program called with its placed outputs,
  the copies of its messages to the host enqueued, the sends whose copy
  has completed started, one non-blocking test of the first
  :data:`POLLED_RECEIVES` receives not arrived yet;
* the messages handled here, on the exchange's persistent requests and
  buffers, without its general per-call bookkeeping: a receive is taken
  in (its byte count checked, one copy to its padded device buffer) when
  a test finds it; a wait first starts every send whose copy is under way
  (never wait for a peer while the data it waits for waits here) and
  tests the first receives on every poll, all of them every
  :data:`FULL_TEST_EVERY`-th. What is still under way at the end (sends,
  uploads) goes back to the exchange, whose ``finish`` waits for it (and
  whose ``abandon`` cancels the receives not taken in after a failure).

Measured on the halo benchmark (2 ranks, 10^5 cells per rank, one-cell
halos every step, 2 parts per step): see doc/distributed.rst ("Where the
time goes").

.. autoclass:: SteadyLoop
    :members: for_execution, run

.. autodata:: POLLED_RECEIVES
.. autodata:: FULL_TEST_EVERY
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Hashable, Mapping
from typing import Any

from pytato_like.diagnostic import (
    DistributedPartitionError,
    SendRecvMismatchError,
)
from pytato_like.distributed.comm import (
    _cl,
    _Described,
    _mpi,
    test_receives,
)
from pytato_like.distributed.safety import poll_until
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.lazy import LazyPartProgram

#: how many of the receives not arrived yet (in the plan's order, which is
#: the order the parts need them in) the loop tests after each part: a
#: later one cannot have arrived much earlier, and testing all of a long
#: execution's receives after every part costs more than it finds
POLLED_RECEIVES = 4
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
        #: per part: the messages it sends
        self.outgoing: list[tuple[Any, ...]] = []
        self.waiting: list[int] = []
        #: received name -> the parts reading it
        self.readers: dict[str, list[int]] = {}
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
            awaited = [n for n in plan.awaited_names[pid] if n in received]
            for name in awaited:
                self.readers.setdefault(name, []).append(i)
            self.waiting.append(len(part.needed_pids) + len(awaited))
        #: per received message (the plan's order): the parts each of its
        #: values releases (a part once per value it reads)
        self.on_arrival: list[tuple[int, ...]] = [
            tuple(j for name in msg.names for j in self.readers.get(name, ()))
            for msg in plan.incoming]
        self.complete = _cl().command_execution_status.COMPLETE

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
        receives *exchange* posted and hands back what is still under way
        (sends, copies, uploads) for its ``finish`` (or ``abandon``)."""
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
        #: sends whose device-to-host copy is under way: (msg, event, record)
        self.copies: list[tuple[Any, Any, Any]] = []
        self.records: dict[int, Any] = {}
        self.ready: list[int] = []
        self.n_received = 0
        self.n_sent = 0

    # {{{ the parts

    def run_parts(self) -> int:
        loop = self.loop
        order, programs, forward = loop.order, loop.programs, loop.forward
        input_names, placed = loop.input_names, loop.placed
        dependents, outgoing = loop.dependents, loop.outgoing
        values, queue, ready = self.values, self.queue, self.ready
        waiting, records = self.waiting, self.records
        overhead = self.exchange.overhead_ns
        part_record = self.recorder.part
        perf_ns, cpu_ns = time.perf_counter_ns, time.thread_time_ns
        heappush, heappop = heapq.heappush, heapq.heappop
        allocator = self.allocator
        for i, n in enumerate(waiting):
            if not n:
                records[i] = part_record(order[i])
                ready.append(i)     # ascending: a heap already
        n_parts = len(order)
        n_done = 0
        enqueue_ns = enqueue_cpu_ns = 0
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
                    # the contract's options, then the inputs (an input
                    # named like an option is the input)
                    kwargs: dict[str, Any] = {"allocator": allocator,
                                              "out_host": False}
                    for name in input_names[i]:
                        if name in values:
                            kwargs[name] = values[name]
                    t0 = perf_ns()
                    c0 = cpu_ns()
                    _, outputs = programs[i].call_placed(queue, placed[i],
                                                         **kwargs)
                    enqueue_ns += perf_ns() - t0
                    enqueue_cpu_ns += cpu_ns() - c0
                rec.complete()
                values.update(outputs)
                sends = outgoing[i]
                if sends:
                    self.send(sends, outputs)
                for j in dependents[i]:
                    waiting[j] -= 1
                    if not waiting[j]:
                        records[j] = part_record(order[j])
                        heappush(ready, j)
                n_done += 1
                if self.copies:
                    self.start_copied_sends()
                if self.first_waiting < len(self.requests):
                    self.poll_receives()
        finally:
            overhead["enqueue"] += enqueue_ns
            overhead["enqueue_cpu"] += enqueue_cpu_ns
        return n_done

    # }}}

    # {{{ sending

    def send(self, sends: tuple[Any, ...], outputs: Mapping[str, Any]
             ) -> None:
        """Copy the part's messages to the host (the program computed
        them into their buffers; a value that is not there goes the
        exchange's general way)."""
        t0 = time.perf_counter_ns()
        record = self.recorder.record
        copies = self.copies
        for msg in sends:
            padded = msg.padded
            for name, array in zip(msg.names, padded.arrays, strict=True):
                if outputs[name] is not array:
                    # not computed in place: the exchange copies it in
                    self.exchange._send_packed(
                        msg, [outputs[n] for n in msg.names])
                    copies.extend(self.exchange._device_copies)
                    self.exchange._device_copies = []
                    break
            else:
                buffer = msg.buffer
                rec = record("pack", f"pack {msg.dest}", peer=msg.dest,
                             tag=msg.tag, nbytes=buffer.nbytes,
                             part_id=msg.pid).start()
                copies.append((msg, padded.to_host(buffer, None), rec))
        # submit now: an unflushed queue may hold the copies back until
        # this rank next blocks, delaying the sends
        self.queue.flush()
        self.exchange.overhead_ns["pack"] += time.perf_counter_ns() - t0

    def start_copied_sends(self, block: bool = False) -> None:
        """Start the sends whose copy to the host has completed (with
        *block*: wait for every copy first)."""
        copies = self.copies
        if block:
            with self.recorder.wait("wait for device copies"):
                _cl().wait_for_events([evt for _, evt, _ in copies])
            ready, self.copies = copies, []
        else:
            complete = self.loop.complete
            ready = []
            still = []
            for entry in copies:
                if entry[1].command_execution_status == complete:
                    ready.append(entry)
                else:
                    still.append(entry)
            if not ready:
                return
            self.copies = still
        t0 = time.perf_counter_ns()
        exchange = self.exchange
        active = exchange._sends_active
        message = self.recorder.message
        for msg, _, rec in ready:
            rec.complete()
            buffer = msg.buffer
            send_rec = message("send", msg.dest, tag=msg.tag,
                               nbytes=buffer.nbytes, part_id=msg.pid,
                               n_arrays=len(msg.names))
            msg.request.Start()
            active.append((msg.request, send_rec, buffer))
            self.n_sent += 1
            exchange.bytes_sent += buffer.nbytes
        exchange.overhead_ns["post"] += time.perf_counter_ns() - t0

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
        MPI = _mpi()
        receives, arrived, statuses = self.receives, self.arrived, self.statuses
        exchange = self.exchange
        record = self.recorder.record
        on_arrival = self.loop.on_arrival
        values, waiting, records = self.values, self.waiting, self.records
        part_record, order = self.recorder.part, self.loop.order
        uploads = exchange._upload_events
        for n, j in enumerate(found):
            k = lo + j
            msg, _, rec = receives[k]
            buffer = msg.buffer
            count = statuses[n].Get_count(MPI.BYTE)
            if count != buffer.nbytes:
                raise SendRecvMismatchError(
                    f"rank {msg.src} sent a message of {count} bytes with "
                    f"tag {msg.tag} where rank {exchange.rank} receives "
                    f"{buffer.nbytes} bytes")
            rec.complete()
            arrived[k] = True
            self.n_received += 1
            exchange.bytes_received += buffer.nbytes
            t0 = time.perf_counter_ns()
            with record("unpack", f"unpack {msg.src}", peer=msg.src,
                        tag=msg.tag, nbytes=msg.nbytes):
                # one copy into the arrays' sub-buffers
                uploads.append(msg.padded.from_host(buffer))
            exchange.overhead_ns["unpack"] += time.perf_counter_ns() - t0
            values.update(zip(msg.names, msg.padded.arrays))
            for j2 in on_arrival[k]:
                waiting[j2] -= 1
                if not waiting[j2]:
                    records[j2] = part_record(order[j2])
                    heapq.heappush(self.ready, j2)
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
        if self.copies:
            self.start_copied_sends(block=True)
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
            poll_until(test, exchange.comm, self.peers_waited_for,
                       _Described(self.describe_wait),
                       exchange.is_cancelled)
        self.take_in(found, lo)

    def peers_waited_for(self) -> set[int]:
        return {msg.src for (msg, _, _), done in zip(self.receives,
                                                     self.arrived)
                if not done}

    def describe_wait(self) -> str:
        return f"rank {self.exchange.rank} waits for messages " + ", ".join(
            f"(rank {msg.src}, tag {msg.tag})"
            for (msg, _, _), done in zip(self.receives, self.arrived)
            if not done)

    # }}}

    def hand_back(self) -> None:
        """Give the exchange what is still under way: receives not taken
        in (cancelled if the execution failed), copies not yet sent."""
        exchange = self.exchange
        waiting = [entry for entry, done in zip(self.receives, self.arrived)
                   if not done]
        exchange._recv_waiting = waiting
        exchange._recv_requests = [req for _, req, _ in waiting]
        exchange._recv_statuses = self.statuses[:len(waiting)]
        exchange._device_copies.extend(self.copies)
        self.copies = []
        exchange.n_messages_sent += self.n_sent
        exchange.n_messages_received += self.n_received
