"""Merging duplicates: structurally equal sub-DAGs and data wrappers that
wrap the same memory.

* :class:`Deduplicator` / :func:`deduplicate`: every set of structurally
  equal nodes (``==``) becomes one node, the first one met (children
  first). It is a :class:`~pytato_like.transform.CopyMapper` whose cache is
  a :class:`~pytato_like.transform.TransformMapperCache`, which replaces a
  result by the first equal result. Comparing two results is cheap: their
  children are already the same objects. Linear in the DAG, any depth.
* :class:`DataWrapperDeduplicator` / :func:`deduplicate_data_wrappers`:
  data wrappers over the same buffer become one.

.. autoclass:: Deduplicator
.. autofunction:: deduplicate
.. autoclass:: DataWrapperDeduplicator
.. autofunction:: deduplicate_data_wrappers
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

from pytato_like.collector import paused_collection
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DataWrapper,
    DictOfNamedArrays,
)
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.mapper import (
    ArrayOrNames,
    ArrayOrNamesTc,
    CachedMapperCache,
    TransformMapperCache,
)

if TYPE_CHECKING:
    from pytato_like.function import FunctionDefinition


class Deduplicator(CopyMapper):
    """Copies a DAG keeping one node per structural class (see the module
    documentation). Keeps its cache across calls, so arrays mapped by one
    instance share their equal sub-DAGs."""

    def __init__(self, _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        if _cache is None:
            _cache = TransformMapperCache(err_on_collision=False)
        super().__init__(_cache=_cache, _function_cache=_function_cache)

    def clone_for_callee(self, function: FunctionDefinition) -> Deduplicator:
        return type(self)(_function_cache=self._function_cache)


@overload
def deduplicate(expr: Array) -> Array: ...
@overload
def deduplicate(expr: DictOfNamedArrays) -> DictOfNamedArrays: ...
@overload
def deduplicate(expr: AbstractResultWithNamedArrays
                ) -> AbstractResultWithNamedArrays: ...


@paused_collection
def deduplicate(expr: ArrayOrNames) -> ArrayOrNames:
    """*expr* with structurally equal sub-DAGs merged into one node (the
    first met); *expr* itself when it has no duplicates.

    .. note:: Distinct data wrappers over the same data are not equal, so
       they stay distinct; see :func:`deduplicate_data_wrappers`.
    """
    return Deduplicator()(expr)


def _buffer_key(data: Any) -> tuple | None:
    """``(address, strides)`` of the memory *data* views, or None when it is
    not a NumPy or pyopencl array."""
    # (Any: duck-typed data, read through the attributes it turns out to have)
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


class DataWrapperDeduplicator(CopyMapper):
    """Replaces every :class:`~pytato_like.array.DataWrapper` by the first
    one wrapping the same memory (same buffer address, strides, shape and
    dtype) with the same name, axes and tags.

    .. attribute:: data_wrapper_cache

        buffer key -> the data wrapper kept for it.

    .. attribute:: data_wrappers_encountered

        How many data wrappers were mapped (duplicates included).
    """

    def __init__(self, _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        super().__init__(_cache=_cache, _function_cache=_function_cache)
        self.data_wrapper_cache: dict[tuple, DataWrapper] = {}
        self.data_wrappers_encountered = 0

    def clone_for_callee(self, function: FunctionDefinition
                         ) -> DataWrapperDeduplicator:
        # data wrappers in bodies merge with the caller's
        clone = type(self)(_function_cache=self._function_cache)
        clone.data_wrapper_cache = self.data_wrapper_cache
        return clone

    def map_data_wrapper(self, expr: DataWrapper) -> DataWrapper:
        self.data_wrappers_encountered += 1
        # its shape may hold size expressions (a copy is a data wrapper)
        expr = cast("DataWrapper", self._map_default(expr))
        buffer = _buffer_key(expr.data)
        if buffer is None:
            return expr
        key = (*buffer, expr.shape, expr.dtype, expr.name, expr.axes, expr.tags)
        return self.data_wrapper_cache.setdefault(key, expr)


@paused_collection
def deduplicate_data_wrappers(array_or_names: ArrayOrNamesTc
                              ) -> ArrayOrNamesTc:
    """*array_or_names* with every :class:`~pytato_like.array.DataWrapper`
    replaced by the first one wrapping the same memory (see
    :class:`DataWrapperDeduplicator`).

    Only :class:`numpy.ndarray` and :class:`pyopencl.array.Array` data are
    deduplicated. Identical data stored at different addresses is not
    detected; code must not rely on either outcome.
    """
    return DataWrapperDeduplicator()(array_or_names)
