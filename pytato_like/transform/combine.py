"""Mappers that combine the results of a node's children.

:class:`CombineMapper` maps each node to ``combine(*results of its
children)``; its subclasses here collect sets of nodes (dependencies,
inputs, size parameters).

Why the collectors are linear: mapping each node of a chain of *N* nodes to
the frozenset of everything below it costs ``1 + 2 + ... + N`` -- quadratic.
Called on a root (``mapper(expr)``), the collectors below therefore compute
the root's answer with one traversal of the DAG instead. This fast path is
taken only when the class does not override any mapping method, so user
subclasses keep pytato's per-node semantics (and cost).

Sets of nodes are built from one representative per structurally-equal class
(see :func:`~pytato_like.transform._graph.structural_representatives`):
a set containing two distinct-but-equal deep sub-DAGs would otherwise compare
them with ``==``, a linear walk per insertion.

.. autoclass:: CombineMapper
    :members: combine
.. autoclass:: DependencyMapper
.. autoclass:: SubsetDependencyMapper
.. autoclass:: InputGatherer
.. autoclass:: ListOfInputsGatherer
.. autoclass:: SizeParamGatherer
.. autoclass:: NodeCollector
.. autofunction:: collect_nodes
.. autofunction:: get_dependencies
"""

from __future__ import annotations

import sys
from functools import reduce

if sys.version_info >= (3, 11):
    from typing import Never
else:  # requires-python is 3.10
    from typing_extensions import Never

from pytato_like.collector import paused_collection
from pytato_like._traversal import depth_first, topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    InputArgumentBase,
    SizeParam,
    output_arrays,
)
from pytato_like.transform._graph import (
    stack_headroom,
    structural_representatives,
    walk_children,
)
from pytato_like.transform.mapper import (
    ArrayOrNames,
    CachedMapper,
    FunctionResultT,
    ResultT,
    overrides_map_methods,
    with_default_map_methods,
)


@with_default_map_methods
class CombineMapper(CachedMapper[ResultT, FunctionResultT, []]):
    """Maps a node to :meth:`combine` of the results of its children (the
    arrays in its fields, including shape expressions and index arrays; a
    :class:`~pytato_like.array.NamedArray` has the array it names as its
    child, a :class:`~pytato_like.array.DictOfNamedArrays` its arrays).
    Leaves map to ``combine()``.

    Generic as pytato's: ``CombineMapper[ResultT, FunctionResultT]``."""

    def rec_idx_or_size_tuple(self, situp: tuple) -> tuple[ResultT, ...]:
        """The results of the arrays in a shape or index tuple (pytato's
        helper for ``map_*`` methods)."""
        return tuple(self.rec(s) for s in situp if isinstance(s, Array))

    def combine(self, *args: ResultT) -> ResultT:
        """Combine the results of the children of one node."""
        raise NotImplementedError(
            f"{type(self).__name__} must define combine(*args)")

    def _map_default(self, expr: ArrayOrNames) -> ResultT:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return self.combine(*(self.rec(child)
                              for child in walk_children(expr)))


def _union(*args: frozenset) -> frozenset:
    if not args:
        return frozenset()
    if len(args) == 1:
        return args[0]
    return reduce(frozenset.union, args)


class _NodeCollector(CombineMapper[frozenset, Never]):
    """A combine mapper whose result is the frozenset of the nodes of the
    DAG (the node itself included) for which :meth:`_collects` holds."""

    def _collects(self, expr: ArrayOrNames) -> bool:
        raise NotImplementedError

    def combine(self, *args: frozenset) -> frozenset:
        return _union(*args)

    def _map_default(self, expr: ArrayOrNames) -> frozenset:
        below = super()._map_default(expr)
        if isinstance(expr, Array) and self._collects(expr):
            return below | {expr}
        return below

    def __call__(self, expr: ArrayOrNames) -> frozenset:
        if overrides_map_methods(type(self), _NodeCollector) \
                or not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.rec(expr)
        key = self.get_cache_key(expr)
        if key not in self._results:
            self._results[key] = self._collect_by_traversal(expr)
            self._keepalive.append(expr)
        return self._results[key]

    @paused_collection
    @stack_headroom
    def _collect_by_traversal(self, expr: ArrayOrNames) -> frozenset:
        order = topological_order(output_arrays(expr))
        return frozenset(
            rep for node, rep in zip(order, structural_representatives(order))
            if node is rep and self._collects(node))


class DependencyMapper(_NodeCollector):
    """Maps an array to the frozenset of every array it depends on,
    itself included (for a :class:`~pytato_like.array.DictOfNamedArrays`:
    every array its results depend on).

    .. warning:: This returns every node of the DAG. A
       :class:`SubsetDependencyMapper` or a custom :class:`CombineMapper`
       is often what is wanted.
    """

    def _collects(self, expr: ArrayOrNames) -> bool:
        return True


class SubsetDependencyMapper(_NodeCollector):
    """Like :class:`DependencyMapper`, restricted to the arrays in
    *universe*."""

    def __init__(self, universe: frozenset) -> None:
        super().__init__()
        self.universe = universe

    def _collects(self, expr: ArrayOrNames) -> bool:
        return expr in self.universe


class InputGatherer(_NodeCollector):
    """Maps an array to the frozenset of the inputs
    (:class:`~pytato_like.array.InputArgumentBase`: placeholders, data
    wrappers, size parameters) it depends on."""

    def _collects(self, expr: ArrayOrNames) -> bool:
        return isinstance(expr, InputArgumentBase)


class ListOfInputsGatherer(CombineMapper[list, list]):
    """Maps an array to the list of the inputs
    (:class:`~pytato_like.array.InputArgumentBase`) it depends on, each
    input object once (distinct-but-equal inputs are kept), in the order a
    left-to-right depth-first walk meets them.

    As with the set collectors, calling it on a root takes one iterative
    walk unless a subclass overrides a mapping method."""

    def combine(self, *args: list) -> list:
        seen: set[int] = set()
        result = []
        for arg in args:
            for inp in arg:
                if id(inp) not in seen:
                    seen.add(id(inp))
                    result.append(inp)
        return result

    def _map_default(self, expr: ArrayOrNames) -> list:
        below = super()._map_default(expr)
        if isinstance(expr, InputArgumentBase):
            return self.combine([expr], below)
        return below

    def __call__(self, expr: ArrayOrNames) -> list:
        if overrides_map_methods(type(self), ListOfInputsGatherer) \
                or not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.rec(expr)
        key = self.get_cache_key(expr)
        if key not in self._results:
            self._results[key] = self._inputs_in_preorder(expr)
            self._keepalive.append(expr)
        return list(self._results[key])

    @staticmethod
    def _inputs_in_preorder(root: ArrayOrNames) -> list:
        # a pre-order walk that skips revisits meets each input first where
        # the recursive combine of the children's lists puts it
        result = []

        def enter(node: ArrayOrNames) -> bool:
            if isinstance(node, InputArgumentBase):
                result.append(node)
            return True

        for _ in depth_first((root,), _first_child_first, enter):
            pass
        return result


def _first_child_first(node: ArrayOrNames) -> tuple:
    # depth_first walks the last child first
    return walk_children(node)[::-1]


class SizeParamGatherer(_NodeCollector):
    """Maps an array to the frozenset of the
    :class:`~pytato_like.array.SizeParam` it depends on."""

    def _collects(self, expr: ArrayOrNames) -> bool:
        return isinstance(expr, SizeParam)


class NodeCollector(_NodeCollector):
    """Maps an array to the frozenset of the arrays of its DAG (itself
    included) for which ``collect_fn(node)`` is true."""

    def __init__(self, collect_fn, traverse_functions: bool = True) -> None:
        super().__init__()
        self.collect_fn = collect_fn
        self.traverse_functions = traverse_functions

    def _collects(self, expr: ArrayOrNames) -> bool:
        return bool(self.collect_fn(expr))


def collect_nodes(expr: ArrayOrNames, collect_fn) -> frozenset:
    """The arrays of the DAG of *expr* for which ``collect_fn(node)`` is
    true (see :class:`NodeCollector`)."""
    return NodeCollector(collect_fn)(expr)


def get_dependencies(expr: DictOfNamedArrays) -> dict[str, frozenset]:
    """For each name of *expr*, the arrays its result depends on (see
    :class:`DependencyMapper`)."""
    mapper = DependencyMapper()
    return {name: mapper(ary) for name, ary in expr._data.items()}
