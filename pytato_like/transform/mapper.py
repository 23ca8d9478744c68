"""The mapper engine: dispatch, caching, and deep DAGs without recursion.

A mapper is called on an array (or a
:class:`~pytato_like.array.DictOfNamedArrays`) and dispatches to the method
named by the node class's ``_mapper_method`` (``map_index_lambda``,
``map_einsum``, ...). Users subclass a mapper, override the ``map_*``
methods they care about and call ``self.rec(child)`` for children, exactly
as with pytato.

How deep DAGs work
------------------

Python's default recursion limit (1000 frames) would stop a ``map_*`` method
that calls ``self.rec`` on a chain a few hundred nodes deep. The caching
mappers therefore count how deeply calls of :meth:`CachedMapper.rec` nest.
When a cache miss happens more than :data:`MAX_REC_NESTING` levels deep,
:meth:`~CachedMapper.rec` first maps the not-yet-cached descendants of the
node itself, children first, with an explicit stack, calling ``rec`` on each
with the same extra arguments. By the time the node's ``map_*`` method asks
for its children they are all cache hits, so nesting never exceeds a small
constant whatever the depth of the DAG. On DAGs shallower than the threshold
nothing changes: the user's methods drive the traversal exactly as in
pytato.

The price of this design: on deep DAGs a descendant may be mapped before the
user's method asks for it, and descendants a user method would never have
visited (e.g. below a node it replaces wholesale) are mapped too. For pure
mappers, which is what the caching mappers are for, this changes no result.

Caches are keyed by node identity (``id``), with the node kept alive by the
mapper: an identity lookup is O(1), whereas a lookup by structural equality
costs a DAG walk whenever two distinct nodes are equal, which can make a
traversal of a DAG with duplicated deep sub-DAGs quadratic. Distinct but
equal nodes are hence mapped separately (to equal results).

.. autodata:: MAX_REC_NESTING
.. autodata:: ARRAY_MAPPER_METHODS
.. autoclass:: Mapper
    :members: rec, handle_unsupported_array, map_foreign
.. autoclass:: CachedMapper
    :members: rec, get_cache_key
.. autoclass:: TransformMapper
"""

from __future__ import annotations

from typing import Any

from pytato_like.array import AbstractResultWithNamedArrays, Array, NamedArray
from pytato_like.diagnostic import NotAnArrayError, UnsupportedArrayError
from pytato_like.transform._graph import walk_children, with_stack_headroom

#: Nesting depth of :meth:`CachedMapper.rec` (and of user-overridden
#: methods in the walk mappers) beyond which descendants are mapped
#: iteratively first. Small enough that user methods of a few frames each
#: stay far below the default recursion limit.
MAX_REC_NESTING = 24

#: The mapper method names of the node classes (including the distributed
#: nodes), for which every built-in mapper provides a method.
ARRAY_MAPPER_METHODS = (
    "map_placeholder", "map_data_wrapper", "map_size_param",
    "map_index_lambda", "map_einsum", "map_reshape", "map_axis_permutation",
    "map_roll", "map_basic_index", "map_contiguous_advanced_index",
    "map_non_contiguous_advanced_index", "map_concatenate", "map_stack",
    "map_named_array", "map_distributed_recv",
    "map_distributed_send_ref_holder", "map_dict_of_named_arrays",
)


def _describe(expr: Any) -> str:
    if isinstance(expr, Array):
        return f"{type(expr).__name__} of shape {expr.shape}, dtype {expr.dtype}"
    return type(expr).__name__


class Mapper:
    """Dispatches a node to the method named by its class's
    ``_mapper_method``.

    Arrays whose class has no method here go to
    :meth:`handle_unsupported_array`, other objects to :meth:`map_foreign`.
    This class has no ``map_*`` methods and no cache: a subclass visits a
    node once per path that reaches it, recursing as deeply as its methods
    do. Use :class:`CachedMapper` or the built-in mappers for deep DAGs.
    """

    def handle_unsupported_array(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        """Called for arrays whose class has no mapper method here."""
        raise UnsupportedArrayError(
            f"{type(self).__name__} has no method '{expr._mapper_method}' "
            f"for {_describe(expr)}")

    def map_foreign(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        """Called for objects that are not arrays or array containers."""
        raise NotAnArrayError(
            f"{type(self).__name__} cannot map an object of type "
            f"{type(expr).__name__}")

    def rec(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        """Map *expr* by dispatching on its class."""
        name = getattr(expr, "_mapper_method", None)
        if name is None:
            return self.map_foreign(expr, *args, **kwargs)
        method = getattr(self, name, None)
        if method is None:
            if isinstance(expr, (Array, AbstractResultWithNamedArrays)):
                return self.handle_unsupported_array(expr, *args, **kwargs)
            return self.map_foreign(expr, *args, **kwargs)
        return method(expr, *args, **kwargs)

    def __call__(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        return self.rec(expr, *args, **kwargs)


class CachedMapper(Mapper):
    """A mapper that maps each node (per distinct extra arguments) once and
    returns the cached result afterwards.

    Works on DAGs of any depth at the default recursion limit, also when
    subclasses' ``map_*`` methods recurse with ``self.rec`` (see the module
    documentation for how).
    """

    _rec_depth = 0

    def __init__(self) -> None:
        self._cache: dict[Any, Any] = {}
        # keeps the nodes whose ids key the cache alive (ids stay unique)
        self._cached_nodes: list[Any] = []
        self._rec_depth = 0
        # rec computes the default key inline (it runs once per node)
        self._keys_are_ids = type(self).get_cache_key is CachedMapper.get_cache_key

    def get_cache_key(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        """The cache key of mapping *expr* with these extra arguments."""
        if args or kwargs:
            return (id(expr), args, tuple(sorted(kwargs.items())))
        return id(expr)

    def rec(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not self._keys_are_ids:
            key = self.get_cache_key(expr, *args, **kwargs)
        else:
            key = id(expr)
        try:
            return self._cache[key]
        except KeyError:
            pass
        depth = self._rec_depth
        if depth > MAX_REC_NESTING:
            self._map_descendants_first(expr, args, kwargs)
        self._rec_depth = depth + 1
        try:
            result = self._map_uncached(expr, *args, **kwargs)
        finally:
            self._rec_depth = depth
        self._cache[key] = result
        self._cached_nodes.append(expr)
        return result

    def _map_uncached(self, expr: Any, *args: Any, **kwargs: Any) -> Any:
        return Mapper.rec(self, expr, *args, **kwargs)

    def _descendants_to_premap(self, expr: Any) -> tuple:
        """Nodes :meth:`rec` maps ahead of *expr* on deep DAGs. A
        :class:`~pytato_like.array.NamedArray` contributes its container too,
        which the copying mappers rebuild."""
        if type(expr) is NamedArray:
            return (expr.expr, expr._container)
        return walk_children(expr)

    def _map_descendants_first(self, root: Any, args: tuple, kwargs: dict) -> None:
        """Map every uncached descendant of *root*, children before users,
        with an explicit stack, so that mapping *root* needs only cache
        hits."""
        saved_depth = self._rec_depth
        # the nodes mapped here start a fresh, shallow nesting
        self._rec_depth = 0
        try:
            with_stack_headroom(self._map_descendants_loop, root, args, kwargs)
        finally:
            self._rec_depth = saved_depth

    def _map_descendants_loop(self, root: Any, args: tuple, kwargs: dict) -> None:
        cache = self._cache
        key_of = self.get_cache_key
        seen = {id(root)}
        stack: list[tuple[Any, bool]] = [
            (child, False) for child in self._descendants_to_premap(root)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                self.rec(node, *args, **kwargs)
                continue
            if id(node) in seen or key_of(node, *args, **kwargs) in cache:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for child in self._descendants_to_premap(node):
                if id(child) not in seen:
                    stack.append((child, False))


class TransformMapper(CachedMapper):
    """Base class of the cached mappers whose results are arrays (or
    :class:`~pytato_like.array.DictOfNamedArrays`)."""


def _default_method(name: str):
    def method(self, expr, *args, **kwargs):
        return self._map_default(expr, *args, **kwargs)
    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = "Default: see ``_map_default`` of this mapper."
    method._pt_default_map_method = True  # type: ignore[attr-defined]
    return method


def with_default_map_methods(cls):
    """Class decorator: every name of :data:`ARRAY_MAPPER_METHODS` (and
    ``handle_unsupported_array``) not defined in the class body becomes a
    method calling ``self._map_default``, so the built-in mappers handle
    every node class -- also ones added later -- generically over the
    ``_fields`` table, while users still override named methods."""
    for name in (*ARRAY_MAPPER_METHODS, "handle_unsupported_array"):
        if name not in cls.__dict__:
            setattr(cls, name, _default_method(name))
    return cls


def is_default_map_method(func: Any) -> bool:
    """Whether *func* is one of the generated default methods."""
    return getattr(func, "_pt_default_map_method", False)


def overrides_map_methods(cls: type, base: type) -> bool:
    """Whether *cls* (a subclass of *base*) redefines any method that
    decides what the mapper computes."""
    result = _OVERRIDE_CACHE.get((cls, base))
    if result is None:
        result = False
        for klass in cls.__mro__:
            if klass is base:
                break
            if any(name.startswith("map_") or name in _BEHAVIOUR_METHODS
                   for name in klass.__dict__):
                result = True
                break
        _OVERRIDE_CACHE[cls, base] = result
    return result


_BEHAVIOUR_METHODS = frozenset({
    "rec", "__call__", "combine", "handle_unsupported_array", "_map_default",
    "get_cache_key", "visit", "post_visit", "_map_uncached"})
_OVERRIDE_CACHE: dict[tuple[type, type], bool] = {}
