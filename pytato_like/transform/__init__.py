"""Transforming array DAGs: the mapper family and the rewrites built on it.

Mappers (pytato's names and calling conventions; subclass them and override
``map_*`` methods, calling ``self.rec(child)``):

================================  ============================================
:class:`Mapper`                   dispatch on ``_mapper_method``; no cache
:class:`CachedMapper`             each node mapped once
:class:`TransformMapper`          base of the mappers returning arrays
:class:`CopyMapper`               rebuild the DAG (identity when unchanged)
:class:`CopyMapperWithExtraArgs`  same, with extra arguments passed down
:class:`EdgeCachedMapper`         rebuild through ``handle_edge(expr, child)``
:class:`CachedMapAndCopyMapper`   rebuild after a ``map_fn`` per node
:class:`CombineMapper`            ``combine`` the children's results
:class:`DependencyMapper`         every array a result depends on
:class:`SubsetDependencyMapper`   the same, within a universe
:class:`InputGatherer`            the inputs a result depends on
:class:`ListOfInputsGatherer`     the same as a list, duplicates kept
:class:`NodeCollector`            the nodes for which a predicate holds
:class:`SizeParamGatherer`        the size parameters a result depends on
:class:`WalkMapper`               ``visit`` / ``post_visit`` every path
:class:`CachedWalkMapper`         ``visit`` / ``post_visit`` every node once
:class:`TopoSortMapper`           the nodes in topological order
:class:`UsersCollector`           node -> the nodes using it
:class:`Deduplicator`             merge structurally equal sub-DAGs
:class:`DataWrapperDeduplicator`  merge data wrappers of the same memory
================================  ============================================

The mappers are :class:`typing.Generic` with pytato's type parameters
(``class M(CombineMapper[frozenset[int], Never])``). Their caches are
:class:`CachedMapperCache` / :class:`TransformMapperCache` objects; the
errors :class:`ForeignObjectError`, :class:`CacheCollisionError` and
:class:`MapperCreatedDuplicateError` are importable here, as in pytato
(and :class:`~pytato_like.diagnostic.UnsupportedArrayError`).

All of them work on DAGs of any depth at Python's default recursion limit,
including user subclasses of the caching mappers whose methods recurse with
``self.rec`` (see :mod:`pytato_like.transform.mapper`).

Rewrites: :func:`deduplicate`, :func:`materialize_with_mpms`
(:class:`~pytato_like.transform.materialize.MPMSMaterializer`), the cost-model
:func:`~pytato_like.transform.materialize_cost.materialize_with_cost_model`
that code generation uses by default (with
:func:`~pytato_like.transform.materialize_cost.explain_materialization`),
:func:`deduplicate_data_wrappers`,
:func:`map_and_copy`, :func:`copy_dict_of_named_arrays`,
:func:`~pytato_like.transform.lower_to_index_lambda.to_index_lambda`,
:func:`~pytato_like.transform.remove_broadcasts_einsum.\
rewrite_einsums_with_no_broadcasts`,
:func:`~pytato_like.transform.einsum_distributive_law.\
apply_distributive_property_to_einsums`,
:func:`~pytato_like.transform.dead_code_elimination.eliminate_dead_code`.
Graph queries: :func:`get_dependencies`, :func:`tag_user_nodes`,
:func:`rec_get_user_nodes`.

Each name is imported from its submodule at its first use (a warm start,
which needs a few mappers, skips the rest of the family: ~10 ms).

``_verify_is_array(expr)`` (a name pytato's tests use) returns *expr* when it
is an :class:`~pytato_like.array.Array` and raises
:class:`~pytato_like.diagnostic.NotAnArrayError` otherwise.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pytato_like.array import Array
from pytato_like.diagnostic import NotAnArrayError, UnsupportedArrayError

# (the function shares its submodule's name: bound here, before another
# import of the submodule would set the name to the module)
from pytato_like.transform.deduplicate import deduplicate

if TYPE_CHECKING:
    # (what the names below are, for type checkers)
    from pytato_like.transform import (  # noqa: I001
        dead_code_elimination,
        lower_to_index_lambda,
        remove_broadcasts_einsum,
    )
    from pytato_like.transform.combine import (
        CombineMapper,
        DependencyMapper,
        InputGatherer,
        ListOfInputsGatherer,
        NodeCollector,
        SizeParamGatherer,
        SubsetDependencyMapper,
        collect_nodes,
        get_dependencies,
    )
    from pytato_like.transform.copy import (
        CachedMapAndCopyMapper,
        CopyMapper,
        CopyMapperWithExtraArgs,
        EdgeCachedMapper,
        copy_dict_of_named_arrays,
        map_and_copy,
    )
    from pytato_like.transform.deduplicate import (
        DataWrapperDeduplicator,
        Deduplicator,
        deduplicate_data_wrappers,
    )
    from pytato_like.transform.mapper import (
        ArrayOrNames,
        ArrayOrNamesTc,
        CacheCollisionError,
        CachedMapper,
        CachedMapperCache,
        CacheExprT,
        CacheInputsWithKey,
        CacheKeyT,
        CacheResultT,
        ForeignObjectError,
        FunctionResultT,
        Mapper,
        MapperCreatedDuplicateError,
        P,
        ResultT,
        TransformMapper,
        TransformMapperCache,
        TransformMapperWithExtraArgs,
    )
    from pytato_like.transform.materialize import materialize_with_mpms
    from pytato_like.transform.materialize_cost import (
        explain_materialization,
        materialize_with_cost_model,
    )
    from pytato_like.transform.metadata import unify_axes_tags
    from pytato_like.transform.users import (
        UsersCollector,
        rec_get_user_nodes,
        tag_user_nodes,
    )
    from pytato_like.transform.walk import CachedWalkMapper, TopoSortMapper, WalkMapper

# name -> the submodule defining it. A submodule is imported at the first
# use of one of its names (or of the submodule itself): code that needs
# one mapper, as a warm start does, then does without the ~20 modules of
# the whole family.
_DEFINED_IN = {
    "CombineMapper": "combine",
    "DependencyMapper": "combine",
    "InputGatherer": "combine",
    "ListOfInputsGatherer": "combine",
    "NodeCollector": "combine",
    "SizeParamGatherer": "combine",
    "SubsetDependencyMapper": "combine",
    "collect_nodes": "combine",
    "get_dependencies": "combine",
    "CachedMapAndCopyMapper": "copy",
    "CopyMapper": "copy",
    "CopyMapperWithExtraArgs": "copy",
    "EdgeCachedMapper": "copy",
    "copy_dict_of_named_arrays": "copy",
    "map_and_copy": "copy",
    "DataWrapperDeduplicator": "deduplicate",
    "Deduplicator": "deduplicate",
    "deduplicate_data_wrappers": "deduplicate",
    "ArrayOrNames": "mapper",
    "ArrayOrNamesTc": "mapper",
    "CacheCollisionError": "mapper",
    "CachedMapper": "mapper",
    "CachedMapperCache": "mapper",
    "CacheExprT": "mapper",
    "CacheInputsWithKey": "mapper",
    "CacheKeyT": "mapper",
    "CacheResultT": "mapper",
    "ForeignObjectError": "mapper",
    "FunctionResultT": "mapper",
    "Mapper": "mapper",
    "MapperCreatedDuplicateError": "mapper",
    "P": "mapper",
    "ResultT": "mapper",
    "TransformMapper": "mapper",
    "TransformMapperCache": "mapper",
    "TransformMapperWithExtraArgs": "mapper",
    "materialize_with_mpms": "materialize",
    "explain_materialization": "materialize_cost",
    "materialize_with_cost_model": "materialize_cost",
    "unify_axes_tags": "metadata",
    "UsersCollector": "users",
    "rec_get_user_nodes": "users",
    "tag_user_nodes": "users",
    "CachedWalkMapper": "walk",
    "TopoSortMapper": "walk",
    "WalkMapper": "walk",
}


def __getattr__(name: str) -> object:
    module_name = _DEFINED_IN.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"),
                        name)
    else:
        # a submodule not imported yet (e.g. ``lower_to_index_lambda``)
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(
                f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # the next access is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DEFINED_IN) | set(__all__))


__all__ = [
    "CachedMapAndCopyMapper", "CachedMapper", "CachedWalkMapper",
    "CombineMapper", "CopyMapper", "CopyMapperWithExtraArgs",
    "DependencyMapper", "EdgeCachedMapper", "InputGatherer", "Mapper",
    "SizeParamGatherer", "SubsetDependencyMapper", "TopoSortMapper",
    "TransformMapper", "UsersCollector", "WalkMapper",
    "ArrayOrNames", "ArrayOrNamesTc", "CacheCollisionError",
    "CacheExprT", "CacheInputsWithKey", "CacheKeyT", "CacheResultT",
    "FunctionResultT", "P", "ResultT", "UnsupportedArrayError",
    "CachedMapperCache", "DataWrapperDeduplicator", "Deduplicator",
    "ForeignObjectError", "ListOfInputsGatherer",
    "MapperCreatedDuplicateError", "NodeCollector", "TransformMapperCache",
    "collect_nodes",
    "TransformMapperWithExtraArgs", "deduplicate",
    "copy_dict_of_named_arrays", "dead_code_elimination",
    "deduplicate_data_wrappers", "get_dependencies", "lower_to_index_lambda",
    "map_and_copy", "materialize_with_mpms", "materialize_with_cost_model",
    "explain_materialization", "rec_get_user_nodes",
    "remove_broadcasts_einsum", "tag_user_nodes",
    "unify_axes_tags",
]


def _verify_is_array(expr: object) -> Array:
    """*expr*, which must be an array (for narrowing the result of a mapper
    to :class:`~pytato_like.array.Array`, as pytato's helper)."""
    if not isinstance(expr, Array):
        raise NotAnArrayError(
            f"expected an Array, got a {type(expr).__name__}: {expr!r:.200}")
    return expr
