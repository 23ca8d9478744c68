"""Halo exchange specs and buffer layout: what moves where, independent of
the array library that moves it.

* :class:`QuantityHaloSpec` and :class:`HaloExchangeSpec` -- a quantity's
  memory layout and what one exchange does with it (validated and
  normalized on construction);
* :func:`rotate_scalar_data` / :func:`rotate_vector_data` -- the rotation
  convention (see :mod:`pytato_like.runtime.halo`), on NumPy arrays;
* :class:`Segment`, :func:`layout_segments` and :class:`Move` -- where each
  packed region lives in the one buffer of an exchange, and the strided
  geometry a device kernel copies.

The packers live in :mod:`~pytato_like.runtime.halo_numpy` and
:mod:`~pytato_like.runtime.halo_opencl`; :mod:`pytato_like.runtime.halo`
is the public face.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from pytato_like.diagnostic import HaloSpecError

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

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
        dims = cast("tuple[str, ...]", self.dims)  # set in __post_init__
        return next((i for i, d in enumerate(dims) if d.startswith("x")),
                    None)

    @functools.cached_property
    def y_axis(self) -> int | None:
        """Index of the ``y`` axis, if any."""
        dims = cast("tuple[str, ...]", self.dims)  # set in __post_init__
        return next((i for i, d in enumerate(dims) if d.startswith("y")),
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
    def whole_array(cls, shape: tuple[int, ...], dtype: DTypeLike,
                    dims: tuple[str, ...] | None = None) -> HaloExchangeSpec:
        """Pack and unpack the whole array, unrotated: the spec for sending
        an entire array inside a packed message."""
        full = tuple(slice(None) for _ in shape)
        # (QuantityHaloSpec makes the dtype a numpy.dtype)
        return cls(QuantityHaloSpec(shape, cast("np.dtype", dtype), dims),
                   full, 0, full)

    @property
    def pack_shape(self) -> tuple[int, ...]:
        """Shape of the packed region before rotation."""
        return _slices_shape(self.pack_slices)

    @property
    def packed_shape(self) -> tuple[int, ...]:
        """Shape of the packed region as laid out in the buffer (rotated)."""
        shape = self.pack_shape
        if self.pack_clockwise_rotation % 2:
            # (rotated regions have both an x and a y axis)
            ix = cast(int, self.specification.x_axis)
            iy = cast(int, self.specification.y_axis)
            turned = list(shape)
            turned[ix], turned[iy] = turned[iy], turned[ix]
            shape = tuple(turned)
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
    for axis, (sl, n) in enumerate(zip(slices, shape, strict=True)):
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

def rotate_scalar_data(data: np.ndarray, n_clockwise_rotations: int,
                       x_axis: int | None = 0, y_axis: int | None = 1
                       ) -> np.ndarray:
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


def vector_components(n_clockwise_rotations: int
                       ) -> tuple[tuple[int, int], tuple[int, int]]:
    """For each packed component: (0 for x / 1 for y source, sign)."""
    return {0: ((0, 1), (1, 1)),
            1: ((1, 1), (0, -1)),
            2: ((0, -1), (1, -1)),
            3: ((1, -1), (0, 1))}[n_clockwise_rotations % 4]


def rotate_vector_data(x_data: np.ndarray, y_data: np.ndarray,
                       n_clockwise_rotations: int,
                       x_axis: int | None = 0, y_axis: int | None = 1
                       ) -> tuple[np.ndarray, ...]:
    """The (x, y) components of a vector field turned clockwise
    *n_clockwise_rotations* times (see the table in the module docs)."""
    turned = (rotate_scalar_data(x_data, n_clockwise_rotations, x_axis, y_axis),
              rotate_scalar_data(y_data, n_clockwise_rotations, x_axis, y_axis))
    return tuple(turned[src] if sign > 0 else -turned[src]
                 for src, sign in vector_components(n_clockwise_rotations))

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


def layout_segments(entries: Sequence[tuple[tuple[int, ...], np.dtype]]
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
class Move:
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
        # (read only when turned: turned regions have an x and a y axis)
        ix, iy = cast(int, q.x_axis), cast(int, q.y_axis)
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
        base = sum(sl.start * st for sl, st in zip(index, cstrides, strict=True))
        extents = [len(range(sl.start, -1 if sl.stop is None else sl.stop,
                             sl.step)) for sl in index]
        strides = [sl.step * st for sl, st in zip(index, cstrides, strict=True)]
        order = range(len(index)) if perm is None else perm
        shape = [extents[a] for a in order]
        strides = [strides[a] for a in order]
        merged_shape: list[int] = []
        merged_strides: list[int] = []
        for n, st in zip(reversed(shape), reversed(strides), strict=True):
            if n == 1:
                continue
            if merged_shape and merged_strides[0] * merged_shape[0] == st:
                merged_shape[0] *= n
                continue
            merged_shape.insert(0, n)
            merged_strides.insert(0, st)
        return int(base), tuple(merged_shape), tuple(merged_strides)

# }}}


# {{{ spec checks

def check_specs(specs: Sequence[HaloExchangeSpec], comp: str
                 ) -> tuple[HaloExchangeSpec, ...]:
    specs = tuple(specs)
    for i, spec in enumerate(specs):
        if not isinstance(spec, HaloExchangeSpec):
            raise HaloSpecError(f"exchange_descriptors_{comp}[{i}] is a "
                                f"{type(spec).__name__}, not a HaloExchangeSpec")
    return specs


def check_vector_pairs(specs_x: tuple[HaloExchangeSpec, ...],
                        specs_y: tuple[HaloExchangeSpec, ...]) -> None:
    if len(specs_x) != len(specs_y):
        raise HaloSpecError(f"{len(specs_x)} x-descriptors but {len(specs_y)} "
                            "y-descriptors; vector components come in pairs")
    for i, (sx, sy) in enumerate(zip(specs_x, specs_y, strict=True)):
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
