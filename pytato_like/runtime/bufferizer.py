"""Bufferizer: a preallocated buffer that batches appended elements.

A solver that monitors a few values per step, or a producer feeding a
consumer in batches, should not allocate (or copy to the host) per element.
A :class:`Bufferizer` owns one buffer of ``buffer_size`` elements of a fixed
shape and dtype, allocated once and zeroed, and copies appended elements
into it: one element, a list of elements, or a batch (an array whose first
axis counts elements). With a :class:`pyopencl.CommandQueue` the buffer
lives on the device and appending device arrays is a device-side copy
(:func:`pyopencl.enqueue_copy`, no host round trip); without one it is a
NumPy array.

Hooks
-----

Each hook is called with the Bufferizer as its only argument:

===========================  ==============================================
``allocate_hook``            after :meth:`~Bufferizer.allocate` (not the
                             allocation done by the constructor)
``append_one_hook``          after each :meth:`~Bufferizer.append_one`
``append_multiple_hook``     once per :meth:`~Bufferizer.append_multiple`
                             call, after all its elements are in
``buffer_full_hook``         each time an append makes the buffer full
``flush_hook``               after :meth:`~Bufferizer.flush`
===========================  ==============================================

When an append call ends with a full buffer, its append hook runs first,
then ``buffer_full_hook``. Typical full hooks consume :attr:`~Bufferizer.array`
(e.g. copy the batch to the host) and call :meth:`~Bufferizer.flush`.

Full buffers and wrap-around
----------------------------

An element arriving at a full buffer:

* with a ``buffer_full_hook``: the hook has already seen the full buffer,
  so the Bufferizer *wraps around* -- its length restarts at 0 and new
  elements overwrite old ones from the start. A batch longer than the free
  space is therefore split: fill, full hook, wrap, continue.
* without one: :class:`~pytato_like.diagnostic.BufferFullError`, raised
  before anything of that call is written (no data is dropped silently).

.. autoclass:: Bufferizer
    :members:
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyopencl as cl
    import pyopencl.array as cla

from pytato_like.diagnostic import BufferFullError, QuantityMismatchError
from pytato_like.runtime.pool import get_buffer_pool

#: a hook: called with the Bufferizer, its result ignored
Hook = Callable[["Bufferizer"], object]


class Bufferizer:
    """A buffer of *buffer_size* elements of shape *shape* and *dtype*.

    :arg queue: a :class:`pyopencl.CommandQueue` for a device buffer, or
        ``None`` for a host (NumPy) buffer.

    The five ``*_hook`` arguments are described in the module docs; each can
    also be set later with the method of the same name.
    """

    def __init__(self, shape: tuple[int, ...], buffer_size: int,
                 dtype: npt.DTypeLike,
                 queue: cl.CommandQueue | None = None, flush_hook: Hook | None = None,
                 allocate_hook: Hook | None = None,
                 append_one_hook: Hook | None = None,
                 append_multiple_hook: Hook | None = None,
                 buffer_full_hook: Hook | None = None) -> None:
        try:
            self._element_shape = tuple(int(s) for s in shape)
        except TypeError:
            raise QuantityMismatchError(
                f"Bufferizer element shape must be a tuple of ints, got {shape!r}"
            ) from None
        if int(buffer_size) <= 0:
            raise QuantityMismatchError(
                f"Bufferizer buffer_size must be positive, got {buffer_size}")
        self._buffer_size = int(buffer_size)
        self._dtype = np.dtype(dtype)
        self.queue = queue
        self._hooks: dict[str, Hook | None] = {
            "flush": flush_hook, "allocate": allocate_hook,
            "append_one": append_one_hook,
            "append_multiple": append_multiple_hook,
            "buffer_full": buffer_full_hook}
        self._length = 0
        # (Any, not np.ndarray | cla.Array: which one follows self.queue,
        # which the per-element copies test, not mypy)
        self._storage: Any = None
        self._allocate()

    # {{{ hook setters (the seed's API: one method per hook)

    def flush_hook(self, hook: Hook | None) -> None:
        """Set the hook called after :meth:`flush`."""
        self._hooks["flush"] = hook

    def allocate_hook(self, hook: Hook | None) -> None:
        """Set the hook called after :meth:`allocate`."""
        self._hooks["allocate"] = hook

    def append_one_hook(self, hook: Hook | None) -> None:
        """Set the hook called after each :meth:`append_one`."""
        self._hooks["append_one"] = hook

    def append_multiple_hook(self, hook: Hook | None) -> None:
        """Set the hook called after each :meth:`append_multiple`."""
        self._hooks["append_multiple"] = hook

    def buffer_full_hook(self, hook: Hook | None) -> None:
        """Set the hook called whenever an append fills the buffer."""
        self._hooks["buffer_full"] = hook

    def _call(self, name: str) -> None:
        hook = self._hooks[name]
        if hook is not None:
            hook(self)

    # }}}

    # {{{ storage

    def _allocate(self) -> None:
        shape = (self._buffer_size, *self._element_shape)
        if self.queue is None:
            self._storage = np.zeros(shape, self._dtype)
        else:
            import pyopencl.array as cla

            pool = get_buffer_pool(self.queue)
            self._storage = cla.zeros(self.queue, shape, self._dtype,
                                      allocator=pool.memory_pool)
        self._length = 0

    def allocate(self) -> None:
        """Allocate a new zeroed buffer (length 0) and call
        ``allocate_hook``. The old buffer is dropped; views of it stay
        valid but no longer alias the Bufferizer."""
        self._allocate()
        self._call("allocate")

    def flush(self, value: Any = 0) -> None:
        """Set every slot to *value*, restart at length 0, call
        ``flush_hook``."""
        self._storage.fill(self._dtype.type(value))
        self._length = 0
        self._call("flush")

    # }}}

    # {{{ append

    def append(self, element: Any) -> None:
        """Append one element, a list of elements, or a batch (an array of
        shape ``(n, *element_shape)``)."""
        if isinstance(element, (list, tuple)):
            self.append_multiple(element)
            return
        shape = tuple(getattr(element, "shape", np.shape(element)))
        if shape == self._element_shape:
            self.append_one(element)
        elif shape[1:] == self._element_shape and len(shape) >= 1:
            self.append_multiple(element)
        else:
            raise QuantityMismatchError(
                f"cannot append an array of shape {shape} to a Bufferizer of "
                f"elements of shape {self._element_shape} (expected that shape "
                f"or (n, *{self._element_shape}))")

    def append_one(self, element: Any) -> None:
        """Copy one element (of :attr:`element_shape` and :attr:`dtype`) to
        the end of the buffer."""
        element = self._check(element, self._element_shape, "element")
        self._make_room(1)
        self._copy_in(self._length, element, 1)
        self._length += 1
        self._call("append_one")
        if self.full:
            self._call("buffer_full")

    def append_multiple(self, elements: Any) -> None:
        """Copy a batch (array of shape ``(n, *element_shape)``) or a list of
        elements to the end of the buffer."""
        items: list[np.ndarray | cla.Array] | np.ndarray | cla.Array
        if isinstance(elements, (list, tuple)):
            items = [self._check(e, self._element_shape, f"element {i}")
                     for i, e in enumerate(elements)]
            count = len(items)
        else:
            batch_shape = tuple(getattr(elements, "shape", ()))
            if batch_shape[1:] != self._element_shape or not batch_shape:
                raise QuantityMismatchError(
                    f"a batch for elements of shape {self._element_shape} "
                    f"must have shape (n, *{self._element_shape}), got "
                    f"{batch_shape}")
            items = self._check(elements, batch_shape, "batch")
            count = batch_shape[0]
        self._make_room(count)
        done = 0
        while done < count:
            if self.full:        # only reachable with a full hook: wrap
                self._length = 0
            take = min(count - done, self._buffer_size - self._length)
            if isinstance(items, list):
                for j in range(take):
                    self._copy_in(self._length + j, items[done + j], 1)
            else:
                self._copy_in(self._length, items, take, done)
            self._length += take
            done += take
            if self.full and done < count:
                self._call("buffer_full")
        self._call("append_multiple")
        if self.full:
            self._call("buffer_full")

    def _make_room(self, count: int) -> None:
        """Wrap around (full hook present) or refuse the whole append."""
        free = self._buffer_size - self._length
        if count <= free:
            return
        if self._hooks["buffer_full"] is None:
            raise BufferFullError(
                f"Bufferizer of {self._buffer_size} elements of shape "
                f"{self._element_shape} and dtype {self._dtype} has room for "
                f"{free} more, cannot append {count}; set a buffer_full_hook "
                "or flush() it")
        if free == 0:
            self._length = 0

    def _check(self, array: object, shape: tuple[int, ...], what: str
               ) -> np.ndarray | cla.Array:
        if self.queue is not None:
            import pyopencl.array as cla
            if isinstance(array, cla.Array):
                if array.context != self.queue.context:
                    raise QuantityMismatchError(
                        f"{what} lives in another OpenCL context than the "
                        "Bufferizer")
                if not array.flags.c_contiguous:
                    raise QuantityMismatchError(
                        f"{what} of shape {array.shape} is not C-contiguous")
            elif not isinstance(array, np.ndarray):
                array = np.asarray(array)
        else:
            if not isinstance(array, np.ndarray):
                if type(array).__module__.startswith("pyopencl"):
                    raise QuantityMismatchError(
                        f"{what} is a device array; this Bufferizer is on the "
                        "host (give it a queue to keep data on the device)")
                array = np.asarray(array)   # no casting: dtypes must match
        if tuple(array.shape) != shape or array.dtype != self._dtype:
            raise QuantityMismatchError(
                f"{what} has shape {tuple(array.shape)} and dtype "
                f"{array.dtype}; this Bufferizer takes shape {shape} and "
                f"dtype {self._dtype}")
        return array

    def _copy_in(self, slot: int, source: Any, count: int, first: int = 0
                 ) -> None:
        """Copy *count* elements of *source*, starting at element *first*,
        into the buffer from *slot* on."""
        if self.queue is None:
            if count == 1 and source.shape == self._element_shape:
                self._storage[slot] = source
            else:
                self._storage[slot:slot + count] = source[first:first + count]
            return
        import pyopencl as cl
        nbytes = count * self.element_nbytes
        if not nbytes:
            return
        dst_offset = self._storage.offset + slot * self.element_nbytes
        if isinstance(source, np.ndarray):
            if source.shape != self._element_shape:
                source = source[first:first + count]
            host = np.ascontiguousarray(source)
            evt = cl.enqueue_copy(self.queue, self._storage.base_data, host,
                                  dst_offset=dst_offset,
                                  wait_for=self._storage.events or None)
        else:
            evt = cl.enqueue_copy(
                self.queue, self._storage.base_data, source.base_data,
                byte_count=nbytes,
                src_offset=source.offset + first * self.element_nbytes,
                dst_offset=dst_offset,
                wait_for=(list(self._storage.events) + list(source.events))
                or None)
        self._storage.add_event(evt)

    # }}}

    # {{{ properties

    def __len__(self) -> int:
        """Number of elements in the buffer."""
        return self._length

    @property
    def full(self) -> bool:
        """Whether every slot holds an appended element."""
        return self._length == self._buffer_size

    @property
    def array(self) -> np.ndarray | cla.Array:
        """Zero-copy view of the filled part, shape ``(len(self),
        *element_shape)``: writes through it change the buffer and vice
        versa (a :class:`numpy.ndarray` or :class:`pyopencl.array.Array`)."""
        return self._storage[:self._length]

    @property
    def allocation(self) -> np.ndarray | cla.Array:
        """The whole buffer (all :attr:`buffer_size` slots)."""
        return self._storage

    @property
    def buffer_size(self) -> int:
        """Number of slots."""
        return self._buffer_size

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the whole buffer, ``(buffer_size, *element_shape)``."""
        return (self._buffer_size, *self._element_shape)

    @property
    def element_shape(self) -> tuple[int, ...]:
        """Shape of one element."""
        return self._element_shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def element_nbytes(self) -> int:
        """Bytes of one element."""
        return int(np.prod(self._element_shape, dtype=np.int64)) \
            * self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the whole buffer."""
        return self._buffer_size * self.element_nbytes

    def __repr__(self) -> str:
        where = "host" if self.queue is None else "device"
        return (f"Bufferizer({len(self)}/{self._buffer_size} elements of shape "
                f"{self._element_shape}, {self._dtype}, {where})")

    # }}}

# vim: foldmethod=marker
