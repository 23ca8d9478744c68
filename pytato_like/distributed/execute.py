"""Running a distributed partition: parts as soon as their inputs are there.

:func:`execute_distributed_partition` starts every receive first, then
runs this rank's parts through the part scheduler
(:func:`~pytato_like.scheduler.run_parts`, with the hooks of
``_MPIHooks``): the runnable part that comes first in
:attr:`~pytato_like.partition.GraphPartition.toposorted_part_ids` runs
next (its inputs computed or received), its messages are packed and
started at once (one per destination rank), arrived messages are picked
up without blocking after every part; the scheduler blocks only when no
part can run (a polled wait, see
:func:`~pytato_like.distributed.safety.poll_until`). So communication
overlaps with all computation that does not need it: a part that does
not need this step's messages (the interior of a halo exchange) is
enqueued before the executor blocks for them. A part that only passes
received values on runs without calling its program (no kernel launch),
and with device part programs the host inputs are copied to the device
once, before the first part runs. Loopy part programs are called through
:meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram.__call__` with
``placed_outputs``:
from the second execution on they replay their recorded launches (see
:mod:`~pytato_like.target.loopy.replay`) and compute the values they send
into their messages' device buffers, and the parts are run by the
scheduler's prepared mode (:class:`~pytato_like.scheduler.PreparedParts`)
with the hooks of :mod:`~pytato_like.distributed.steady` (made for the
partition once the first execution has settled its messages).

What does not change between executions -- the messages, their buffers,
packers and persistent MPI requests -- is a
:class:`~pytato_like.distributed.comm.MessagePlan`, built on the first
execution of a partition and reused by the next ones (see
:func:`message_plan`); executions of one partition run one after the other,
in the order they were started.

Part programs follow the program contract
(:class:`~pytato_like.target.program.BoundProgram`): each is called as
``prg(queue, allocator=..., out_host=False, **inputs) -> (event,
outputs)``, with the device memory pool of :mod:`~pytato_like.runtime.pool`
(which also holds the communication buffers) as allocator. Unless every
part program is a host program of the contract
(:class:`~pytato_like.target.program.HostBoundProgram`, e.g.
:class:`~pytato_like.partition.NumpyPartProgram`; *queue* may then be
``None``), the parts compute on *queue*'s device.

Where results live follows loopy's ``out_host`` rule as pytato's bound
programs apply it (:func:`outputs_on_host`): with NumPy input arguments
and data wrappers of NumPy data the results are NumPy arrays (copied from
the device once, at the end of the execution); with device arrays among
them they stay on the device; ``out_host=True/False`` forces either.

Asynchronous use: ``execute_distributed_partition(..., wait=False)`` (or
:func:`execute_distributed_partition_async`) returns a
:class:`DistributedExecution` handle at once; the execution runs in a
background thread (when MPI allows threads, ``MPI_THREAD_MULTIPLE``;
otherwise before the call returns). :meth:`DistributedExecution.wait`
returns the results, :meth:`DistributedExecution.fetch_trace` the
timestamps of every message and part of this execution.

If a part raises, the other ranks are told (see
:mod:`pytato_like.distributed.comm`) and this rank re-raises.

.. autofunction:: execute_distributed_partition
.. autofunction:: execute_distributed_partition_async
.. autofunction:: outputs_on_host
.. autoclass:: DistributedExecution
    :members:
.. autofunction:: message_plan
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, cast

import numpy as np

from pytato_like._traversal import depth_first
from pytato_like.array import DataWrapper, Placeholder
from pytato_like.diagnostic import (
    DistributedExecutionError,
    DistributedPartitionError,
    RemoteRankError,
)
from pytato_like.distributed.channels import communicator_for
from pytato_like.distributed.comm import Exchange, MessagePlan
from pytato_like.distributed.partition import DistributedGraphPartition
from pytato_like.distributed.safety import (
    as_communicator,
    at_exit_before_finalize,
    track_execution,
)
from pytato_like.distributed.steady import SteadyParts
from pytato_like.collector import collection_paused, pausing_enabled
from pytato_like.runtime.handles import Handle
from pytato_like.runtime.pool import get_buffer_pool
from pytato_like.runtime.trace import Trace, TraceRecord, TraceRecorder
from pytato_like.scheduler import PartHooks, run_parts
from pytato_like.target import BoundProgram
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyopencl as cl
    import pyopencl.array as cla
    from pyopencl.typing import Allocator

    from pytato_like.distributed.comm import PartValue
    from pytato_like.distributed.safety import Communicator
    from pytato_like.partition import GraphPart
from pytato_like.target.loopy.lazy import (
    codegen_while_waiting,
    compile_parts_in_background,
    hold_part_compiles,
)
from pytato_like.target.program import HostBoundProgram

# {{{ plans, one per (partition, communicator, queue, mode)

# id(partition) -> {key: plan}; entries go when the partition is collected
_PLANS: dict[int, dict[tuple, MessagePlan]] = {}
_PLANS_LOCK = threading.Lock()


def _forget_plans(partition_id: int) -> None:
    with _PLANS_LOCK:
        plans = _PLANS.pop(partition_id, {})
        _DATA_ON_HOST.pop(partition_id, None)
    for plan in plans.values():
        plan.free()


def _free_all_plans() -> None:
    with _PLANS_LOCK:
        ids = list(_PLANS)
    for partition_id in ids:
        _forget_plans(partition_id)


#: id(partition) -> whether every data wrapper of its parts holds host data
#: (entries go with the partition's plans)
_DATA_ON_HOST: dict[int, bool] = {}


def _is_host_value(value: object) -> bool:
    return isinstance(value, np.ndarray) or np.isscalar(value)


def _data_on_host(partition: DistributedGraphPartition) -> bool:
    """Whether the data of every data wrapper in *partition*'s parts is a
    NumPy array or a scalar (computed once per partition)."""
    known = _DATA_ON_HOST.get(id(partition))
    if known is None:
        results = getattr(partition, "var_name_to_result", None) \
            or partition.name_to_output
        known = all(_is_host_value(node.data)
                    for node, _ in depth_first(list(results.values()))
                    if isinstance(node, DataWrapper))
        with _PLANS_LOCK:
            # (dropped with the partition's plans, see message_plan)
            if id(partition) in _PLANS:
                _DATA_ON_HOST[id(partition)] = known
    return known


def outputs_on_host(partition: DistributedGraphPartition,
                    input_args: Mapping[str, object]) -> bool:
    """The ``out_host=None`` rule of :func:`execute_distributed_partition`
    (loopy's, as pytato's bound programs apply it): this rank's results are
    NumPy arrays when every input argument and the data of every data
    wrapper of the partition is a NumPy array or a scalar; with any device
    array among them they stay on the device."""
    return (all(_is_host_value(v) for v in input_args.values())
            and _data_on_host(partition))


def _on_device(prg_per_partition: Mapping[Hashable, BoundProgram],
               queue: cl.CommandQueue | None) -> bool:
    """Whether the part programs compute on *queue*'s device (not all of
    them are host programs of the contract)."""
    return queue is not None and not all(
        isinstance(p, HostBoundProgram) for p in prg_per_partition.values())


def message_plan(partition: DistributedGraphPartition, comm: Communicator,
                 queue: cl.CommandQueue | None = None, *,
                 messages: str = "packed", pack_on: str = "device",
                 allocator: Allocator | None = None
                 ) -> MessagePlan:
    """The :class:`~pytato_like.distributed.comm.MessagePlan` of
    *partition* for *comm* and *queue* (``None`` for host part programs):
    made on first use, then the same object (same buffers, same persistent
    requests) until the partition is garbage-collected or an execution
    with it failed."""
    comm = as_communicator(comm)
    key = (id(comm), id(queue), id(allocator), messages, pack_on)
    with _PLANS_LOCK:
        plans = _PLANS.get(id(partition))
        if plans is None:
            plans = _PLANS[id(partition)] = {}
            finalizer = weakref.finalize(partition, _forget_plans,
                                         id(partition))
            # not at exit: an execution may still run (its handle dropped)
            # until the exit hook of distributed.safety has waited for it
            finalizer.atexit = False
            at_exit_before_finalize(_free_all_plans)
        plan = plans.get(key)
        if plan is not None and (plan.broken or plan.comm is not comm
                                 or plan.queue is not queue):
            plan = None      # failed before, or ids reused by new objects
        if plan is None:
            plan = plans[key] = MessagePlan(
                partition, comm, queue, messages=messages, pack_on=pack_on,
                allocator=allocator)
    return plan

# }}}


# {{{ the handle

class DistributedExecution:
    """A started distributed execution (see
    :func:`execute_distributed_partition_async`).

    .. attribute:: plan

        The :class:`~pytato_like.distributed.comm.MessagePlan` used.

    .. attribute:: stats

        Filled when the execution ends: ``n_parts_run``,
        ``n_messages_sent``, ``n_messages_received``, ``bytes_sent``,
        ``bytes_received``, ``messages`` (the mode used), ``scheduler``
        (``"steady"`` if the loop of
        :class:`~pytato_like.distributed.steady.SteadyParts` hooks ran the
        parts in the scheduler's prepared mode,
        ``"general"`` if :func:`~pytato_like.scheduler.run_parts` did),
        ``overhead_ns``
        (host time of the executor's own work by kind: ``enqueue`` -- calling
        the part programs, outside OpenCL's launch calls --, ``launch`` --
        inside them: handing the kernels to the device, or, with a driver
        that runs them in the calling thread (see
        :mod:`~pytato_like.distributed.threads`), running them --,
        ``enqueue_cpu`` -- the CPU time of the calls, launches included,
        without the time a call waited for a core --, ``pack`` -- a part's
        messages packed or their copies to the host enqueued --, ``post``
        -- starting the MPI sends --, ``poll`` and ``unpack``; see
        :attr:`~pytato_like.distributed.comm.Exchange.overhead_ns`).
    """

    def __init__(self, plan: MessagePlan, recorder: TraceRecorder) -> None:
        self.plan = plan
        self.recorder = recorder
        self.stats: dict[str, object] = {}
        self.comm = plan.comm
        self.exchange: Exchange | None = None     # the running one (for cancel)
        self._forget: Callable[[], None] | None = None
        self._handle: Handle[dict[str, PartValue]] | None = None
        self._result: dict[str, PartValue] | None = None
        self._error: BaseException | None = None

    def wait(self, timeout: float | None = None) -> dict[str, PartValue]:
        """Block until the execution has ended; its results by name.
        Re-raises the execution's error."""
        if self._handle is not None:
            try:
                return self._handle.wait(timeout)
            except TimeoutError:
                raise
            except BaseException:
                if self._forget is not None:
                    self._forget()     # its error is reported now
                raise
        if self._error is not None:
            raise self._error
        return cast("dict[str, PartValue]", self._result)  # ran without error

    def done(self) -> bool:
        """Whether the execution has ended (never blocks)."""
        return self._handle is None or self._handle.done()

    def wait_quietly(self, timeout: float) -> BaseException | None:
        """Wait up to *timeout* seconds; the execution's error, a
        :class:`TimeoutError`, or ``None`` if it completed (used by the
        exit hook of :mod:`~pytato_like.distributed.safety` for handles
        that were dropped)."""
        try:
            self.wait(timeout)
        except BaseException as exc:  # noqa: BLE001 -- returned, not lost
            return exc
        return None

    def cancel(self) -> None:
        """End the execution's waits with
        :class:`~pytato_like.diagnostic.DistributedExecutionError`."""
        if self.exchange is not None:
            self.exchange.cancelled = True

    def fetch_trace(self) -> list[TraceRecord]:
        """The records of this execution so far: one ``"recv"`` / ``"send"``
        per message (posted, started, completed, bytes, peer rank, tag), one
        ``"part"`` per part run, plus ``"pack"``, ``"unpack"`` and blocking
        ``"wait"`` records."""
        return self.recorder.records

    def trace(self) -> Trace:
        """:meth:`fetch_trace` as a :class:`~pytato_like.runtime.trace.Trace`
        (Chrome/Perfetto export, summary). Merge ranks with
        :func:`~pytato_like.runtime.trace.gather_traces`."""
        return self.recorder.trace()

    def summary(self) -> dict[int, dict[str, float]]:
        """Messages, bytes, and time in compute versus waiting."""
        return self.trace().summary()

    def format_summary(self) -> str:
        return self.trace().format_summary()

    def __repr__(self) -> str:
        return f"<DistributedExecution {'done' if self.done() else 'running'}>"

# }}}


# {{{ running

def _run(partition: DistributedGraphPartition,
         prg_per_partition: Mapping[Hashable, BoundProgram],
         queue: cl.CommandQueue | None,
         plan: MessagePlan, ticket: int, allocator: Allocator | None,
         input_args: Mapping[str, object], recorder: TraceRecorder,
         stats: dict[str, object], control: DistributedExecution | None = None,
         out_host: bool = False) -> dict[str, PartValue]:
    plan.wait_for_turn(ticket)
    try:
        if plan.broken:
            raise DistributedExecutionError(
                f"rank {plan.rank}: an earlier execution of this partition "
                "failed; its messages cannot be reused")
        exchange: Exchange | None = None
        try:
            exchange = plan.begin(recorder)
            if control is not None:
                control.exchange = exchange
            first = plan.n_executions == 0
            if first:
                hold_part_compiles(prg_per_partition)
            n_done, context, scheduler = _schedule(
                partition, prg_per_partition, queue, exchange, allocator,
                input_args, recorder)
            exchange.finish()
        except BaseException as exc:
            if not isinstance(exc, RemoteRankError):
                plan.notify_failure(exc)
            if exchange is not None:
                exchange.abandon()
            else:
                plan.broken = True
            raise
        plan.n_executions += 1
        if first:
            # parts whose first call ran on the host while nothing was
            # compiled compile now, together, in a thread the next
            # execution (which may start once this turn ends) waits for
            compile_parts_in_background(prg_per_partition, queue)
    finally:
        plan.end_turn()
    stats.update(n_parts_run=n_done, n_messages_sent=exchange.n_messages_sent,
                 n_messages_received=exchange.n_messages_received,
                 bytes_sent=exchange.bytes_sent,
                 bytes_received=exchange.bytes_received,
                 overhead_ns=dict(exchange.overhead_ns),
                 messages="packed" if plan.packed else "per_array",
                 scheduler=scheduler)
    host_buffers = plan.host_buffers()
    results: dict[str, PartValue] = {}
    for name in partition.overall_output_names:
        # (an output's value: a NumPy or pyopencl array)
        value = cast("PartValue", context[name])
        if out_host and not isinstance(value, np.ndarray) \
                and hasattr(value, "get") and hasattr(value, "queue"):
            results[name] = _device_to_host(partition, name, value, queue)
            continue
        # never hand out memory the next execution receives into
        if isinstance(value, np.ndarray) and any(
                np.may_share_memory(value, b) for b in host_buffers):
            value = value.copy()
        elif plan.is_reused_device_array(value):
            value = value.copy()
        results[name] = value
    return results


def _device_to_host(partition: DistributedGraphPartition, name: str,
                    value: cla.Array, queue: cl.CommandQueue | None
                    ) -> np.ndarray:
    """The device result *name* copied to the host, with the dtype of the
    partition's output (booleans live as bytes on the device)."""
    host = value.get(queue=queue if queue is not None else value.queue)
    results = getattr(partition, "var_name_to_result", None) \
        or partition.name_to_output
    expr = results.get(name)
    if expr is not None and expr.dtype == np.bool_ and host.dtype != np.bool_:
        host = host.view(np.bool_)
    return host


def _forwarding_parts(partition: DistributedGraphPartition
                      ) -> dict[Hashable, dict[str, str]]:
    """Parts that compute nothing: every output is one of the part's inputs
    (a received value passed on), as ``{output name: input name}``. They
    run without calling their program (no kernel launch)."""
    results = partition.var_name_to_result
    forwarding = {}
    for pid, part in partition.parts.items():
        inputs = set(part.partition_input_names)
        names = {}
        for name in part.output_names:
            value = results.get(name)
            if not (isinstance(value, Placeholder) and value.name in inputs):
                break
            names[name] = value.name
        else:
            if names:
                forwarding[pid] = names
    return forwarding


def _awaited_names(partition: DistributedGraphPartition
                   ) -> dict[Hashable, tuple[str, ...]]:
    """Per part, the names it reads that no part of this rank computes
    (received values and user inputs): the scheduler waits for those
    that are not inputs to arrive."""
    local = {name for part in partition.parts.values()
             for name in part.output_names}
    return {pid: tuple(n for n in part.partition_input_names
                       if n not in local)
            for pid, part in partition.parts.items()}


class _MPIHooks(PartHooks):
    """This rank's part of the schedule (see
    :func:`~pytato_like.scheduler.run_parts`): received values are awaited
    names, a part's outputs are sent as soon as it has run, and sent
    outputs are computed into their messages' buffers."""

    def __init__(self, partition: DistributedGraphPartition,
                 queue: cl.CommandQueue | None,
                 exchange: Exchange, allocator: Allocator | None,
                 recorder: TraceRecorder,
                 prg_per_partition: Mapping[Hashable, BoundProgram] | None
                 = None
                 ) -> None:
        super().__init__(queue)
        plan = exchange.plan
        if plan.forwarding_parts is None:
            plan.forwarding_parts = _forwarding_parts(partition)
            plan.awaited_names = _awaited_names(partition)
        self.plan = plan
        self.exchange = exchange
        self.forwarding = plan.forwarding_parts
        self.awaited = cast("dict[Hashable, tuple[str, ...]]",
                            plan.awaited_names)
        self.options = {} if allocator is None else {"allocator": allocator}
        # parts whose code is not generated yet (lazy part programs) are
        # generated while this rank waits for messages (see arrivals)
        self.codegen = codegen_while_waiting(
            prg_per_partition or {}, partition, self.awaited, self.forwarding,
            queue, recorder)
        self.recorder = recorder
        self.records: dict[Hashable, TraceRecord] = {}

    def awaited_names(self, pid: Hashable, part: GraphPart) -> tuple[str, ...]:
        return self.awaited[pid]

    def n_pending(self) -> int:
        return self.exchange.n_pending

    def table_cache(self) -> dict:
        return self.plan.scheduler_tables

    def arrivals(self, block: bool) -> list[tuple[str, PartValue]]:
        if block:
            # code generation overlaps with the wait, a part at a time
            for _ in self.codegen:
                got = self.exchange.arrivals(False)
                if got:
                    return got
        return self.exchange.arrivals(block)

    def part_ready(self, pid: Hashable) -> None:
        self.records[pid] = self.recorder.part(pid)     # posted: runnable now

    def part_running(self, pid: Hashable) -> TraceRecord:
        return self.records.pop(pid)

    def forwarded_outputs(self, pid: Hashable, part: GraphPart,
                          values: Mapping[str, object]
                          ) -> dict[str, object] | None:
        names = self.forwarding.get(pid)
        if names is None:
            return None
        return {out: values[name] for out, name in names.items()}

    def call_options(self, pid: Hashable, prg: BoundProgram
                     ) -> dict[str, object]:
        return dict(self.options)

    def call_program(self, pid: Hashable, prg: BoundProgram,
                     queue: cl.CommandQueue | None,
                     kwargs: dict[str, Any]
                     ) -> tuple[object, Mapping[str, object]]:
        t0 = time.perf_counter_ns()
        c0 = time.thread_time_ns()
        # outputs stay on the device (sent from there, fed to parts); those
        # sent are computed into their messages' buffers where the program
        # can (no packing then): loopy's placed call, a target-specific
        # entry point beside the contract
        placed = (self.plan.placed_outputs(pid)
                  if isinstance(prg, BoundPyOpenCLProgram) else None)
        if placed:
            # (an input named like the option is the input)
            result = prg(queue, **{"placed_outputs": placed, **kwargs})
        else:
            result = prg(queue, **kwargs)
        self.exchange.count_program_calls(
            time.perf_counter_ns() - t0, time.thread_time_ns() - c0,
            prg.last_launch_ns() if isinstance(prg, BoundPyOpenCLProgram)
            else 0)
        return cast("tuple[object, Mapping[str, object]]", result)

    def part_done(self, pid: Hashable, outputs: Mapping[str, object],
                  event: object) -> None:
        self.exchange.send_part_outputs(pid, outputs)

    def blocked(self, waiting: dict[Hashable, list[str]]) -> NoReturn:
        missing = {pid: names for pid, names in waiting.items() if names}
        if not missing:
            super().blocked(waiting)     # a cycle among this rank's parts
        raise DistributedPartitionError(
            f"rank {self.exchange.rank}: parts {sorted(missing, key=repr)} "
            f"wait for inputs nothing provides: {missing}")


def _schedule(partition: DistributedGraphPartition,
              prg_per_partition: Mapping[Hashable, BoundProgram],
              queue: cl.CommandQueue | None,
              exchange: Exchange, allocator: Allocator | None,
              input_args: Mapping[str, object], recorder: TraceRecorder
              ) -> tuple[int, dict[str, object], str]:
    """Run every part; the number run, every value by name, and which
    scheduler ran them (``"steady"`` or ``"general"``)."""
    values: dict[str, object] = dict(input_args or {})
    if exchange.on_device:
        # once, while the queue is empty: a part program converting a host
        # input itself would block until the kernels before it finished
        import pyopencl.array as cla
        device_queue = cast("cl.CommandQueue", queue)   # (on a device)
        for name, value in values.items():
            if isinstance(value, np.ndarray):
                values[name] = cla.to_device(
                    device_queue, np.ascontiguousarray(value),
                    allocator=allocator)
    # from the second execution on, usually: the scheduler's prepared mode
    # with the hooks made for it
    steady = SteadyParts.for_execution(partition, prg_per_partition,
                                       exchange.plan, frozenset(values))
    if steady is not None:
        n_done = steady.run(exchange, queue, allocator, values, recorder)
        return n_done, values, "steady"
    hooks = _MPIHooks(partition, queue, exchange, allocator, recorder,
                      prg_per_partition)
    values, n_done = run_parts(partition, prg_per_partition, hooks, values)
    return n_done, values, "general"


def _threads_allowed(comm: Communicator) -> bool:
    if not hasattr(comm, "Irecv"):
        return True
    from mpi4py import MPI
    return MPI.Query_thread() == MPI.THREAD_MULTIPLE


def execute_distributed_partition(
        partition: DistributedGraphPartition,
        prg_per_partition: Mapping[Hashable, BoundProgram],
        queue: cl.CommandQueue | None, mpi_communicator: Communicator | None,
        *, allocator: Allocator | None = None,
        input_args: Mapping[str, object] | None = None,
        stats: dict[str, object] | None = None, wait: bool = True,
        messages: str = "packed", pack_on: str = "device",
        recorder: TraceRecorder | None = None, out_host: bool | None = None
        ) -> dict[str, PartValue] | DistributedExecution:
    """Run this rank's parts of *partition* (tags numbered by
    :func:`~pytato_like.number_distributed_tags`) and return the
    partitioned DAG's results by name -- or, with ``wait=False``, a
    :class:`DistributedExecution` handle whose
    :meth:`~DistributedExecution.wait` returns them.

    :arg allocator: for device arrays the executor makes (received values)
        and for part programs accepting ``allocator=``; default: the
        memory pool of :func:`~pytato_like.runtime.pool.get_buffer_pool`
        for *queue*.
    :arg messages: ``"packed"`` (one message per (part, destination
        rank)) or ``"per_array"`` (one per array, fresh buffers; for
        comparison). Must be the same on every rank.
    :arg pack_on: with device part programs, pack on the ``"device"``
        (OpenCL kernels, one device-host copy per message) or on the
        ``"host"`` (one device-host copy per array).
    :arg stats: if given, filled with ``n_parts_run``, ``n_messages_sent``
        and the other :attr:`DistributedExecution.stats`.
    :arg recorder: a :class:`~pytato_like.runtime.trace.TraceRecorder` that
        also receives this execution's records when it ends.
    :arg out_host: whether the results are NumPy arrays (``True``) or stay
        where the part programs computed them (``False``). ``None`` (the
        default) applies loopy's rule as pytato's bound programs do (see
        :func:`outputs_on_host`): NumPy arrays when every *input_args*
        value and every data wrapper's data is a NumPy array or a scalar,
        device arrays as soon as one of them is a device array.
    """
    # (the partition's own channel if its tags overlap another's)
    comm = communicator_for(partition, as_communicator(mpi_communicator))
    on_device = _on_device(prg_per_partition, queue)
    if on_device and allocator is None:
        allocator = get_buffer_pool(
            cast("cl.CommandQueue", queue)).memory_pool     # (on a device)
    plan = message_plan(partition, comm, queue if on_device else None,
                        messages=messages, pack_on=pack_on,
                        allocator=allocator if on_device else None)
    if out_host is None:
        out_host = on_device and outputs_on_host(partition, input_args or {})
    ticket = plan.take_ticket()
    # (its records carry the execution's number, for profiles)
    run_recorder = TraceRecorder(rank=comm.Get_rank(), execution=ticket)
    handle = DistributedExecution(plan, run_recorder)
    run_stats = handle.stats

    def run(control: DistributedExecution | None = None) -> dict[str, PartValue]:
        # (after the first execution of the plan: see pytato_like.collector)
        pause = plan.n_executions >= 1 and pausing_enabled()
        try:
            with collection_paused(pause):
                return _run(partition, prg_per_partition, queue, plan,
                            ticket, allocator if on_device else None,
                            input_args or {}, run_recorder, run_stats,
                            control, bool(out_host))
        finally:
            if stats is not None:
                stats.update(run_stats)
            if recorder is not None:
                recorder.extend(run_recorder.records)

    if wait:
        return run()
    if _threads_allowed(comm):
        # the thread holds the handle until the execution ends, so a dropped
        # handle still completes; the exit hook waits for it
        forget = track_execution(handle)

        def run_tracked() -> dict[str, PartValue]:
            result = run(handle)
            # a failure stays tracked until wait() has reported it
            forget()
            return result

        handle._forget = forget

        handle._handle = Handle.run_in_thread(
            run_tracked,
            name=f"distributed execution on rank {comm.Get_rank()}")
    else:
        try:
            handle._result = run()
        except Exception as exc:  # noqa: BLE001 -- re-raised by wait()
            handle._error = exc
    return handle


def execute_distributed_partition_async(
        partition: DistributedGraphPartition,
        prg_per_partition: Mapping[Hashable, BoundProgram],
        queue: cl.CommandQueue | None, mpi_communicator: Communicator | None,
        **kwargs: Any
        ) -> DistributedExecution:
    """:func:`execute_distributed_partition` with ``wait=False``: start the
    execution and return its :class:`DistributedExecution` handle."""
    return cast(DistributedExecution, execute_distributed_partition(
        partition, prg_per_partition, queue, mpi_communicator, wait=False,
        **kwargs))

# }}}

# vim: foldmethod=marker
