"""Mappers that rebuild a DAG: copies and rewrites.

:class:`CopyMapper` rebuilds every node from its mapped children, generically
over each node class's ``_fields`` table, so it handles every node class
(also ones added later, such as the distributed nodes). A node whose
children all map to themselves is returned as is (``replace_if_different``
semantics), so an unmodified copy *is* the input DAG, object for object.
Subclass it and override ``map_*`` methods to rewrite a DAG.

.. autoclass:: CopyMapper
.. autoclass:: CopyMapperWithExtraArgs
.. autoclass:: EdgeCachedMapper
    :members: handle_edge
.. autoclass:: CachedMapAndCopyMapper
.. autofunction:: copy_dict_of_named_arrays
.. autofunction:: map_and_copy
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, overload

from pytato_like.array import (
    BINDINGS,
    SHAPE,
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    IndexLambda,
    NamedArray,
)
from pytato_like.transform._graph import array_fields
from pytato_like.transform.mapper import (
    ArrayOrNames,
    CachedMapperCache,
    P,
    TransformMapper,
    TransformMapperWithExtraArgs,
    with_default_map_methods,
)

if TYPE_CHECKING:
    from pytools.tag import Tag
    from typing_extensions import Self

    from pytato_like.array import (
        AdvancedIndexInContiguousAxes,
        AdvancedIndexInNoncontiguousAxes,
        AxisPermutation,
        BasicIndex,
        Concatenate,
        DataWrapper,
        Einsum,
        IndexLambda,
        Placeholder,
        Reshape,
        Roll,
        SizeParam,
        Stack,
    )
    from pytato_like.distributed.nodes import (
        DistributedRecv,
        DistributedSendRefHolder,
    )
    from pytato_like.function import Call, FunctionDefinition, NamedCallResult
    from pytato_like.loopy import LoopyCall, LoopyCallResult
    from pytato_like.sparse import CSRMatmul


def rebuild_with(expr: Any, map_child: Callable[[Any], Any],
                 tags: frozenset[Tag] | None = None) -> Any:
    """*expr* with every child replaced by ``map_child(child)`` (and, for an
    array, its tags replaced by *tags* if given); *expr* itself when nothing
    changed.

    Children are the arrays in the node's fields, for a
    :class:`~pytato_like.array.NamedArray` its container, and for a
    :class:`~pytato_like.array.DictOfNamedArrays` its arrays."""
    t = type(expr)
    if t is IndexLambda:
        return _rebuild_index_lambda(expr, map_child, tags)
    if t is NamedArray:
        container = map_child(expr._container)
        new_tags = expr.tags if tags is None else tags
        if container is expr._container and new_tags is expr.tags:
            return expr
        return NamedArray(container, expr.name, axes=expr.axes, tags=new_tags)
    if isinstance(expr, Array):
        changes = None if tags is None else {"tags": tags}
        for name, kind in array_fields(t):
            old = getattr(expr, name)
            new = kind.map(old, map_child)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        return expr if changes is None else expr.copy(**changes)
    if isinstance(expr, DictOfNamedArrays):
        data = {name: map_child(ary) for name, ary in expr._data.items()}
        if all(data[name] is ary for name, ary in expr._data.items()):
            return expr
        return DictOfNamedArrays(data, tags=expr.tags)
    raise TypeError(f"cannot rebuild a {t.__name__}")


def _rebuild_index_lambda(expr: IndexLambda,
                          map_child: Callable[[Array], Array],
                          tags: frozenset[Tag] | None) -> IndexLambda:
    """:func:`rebuild_with` of the most common node, without the generic
    field walk: its children are its bindings and the symbolic extents of
    its shape."""
    bindings = BINDINGS.map(expr.bindings, map_child)
    shape = expr.shape
    for extent in shape:
        if type(extent) is not int:
            shape = SHAPE.map(shape, map_child)
            break
    if tags is None:
        if bindings is expr.bindings and shape is expr.shape:
            return expr
        tags = expr.tags
    return index_lambda_with(expr, bindings, shape, tags)


def index_lambda_with(expr: IndexLambda, bindings: Mapping[str, Array],
                      shape: tuple, tags: frozenset[Tag]) -> IndexLambda:
    """A new index lambda: *expr* with the given bindings, shape and tags
    (what :meth:`~pytato_like.array.Array.copy` makes, without reading the
    fields it would replace: the hot path of rewriting passes)."""
    new = IndexLambda(expr.expr, shape, expr.dtype, bindings,
                      expr.var_to_reduction_descr, axes=expr.axes, tags=tags)
    # (as Array.copy: set after construction, outside the hash)
    if expr.non_equality_tags or new.non_equality_tags:
        object.__setattr__(new, "non_equality_tags", expr.non_equality_tags)
    return new


@with_default_map_methods
class CopyMapper(TransformMapper):
    """Rebuilds a DAG; every ``map_*`` method maps the children with
    :meth:`rec` and rebuilds the node if any child changed.

    .. note:: This does not copy the data of a
       :class:`~pytato_like.array.DataWrapper`.
    """

    def _map_default(self, expr: ArrayOrNames) -> ArrayOrNames:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return rebuild_with(expr, self.rec)

    def rec_size_tuple(self, situp: tuple) -> tuple:
        """A shape with its size expressions mapped (the same tuple when
        none changed), for ``map_*`` methods written as in pytato."""
        return SHAPE.map(situp, self.rec)

    rec_idx_tuple = rec_size_tuple

    if TYPE_CHECKING:
        # made by with_default_map_methods (each calls _map_default)
        def map_placeholder(self, expr: Placeholder) -> Array: ...
        def map_data_wrapper(self, expr: DataWrapper) -> Array: ...
        def map_size_param(self, expr: SizeParam) -> Array: ...
        def map_index_lambda(self, expr: IndexLambda) -> Array: ...
        def map_einsum(self, expr: Einsum) -> Array: ...
        def map_reshape(self, expr: Reshape) -> Array: ...
        def map_axis_permutation(self, expr: AxisPermutation) -> Array: ...
        def map_roll(self, expr: Roll) -> Array: ...
        def map_basic_index(self, expr: BasicIndex) -> Array: ...
        def map_contiguous_advanced_index(
            self, expr: AdvancedIndexInContiguousAxes) -> Array: ...
        def map_non_contiguous_advanced_index(
            self, expr: AdvancedIndexInNoncontiguousAxes) -> Array: ...
        def map_concatenate(self, expr: Concatenate) -> Array: ...
        def map_stack(self, expr: Stack) -> Array: ...
        def map_named_array(self, expr: NamedArray) -> Array: ...
        def map_distributed_recv(self, expr: DistributedRecv) -> Array: ...
        def map_distributed_send_ref_holder(
            self, expr: DistributedSendRefHolder) -> Array: ...
        def map_dict_of_named_arrays(self, expr: DictOfNamedArrays
                                     ) -> AbstractResultWithNamedArrays: ...
        def map_named_call_result(self, expr: NamedCallResult) -> Array: ...
        def map_csr_matmul(self, expr: CSRMatmul) -> Array: ...
        def map_loopy_call(self, expr: LoopyCall
                           ) -> AbstractResultWithNamedArrays: ...
        def map_loopy_call_result(self, expr: LoopyCallResult) -> Array: ...

    def map_call(self, expr: Call) -> Call:
        """The call with its definition mapped (once per definition, see
        :meth:`map_function_definition`) and its arguments mapped."""
        function = self.rec_function_definition(expr.function)
        bindings = BINDINGS.map(expr.bindings, self.rec)
        if function is expr.function and bindings is expr.bindings:
            return expr
        return expr.copy(function=function, bindings=bindings)

    def map_function_definition(self, expr: FunctionDefinition
                                ) -> FunctionDefinition:
        """The definition with its body mapped by a mapper of this class
        made with :meth:`clone_for_callee` (the body is a namespace of its
        own: nothing cached for the caller's DAG is reused)."""
        mapper = self.clone_for_callee(expr)
        returns = {name: mapper(ret) for name, ret in expr.returns.items()}
        if all(returns[name] is ret for name, ret in expr.returns.items()):
            return expr
        return expr.copy(returns=returns)


@with_default_map_methods
class CopyMapperWithExtraArgs(TransformMapperWithExtraArgs[P]):
    """Like :class:`CopyMapper`, but every method takes extra ``*args,
    **kwargs``, which the default methods pass on unchanged to the
    children. Results are cached per node and arguments (which must be
    hashable)."""

    def _map_default(self, expr: ArrayOrNames, *args: P.args,
                     **kwargs: P.kwargs) -> ArrayOrNames:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr, *args, **kwargs)
        return rebuild_with(expr, lambda child: self.rec(child, *args, **kwargs))

    def rec_size_tuple(self, situp: tuple, *args: P.args,
                       **kwargs: P.kwargs) -> tuple:
        """A shape with its size expressions mapped with the extra
        arguments (the same tuple when none changed)."""
        return SHAPE.map(situp, lambda child: self.rec(child, *args, **kwargs))

    rec_idx_tuple = rec_size_tuple


@with_default_map_methods
class EdgeCachedMapper(TransformMapper):
    """Rebuilds a DAG calling :meth:`handle_edge` on every edge (user,
    child); the value it returns replaces the child. Results are cached per
    node."""

    def handle_edge(self, expr: ArrayOrNames, child: ArrayOrNames
                    ) -> ArrayOrNames:
        """What replaces *child* in the rebuilt *expr*; typically
        ``self.rec(child)`` or something built from it."""
        raise NotImplementedError(
            f"{type(self).__name__} must define handle_edge(expr, child)")

    def _map_default(self, expr: ArrayOrNames) -> ArrayOrNames:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return rebuild_with(expr, lambda child: self.handle_edge(expr, child))


class CachedMapAndCopyMapper(CopyMapper):
    """Applies *map_fn* to each node, then copies what *map_fn* returned,
    mapping its children the same way. Each node goes through *map_fn*
    exactly once."""

    def __init__(self, map_fn: Callable[[ArrayOrNames], ArrayOrNames],
                 _cache: CachedMapperCache | None = None,
                 _function_cache: CachedMapperCache | None = None) -> None:
        super().__init__(_cache=_cache, _function_cache=_function_cache)
        self.map_fn = map_fn
        self._fn_results: dict[int, ArrayOrNames] = {}

    def _apply_map_fn(self, expr: ArrayOrNames) -> ArrayOrNames:
        try:
            return self._fn_results[id(expr)]
        except KeyError:
            result = self._fn_results[id(expr)] = self.map_fn(expr)
            return result

    def clone_for_callee(self, function: FunctionDefinition) -> Self:
        return type(self)(self.map_fn, _function_cache=self._function_cache)

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        # what gets mapped below a node are the children of map_fn's result
        return super()._descendants_to_premap(self._apply_map_fn(expr))

    @overload
    def _map_uncached(self, expr: Array) -> Array: ...
    @overload
    def _map_uncached(self, expr: AbstractResultWithNamedArrays
                      ) -> AbstractResultWithNamedArrays: ...

    def _map_uncached(self, expr: ArrayOrNames) -> ArrayOrNames:
        mapped = self._apply_map_fn(expr)
        del self._fn_results[id(expr)]
        return super()._map_uncached(mapped)


def copy_dict_of_named_arrays(source_dict: DictOfNamedArrays,
                              copy_mapper: CopyMapper) -> DictOfNamedArrays:
    """A :class:`~pytato_like.array.DictOfNamedArrays` of the arrays of
    *source_dict* mapped by *copy_mapper*."""
    if not source_dict:
        return DictOfNamedArrays({}, tags=source_dict.tags)
    data = {name: copy_mapper(ary) for name, ary in source_dict._data.items()}
    return DictOfNamedArrays(data, tags=source_dict.tags)


def map_and_copy(expr: ArrayOrNames,
                 map_fn: Callable[[ArrayOrNames], ArrayOrNames]
                 ) -> ArrayOrNames:
    """A copy of *expr* with every node reachable from it mapped through
    *map_fn* (once per node; see :class:`CachedMapAndCopyMapper`)."""
    return CachedMapAndCopyMapper(map_fn)(expr)
