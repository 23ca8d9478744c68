"""Merging data wrappers that wrap the same memory.

.. autofunction:: deduplicate_data_wrappers
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytato_like.array import DataWrapper
from pytato_like.transform._graph import gc_paused
from pytato_like.transform.copy import map_and_copy


def _buffer_key(data: Any) -> tuple | None:
    """``(address, strides)`` of the memory *data* views, or None when it is
    not a NumPy or pyopencl array."""
    if isinstance(data, np.ndarray):
        return (data.__array_interface__["data"][0], data.strides)
    base_data = getattr(data, "base_data", None)
    if base_data is not None and hasattr(data, "offset"):  # pyopencl array
        try:
            address = base_data.int_ptr
        except AttributeError:
            address = id(base_data)
        return (address, data.offset, tuple(data.strides))
    return None


@gc_paused
def deduplicate_data_wrappers(array_or_names: Any) -> Any:
    """*array_or_names* with every :class:`~pytato_like.array.DataWrapper`
    replaced by the first one wrapping the same memory (same buffer address,
    strides, shape and dtype) with the same name, axes and tags.

    Only :class:`numpy.ndarray` and :class:`pyopencl.array.Array` data are
    deduplicated. Identical data stored at different addresses is not
    detected; code must not rely on either outcome.
    """
    first_of: dict[tuple, DataWrapper] = {}

    def dedup(expr: Any) -> Any:
        if not isinstance(expr, DataWrapper):
            return expr
        buffer = _buffer_key(expr.data)
        if buffer is None:
            return expr
        key = (*buffer, expr.shape, expr.dtype, expr.name, expr.axes, expr.tags)
        return first_of.setdefault(key, expr)

    return map_and_copy(array_or_names, dedup)
