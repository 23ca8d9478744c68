"""Send and receive nodes carry non-equality tags like every array (they
take no part in equality or hashing, and survive copies)."""

from __future__ import annotations

import numpy as np

import pytato_like as pt
from pytato_like.distributed.nodes import DistributedRecv, DistributedSendRefHolder
from pytato_like.tags import ImplStored


def test_receive_keeps_non_equality_tags_out_of_equality():
    tag = frozenset({ImplStored()})
    plain = DistributedRecv(1, "t", (3,), np.dtype(np.float64))
    tagged = DistributedRecv(1, "t", (3,), np.dtype(np.float64),
                             non_equality_tags=tag)
    assert tagged.non_equality_tags == tag
    assert plain == tagged and hash(plain) == hash(tagged)
    copied = tagged.copy(comm_tag=5)
    assert copied.comm_tag == 5 and copied.non_equality_tags == tag


def test_send_holder_keeps_non_equality_tags():
    x = pt.make_placeholder("x", (3,))
    held = pt.staple_distributed_send(x * 2, 1, "t", x)
    assert isinstance(held, DistributedSendRefHolder)
    tag = frozenset({ImplStored()})
    copied = held.copy(non_equality_tags=tag)
    assert copied.non_equality_tags == tag and copied == held
    assert copied.send.dest_rank == 1 and copied.send.comm_tag == "t"
