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

Generic mappers
---------------

As in pytato, the mapper classes are :class:`typing.Generic`, so user code
can name what a mapper returns in its class definition::

    class CountPlaceholders(CombineMapper[int, Never]):
        ...

The type parameters are pytato's: ``Mapper[ResultT, FunctionResultT, P]``
(*P* a :class:`typing.ParamSpec` for the extra arguments),
``CachedMapper[ResultT, FunctionResultT, P]``,
``TransformMapperWithExtraArgs[P]``, ``CombineMapper[ResultT,
FunctionResultT]``, ``WalkMapper[P]``, ``CachedWalkMapper[P]``; the caches
are ``CachedMapperCache[CacheExprT, CacheResultT, P]`` and
``TransformMapperCache[CacheExprT, P]``. Subscripting happens once, when
the class is defined; mapping costs the same as without it.

Caches
------

A caching mapper keeps its results in a :class:`CachedMapperCache` (passed
as ``_cache=``, or made by the constructor), which users may share between
mappers, inspect (``len``, ``in``) or :meth:`~CachedMapperCache.clear`.
:meth:`CachedMapper.rec` reads and writes the cache's dictionary directly on
its hot path; a cache that does more per result (a
:class:`TransformMapperCache`, or a user subclass overriding
:meth:`~CachedMapperCache.add`) gets its :meth:`~CachedMapperCache.add`
called for each new result.

.. autodata:: MAX_REC_NESTING
.. autodata:: ARRAY_MAPPER_METHODS
.. autoclass:: Mapper
    :members: rec, handle_unsupported_array, map_foreign,
        rec_function_definition
.. autoclass:: CacheInputsWithKey
.. autoclass:: CachedMapperCache
    :members: add, retrieve, clear
.. autoclass:: TransformMapperCache
    :members: add
.. autoclass:: CachedMapper
    :members: rec, get_cache_key, clone_for_callee
.. autoclass:: TransformMapper
.. autoclass:: TransformMapperWithExtraArgs
.. autoexception:: ForeignObjectError
.. autoexception:: CacheCollisionError
.. autoexception:: MapperCreatedDuplicateError
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Generic, ParamSpec, TypeVar, overload

from pytato_like._traversal import depth_first
from pytato_like.array import AbstractResultWithNamedArrays, Array, NamedArray
from pytato_like.diagnostic import (
    NotAnArrayError,
    PytatoLikeError,
    UnsupportedArrayError,
)
from pytato_like.transform._graph import walk_children, with_stack_headroom

if TYPE_CHECKING:
    from typing_extensions import Self

    from pytato_like.function import FunctionDefinition

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
    "map_call", "map_named_call_result", "map_csr_matmul", "map_loopy_call",
    "map_loopy_call_result",
)

# pytato's type parameters (see the module documentation)
ResultT = TypeVar("ResultT")
FunctionResultT = TypeVar("FunctionResultT")
P = ParamSpec("P")
CacheExprT = TypeVar("CacheExprT")
CacheResultT = TypeVar("CacheResultT")
CacheKeyT = Hashable
#: What the array mappers map: an array or a container of named arrays.
ArrayOrNames = Array | AbstractResultWithNamedArrays
#: A type variable over :data:`ArrayOrNames` (pytato's, for annotations).
ArrayOrNamesTc = TypeVar("ArrayOrNamesTc", Array, AbstractResultWithNamedArrays)


# {{{ errors

class ForeignObjectError(NotAnArrayError, ValueError):
    """A mapper was given an object that is neither an array nor a container
    of named arrays (pytato raises it from ``Mapper.rec``)."""


class CacheCollisionError(PytatoLikeError, ValueError):
    """Two distinct inputs of a mapper got the same cache key (only checked
    when the cache was made with ``err_on_collision=True``)."""


class MapperCreatedDuplicateError(PytatoLikeError, ValueError):
    """A transform built a new node equal to the node it mapped, from the
    very same children: a needless copy that duplicates the node in the
    DAG (only checked with ``err_on_created_duplicate=True``)."""

# }}}


def _describe(expr: object) -> str:
    if isinstance(expr, Array):
        return f"{type(expr).__name__} of shape {expr.shape}, dtype {expr.dtype}"
    return type(expr).__name__


class Mapper(Generic[ResultT, FunctionResultT, P]):
    """Dispatches a node to the method named by its class's
    ``_mapper_method``.

    Arrays whose class has no method here go to
    :meth:`handle_unsupported_array`, other objects to :meth:`map_foreign`.
    This class has no ``map_*`` methods and no cache: a subclass visits a
    node once per path that reaches it, recursing as deeply as its methods
    do. Use :class:`CachedMapper` or the built-in mappers for deep DAGs.
    """

    def handle_unsupported_array(self, expr: ArrayOrNames, *args: P.args,
                                 **kwargs: P.kwargs) -> ResultT:
        """Called for arrays whose class has no mapper method here."""
        raise UnsupportedArrayError(
            f"{type(self).__name__} has no method '{expr._mapper_method}' "
            f"for {_describe(expr)}")

    def map_foreign(self, expr: object, *args: P.args, **kwargs: P.kwargs
                    ) -> ResultT:
        """Called for objects that are not arrays or array containers;
        raises :class:`ForeignObjectError`."""
        raise ForeignObjectError(
            f"{type(self).__name__} cannot map an object of type "
            f"{type(expr).__name__}: {expr!r:.80}")

    def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs
            ) -> ResultT:
        """Map *expr* by dispatching on its class."""
        name = getattr(expr, "_mapper_method", None)
        if name is None:
            return self.map_foreign(expr, *args, **kwargs)
        method = getattr(self, name, None)
        if method is None:
            if isinstance(expr, (Array, AbstractResultWithNamedArrays)):
                # as pytato: a node class without a method here (e.g. a
                # user's subclass of a node class) gets its base's method
                for base in type(expr).__mro__[1:]:
                    base_name = base.__dict__.get("_mapper_method")
                    if base_name is not None and base_name != name:
                        method = getattr(self, base_name, None)
                        if method is not None:
                            return method(expr, *args, **kwargs)
                return self.handle_unsupported_array(expr, *args, **kwargs)
            return self.map_foreign(expr, *args, **kwargs)
        return method(expr, *args, **kwargs)

    def rec_function_definition(self, expr: FunctionDefinition,
                                *args: P.args, **kwargs: P.kwargs
                                ) -> FunctionResultT:
        """Map a function definition with ``map_function_definition``."""
        method = getattr(self, "map_function_definition", None)
        if method is None:
            raise UnsupportedArrayError(
                f"{type(self).__name__} has no method "
                f"'map_function_definition' for a {type(expr).__name__}")
        return method(expr, *args, **kwargs)

    def __call__(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs
                 ) -> ResultT:
        return self.rec(expr, *args, **kwargs)


# {{{ caches

class CacheInputsWithKey(Generic[CacheExprT, P]):
    """What a cache is told about one mapping: the mapped *expr*, its cache
    *key*, and the extra arguments (*args*, *kwargs*)."""

    __slots__ = ("args", "expr", "key", "kwargs")

    def __init__(self, expr: CacheExprT, key: Hashable, *args: P.args,
                 **kwargs: P.kwargs) -> None:
        self.expr = expr
        self.key = key
        self.args = args
        self.kwargs = kwargs


class CachedMapperCache(Generic[CacheExprT, CacheResultT, P]):
    """The results of a caching mapper, by cache key.

    The mapped inputs are kept too: that keeps the nodes whose ``id`` is a
    key alive (so ids stay unique). With *err_on_collision* they are kept
    by key, so that two distinct inputs with one key are detected.
    """

    def __init__(self, err_on_collision: bool = False) -> None:
        self.err_on_collision = err_on_collision
        self._input_key_to_result: dict[Hashable, CacheResultT] = {}
        self._input_key_to_expr: dict[Hashable, CacheExprT] = {}
        # a list append is cheaper than a dict entry on the hot path
        self._kept_inputs: list[CacheExprT] = []

    def add(self, inputs: CacheInputsWithKey[CacheExprT, P],
            result: CacheResultT) -> CacheResultT:
        """Store *result* for ``inputs.key``; returns the result to use
        (here *result* itself)."""
        self._input_key_to_result[inputs.key] = result
        if self.err_on_collision:
            self._input_key_to_expr[inputs.key] = inputs.expr
        else:
            self._kept_inputs.append(inputs.expr)
        return result

    def retrieve(self, inputs: CacheInputsWithKey[CacheExprT, P]
                 ) -> CacheResultT:
        """The result stored for ``inputs.key``; raises :class:`KeyError`
        if there is none, :class:`CacheCollisionError` if it belongs to a
        different input (with *err_on_collision*)."""
        result = self._input_key_to_result[inputs.key]
        if self.err_on_collision \
                and self._input_key_to_expr[inputs.key] is not inputs.expr:
            raise CacheCollisionError(
                f"cache key {inputs.key!r:.60} maps both "
                f"{_describe(self._input_key_to_expr[inputs.key])} and "
                f"{_describe(inputs.expr)}")
        return result

    def clear(self) -> None:
        """Forget every result (in place, so mappers sharing this cache see
        the empty cache)."""
        self._input_key_to_result.clear()
        self._input_key_to_expr.clear()
        self._kept_inputs.clear()

    def __len__(self) -> int:
        return len(self._input_key_to_result)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._input_key_to_result


class TransformMapperCache(CachedMapperCache[CacheExprT, CacheExprT, P]):
    """The cache of a mapper whose results are arrays.

    As pytato's: the first result of each structural class (``==``) is kept,
    and a later result equal to it is replaced by it, so a transform using
    this cache returns a DAG without duplicates (this is how
    :class:`~pytato_like.transform.Deduplicator` works; the comparison is
    cheap because the children of both results are already the same
    objects). With *err_on_created_duplicate*, a result that is a new node
    equal to the mapped input, built from the very same children, raises
    :class:`MapperCreatedDuplicateError`.

    The built-in mappers use a plain :class:`CachedMapperCache` unless given
    this one: they key by identity and return the input DAG itself when
    nothing changes (see :mod:`pytato_like.transform.mapper`).
    """

    def __init__(self, err_on_collision: bool = False,
                 err_on_created_duplicate: bool = False) -> None:
        super().__init__(err_on_collision=err_on_collision)
        self.err_on_created_duplicate = err_on_created_duplicate
        self._result_to_cached_result: dict[CacheExprT, CacheExprT] = {}
        self._merge_results = True

    def add(self, inputs: CacheInputsWithKey[CacheExprT, P],
            result: CacheExprT) -> CacheExprT:
        """Store the first result equal to *result* (*result* itself if
        new) and return it."""
        if self._merge_results:
            first = self._result_to_cached_result.get(result)
            if first is not None:
                return super().add(inputs, first)
        if self.err_on_created_duplicate \
                and _is_created_duplicate(inputs.expr, result):
            raise MapperCreatedDuplicateError(
                f"mapping {_describe(inputs.expr)} built an equal new node "
                "from the same children; return the node itself instead")
        if self._merge_results:
            self._result_to_cached_result[result] = result
        return super().add(inputs, result)

    def clear(self) -> None:
        super().clear()
        self._result_to_cached_result.clear()


def _is_created_duplicate(expr: object, result: object) -> bool:
    if result is expr or type(result) is not type(expr) \
            or hash(result) != hash(expr):
        return False
    old, new = walk_children(expr), walk_children(result)
    return (len(old) == len(new) and all(a is b for a, b in zip(old, new))
            and result == expr)

# }}}


class CachedMapper(Mapper[ResultT, FunctionResultT, P]):
    """A mapper that maps each node (per distinct extra arguments) once and
    returns the cached result afterwards.

    Works on DAGs of any depth at the default recursion limit, also when
    subclasses' ``map_*`` methods recurse with ``self.rec`` (see the module
    documentation for how).

    :arg err_on_collision: check that no two distinct inputs share a cache
        key (only matters when :meth:`get_cache_key` is overridden: the
        default keys are node identities).
    :arg _cache: the :class:`CachedMapperCache` to use (e.g. shared with
        another mapper); a new one by default.
    :arg _function_cache: the same for function definitions.
    """

    _rec_depth = 0

    def __init__(self, err_on_collision: bool = False,
                 _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        if _cache is None:
            _cache = self._make_default_cache(err_on_collision)
        if _function_cache is None:
            _function_cache = self._make_default_cache(err_on_collision)
        self._cache = _cache
        self._function_cache = _function_cache
        # the hot path of rec reads and writes these dicts directly
        self._results = _cache._input_key_to_result
        self._keepalive = _cache._kept_inputs
        # a cache that only stores is filled inline; others get add() called
        self._plain_store = (type(_cache).add is CachedMapperCache.add
                             and not _cache.err_on_collision)
        self._rec_depth = 0
        # rec computes the default key inline (it runs once per node)
        self._keys_are_ids = type(self).get_cache_key is CachedMapper.get_cache_key
        self._check_collisions = _cache.err_on_collision and not self._keys_are_ids

    def _make_default_cache(self, err_on_collision: bool) -> CachedMapperCache:
        return CachedMapperCache(err_on_collision=err_on_collision)

    def get_cache_key(self, expr: ArrayOrNames, *args: P.args,
                      **kwargs: P.kwargs) -> Hashable:
        """The cache key of mapping *expr* with these extra arguments."""
        if args or kwargs:
            return (id(expr), args, tuple(sorted(kwargs.items())))
        return id(expr)

    def clone_for_callee(self, function: FunctionDefinition) -> Self:
        """A fresh mapper of this class for the body of *function* (its
        arrays live in their own namespace), sharing the function cache."""
        return type(self)(err_on_collision=self._cache.err_on_collision,
                          _function_cache=self._function_cache)

    def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs
            ) -> ResultT:
        if args or kwargs or not self._keys_are_ids:
            key = self.get_cache_key(expr, *args, **kwargs)
            if self._check_collisions and key in self._results:
                return self._cache.retrieve(
                    CacheInputsWithKey(expr, key, *args, **kwargs))
        else:
            key = id(expr)
        try:
            return self._results[key]
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
        if self._plain_store:
            self._results[key] = result
            self._keepalive.append(expr)
            return result
        return self._cache.add(CacheInputsWithKey(expr, key, *args, **kwargs),
                               result)

    def rec_function_definition(self, expr: FunctionDefinition,
                                *args: P.args, **kwargs: P.kwargs
                                ) -> FunctionResultT:
        """Map a function definition once (cached in the function cache)."""
        key = (id(expr), args, tuple(sorted(kwargs.items())))
        inputs: CacheInputsWithKey[FunctionDefinition, P] = CacheInputsWithKey(
            expr, key, *args, **kwargs)
        try:
            return self._function_cache.retrieve(inputs)
        except KeyError:
            pass
        return self._function_cache.add(
            inputs, Mapper.rec_function_definition(self, expr, *args, **kwargs))

    def _map_uncached(self, expr: ArrayOrNames, *args: P.args,
                      **kwargs: P.kwargs) -> ResultT:
        return Mapper.rec(self, expr, *args, **kwargs)

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        """Nodes :meth:`rec` maps ahead of *expr* on deep DAGs. A
        :class:`~pytato_like.array.NamedArray` contributes its container too,
        which the copying mappers rebuild."""
        if type(expr) is NamedArray:
            return (expr.expr, expr._container)
        return walk_children(expr)

    def _map_descendants_first(self, root: ArrayOrNames, args: tuple,
                               kwargs: dict) -> None:
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

    def _map_descendants_loop(self, root: ArrayOrNames, args: tuple,
                              kwargs: dict) -> None:
        cache = self._results
        key_of = self.get_cache_key

        def uncached(node: ArrayOrNames) -> bool:
            # the root (reachable again through a call's results) is
            # mapped by the caller
            return node is not root and key_of(node, *args, **kwargs) not in cache

        for node, _ in depth_first(self._descendants_to_premap(root),
                                   self._descendants_to_premap, uncached):
            self.rec(node, *args, **kwargs)


class _TransformMapperInit:
    """The constructor shared by :class:`TransformMapper` and
    :class:`TransformMapperWithExtraArgs`."""

    def __init__(self, err_on_collision: bool = False,
                 err_on_created_duplicate: bool = False,
                 _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        if _cache is None and err_on_created_duplicate:
            # the check alone: equal results of distinct inputs stay distinct
            _cache = TransformMapperCache(err_on_collision, True)
            _cache._merge_results = False
        super().__init__(err_on_collision=err_on_collision,  # type: ignore[call-arg]
                         _cache=_cache, _function_cache=_function_cache)

    def clone_for_callee(self, function: FunctionDefinition) -> Self:
        cache = self._cache  # type: ignore[attr-defined]
        return type(self)(
            err_on_collision=cache.err_on_collision,
            err_on_created_duplicate=getattr(cache, "err_on_created_duplicate",
                                             False),
            _function_cache=self._function_cache)  # type: ignore[attr-defined]


class TransformMapper(_TransformMapperInit,
                      CachedMapper[ArrayOrNames, "FunctionDefinition", []]):
    """Base class of the cached mappers whose results are arrays (or
    :class:`~pytato_like.array.DictOfNamedArrays`).

    :arg err_on_created_duplicate: raise
        :class:`MapperCreatedDuplicateError` when a method returns a new
        node equal to the one it mapped, built from the same children.
    :arg _cache: a :class:`CachedMapperCache` (a plain one, the default,
        keeps duplicates of the input as they are) or a
        :class:`TransformMapperCache` (merges equal results).
    """

    if TYPE_CHECKING:
        # an array maps to an array, a container to a container
        @overload
        def rec(self, expr: Array) -> Array: ...
        @overload
        def rec(self, expr: AbstractResultWithNamedArrays
                ) -> AbstractResultWithNamedArrays: ...
        @overload
        def rec(self, expr: ArrayOrNames) -> ArrayOrNames: ...
        def rec(self, expr: ArrayOrNames) -> ArrayOrNames: ...

        @overload
        def __call__(self, expr: Array) -> Array: ...
        @overload
        def __call__(self, expr: AbstractResultWithNamedArrays
                     ) -> AbstractResultWithNamedArrays: ...
        @overload
        def __call__(self, expr: ArrayOrNames) -> ArrayOrNames: ...
        def __call__(self, expr: ArrayOrNames) -> ArrayOrNames: ...

        @overload
        def _map_uncached(self, expr: Array) -> Array: ...
        @overload
        def _map_uncached(self, expr: AbstractResultWithNamedArrays
                          ) -> AbstractResultWithNamedArrays: ...
        def _map_uncached(self, expr: ArrayOrNames) -> ArrayOrNames: ...


class TransformMapperWithExtraArgs(_TransformMapperInit,
                                   CachedMapper[ArrayOrNames,
                                                "FunctionDefinition", P]):
    """A :class:`TransformMapper` whose methods take extra arguments (of
    the :class:`typing.ParamSpec` *P*, e.g.
    ``TransformMapperWithExtraArgs[[int]]``), passed down along each path;
    results are cached per node and arguments."""

    if TYPE_CHECKING:
        @overload
        def rec(self, expr: Array, *args: P.args, **kwargs: P.kwargs
                ) -> Array: ...
        @overload
        def rec(self, expr: AbstractResultWithNamedArrays, *args: P.args,
                **kwargs: P.kwargs) -> AbstractResultWithNamedArrays: ...
        @overload
        def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs
                ) -> ArrayOrNames: ...
        def rec(self, expr: ArrayOrNames, *args: P.args, **kwargs: P.kwargs
                ) -> ArrayOrNames: ...

        @overload
        def __call__(self, expr: Array, *args: P.args, **kwargs: P.kwargs
                     ) -> Array: ...
        @overload
        def __call__(self, expr: AbstractResultWithNamedArrays,
                     *args: P.args, **kwargs: P.kwargs
                     ) -> AbstractResultWithNamedArrays: ...
        @overload
        def __call__(self, expr: ArrayOrNames, *args: P.args,
                     **kwargs: P.kwargs) -> ArrayOrNames: ...
        def __call__(self, expr: ArrayOrNames, *args: P.args,
                     **kwargs: P.kwargs) -> ArrayOrNames: ...


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


def is_default_map_method(func: object) -> bool:
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
