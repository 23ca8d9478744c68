"""``Array.__getitem__``: NumPy basic and advanced indexing, lazily.

``None`` entries are handled by first inserting unit axes with a reshape and
then indexing them with full slices; NumPy places axes identically that way.
Integers combined with index arrays count as advanced indices (as in NumPy)
when deciding whether the advanced indices are contiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from pytato_like.array import (
    NO_TAGS,
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    BasicIndex,
    NormalizedSlice,
    Reshape,
    make_data_wrapper,
)
from pytato_like.diagnostic import (
    IndexOutOfBoundsError,
    IndexTypeError,
    InvalidIndexError,
)
from pytato_like.utils import get_shape_after_broadcasting

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from pytato_like.array import ShapeComponent


def _normalize_slice(s: slice, dim: ShapeComponent, axis: int,
                     shape) -> NormalizedSlice:
    if not isinstance(dim, int):
        if s == slice(None) or s == slice(None, None, 1):
            return NormalizedSlice(0, None, 1)  # full slice of a symbolic axis
        raise IndexTypeError(
            f"only full slices are supported on symbolic axis {axis} of an "
            f"array of shape {shape}")
    for part in (s.start, s.stop, s.step):
        if part is not None and not isinstance(part, (int, np.integer)):
            raise IndexTypeError(f"slice {s} has a non-integer bound")
    if s.step == 0:
        raise IndexTypeError(f"slice step cannot be zero (axis {axis} of "
                             f"shape {shape})")
    start, stop, step = s.indices(dim)
    return NormalizedSlice(start, stop, step)


def _normalize_int(i: SupportsIndex, dim: ShapeComponent, axis: int, shape) -> int:
    i = int(i)
    if isinstance(dim, int):
        if not -dim <= i < dim:
            raise IndexOutOfBoundsError(
                f"index {i} is out of bounds for axis {axis} with size {dim} "
                f"(array shape {shape})")
        return i % dim
    if i < 0:
        raise IndexOutOfBoundsError(
            f"negative index {i} on symbolic axis {axis} of shape {shape}")
    return i


def _as_index_array(idx: Array | ArrayLike, axis: int, shape) -> list[Array]:
    """An index that is array-like: returns a list of integer arrays (a
    boolean mask becomes one array per masked axis)."""
    if isinstance(idx, Array):
        if idx.dtype.kind == "b":
            raise IndexTypeError(
                f"boolean array index of shape {idx.shape} on array of shape "
                f"{shape}: the result shape would depend on the data")
        if idx.dtype.kind not in "iu":
            raise IndexTypeError(
                f"array index of dtype {idx.dtype} (shape {idx.shape}) on "
                f"axis {axis} is not an integer array")
        return [idx]
    arr = np.asarray(idx)
    if arr.dtype.kind == "b":
        covered = tuple(shape[axis:axis + arr.ndim])
        if covered != arr.shape:
            raise InvalidIndexError(
                f"boolean index of shape {arr.shape} does not match axes "
                f"{axis}..{axis + arr.ndim - 1} of array of shape {shape}")
        return [make_data_wrapper(nz) for nz in np.nonzero(arr)]
    if arr.dtype.kind not in "iu":
        if arr.size == 0:
            arr = arr.astype(np.intp)
        else:
            # NumPy: IndexError ("arrays used as indices must be of integer
            # (or boolean) type")
            raise InvalidIndexError(
                f"index {idx!r} of dtype {arr.dtype} on axis {axis} of an "
                f"array of shape {shape} is not an integer array")
    dim = shape[axis]
    # known now, so checked now (generated code would read out of bounds)
    if isinstance(dim, int) and arr.size and not (
            -dim <= arr.min() and arr.max() < dim):
        bad = arr[(arr < -dim) | (arr >= dim)].flat[0]
        raise IndexOutOfBoundsError(
            f"index {bad} is out of bounds for axis {axis} with size {dim} "
            f"(array shape {shape})")
    return [make_data_wrapper(arr)]


def _is_array_like(idx: object) -> bool:
    return isinstance(idx, (Array, np.ndarray, list, tuple))


def _basic_getitem(ary: Array, key: tuple) -> Array | None:
    """Fast path for keys of plain ints and slices (the common case in
    stencil code); None when the key needs the general treatment."""
    if len(key) > ary.ndim:
        return None
    indices: list[int | NormalizedSlice | Array] = []
    for axis, k in enumerate(key):
        tk = type(k)
        if tk is slice:
            indices.append(_normalize_slice(k, ary.shape[axis], axis, ary.shape))
        elif tk is int:
            indices.append(_normalize_int(k, ary.shape[axis], axis, ary.shape))
        else:
            return None
    for axis in range(len(key), ary.ndim):
        indices.append(_normalize_slice(_FULL_SLICE, ary.shape[axis], axis,
                                        ary.shape))
    if _is_identity(indices, ary.shape):
        return ary
    return BasicIndex(ary, tuple(indices), None, NO_TAGS)


_FULL_SLICE = slice(None)


def _is_identity(indices, shape) -> bool:
    return all(isinstance(i, NormalizedSlice) and i.start == 0 and i.step == 1
               and (i.stop == d or not isinstance(d, int))
               for i, d in zip(indices, shape))


def getitem(ary: Array, key: object) -> Array:
    """``ary[key]`` with NumPy semantics."""
    if not isinstance(key, tuple):
        key = (key,)
    result = _basic_getitem(ary, key)
    if result is not None:
        return result
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise InvalidIndexError("an index can only have a single ellipsis "
                                f"('...'), got {key!r}")

    def consumed(k) -> int:
        if k is None or k is Ellipsis:
            return 0
        if isinstance(k, np.ndarray) and k.dtype.kind == "b":
            return k.ndim
        return 1

    n_consumed = sum(consumed(k) for k in key)
    if n_consumed > ary.ndim:
        raise IndexOutOfBoundsError(
            f"too many indices for array of shape {ary.shape}: {n_consumed} "
            f"were indexed")
    if Ellipsis in [k for k in key if not _is_array_like(k)]:
        pos = next(i for i, k in enumerate(key)
                   if not _is_array_like(k) and k is Ellipsis)
        key = (*key[:pos], *([slice(None)] * (ary.ndim - n_consumed)),
               *key[pos + 1:])
    else:
        key = (*key, *([slice(None)] * (ary.ndim - n_consumed)))

    # None -> unit axis inserted by a reshape, then indexed by a full slice
    if any(k is None for k in key):
        shape = []
        old = iter(ary.shape)
        new_key = []
        for k in key:
            if k is None:
                shape.append(1)
                new_key.append(slice(None))
            else:
                for _ in range(consumed(k)):
                    shape.append(next(old))
                new_key.append(k)
        ary = Reshape(ary, tuple(shape), "C", None, NO_TAGS)
        key = tuple(new_key)

    indices: list[int | NormalizedSlice | Array] = []
    axis = 0
    for k in key:
        if isinstance(k, slice):
            indices.append(_normalize_slice(k, ary.shape[axis], axis, ary.shape))
            axis += 1
        elif isinstance(k, (bool, np.bool_)):
            raise IndexTypeError(f"boolean scalar index {k!r} is not supported")
        elif isinstance(k, (int, np.integer)):
            indices.append(_normalize_int(k, ary.shape[axis], axis, ary.shape))
            axis += 1
        elif _is_array_like(k):
            arrays = _as_index_array(k, axis, ary.shape)
            indices.extend(arrays)
            axis += len(arrays)
        else:
            # NumPy: IndexError ("only integers, slices, ... are valid
            # indices"), e.g. for x[1.5]
            raise InvalidIndexError(
                f"index {k!r} of type {type(k).__name__} cannot index an array "
                f"of shape {ary.shape} (only integers, slices, '...', None "
                "and integer or boolean arrays can)")

    if not any(isinstance(i, Array) for i in indices):
        if _is_identity(indices, ary.shape):
            return ary
        return BasicIndex(ary, tuple(indices), None, NO_TAGS)

    index_shape = get_shape_after_broadcasting(
        [i for i in indices if isinstance(i, Array)])
    if all(isinstance(d, int) and d > 0 for d in index_shape):
        for iaxis, idx in enumerate(indices):
            if isinstance(idx, Array) and ary.shape[iaxis] == 0:
                # any index into an empty axis is out of bounds, whatever
                # its value: refused now, as NumPy refuses it when it runs
                raise IndexOutOfBoundsError(
                    f"array index of shape {idx.shape} into axis {iaxis} of "
                    f"size 0 (array shape {ary.shape}): every index is out "
                    "of bounds")
    advanced = [i for i, idx in enumerate(indices)
                if not isinstance(idx, NormalizedSlice)]
    contiguous = advanced == list(range(advanced[0], advanced[-1] + 1))
    cls = (AdvancedIndexInContiguousAxes if contiguous
           else AdvancedIndexInNoncontiguousAxes)
    return cls(ary, tuple(indices), None, NO_TAGS)
