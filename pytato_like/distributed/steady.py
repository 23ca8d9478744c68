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
  next; the rank blocks only when no part can run (a polled wait, as
  :meth:`~pytato_like.distributed.comm.Exchange.arrivals` waits) -- the
  same messages, trace records and statistics, the same failure handling
  (the executor's);
* per part only what must happen each time: a list of integer counters
  instead of the scheduler's tables, the program called with its placed
  outputs, the part's messages started, one non-blocking test of the
  receives. Completed sends are picked up when the rank waits and at the
  end of the execution (they only free their buffers for the next one).

Measured on the halo benchmark (2 ranks, 10^5 cells per rank, one-cell
halos every step, 2 parts per step): see doc/distributed.rst ("Where the
time goes").

.. autoclass:: SteadyLoop
    :members: for_execution, run
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Hashable, Mapping
from typing import Any

from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.lazy import LazyPartProgram


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
            awaited = [n for n in plan.awaited_names[pid] if n in received]
            for name in awaited:
                self.readers.setdefault(name, []).append(i)
            self.waiting.append(len(part.needed_pids) + len(awaited))

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
        output and arrival); the number of parts run."""
        order = self.order
        programs, forward = self.programs, self.forward
        input_names, placed = self.input_names, self.placed
        dependents, readers = self.dependents, self.readers
        waiting = self.waiting.copy()
        overhead = exchange.overhead_ns
        poll_receives = exchange.poll_receives
        send_part_outputs = exchange.send_part_outputs
        start_ready_sends = exchange.start_ready_device_sends
        part_record = recorder.part
        perf_ns, cpu_ns = time.perf_counter_ns, time.thread_time_ns
        heappush, heappop = heapq.heappush, heapq.heappop
        records: dict[int, Any] = {}
        ready: list[int] = []
        for i, n in enumerate(waiting):
            if not n:
                records[i] = part_record(order[i])
                ready.append(i)     # ascending: a heap already

        def release(j: int) -> None:
            """Part *j* waits for one thing less (runnable at none)."""
            waiting[j] -= 1
            if not waiting[j]:
                records[j] = part_record(order[j])
                heappush(ready, j)

        def deliver(arrived: list[tuple[str, Any]]) -> None:
            for name, value in arrived:
                values[name] = value
                for j in readers.get(name, ()):
                    release(j)

        n_parts = len(order)
        n_done = 0
        while n_done < n_parts:
            if not ready:
                if not exchange.n_pending:
                    raise DistributedPartitionError(
                        f"rank {exchange.rank}: parts "
                        f"{sorted(order[j] for j in range(n_parts) if waiting[j])}"
                        " wait for values nothing provides")
                deliver(exchange.arrivals(True))
                continue
            i = heappop(ready)
            pid = order[i]
            rec = records.pop(i)
            rec.start()
            fwd = forward[i]
            if fwd is not None:
                outputs = {out: values[name] for out, name in fwd}
            else:
                # the contract's options, then the inputs (an input named
                # like an option is the input)
                kwargs: dict[str, Any] = {"allocator": allocator,
                                          "out_host": False}
                for name in input_names[i]:
                    if name in values:
                        kwargs[name] = values[name]
                t0 = perf_ns()
                c0 = cpu_ns()
                _, outputs = programs[i].call_placed(queue, placed[i],
                                                     **kwargs)
                overhead["enqueue"] += perf_ns() - t0
                overhead["enqueue_cpu"] += cpu_ns() - c0
            rec.complete()
            send_part_outputs(pid, outputs)
            values.update(outputs)
            for j in dependents[i]:
                release(j)
            n_done += 1
            start_ready_sends(False)
            arrived = poll_receives()
            if arrived:
                deliver(arrived)
        return n_done
