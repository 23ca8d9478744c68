"""Running a distributed partition: parts as soon as their inputs are there.

:func:`execute_distributed_partition` posts every receive first, then loops:
run the runnable part that comes first in
:attr:`~pytato_like.partition.GraphPartition.toposorted_part_ids` (its
inputs computed or received), start its sends at once, pick up arrived
receives without blocking; block (``Waitsome``) only when no part can run.
So communication overlaps with all computation that does not need it.

Part programs follow the bound-program convention ``prg(queue, **inputs)
-> (event, outputs)``: loopy/OpenCL programs (results are pyopencl arrays on
*queue*) or :class:`~pytato_like.partition.NumpyPartProgram` (NumPy arrays,
*queue* may be ``None``).

If a part raises, the other ranks are told (see
:mod:`pytato_like.distributed.comm`) and this rank re-raises.

.. autofunction:: execute_distributed_partition
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping
from typing import Any

from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed.comm import MessageLayer
from pytato_like.distributed.partition import DistributedGraphPartition
from pytato_like.distributed.safety import as_communicator
from pytato_like.target import BoundProgram


def _device_array_maker(prg_per_partition, queue, allocator):
    """A function moving received host arrays to *queue*'s device, when the
    part programs compute on a device; else ``None``."""
    from pytato_like.partition import NumpyPartProgram
    if queue is None or all(isinstance(p, NumpyPartProgram)
                            for p in prg_per_partition.values()):
        return None
    import pyopencl.array as cla

    def to_device(value):
        return cla.to_device(queue, value, allocator=allocator)
    return to_device


def execute_distributed_partition(
        partition: DistributedGraphPartition,
        prg_per_partition: Mapping[Hashable, BoundProgram],
        queue: Any, mpi_communicator: Any, *, allocator: Any = None,
        input_args: Mapping[str, Any] | None = None,
        stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run this rank's parts of *partition* (tags numbered by
    :func:`~pytato_like.number_distributed_tags`) and return the
    partitioned DAG's results by name.

    *stats*, if given, is filled with ``n_parts_run`` and
    ``n_messages_sent``."""
    comm = as_communicator(mpi_communicator)
    to_device = _device_array_maker(prg_per_partition, queue, allocator)
    layer = MessageLayer(comm)
    context: dict[str, Any] = dict(input_args or {})

    position = {pid: i for i, pid in enumerate(partition.toposorted_part_ids)}
    missing: dict[Hashable, set[str]] = {}
    readers: dict[str, list[Hashable]] = {}
    ready: list[tuple[int, Hashable]] = []
    for pid in partition.toposorted_part_ids:
        part = partition.parts[pid]
        missing[pid] = {n for n in part.partition_input_names if n not in context}
        for name in missing[pid]:
            readers.setdefault(name, []).append(pid)
        if not missing[pid]:
            heapq.heappush(ready, (position[pid], pid))

    def deliver(name: str, value: Any) -> None:
        context[name] = value
        for pid in readers.pop(name, ()):
            missing[pid].discard(name)
            if not missing[pid]:
                heapq.heappush(ready, (position[pid], pid))

    def receive(block: bool) -> None:
        for name, value in layer.arrivals(block):
            deliver(name, value if to_device is None else to_device(value))

    n_done = 0
    try:
        layer.post_receives(partition.recv_name_to_node())
        while n_done < len(partition.parts):
            if not ready:
                if not layer.n_pending:
                    waiting = {pid: sorted(m) for pid, m in missing.items() if m}
                    raise DistributedPartitionError(
                        f"rank {layer.rank}: parts {sorted(waiting, key=repr)} "
                        f"wait for inputs nothing provides: {waiting}")
                receive(block=True)
                continue
            _, pid = heapq.heappop(ready)
            part = partition.parts[pid]
            inputs = {name: context[name] for name in part.all_input_names()
                      if name in context}
            _evt, outputs = prg_per_partition[pid](queue, **inputs)
            for name, send in part.output_name_to_send_node.items():
                layer.send(send, outputs[name])
            for name, value in outputs.items():
                deliver(name, value)
            n_done += 1
            receive(block=False)
        layer.finish()
    except BaseException as exc:
        from pytato_like.diagnostic import RemoteRankError
        if not isinstance(exc, RemoteRankError):
            layer.notify_failure(exc)
            layer.abandon()
        raise

    if stats is not None:
        stats["n_parts_run"] = n_done
        stats["n_messages_sent"] = layer.n_messages_sent
    return {name: context[name] for name in partition.overall_output_names}
