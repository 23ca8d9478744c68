"""The halo packer's contract: :class:`HaloDataTransformer` plans the
moves of an exchange (one :class:`~pytato_like.runtime.halo_spec.Move` per
segment), owns the pack and unpack buffers (from the
:mod:`~pytato_like.runtime.pool`) and checks the quantities it is given.
How the moves are carried out is the variant's business:
:mod:`~pytato_like.runtime.halo_numpy` on the host,
:mod:`~pytato_like.runtime.halo_opencl` on an OpenCL device.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast, overload

import numpy as np

from pytato_like.diagnostic import HaloSpecError, QuantityMismatchError
from pytato_like.runtime.halo_spec import (
    HaloExchangeSpec,
    Move,
    Segment,
    check_specs,
    check_vector_pairs,
    layout_segments,
    vector_components,
)
from pytato_like.runtime.pool import BufferPool, get_buffer_pool

if TYPE_CHECKING:
    import pyopencl as cl
    import pyopencl.array as cla

#: the arrays a transformer packs and its buffers: NumPy arrays (host
#: variant) or pyopencl arrays (device variant)
ArrayT = TypeVar("ArrayT", np.ndarray, "cla.Array")


class HaloDataTransformer(abc.ABC, Generic[ArrayT]):
    """Packs regions of many arrays into one buffer and unpacks a received
    buffer into regions of many arrays. It does not communicate.

    :arg np_module_or_queue: the :mod:`numpy` module (host arrays) or a
        :class:`pyopencl.CommandQueue` (device arrays).
    :arg exchange_descriptors_x: one :class:`HaloExchangeSpec` per scalar
        quantity, or per x-component of a vector quantity.
    :arg exchange_descriptors_y: for vector quantities, one spec per
        y-component (same length as the x list; each pair has the same
        dtype and rotation). ``None`` for scalar exchanges.

    Build instances through :meth:`get`. Buffers come from the
    :mod:`~pytato_like.runtime.pool` and go back on :meth:`finalize` (or
    garbage collection).
    """

    def __init__(self, np_module_or_queue: ModuleType | cl.CommandQueue,
                 exchange_descriptors_x: Sequence[HaloExchangeSpec],
                 exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
                 ) -> None:
        self._specs_x = check_specs(exchange_descriptors_x, "x")
        self._specs_y = (None if exchange_descriptors_y is None
                         else check_specs(exchange_descriptors_y, "y"))
        if self._specs_y is not None:
            check_vector_pairs(self._specs_x, self._specs_y)
        self._expected_x = [(s.specification.shape, s.specification.dtype)
                            for s in self._specs_x]
        self._expected_y = [(s.specification.shape, s.specification.dtype)
                            for s in self._specs_y or ()]
        self._pack_moves, self._pack_dtype, self._pack_len = self._plan(True)
        self._unpack_moves, self._unpack_dtype, self._unpack_len = \
            self._plan(False)
        # (the variant's pool: NumPy's for the module, the queue's for a
        # queue)
        self._pool: BufferPool[ArrayT] = cast(
            "BufferPool[ArrayT]", get_buffer_pool(np_module_or_queue))
        self._pack_buffer: ArrayT | None = None
        self._unpack_buffer: ArrayT | None = None
        self._pack_views: list[ArrayT] | None = None
        self._unpack_views: list[ArrayT] | None = None
        self._lock = threading.Lock()
        self._compile()

    @overload
    @staticmethod
    def get(np_module_or_queue: ModuleType,
            exchange_descriptors_x: Sequence[HaloExchangeSpec],
            exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
            ) -> HaloDataTransformer[np.ndarray]: ...

    @overload
    @staticmethod
    def get(np_module_or_queue: cl.CommandQueue,
            exchange_descriptors_x: Sequence[HaloExchangeSpec],
            exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
            ) -> HaloDataTransformer[cla.Array]: ...

    @staticmethod
    def get(np_module_or_queue: ModuleType | cl.CommandQueue,
            exchange_descriptors_x: Sequence[HaloExchangeSpec],
            exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
            ) -> HaloDataTransformer[np.ndarray] | HaloDataTransformer[cla.Array]:
        """A :class:`~pytato_like.runtime.halo.HaloDataTransformerNumpy`
        for the :mod:`numpy` module, a
        :class:`~pytato_like.runtime.halo.HaloDataTransformerOpenCL` for a
        :class:`pyopencl.CommandQueue`: the first registered variant whose
        :meth:`accepts` says yes (:mod:`~pytato_like.runtime.halo`
        imports and so registers both)."""
        for variant in HaloDataTransformer._variants:
            if variant.accepts(np_module_or_queue):
                return variant(np_module_or_queue, exchange_descriptors_x,
                               exchange_descriptors_y)
        raise HaloSpecError(
            "HaloDataTransformer.get needs the numpy module or a "
            f"pyopencl.CommandQueue, got {type(np_module_or_queue).__name__}")

    #: The concrete variants, in definition order: each subclass that
    #: defines :meth:`accepts` registers itself (``__init_subclass__``), so
    #: :meth:`get` picks a variant without importing the modules that
    #: import this one.
    _variants: ClassVar[list[type[HaloDataTransformer[np.ndarray]]
                             | type[HaloDataTransformer[cla.Array]]]] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "accepts" in cls.__dict__:
            HaloDataTransformer._variants.append(cls)

    @staticmethod
    def accepts(np_module_or_queue: object) -> bool:
        """Whether this variant packs the arrays of *np_module_or_queue*
        (the argument of :meth:`get`)."""
        return False

    # {{{ plan

    @property
    def is_vector(self) -> bool:
        return self._specs_y is not None

    def _plan(self, pack: bool) -> tuple[list[Move], np.dtype, int]:
        moves_src: list[tuple[int, int, HaloExchangeSpec, int, int]] = []
        for i, spec_x in enumerate(self._specs_x):
            turns = spec_x.pack_clockwise_rotation % 4 if pack else 0
            if self._specs_y is None:
                moves_src.append((0, i, spec_x, turns, 1))
                continue
            specs = (spec_x, self._specs_y[i])
            comps = vector_components(turns) if pack else ((0, 1), (1, 1))
            for src, sign in comps:
                moves_src.append((src, i, specs[src], turns, sign))
        shapes = [spec.packed_shape if pack else spec.unpack_shape
                  for _, _, spec, _, _ in moves_src]
        segments, buf_dtype, buf_len = layout_segments(
            [(shape, spec.specification.dtype)
             for shape, (_, _, spec, _, _) in zip(shapes, moves_src, strict=True)])
        moves = [Move(comp, i, spec,
                       spec.pack_slices if pack else spec.unpack_slices,
                       turns, sign, seg)
                 for (comp, i, spec, turns, sign), seg in zip(
                     moves_src, segments, strict=True)]
        return moves, buf_dtype, buf_len

    @property
    def pack_layout(self) -> list[Segment]:
        """Segments of the pack buffer, in buffer order."""
        return [m.segment for m in self._pack_moves]

    @property
    def unpack_layout(self) -> list[Segment]:
        """Segments of the unpack buffer, in buffer order."""
        return [m.segment for m in self._unpack_moves]

    # }}}

    # {{{ buffers

    def _acquire(self) -> None:
        with self._lock:
            if self._pack_buffer is None:
                self._pack_buffer = self._pool.get(self._pack_len,
                                                   self._pack_dtype)
                self._pack_views = None
            if self._unpack_buffer is None:
                self._unpack_buffer = self._pool.get(self._unpack_len,
                                                     self._unpack_dtype)
                self._unpack_views = None

    def _views(self, pack: bool) -> list[ArrayT]:
        """Per-segment views of a buffer, made once per buffer."""
        if pack:
            if self._pack_views is None or self._pack_buffer is None:
                buf = self._pack_buf
                self._pack_views = [self._segment_view(buf, m.segment)
                                    for m in self._pack_moves]
            return self._pack_views
        if self._unpack_views is None or self._unpack_buffer is None:
            buf = self._unpack_buf
            self._unpack_views = [self._segment_view(buf, m.segment)
                                  for m in self._unpack_moves]
        return self._unpack_views

    @property
    def _pack_buf(self) -> ArrayT:
        if self._pack_buffer is None:
            self._acquire()
        return self._pack_buffer  # type: ignore[return-value]  # _acquire set it

    @property
    def _unpack_buf(self) -> ArrayT:
        if self._unpack_buffer is None:
            self._acquire()
        return self._unpack_buffer  # type: ignore[return-value]  # _acquire set it

    def get_pack_buffer(self) -> ArrayT:
        """The pack buffer (1-d, contiguous), after :meth:`synchronize`."""
        self.synchronize()
        return self._pack_buf

    def get_unpack_buffer(self) -> ArrayT:
        """The unpack buffer (1-d, contiguous; receive into it), after
        :meth:`synchronize`."""
        self.synchronize()
        return self._unpack_buf

    def unpacked_views(self) -> list[ArrayT]:
        """Zero-copy views of the unpack buffer, one per segment, shaped
        like the unpack regions (in :attr:`unpack_layout` order). A receiver
        of whole arrays can use these instead of unpacking."""
        self.synchronize()
        return list(self._views(False))

    @staticmethod
    def _segment_view(buffer: ArrayT, seg: Segment) -> ArrayT:
        itemsize = buffer.dtype.itemsize
        if buffer.dtype == seg.dtype:
            start = seg.offset // itemsize
            return buffer[start:start + seg.size].reshape(seg.shape)
        raw = buffer[seg.offset:seg.offset + seg.nbytes]
        return raw.view(seg.dtype).reshape(seg.shape)

    def finalize(self) -> None:
        """Wait for pending work and return both buffers to the pool.
        Safe to call twice; a later pack or unpack takes new buffers."""
        self.synchronize()
        with self._lock:
            for buf in (self._pack_buffer, self._unpack_buffer):
                if buf is not None:
                    self._pool.put(buf)
            self._pack_buffer = self._unpack_buffer = None
            self._pack_views = self._unpack_views = None

    def __del__(self) -> None:
        try:
            self.finalize()
        except Exception:  # noqa: BLE001 -- interpreter shutdown, queue gone
            pass

    # }}}

    # {{{ checks

    def _check_quantities(self, quantities_x: Sequence[ArrayT],
                          quantities_y: Sequence[ArrayT] | None, what: str
                          ) -> tuple[Sequence[ArrayT], ...]:
        if (quantities_y is None) != (self._specs_y is None):
            kind = "vector" if self.is_vector else "scalar"
            raise QuantityMismatchError(
                f"{what}: this transformer was built for {kind} quantities; "
                + ("quantities_y is missing" if quantities_y is None
                   else "quantities_y was given"))
        if self._quantities_match(quantities_x, quantities_y):
            return ((quantities_x,) if quantities_y is None
                    else (quantities_x, quantities_y))
        # slow path: find what is wrong and say so
        groups = [(quantities_x, self._specs_x, "x")]
        if quantities_y is not None:
            # (the y specs exist: checked above)
            groups.append((quantities_y,
                           cast("tuple[HaloExchangeSpec, ...]", self._specs_y),
                           "y"))
        for quantities, specs, comp in groups:
            quantities = list(quantities)
            if len(quantities) != len(specs):
                raise QuantityMismatchError(
                    f"{what}: got {len(quantities)} {comp}-quantities, the "
                    f"transformer was built for {len(specs)}")
            for i, (q, spec) in enumerate(zip(quantities, specs, strict=True)):
                self._check_array_kind(q, f"{what}: {comp}-quantity {i}")
                qs = spec.specification
                if tuple(q.shape) != qs.shape or q.dtype != qs.dtype:
                    raise QuantityMismatchError(
                        f"{what}: {comp}-quantity {i} has shape "
                        f"{tuple(q.shape)} and dtype {q.dtype}; its spec says "
                        f"shape {qs.shape} and dtype {qs.dtype}")
        return (quantities_x,) if quantities_y is None else (quantities_x,
                                                             quantities_y)

    def _quantities_match(self, quantities_x: Sequence[ArrayT],
                          quantities_y: Sequence[ArrayT] | None) -> bool:
        """Fast check (this runs every exchange): right count, array type,
        shape and dtype."""
        array_type = self._array_type
        for quantities, expected in ((quantities_x, self._expected_x),
                                     (quantities_y, self._expected_y)):
            if quantities is None:
                continue
            if len(quantities) != len(expected):
                return False
            for q, (shape, dtype) in zip(quantities, expected, strict=True):
                if (type(q) is not array_type or q.shape != shape
                        or (q.dtype is not dtype and q.dtype != dtype)):
                    return False
        return True

    #: The array class this variant packs (exact type for the fast check).
    _array_type: type[object] = type(None)

    @abc.abstractmethod
    def _check_array_kind(self, array: object, where: str) -> None:
        """Raise QuantityMismatchError if *array* is not the kind of array
        this variant works on."""

    # }}}

    @abc.abstractmethod
    def _compile(self) -> None:
        """Prepare whatever the variant needs to pack and unpack."""

    @abc.abstractmethod
    def async_pack(self, quantities_x: Sequence[ArrayT],
                   quantities_y: Sequence[ArrayT] | None = None) -> None:
        """Start packing the pack regions of the quantities (all of them,
        rotated and signed) into the pack buffer. The buffer is complete
        after :meth:`synchronize` (which :meth:`get_pack_buffer` calls)."""

    @abc.abstractmethod
    def async_unpack(self, quantities_x: Sequence[ArrayT],
                     quantities_y: Sequence[ArrayT] | None = None) -> None:
        """Start scattering the unpack buffer into the unpack regions of the
        quantities. They are updated after :meth:`synchronize`."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until every pack and unpack started so far is done."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether every pack and unpack started so far is done (never
        blocks)."""
