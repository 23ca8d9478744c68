"""Persistent-dictionary keys for values that hold pytato_like DAGs.

:class:`PytatoKeyBuilder` extends loopy's key builder (so loopy kernels,
pymbolic expressions and dtypes are keyed as loopy keys them) with array
DAGs walked once in topological order. It lives apart from
:mod:`pytato_like.analysis` because it imports loopy; the package reaches it
through that module's lazy ``__getattr__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from loopy.tools import LoopyKeyBuilder

from pytato_like._traversal import ArrayRef, topological_order
from pytato_like.array import Array, DictOfNamedArrays

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pyopencl.array as cla
    from pytools import Hash

    from pytato_like.array import NamedArray
    from pytato_like.reductions import ReductionOperation

__all__ = ["PytatoKeyBuilder"]


class PytatoKeyBuilder(LoopyKeyBuilder):
    """A :class:`pytools.persistent_dict.KeyBuilder` for values that hold
    pytato_like objects: array DAGs (by structure, data wrappers by their
    data's bytes), NumPy arrays and pyopencl arrays (by contents).
    Structurally equal DAGs get equal keys in every process."""

    def rec(self, key_hash: Hash, key: object) -> Hash:
        # pytools dispatches on the exact class name; node classes (and user
        # subclasses of them) all go through the DAG walk
        if isinstance(key, (Array, DictOfNamedArrays)):
            inner = self.new_hash()
            if isinstance(key, Array):
                self._update_for_dag(inner, key)
            else:
                self.update_for_DictOfNamedArrays(inner, key)
            key_hash.update(inner.digest())
            return key_hash
        return super().rec(key_hash, key)

    def update_for_ndarray(self, key_hash: Hash, key: np.ndarray) -> None:
        self.rec(key_hash, (key.dtype.str, key.shape))
        self.rec(key_hash, key.tobytes())

    def update_for_Array(self, key_hash: Hash,  # noqa: N802
                         key: Array | cla.Array) -> None:
        if not isinstance(key, Array):  # pyopencl.array.Array
            self.update_for_ndarray(key_hash, key.get())
            return
        self._update_for_dag(key_hash, key)

    def update_for_DictOfNamedArrays(self, key_hash: Hash,  # noqa: N802
                                     key: DictOfNamedArrays) -> None:
        for name in sorted(key._data):
            self.rec(key_hash, name)
            self._update_for_dag(key_hash, key._data[name])
        self.rec(key_hash, key.tags)

    def update_for_constantdict(self, key_hash: Hash,
                                key: Mapping[object, object]) -> None:
        self.update_for_dict(key_hash, key)

    def update_for_ReductionOperation(self, key_hash: Hash,  # noqa: N802
                                      key: ReductionOperation) -> None:
        self.rec(key_hash, key.name)

    def _update_for_dag(self, key_hash: Hash, root: Array) -> None:
        # One record per node in topological order, children referenced by
        # position: linear in the DAG, no recursion over its depth. Field
        # values (expressions, dtypes, axes) are shared by many nodes, so
        # each distinct object is keyed once and its digest reused.
        memo: dict[int, tuple[bytes, object]] = {}

        def digest(value: object, identity: bool = False) -> bytes:
            entry = memo.get(id(value))
            if entry is None:
                inner = self.new_hash()
                if identity and isinstance(value, np.ndarray):
                    self.update_for_ndarray(inner, value)
                elif identity:  # a device array: by contents
                    self.update_for_Array(inner, cast("cla.Array", value))
                else:
                    self.rec(inner, value)
                entry = memo[id(value)] = (inner.digest(), value)
            return entry[0]

        def ref(i: int) -> bytes:
            return b"@" + i.to_bytes(8, "little")

        def array_ref(ary: Array) -> ArrayRef:
            return ArrayRef(position[id(ary)])

        def put(layout: object) -> None:
            # a field's canonical layout: an array ref, or a tuple of refs,
            # values and (name, ref) pairs (two levels at most)
            if type(layout) is ArrayRef:
                update(ref(layout.i))
            elif type(layout) is tuple:

                update(len(layout).to_bytes(8, "little"))
                for entry in layout:
                    put(entry)
            else:
                update(digest(layout))

        order = topological_order([root])
        position = {id(node): i for i, node in enumerate(order)}
        update = key_hash.update
        for node in order:
            cls = type(node)
            update(digest(f"{cls.__module__}.{cls.__qualname__}"))
            if cls.__name__ == "NamedArray":
                named = cast("NamedArray", node)

                update(digest(named.name))
                update(ref(position[id(named.expr)]))
            else:
                for name, kind in node._fields:
                    value = getattr(node, name)
                    if kind.holds_arrays:
                        put(kind.canonical(value, array_ref))
                    else:
                        update(digest(value, identity=kind.by_identity))
            update(digest(node.axes))
            update(digest(node.tags))

