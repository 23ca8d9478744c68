"""Send and receive nodes: how a DAG says "this value travels between ranks".

A receive is an :class:`~pytato_like.Array` whose value arrives from another
rank. A send is *not* an array (no data flows out of it), so a DAG refers to
it through a :class:`DistributedSendRefHolder`: an array whose value is its
``passthrough_data`` and which also holds the send. The holder lists the
send's data among its fields (kind ARRAY), so every generic walker
(:func:`~pytato_like.array.children_of`, pickling, equality, ``repr``) sees
the data that is sent.

.. autoclass:: DistributedSend
.. autoclass:: DistributedSendRefHolder
.. autoclass:: DistributedRecv

.. autofunction:: make_distributed_send
.. autofunction:: make_distributed_send_ref_holder
.. autofunction:: staple_distributed_send
.. autofunction:: make_distributed_recv
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pytools.tag import Tag, check_tag_uniqueness, normalize_tags

from pytato_like.array import (
    ARRAY,
    SHAPE,
    VALUE,
    Array,
    normalize_shape,
)
from pytato_like.diagnostic import DistributedPartitionError, NotAnArrayError
from pytato_like.distributed.threads import ensure_device_threads

if TYPE_CHECKING:
    from pytato_like.array import Axis, ShapeArg
    from pytato_like.dtype import DTypeLike

_T = TypeVar("_T")

CommTagType = Hashable

_NO_TAGS: frozenset[Tag] = frozenset()


def _check_rank(rank: object, what: str) -> int:
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) \
            or rank < 0:
        raise DistributedPartitionError(
            f"{what} rank {rank!r} is not a non-negative integer")
    return int(rank)


def _check_comm_tag(comm_tag: _T) -> _T:
    try:
        hash(comm_tag)
    except TypeError:
        raise DistributedPartitionError(
            f"communication tag {comm_tag!r} is not hashable") from None
    return comm_tag


def _check_array(ary: object, what: str) -> Array:
    if not isinstance(ary, Array):
        raise NotAnArrayError(f"{what} is a {type(ary).__name__}, not an Array")
    return ary


class DistributedSend:
    """Sending :attr:`data` to rank :attr:`dest_rank` under :attr:`comm_tag`.

    Not an array: reach it from a DAG through a
    :class:`DistributedSendRefHolder`.

    .. attribute:: data
    .. attribute:: dest_rank
    .. attribute:: comm_tag

        A hashable, picklable object; only a :class:`DistributedRecv` with
        the same tag (and this rank as source) receives the data.

    .. attribute:: tags
    """

    __slots__ = ("_hash", "comm_tag", "data", "dest_rank", "tags")

    def __init__(self, data: Array, dest_rank: int, comm_tag: CommTagType,
                 tags: frozenset[Tag] = _NO_TAGS) -> None:
        self.data = data
        self.dest_rank = dest_rank
        self.comm_tag = comm_tag
        self.tags = tags
        self._hash = hash((DistributedSend, data, dest_rank, comm_tag, tags))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (isinstance(other, DistributedSend)
                and self._hash == other._hash
                and self.dest_rank == other.dest_rank
                and self.comm_tag == other.comm_tag
                and self.tags == other.tags
                and self.data == other.data)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def copy(self, **kwargs: Any) -> DistributedSend:
        values: dict[str, Any] = {"data": self.data, "dest_rank": self.dest_rank,
                  "comm_tag": self.comm_tag, "tags": self.tags}
        values.update(kwargs)
        return DistributedSend(**values)

    def __reduce__(self):
        return (DistributedSend,
                (self.data, self.dest_rank, self.comm_tag, self.tags))

    def __repr__(self) -> str:
        return (f"DistributedSend(dest_rank={self.dest_rank}, "
                f"comm_tag={self.comm_tag!r}, data of shape {self.data.shape}, "
                f"dtype {self.data.dtype})")


class DistributedSendRefHolder(Array):
    """An array equal to :attr:`passthrough_data` that also holds
    :attr:`send`, so the send becomes part of any DAG using this array.

    Constructed as ``DistributedSendRefHolder(send, passthrough_data,
    tags=...)`` (pytato's signature) or from its fields ``send_data,
    dest_rank, comm_tag, send_tags, passthrough_data`` (what generic
    rewriters such as :meth:`~pytato_like.Array.copy` use).

    .. attribute:: send
    .. attribute:: passthrough_data
    """

    __slots__ = ("_send", "comm_tag", "dest_rank", "passthrough_data",
                 "send_data", "send_tags")
    _mapper_method = "map_distributed_send_ref_holder"
    _fields = (("send_data", ARRAY), ("dest_rank", VALUE), ("comm_tag", VALUE),
               ("send_tags", VALUE), ("passthrough_data", ARRAY))

    def __init__(self, send: DistributedSend | None = None,
                 passthrough_data: Array | None = None,
                 tags: frozenset[Tag] = _NO_TAGS, *,
                 send_data: Array | None = None, dest_rank: int | None = None,
                 comm_tag: CommTagType = None,
                 send_tags: frozenset[Tag] | None = None,
                 axes=None,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        if send is not None:
            if not isinstance(send, DistributedSend):
                raise NotAnArrayError(
                    f"DistributedSendRefHolder expects a DistributedSend, got "
                    f"a {type(send).__name__}")
            send_data, dest_rank = send.data, send.dest_rank
            comm_tag, send_tags = send.comm_tag, send.tags
        elif send_data is None or dest_rank is None:
            raise DistributedPartitionError(
                "DistributedSendRefHolder needs either a send or the fields "
                "send_data, dest_rank and comm_tag")
        passthrough_data = _check_array(passthrough_data, "passthrough_data")
        self.send_data = send_data
        self.dest_rank = dest_rank
        self.comm_tag = comm_tag
        self.send_tags = _NO_TAGS if send_tags is None else send_tags
        self.passthrough_data = passthrough_data
        self._send = send
        self.shape = passthrough_data.shape
        self.dtype = passthrough_data.dtype
        if axes is None:
            axes = passthrough_data.axes
        self._finish_init(axes, tags, non_equality_tags)

    @property
    def send(self) -> DistributedSend:
        if self._send is None:
            self._send = DistributedSend(self.send_data, self.dest_rank,
                                         self.comm_tag, self.send_tags)
        return self._send


class DistributedRecv(Array):
    """An array received from rank :attr:`src_rank` under :attr:`comm_tag`.

    .. attribute:: src_rank
    .. attribute:: comm_tag
    .. attribute:: shape
    .. attribute:: dtype
    """

    __slots__ = ("comm_tag", "src_rank")
    _mapper_method = "map_distributed_recv"
    _fields = (("src_rank", VALUE), ("comm_tag", VALUE), ("shape", SHAPE),
               ("dtype", VALUE))

    def __init__(self, src_rank: int, comm_tag: CommTagType, shape, dtype,
                 axes=None, tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        self.src_rank = src_rank
        self.comm_tag = comm_tag
        self.shape = shape
        self.dtype = dtype
        self._finish_init(axes, tags, non_equality_tags)


def _tags(tags) -> frozenset[Tag]:
    return check_tag_uniqueness(normalize_tags(tags))


def make_distributed_send(sent_data: Array, dest_rank: int,
                          comm_tag: CommTagType,
                          send_tags: Tag | Iterable[Tag] = frozenset()
                          ) -> DistributedSend:
    """A send of *sent_data* to *dest_rank* under *comm_tag*."""
    # a distributed program starts: set each rank's device threads before
    # an OpenCL context exists (see distributed.threads)
    ensure_device_threads()
    return DistributedSend(_check_array(sent_data, "sent data"),
                           _check_rank(dest_rank, "destination"),
                           _check_comm_tag(comm_tag), _tags(send_tags))


def make_distributed_send_ref_holder(send: DistributedSend,
                                     passthrough_data: Array,
                                     tags: Tag | Iterable[Tag] = frozenset()
                                     ) -> DistributedSendRefHolder:
    """An array equal to *passthrough_data* that keeps *send* in the DAG."""
    return DistributedSendRefHolder(
        send, _check_array(passthrough_data, "passthrough_data"),
        tags=_tags(tags))


def staple_distributed_send(sent_data: Array, dest_rank: int,
                            comm_tag: CommTagType, stapled_to: Array, *,
                            send_tags: Tag | Iterable[Tag] = frozenset(),
                            ref_holder_tags: Tag | Iterable[Tag] = frozenset()
                            ) -> DistributedSendRefHolder:
    """*stapled_to*, holding a send of *sent_data* to *dest_rank*: use the
    result in place of *stapled_to* and the send happens when the DAG runs."""
    return make_distributed_send_ref_holder(
        make_distributed_send(sent_data, dest_rank, comm_tag, send_tags),
        stapled_to, ref_holder_tags)


def make_distributed_recv(src_rank: int, comm_tag: CommTagType,
                          shape: ShapeArg,
                          dtype: DTypeLike = np.float64,
                          axes: Sequence[Axis] | None = None,
                          tags: Tag | Iterable[Tag] = frozenset()
                          ) -> DistributedRecv:
    """An array of *shape* and *dtype* received from *src_rank* under
    *comm_tag*."""
    ensure_device_threads()  # as in make_distributed_send
    return DistributedRecv(_check_rank(src_rank, "source"),
                           _check_comm_tag(comm_tag), normalize_shape(shape),
                           np.dtype(dtype), axes=axes, tags=_tags(tags))
