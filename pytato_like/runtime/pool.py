"""Buffer pools: reuse communication and scratch buffers instead of
allocating them for every exchange.

A pool keeps free lists of arrays keyed by ``(shape, dtype)``. :meth:`~BufferPool.get`
hands out a free array of that key if there is one (no allocation) and
allocates otherwise; :meth:`~BufferPool.put` returns an array for reuse.
Host pools hold NumPy arrays; device pools hold :class:`pyopencl.array.Array`
objects whose memory comes from a :class:`pyopencl.tools.MemoryPool`, so even
when a device free list is cleared the memory stays in pyopencl's pool and is
reused for other shapes.

Arrays handed out are *uninitialised* (like :func:`numpy.empty`).

.. autoclass:: BufferPool
.. autoclass:: HostBufferPool
.. autoclass:: DeviceBufferPool
.. autofunction:: get_buffer_pool
.. autofunction:: clear_buffer_pools
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyopencl as cl
    import pyopencl.array as cla

#: the arrays of a pool: NumPy arrays (host) or pyopencl arrays (device)
ArrayT = TypeVar("ArrayT", np.ndarray, "cla.Array")


class BufferPool(Generic[ArrayT]):
    """Free lists of arrays keyed by ``(shape, dtype)``.

    :arg allocate: ``allocate(shape, dtype) -> array`` for a key with no
        free array.

    Counters for tests and benchmarks: :attr:`n_allocated` (arrays ever
    allocated), :attr:`n_reused` (requests served from a free list),
    :attr:`n_free` (arrays currently waiting in free lists).
    """

    def __init__(self, allocate: Callable[[tuple[int, ...], np.dtype], ArrayT]):
        self._allocate: Callable[[tuple[int, ...], np.dtype], ArrayT] = allocate
        self._free: dict[tuple[tuple[int, ...], np.dtype], list[ArrayT]] = {}
        # Halo transformers may be finalized from a Handle's worker thread.
        self._lock = threading.Lock()
        self.n_allocated = 0
        self.n_reused = 0

    def get(self, shape: tuple[int, ...] | int, dtype: npt.DTypeLike) -> ArrayT:
        """An array of *shape* and *dtype*, reused if one is free."""
        key = (_as_shape(shape), np.dtype(dtype))
        with self._lock:
            free = self._free.get(key)
            if free:
                self.n_reused += 1
                return free.pop()
            self.n_allocated += 1
        return self._allocate(*key)

    def put(self, array: ArrayT) -> None:
        """Give *array* back for reuse. The caller must not use it after."""
        key = (tuple(array.shape), np.dtype(array.dtype))
        with self._lock:
            self._free.setdefault(key, []).append(array)

    @property
    def n_free(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._free.values())

    @property
    def nbytes_free(self) -> int:
        """Bytes held in free lists."""
        with self._lock:
            return sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                       * len(v) for (shape, dtype), v in self._free.items())

    def clear(self) -> None:
        """Drop every free array (device memory returns to pyopencl's
        memory pool)."""
        with self._lock:
            self._free.clear()


class HostBufferPool(BufferPool[np.ndarray]):
    """A :class:`BufferPool` of NumPy arrays."""

    def __init__(self) -> None:
        super().__init__(lambda shape, dtype: np.empty(shape, dtype))


class DeviceBufferPool(BufferPool["cla.Array"]):
    """A :class:`BufferPool` of :class:`pyopencl.array.Array` objects bound
    to *queue*, allocated from a :class:`pyopencl.tools.MemoryPool`."""

    def __init__(self, queue: cl.CommandQueue) -> None:
        import pyopencl.array as cla
        import pyopencl.tools as cl_tools

        self.queue = queue
        self.memory_pool = cl_tools.MemoryPool(
            cl_tools.ImmediateAllocator(queue))
        super().__init__(lambda shape, dtype: cla.empty(
            queue, shape, dtype, allocator=self.memory_pool))


_HOST_POOL = HostBufferPool()
_DEVICE_POOLS: dict[cl.CommandQueue, DeviceBufferPool] = {}
_DEVICE_POOLS_LOCK = threading.Lock()


@overload
def get_buffer_pool(np_module_or_queue: ModuleType | None) -> HostBufferPool: ...
@overload
def get_buffer_pool(np_module_or_queue: cl.CommandQueue) -> DeviceBufferPool: ...


def get_buffer_pool(np_module_or_queue: ModuleType | cl.CommandQueue | None
                    ) -> HostBufferPool | DeviceBufferPool:
    """The process-wide pool for host arrays (given the :mod:`numpy` module)
    or for device arrays on a :class:`pyopencl.CommandQueue`."""
    if np_module_or_queue is np or np_module_or_queue is None:
        return _HOST_POOL
    queue = cast("cl.CommandQueue", np_module_or_queue)  # not the module
    with _DEVICE_POOLS_LOCK:
        pool = _DEVICE_POOLS.get(queue)
        if pool is None:
            pool = _DEVICE_POOLS[queue] = DeviceBufferPool(queue)
        return pool


def clear_buffer_pools() -> None:
    """Empty the host pool and forget all device pools."""
    _HOST_POOL.clear()
    with _DEVICE_POOLS_LOCK:
        _DEVICE_POOLS.clear()


def _as_shape(shape: tuple[int, ...] | int) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)
