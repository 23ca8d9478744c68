"""Rewrites of outlined function calls (see :mod:`pytato_like.function`).

:func:`tag_all_calls_to_be_inlined` marks every call with
:class:`~pytato_like.tags.InlineCallTag`; :func:`inline_calls` substitutes
the body of each marked call at its call site (the body's placeholders
replaced by the call's arguments), so the result holds no trace of those
calls. Both work on DAGs of any depth and on calls nested in function
bodies.

:func:`concatenate_calls` merges independent calls of one function into a
single call on concatenated arguments, for functions that work row by row
along the first axis (see its documentation for what is accepted).

.. autofunction:: inline_calls
.. autofunction:: tag_all_calls_to_be_inlined
.. autofunction:: all_calls_inlined
.. autofunction:: concatenate_calls
.. autoclass:: CallSiteLocation
.. autoclass:: Inliner
.. autoclass:: InlineMarker
.. autoclass:: PlaceholderSubstitutor
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any, overload

from pytato_like._shape_ops import concatenate
from pytato_like._traversal import topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DataWrapper,
    DictOfNamedArrays,
    IndexLambda,
    Placeholder,
    children_of,
)
from pytato_like.diagnostic import PytatoLikeWarning, UnsupportedArrayError
from pytato_like.function import Call, FunctionDefinition, NamedCallResult
from pytato_like.scalar_expr import expression_children
from pytato_like.tags import InlineCallTag
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.deduplicate import deduplicate

_CallsIn = Array | AbstractResultWithNamedArrays | FunctionDefinition

__all__ = ["CallSiteLocation", "InlineMarker", "Inliner",
           "PlaceholderSubstitutor", "all_calls_inlined", "concatenate_calls",
           "inline_calls", "tag_all_calls_to_be_inlined"]


class PlaceholderSubstitutor(CopyMapper):
    """Copies a function body with each placeholder replaced by
    ``substitutions[name]``. The substituted arrays belong to the caller's
    DAG and are not mapped further (they may hold placeholders of the same
    names, which must stay)."""

    def __init__(self, substitutions: Mapping[str, Array]) -> None:
        super().__init__()
        self.substitutions = substitutions

    def map_placeholder(self, expr: Placeholder) -> Array:
        return self.substitutions[expr.name]

    def map_function_definition(self, expr: FunctionDefinition
                                ) -> FunctionDefinition:
        # a nested definition is a namespace of its own
        return expr


class Inliner(CopyMapper):
    """Replaces calls tagged :class:`~pytato_like.tags.InlineCallTag` by
    their bodies (the primary mapper of :func:`inline_calls`)."""

    def map_call(self, expr: Call) -> Any:
        # (Any: an inlined call becomes a DictOfNamedArrays, where
        # CopyMapper.map_call promises a Call)
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

    def map_call(self, expr: Call) -> Call:
        return super().map_call(expr).tagged(InlineCallTag())


@overload
def inline_calls(expr: FunctionDefinition) -> FunctionDefinition: ...
@overload
def inline_calls(expr: Array) -> Array: ...
@overload
def inline_calls(expr: DictOfNamedArrays) -> DictOfNamedArrays: ...
@overload
def inline_calls(expr: AbstractResultWithNamedArrays
                 ) -> AbstractResultWithNamedArrays: ...


def inline_calls(expr: _CallsIn) -> _CallsIn:
    """*expr* (an array, a :class:`~pytato_like.DictOfNamedArrays` or a
    :class:`~pytato_like.function.FunctionDefinition`) with every call
    tagged :class:`~pytato_like.tags.InlineCallTag` replaced by its body,
    and equal sub-DAGs merged (the bodies of two calls with equal arguments
    become one)."""
    if isinstance(expr, FunctionDefinition):
        result = Inliner().rec_function_definition(expr)
        returns = {name: deduplicate(ret) for name, ret in result.returns.items()}
        return result.copy(returns=returns)
    return deduplicate(Inliner()(expr))


@overload
def tag_all_calls_to_be_inlined(expr: FunctionDefinition
                                ) -> FunctionDefinition: ...
@overload
def tag_all_calls_to_be_inlined(expr: Array) -> Array: ...
@overload
def tag_all_calls_to_be_inlined(expr: DictOfNamedArrays
                                ) -> DictOfNamedArrays: ...
@overload
def tag_all_calls_to_be_inlined(expr: AbstractResultWithNamedArrays
                                ) -> AbstractResultWithNamedArrays: ...


def tag_all_calls_to_be_inlined(expr: _CallsIn) -> _CallsIn:
    """*expr* with every reachable call (in function bodies too) tagged
    :class:`~pytato_like.tags.InlineCallTag`. Nothing is inlined yet: pass
    the result to :func:`inline_calls`."""
    if isinstance(expr, FunctionDefinition):
        return InlineMarker().rec_function_definition(expr)
    return InlineMarker()(expr)


@overload
def all_calls_inlined(expr: FunctionDefinition) -> FunctionDefinition: ...
@overload
def all_calls_inlined(expr: Array) -> Array: ...
@overload
def all_calls_inlined(expr: DictOfNamedArrays) -> DictOfNamedArrays: ...
@overload
def all_calls_inlined(expr: AbstractResultWithNamedArrays
                      ) -> AbstractResultWithNamedArrays: ...


def all_calls_inlined(expr: _CallsIn) -> _CallsIn:
    """*expr* with every call inlined (``inline_calls(
    tag_all_calls_to_be_inlined(expr))``)."""
    return inline_calls(tag_all_calls_to_be_inlined(expr))


# {{{ concatenation


@dataclasses.dataclass(frozen=True)
class CallSiteLocation:
    """Where a call is: the :class:`~pytato_like.function.Call` and the
    calls whose bodies enclose it (*stack*, outermost first; empty for a
    call of the DAG itself). What ``call_site_filter`` of
    :func:`concatenate_calls` is given."""

    call: Call
    stack: tuple[Call, ...] = ()


def _is_rowwise_body(function: FunctionDefinition) -> tuple[bool, str]:
    """Whether every return of *function* is computed elementwise from its
    parameters, all of one shape (so that row ``i`` of each return depends
    on row ``i`` of the parameters only); else ``(False, why)``."""
    import pymbolic.primitives as prim

    shapes = {ret.shape for ret in function.returns.values()}
    shapes |= {ph.shape for ph in function._placeholders.values()}
    if len(shapes) != 1:
        return False, f"its parameters and returns have several shapes {shapes}"
    shape, = shapes
    if not shape or not all(isinstance(d, int) for d in shape):
        return False, f"the common shape {shape} is not a concrete array shape"
    index = tuple(prim.Variable(f"_{i}") for i in range(len(shape)))
    for node in topological_order(list(function.returns.values())):
        if isinstance(node, Placeholder):
            continue
        if isinstance(node, DataWrapper) and node.ndim == 0:
            continue
        if not isinstance(node, IndexLambda) or node.var_to_reduction_descr \
                or node.shape != shape:
            return False, (f"its body holds a {type(node).__name__} of shape "
                           f"{node.shape}, which is not an elementwise "
                           f"operation of shape {shape}")
        stack = [node.expr]
        while stack:
            e = stack.pop()
            if isinstance(e, prim.Subscript) \
                    and isinstance(e.aggregate, prim.Variable) \
                    and e.aggregate.name in node.bindings:
                ary = node.bindings[e.aggregate.name]
                if tuple(e.index_tuple) != index or ary.shape != shape:
                    return False, (f"its body reads {e} in a node of shape "
                                   f"{shape}, not elementwise")
                continue
            if isinstance(e, prim.Variable) and e.name in node.bindings:
                if node.bindings[e.name].ndim != 0:
                    return False, f"its body reads array {e.name} unindexed"
                continue
            stack.extend(expression_children(e))
    return True, ""


class _ResizedBody(CopyMapper):
    """Copies a row-wise body with its common shape replaced by *shape*."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = shape

    def map_placeholder(self, expr: Placeholder) -> Array:
        return expr.copy(shape=self.shape)

    def map_index_lambda(self, expr: IndexLambda) -> Array:
        bindings = {name: self.rec(ary) for name, ary in expr.bindings.items()}
        return expr.copy(shape=self.shape, bindings=bindings)


@overload
def concatenate_calls(expr: Array,
                      call_site_filter: Callable[[CallSiteLocation], bool], *,
                      inherit_axes: bool = False,
                      warn_if_no_calls: bool = True,
                      err_if_no_calls: bool = False) -> Array: ...
@overload
def concatenate_calls(expr: DictOfNamedArrays,
                      call_site_filter: Callable[[CallSiteLocation], bool], *,
                      inherit_axes: bool = False,
                      warn_if_no_calls: bool = True,
                      err_if_no_calls: bool = False) -> DictOfNamedArrays: ...


def concatenate_calls(expr: Array | DictOfNamedArrays,
                      call_site_filter: Callable[[CallSiteLocation], bool], *,
                      inherit_axes: bool = False,
                      warn_if_no_calls: bool = True,
                      err_if_no_calls: bool = False
                      ) -> Array | AbstractResultWithNamedArrays:
    """*expr* with the calls selected by *call_site_filter* (given each
    call's :class:`CallSiteLocation`) replaced by one call on their
    arguments concatenated along the first axis; each former result becomes
    the matching slice of the merged call's result.

    What is accepted (a subset of what pytato's analysis accepts): calls of
    the DAG itself (not inside function bodies), all of one function
    definition, none depending on another, whose body computes every
    return elementwise from parameters of one common shape (row ``i`` of a
    result depends on row ``i`` of the arguments only). Anything else
    raises :class:`~pytato_like.diagnostic.UnsupportedArrayError` saying
    why. With no selected call, warns (*warn_if_no_calls*) or raises
    :class:`ValueError` (*err_if_no_calls*) and returns *expr*.
    *inherit_axes* is accepted for pytato compatibility; the merged
    arguments keep no axis tags."""
    roots = (list(expr._data.values()) if isinstance(expr, DictOfNamedArrays)
             else [expr])
    order = topological_order(roots)
    selected = [node for node in order if type(node) is Call
                and call_site_filter(CallSiteLocation(node, ()))]
    if not selected:
        if err_if_no_calls:
            raise ValueError("concatenate_calls: no call selected")
        if warn_if_no_calls:
            warnings.warn("concatenate_calls: no call selected",
                          PytatoLikeWarning, stacklevel=2)
        return expr

    # every selected call's body must work row by row, and the bodies may
    # only differ in the number of rows
    functions: dict[int, FunctionDefinition] = {}
    for call in selected:
        functions.setdefault(id(call.function), call.function)
    for function in functions.values():
        ok, why = _is_rowwise_body(function)
        if not ok:
            raise UnsupportedArrayError(
                f"concatenate_calls: cannot concatenate calls of {function!r}:"
                f" {why}")
    rows = [next(iter(c.function.returns.values())).shape[0] for c in selected]
    body_shape = next(iter(selected[0].function.returns.values())).shape
    new_shape = (sum(rows), *body_shape[1:])
    resized: dict[int, FunctionDefinition] = {}
    for key, function in functions.items():
        resize = _ResizedBody(new_shape)
        resized[key] = function.copy(returns={
            name: resize(ret) for name, ret in function.returns.items()})
    new_function = resized[id(selected[0].function)]
    for key, candidate in resized.items():
        if candidate != new_function:
            raise UnsupportedArrayError(
                "concatenate_calls: the selected calls call different "
                f"functions ({selected[0].function!r} and "
                f"{functions[key]!r} differ in more than their row count)")
    function = selected[0].function

    # no selected call may read another's results
    chosen = {id(c) for c in selected}
    reaches: dict[int, bool] = {}
    for node in order:
        reaches[id(node)] = any(reaches[id(c)] or id(c) in chosen
                                for c in children_of(node))
    for call in selected:
        if reaches[id(call)]:
            raise UnsupportedArrayError(
                "concatenate_calls: a selected call depends on the result of "
                "another selected call; they cannot run as one")

    merged_bindings = {
        param: concatenate([c.bindings[param] for c in selected], axis=0)
        for param in function.parameters
        if param in function._placeholders}
    unused = function.parameters - set(merged_bindings)
    merged_bindings.update({param: selected[0].bindings[param]
                            for param in unused})
    merged = Call(new_function, merged_bindings, tags=selected[0].tags)

    replacement: dict[tuple[int, str], Array] = {}
    start = 0
    for call, n in zip(selected, rows, strict=True):
        for name in function.returns:
            replacement[id(call), name] = merged[name][start:start + n]
        start += n

    class _Replace(CopyMapper):
        def map_named_call_result(self, node: NamedCallResult) -> Array:
            new = replacement.get((id(node._container), node.name))
            if new is not None:
                return new
            return super().map_named_call_result(node)

    return _Replace()(expr)

# }}}
