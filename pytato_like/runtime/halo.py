"""Halo packing: many n-d slices of many arrays into ONE contiguous buffer.

A communication step rarely sends one whole array: it sends the edges
(halos) of several fields to a neighbour, sometimes in a rotated frame (on a
cubed sphere the neighbouring tile's axes are turned by a multiple of 90
degrees). Sending each slice as its own message costs one latency per slice;
this module packs all of them into one buffer, so an exchange is one
message.

* :class:`QuantityHaloSpec` -- the memory layout of one quantity (shape,
  dtype, names of its dimensions, halo width);
* :class:`HaloExchangeSpec` -- what one exchange does with one quantity:
  the region to pack, the number of clockwise quarter turns applied before
  packing, and the region to unpack into;
* :class:`HaloDataTransformer` -- the packer/unpacker. :meth:`~HaloDataTransformer.get`
  returns a NumPy variant (given the :mod:`numpy` module) or an OpenCL
  variant (given a :class:`pyopencl.CommandQueue`, with one generated pack
  kernel and one unpack kernel per exchange, enqueued asynchronously).

Order of use::

    t = HaloDataTransformer.get(np_or_queue, specs_x, specs_y)
    t.async_pack(qx, qy)           # gather regions into the pack buffer
    send(t.get_pack_buffer())      # synchronizes, then communicate
    recv(t.get_unpack_buffer())    # receive into the unpack buffer
    t.async_unpack(qx, qy)         # scatter into the destination regions
    t.synchronize()                # destination arrays are now up to date
    t.finalize()                   # buffers go back to the pool

Rotation convention
-------------------

Axis names starting with ``x`` / ``y`` mark the horizontal axes (default
dims: axis 0 is ``x``, axis 1 is ``y``). Picture ``x`` pointing right and
``y`` pointing up. *One clockwise quarter turn* of a scalar field moves the
value at ``(x, y)`` to ``(y, -x)``; in index terms, for an array ``a`` with
``x`` on axis ``ix`` and ``y`` on axis ``iy`` it is
``numpy.rot90(a, 1, axes=(iy, ix))`` (two turns reverse both horizontal
axes). A vector field turns as a whole: positions move as above *and* the
components are turned, so the packed pair is

==========  ===================  ==================
turns       packed x-component   packed y-component
==========  ===================  ==================
0           ``x``                ``y``
1           ``y``                ``-x``
2           ``-x``               ``-y``
3           ``-y``               ``x``
==========  ===================  ==================

where ``x``/``y`` are the rotated slices of the x/y-component arrays (an
east-pointing vector ``(1, 0)`` turned clockwise points south, ``(0, -1)``).
:attr:`HaloExchangeSpec.pack_clockwise_rotation` turns are applied *before
packing*; unpacking never rotates, so the receiver's unpack region has the
rotated shape.

Buffer layout
-------------

Segments follow the order of the descriptors (for vectors: x then y of the
first pair, then of the second pair, ...), each one C-ordered. If every
quantity has the same dtype the buffer has that dtype and segments are
adjacent; otherwise the buffer is ``uint8`` and every segment starts at a
multiple of 16 bytes. Both sides of an exchange compute the layout from the
same (shape, dtype) list, so they agree without sending it.
:attr:`~HaloDataTransformer.pack_layout` and
:attr:`~HaloDataTransformer.unpack_layout` show it.

.. autoclass:: QuantityHaloSpec
.. autoclass:: HaloExchangeSpec
    :members: whole_array, pack_shape, packed_shape, unpack_shape
.. autoclass:: Segment
.. autoclass:: HaloDataTransformer
    :members:
.. autoclass:: HaloDataTransformerNumpy
.. autoclass:: HaloDataTransformerOpenCL
.. autofunction:: rotate_scalar_data
.. autofunction:: rotate_vector_data
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from pytato_like.diagnostic import HaloSpecError, QuantityMismatchError
from pytato_like.runtime.pool import BufferPool, get_buffer_pool

#: Byte alignment of each segment in a mixed-dtype buffer (enough for any
#: NumPy scalar, including complex128, so device pointers cast cleanly).
SEGMENT_ALIGNMENT = 16


# {{{ specs

def default_dims(ndim: int) -> tuple[str, ...]:
    """``("x", "y", "z", "d3", ...)`` cut to *ndim* axes."""
    return ("x", "y", "z", *(f"d{i}" for i in range(3, ndim)))[:ndim]


@dataclasses.dataclass(frozen=True)
class QuantityHaloSpec:
    """Memory layout of one quantity taking part in an exchange.

    :arg shape: shape of the whole array (halo included).
    :arg dtype: its dtype.
    :arg dims: one name per axis; a name starting with ``x`` or ``y`` marks
        a horizontal axis (at most one of each), which is what rotations
        turn. Defaults to :func:`default_dims`.
    :arg n_halo: halo width (informational; the slices say what moves).
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    dims: tuple[str, ...] | None = None
    n_halo: int = 0

    def __post_init__(self) -> None:
        try:
            shape = tuple(int(s) for s in self.shape)
        except TypeError:
            raise HaloSpecError(
                f"quantity shape must be a tuple of ints, got {self.shape!r}"
            ) from None
        if any(s < 0 for s in shape):
            raise HaloSpecError(f"negative extent in quantity shape {shape}")
        dims = default_dims(len(shape)) if self.dims is None else tuple(self.dims)
        if len(dims) != len(shape):
            raise HaloSpecError(
                f"quantity of shape {shape} needs {len(shape)} dims, "
                f"got {dims}")
        for prefix in "xy":
            if sum(d.startswith(prefix) for d in dims) > 1:
                raise HaloSpecError(
                    f"dims {dims} name more than one '{prefix}' axis")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        object.__setattr__(self, "dims", dims)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @functools.cached_property
    def x_axis(self) -> int | None:
        """Index of the ``x`` axis, if any."""
        return next((i for i, d in enumerate(self.dims) if d.startswith("x")),
                    None)

    @functools.cached_property
    def y_axis(self) -> int | None:
        """Index of the ``y`` axis, if any."""
        return next((i for i, d in enumerate(self.dims) if d.startswith("y")),
                    None)


@dataclasses.dataclass(frozen=True)
class HaloExchangeSpec:
    """What one exchange does with one quantity.

    :arg specification: the quantity's :class:`QuantityHaloSpec` (a
        ``(shape, dtype)`` tuple is accepted as shorthand).
    :arg pack_slices: region to pack, one :class:`slice` per axis.
    :arg pack_clockwise_rotation: quarter turns (clockwise, see the module
        docs) applied to the region before packing; any integer, used
        modulo 4.
    :arg unpack_slices: region to unpack into, one :class:`slice` per axis.

    Slices use Python semantics (negative bounds count from the end, steps
    must be positive) but must lie inside the array: a bound past the end
    raises :class:`~pytato_like.diagnostic.HaloSpecError` instead of being
    clipped. They are stored normalized (explicit start, stop, step).
    """

    specification: QuantityHaloSpec
    pack_slices: tuple[slice, ...]
    pack_clockwise_rotation: int
    unpack_slices: tuple[slice, ...]

    def __post_init__(self) -> None:
        spec = self.specification
        if isinstance(spec, tuple):
            spec = QuantityHaloSpec(*spec)
        if not isinstance(spec, QuantityHaloSpec):
            raise HaloSpecError("specification must be a QuantityHaloSpec, "
                                f"got {type(spec).__name__}")
        object.__setattr__(self, "specification", spec)
        object.__setattr__(self, "pack_slices", _normalize_slices(
            self.pack_slices, spec.shape, "pack_slices"))
        object.__setattr__(self, "unpack_slices", _normalize_slices(
            self.unpack_slices, spec.shape, "unpack_slices"))
        try:
            turns = int(self.pack_clockwise_rotation)
        except (TypeError, ValueError):
            raise HaloSpecError("pack_clockwise_rotation must be an int, got "
                                f"{self.pack_clockwise_rotation!r}") from None
        object.__setattr__(self, "pack_clockwise_rotation", turns)
        if turns % 2 and (spec.x_axis is None or spec.y_axis is None):
            raise HaloSpecError(
                f"a quarter turn ({turns} clockwise) needs both an 'x' and a "
                f"'y' axis; quantity of shape {spec.shape} has dims {spec.dims}")

    @classmethod
    def whole_array(cls, shape: tuple[int, ...], dtype: Any,
                    dims: tuple[str, ...] | None = None) -> HaloExchangeSpec:
        """Pack and unpack the whole array, unrotated: the spec for sending
        an entire array inside a packed message."""
        full = tuple(slice(None) for _ in shape)
        return cls(QuantityHaloSpec(shape, dtype, dims), full, 0, full)

    @property
    def pack_shape(self) -> tuple[int, ...]:
        """Shape of the packed region before rotation."""
        return _slices_shape(self.pack_slices)

    @property
    def packed_shape(self) -> tuple[int, ...]:
        """Shape of the packed region as laid out in the buffer (rotated)."""
        shape = self.pack_shape
        if self.pack_clockwise_rotation % 2:
            ix, iy = self.specification.x_axis, self.specification.y_axis
            shape = list(shape)
            shape[ix], shape[iy] = shape[iy], shape[ix]
            shape = tuple(shape)
        return shape

    @property
    def unpack_shape(self) -> tuple[int, ...]:
        """Shape of the region unpacked into."""
        return _slices_shape(self.unpack_slices)


def _normalize_slices(slices: Any, shape: tuple[int, ...], what: str
                      ) -> tuple[slice, ...]:
    if isinstance(slices, slice):
        slices = (slices,)
    try:
        slices = tuple(slices)
    except TypeError:
        raise HaloSpecError(f"{what} must be a tuple of slices, one per axis "
                            f"of shape {shape}; got {slices!r}") from None
    if len(slices) != len(shape):
        raise HaloSpecError(f"{what} has {len(slices)} slices for a quantity "
                            f"of shape {shape} ({len(shape)} axes)")
    result = []
    for axis, (sl, n) in enumerate(zip(slices, shape)):
        if not isinstance(sl, slice):
            raise HaloSpecError(f"{what}[{axis}] must be a slice, got {sl!r}")
        step = 1 if sl.step is None else sl.step
        if not isinstance(step, (int, np.integer)) or step <= 0:
            raise HaloSpecError(f"{what}[{axis}] = {sl}: step must be a "
                                "positive int")
        bounds = []
        for bound, default in ((sl.start, 0), (sl.stop, n)):
            if bound is None:
                bounds.append(default)
                continue
            if not isinstance(bound, (int, np.integer)):
                raise HaloSpecError(f"{what}[{axis}] = {sl}: bounds must be "
                                    "ints or None")
            if not -n <= bound <= n:
                raise HaloSpecError(
                    f"{what}[{axis}] = {sl} does not fit axis {axis} of "
                    f"extent {n} (quantity shape {shape})")
            bounds.append(int(bound) + n if bound < 0 else int(bound))
        start, stop = bounds
        if stop < start:
            raise HaloSpecError(f"{what}[{axis}] = {sl} ends before it starts "
                                f"on axis {axis} of extent {n}")
        result.append(slice(start, stop, int(step)))
    return tuple(result)


def _slices_shape(slices: tuple[slice, ...]) -> tuple[int, ...]:
    return tuple(len(range(s.start, s.stop, s.step)) for s in slices)


def _reversed_slice(sl: slice) -> slice:
    """The same elements as normalized slice *sl*, in reverse order."""
    r = range(sl.start, sl.stop, sl.step)
    if not r:
        return sl
    stop = r[0] - 1
    return slice(r[-1], None if stop < 0 else stop, -sl.step)

# }}}


# {{{ rotation

def rotate_scalar_data(data: Any, n_clockwise_rotations: int,
                       x_axis: int | None = 0, y_axis: int | None = 1) -> Any:
    """*data* turned by *n_clockwise_rotations* clockwise quarter turns in
    its (x, y) plane (a view, not a copy). Two turns need only the axes
    that exist; odd turns need both."""
    k = n_clockwise_rotations % 4
    if k == 0:
        return data
    if k == 2:
        index = [slice(None)] * data.ndim
        for axis in (x_axis, y_axis):
            if axis is not None:
                index[axis] = slice(None, None, -1)
        return data[tuple(index)]
    if x_axis is None or y_axis is None:
        raise HaloSpecError("an odd number of quarter turns needs both an x "
                            f"and a y axis (got x={x_axis}, y={y_axis})")
    return np.rot90(data, k, axes=(y_axis, x_axis))


def _vector_components(n_clockwise_rotations: int
                       ) -> tuple[tuple[int, int], tuple[int, int]]:
    """For each packed component: (0 for x / 1 for y source, sign)."""
    return {0: ((0, 1), (1, 1)),
            1: ((1, 1), (0, -1)),
            2: ((0, -1), (1, -1)),
            3: ((1, -1), (0, 1))}[n_clockwise_rotations % 4]


def rotate_vector_data(x_data: Any, y_data: Any, n_clockwise_rotations: int,
                       x_axis: int | None = 0, y_axis: int | None = 1
                       ) -> tuple[Any, Any]:
    """The (x, y) components of a vector field turned clockwise
    *n_clockwise_rotations* times (see the table in the module docs)."""
    turned = (rotate_scalar_data(x_data, n_clockwise_rotations, x_axis, y_axis),
              rotate_scalar_data(y_data, n_clockwise_rotations, x_axis, y_axis))
    return tuple(turned[src] if sign > 0 else -turned[src]
                 for src, sign in _vector_components(n_clockwise_rotations))

# }}}


# {{{ layout

@dataclasses.dataclass(frozen=True)
class Segment:
    """One quantity's place in a buffer: byte offset, shape (C order) and
    dtype of the data stored there."""

    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @functools.cached_property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @functools.cached_property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def _layout(entries: Sequence[tuple[tuple[int, ...], np.dtype]]
            ) -> tuple[list[Segment], np.dtype, int]:
    """Segments, buffer dtype and buffer length (in buffer elements)."""
    dtypes = {dtype for _, dtype in entries}
    if len(dtypes) == 1:
        (buf_dtype,) = dtypes
        align = buf_dtype.itemsize
    else:
        buf_dtype = np.dtype(np.uint8)
        align = SEGMENT_ALIGNMENT
    segments, offset = [], 0
    for shape, dtype in entries:
        offset = -(-offset // align) * align
        seg = Segment(offset, tuple(shape), dtype)
        segments.append(seg)
        offset += seg.nbytes
    return segments, buf_dtype, offset // buf_dtype.itemsize


@dataclasses.dataclass(frozen=True)
class _Move:
    """One segment of a pack or unpack: which quantity (component 0 = x,
    1 = y; index in its list), which region, how it is turned and signed."""

    component: int
    index: int
    spec: HaloExchangeSpec
    slices: tuple[slice, ...]
    turns: int
    sign: int
    segment: Segment

    @functools.cached_property
    def _turned_index(self) -> tuple[tuple[slice, ...], tuple[int, ...] | None]:
        """The turn as one basic index (reversed axes are reversed slices)
        and an optional axis permutation: equal to rotate_scalar_data of
        the region, but two cheap C calls instead of np.rot90's Python."""
        q = self.spec.specification
        ix, iy = q.x_axis, q.y_axis
        k = self.turns % 4
        # rot90(m, k, axes=(iy, ix)): k=1 reverses x then swaps x and y,
        # k=2 reverses both, k=3 reverses y then swaps.
        reverse = {0: (), 1: (ix,), 2: (ix, iy), 3: (iy,)}[k]
        index = tuple(_reversed_slice(sl) if axis in reverse else sl
                      for axis, sl in enumerate(self.slices))
        if k % 2 == 0:
            return index, None
        perm = list(range(len(self.slices)))
        perm[ix], perm[iy] = iy, ix
        return index, tuple(perm)

    @functools.cached_property
    def strided_geometry(self) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """``(base, shape, strides)`` in elements of the quantity's C layout
        such that buffer element ``c`` (a C-order coordinate over *shape*)
        comes from element ``base + sum(c * strides)``. Axes that are
        contiguous with their inner neighbour are merged and extent-1 axes
        dropped, so a whole-array copy is a single linear index."""
        qshape = self.spec.specification.shape
        cstrides = [1] * len(qshape)
        for axis in range(len(qshape) - 2, -1, -1):
            cstrides[axis] = cstrides[axis + 1] * qshape[axis + 1]
        index, perm = self._turned_index
        base = sum(sl.start * st for sl, st in zip(index, cstrides))
        extents = [len(range(sl.start, -1 if sl.stop is None else sl.stop,
                             sl.step)) for sl in index]
        strides = [sl.step * st for sl, st in zip(index, cstrides)]
        order = range(len(index)) if perm is None else perm
        shape = [extents[a] for a in order]
        strides = [strides[a] for a in order]
        merged_shape: list[int] = []
        merged_strides: list[int] = []
        for n, st in zip(reversed(shape), reversed(strides)):
            if n == 1:
                continue
            if merged_shape and merged_strides[0] * merged_shape[0] == st:
                merged_shape[0] *= n
                continue
            merged_shape.insert(0, n)
            merged_strides.insert(0, st)
        return int(base), tuple(merged_shape), tuple(merged_strides)

# }}}


# {{{ transformer

class HaloDataTransformer(abc.ABC):
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

    def __init__(self, np_module_or_queue: ModuleType | Any,
                 exchange_descriptors_x: Sequence[HaloExchangeSpec],
                 exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
                 ) -> None:
        self._specs_x = _check_specs(exchange_descriptors_x, "x")
        self._specs_y = (None if exchange_descriptors_y is None
                         else _check_specs(exchange_descriptors_y, "y"))
        if self._specs_y is not None:
            _check_vector_pairs(self._specs_x, self._specs_y)
        self._expected_x = [(s.specification.shape, s.specification.dtype)
                            for s in self._specs_x]
        self._expected_y = [(s.specification.shape, s.specification.dtype)
                            for s in self._specs_y or ()]
        self._pack_moves, self._pack_dtype, self._pack_len = self._plan(True)
        self._unpack_moves, self._unpack_dtype, self._unpack_len = \
            self._plan(False)
        self._pool: BufferPool = get_buffer_pool(np_module_or_queue)
        self._pack_buffer: Any = None
        self._unpack_buffer: Any = None
        self._pack_views: list[Any] | None = None
        self._unpack_views: list[Any] | None = None
        self._lock = threading.Lock()
        self._compile()

    @staticmethod
    def get(np_module_or_queue: ModuleType | Any,
            exchange_descriptors_x: Sequence[HaloExchangeSpec],
            exchange_descriptors_y: Sequence[HaloExchangeSpec] | None = None
            ) -> HaloDataTransformer:
        """A :class:`HaloDataTransformerNumpy` for the :mod:`numpy` module,
        a :class:`HaloDataTransformerOpenCL` for a
        :class:`pyopencl.CommandQueue`."""
        if np_module_or_queue is np:
            return HaloDataTransformerNumpy(
                np, exchange_descriptors_x, exchange_descriptors_y)
        if type(np_module_or_queue).__name__ == "CommandQueue":
            return HaloDataTransformerOpenCL(
                np_module_or_queue, exchange_descriptors_x,
                exchange_descriptors_y)
        raise HaloSpecError(
            "HaloDataTransformer.get needs the numpy module or a "
            f"pyopencl.CommandQueue, got {type(np_module_or_queue).__name__}")

    # {{{ plan

    @property
    def is_vector(self) -> bool:
        return self._specs_y is not None

    def _plan(self, pack: bool) -> tuple[list[_Move], np.dtype, int]:
        moves_src: list[tuple[int, int, HaloExchangeSpec, int, int]] = []
        for i, spec_x in enumerate(self._specs_x):
            turns = spec_x.pack_clockwise_rotation % 4 if pack else 0
            if self._specs_y is None:
                moves_src.append((0, i, spec_x, turns, 1))
                continue
            specs = (spec_x, self._specs_y[i])
            comps = _vector_components(turns) if pack else ((0, 1), (1, 1))
            for src, sign in comps:
                moves_src.append((src, i, specs[src], turns, sign))
        shapes = [spec.packed_shape if pack else spec.unpack_shape
                  for _, _, spec, _, _ in moves_src]
        segments, buf_dtype, buf_len = _layout(
            [(shape, spec.specification.dtype)
             for shape, (_, _, spec, _, _) in zip(shapes, moves_src)])
        moves = [_Move(comp, i, spec,
                       spec.pack_slices if pack else spec.unpack_slices,
                       turns, sign, seg)
                 for (comp, i, spec, turns, sign), seg in zip(moves_src, segments)]
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

    def _views(self, pack: bool) -> list[Any]:
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
    def _pack_buf(self) -> Any:
        if self._pack_buffer is None:
            self._acquire()
        return self._pack_buffer

    @property
    def _unpack_buf(self) -> Any:
        if self._unpack_buffer is None:
            self._acquire()
        return self._unpack_buffer

    def get_pack_buffer(self) -> Any:
        """The pack buffer (1-d, contiguous), after :meth:`synchronize`."""
        self.synchronize()
        return self._pack_buf

    def get_unpack_buffer(self) -> Any:
        """The unpack buffer (1-d, contiguous; receive into it), after
        :meth:`synchronize`."""
        self.synchronize()
        return self._unpack_buf

    def unpacked_views(self) -> list[Any]:
        """Zero-copy views of the unpack buffer, one per segment, shaped
        like the unpack regions (in :attr:`unpack_layout` order). A receiver
        of whole arrays can use these instead of unpacking."""
        self.synchronize()
        return list(self._views(False))

    @staticmethod
    def _segment_view(buffer: Any, seg: Segment) -> Any:
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

    def _check_quantities(self, quantities_x: Sequence[Any],
                          quantities_y: Sequence[Any] | None, what: str
                          ) -> tuple[Sequence[Any], ...]:
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
            groups.append((quantities_y, self._specs_y, "y"))
        for quantities, specs, comp in groups:
            quantities = list(quantities)
            if len(quantities) != len(specs):
                raise QuantityMismatchError(
                    f"{what}: got {len(quantities)} {comp}-quantities, the "
                    f"transformer was built for {len(specs)}")
            for i, (q, spec) in enumerate(zip(quantities, specs)):
                self._check_array_kind(q, f"{what}: {comp}-quantity {i}")
                qs = spec.specification
                if tuple(q.shape) != qs.shape or q.dtype != qs.dtype:
                    raise QuantityMismatchError(
                        f"{what}: {comp}-quantity {i} has shape "
                        f"{tuple(q.shape)} and dtype {q.dtype}; its spec says "
                        f"shape {qs.shape} and dtype {qs.dtype}")
        return (quantities_x,) if quantities_y is None else (quantities_x,
                                                             quantities_y)

    def _quantities_match(self, quantities_x: Sequence[Any],
                          quantities_y: Sequence[Any] | None) -> bool:
        """Fast check (this runs every exchange): right count, array type,
        shape and dtype."""
        array_type = self._array_type
        for quantities, expected in ((quantities_x, self._expected_x),
                                     (quantities_y, self._expected_y)):
            if quantities is None:
                continue
            if len(quantities) != len(expected):
                return False
            for q, (shape, dtype) in zip(quantities, expected):
                if (type(q) is not array_type or q.shape != shape
                        or (q.dtype is not dtype and q.dtype != dtype)):
                    return False
        return True

    #: The array class this variant packs (exact type for the fast check).
    _array_type: type = type(None)

    @abc.abstractmethod
    def _check_array_kind(self, array: Any, where: str) -> None:
        """Raise QuantityMismatchError if *array* is not the kind of array
        this variant works on."""

    # }}}

    @abc.abstractmethod
    def _compile(self) -> None:
        """Prepare whatever the variant needs to pack and unpack."""

    @abc.abstractmethod
    def async_pack(self, quantities_x: Sequence[Any],
                   quantities_y: Sequence[Any] | None = None) -> None:
        """Start packing the pack regions of the quantities (all of them,
        rotated and signed) into the pack buffer. The buffer is complete
        after :meth:`synchronize` (which :meth:`get_pack_buffer` calls)."""

    @abc.abstractmethod
    def async_unpack(self, quantities_x: Sequence[Any],
                     quantities_y: Sequence[Any] | None = None) -> None:
        """Start scattering the unpack buffer into the unpack regions of the
        quantities. They are updated after :meth:`synchronize`."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until every pack and unpack started so far is done."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether every pack and unpack started so far is done (never
        blocks)."""


class HaloDataTransformerNumpy(HaloDataTransformer):
    """Host variant: each turned region is a view (one basic index with
    reversed slices, one transpose -- what :func:`numpy.rot90` does) copied
    straight into its segment of the buffer, no temporaries. Work is done
    when :meth:`async_pack` / :meth:`async_unpack` return."""

    _array_type = np.ndarray

    def _compile(self) -> None:
        # (component, index, basic index, axis permutation, negate) per
        # segment, so a pack is one index, one transpose, one copy each.
        self._pack_program = [(m.component, m.index, *m._turned_index,
                               m.sign < 0) for m in self._pack_moves]
        self._unpack_program = [(m.component, m.index, m.slices)
                                for m in self._unpack_moves]

    def _check_array_kind(self, array: Any, where: str) -> None:
        if not isinstance(array, np.ndarray):
            raise QuantityMismatchError(
                f"{where} is a {type(array).__name__}; the NumPy transformer "
                "packs numpy.ndarray")

    def async_pack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "pack")
        for (comp, i, index, perm, negate), dst in zip(self._pack_program,
                                                       self._views(True)):
            view = groups[comp][i][index]
            if perm is not None:
                view = view.transpose(perm)
            if negate:
                np.negative(view, out=dst)
            else:
                dst[...] = view

    def async_unpack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "unpack")
        for (comp, i, slices), src in zip(self._unpack_program,
                                          self._views(False)):
            groups[comp][i][slices] = src

    def synchronize(self) -> None:
        pass

    def ready(self) -> bool:
        return True


class HaloDataTransformerOpenCL(HaloDataTransformer):
    """Device variant: one generated OpenCL kernel packs every segment of
    the exchange, one scatters them back. Each segment gets whole
    work-groups (so the branch choosing the segment is uniform within a
    group), and each work item copies a piece of one row with compile-time
    strides. Kernels are enqueued
    on the queue without blocking; they wait for the events of the arrays
    they read and the events they produce are attached to the arrays they
    write, so later pyopencl operations order correctly."""

    def __init__(self, queue: Any, exchange_descriptors_x, exchange_descriptors_y=None):
        self.queue = queue
        self._events: list[Any] = []
        super().__init__(queue, exchange_descriptors_x, exchange_descriptors_y)

    def _check_array_kind(self, array: Any, where: str) -> None:
        import pyopencl.array as cla
        if not isinstance(array, cla.Array):
            raise QuantityMismatchError(
                f"{where} is a {type(array).__name__}; the OpenCL transformer "
                "packs pyopencl.array.Array")
        if not array.flags.c_contiguous:
            raise QuantityMismatchError(
                f"{where} of shape {array.shape} is not C-contiguous")
        if array.context != self.queue.context:
            raise QuantityMismatchError(
                f"{where} lives in another OpenCL context than the "
                "transformer's queue")

    def _compile(self) -> None:
        self._kernels: dict[str, Any] = {}
        self.kernel_sources: dict[str, str] = {}
        group_size = min(_WORK_GROUP_SIZE, self.queue.device.max_work_group_size)
        for name, moves in (("pack", self._pack_moves),
                            ("unpack", self._unpack_moves)):
            moves = [m for m in moves if m.segment.size]
            # Kernel arguments are limited (1 KiB on many devices, 16 bytes
            # per quantity): an exchange of many quantities gets several
            # kernels, each for a batch of segments.
            per_kernel = max(1, (self.queue.device.max_parameter_size - 64)
                             // 16)
            self._kernels[name] = []
            sources = []
            for first in range(0, len(moves), per_kernel):
                batch = moves[first:first + per_kernel]
                source, n_groups = _kernel_source(name, batch, group_size)
                kernel = _build_kernel(self.queue.context, source, name)
                self._kernels[name].append(
                    (kernel, n_groups * group_size, group_size,
                     [(m.component, m.index) for m in batch]))
                sources.append(source)
            # Kept for readers (and tests) to inspect.
            self.kernel_sources[name] = "\n\n".join(sources) or None

    def _launch(self, name: str, buffer: Any, groups: tuple, writes_buffer: bool
                ) -> None:
        buffer_events = list(buffer.events)
        for kernel, global_size, group_size, used in self._kernels[name]:
            quantities = [groups[comp][i] for comp, i in used]
            args = [buffer.base_data, np.int64(buffer.offset)]
            wait_for = list(buffer_events)
            for q in quantities:
                args += [q.base_data, np.int64(q.offset // q.dtype.itemsize)]
                wait_for += q.events
            evt = kernel(self.queue, (global_size,), (group_size,), *args,
                         wait_for=wait_for or None)
            self._events.append(evt)
            if writes_buffer:
                buffer.add_event(evt)
            else:
                for q in quantities:
                    q.add_event(evt)

    def async_pack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "pack")
        self._launch("pack", self._pack_buf, groups, True)

    def async_unpack(self, quantities_x, quantities_y=None) -> None:
        groups = self._check_quantities(quantities_x, quantities_y, "unpack")
        self._launch("unpack", self._unpack_buf, groups, False)

    def synchronize(self) -> None:
        if self._events:
            import pyopencl as cl
            cl.wait_for_events(self._events)
            self._events.clear()

    def ready(self) -> bool:
        import pyopencl as cl
        complete = cl.command_execution_status.COMPLETE
        return all(e.command_execution_status == complete for e in self._events)

# }}}


# {{{ OpenCL code generation

#: Integer/float C types moving raw bytes, by itemsize (copies need no
#: arithmetic, so every dtype of that size travels as the same bits).
_COPY_CTYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}
#: C types that can be negated (for rotated vector components).
_SIGNED_CTYPES = {"float32": "float", "float64": "double", "int8": "char",
                  "int16": "short", "int32": "int", "int64": "long",
                  "complex64": "float2", "complex128": "double2"}

#: Work items per group; each segment is padded to whole groups.
_WORK_GROUP_SIZE = 64
#: Elements copied by one work item (a piece of one row).
_CHUNK = 64

_KERNEL_CACHE: dict[tuple[Any, str], Any] = {}
_KERNEL_CACHE_LOCK = threading.Lock()


def _ctype(dtype: np.dtype, negate: bool) -> str:
    if negate:
        if dtype.name not in _SIGNED_CTYPES:
            raise HaloSpecError(f"the OpenCL transformer cannot negate {dtype} "
                                "(turned vector component)")
        return _SIGNED_CTYPES[dtype.name]
    return _COPY_CTYPES[dtype.itemsize]


def _kernel_source(name: str, moves: list[_Move], group_size: int
                   ) -> tuple[str, int]:
    """Source of the kernel moving every segment, and its number of
    work-groups.

    Segment *k* owns work-groups ``[G_k, G_k+1)`` (so the branch choosing
    the segment is uniform within a group). Each work item copies one
    chunk of at most :data:`_CHUNK` elements of one row (the innermost
    merged axis): a short strided loop, so index arithmetic is paid per
    chunk, not per element -- what CPU OpenCL devices need."""
    # Each segment reads (pack) or writes (unpack) its own quantity, passed
    # as argument q<k> in segment order.
    qtypes = [_ctype(m.segment.dtype, m.sign < 0) for m in moves]
    const = "const " if name == "pack" else ""
    params = ["__global char *buf", "long buf_off"]
    for k, ctype in enumerate(qtypes):
        params += [f"__global {const}{ctype} *q{k}", f"long q{k}_off"]
    lines = []
    first_group = 0
    for k, m in enumerate(moves):
        base, shape, strides = m.strided_geometry
        row_len, row_stride = (shape[-1], strides[-1]) if shape else (1, 0)
        chunk = min(row_len, _CHUNK)
        chunks_per_row = -(-row_len // chunk)
        n_items = (m.segment.size // row_len) * chunks_per_row
        end_group = first_group + -(-n_items // group_size)
        ctype = qtypes[k]
        q = f"q{k}"
        buf_ptr = (f"(__global {const if name == 'unpack' else ''}{ctype} *)"
                   f"(buf + buf_off + {m.segment.offset})")
        if chunks_per_row == 1:
            row, j0, j_end = "item", "0", str(row_len)
        else:
            row = f"(item / {chunks_per_row})"
            j0 = f"(item % {chunks_per_row}) * {chunk}"
            j_end = f"min(j0 + {chunk}L, {row_len}L)"
        src = f"{q}[src0 + j * {row_stride}]"
        slot = "dst[dst0 + j]"
        if name == "pack":
            stmt = f"{slot} = {'-' if m.sign < 0 else ''}{src};"
        else:
            stmt = f"{src} = {slot};"
        cond = "if" if k == 0 else "else if"
        lines += [
            f"    {cond} (g < {end_group}) {{",
            f"        const long item = (g - {first_group}) * {group_size} + lid;",
            f"        if (item < {n_items}) {{",
            f"            __global {const if name == 'unpack' else ''}{ctype} "
            f"*dst = {buf_ptr};",
            f"            const long r = {row};",
            f"            const long j0 = {j0};",
            f"            const long src0 = {q}_off + {base} + "
            f"{_offset_expr(shape[:-1], strides[:-1], 'r')};",
            f"            const long dst0 = r * {row_len};",
            f"            for (long j = j0; j < {j_end}; ++j)",
            f"                {stmt}",
            "        }",
            "    }"]
        first_group = end_group
    needs_fp64 = any("double" in t for t in qtypes)
    source = "\n".join([
        "#pragma OPENCL EXTENSION cl_khr_fp64: enable" if needs_fp64 else "",
        f"__kernel __attribute__((reqd_work_group_size({group_size}, 1, 1)))",
        f"void {name}({', '.join(params)})",
        "{",
        "    const long g = get_group_id(0);",
        "    const long lid = get_local_id(0);",
        *lines,
        "}",
    ])
    return source, first_group


def _offset_expr(shape: tuple[int, ...], strides: tuple[int, ...],
                 var: str) -> str:
    """C expression of the offset of C-order element *var* of *shape*."""
    if not shape:
        return "0"
    terms = []
    inner = 1
    for axis in range(len(shape) - 1, -1, -1):
        coord = var if inner == 1 else f"({var} / {inner})"
        if axis:
            coord = f"({coord} % {shape[axis]})"
        terms.append(f"{coord} * {strides[axis]}")
        inner *= shape[axis]
    return " + ".join(reversed(terms))


def _build_kernel(context: Any, source: str, name: str) -> Any:
    import pyopencl as cl
    with _KERNEL_CACHE_LOCK:
        prg = _KERNEL_CACHE.get((context, source))
        if prg is None:
            prg = _KERNEL_CACHE[(context, source)] = cl.Program(
                context, source).build()
    # A fresh Kernel per transformer: kernel arguments are per-object
    # state, so sharing one between threads would race.
    return cl.Kernel(prg, name)

# }}}


# {{{ spec checks

def _check_specs(specs: Sequence[HaloExchangeSpec], comp: str
                 ) -> tuple[HaloExchangeSpec, ...]:
    specs = tuple(specs)
    for i, spec in enumerate(specs):
        if not isinstance(spec, HaloExchangeSpec):
            raise HaloSpecError(f"exchange_descriptors_{comp}[{i}] is a "
                                f"{type(spec).__name__}, not a HaloExchangeSpec")
    return specs


def _check_vector_pairs(specs_x: tuple[HaloExchangeSpec, ...],
                        specs_y: tuple[HaloExchangeSpec, ...]) -> None:
    if len(specs_x) != len(specs_y):
        raise HaloSpecError(f"{len(specs_x)} x-descriptors but {len(specs_y)} "
                            "y-descriptors; vector components come in pairs")
    for i, (sx, sy) in enumerate(zip(specs_x, specs_y)):
        dx, dy = sx.specification.dtype, sy.specification.dtype
        if dx != dy:
            raise HaloSpecError(f"vector pair {i}: x dtype {dx} differs from "
                                f"y dtype {dy}")
        tx, ty = sx.pack_clockwise_rotation % 4, sy.pack_clockwise_rotation % 4
        if tx != ty:
            raise HaloSpecError(f"vector pair {i}: x turns {tx} times, y turns "
                                f"{ty} times; both components turn together")
        if tx and dx.kind not in "fic":
            raise HaloSpecError(f"vector pair {i}: turning a vector negates a "
                                f"component, which dtype {dx} cannot represent")

# }}}

# vim: foldmethod=marker
