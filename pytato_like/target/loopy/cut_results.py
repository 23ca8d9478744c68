"""Cutting a DAG at the results of outlined nodes (see
:mod:`~pytato_like.target.loopy.outlined`): each result becomes a
placeholder, so the rest of the DAG is ordinary. Used by the staged
programs of :mod:`~pytato_like.target.loopy.outlined` and by the
translation unit of :mod:`~pytato_like.target.loopy.unit`, which cuts
sparse products out the same way.

.. autoclass:: ResultsAsPlaceholders
"""

from __future__ import annotations

from typing import cast, overload

from pytato_like.array import AbstractResultWithNamedArrays, Array, Placeholder
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.mapper import ArrayOrNames

__all__ = ["ResultsAsPlaceholders"]


class ResultsAsPlaceholders(CopyMapper):
    """Copies the DAG with each owner result replaced by the placeholder
    named in *names* (by result identity)."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names
        self.placeholders: dict[int, Placeholder] = {}

    @overload
    def rec(self, expr: Array) -> Array: ...
    @overload
    def rec(self, expr: AbstractResultWithNamedArrays
            ) -> AbstractResultWithNamedArrays: ...
    @overload
    def rec(self, expr: ArrayOrNames) -> ArrayOrNames: ...

    def rec(self, expr: ArrayOrNames) -> ArrayOrNames:
        name = self.names.get(id(expr))
        if name is not None:
            expr = cast(Array, expr)    # owner results are arrays
            # one placeholder object per result: code generation names
            # arrays by identity
            ph = self.placeholders.get(id(expr))
            if ph is None:
                ph = self.placeholders[id(expr)] = Placeholder(
                    name, expr.shape, expr.dtype, axes=expr.axes,
                    tags=expr.tags)
            return ph
        return super().rec(expr)

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        # below a result is the owner, which is cut out
        if id(expr) in self.names:
            return ()
        return super()._descendants_to_premap(expr)
