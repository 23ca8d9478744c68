"""Mappers that walk a DAG for their side effects.

A walk calls :meth:`WalkMapper.visit` on a node (pre-order; returning False
skips the node's children), walks the children, then calls
:meth:`WalkMapper.post_visit`. :class:`WalkMapper` visits a node once per
path reaching it, as pytato does; :class:`CachedWalkMapper` once overall.

The built-in walk runs on an explicit stack, so any depth works. A subclass
that overrides a ``map_*`` method gets that method called for the nodes of
that class; when such methods call :meth:`~WalkMapper.rec` on nested chains
more than :data:`~pytato_like.transform.mapper.MAX_REC_NESTING` deep, the
deeper walks are deferred until the current one finishes (a walk returns
nothing, so only the order of visits changes, never which visits happen).

.. autoclass:: WalkMapper
    :members: visit, post_visit, rec
.. autoclass:: CachedWalkMapper
.. autoclass:: TopoSortMapper
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING

from pytato_like._traversal import PAUSED, depth_first
from pytato_like.array import Array
from pytato_like.transform._graph import walk_children, with_stack_headroom
from pytato_like.transform.mapper import (
    MAX_REC_NESTING,
    ArrayOrNames,
    Mapper,
    P,
    is_default_map_method,
    with_default_map_methods,
)

if TYPE_CHECKING:
    from pytato_like.function import FunctionDefinition

_STEPS_BEFORE_HEADROOM = 1024

# (mapper class, mapper method name of a node) -> name of the subclass's
# overriding method, or None where the built-in walk applies
_OVERRIDES: dict[tuple[type, str], str | None] = {}


def _first_child_first(node: ArrayOrNames) -> tuple:
    # depth_first walks the last child first
    return walk_children(node)[::-1]


@with_default_map_methods
class WalkMapper(Mapper[None, None, P]):
    """Walks the DAG, calling :meth:`visit` before and :meth:`post_visit`
    after the children of each node, once per path reaching the node."""

    # class-level defaults: subclasses often skip ``super().__init__()``
    _walk_depth = 0
    _deferred: list[tuple[ArrayOrNames, tuple, dict]] | None = None

    def visit(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Called before the children of *expr* are walked; return False to
        skip them (and :meth:`post_visit`)."""
        return True

    def post_visit(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs) -> None:
        """Called after the children of *expr* were walked."""

    def rec_idx_or_size_tuple(self, situp: tuple, *args: P.args, **kwargs: P.kwargs
                              ) -> None:
        """Walk the arrays in a shape or index tuple (pytato's helper for
        ``map_*`` methods)."""
        for s in situp:
            if isinstance(s, Array):
                self.rec(s, *args, **kwargs)

    def _map_default(self, expr: ArrayOrNames, *args: P.args,
                     **kwargs: P.kwargs) -> None:
        # Only runs when a subclass calls e.g. ``super().map_einsum(expr)``:
        # the walk itself inlines this behaviour on its explicit stack.
        if not self.visit(expr, *args, **kwargs):
            return
        for child in walk_children(expr):
            self.rec(child, *args, **kwargs)
        self.post_visit(expr, *args, **kwargs)

    # {{{ the walk

    def _already_walked(self, expr: ArrayOrNames, args: tuple, kwargs: dict) -> bool:
        return False

    def _mark_walked(self, expr: ArrayOrNames, args: tuple, kwargs: dict) -> None:
        pass

    def _overriding_method(self, expr: ArrayOrNames):
        """The subclass's method for *expr*, or None where the built-in walk
        applies."""
        name = getattr(expr, "_mapper_method", None)
        if name is None:
            return self.map_foreign
        key = (type(self), name)
        method_name = _OVERRIDES.get(key, "")
        if method_name == "":
            cls = type(self)
            method_name = name if hasattr(cls, name) else next(
                # a subclass of a node class walks as its base (as Mapper.rec)
                (base.__dict__["_mapper_method"]
                 for base in type(expr).__mro__[1:]
                 if "_mapper_method" in base.__dict__
                 and hasattr(cls, base.__dict__["_mapper_method"])),
                "handle_unsupported_array")
            if is_default_map_method(getattr(cls, method_name)):
                method_name = None
            _OVERRIDES[key] = method_name
        return None if method_name is None else getattr(self, method_name)

    def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs) -> None:
        """Walk the DAG below *expr* (inclusive)."""
        depth = self._walk_depth
        if depth > MAX_REC_NESTING:
            # reached through a deep chain of overridden map_* methods
            # (inside the outermost walk, which owns the list)
            deferred = self._deferred
            assert deferred is not None     # (set by the outermost walk)
            deferred.append((expr, args, kwargs))
            return
        # the outermost walk owns the list of deferred walks and runs them
        owner = self._deferred is None
        if owner:
            self._deferred = []
        try:
            self._walk(expr, args, kwargs)
            if owner:
                deferred = self._deferred
                while deferred:
                    node, node_args, node_kwargs = deferred.pop()
                    self._walk(node, node_args, node_kwargs)
        finally:
            if owner:
                self._deferred = None

    def _walk(self, root: ArrayOrNames, args: tuple, kwargs: dict) -> None:
        visit = self.visit

        def enter(node: ArrayOrNames) -> bool:
            if self._already_walked(node, args, kwargs):
                return False
            self._mark_walked(node, args, kwargs)
            method = self._overriding_method(node)
            if method is None:
                return visit(node, *args, **kwargs)
            self._walk_depth += 1
            try:
                method(node, *args, **kwargs)
            finally:
                self._walk_depth -= 1
            return False

        # once per path; first child first, as in a recursion
        walk = depth_first((root,), _first_child_first, enter, once=False,
                           pause_after=_STEPS_BEFORE_HEADROOM)
        # small walks run right here; long ones continue where the frame
        # stack has room (see _graph.with_stack_headroom)
        if not self._post_visits(walk, args, kwargs):
            with_stack_headroom(self._post_visits, walk, args, kwargs)

    def _post_visits(self, walk: Iterator[tuple[ArrayOrNames, Sequence]],
                     args: tuple, kwargs: dict) -> bool:
        """Run *walk*, calling :meth:`post_visit` on what it yields; False
        when it paused (the rest is still to run)."""
        post_visit = self.post_visit
        for step in walk:
            if step is PAUSED:
                return False
            post_visit(step[0], *args, **kwargs)
        return True

    # }}}


class CachedWalkMapper(WalkMapper[P]):
    """A :class:`WalkMapper` that walks each node (per distinct extra
    arguments) only once, also across calls."""

    def __init__(self, _visited_functions: set[FunctionDefinition] | None = None
                 ) -> None:
        self._visited_functions: set[FunctionDefinition] = (
            set() if _visited_functions is None else _visited_functions)
        self._visited: set[Hashable] = set()
        # keeps visited nodes alive, so that their ids stay unique
        self._visited_nodes: list[ArrayOrNames] = []

    def get_cache_key(self, expr: ArrayOrNames, *args: P.args,
                      **kwargs: P.kwargs) -> Hashable:
        if args or kwargs:
            return (id(expr), args, tuple(sorted(kwargs.items())))
        return id(expr)

    def _already_walked(self, expr: ArrayOrNames, args: tuple, kwargs: dict) -> bool:
        return self.get_cache_key(expr, *args, **kwargs) in self._visited

    def _mark_walked(self, expr: ArrayOrNames, args: tuple, kwargs: dict) -> None:
        self._visited.add(self.get_cache_key(expr, *args, **kwargs))
        self._visited_nodes.append(expr)

    def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs) -> None:
        if self.get_cache_key(expr, *args, **kwargs) in self._visited:
            return
        super().rec(expr, *args, **kwargs)


class TopoSortMapper(CachedWalkMapper[[]]):
    """Collects the nodes in :attr:`topological_order`: every node after
    all the nodes it refers to (a
    :class:`~pytato_like.array.DictOfNamedArrays` walked as root comes
    last).

    .. attribute:: topological_order
    """

    def __init__(self, _visited_functions: set[FunctionDefinition] | None = None
                 ) -> None:
        super().__init__(_visited_functions=_visited_functions)
        self.topological_order: list[ArrayOrNames] = []

    def post_visit(self, expr: ArrayOrNames) -> None:
        self.topological_order.append(expr)
