"""Nodes that have no value of their own but name several result arrays:
a function call (:class:`~pytato_like.function.Call`) and a call of a
loopy kernel (:class:`~pytato_like.loopy.LoopyCall`).

:class:`ResultsNode` is such a node: an array node of the field table (its
arguments are its children; its shape is ``()`` and its dtype the empty
``void`` dtype) and, as pytato's ``AbstractResultWithNamedArrays``, a
mapping from result names to :class:`NodeResult` arrays, made once per
name. A subclass says which names exist (:meth:`ResultsNode._result_names`)
and how a result is made (:meth:`ResultsNode._make_result`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from pytools.tag import Tag

from pytato_like.array import (
    ARRAY,
    VALUE,
    AbstractResultWithNamedArrays,
    Array,
    NamedArray,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytato_like.array import Axis

__all__ = ["NO_VALUE", "NodeResult", "ResultsNode"]

#: the dtype of a :class:`ResultsNode`, which has no value of its own
NO_VALUE = np.dtype("V0")


class ResultsNode(Array, AbstractResultWithNamedArrays):
    """A node without a value, mapping result names to arrays."""

    def _finish_results_init(self, axes: Sequence[Axis] | None, tags: frozenset[Tag],
                             non_equality_tags: frozenset[Tag]) -> None:
        """Set the value-less shape and dtype and hash the node (the last
        step of a subclass constructor)."""
        self.shape = ()
        self.dtype = NO_VALUE
        self._results: dict[str, NodeResult] = {}
        self._finish_init(axes, tags, non_equality_tags)

    def _result_names(self) -> list[str]:
        raise NotImplementedError

    def _make_result(self, name: str) -> NodeResult:
        raise NotImplementedError

    def __getitem__(self, name: str) -> NodeResult:
        result = self._results.get(name)
        if result is None:
            if name not in self._result_names():
                raise KeyError(name)
            result = self._results[name] = self._make_result(name)
        return result

    def __contains__(self, name: object) -> bool:
        return name in self._result_names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._result_names())

    def __len__(self) -> int:
        return len(self._result_names())

    def keys(self):
        return list(self._result_names())

    def __bool__(self) -> bool:
        return True


class NodeResult(NamedArray):
    """The result *name* of a :class:`ResultsNode` (its one child). It has
    no expression in the caller's DAG: its value is computed by the node."""

    __slots__ = ()
    _fields = (("_container", ARRAY), ("name", VALUE))

    @property
    def expr(self) -> Array:
        raise AttributeError(
            f"{type(self).__name__} {self.name!r} has no expression in the "
            "DAG; its value is computed by the node it belongs to")
