"""Which arrays travel together: one message per (part, destination rank).

When a part has run, every array it sends to one rank is ready at the same
moment, so they go as *one* packed message instead of one message each:
one latency per neighbour and step instead of one per array.

The sender knows its parts; the receiver does not. So the grouping is
decided where every rank already talks to every other:
:func:`~pytato_like.number_distributed_tags` gathers each rank's send
groups together with its tags, and records in the numbered partition
(:attr:`~pytato_like.DistributedGraphPartition.messages`) every
:class:`Message` this rank sends or receives. Both sides then derive the
same buffer layout (the arrays in ascending tag order, see
:mod:`pytato_like.runtime.halo`) without ever exchanging it.

Messages to the own rank are not listed: a value a rank sends to itself is
handed over without MPI.

.. autoclass:: Message
.. autofunction:: local_send_groups
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytato_like.distributed.partition import DistributedGraphPartition


@dataclasses.dataclass(frozen=True)
class Message:
    """One packed MPI message.

    .. attribute:: src_rank
    .. attribute:: dest_rank
    .. attribute:: tag

        The MPI tag of the message: the smallest tag among its arrays
        (tags of different messages between two ranks are disjoint, so
        this is unique per (source, destination)).

    .. attribute:: comm_tags

        The (numbered) communication tags of the arrays in the message, in
        buffer order (ascending).

    .. attribute:: sender_part

        The id of the part that sends it, on the sending rank.
    """

    src_rank: int
    dest_rank: int
    tag: int
    comm_tags: tuple[int, ...]
    sender_part: Hashable

    @property
    def n_arrays(self) -> int:
        return len(self.comm_tags)


def local_send_groups(partition: DistributedGraphPartition, rank: int
                      ) -> list[tuple[Hashable, int, list[Hashable]]]:
    """``(part id, destination, [comm tags])`` for every (part, destination
    rank) of *partition* that sends to another rank, tags as they are in
    the partition (user tags before numbering)."""
    groups: dict[tuple[Hashable, int], list[Hashable]] = {}
    for pid in partition.toposorted_part_ids:
        part = partition.parts[pid]
        for send in part.output_name_to_send_node.values():
            if send.dest_rank != rank:
                groups.setdefault((pid, send.dest_rank), []).append(
                    send.comm_tag)
    return [(pid, dest, tags) for (pid, dest), tags in groups.items()]


def messages_of_rank(rank: int,
                     gathered_groups: list[list[tuple[Hashable, int, list]]],
                     tag_to_int: Mapping[Hashable, int]) -> tuple[Message, ...]:
    """The messages *rank* sends or receives, from every rank's
    :func:`local_send_groups` (indexed by sending rank)."""
    messages = []
    for src, groups in enumerate(gathered_groups):
        for pid, dest, tags in groups:
            if rank not in (src, dest):
                continue
            numbered = tuple(sorted(tag_to_int[t] for t in tags))
            messages.append(Message(src, dest, numbered[0], numbered, pid))
    return tuple(messages)
