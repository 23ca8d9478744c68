"""uint64 gather indices read as stored int64 arrays (loopy target).

An index array of dtype uint64 combined with a signed bound or offset
promotes to float64 -- NumPy's rule, which loopy follows -- so a uint64
index moved by an offset (a gather from a concatenation) or compared with
a run-time size (an axis whose length is a size parameter) does not
compile, and a cast inside the subscript is something loopy's access
analysis cannot read. :func:`store_unsigned_indices` gives every
advanced index whose index array is uint64 an int64 copy of that array,
stored (:class:`~pytato_like.tags.ImplStored`), so the gather reads plain
int64 values. NumPy reads uint64 indices as its signed index type too:
entries of 2^63 or more wrap to negative values, which count from the
end (``2**64 - 1`` is the last element) or are out of range
(``2**63``); the run-time checks, added after this pass, see the same
int64 values and report what NumPy reports.

.. autofunction:: store_unsigned_indices
"""

from __future__ import annotations

import numpy as np

from pytato_like.array import (
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
)
from pytato_like.tags import ImplStored
from pytato_like.transform.copy import CopyMapper

_UINT64 = np.dtype(np.uint64)
_ADVANCED = (AdvancedIndexInContiguousAxes, AdvancedIndexInNoncontiguousAxes)
_ADVANCED_CLASSES = frozenset(_ADVANCED)


def _has_unsigned_index(node: Array) -> bool:
    return isinstance(node, _ADVANCED) and any(
        isinstance(i, Array) and i.dtype == _UINT64 for i in node.indices)


class _SignedIndices(CopyMapper):
    def _signed(self, expr: Array, new: Array) -> Array:
        if not _has_unsigned_index(new):
            return new
        assert isinstance(new, _ADVANCED)
        return new.copy(indices=tuple(
            i.astype(np.int64).tagged(ImplStored())
            if isinstance(i, Array) and i.dtype == _UINT64 else i
            for i in new.indices))

    def map_contiguous_advanced_index(self, expr, *args, **kwargs):
        return self._signed(
            expr, super().map_contiguous_advanced_index(expr, *args, **kwargs))

    def map_non_contiguous_advanced_index(self, expr, *args, **kwargs):
        return self._signed(
            expr, super().map_non_contiguous_advanced_index(expr, *args, **kwargs))


def store_unsigned_indices(outputs: dict[str, Array], order: list[Array]
                           ) -> dict[str, Array]:
    """*outputs* (name -> array, in topological *order*) with every uint64
    index array of an advanced index replaced by a stored int64 copy;
    *outputs* itself when there is none."""
    # (most DAGs have no advanced index at all: their classes compared in
    # C, ~3x faster than the test per node)
    if _ADVANCED_CLASSES.isdisjoint(map(type, order)) or not any(
            _has_unsigned_index(node) for node in order):
        return outputs
    mapper = _SignedIndices()
    return {name: mapper(ary) for name, ary in outputs.items()}
