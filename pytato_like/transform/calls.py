"""Rewrites of outlined function calls (see :mod:`pytato_like.function`).

:func:`tag_all_calls_to_be_inlined` marks every call with
:class:`~pytato_like.tags.InlineCallTag`; :func:`inline_calls` substitutes
the body of each marked call at its call site (the body's placeholders
replaced by the call's arguments), so the result holds no trace of those
calls. Both work on DAGs of any depth and on calls nested in function
bodies.

.. autofunction:: inline_calls
.. autofunction:: tag_all_calls_to_be_inlined
.. autofunction:: all_calls_inlined
.. autoclass:: Inliner
.. autoclass:: InlineMarker
.. autoclass:: PlaceholderSubstitutor
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytato_like.array import Array, DictOfNamedArrays
from pytato_like.function import Call, FunctionDefinition, NamedCallResult
from pytato_like.tags import InlineCallTag
from pytato_like.transform.copy import CopyMapper

__all__ = ["InlineMarker", "Inliner", "PlaceholderSubstitutor",
           "all_calls_inlined", "inline_calls", "tag_all_calls_to_be_inlined"]


class PlaceholderSubstitutor(CopyMapper):
    """Copies a function body with each placeholder replaced by
    ``substitutions[name]``. The substituted arrays belong to the caller's
    DAG and are not mapped further (they may hold placeholders of the same
    names, which must stay)."""

    def __init__(self, substitutions: Mapping[str, Array]) -> None:
        super().__init__()
        self.substitutions = substitutions

    def map_placeholder(self, expr: Any) -> Array:
        return self.substitutions[expr.name]

    def map_function_definition(self, expr: FunctionDefinition
                                ) -> FunctionDefinition:
        # a nested definition is a namespace of its own
        return expr


class Inliner(CopyMapper):
    """Replaces calls tagged :class:`~pytato_like.tags.InlineCallTag` by
    their bodies (the primary mapper of :func:`inline_calls`)."""

    def map_call(self, expr: Call) -> Any:
        if not expr.tags_of_type(InlineCallTag):
            return super().map_call(expr)
        substitutor = PlaceholderSubstitutor(expr.bindings)
        return DictOfNamedArrays(
            {name: self.rec(substitutor(ret))
             for name, ret in expr.function.returns.items()})

    def map_named_call_result(self, expr: NamedCallResult) -> Array:
        new = self.rec(expr._container)
        if isinstance(new, Call):
            return new[expr.name]
        return new._data[expr.name]


class InlineMarker(CopyMapper):
    """Tags every call with :class:`~pytato_like.tags.InlineCallTag` (the
    primary mapper of :func:`tag_all_calls_to_be_inlined`)."""

    def map_call(self, expr: Call) -> Any:
        return super().map_call(expr).tagged(InlineCallTag())


def inline_calls(expr: Any) -> Any:
    """*expr* (an array, a :class:`~pytato_like.DictOfNamedArrays` or a
    :class:`~pytato_like.function.FunctionDefinition`) with every call
    tagged :class:`~pytato_like.tags.InlineCallTag` replaced by its body,
    and equal sub-DAGs merged (the bodies of two calls with equal arguments
    become one)."""
    from pytato_like.transform.deduplicate import deduplicate
    if isinstance(expr, FunctionDefinition):
        result = Inliner().rec_function_definition(expr)
        returns = {name: deduplicate(ret) for name, ret in result.returns.items()}
        return result.copy(returns=returns)
    return deduplicate(Inliner()(expr))


def tag_all_calls_to_be_inlined(expr: Any) -> Any:
    """*expr* with every reachable call (in function bodies too) tagged
    :class:`~pytato_like.tags.InlineCallTag`. Nothing is inlined yet: pass
    the result to :func:`inline_calls`."""
    if isinstance(expr, FunctionDefinition):
        return InlineMarker().rec_function_definition(expr)
    return InlineMarker()(expr)


def all_calls_inlined(expr: Any) -> Any:
    """*expr* with every call inlined (``inline_calls(
    tag_all_calls_to_be_inlined(expr))``)."""
    return inline_calls(tag_all_calls_to_be_inlined(expr))
