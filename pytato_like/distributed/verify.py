"""Checking a distributed partition across all ranks before it runs.

:func:`verify_distributed_partition` gathers a summary of every rank's
parts, sends and receives on rank 0, which checks, in this order:

1. no two sends share (source rank, destination rank, tag)
   (:class:`~pytato_like.diagnostic.DuplicateSendError`), nor two receives
   (:class:`~pytato_like.diagnostic.DuplicateRecvError`);
2. every send has a receive
   (:class:`~pytato_like.diagnostic.UnmatchedSendError`) and every receive a
   send (:class:`~pytato_like.diagnostic.UnmatchedRecvError`);
3. each send and its receive agree on shape and dtype
   (:class:`~pytato_like.diagnostic.SendRecvMismatchError`);
4. the global graph of parts (each part after the parts it needs, each
   receiving part after the part that sends to it) has no cycle
   (:class:`~pytato_like.diagnostic.CycleAcrossRanksError`): a feasible
   execution order exists.

The verdict is broadcast, so every rank raises the same error.

pytato's names for these errors are importable from here and catch the
same exceptions: :class:`DuplicateSendError`, :class:`DuplicateRecvError`,
``MissingSendError`` (a receive without its send, the same class as
:class:`~pytato_like.diagnostic.UnmatchedRecvError`), ``MissingRecvError``
(a send without its receive, i.e.
:class:`~pytato_like.diagnostic.UnmatchedSendError`),
``DistributedPartitionVerificationError`` (their base,
:class:`~pytato_like.diagnostic.DistributedPartitionError`) and
:class:`PartitionInducedCycleError` (also the base of
:class:`~pytato_like.diagnostic.CycleAcrossRanksError`).

.. autofunction:: verify_distributed_partition
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, TypedDict

from pytato_like.diagnostic import (
    CycleAcrossRanksError,
    DistributedPartitionError,
    DuplicateRecvError,
    DuplicateSendError,
    PartitionInducedCycleError,
    SendRecvMismatchError,
    UnmatchedRecvError,
    UnmatchedSendError,
)
from pytato_like.distributed.partition import (
    CommunicationOpIdentifier,
    DistributedGraphPartition,
)
from pytato_like.distributed.safety import (
    as_communicator,
    gather_to_root_or_raise,
)

if TYPE_CHECKING:
    from pytato_like.distributed.safety import Communicator


class _Summary(TypedDict):
    """What one rank tells the root about its partition."""

    #: part id -> the parts it needs
    parts: dict[Hashable, list[Hashable]]
    #: (part id, destination, tag, shape, dtype) per send
    sends: list[tuple[Hashable, int, Hashable, tuple, str]]
    #: [source, tag, shape, dtype, part ids] per receive
    recvs: list[list]

# pytato's names for the same errors
DistributedPartitionVerificationError = DistributedPartitionError
MissingSendError = UnmatchedRecvError   # a receive whose send is missing
MissingRecvError = UnmatchedSendError   # a send whose receive is missing

__all__ = [
    "CycleAcrossRanksError",
    "DistributedPartitionVerificationError",
    "DuplicateRecvError",
    "DuplicateSendError",
    "MissingRecvError",
    "MissingSendError",
    "PartitionInducedCycleError",
    "SendRecvMismatchError",
    "verify_distributed_partition",
]


def _shape_repr(shape) -> tuple:
    return tuple(s if isinstance(s, int) else repr(s) for s in shape)


def _summary(partition: DistributedGraphPartition) -> _Summary:
    parts = {pid: sorted(part.needed_pids, key=repr)
             for pid, part in partition.parts.items()}
    sends: list[tuple[Hashable, int, Hashable, tuple, str]] = []
    recvs: dict[str, list] = {}
    for pid, part in partition.parts.items():
        for name, name_sends in part.name_to_send_nodes.items():
            data = partition.name_to_output[name]
            sends.extend((pid, send.dest_rank, send.comm_tag,
                          _shape_repr(data.shape), str(data.dtype))
                         for send in name_sends)
        for name, recv in part.name_to_recv_node.items():
            entry = recvs.setdefault(
                name, [recv.src_rank, recv.comm_tag, _shape_repr(recv.shape),
                       str(recv.dtype), []])
            entry[4].append(pid)
    return {"parts": parts, "sends": sends, "recvs": list(recvs.values())}


def _check(summaries: list[_Summary]) -> tuple[str, str] | None:
    import networkx as nx

    # communication -> (pid, shape, dtype) of its send, (pids, shape, dtype)
    # of its receive
    send_at: dict[CommunicationOpIdentifier, tuple] = {}
    recv_at: dict[CommunicationOpIdentifier, tuple] = {}
    for rank, summary in enumerate(summaries):
        for pid, dest, tag, shape, dtype in summary["sends"]:
            key = CommunicationOpIdentifier(rank, dest, tag)
            if key in send_at:
                return ("DuplicateSendError",
                        f"rank {rank} sends twice to rank {dest} with tag "
                        f"{tag!r} (parts {send_at[key][0]!r} and {pid!r})")
            send_at[key] = (pid, shape, dtype)
        for src, tag, shape, dtype, pids in summary["recvs"]:
            key = CommunicationOpIdentifier(src, rank, tag)
            if key in recv_at:
                return ("DuplicateRecvError",
                        f"rank {rank} receives twice from rank {src} with tag "
                        f"{tag!r} (shapes {recv_at[key][1]} and {shape})")
            recv_at[key] = (pids, shape, dtype)

    for (src, dest, tag) in send_at:
        if (src, dest, tag) not in recv_at:
            return ("UnmatchedSendError",
                    f"rank {src} sends to rank {dest} with tag {tag!r}, but "
                    f"rank {dest} has no matching receive")
    for (src, dest, tag) in recv_at:
        if (src, dest, tag) not in send_at:
            return ("UnmatchedRecvError",
                    f"rank {dest} receives from rank {src} with tag {tag!r}, "
                    f"but rank {src} has no matching send")
    for key, (_, send_shape, send_dtype) in send_at.items():
        _, recv_shape, recv_dtype = recv_at[key]
        if send_shape != recv_shape or send_dtype != recv_dtype:
            src, dest, tag = key
            return ("SendRecvMismatchError",
                    f"rank {src} sends shape {send_shape}, dtype {send_dtype} "
                    f"to rank {dest} with tag {tag!r}, but rank {dest} "
                    f"receives shape {recv_shape}, dtype {recv_dtype}")

    graph = nx.DiGraph()
    for rank, summary in enumerate(summaries):
        for pid, needed in summary["parts"].items():
            graph.add_node((rank, pid))
            graph.add_edges_from(((rank, q), (rank, pid)) for q in needed)
    for (src, dest, tag), (send_pid, _, _) in send_at.items():
        for recv_pid in recv_at[CommunicationOpIdentifier(src, dest, tag)][0]:
            graph.add_edge((src, send_pid), (dest, recv_pid), tag=tag)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return None
    steps = []
    for u, v in cycle:
        tag = graph.edges[u, v].get("tag")
        via = f" (message with tag {tag!r})" if u[0] != v[0] else ""
        steps.append(f"rank {u[0]} part {u[1]!r} -> rank {v[0]} part {v[1]!r}{via}")
    return ("CycleAcrossRanksError",
            "no rank can start: the parts of all ranks wait on each other in "
            "a cycle: " + "; ".join(steps))


def verify_distributed_partition(mpi_communicator: Communicator | None,
                                 partition: DistributedGraphPartition) -> None:
    """Check that *partition* can run on all ranks (see the module
    documentation); raise the same typed error on every rank otherwise.
    Collective over *mpi_communicator*."""
    comm = as_communicator(mpi_communicator)
    gather_to_root_or_raise(comm, "verification",
                            lambda: _summary(partition), _check)
