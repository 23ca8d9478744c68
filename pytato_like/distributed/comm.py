"""The send/receive layer under the distributed executor.

Two objects split what stays from what changes:

* :class:`MessagePlan` -- built once per (partition, communicator, queue,
  mode) and kept for every later execution: the messages this rank sends
  (one per (part, destination rank)) and receives, a packer or unpacker
  (:class:`~pytato_like.runtime.halo.HaloDataTransformer`) and a
  preallocated buffer per message, and persistent MPI requests
  (``Send_init`` / ``Recv_init``, restarted with ``Start`` /
  ``Startall``). The receive buffers are registered in a
  :class:`~pytato_like.runtime.recv_buffers.ReceiveBufferRegistry`
  (:attr:`MessagePlan.receive_buffers`): the same buffer objects in every
  execution.
* :class:`Exchange` -- one execution: starts the receives, packs and sends
  a part's outputs as soon as the part has run, reports arrivals
  (``Testsome``, polled with a back-off when it must wait; unpacked),
  and finally waits for the sends.
  Every message, pack, unpack and blocking wait is recorded in a
  :class:`~pytato_like.runtime.trace.TraceRecorder`.

Modes (the same on every rank):

``messages="packed"`` (default)
    One message per (part, destination rank), with the grouping recorded by
    :func:`~pytato_like.number_distributed_tags`
    (:attr:`~pytato_like.DistributedGraphPartition.messages`).
``messages="per_array"``
    One ``Isend`` / ``Irecv`` per array into fresh buffers, as before
    packing existed; kept to measure what packing gains.

When the part programs compute on an OpenCL device, ``pack_on="device"``
moves one buffer per message between device and host (asynchronously: the
send starts when the copy's event completes). A message whose arrays share
one dtype and byte count (a halo: the same cells of several fields) lives
on the device as sub-buffers of one buffer (:class:`_PaddedMessage`): the
sending part program computes its outputs straight into them (from the
second execution on, see
:meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram.__call__`,
``placed_outputs``),
the receiving parts read them, and one rectangular copy moves the message
-- no pack or unpack kernel. A message of zero bytes (empty arrays only)
is sent and received as such, with no copy and no packer: its receiver's
values are empty arrays made once. Other messages are packed and unpacked by the
OpenCL transformer on the queue. ``pack_on="host"`` copies each array to
the host and packs there. All give the same bytes on the wire.

Messages are raw bytes (``MPI.BYTE``), so any dtype travels, and both
sides derive the buffer layout from the shapes and dtypes they agree on.
The executor does not rely on the user having run
:func:`~pytato_like.verify_distributed_partition`: the first execution of
a plan exchanges, once, a small *header* per message with every other rank
(tag, and per array its tag, shape, dtype and byte count; on the reserved
tag ``MPI.TAG_UB - 1``) and raises on every rank involved, naming both
ranks, when a send and its receive disagree
(:class:`~pytato_like.diagnostic.SendRecvMismatchError`), when one has no
partner (:class:`~pytato_like.diagnostic.UnmatchedSendError`,
:class:`~pytato_like.diagnostic.UnmatchedRecvError`) or when a tag is used
twice (:class:`~pytato_like.diagnostic.DuplicateSendError`, checked when
the plan is built). Later executions check only each arrival's byte
count. A send to the own rank is handed over directly.

Waits never block inside MPI (see
:func:`~pytato_like.distributed.safety.poll_until`): they poll the
requests and the :class:`~pytato_like.distributed.safety.NoticeBoard` of
the communicator, so a failure on another rank
(:meth:`Exchange.notify_failure`) raises
:class:`~pytato_like.diagnostic.RemoteRankError` and a peer that left the
program raises :class:`~pytato_like.diagnostic.RankDepartedError` instead
of waiting forever.

.. autoclass:: MessagePlan
    :members: receive_buffers, n_outgoing, n_incoming, free,
        is_reused_device_array
.. autoclass:: Exchange
    :members:
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import numpy as np

from pytato_like.diagnostic import (
    CommunicationTagError,
    DistributedExecutionError,
    DistributedPartitionError,
    DuplicateRecvError,
    DuplicateSendError,
    SendRecvMismatchError,
    UnmatchedRecvError,
    UnmatchedSendError,
)
from pytato_like.distributed.nodes import DistributedRecv
from pytato_like.distributed.partition import check_peer_ranks
from pytato_like.distributed.safety import (
    header_tag,
    is_mpi,
    max_user_tag,
    notice_board,
    poll_until,
)
from pytato_like.runtime.halo import HaloDataTransformer, HaloExchangeSpec
from pytato_like.runtime.pool import get_buffer_pool
from pytato_like.runtime.recv_buffers import ReceiveBufferRegistry
from pytato_like.runtime.trace import TraceRecorder

if TYPE_CHECKING:
    from typing import TypeAlias, TypedDict

    import pyopencl as cl
    import pyopencl.array as cla
    from mpi4py import MPI
    from pyopencl.typing import Allocator

    from pytato_like.distributed.nodes import DistributedSend
    from pytato_like.distributed.partition import DistributedGraphPartition
    from pytato_like.distributed.safety import Communicator
    from pytato_like.distributed.steady import SteadyParts
    from pytato_like.runtime.trace import TraceRecord
    from pytato_like.target.program import BoundProgram

    #: a value handed to or received from the part programs: a NumPy array
    #: (host part programs) or a pyopencl array (device ones)
    PartValue: TypeAlias = "np.ndarray | cla.Array"
    #: the messages of one part, sent together (see Exchange.send_placed)
    PartMessages: TypeAlias = "tuple[_Outgoing, ...]"
    #: a receive an execution posted: (message, request, record)
    PostedReceive: TypeAlias = "tuple[_Incoming, MPI.Request, TraceRecord]"
    #: an array's (shape, dtype) as the message headers say it
    HeaderEntry: TypeAlias = "tuple[tuple[int | None, ...], str | np.dtype]"

    class MessageHeader(TypedDict):
        """What a rank sends to and expects from one peer (see
        :meth:`MessagePlan.check_headers`): per message tag, ``[(comm
        tag, shape, dtype), ...]``."""
        packed: bool
        send: dict[int, list[tuple[int, tuple, str]]]
        recv: dict[int, list[tuple[int, tuple, str]]]

logger = logging.getLogger("pytato_like")

MESSAGE_MODES = ("packed", "per_array")
PACK_PLACES = ("device", "host")


def is_device_array(value: object) -> TypeGuard[cla.Array]:
    """Whether *value* is a :class:`pyopencl.array.Array` (without
    importing pyopencl)."""
    return (not isinstance(value, np.ndarray) and hasattr(value, "base_data")
            and hasattr(value, "queue"))


def to_host(value: object) -> np.ndarray:
    """*value* (NumPy or pyopencl array) as a NumPy array."""
    if is_device_array(value):
        return value.get()
    return np.asarray(value)


def _mpi_tag(tag: object, what: str, limit: int | None) -> int:
    if not isinstance(tag, (int, np.integer)) or isinstance(tag, bool):
        raise CommunicationTagError(
            f"{what} has tag {tag!r}, which is not an MPI tag; call "
            "number_distributed_tags on the partition before executing it")
    if tag < 0 or (limit is not None and tag > limit):
        raise CommunicationTagError(
            f"{what} has tag {tag}, outside the MPI tags this communicator "
            f"allows the executor (0 to {limit})")
    return int(tag)


def _dims(shape: tuple[object, ...]) -> tuple[int | None, ...]:
    """*shape* with symbolic dimensions as ``None`` (compared with any)."""
    return tuple(int(d) if isinstance(d, (int, np.integer)) else None
                 for d in shape)


def _payload_bytes(shape: tuple[int | None, ...], dtype: np.dtype
                   ) -> int | None:
    if any(d is None for d in shape):
        return None
    return (int(np.prod(cast("tuple[int, ...]", shape), dtype=np.int64))
            * np.dtype(dtype).itemsize)


def _total_entry(entries: list[tuple[tuple[int, ...], np.dtype]]
                 ) -> tuple[tuple[int, ...], np.dtype]:
    """*entries* (shape, dtype) as one entry of their total byte count."""
    return ((sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                 for shape, dtype in entries),), np.dtype(np.uint8))


def _describe(entry: HeaderEntry) -> str:
    shape, dtype = entry
    nbytes = _payload_bytes(shape, np.dtype(dtype))
    dims = tuple("?" if d is None else d for d in shape)
    size = "" if nbytes is None else f", {nbytes} bytes"
    return f"shape {dims} {dtype}{size}"


def _same(a: HeaderEntry, b: HeaderEntry) -> bool:
    (sa, da), (sb, db) = a, b
    return (np.dtype(da) == np.dtype(db) and len(sa) == len(sb)
            and all(x is None or y is None or x == y
                    for x, y in zip(sa, sb, strict=True)))


def _concrete_shape(recv: DistributedRecv) -> tuple[int, ...]:
    if not all(isinstance(s, int) for s in recv.shape):
        raise DistributedPartitionError(
            f"receive from rank {recv.src_rank} with tag {recv.comm_tag!r} has "
            f"symbolic shape {recv.shape}; receive buffers need concrete shapes")
    return tuple(recv.shape)


def _whole_array_specs(entries) -> list[HaloExchangeSpec]:
    return [HaloExchangeSpec.whole_array(shape, dtype) for shape, dtype in entries]


class _PaddedMessage:
    """A message's arrays on the device as sub-buffers of one buffer, one
    every *pitch* bytes (the device's base address alignment): a part
    program writes its outputs straight into them and receivers read
    them, so a message moves between host and device in one rectangular
    copy, with no pack or unpack kernel. For messages whose arrays share
    one dtype and byte count; the bytes on the wire are those of the
    halo packer's layout (the arrays back to back).

    .. attribute:: arrays

        One :class:`pyopencl.array.Array` per entry, on its sub-buffer
        (offset 0); reused by every execution.
    """

    def __init__(self, queue: cl.CommandQueue,
                 entries: list[tuple[tuple[int, ...], np.dtype]]
                 ) -> None:
        import pyopencl as cl
        import pyopencl.array as cla
        shape, dtype = entries[0]
        self.each = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.n = len(entries)
        align = max(queue.device.mem_base_addr_align // 8, 1)
        self.pitch = -(-self.each // align) * align
        self.queue = queue
        self.parent = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE,
                                self.pitch * self.n)
        self.arrays = [
            cla.Array(queue, shape, dtype,
                      data=self.parent.get_sub_region(i * self.pitch, self.each))
            for i in range(self.n)]
        self._rect = {"region": (self.each, self.n),
                      "buffer_origin": (0, 0), "host_origin": (0, 0),
                      "buffer_pitches": (self.pitch,),
                      "host_pitches": (self.each,)}
        # the copies run twice a step: pyopencl's rectangular copies
        # themselves, not enqueue_copy's dispatch on the argument types
        # (which asks OpenCL for the buffer's type each time); enqueue_copy
        # if this pyopencl has them under other names
        raw = getattr(cl, "_cl", None)
        self._read_rect = getattr(raw, "_enqueue_read_buffer_rect", None)
        self._write_rect = getattr(raw, "_enqueue_write_buffer_rect", None)

    @staticmethod
    def fits(queue: cl.CommandQueue | None,
             entries: list[tuple[tuple[int, ...], np.dtype]]) -> bool:
        """Whether *entries* (shape, dtype) can travel this way."""
        if queue is None or not entries:
            return False
        first = entries[0]
        nbytes = int(np.prod(first[0], dtype=np.int64)) * first[1].itemsize
        return nbytes > 0 and all(
            np.dtype(d) == first[1] and int(np.prod(s, dtype=np.int64))
            * np.dtype(d).itemsize == nbytes for s, d in entries)

    def to_host(self, host: np.ndarray, wait_for: list[cl.Event] | None
                ) -> cl.Event:
        """Enqueue the copy of every array to *host* (back to back); its
        event."""
        if self._read_rect is not None:
            return self._read_rect(self.queue, self.parent, host,
                                   is_blocking=False, wait_for=wait_for,
                                   **self._rect)
        import pyopencl as cl
        return cl.enqueue_copy(self.queue, host, self.parent, is_blocking=False,
                               wait_for=wait_for, **self._rect)

    def from_host(self, host: np.ndarray) -> cl.Event:
        """Enqueue the copy of *host* (back to back) into the arrays; its
        event."""
        if self._write_rect is not None:
            return self._write_rect(self.queue, self.parent, host,
                                    is_blocking=False, **self._rect)
        import pyopencl as cl
        # (pyopencl's stubs call the rectangle's buffer_origin "origin")
        return cl.enqueue_copy(self.queue, self.parent, host, is_blocking=False,
                               **self._rect)  # type: ignore[arg-type]

    def copy_in(self, i: int, value: cla.Array) -> None:
        """Enqueue the copy of the device array *value* (contiguous) into
        array *i* (when the part program did not write it there)."""
        import pyopencl as cl
        # (value.base_data: its Buffer; pyopencl types it more widely)
        cl.enqueue_copy(  # type: ignore[call-overload]
                        self.queue, cast("cl.Buffer", self.arrays[i].base_data),
                        value.base_data,
                        byte_count=self.each, src_offset=value.offset,
                        wait_for=value.events or None)


# {{{ messages of a plan

class _Outgoing:
    """One message this rank sends: the part outputs *names* (buffer order)
    to rank *dest* under *tag*."""

    def __init__(self, pid: Hashable, dest: int, tag: int, names: list[str],
                 header: list[tuple[int, tuple, str]] | None = None):
        self.pid = pid
        self.dest = dest
        self.tag = tag
        self.names = names
        # (comm tag, shape with None for symbolic dims, dtype) per array
        self.header = header or []
        self.packer: HaloDataTransformer | None = None
        self.padded: _PaddedMessage | None = None   # instead of the packer
        # device pack buffer (device packing). Any, not cla.Array | None:
        # the send path uses it wherever plan.pack_on_device says it is
        # set, which mypy cannot follow, and a cast per message costs (the
        # same for the requests: set whenever the plan has MPI)
        self.device_buffer: Any = None
        self.buffer: np.ndarray | None = None   # host bytes handed to MPI
        self.request: Any = None   # persistent send request (MPI.Prequest)


class _Incoming:
    """One message this rank receives from rank *src* under *tag*: the
    receives *names* (buffer order) of *shapes* and *dtypes*."""

    def __init__(self, src: int, tag: int, names: list[str],
                 recvs: list[DistributedRecv]):
        self.src = src
        self.tag = tag
        self.names = names
        self.entries = [(_concrete_shape(r), np.dtype(r.dtype)) for r in recvs]
        # (tags are numbered ints by now)
        self.header = [(int(cast(int, r.comm_tag)), shape, dtype.str)
                       for r, (shape, dtype) in zip(recvs, self.entries,
                                                    strict=True)]
        self.unpacker: HaloDataTransformer | None = None
        self.padded: _PaddedMessage | None = None   # instead of the unpacker
        # (Any: see _Outgoing; a cla.Array when device packing)
        self.device_buffer: Any = None
        self.buffer: np.ndarray | None = None
        self.views: list[np.ndarray] | None = None
        # device arrays the message unpacks into, made once (device packing)
        self.device_values: list[cla.Array] | None = None
        self.request: Any = None   # persistent receive request (MPI.Prequest)
        self.nbytes = 0

# }}}


def _compare(src: int, dest: int, sent: dict[int, list], received: dict[int, list]
             ) -> list[tuple[int, int, int, type, str]]:
    """Disagreements between what rank *src* sends to rank *dest* and what
    *dest* receives from *src*: ``(src, dest, tag, error class, text)``."""
    def by_tag(messages):
        return {t: (msg_tag, (tuple(shape), dtype))
                for msg_tag, entries in messages.items()
                for t, shape, dtype in entries}
    sent_by_tag, recv_by_tag = by_tag(sent), by_tag(received)
    problems: list[tuple[int, int, int, type, str]] = []
    for t in sorted(sent_by_tag.keys() | recv_by_tag.keys()):
        s, r = sent_by_tag.get(t), recv_by_tag.get(t)
        if r is None:
            problems.append((src, dest, t, UnmatchedSendError,
                             f"rank {src} sends tag {t} ({_describe(s[1])}) "
                             f"to rank {dest}, which has no receive for it"))
        elif s is None:
            problems.append((src, dest, t, UnmatchedRecvError,
                             f"rank {dest} receives tag {t} ({_describe(r[1])}) "
                             f"from rank {src}, which sends nothing with "
                             "that tag"))
        elif not _same(s[1], r[1]):
            problems.append((src, dest, t, SendRecvMismatchError,
                             f"rank {src} sends tag {t} as {_describe(s[1])} "
                             f"but rank {dest} receives it as "
                             f"{_describe(r[1])}"))
        elif s[0] != r[0]:
            problems.append((src, dest, t, DistributedPartitionError,
                             f"rank {src} packs tag {t} into message {s[0]} "
                             f"but rank {dest} expects it in message {r[0]}; "
                             "was the partition changed after "
                             "number_distributed_tags?"))
    return problems


class MessagePlan:
    """This rank's messages of one partition, with their buffers and
    persistent requests, reused by every execution (see the module docs).

    :arg partition: a :class:`~pytato_like.DistributedGraphPartition` with
        numbered tags.
    :arg comm: the communicator (mpi4py, or a single-rank stand-in).
    :arg queue: the :class:`pyopencl.CommandQueue` of the part programs if
        they compute on a device, else ``None``.
    :arg messages: ``"packed"`` or ``"per_array"``.
    :arg pack_on: ``"device"`` or ``"host"`` (device part programs only).
    :arg allocator: allocator for device arrays (received values).
    """

    def __init__(self, partition: DistributedGraphPartition,
                 comm: Communicator, queue: cl.CommandQueue | None = None, *,
                 messages: str = "packed", pack_on: str = "device",
                 allocator: Allocator | None = None) -> None:
        if messages not in MESSAGE_MODES:
            raise DistributedExecutionError(
                f"messages={messages!r}; expected one of {MESSAGE_MODES}")
        if pack_on not in PACK_PLACES:
            raise DistributedExecutionError(
                f"pack_on={pack_on!r}; expected one of {PACK_PLACES}")
        self.comm = comm
        self.rank = comm.Get_rank()
        self.use_mpi = hasattr(comm, "Irecv")
        # (Any, not cl.CommandQueue | None: the device paths, per message,
        # use it where pack_on_device / on_device say it is set, which
        # mypy cannot follow)
        self.queue: Any = queue
        self.allocator = allocator
        # partitions numbered by hand-made means may lack the grouping
        self.packed = messages == "packed" and partition.messages is not None
        self.pack_on_device = self.packed and queue is not None \
            and pack_on == "device"
        # one execution at a time, in the order they were started: ranks
        # must run the executions of one partition in the same order, or
        # the messages of one would be received by another
        self._turn = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self.broken = False
        self.n_executions = 0
        self._freed = False
        # parts that only pass received values on, and the names each part
        # waits for besides other parts' outputs (made by execute, once)
        self.forwarding_parts: dict[Hashable, dict[str, str]] | None = None
        self.awaited_names: dict[Hashable, tuple[str, ...]] | None = None
        #: what the part scheduler derives from the partition (see
        #: :meth:`~pytato_like.scheduler.PartHooks.table_cache`)
        self.scheduler_tables: dict = {}
        #: the executor's steady hooks, per set of part programs (see
        #: :class:`~pytato_like.distributed.steady.SteadyParts`)
        #: (keyed by the part programs' ids; with those programs, kept
        #: alive, and the input names the parts wait for)
        self.steady_loops: dict[tuple[int, ...], tuple[
            SteadyParts, list[BoundProgram | None], frozenset[str]]] = {}
        #: id -> array: the outputs of frozen part calls (kept from one
        #: execution to the next; see
        #: pytato_like.target.loopy.replay.FrozenLaunches)
        self.kept_arrays: dict[int, cla.Array] = {}
        # id -> array: the device arrays of messages (see
        # is_reused_device_array; a check per result, not a set per
        # execution: that cost 2 µs per message)
        self._message_arrays: dict[int, cla.Array] = {}
        # MPI status objects for the receives' tests (see Exchange)
        self._recv_statuses: list[MPI.Status] = []
        # part -> its placed outputs, once every message of it has its
        # padded buffer (see placed_outputs)
        self._placed: dict[Hashable, dict[str, cla.Array]] = {}
        # message headers compared with every peer (first execution)
        self.headers_checked = not is_mpi(comm)
        self.registry = ReceiveBufferRegistry(np)

        rank = self.rank
        limit = max_user_tag(comm) if self.use_mpi else None
        recvs = partition.recv_name_to_node()
        if self.use_mpi:
            # (partitioning checked it too, perhaps on another communicator)
            check_peer_ranks(
                rank, comm.Get_size(),
                [(send.dest_rank, send.comm_tag)
                 for part in partition.parts.values()
                 for send in part.output_name_to_send_node.values()],
                [(recv.src_rank, recv.comm_tag) for recv in recvs.values()])
        self.local_recv: dict[Hashable, str] = {}
        remote: dict[tuple[int, int], tuple[str, DistributedRecv]] = {}
        recv_names: dict[Hashable, str] = {}
        for name, recv in sorted(recvs.items()):
            peer_tag: tuple[int, int] | None = None
            if recv.src_rank == rank:
                key: Hashable = recv.comm_tag
            else:
                key = peer_tag = (recv.src_rank, _mpi_tag(
                    recv.comm_tag, f"receive on rank {rank} from rank "
                    f"{recv.src_rank}", limit))
            if key in recv_names:
                raise DuplicateRecvError(
                    f"rank {rank} receives twice from rank {recv.src_rank} "
                    f"with tag {recv.comm_tag!r} ({recv_names[key]!r} and "
                    f"{name!r}); a tag names one message per pair of ranks")
            recv_names[key] = name
            if peer_tag is None:
                self.local_recv[key] = name
            else:
                remote[peer_tag] = (name, recv)
        if remote and not self.use_mpi:
            src = next(iter(remote))[0]
            raise DistributedPartitionError(
                f"rank {rank} receives from rank {src} but runs without an "
                "MPI communicator")

        self.local_sends: dict[Hashable, list[tuple[str, DistributedSend]]] = {}
        self.outgoing: dict[Hashable, list[_Outgoing]] = {}
        send_names: dict[tuple[int, int], tuple[Hashable, str]] = {}
        self.send_header: dict[tuple[int, int], tuple[tuple, str]] = {}
        local_tags: dict[Hashable, str] = {}
        for pid in partition.toposorted_part_ids:
            for name, send in partition.parts[pid].output_name_to_send_node.items():
                if send.dest_rank == rank:
                    if send.comm_tag in local_tags:
                        raise DuplicateSendError(
                            f"rank {rank} sends to itself twice with tag "
                            f"{send.comm_tag!r} ({local_tags[send.comm_tag]!r} "
                            f"and {name!r})")
                    local_tags[send.comm_tag] = name
                    self.local_sends.setdefault(pid, []).append((name, send))
                    continue
                if not self.use_mpi:
                    raise DistributedPartitionError(
                        f"rank {rank} sends to rank {send.dest_rank} but runs "
                        "without an MPI communicator")
                key = (send.dest_rank, _mpi_tag(
                    send.comm_tag, f"send from rank {rank} to rank "
                    f"{send.dest_rank}", limit))
                if key in send_names:
                    raise DuplicateSendError(
                        f"rank {rank} sends twice to rank {send.dest_rank} "
                        f"with tag {send.comm_tag!r} ({send_names[key][1]!r} "
                        f"and {name!r}); the receiver could not tell them "
                        "apart")
                send_names[key] = (pid, name)
                self.send_header[key] = (_dims(send.data.shape),
                                         np.dtype(send.data.dtype).str)

        self.incoming: list[_Incoming] = []
        if self.packed:
            self._group_packed(partition, remote, send_names)
        else:
            for (src, tag), (name, recv) in remote.items():
                self.incoming.append(_Incoming(src, tag, [name], [recv]))
            for (dest, tag), (pid, name) in send_names.items():
                self.outgoing.setdefault(pid, []).append(
                    _Outgoing(pid, dest, tag, [name],
                              [(tag, *self.send_header[(dest, tag)])]))
        if self.packed:
            for msg in self.incoming:
                self._prepare_incoming(msg)
        if is_mpi(comm):
            # a rank that leaves early drops what was still sent to it
            notice_board(comm).expect_messages(
                (msg.src, msg.tag) for msg in self.incoming)

    # {{{ construction

    def _group_packed(self, partition, remote, send_names) -> None:
        rank = self.rank
        covered_recvs: set[tuple[int, int]] = set()
        covered_sends: set[tuple[int, int]] = set()
        for m in partition.messages:
            if m.dest_rank == rank and m.src_rank != rank:
                keys = [(m.src_rank, t) for t in m.comm_tags]
                missing = [k for k in keys if k not in remote]
                if missing:
                    raise DistributedPartitionError(
                        f"rank {rank}: message from rank {m.src_rank} (tag "
                        f"{m.tag}) carries tags {[t for _, t in missing]} that "
                        "no receive of this partition expects")
                covered_recvs.update(keys)
                self.incoming.append(_Incoming(
                    m.src_rank, m.tag, [remote[k][0] for k in keys],
                    [remote[k][1] for k in keys]))
            elif m.src_rank == rank and m.dest_rank != rank:
                keys = [(m.dest_rank, t) for t in m.comm_tags]
                missing = [k for k in keys if k not in send_names]
                if missing or any(send_names[k][0] != m.sender_part
                                  for k in keys):
                    raise DistributedPartitionError(
                        f"rank {rank}: message to rank {m.dest_rank} (tag "
                        f"{m.tag}) does not match the sends of part "
                        f"{m.sender_part!r}; was the partition changed after "
                        "number_distributed_tags?")
                covered_sends.update(keys)
                self.outgoing.setdefault(m.sender_part, []).append(_Outgoing(
                    m.sender_part, m.dest_rank, m.tag,
                    [send_names[k][1] for k in keys],
                    [(k[1], *self.send_header[k]) for k in keys]))
        for what, keys, covered in (("receive from", remote, covered_recvs),
                                    ("send to", send_names, covered_sends)):
            left = sorted(set(keys) - covered)
            if left:
                peer, tag = left[0]
                raise DistributedPartitionError(
                    f"rank {rank}: the {what} rank {peer} with tag {tag} is in "
                    "no message of the partition; was the partition changed "
                    "after number_distributed_tags?")

    def _prepare_incoming(self, msg: _Incoming) -> None:
        """Buffers (and the persistent request) of a packed incoming
        message, allocated once."""
        specs = _whole_array_specs(msg.entries)
        if _payload_bytes(*_total_entry(msg.entries)) == 0:
            self._prepare_empty_incoming(msg)
        elif self.pack_on_device and _PaddedMessage.fits(self.queue,
                                                         msg.entries):
            msg.padded = _PaddedMessage(self.queue, msg.entries)
            msg.device_values = msg.padded.arrays
            self._keep_message_arrays(msg.device_values)
            msg.nbytes = msg.padded.each * msg.padded.n
            msg.buffer = self.registry.get(msg.src, msg.tag, (msg.nbytes,),
                                           np.uint8)
        elif self.pack_on_device:
            msg.unpacker = HaloDataTransformer.get(self.queue, specs)
            msg.device_buffer = msg.unpacker.get_unpack_buffer()
            msg.nbytes = int(msg.device_buffer.nbytes)
            # what MPI receives into: host bytes, copied to the device
            msg.buffer = self.registry.get(msg.src, msg.tag, (msg.nbytes,),
                                           np.uint8)
        else:
            msg.unpacker = HaloDataTransformer.get(np, specs)
            msg.buffer = msg.unpacker.get_unpack_buffer()
            msg.nbytes = int(msg.buffer.nbytes)
            msg.views = msg.unpacker.unpacked_views()
            self.registry.register(msg.src, msg.tag, msg.buffer)
        if self.use_mpi:
            from mpi4py import MPI
            # (use_mpi: an MPI communicator)
            msg.request = self.comm.Recv_init(  # type: ignore[union-attr]
                [msg.buffer, MPI.BYTE], source=msg.src, tag=msg.tag)

    def _prepare_empty_incoming(self, msg: _Incoming) -> None:
        """An incoming message of zero bytes: nothing to unpack; its values
        are empty arrays where the parts compute, made once."""
        msg.buffer = np.empty(0, np.uint8)
        msg.nbytes = 0
        if self.queue is not None:
            import pyopencl.array as cla
            msg.device_values = [cla.empty(self.queue, shape, dtype)
                                 for shape, dtype in msg.entries]
            self._keep_message_arrays(msg.device_values)
        else:
            msg.views = [np.empty(shape, dtype) for shape, dtype in msg.entries]

    def _prepare_outgoing(self, msg: _Outgoing,
                          values: Sequence[PartValue]) -> None:
        """Packer, buffers and persistent request of a packed outgoing
        message, from the first values sent (their shapes may be symbolic
        in the DAG)."""
        entries = [(tuple(v.shape), np.dtype(v.dtype)) for v in values]
        specs = _whole_array_specs(entries)
        if _payload_bytes(*_total_entry(entries)) == 0:
            # nothing to pack or copy: the message is sent as it is
            msg.buffer = np.empty(0, np.uint8)
        elif self.pack_on_device and _PaddedMessage.fits(self.queue, entries):
            msg.padded = _PaddedMessage(self.queue, entries)
            self._keep_message_arrays(msg.padded.arrays)
            msg.buffer = get_buffer_pool(np).get(
                (msg.padded.each * msg.padded.n,), np.uint8)
        elif self.pack_on_device:
            msg.packer = HaloDataTransformer.get(self.queue, specs)
            msg.device_buffer = msg.packer.get_pack_buffer()
            msg.buffer = get_buffer_pool(np).get(
                (int(msg.device_buffer.nbytes),), np.uint8)
        else:
            msg.packer = HaloDataTransformer.get(np, specs)
            msg.buffer = msg.packer.get_pack_buffer()
        from mpi4py import MPI
        # (a rank with outgoing messages has an MPI communicator)
        msg.request = self.comm.Send_init(  # type: ignore[union-attr]
            [msg.buffer, MPI.BYTE], dest=msg.dest, tag=msg.tag)

    # }}}

    # {{{ headers: what each side believes travels (first execution)

    def _header_for(self, peer: int) -> MessageHeader:
        """What this rank sends to and expects from *peer*, per message
        tag: ``[(comm tag, shape, dtype), ...]``."""
        return {
            "packed": self.packed,
            "send": {m.tag: m.header for msgs in self.outgoing.values()
                     for m in msgs if m.dest == peer},
            "recv": {m.tag: m.header for m in self.incoming if m.src == peer},
        }

    def check_headers(self) -> None:
        """Exchange the message headers with every other rank once and
        raise (the same error on both ranks of a disagreeing pair) if a
        send and its receive do not match. Point to point on a reserved
        tag, with polled waits: a rank that fails or leaves meanwhile is
        noticed."""
        if self.headers_checked:
            return
        # (checked only with MPI: see headers_checked)
        comm, rank = cast("MPI.Comm", self.comm), self.rank
        tag = header_tag(comm)
        peers = [p for p in range(comm.Get_size()) if p != rank]
        mine = {p: self._header_for(p) for p in peers}
        sends = [comm.isend(mine[p], dest=p, tag=tag) for p in peers]
        theirs: dict[int, MessageHeader] = {}

        def all_arrived() -> bool:
            for p in peers:
                if p not in theirs:
                    probe = comm.improbe(source=p, tag=tag)
                    if probe is not None:
                        theirs[p] = probe.recv()
            return len(theirs) == len(peers)

        what = "the message headers of the first execution of a partition"
        poll_until(all_arrived, comm, lambda: set(peers) - theirs.keys(), what)
        try:
            self._raise_on_disagreement(mine, theirs)
        finally:
            # small messages, sent eagerly: complete even if we raise
            from mpi4py import MPI
            MPI.Request.Waitall(sends)
        self.headers_checked = True

    def _raise_on_disagreement(self, mine: dict[int, MessageHeader],
                               theirs: dict[int, MessageHeader]) -> None:
        rank = self.rank
        problems: list[tuple[int, int, int, type, str]] = []
        for p in sorted(theirs):
            if mine[p]["packed"] != theirs[p]["packed"]:
                problems.append((rank, p, 0, DistributedExecutionError,
                                 f"ranks {rank} and {p} execute with different "
                                 "message modes (messages='packed' versus "
                                 "'per_array'); use the same on every rank"))
            problems += _compare(p, rank, theirs[p]["send"], mine[p]["recv"])
            problems += _compare(rank, p, mine[p]["send"], theirs[p]["recv"])
        if problems:
            # the same first problem on both ranks of a pair
            _, _, _, cls, text = min(problems, key=lambda x: x[:3])
            raise cls(text)

    # }}}

    def take_ticket(self) -> int:
        """A place in the queue of executions (call when one is started)."""
        with self._turn:
            ticket = self._next_ticket
            self._next_ticket += 1
            return ticket

    def wait_for_turn(self, ticket: int) -> None:
        """Block until the executions started before *ticket* have ended."""
        with self._turn:
            self._turn.wait_for(lambda: self._serving == ticket)

    def end_turn(self) -> None:
        with self._turn:
            self._serving += 1
            self._turn.notify_all()

    @property
    def receive_buffers(self) -> ReceiveBufferRegistry[np.ndarray]:
        """The host buffers MPI receives packed messages into, by
        ``(source rank, message tag, shape, dtype)``."""
        return self.registry

    @property
    def n_outgoing(self) -> int:
        """Messages this rank sends per execution."""
        return sum(len(v) for v in self.outgoing.values())

    @property
    def n_incoming(self) -> int:
        """Messages this rank receives per execution."""
        return len(self.incoming)

    def host_buffers(self) -> list[np.ndarray]:
        """Host receive buffers whose views are handed to the parts."""
        # (a message with views has its buffer)
        return [cast(np.ndarray, m.buffer) for m in self.incoming
                if m.views is not None]

    def is_reused_device_array(self, value: object) -> bool:
        """Whether *value* is one of the device arrays the same in every
        execution: received values are unpacked into them, sent ones
        computed into them, frozen part calls compute into them (a result
        that is one must be copied before it is handed out)."""
        key = id(value)
        return key in self._message_arrays or key in self.kept_arrays

    def _keep_message_arrays(self, arrays: Iterable[cla.Array]) -> None:
        """Register a message's device arrays, made once for every
        execution (see :meth:`is_reused_device_array`)."""
        for ary in arrays:
            self._message_arrays[id(ary)] = ary

    def placed_outputs(self, pid: Hashable) -> dict[str, cla.Array]:
        """Output name -> the device array part *pid* should compute it
        into: the sub-buffers of its outgoing messages (see
        :class:`_PaddedMessage`; known after the first execution)."""
        cached = self._placed.get(pid)
        if cached is not None:
            return cached
        placed: dict[str, cla.Array] = {}
        messages = self.outgoing.get(pid, ())
        for msg in messages:
            if msg.padded is not None:
                placed.update(zip(msg.names, msg.padded.arrays, strict=True))
        if all(msg.padded is not None for msg in messages):
            # complete: a message's padded buffer, once made, stays
            self._placed[pid] = placed
        return placed

    def begin(self, recorder: TraceRecorder) -> Exchange:
        """Start one execution: on the first, check the headers with every
        peer; post every receive."""
        if not self.headers_checked:
            with recorder.wait("exchange message headers"):
                self.check_headers()
        return Exchange(self, recorder)

    def notify_failure(self, exc: BaseException) -> None:
        """Tell every other rank that this rank failed with *exc*."""
        if is_mpi(self.comm):
            notice_board(self.comm).notify("F", f"{type(exc).__name__}: {exc}")

    def free(self) -> None:
        """Release the persistent requests and buffers (the plan cannot be
        used afterwards)."""
        if self._freed:
            return
        self._freed = True
        mpi_alive = False
        if self.use_mpi:
            from mpi4py import MPI
            mpi_alive = MPI.Is_initialized() and not MPI.Is_finalized()
        messages: list[_Incoming | _Outgoing] = [
            *self.incoming, *(m for v in self.outgoing.values() for m in v)]
        for msg in messages:
            if msg.request is not None and mpi_alive:
                try:
                    # allowed while active: MPI completes, then frees it
                    msg.request.Free()
                except Exception as exc:  # noqa: BLE001 -- best effort
                    logger.debug("rank %d: freeing a request failed: %s",
                                 self.rank, exc)
            msg.request = None
            transformer = getattr(msg, "packer", None) or getattr(
                msg, "unpacker", None)
            if transformer is not None:
                transformer.finalize()
            if isinstance(msg, _Outgoing) and self.pack_on_device \
                    and msg.buffer is not None:
                get_buffer_pool(np).put(msg.buffer)   # host staging buffer
                msg.buffer = None
        self.registry.clear()


_MPI_MODULE: ModuleType | None = None


def _mpi() -> ModuleType:
    """mpi4py's ``MPI`` (imported on first use: host-only programs run
    without it; a function-level import costs a microsecond per call)."""
    global _MPI_MODULE
    if _MPI_MODULE is None:
        from mpi4py import MPI
        _MPI_MODULE = MPI
    return _MPI_MODULE


class LazyDescription:
    """A description made only if it is shown (a wait's, for its error)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()

    def __format__(self, spec: str) -> str:
        return format(self.make(), spec)


_CL_MODULE: ModuleType | None = None
#: pyopencl's CL_COMPLETE (set with the module)
_COMPLETE: cl.command_execution_status | None = None


def _cl() -> ModuleType:
    """pyopencl (imported on first use, as :func:`_mpi`)."""
    global _CL_MODULE, _COMPLETE
    if _CL_MODULE is None:
        import pyopencl as cl
        _COMPLETE = cl.command_execution_status.COMPLETE
        _CL_MODULE = cl
    return _CL_MODULE


def describe_waiting(messages: Iterable[_Incoming]) -> str:
    """What a rank waiting for the receives *messages* waits for."""
    return "waits for messages " + ", ".join(
        f"(rank {m.src}, tag {m.tag})" for m in messages)


def test_receives(rank: int, requests: list[MPI.Request],
                  statuses: list[MPI.Status]) -> list[int]:
    """Indices of the *requests* (receives of rank *rank*) completed now,
    their statuses filling *statuses* in that order (inactive requests,
    those already completed, are skipped). A message larger than its
    receive is a :class:`~pytato_like.diagnostic.SendRecvMismatchError`."""
    MPI = _mpi()
    try:
        return MPI.Request.Testsome(requests, statuses) or []
    except MPI.Exception as exc:
        raise SendRecvMismatchError(
            f"rank {rank} received a message larger than the receive it "
            f"was meant for ({exc}); the sender and the receiver disagree "
            "on shapes or dtypes") from exc


class Exchange:
    """The communication of one execution of a :class:`MessagePlan`."""

    def __init__(self, plan: MessagePlan, recorder: TraceRecorder) -> None:
        self.plan = plan
        self.rank = plan.rank
        self.comm = plan.comm
        self.recorder = recorder
        self.on_device = plan.queue is not None
        self._arrived: list[tuple[str, PartValue]] = []
        self._pending_local = set(plan.local_recv)
        # incoming messages not arrived yet: (message, request, record)
        self._recv_waiting: list[PostedReceive] = []
        # their requests and statuses, in the same order (for Testsome)
        self._recv_requests: list[MPI.Request] = []
        self._recv_statuses: list[MPI.Status] = []
        # (request, record, the buffer kept alive until sent)
        self._sends_active: list[tuple[MPI.Request, TraceRecord, np.ndarray]] = []
        self._device_copies: list[tuple[_Outgoing, cl.Event, TraceRecord]] = []
        self._upload_events: list[cl.Event] = []
        self.n_messages_sent = 0
        self.n_messages_received = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        #: host time (ns) of the executor's own work, by kind: ``pack``
        #: (pack a part's messages or enqueue their copies to the host),
        #: ``post`` (start MPI sends), ``poll`` (non-blocking arrival
        #: checks), ``unpack`` -- each counted once, under one kind
        self.overhead_ns: Counter[str] = Counter()
        #: set by another thread to end this execution's waits
        self.cancelled = False
        self._start_receives()

    def count_program_calls(self, elapsed_ns: int, cpu_ns: int,
                            launch_ns: int) -> None:
        """Count part program calls that took *elapsed_ns* (*cpu_ns* of CPU),
        *launch_ns* of it inside OpenCL's launch calls: ``launch`` apart
        from ``enqueue`` (see
        :attr:`~pytato_like.distributed.execute.DistributedExecution.stats`)."""
        overhead = self.overhead_ns
        overhead["enqueue"] += max(elapsed_ns - launch_ns, 0)
        overhead["launch"] += launch_ns
        overhead["enqueue_cpu"] += cpu_ns

    def _wait(self, test, peers, what: object) -> None:
        """Poll *test* until true (see
        :func:`~pytato_like.distributed.safety.poll_until`); *what* is
        described only if an error shows it."""
        poll_until(test, self.comm, peers,
                   LazyDescription(lambda: f"rank {self.rank} {what}"),
                   self.is_cancelled)

    def is_cancelled(self) -> bool:
        """Whether another thread has cancelled this execution."""
        return self.cancelled

    # {{{ receiving

    def _start_receives(self) -> None:
        plan = self.plan
        if not plan.incoming:
            return
        from mpi4py import MPI
        requests = []
        for msg in plan.incoming:
            if plan.packed:
                req = msg.request
            else:
                # the old way: a fresh buffer and request per array and run
                shape, dtype = msg.entries[0]
                msg.buffer = np.empty(shape, dtype)
                # (incoming messages: an MPI communicator)
                req = self.comm.Irecv(  # type: ignore[union-attr]
                    [msg.buffer, MPI.BYTE], source=msg.src, tag=msg.tag)
            rec = self.recorder.message(
                "recv", msg.src, tag=msg.tag,
                nbytes=cast(np.ndarray, msg.buffer).nbytes,  # allocated
                n_arrays=len(msg.names))
            self._recv_waiting.append((msg, req, rec))
            requests.append(req)
        self._recv_requests = list(requests)
        # (status objects reused: executions of a plan run one at a time)
        statuses = plan._recv_statuses
        if len(statuses) != len(requests):
            statuses = plan._recv_statuses = [MPI.Status() for _ in requests]
        self._recv_statuses = list(statuses)
        if plan.packed:
            MPI.Prequest.Startall(requests)

    @property
    def n_pending(self) -> int:
        """Values expected and not yet reported as arrived."""
        return (len(self._recv_waiting) + len(self._pending_local)
                + len(self._arrived))

    def arrivals(self, block: bool) -> list[tuple[str, PartValue]]:
        """``(name, value)`` of values arrived since the last call, ready
        for the parts (device arrays for device part programs); with
        *block*, waits until at least one has arrived."""
        if block:
            return self._arrivals(True)
        t0 = time.perf_counter_ns()
        unpack0 = self.overhead_ns["unpack"]
        try:
            return self._arrivals(False)
        finally:
            # unpacking is counted on its own
            self.overhead_ns["poll"] += (time.perf_counter_ns() - t0
                                         - self.overhead_ns["unpack"] + unpack0)

    def _arrivals(self, block: bool) -> list[tuple[str, PartValue]]:
        self.start_ready_device_sends(block=False)
        self._poll_sends()
        result, self._arrived = self._arrived, []
        if result:
            return result
        if not self._recv_waiting:
            if block and self._pending_local:
                raise DistributedPartitionError(
                    f"rank {self.rank} waits for values it sends to itself "
                    f"(tags {sorted(self._pending_local, key=repr)}) that no "
                    "part left to run sends")
            return result
        if block:
            # never wait for a peer while our own data to it waits for us
            self.start_ready_device_sends(block=True)
        found: list[int] = []

        def test() -> bool:
            found.extend(self._test_receives())
            return bool(found)

        if block:
            with self.recorder.wait("wait for messages"):
                self._wait(test, lambda: {m.src for m, _, _ in
                                          self._recv_waiting},
                           LazyDescription(self._waiting_for))
        else:
            found = self._test_receives()
            if not found:
                return result
        result.extend(self._take_arrived(found))
        return result

    def _waiting_for(self) -> str:
        return describe_waiting(m for m, _, _ in self._recv_waiting)

    def _take_arrived(self, found: list[int]) -> list[tuple[str, PartValue]]:
        """The values of the receives *found* complete (indices into the
        waiting receives, their statuses in that order), unpacked."""
        result: list[tuple[str, PartValue]] = []
        done = set(found)
        # statuses are filled in completion order, not by request index
        for i, status in zip(found, self._recv_statuses, strict=False):
            self.check_arrival(self._recv_waiting[i][0], status)
        arrived = [self._recv_waiting[i] for i in sorted(done)]
        self._recv_waiting = [w for i, w in enumerate(self._recv_waiting)
                              if i not in done]
        self._recv_requests = [req for _, req, _ in self._recv_waiting]
        self._recv_statuses = self._recv_statuses[:len(self._recv_requests)]
        for msg, _, rec in arrived:
            result.extend(self.take_in(msg, rec))
        return result

    def check_arrival(self, msg: _Incoming, status: MPI.Status) -> None:
        """Raise if the message that completed receive *msg* (its MPI
        *status*) is not the byte count the receive expects."""
        buffer = cast(np.ndarray, msg.buffer)  # a posted receive's
        count = status.Get_count(_mpi().BYTE)
        if count != buffer.nbytes:
            raise SendRecvMismatchError(
                f"rank {msg.src} sent a message of {count} bytes with "
                f"tag {msg.tag} where rank {self.rank} receives "
                f"{buffer.nbytes} bytes")

    def take_in(self, msg: _Incoming, rec: TraceRecord
                ) -> list[tuple[str, PartValue]]:
        """The values of the arrived (and checked) message *msg*, its
        receive's record *rec* completed and counted, unpacked."""
        if msg.padded is not None and self.plan.packed:
            return list(zip(msg.names, self.take_in_padded(msg, rec),
                            strict=True))
        rec.complete()
        self.n_messages_received += 1
        self.bytes_received += int(cast(np.ndarray, msg.buffer).nbytes)
        return self._unpack(msg)

    def take_in_padded(self, msg: _Incoming, rec: TraceRecord
                       ) -> list[cla.Array]:
        """:meth:`take_in` of a message in a padded buffer (the steady
        loop's every message): its device arrays, in the order of its
        names, once one copy into them is enqueued."""
        t0 = time.perf_counter_ns()
        rec.complete(t0)
        self.n_messages_received += 1
        self.bytes_received += msg.nbytes
        unpack = self.recorder.new("unpack", f"unpack {msg.src}", msg.src,
                                   msg.tag, msg.nbytes, None, {})
        unpack.start(t0)
        padded = cast(_PaddedMessage, msg.padded)
        # one copy into the arrays' sub-buffers; nothing to unpack
        self._upload_events.append(padded.from_host(
            cast(np.ndarray, msg.buffer)))
        t1 = time.perf_counter_ns()
        unpack.complete(t1)
        self.overhead_ns["unpack"] += t1 - t0
        return padded.arrays

    def _test_receives(self) -> list[int]:
        """Indices (into the waiting receives) of those completed now;
        their statuses fill :attr:`_recv_statuses` in that order."""
        return test_receives(self.rank, self._recv_requests,
                             self._recv_statuses)

    def _unpack(self, msg: _Incoming) -> list[tuple[str, PartValue]]:
        t0 = time.perf_counter_ns()
        try:
            return self._unpack_values(msg)
        finally:
            self.overhead_ns["unpack"] += time.perf_counter_ns() - t0

    def _unpack_values(self, msg: _Incoming) -> list[tuple[str, PartValue]]:
        plan = self.plan
        buffer = cast(np.ndarray, msg.buffer)  # the message arrived in it
        if not plan.packed:
            return [(msg.names[0], self._for_parts(buffer))]
        with self.recorder.record("unpack", f"unpack {msg.src}", peer=msg.src,
                                  tag=msg.tag, nbytes=msg.nbytes) as _:
            # (messages in padded buffers: take_in_padded)
            values: Sequence[PartValue]
            if msg.nbytes == 0:
                # empty arrays only, made once (_prepare_empty_incoming)
                values = (msg.device_values if msg.device_values is not None
                          else cast("list[np.ndarray]", msg.views))
            elif plan.pack_on_device:
                import pyopencl as cl
                import pyopencl.array as cla
                queue, dev = plan.queue, msg.device_buffer
                evt = cl.enqueue_copy(queue, dev.base_data, buffer,
                                      dst_offset=dev.offset, is_blocking=False)
                dev.add_event(evt)
                self._upload_events.append(evt)
                if msg.device_values is None:
                    # reused by every execution: making arrays costs more
                    # than the copy (results that are received values
                    # themselves are copied before they are handed out)
                    msg.device_values = [
                        cla.empty(queue, shape, dtype, allocator=plan.allocator)
                        for shape, dtype in msg.entries]
                    plan._keep_message_arrays(msg.device_values)
                values = msg.device_values
                # (device packing: the plan made the unpacker)
                cast(HaloDataTransformer, msg.unpacker).async_unpack(values)
            else:
                views = cast("list[np.ndarray]", msg.views)  # host unpacking
                values = [self._for_parts(v) for v in views]
        return list(zip(msg.names, values, strict=True))

    def _for_parts(self, value: PartValue) -> PartValue:
        """*value* where the part programs compute."""
        if self.on_device and not is_device_array(value):
            import pyopencl.array as cla
            return cla.to_device(self.plan.queue, np.ascontiguousarray(value),
                                 allocator=self.plan.allocator)
        if not self.on_device and is_device_array(value):
            return value.get()
        return value

    # }}}

    # {{{ sending

    def send_part_outputs(self, pid: Hashable, outputs: Mapping[str, object]
                          ) -> None:
        """Start the messages of part *pid*, which has just computed
        *outputs*."""
        t0 = time.perf_counter_ns()
        overhead = self.overhead_ns
        post0 = overhead["post"]
        try:
            self._send_part_outputs(pid, outputs)
        finally:
            # (sends started meanwhile are counted as post)
            overhead["pack"] += (time.perf_counter_ns() - t0
                                 - overhead["post"] + post0)

    def _send_part_outputs(self, pid: Hashable,
                           outputs: Mapping[str, object]) -> None:
        plan = self.plan
        for name, send in plan.local_sends.get(pid, ()):
            recv_name = plan.local_recv.get(send.comm_tag)
            if recv_name is None or send.comm_tag not in self._pending_local:
                raise DistributedPartitionError(
                    f"rank {self.rank} sends to itself with tag "
                    f"{send.comm_tag!r} but has no matching receive")
            self._pending_local.discard(send.comm_tag)
            value = outputs[name]
            value = value.copy() if hasattr(value, "copy") else np.array(value)
            self._arrived.append((recv_name, self._for_parts(value)))
        for msg in plan.outgoing.get(pid, ()):
            if plan.packed:
                if msg.padded is not None and self.send_placed((msg,),
                                                               outputs):
                    continue
                self._send_packed(msg, [outputs[n] for n in msg.names])
            else:
                self._start_send(msg, None, np.ascontiguousarray(
                    to_host(outputs[msg.names[0]])))

    def send_placed(self, messages: PartMessages,
                    outputs: Mapping[str, object]) -> bool:
        """Start *messages* (of one part, in padded buffers) if the part
        program computed each of their arrays into its buffer (*outputs*:
        the part's, by name): the common case from the second execution
        on, and the steady loop's. ``False``, with nothing done, if one is
        not there (:meth:`send_part_outputs` copies it in). (The time is
        the caller's to count, as ``pack``.)"""
        for msg in messages:
            for name, array in zip(msg.names,
                                   cast(_PaddedMessage, msg.padded).arrays,
                                   strict=True):
                if outputs[name] is not array:
                    return False
        t0 = time.perf_counter_ns()
        new_record = self.recorder.new
        copies = self._device_copies
        for msg in messages:
            buffer = cast(np.ndarray, msg.buffer)
            rec = new_record("pack", f"pack {msg.dest}", msg.dest, msg.tag,
                             buffer.nbytes, msg.pid, {})
            rec.start(t0)
            copies.append((msg, cast(_PaddedMessage, msg.padded).to_host(
                buffer, None), rec))
        # submitted now: an unflushed queue may hold a copy back until
        # this rank next blocks, delaying the send (which starts once the
        # copy has completed: polled, or waited for before this rank blocks)
        self.plan.queue.flush()
        return True

    def _send_packed(self, msg: _Outgoing, values: list[Any]) -> None:
        # (values: the part's outputs, whatever it returned, made arrays
        # where the part programs compute below)
        plan = self.plan
        padded = msg.padded
        if plan.pack_on_device:
            import pyopencl.array as cla
            values = [v if is_device_array(v) and v.flags.c_contiguous
                      else cla.to_device(plan.queue, np.ascontiguousarray(
                          to_host(v)), allocator=plan.allocator)
                      for v in values]
        else:
            values = [to_host(v) for v in values]
        if msg.buffer is None:
            plan._prepare_outgoing(msg, values)
        buffer = cast(np.ndarray, msg.buffer)  # prepared above at the latest
        rec = self.recorder.record("pack", f"pack {msg.dest}", peer=msg.dest,
                                   tag=msg.tag, nbytes=buffer.nbytes,
                                   part_id=msg.pid).start()
        if buffer.nbytes == 0:
            # (empty arrays only: nothing to pack)
            rec.complete()
            self._start_send(msg, msg.request, buffer)
            return
        if msg.padded is not None:
            padded = msg.padded
            for i, (value, array) in enumerate(zip(values, padded.arrays,
                                                   strict=True)):
                if value is not array:
                    # not computed in place (first execution, full call)
                    if (value.shape != array.shape
                            or value.dtype != array.dtype):
                        raise SendRecvMismatchError(
                            f"rank {self.rank} sends {msg.names[i]!r} of "
                            f"shape {value.shape} and dtype {value.dtype} "
                            f"to rank {msg.dest} (tag {msg.tag}), which "
                            f"receives shape {array.shape} and dtype "
                            f"{array.dtype}")
                    padded.copy_in(i, value)
            evt = padded.to_host(buffer, None)
            plan.queue.flush()
            self._device_copies.append((msg, evt, rec))
            return
        # (prepared: a message without a padded buffer has a packer)
        cast(HaloDataTransformer, msg.packer).async_pack(values)
        if plan.pack_on_device:
            import pyopencl as cl
            dev = msg.device_buffer
            evt = cl.enqueue_copy(plan.queue, buffer, dev.base_data,
                                  src_offset=dev.offset, is_blocking=False)
            # submit now: an unflushed queue may hold the copy back until
            # this rank next blocks, delaying the send
            plan.queue.flush()
            # the send starts once the copy is done (polled, or waited for
            # before this rank blocks)
            self._device_copies.append((msg, evt, rec))
        else:
            rec.complete()
            self._start_send(msg, msg.request, buffer)

    def start_ready_device_sends(self, block: bool) -> None:
        """Start the sends whose device-to-host copy has completed (with
        *block*: wait for every copy first)."""
        if not self._device_copies:
            return
        cl = _cl()
        complete = _COMPLETE
        if block:
            with self.recorder.wait("wait for device copies"):
                cl.wait_for_events([evt for _, evt, _ in self._device_copies])
        still = []
        for msg, evt, rec in self._device_copies:
            if block or evt.command_execution_status == complete:
                rec.complete()
                # (copied into the prepared buffer)
                self._start_send(msg, msg.request,
                                 cast(np.ndarray, msg.buffer))
            else:
                still.append((msg, evt, rec))
        self._device_copies = still

    def _start_send(self, msg: _Outgoing, request: MPI.Request | None,
                    data: np.ndarray
                    ) -> None:
        MPI = _mpi()
        t0 = time.perf_counter_ns()
        rec = self.recorder.new("send", f"send {msg.dest}", msg.dest,
                                msg.tag, data.nbytes, msg.pid,
                                {"n_arrays": len(msg.names)})
        if request is None:
            # (outgoing messages: an MPI communicator)
            request = self.comm.Isend(  # type: ignore[union-attr]
                [data, MPI.BYTE], dest=msg.dest, tag=msg.tag)
        else:
            # (a persistent request: _Outgoing.request)
            request.Start()  # type: ignore[attr-defined]
        self._sends_active.append((request, rec, data))
        self.n_messages_sent += 1
        self.bytes_sent += int(data.nbytes)
        self.overhead_ns["post"] += time.perf_counter_ns() - t0

    def _poll_sends(self) -> None:
        if not self._sends_active:
            return
        MPI = _mpi()
        indices = MPI.Request.Testsome([r for r, _, _ in self._sends_active])
        if not indices:
            return
        done = set(indices)
        for i in done:
            self._sends_active[i][1].complete()
        self._sends_active = [s for i, s in enumerate(self._sends_active)
                              if i not in done]

    def finish(self) -> None:
        """Wait until every send has left (buffers may then be reused),
        stop listening for failure notices, and let device copies end."""
        self.start_ready_device_sends(block=True)
        if self._recv_waiting:
            # every receive feeds a part, so this only happens if a part
            # never ran; be safe before the buffers are restarted
            from mpi4py import MPI
            requests = [req for _, req, _ in self._recv_waiting]
            with self.recorder.wait("wait for unused messages"):
                self._wait(lambda: MPI.Request.Testall(requests),
                           lambda: {m.src for m, _, _ in self._recv_waiting},
                           "waits for unused messages")
            for _msg, _, rec in self._recv_waiting:
                rec.complete()
            self._recv_waiting = []
        if self._sends_active:
            from mpi4py import MPI
            requests = [r for r, _, _ in self._sends_active]
            with self.recorder.wait("wait for sends"):
                self._wait(lambda: MPI.Request.Testall(requests),
                           lambda: {rec.peer for _, rec, _ in
                                    self._sends_active},
                           "waits for its sends to be received")
            for _, rec, _ in self._sends_active:
                rec.complete()
            self._sends_active = []
        if self._upload_events:
            import pyopencl as cl
            cl.wait_for_events(self._upload_events)
            self._upload_events = []
        if self.plan.pack_on_device:
            # (messages in padded buffers have no transformer, and nothing
            # adds events to their arrays: a copy moves them)
            for msg in self.plan.incoming:
                if msg.unpacker is not None:
                    msg.unpacker.synchronize()
                    for value in msg.device_values or ():
                        value.events.clear()  # all complete: do not pile up
            for msgs in self.plan.outgoing.values():
                for out_msg in msgs:
                    if out_msg.packer is not None:
                        out_msg.packer.synchronize()

    # }}}

    # {{{ failure

    def notify_failure(self, exc: BaseException) -> None:
        """Tell every other rank that this rank failed with *exc*."""
        self.plan.notify_failure(exc)

    def abandon(self) -> None:
        """Cancel the receives still pending (after a failure); the plan is
        not used again."""
        self.plan.broken = True
        if not self.plan.use_mpi:
            return
        for _, req, _ in self._recv_waiting:
            try:
                req.Cancel()
                req.Wait()
            except Exception:  # noqa: BLE001 -- already failing; best effort
                pass
        self._recv_waiting = []

    # }}}

# vim: foldmethod=marker
