"""Registered receive buffers: one preallocated buffer per incoming message,
reused by every execution.

A program run many times receives the same messages each time: same peer,
same tag, same shape and dtype. Allocating a receive buffer per execution
costs an allocation (and, for MPI with pinned or registered memory, a
registration) per message per step. A :class:`ReceiveBufferRegistry` hands
out the *same* buffer for the same ``(peer, tag, shape, dtype)`` key every
time: allocated from the :mod:`~pytato_like.runtime.pool` on first use, or
registered by the caller ahead of time (:meth:`~ReceiveBufferRegistry.register`,
after StepMesh's ``register_recv_buffer``).

The caller owns the timing: a buffer's content is only valid until the next
receive into it, so copy (or finish using) a received value before posting
the next receive with the same key.

.. autoclass:: ReceiveBufferRegistry
    :members:
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

import numpy as np

from pytato_like.diagnostic import BufferRegistrationError
from pytato_like.runtime.pool import get_buffer_pool

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyopencl as cl
    import pyopencl.array as cla

    from pytato_like.runtime.pool import BufferPool

#: the buffers: NumPy arrays (host) or pyopencl arrays (device)
ArrayT = TypeVar("ArrayT", np.ndarray, "cla.Array")

Key = tuple[int, Hashable, tuple[int, ...], np.dtype]


class ReceiveBufferRegistry(Generic[ArrayT]):
    """Receive buffers by ``(peer, tag, shape, dtype)``.

    :arg np_module_or_queue: the :mod:`numpy` module for host buffers
        (what MPI receives into) or a :class:`pyopencl.CommandQueue` for
        device buffers.
    """

    @overload
    def __init__(self: ReceiveBufferRegistry[np.ndarray],
                 np_module_or_queue: ModuleType = np) -> None: ...

    @overload
    def __init__(self: ReceiveBufferRegistry[cla.Array],
                 np_module_or_queue: cl.CommandQueue) -> None: ...

    def __init__(self, np_module_or_queue: ModuleType | cl.CommandQueue = np
                 ) -> None:
        # (the pool of the registry's kind: NumPy's for the module, the
        # queue's for a queue)
        self._pool: BufferPool[ArrayT] = cast(
            "BufferPool[ArrayT]", get_buffer_pool(np_module_or_queue))
        self._buffers: dict[Key, ArrayT] = {}
        self._owned: set[Key] = set()      # allocated here, returned on clear
        self._lock = threading.Lock()
        self.n_allocated = 0
        self.n_reused = 0

    @staticmethod
    def key(peer: int, tag: Hashable, shape: tuple[int, ...],
            dtype: npt.DTypeLike) -> Key:
        return (int(peer), tag, tuple(int(s) for s in shape), np.dtype(dtype))

    def get(self, peer: int, tag: Hashable, shape: tuple[int, ...],
            dtype: npt.DTypeLike) -> ArrayT:
        """The buffer for this key: the same object on every call."""
        key = self.key(peer, tag, shape, dtype)
        with self._lock:
            buf = self._buffers.get(key)
            if buf is not None:
                self.n_reused += 1
                return buf
            buf = self._buffers[key] = self._pool.get(key[2], key[3])
            self._owned.add(key)
            self.n_allocated += 1
            return buf

    def register(self, peer: int, tag: Hashable, buffer: ArrayT) -> None:
        """Use *buffer* (contiguous) for messages from *peer* with *tag* and
        the buffer's shape and dtype."""
        flags = getattr(buffer, "flags", None)
        if flags is None or not flags.c_contiguous:
            raise BufferRegistrationError(
                f"receive buffer for peer {peer}, tag {tag!r} must be a "
                f"C-contiguous array, got {type(buffer).__name__}")
        key = self.key(peer, tag, buffer.shape, buffer.dtype)
        with self._lock:
            old = self._buffers.get(key)
            if old is not None and old is not buffer:
                raise BufferRegistrationError(
                    f"a receive buffer of shape {key[2]} and dtype {key[3]} is "
                    f"already registered for peer {peer}, tag {tag!r}")
            self._buffers[key] = buffer

    def __contains__(self, key: Key) -> bool:
        return self.key(*key) in self._buffers

    def __len__(self) -> int:
        return len(self._buffers)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._buffers))

    @property
    def nbytes(self) -> int:
        """Bytes held by all registered buffers."""
        return sum(int(b.nbytes) for b in self._buffers.values())

    def clear(self) -> None:
        """Forget every buffer; those allocated here go back to the pool."""
        with self._lock:
            for key in self._owned:
                self._pool.put(self._buffers[key])
            self._buffers.clear()
            self._owned.clear()
