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
  (``Testsome`` / ``Waitsome``, unpacked), and finally waits for the sends.
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
packs with the OpenCL transformer on the queue and moves one buffer per
message between device and host (asynchronously: the send starts when the
copy's event completes); ``pack_on="host"`` copies each array to the host
and packs there. Both give the same bytes on the wire.

Messages are raw bytes (``MPI.BYTE``), so any dtype travels; the verifier
guarantees both sides agree on shapes and dtypes, and both derive the
buffer layout from them. A send to the own rank is handed over directly.

A reserved tag (the communicator's ``MPI.TAG_UB``) carries failure notices:
:meth:`Exchange.notify_failure` tells every other rank that this rank
failed, and a rank waiting for data raises
:class:`~pytato_like.diagnostic.RemoteRankError` instead of waiting forever.

.. autoclass:: MessagePlan
    :members: receive_buffers, n_outgoing, n_incoming, free
.. autoclass:: Exchange
    :members:
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from pytato_like.diagnostic import (
    DistributedExecutionError,
    DistributedPartitionError,
    RemoteRankError,
)
from pytato_like.distributed.nodes import DistributedRecv
from pytato_like.runtime.halo import HaloDataTransformer, HaloExchangeSpec
from pytato_like.runtime.pool import get_buffer_pool
from pytato_like.runtime.recv_buffers import ReceiveBufferRegistry
from pytato_like.runtime.trace import TraceRecorder

_NOTICE_BYTES = 4096

MESSAGE_MODES = ("packed", "per_array")
PACK_PLACES = ("device", "host")


def is_device_array(value: Any) -> bool:
    """Whether *value* is a :class:`pyopencl.array.Array` (without
    importing pyopencl)."""
    return (not isinstance(value, np.ndarray) and hasattr(value, "base_data")
            and hasattr(value, "queue"))


def to_host(value: Any) -> np.ndarray:
    """*value* (NumPy or pyopencl array) as a NumPy array."""
    if is_device_array(value):
        return value.get()
    return np.asarray(value)


def _mpi_tag(tag: Any, what: str) -> int:
    if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
        return int(tag)
    raise DistributedPartitionError(
        f"{what} has tag {tag!r}, which is not an MPI tag; call "
        "number_distributed_tags on the partition before executing it")


def _concrete_shape(recv: DistributedRecv) -> tuple[int, ...]:
    if not all(isinstance(s, int) for s in recv.shape):
        raise DistributedPartitionError(
            f"receive from rank {recv.src_rank} with tag {recv.comm_tag!r} has "
            f"symbolic shape {recv.shape}; receive buffers need concrete shapes")
    return tuple(recv.shape)


def _whole_array_specs(entries) -> list[HaloExchangeSpec]:
    return [HaloExchangeSpec.whole_array(shape, dtype) for shape, dtype in entries]


# {{{ messages of a plan

class _Outgoing:
    """One message this rank sends: the part outputs *names* (buffer order)
    to rank *dest* under *tag*."""

    def __init__(self, pid: Hashable, dest: int, tag: int, names: list[str]):
        self.pid = pid
        self.dest = dest
        self.tag = tag
        self.names = names
        self.packer: HaloDataTransformer | None = None
        self.device_buffer: Any = None   # device pack buffer (device packing)
        self.buffer: np.ndarray | None = None   # host bytes handed to MPI
        self.request: Any = None          # persistent send request


class _Incoming:
    """One message this rank receives from rank *src* under *tag*: the
    receives *names* (buffer order) of *shapes* and *dtypes*."""

    def __init__(self, src: int, tag: int, names: list[str],
                 recvs: list[DistributedRecv]):
        self.src = src
        self.tag = tag
        self.names = names
        self.entries = [(_concrete_shape(r), np.dtype(r.dtype)) for r in recvs]
        self.unpacker: HaloDataTransformer | None = None
        self.device_buffer: Any = None
        self.buffer: np.ndarray | None = None
        self.views: list[np.ndarray] | None = None
        self.request: Any = None
        self.nbytes = 0

# }}}


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

    def __init__(self, partition: Any, comm: Any, queue: Any = None, *,
                 messages: str = "packed", pack_on: str = "device",
                 allocator: Any = None) -> None:
        if messages not in MESSAGE_MODES:
            raise DistributedExecutionError(
                f"messages={messages!r}; expected one of {MESSAGE_MODES}")
        if pack_on not in PACK_PLACES:
            raise DistributedExecutionError(
                f"pack_on={pack_on!r}; expected one of {PACK_PLACES}")
        self.comm = comm
        self.rank = comm.Get_rank()
        self.use_mpi = hasattr(comm, "Irecv")
        self.queue = queue
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
        self.registry = ReceiveBufferRegistry(np)

        rank = self.rank
        recvs = partition.recv_name_to_node()
        self.local_recv: dict[Any, str] = {}
        remote: dict[tuple[int, int], tuple[str, DistributedRecv]] = {}
        for name, recv in recvs.items():
            if recv.src_rank == rank:
                self.local_recv[recv.comm_tag] = name
            else:
                tag = _mpi_tag(recv.comm_tag,
                               f"receive from rank {recv.src_rank}")
                remote[(recv.src_rank, tag)] = (name, recv)
        if remote and not self.use_mpi:
            src = next(iter(remote))[0]
            raise DistributedPartitionError(
                f"rank {rank} receives from rank {src} but runs without an "
                "MPI communicator")

        self.local_sends: dict[Hashable, list[tuple[str, Any]]] = {}
        self.outgoing: dict[Hashable, list[_Outgoing]] = {}
        send_names: dict[tuple[int, int], tuple[Hashable, str]] = {}
        for pid in partition.toposorted_part_ids:
            for name, send in partition.parts[pid].output_name_to_send_node.items():
                if send.dest_rank == rank:
                    self.local_sends.setdefault(pid, []).append((name, send))
                    continue
                if not self.use_mpi:
                    raise DistributedPartitionError(
                        f"rank {rank} sends to rank {send.dest_rank} but runs "
                        "without an MPI communicator")
                tag = _mpi_tag(send.comm_tag, f"send to rank {send.dest_rank}")
                send_names[(send.dest_rank, tag)] = (pid, name)

        self.incoming: list[_Incoming] = []
        if self.packed:
            self._group_packed(partition, remote, send_names)
        else:
            for (src, tag), (name, recv) in remote.items():
                self.incoming.append(_Incoming(src, tag, [name], [recv]))
            for (dest, tag), (pid, name) in send_names.items():
                self.outgoing.setdefault(pid, []).append(
                    _Outgoing(pid, dest, tag, [name]))
        if self.packed:
            for msg in self.incoming:
                self._prepare_incoming(msg)

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
                    [send_names[k][1] for k in keys]))
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
        if self.pack_on_device:
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
            msg.request = self.comm.Recv_init([msg.buffer, MPI.BYTE],
                                              source=msg.src, tag=msg.tag)

    def _prepare_outgoing(self, msg: _Outgoing, values: list[Any]) -> None:
        """Packer, buffers and persistent request of a packed outgoing
        message, from the first values sent (their shapes may be symbolic
        in the DAG)."""
        specs = _whole_array_specs([(tuple(v.shape), v.dtype) for v in values])
        if self.pack_on_device:
            msg.packer = HaloDataTransformer.get(self.queue, specs)
            msg.device_buffer = msg.packer.get_pack_buffer()
            msg.buffer = get_buffer_pool(np).get(
                (int(msg.device_buffer.nbytes),), np.uint8)
        else:
            msg.packer = HaloDataTransformer.get(np, specs)
            msg.buffer = msg.packer.get_pack_buffer()
        from mpi4py import MPI
        msg.request = self.comm.Send_init([msg.buffer, MPI.BYTE],
                                          dest=msg.dest, tag=msg.tag)

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
    def receive_buffers(self) -> ReceiveBufferRegistry:
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
        return [m.buffer for m in self.incoming if m.views is not None]

    def begin(self, recorder: TraceRecorder) -> Exchange:
        """Start one execution: post every receive."""
        return Exchange(self, recorder)

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
        for msg in [*self.incoming,
                    *(m for v in self.outgoing.values() for m in v)]:
            if msg.request is not None and mpi_alive and not self.broken:
                msg.request.Free()
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


class Exchange:
    """The communication of one execution of a :class:`MessagePlan`."""

    def __init__(self, plan: MessagePlan, recorder: TraceRecorder) -> None:
        self.plan = plan
        self.rank = plan.rank
        self.comm = plan.comm
        self.recorder = recorder
        self.on_device = plan.queue is not None
        self._arrived: list[tuple[str, Any]] = []
        self._pending_local = set(plan.local_recv)
        # incoming messages not arrived yet: (message, request, record)
        self._recv_waiting: list[tuple[_Incoming, Any, Any]] = []
        self._sends_active: list[tuple[Any, Any, Any]] = []   # (req, record, keep)
        self._device_copies: list[tuple[_Outgoing, Any, Any]] = []
        self._upload_events: list[Any] = []
        self._notice_request = None
        self.n_messages_sent = 0
        self.n_messages_received = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        if plan.use_mpi and self.comm.Get_size() > 1:
            from mpi4py import MPI
            self._notice_tag = int(self.comm.Get_attr(MPI.TAG_UB))
            self._notice_buf = bytearray(_NOTICE_BYTES)
            self._notice_request = self.comm.Irecv(
                [self._notice_buf, MPI.BYTE], source=MPI.ANY_SOURCE,
                tag=self._notice_tag)
        self._start_receives()

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
                req = self.comm.Irecv([msg.buffer, MPI.BYTE], source=msg.src,
                                      tag=msg.tag)
            rec = self.recorder.message(
                "recv", msg.src, tag=msg.tag, nbytes=msg.buffer.nbytes,
                n_arrays=len(msg.names))
            self._recv_waiting.append((msg, req, rec))
            requests.append(req)
        if plan.packed:
            MPI.Prequest.Startall(requests)

    @property
    def n_pending(self) -> int:
        """Values expected and not yet reported as arrived."""
        return (len(self._recv_waiting) + len(self._pending_local)
                + len(self._arrived))

    def arrivals(self, block: bool) -> list[tuple[str, Any]]:
        """``(name, value)`` of values arrived since the last call, ready
        for the parts (device arrays for device part programs); with
        *block*, waits until at least one has arrived."""
        self._start_ready_device_sends(block=False)
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
            self._start_ready_device_sends(block=True)
        from mpi4py import MPI
        requests = [req for _, req, _ in self._recv_waiting]
        if self._notice_request is not None:
            requests.append(self._notice_request)
        statuses = [MPI.Status() for _ in requests]
        if block:
            with self.recorder.wait("wait for messages"):
                indices = MPI.Request.Waitsome(requests, statuses)
        else:
            indices = MPI.Request.Testsome(requests, statuses)
        if not indices:
            return result
        n_recvs = len(self._recv_waiting)
        done = set()
        # statuses are filled in completion order, not by request index
        for i, status in zip(indices, statuses, strict=False):
            if i == n_recvs:
                self._remote_failure(status)
            done.add(i)
        arrived = [self._recv_waiting[i] for i in sorted(done)]
        self._recv_waiting = [w for i, w in enumerate(self._recv_waiting)
                              if i not in done]
        for msg, _, rec in arrived:
            rec.complete()
            self.n_messages_received += 1
            self.bytes_received += int(msg.buffer.nbytes)
            result.extend(self._unpack(msg))
        return result

    def _unpack(self, msg: _Incoming) -> list[tuple[str, Any]]:
        plan = self.plan
        if not plan.packed:
            return [(msg.names[0], self._for_parts(msg.buffer))]
        with self.recorder.record("unpack", f"unpack {msg.src}", peer=msg.src,
                                  tag=msg.tag, nbytes=msg.nbytes) as _:
            if plan.pack_on_device:
                import pyopencl as cl
                import pyopencl.array as cla
                queue, dev = plan.queue, msg.device_buffer
                evt = cl.enqueue_copy(queue, dev.base_data, msg.buffer,
                                      dst_offset=dev.offset, is_blocking=False)
                dev.add_event(evt)
                self._upload_events.append(evt)
                values = [cla.empty(queue, shape, dtype,
                                    allocator=plan.allocator)
                          for shape, dtype in msg.entries]
                msg.unpacker.async_unpack(values)
            else:
                values = [self._for_parts(v) for v in msg.views]
        return list(zip(msg.names, values, strict=True))

    def _for_parts(self, value: Any) -> Any:
        """*value* where the part programs compute."""
        if self.on_device and not is_device_array(value):
            import pyopencl.array as cla
            return cla.to_device(self.plan.queue, np.ascontiguousarray(value),
                                 allocator=self.plan.allocator)
        if not self.on_device and is_device_array(value):
            return value.get()
        return value

    def _remote_failure(self, status: Any) -> None:
        count = status.Get_count()
        text = bytes(self._notice_buf[:count]).decode(errors="replace")
        self._notice_request = None
        self.abandon()
        raise RemoteRankError(
            f"rank {status.Get_source()} failed during distributed execution "
            f"(seen by rank {self.rank}): {text}")

    # }}}

    # {{{ sending

    def send_part_outputs(self, pid: Hashable, outputs: dict[str, Any]) -> None:
        """Start the messages of part *pid*, which has just computed
        *outputs*."""
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
                self._send_packed(msg, [outputs[n] for n in msg.names])
            else:
                self._start_send(msg, None, np.ascontiguousarray(
                    to_host(outputs[msg.names[0]])))

    def _send_packed(self, msg: _Outgoing, values: list[Any]) -> None:
        plan = self.plan
        if plan.pack_on_device:
            import pyopencl.array as cla
            values = [v if is_device_array(v) and v.flags.c_contiguous
                      else cla.to_device(plan.queue, np.ascontiguousarray(
                          to_host(v)), allocator=plan.allocator)
                      for v in values]
        else:
            values = [to_host(v) for v in values]
        if msg.packer is None:
            plan._prepare_outgoing(msg, values)
        rec = self.recorder.record("pack", f"pack {msg.dest}", peer=msg.dest,
                                   tag=msg.tag, nbytes=msg.buffer.nbytes,
                                   part_id=msg.pid).start()
        msg.packer.async_pack(values)
        if plan.pack_on_device:
            import pyopencl as cl
            dev = msg.device_buffer
            evt = cl.enqueue_copy(plan.queue, msg.buffer, dev.base_data,
                                  src_offset=dev.offset, is_blocking=False)
            # submit now: an unflushed queue may hold the copy back until
            # this rank next blocks, delaying the send
            plan.queue.flush()
            # the send starts once the copy is done (polled, or waited for
            # before this rank blocks)
            self._device_copies.append((msg, evt, rec))
        else:
            rec.complete()
            self._start_send(msg, msg.request, msg.buffer)

    def _start_ready_device_sends(self, block: bool) -> None:
        if not self._device_copies:
            return
        import pyopencl as cl
        complete = cl.command_execution_status.COMPLETE
        if block:
            with self.recorder.wait("wait for device copies"):
                cl.wait_for_events([evt for _, evt, _ in self._device_copies])
        still = []
        for msg, evt, rec in self._device_copies:
            if block or evt.command_execution_status == complete:
                rec.complete()
                self._start_send(msg, msg.request, msg.buffer)
            else:
                still.append((msg, evt, rec))
        self._device_copies = still

    def _start_send(self, msg: _Outgoing, request: Any, data: np.ndarray
                    ) -> None:
        from mpi4py import MPI
        rec = self.recorder.message("send", msg.dest, tag=msg.tag,
                                    nbytes=data.nbytes, part_id=msg.pid,
                                    n_arrays=len(msg.names))
        if request is None:
            request = self.comm.Isend([data, MPI.BYTE], dest=msg.dest,
                                      tag=msg.tag)
        else:
            request.Start()
        self._sends_active.append((request, rec, data))
        self.n_messages_sent += 1
        self.bytes_sent += int(data.nbytes)

    def _poll_sends(self) -> None:
        if not self._sends_active:
            return
        from mpi4py import MPI
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
        self._start_ready_device_sends(block=True)
        if self._recv_waiting:
            # every receive feeds a part, so this only happens if a part
            # never ran; be safe before the buffers are restarted
            from mpi4py import MPI
            with self.recorder.wait("wait for unused messages"):
                MPI.Request.Waitall([req for _, req, _ in self._recv_waiting])
            for _msg, _, rec in self._recv_waiting:
                rec.complete()
            self._recv_waiting = []
        if self._sends_active:
            from mpi4py import MPI
            with self.recorder.wait("wait for sends"):
                MPI.Request.Waitall([r for r, _, _ in self._sends_active])
            for _, rec, _ in self._sends_active:
                rec.complete()
            self._sends_active = []
        if self._upload_events:
            import pyopencl as cl
            cl.wait_for_events(self._upload_events)
            self._upload_events = []
        if self.plan.pack_on_device:
            for msg in self.plan.incoming:
                msg.unpacker.synchronize()
            for msgs in self.plan.outgoing.values():
                for msg in msgs:
                    if msg.packer is not None:
                        msg.packer.synchronize()
        self._cancel_notice()

    # }}}

    # {{{ failure

    def notify_failure(self, exc: BaseException) -> None:
        """Tell every other rank that this rank failed with *exc*."""
        if not self.plan.use_mpi or self.comm.Get_size() == 1:
            return
        from mpi4py import MPI
        text = f"{type(exc).__name__}: {exc}".encode()[:_NOTICE_BYTES]
        for dest in range(self.comm.Get_size()):
            if dest != self.rank:
                # small enough to be sent eagerly: never blocks
                self.comm.Isend([text, MPI.BYTE], dest=dest,
                                tag=self._notice_tag).Free()

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
        self._cancel_notice()

    def _cancel_notice(self) -> None:
        if self._notice_request is not None:
            self._notice_request.Cancel()
            self._notice_request.Wait()
            self._notice_request = None

    # }}}

# vim: foldmethod=marker
