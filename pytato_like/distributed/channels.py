"""Which communicator the messages of a numbered partition travel on.

MPI matches a message by (source rank, tag, communicator). Two partitions
numbered with overlapping tag ranges (the same ``base_tag``, say) and
executed on one communicator could receive each other's messages: ranks
that run them in different orders (asynchronous executions started in
opposite orders) would cross them silently when the shapes agree. This
module keeps such partitions apart:

1. Each communicator has a list of *channels*: channel 0 is the
   communicator itself, channel ``c > 0`` a duplicate (``MPI_Comm_dup``)
   made by a numbering that needed it; every rank holds the same list,
   since numberings are collective and run in the same order everywhere.
2. :func:`~pytato_like.number_distributed_tags` shares, in the collective
   it makes anyway, each rank's :func:`live_ranges`: the tag range and
   channel of every partition numbered on this communicator that is still
   alive on that rank.
3. :func:`choose_channel` picks the lowest channel on which no rank holds
   a live partition whose tag range overlaps the new one -- the same on
   every rank, since every rank sees the same ranges; when none is free,
   :func:`channel_communicator` duplicates the communicator (on every rank
   at once).
4. The executor sends and receives a partition's messages on its channel
   (:func:`communicator_for`).

A program that numbers one partition, or its partitions with disjoint tag
ranges, stays on the communicator itself (nothing is duplicated); a
duplicate is reused once no rank holds a partition with an overlapping
range on it, so their number stays that of the overlapping partitions
alive at one time. A partition that was not numbered in this process
(unpickled, numbered by hand) runs on the communicator it is given.

.. autofunction:: live_ranges
.. autofunction:: choose_channel
.. autofunction:: communicator_for
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpi4py import MPI

    from pytato_like.distributed.partition import DistributedGraphPartition
    from pytato_like.distributed.safety import Communicator

#: (first tag, last tag + 1, channel) of a numbered partition
TagRange = tuple[int, int, int]

_LOCK = threading.Lock()
# id(base communicator) -> (the communicator, its channels by number)
_CHANNELS: dict[int, tuple[MPI.Comm, list[MPI.Comm]]] = {}
# id(base communicator) -> id(partition) -> (weak reference, tag range)
_NUMBERED: dict[int, dict[int, tuple[
    weakref.ref[DistributedGraphPartition], TagRange]]] = {}


def live_ranges(comm: Communicator) -> list[TagRange]:
    """The tag ranges and channels of the partitions numbered on *comm*
    (by this process) that are still alive."""
    with _LOCK:
        entries = _NUMBERED.get(id(comm), {})
        return [rng for ref, rng in entries.values() if ref() is not None]


def choose_channel(ranges: Iterable[TagRange], first: int, end: int) -> int:
    """The lowest channel on which none of *ranges* overlaps the tags
    ``first`` to ``end - 1`` (a new channel's number if every existing
    one is taken)."""
    taken = {channel for lo, hi, channel in ranges
             if lo < end and first < hi}
    channel = 0
    while channel in taken:
        channel += 1
    return channel


def channel_communicator(comm: MPI.Comm, channel: int) -> MPI.Comm:
    """The communicator of *channel* on *comm* (channel 0: *comm*); a
    channel not made yet is made by duplicating *comm*, which is
    collective: every rank must ask for it at the same point (numbering
    does)."""
    if channel == 0:
        return comm
    with _LOCK:
        held = _CHANNELS.get(id(comm))
        if held is None or held[0] is not comm:
            held = _CHANNELS[id(comm)] = (comm, [comm])
        channels = held[1]
        if channel < len(channels):
            return channels[channel]
    if channel != len(channels):
        raise AssertionError(f"channel {channel} asked for before channel "
                             f"{len(channels)}")
    duplicate = comm.Dup()
    with _LOCK:
        channels.append(duplicate)
    return duplicate


def remember(partition: DistributedGraphPartition, comm: MPI.Comm,
             tag_range: TagRange) -> None:
    """Note that *partition* was numbered on *comm* with *tag_range*
    (forgotten when the partition is garbage-collected)."""
    key, pid = id(comm), id(partition)
    with _LOCK:
        _NUMBERED.setdefault(key, {})[pid] = (weakref.ref(partition),
                                              tag_range)
    finalizer = weakref.finalize(partition, _forget, key, pid)
    finalizer.atexit = False


def _forget(comm_key: int, partition_key: int) -> None:
    with _LOCK:
        _NUMBERED.get(comm_key, {}).pop(partition_key, None)


def communicator_for(partition: DistributedGraphPartition,
                     comm: Communicator) -> Communicator:
    """The communicator *partition*'s messages travel on when it is
    executed on *comm*: its channel if it was numbered on *comm* in this
    process, else *comm*."""
    with _LOCK:
        entry = _NUMBERED.get(id(comm), {}).get(id(partition))
        held = _CHANNELS.get(id(comm))
    if entry is None or entry[0]() is not partition:
        return comm
    channel = entry[1][2]
    if channel == 0:
        return comm
    # (made when the partition was numbered)
    assert held is not None and held[0] is comm
    return held[1][channel]
