"""The channel a numbered partition's messages travel on
(:mod:`pytato_like.distributed.channels`): partitions with overlapping tag
ranges get different channels, others share the communicator itself. The
MPI side (two partitions with the same tags executed in opposite orders)
is in tests/test_ranks_mpi.py. Also: the check that sends and receives
name ranks of the communicator."""

from __future__ import annotations

import gc

import pytest

import pytato_like as pt
from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed import channels
from pytato_like.distributed.partition import check_peer_ranks


def test_first_partition_stays_on_the_communicator():
    assert channels.choose_channel([], 100, 108) == 0


def test_disjoint_tag_ranges_share_the_communicator():
    # [100, 108) and [108, 120) do not overlap; neither do [0, 100)
    assert channels.choose_channel([(100, 108, 0), (0, 100, 0)], 108, 120) == 0


def test_overlapping_range_gets_the_lowest_free_channel():
    live = [(100, 108, 0), (100, 104, 1), (200, 300, 2)]
    assert channels.choose_channel(live, 103, 110) == 2
    assert channels.choose_channel(live, 105, 110) == 1
    assert channels.choose_channel(live + [(90, 101, 2)], 100, 101) == 3


def test_partition_numbered_without_mpi_runs_on_the_communicator_given():
    x = pt.make_placeholder("x", (3,))
    parts = pt.find_distributed_partition(None, {"y": x * 2})
    numbered, _ = pt.number_distributed_tags(None, parts, base_tag=5)
    marker = object()
    assert channels.communicator_for(numbered, marker) is marker


class _FakeComm:
    """Enough of a communicator for the registry (no MPI)."""

    def __init__(self):
        self.duplicates = []

    def Dup(self):  # noqa: N802 (mpi4py's name)
        dup = _FakeComm()
        self.duplicates.append(dup)
        return dup


def test_live_partitions_are_remembered_until_collected_and_channels_reused():
    comm = _FakeComm()
    x = pt.make_placeholder("x", (3,))
    first = pt.find_distributed_partition(None, {"y": x * 2})
    second = pt.find_distributed_partition(None, {"y": x * 3})
    channels.remember(first, comm, (100, 104, 0))
    assert channels.live_ranges(comm) == [(100, 104, 0)]
    channel = channels.choose_channel(channels.live_ranges(comm), 100, 104)
    assert channel == 1
    dup = channels.channel_communicator(comm, channel)
    assert comm.duplicates == [dup]
    channels.remember(second, comm, (100, 104, channel))
    assert channels.communicator_for(first, comm) is comm
    assert channels.communicator_for(second, comm) is dup
    del first
    gc.collect()
    assert channels.live_ranges(comm) == [(100, 104, 1)]
    # channel 0 is free again; channel 1 is made once and reused
    assert channels.choose_channel(channels.live_ranges(comm), 100, 104) == 0
    assert channels.channel_communicator(comm, 1) is dup
    assert len(comm.duplicates) == 1


@pytest.mark.parametrize(("sends", "recvs", "text"), [
    ([(5, "t")], [], "rank 0 sends to rank 5 (tag 't'), which is not a rank "
     "of the communicator: it has 2 rank(s), 0 to 1"),
    ([(1, "t")], [(-1, 3)], "rank 0 receives from rank -1 (tag 3), which "
     "is not a rank of the communicator: it has 2 rank(s), 0 to 1"),
    ([("1", "t")], [], "rank 0 sends to rank '1' (tag 't')"),
])
def test_peer_outside_the_communicator_is_named_with_the_size(sends, recvs,
                                                             text):
    with pytest.raises(DistributedPartitionError) as info:
        check_peer_ranks(0, 2, sends, recvs)
    assert text in str(info.value)


def test_peers_inside_the_communicator_pass():
    check_peer_ranks(1, 2, [(0, "a"), (1, "b")], [(0, "a")])
