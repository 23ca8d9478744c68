"""Turning user communication tags into MPI tags.

Users tag sends and receives with any hashable, picklable object; MPI needs
integers. :func:`number_distributed_tags` gathers every rank's tags on rank
0, which sorts them (by ``repr``, then pickled bytes: sorting on one rank
makes the order independent of per-process hash seeds) and broadcasts the
list; tag ``i`` of the list becomes ``base_tag + i`` on every rank.

The same collective also gathers which sends leave each part for each
rank, so that the numbered partition knows its packed messages (see
:mod:`~pytato_like.distributed.messages`).

.. autofunction:: number_distributed_tags
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed.messages import local_send_groups, messages_of_rank
from pytato_like.distributed.partition import DistributedGraphPartition
from pytato_like.distributed.safety import (
    allgather_or_raise,
    as_communicator,
)


def _local_tags(partition: DistributedGraphPartition) -> list[Any]:
    tags: dict[Any, None] = {}
    for part in partition.parts.values():
        for recv in part.input_name_to_recv_node.values():
            tags[recv.comm_tag] = None
        for send in part.output_name_to_send_node.values():
            tags[send.comm_tag] = None
    return list(tags)


def _sort_key(tag: Any) -> tuple[str, bytes]:
    return repr(tag), pickle.dumps(tag)


def _max_mpi_tag(comm: Any) -> int | None:
    try:
        from mpi4py import MPI
        value = comm.Get_attr(MPI.TAG_UB)
    except Exception:
        return None
    return None if value is None else int(value)


def number_distributed_tags(mpi_communicator: Any,
                            partition: DistributedGraphPartition,
                            base_tag: int
                            ) -> tuple[DistributedGraphPartition, int]:
    """*partition* with every communication tag replaced by an integer
    ``>= base_tag``, the same on all ranks, and the first unused tag.
    Collective over *mpi_communicator*."""
    comm = as_communicator(mpi_communicator)
    rank = comm.Get_rank()

    gathered = allgather_or_raise(
        comm, "tag numbering",
        lambda: (_local_tags(partition), local_send_groups(partition, rank)))
    payload: tuple[bool, Any] | None = None
    if rank == 0:
        try:
            union: dict[Any, None] = {}
            for local_tags, _ in gathered:
                union.update(dict.fromkeys(local_tags))
            payload = (True, sorted(union, key=_sort_key))
        except Exception as exc:
            payload = (False, f"{type(exc).__name__}: {exc}")
    ok, tags = comm.bcast(payload, root=0)
    if not ok:
        raise DistributedPartitionError(
            f"rank 0 could not order the communication tags: {tags}")
    tag_to_int = {tag: base_tag + i for i, tag in enumerate(tags)}
    next_tag = base_tag + len(tags)
    ub = _max_mpi_tag(comm)
    if ub is not None and next_tag - 1 > ub:
        raise DistributedPartitionError(
            f"numbering {len(tags)} communication tags from {base_tag} "
            f"exceeds the MPI tag limit {ub} on rank {rank}")

    parts = {}
    for pid, part in partition.parts.items():
        sends = {name: send.copy(comm_tag=tag_to_int[send.comm_tag])
                 for name, send in part.output_name_to_send_node.items()}
        parts[pid] = dataclasses.replace(
            part,
            input_name_to_recv_node={
                name: recv.copy(comm_tag=tag_to_int[recv.comm_tag])
                for name, recv in part.input_name_to_recv_node.items()},
            output_name_to_send_node=sends,
            distributed_sends=list(sends.values()))
    messages = messages_of_rank(rank, [groups for _, groups in gathered],
                                tag_to_int)
    return (dataclasses.replace(partition, parts=parts, messages=messages),
            next_tag)

