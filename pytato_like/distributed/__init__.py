"""Distributed-memory evaluation of array DAGs over MPI.

A program marks where data crosses ranks with
:func:`staple_distributed_send` and :func:`make_distributed_recv`, then, on
every rank (all steps but the last are collective)::

    parts = pt.find_distributed_partition(comm, outputs)
    parts, _ = pt.number_distributed_tags(comm, parts, base_tag=42)
    pt.verify_distributed_partition(comm, parts)
    prgs = pt.generate_code_for_partition(parts)
    results = pt.execute_distributed_partition(parts, prgs, queue, comm)

The package has one module per concern:

* :mod:`~pytato_like.distributed.nodes` -- send and receive nodes;
* :mod:`~pytato_like.distributed.partition` -- the partitioner and the
  partition objects (pytato's ``DistributedGraphPart`` attributes
  ``name_to_recv_node``, ``name_to_send_nodes``, ...);
* :mod:`~pytato_like.distributed.overlap` -- the partitioner's split of
  boundary from interior, so messages overlap with computation;
* :mod:`~pytato_like.distributed.tags` -- user tags to MPI tags;
* :mod:`~pytato_like.distributed.verify` -- global checks before running
  (and pytato's names for their errors);
* :mod:`~pytato_like.distributed.messages` -- which arrays travel together;
* :mod:`~pytato_like.distributed.comm` -- the send/receive layer (packed,
  persistent messages);
* :mod:`~pytato_like.distributed.execute` -- the executor;
* :mod:`~pytato_like.distributed.safety` -- how a failure on one rank ends
  all ranks.
"""

from __future__ import annotations

from pytato_like.distributed.comm import MessagePlan
from pytato_like.distributed.execute import (
    DistributedExecution,
    execute_distributed_partition,
    execute_distributed_partition_async,
    message_plan,
)
from pytato_like.distributed.messages import Message
from pytato_like.distributed.nodes import (
    CommTagType,
    DistributedRecv,
    DistributedSend,
    DistributedSendRefHolder,
    make_distributed_recv,
    make_distributed_send,
    make_distributed_send_ref_holder,
    staple_distributed_send,
)
from pytato_like.distributed.partition import (
    CommunicationOpIdentifier,
    DistributedGraphPart,
    DistributedGraphPartition,
    find_distributed_partition,
)
from pytato_like.distributed.safety import SingleRankCommunicator, abort_on_error
from pytato_like.distributed.tags import number_distributed_tags
from pytato_like.distributed.verify import verify_distributed_partition
from pytato_like.partition import generate_code_for_partition

__all__ = [
    "CommTagType",
    "CommunicationOpIdentifier",
    "DistributedExecution",
    "DistributedGraphPart",
    "DistributedGraphPartition",
    "DistributedRecv",
    "DistributedSend",
    "DistributedSendRefHolder",
    "Message",
    "MessagePlan",
    "SingleRankCommunicator",
    "abort_on_error",
    "execute_distributed_partition",
    "execute_distributed_partition_async",
    "find_distributed_partition",
    "generate_code_for_partition",
    "make_distributed_recv",
    "make_distributed_send",
    "make_distributed_send_ref_holder",
    "message_plan",
    "number_distributed_tags",
    "staple_distributed_send",
    "verify_distributed_partition",
]
