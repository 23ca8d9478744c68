"""The send/receive layer under the distributed executor.

:class:`MessageLayer` owns every MPI request of one run: it posts all
receives up front (``Irecv`` into preallocated host buffers), sends each
value as soon as it is computed (``Isend``), reports arrivals
(``Testsome``/``Waitsome``) and finally waits for the sends. A send to the
own rank is handed over directly, without MPI. Messages are raw bytes
(``MPI.BYTE``), so any dtype travels; the verifier guarantees both sides
agree on shape and dtype.

This is the single place that knows what a message is: packing all arrays
one part sends to one rank into one message slots in here.

A reserved tag (the communicator's ``MPI.TAG_UB``) carries failure notices:
:meth:`MessageLayer.notify_failure` tells every other rank that this rank
failed, and a rank waiting for data raises
:class:`~pytato_like.diagnostic.RemoteRankError` instead of waiting forever.

.. autoclass:: MessageLayer
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytato_like.diagnostic import DistributedPartitionError, RemoteRankError
from pytato_like.distributed.nodes import DistributedRecv, DistributedSend

_NOTICE_BYTES = 4096


def to_host(value: Any) -> np.ndarray:
    """*value* (NumPy or pyopencl array) as a contiguous NumPy array."""
    if not isinstance(value, np.ndarray) and hasattr(value, "get") \
            and hasattr(value, "queue"):
        value = value.get()
    return np.ascontiguousarray(value)


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


class MessageLayer:
    """Nonblocking point-to-point messages of one distributed run."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.use_mpi = hasattr(comm, "Irecv")
        self._recv_requests: list[Any] = []
        self._recv_names: list[str] = []
        self._recv_buffers: list[np.ndarray] = []
        self._local: dict[tuple[int, Any], tuple[str, DistributedRecv]] = {}
        self._arrived: list[tuple[str, np.ndarray]] = []
        self._send_requests: list[Any] = []
        self._send_buffers: list[np.ndarray] = []
        self._notice_request = None
        self.n_messages_sent = 0
        if self.use_mpi and comm.Get_size() > 1:
            from mpi4py import MPI
            self._notice_tag = int(comm.Get_attr(MPI.TAG_UB))
            self._notice_buf = bytearray(_NOTICE_BYTES)
            self._notice_request = comm.Irecv(
                [self._notice_buf, MPI.BYTE], source=MPI.ANY_SOURCE,
                tag=self._notice_tag)
            self._notice_status = MPI.Status()

    # {{{ receiving

    def post_receives(self, recvs: dict[str, DistributedRecv]) -> None:
        """Start receiving every value of *recvs* (name -> receive)."""
        for name, recv in recvs.items():
            buf = np.empty(_concrete_shape(recv), dtype=recv.dtype)
            if recv.src_rank == self.rank:
                self._local[(recv.src_rank, recv.comm_tag)] = (name, recv)
                continue
            if not self.use_mpi:
                raise DistributedPartitionError(
                    f"rank {self.rank} receives from rank {recv.src_rank} "
                    "but runs without an MPI communicator")
            from mpi4py import MPI
            self._recv_requests.append(self.comm.Irecv(
                [buf, MPI.BYTE], source=recv.src_rank,
                tag=_mpi_tag(recv.comm_tag, f"receive from rank {recv.src_rank}")))
            self._recv_names.append(name)
            self._recv_buffers.append(buf)

    @property
    def n_pending(self) -> int:
        """Receives posted and not yet reported as arrived."""
        return (sum(1 for name in self._recv_names if name is not None)
                + len(self._local) + len(self._arrived))

    def arrivals(self, block: bool) -> list[tuple[str, np.ndarray]]:
        """``(name, value)`` of receives completed since the last call; with
        *block*, waits until at least one has arrived."""
        result, self._arrived = self._arrived, []
        if result or not any(name is not None for name in self._recv_names):
            return result
        from mpi4py import MPI
        requests = list(self._recv_requests)
        if self._notice_request is not None:
            requests.append(self._notice_request)
        statuses = [MPI.Status() for _ in requests]
        if block:
            indices = MPI.Request.Waitsome(requests, statuses)
        else:
            indices = MPI.Request.Testsome(requests, statuses)
        n_recvs = len(self._recv_requests)
        self._recv_requests = requests[:n_recvs]
        # statuses are filled in completion order, not by request index
        for i, status in zip(indices or (), statuses, strict=False):
            if i == n_recvs:
                self._remote_failure(status)
            result.append((self._recv_names[i], self._recv_buffers[i]))
            self._recv_names[i] = None
            self._recv_buffers[i] = None
        return result

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

    def send(self, send: DistributedSend, value: Any) -> None:
        """Start sending *value* as *send* prescribes."""
        data = to_host(value)
        if send.dest_rank == self.rank:
            entry = self._local.pop((self.rank, send.comm_tag), None)
            if entry is None:
                raise DistributedPartitionError(
                    f"rank {self.rank} sends to itself with tag "
                    f"{send.comm_tag!r} but has no matching receive")
            self._arrived.append((entry[0], data.copy()))
            return
        if not self.use_mpi:
            raise DistributedPartitionError(
                f"rank {self.rank} sends to rank {send.dest_rank} but runs "
                "without an MPI communicator")
        from mpi4py import MPI
        self._send_requests.append(self.comm.Isend(
            [data, MPI.BYTE], dest=send.dest_rank,
            tag=_mpi_tag(send.comm_tag, f"send to rank {send.dest_rank}")))
        self._send_buffers.append(data)
        self.n_messages_sent += 1

    def finish(self) -> None:
        """Wait until every send has left, and stop listening for failure
        notices."""
        if self._send_requests:
            from mpi4py import MPI
            MPI.Request.Waitall(self._send_requests)
        self._send_requests, self._send_buffers = [], []
        self._cancel_notice()

    # }}}

    # {{{ failure

    def notify_failure(self, exc: BaseException) -> None:
        """Tell every other rank that this rank failed with *exc*."""
        if not self.use_mpi or self.comm.Get_size() == 1:
            return
        from mpi4py import MPI
        text = f"{type(exc).__name__}: {exc}".encode()[:_NOTICE_BYTES]
        for dest in range(self.comm.Get_size()):
            if dest != self.rank:
                # small enough to be sent eagerly: never blocks
                self.comm.Isend([text, MPI.BYTE], dest=dest,
                                tag=self._notice_tag).Free()

    def abandon(self) -> None:
        """Cancel the receives still pending (after a failure)."""
        if not self.use_mpi:
            return
        from mpi4py import MPI
        for req in self._recv_requests:
            if req != MPI.REQUEST_NULL:
                req.Cancel()
                req.Free()
        self._recv_requests = []
        self._cancel_notice()

    def _cancel_notice(self) -> None:
        if self._notice_request is not None:
            self._notice_request.Cancel()
            self._notice_request.Wait()
            self._notice_request = None

    # }}}
