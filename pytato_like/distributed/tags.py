"""Turning user communication tags into MPI tags.

Users tag sends and receives with any hashable, picklable object; MPI needs
integers. :func:`number_distributed_tags` gathers every rank's tags on rank
0, which sorts them (by ``repr``, then pickled bytes: sorting on one rank
makes the order independent of per-process hash seeds) and broadcasts the
list; tag ``i`` of the list becomes ``base_tag + i`` on every rank.

The same collective also gathers which sends leave each part for each
rank, so that the numbered partition knows its packed messages (see
:mod:`~pytato_like.distributed.messages`).

Numbering is also where tags are checked, without waiting for
:func:`~pytato_like.verify_distributed_partition`: a rank that sends twice
to one rank with one tag (or receives twice) raises
:class:`~pytato_like.diagnostic.DuplicateSendError`
(:class:`~pytato_like.diagnostic.DuplicateRecvError`), and a numbering
that would leave the MPI tag range -- a negative ``base_tag``, or past the
communicator's ``MPI.TAG_UB`` minus the two tags the executor reserves --
raises :class:`~pytato_like.diagnostic.CommunicationTagError`. The other
ranks raise :class:`~pytato_like.diagnostic.RemoteRankError` naming the
rank at fault (both from the one collective numbering needs anyway).

The same collective shares the tag ranges of the partitions numbered
earlier on the communicator and still alive on any rank: a partition whose
range overlaps one of them gets its own channel (a duplicate of the
communicator, see :mod:`~pytato_like.distributed.channels`), so that
executions of the two in any order on any rank never receive each other's
messages.

.. autofunction:: number_distributed_tags
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Hashable
from typing import TYPE_CHECKING

from pytato_like.diagnostic import (
    CommunicationTagError,
    DistributedPartitionError,
    DuplicateRecvError,
    DuplicateSendError,
)
from pytato_like.distributed import channels
from pytato_like.distributed.messages import local_send_groups, messages_of_rank
from pytato_like.distributed.partition import DistributedGraphPartition
from pytato_like.distributed.safety import (
    allgather_or_raise,
    as_communicator,
    is_mpi,
    max_user_tag,
)

if TYPE_CHECKING:
    from pytato_like.distributed.channels import TagRange
    from pytato_like.distributed.safety import Communicator


def _local_tags(partition: DistributedGraphPartition) -> list[Hashable]:
    tags: dict[Hashable, None] = {}
    for part in partition.parts.values():
        for recv in part.input_name_to_recv_node.values():
            tags[recv.comm_tag] = None
        for send in part.output_name_to_send_node.values():
            tags[send.comm_tag] = None
    return list(tags)


def _check_duplicates(partition: DistributedGraphPartition, rank: int
                      ) -> None:
    """Raise if this rank sends twice to one rank (or receives twice from
    one rank) with one tag: MPI could not tell the messages apart."""
    seen: dict[tuple[str, int, Hashable], str] = {}
    for pid in partition.toposorted_part_ids:
        part = partition.parts[pid]
        for name, send in sorted(part.output_name_to_send_node.items()):
            key = ("send", send.dest_rank, send.comm_tag)
            if key in seen:
                raise DuplicateSendError(
                    f"rank {rank} sends twice to rank {send.dest_rank} with "
                    f"tag {send.comm_tag!r} ({seen[key]!r} and {name!r}); "
                    "give each send to one rank its own tag")
            seen[key] = name
        for name, recv in sorted(part.input_name_to_recv_node.items()):
            key = ("recv", recv.src_rank, recv.comm_tag)
            if key in seen and seen[key] != name:
                raise DuplicateRecvError(
                    f"rank {rank} receives twice from rank {recv.src_rank} "
                    f"with tag {recv.comm_tag!r} ({seen[key]!r} and "
                    f"{name!r}); give each receive from one rank its own tag")
            seen[key] = name


def _check_base_tag(base_tag: object, rank: int) -> None:
    if not isinstance(base_tag, int) or isinstance(base_tag, bool) \
            or base_tag < 0:
        raise CommunicationTagError(
            f"base_tag={base_tag!r} on rank {rank}: MPI tags are integers "
            ">= 0")


def _local_summary(partition: DistributedGraphPartition, comm: Communicator,
                   base_tag: object
                   ) -> tuple[list[Hashable], list, list[TagRange]]:
    rank = comm.Get_rank()
    _check_base_tag(base_tag, rank)
    _check_duplicates(partition, rank)
    return (_local_tags(partition), local_send_groups(partition, rank),
            channels.live_ranges(comm))


def _sort_key(tag: object) -> tuple[str, bytes]:
    return repr(tag), pickle.dumps(tag)


def number_distributed_tags(mpi_communicator: Communicator | None,
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
        lambda: _local_summary(partition, comm, base_tag))
    # (the ordered tags, or the error text)
    payload: tuple[bool, list[Hashable] | str] | None = None
    if rank == 0:
        try:
            union: dict[Hashable, None] = {}
            for local_tags, _, _ in gathered:
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
    ub = max_user_tag(comm)
    if ub is not None and next_tag - 1 > ub:
        raise CommunicationTagError(
            f"numbering {len(tags)} communication tags from base_tag="
            f"{base_tag} reaches tag {next_tag - 1}, past the largest tag the "
            f"executor can use on this communicator ({ub}: MPI.TAG_UB minus "
            f"two reserved tags; seen on rank {rank})")

    parts = {}
    for pid, part in partition.parts.items():
        sends = {name: send.copy(comm_tag=tag_to_int[send.comm_tag])
                 for name, send in part.output_name_to_send_node.items()}
        # DistributedGraphPart.__init__ also takes pytato's keyword names,
        # which mypy's dataclass plugin does not know
        parts[pid] = dataclasses.replace(  # type: ignore[call-arg]
            part,
            input_name_to_recv_node={
                name: recv.copy(comm_tag=tag_to_int[recv.comm_tag])
                for name, recv in part.input_name_to_recv_node.items()},
            output_name_to_send_node=sends,
            distributed_sends=list(sends.values()))
    messages = messages_of_rank(rank, [groups for _, groups, _ in gathered],
                                tag_to_int)
    numbered = dataclasses.replace(partition, parts=parts, messages=messages)
    if is_mpi(comm):
        # every rank sees the same ranges, so it picks the same channel
        channel = channels.choose_channel(
            (rng for _, _, ranges in gathered for rng in ranges),
            base_tag, next_tag)
        # (a new channel: duplicated on every rank at this point, with its
        # notice board, as every communicator of the executor has one)
        as_communicator(channels.channel_communicator(comm, channel))
        channels.remember(numbered, comm, (base_tag, next_tag, channel))
    return numbered, next_tag

