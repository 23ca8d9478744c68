"""Read-only questions about an array DAG.

All functions here walk the DAG once with explicit stacks (linear time, any
depth). Results keyed by nodes use one representative per class of
structurally equal nodes, as pytato's (equality-keyed) results do.

.. autofunction:: get_nusers
.. autofunction:: get_list_of_users
.. autofunction:: get_num_nodes
.. autofunction:: get_node_type_counts
.. autofunction:: get_node_multiplicities
.. autofunction:: get_num_tags_of_type
.. autofunction:: get_num_call_sites
.. autofunction:: collect_materialized_nodes
.. autofunction:: is_einsum_similar_to_subscript
.. autoclass:: DirectPredecessorsGetter
.. autoclass:: ListOfDirectPredecessorsGetter
.. autoclass:: NodeCountMapper
.. autoclass:: NodeMultiplicityMapper
.. autoclass:: TagCountMapper
.. autoclass:: CallSiteCountMapper
.. autoclass:: MaterializedNodeCollector
.. autoclass:: PytatoKeyBuilder

The mapper classes are walks (:class:`~pytato_like.transform.CachedWalkMapper`)
over an explicit stack, so they work at any depth; the functions are their
one-call forms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeGuard


from pytato_like.collector import paused_collection
from pytato_like._einsum import parse_subscripts as parse
from pytato_like._traversal import topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    Einsum,
    EinsumAxisDescriptor,
    EinsumElementwiseAxis,
    InputArgumentBase,
    children_of,
    output_arrays,
)
from pytato_like.codegen import normalize_outputs
from pytato_like.diagnostic import UnsupportedArrayError
from pytato_like.function import Call
from pytato_like.tags import ImplStored
from pytato_like.transform._graph import (
    stack_headroom,
    structural_representatives,
    walk_children,
)
from pytato_like.transform.mapper import (
    ARRAY_MAPPER_METHODS,
    ArrayOrNames,
    Mapper,
)
from pytato_like.transform.walk import CachedWalkMapper

if TYPE_CHECKING:
    from typing_extensions import Never

    from pytato_like.analysis._key_builder import PytatoKeyBuilder
    from pytato_like.distributed.nodes import DistributedSendRefHolder
    from pytato_like.function import FunctionDefinition

__all__ = [
    "CallSiteCountMapper",
    "DirectPredecessorsGetter",
    "ListOfDirectPredecessorsGetter",
    "MaterializedNodeCollector",
    "NodeCountMapper",
    "NodeMultiplicityMapper",
    "PytatoKeyBuilder",
    "TagCountMapper",
    "collect_materialized_nodes",
    "get_list_of_users",
    "get_node_multiplicities",
    "get_node_type_counts",
    "get_num_call_sites",
    "get_num_nodes",
    "get_num_tags_of_type",
    "get_nusers",
    "is_einsum_similar_to_subscript",
]


@paused_collection
@stack_headroom
def get_nusers(outputs: Array | DictOfNamedArrays) -> Mapping[Array, int]:
    """For every node of the DAG *outputs*, the number of times a node uses
    its value: one per reference in another node's fields (operands, shape
    expressions, index arrays; an array bound twice counts twice), plus one
    per entry of *outputs* when it is a
    :class:`~pytato_like.array.DictOfNamedArrays`. Nodes nobody uses map to
    0."""
    roots = output_arrays(outputs, "get_nusers")
    order = topological_order(roots)
    reps = structural_representatives(order)
    rep_of = {id(node): rep for node, rep in zip(order, reps)}
    # counted per representative id, so that building the result never
    # compares distinct-but-equal sub-DAGs
    count: dict[int, int] = {id(rep): 0 for rep in reps}
    for node in order:
        for child in children_of(node):
            count[id(rep_of[id(child)])] += 1
    if isinstance(outputs, DictOfNamedArrays):
        for ary in roots:
            count[id(rep_of[id(ary)])] += 1
    result: dict[Array, int] = {}
    for rep in reps:
        if rep not in result:
            result[rep] = count[id(rep)]
    return result


@paused_collection
@stack_headroom
def get_list_of_users(outputs: Array | DictOfNamedArrays
                      ) -> Mapping[Array, list[Array]]:
    """For every node of the DAG *outputs*, the list of nodes that use its
    value (one entry per reference, as :func:`get_nusers` counts them; a
    node nobody uses maps to an empty list). Keys are compared by structural
    equality, as in :func:`get_nusers`."""
    order = topological_order(output_arrays(outputs, "get_list_of_users"))
    reps = structural_representatives(order)
    rep_of = {id(node): rep for node, rep in zip(order, reps)}
    users: dict[int, list[Array]] = {id(rep): [] for rep in reps}
    for node in order:
        for child in children_of(node):
            users[id(rep_of[id(child)])].append(node)
    result: defaultdict[Array, list[Array]] = defaultdict(list)
    for rep in reps:
        if rep not in result:
            result[rep] = users[id(rep)]
    return result


@paused_collection
@stack_headroom
def get_num_nodes(outputs: Array | DictOfNamedArrays,
                  count_duplicates: bool = False) -> int:
    """The number of array nodes in the DAG *outputs* (shape expressions and
    index arrays included). With *count_duplicates*, distinct objects that
    are structurally equal are counted separately; without, once."""
    order = topological_order(output_arrays(outputs, "get_num_nodes"))
    if count_duplicates:
        return len(order)
    return sum(1 for node, rep in zip(order, structural_representatives(order))
               if node is rep)


def parse_subscripts(subscripts: str) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    n_operands = spec.split("->")[0].count(",") + 1
    return parse(subscripts, n_operands)


def is_einsum_similar_to_subscript(expr: Einsum, subscripts: str) -> bool:
    """Whether an einsum with *subscripts* over ``expr.args`` computes the
    same as *expr*: same operand count, output axes in the same order and
    the same reduction indices shared between the same operand axes (up to
    renaming)."""
    if not isinstance(expr, Einsum):
        raise UnsupportedArrayError(
            f"is_einsum_similar_to_subscript expects an Einsum, got a "
            f"{type(expr).__name__} of shape {getattr(expr, 'shape', None)}")
    in_specs, out_spec = parse_subscripts(subscripts)
    if len(in_specs) != len(expr.args) or len(out_spec) != expr.ndim:
        return False
    letter_to_descr: dict[str, EinsumAxisDescriptor] = {
        c: EinsumElementwiseAxis(i) for i, c in enumerate(out_spec)}
    descr_to_letter = {d: c for c, d in letter_to_descr.items()}
    for spec, acc in zip(in_specs, expr.access_descriptors, strict=True):
        if len(spec) != len(acc):
            return False
        for c, descr in zip(spec, acc, strict=True):
            if letter_to_descr.setdefault(c, descr) != descr:
                return False
            if descr_to_letter.setdefault(descr, c) != c:
                return False
    return True


class DirectPredecessorsGetter(Mapper[frozenset, "Never", []]):
    """Maps a node to the frozenset of the nodes its value is computed from
    directly: its operands, index arrays and shape expressions (for a
    :class:`~pytato_like.array.NamedArray` the array it names, for a
    :class:`~pytato_like.array.DictOfNamedArrays` its arrays). A
    send-reference holder's predecessor is its passthrough data only: no
    data flows from the sent array into its value."""

    def _predecessors(self, expr: ArrayOrNames) -> frozenset:
        return frozenset(walk_children(expr))

    def handle_unsupported_array(self, expr: ArrayOrNames) -> frozenset:
        return self._predecessors(expr)

    def map_distributed_send_ref_holder(self, expr: DistributedSendRefHolder
                                        ) -> frozenset:
        return frozenset([expr.passthrough_data]) | frozenset(
            d for d in expr.shape if isinstance(d, Array))

    def rec(self, expr: ArrayOrNames) -> frozenset:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return super().rec(expr)


for _name in ARRAY_MAPPER_METHODS:
    if _name not in DirectPredecessorsGetter.__dict__:
        setattr(DirectPredecessorsGetter, _name,
                DirectPredecessorsGetter._predecessors)
del _name


class ListOfDirectPredecessorsGetter(Mapper[list, "Never", []]):
    """Like :class:`DirectPredecessorsGetter`, but the predecessors as a list
    in field order, one entry per reference (an array bound twice appears
    twice). A send-reference holder lists the sent data and its passthrough
    data."""

    def _predecessors(self, expr: ArrayOrNames) -> list:
        return list(walk_children(expr))

    def handle_unsupported_array(self, expr: ArrayOrNames) -> list:
        return self._predecessors(expr)

    def map_distributed_send_ref_holder(self, expr: DistributedSendRefHolder
                                        ) -> list:
        return [expr.send.data, expr.passthrough_data]

    def rec(self, expr: ArrayOrNames) -> list:
        if not isinstance(expr, (Array, AbstractResultWithNamedArrays)):
            return self.map_foreign(expr)
        return super().rec(expr)


for _name in ARRAY_MAPPER_METHODS:
    if _name not in ListOfDirectPredecessorsGetter.__dict__:
        setattr(ListOfDirectPredecessorsGetter, _name,
                ListOfDirectPredecessorsGetter._predecessors)
del _name


# {{{ counting walks

class NodeCountMapper(CachedWalkMapper[[]]):
    """Counts the nodes of each type in :attr:`expr_type_counts` (a dict from
    node class to count). With *count_duplicates*, distinct objects that are
    structurally equal count separately; without, once.
    :class:`~pytato_like.array.DictOfNamedArrays` roots are not counted."""

    def __init__(self, count_duplicates: bool = False,
                 _visited_functions: set[FunctionDefinition] | None = None) -> None:
        super().__init__(_visited_functions=_visited_functions)
        self.expr_type_counts: defaultdict[type, int] = defaultdict(int)
        self.count_duplicates = count_duplicates

    def get_cache_key(self, expr: ArrayOrNames) -> Hashable:
        # equal nodes share a key unless duplicates are counted
        return id(expr) if self.count_duplicates else expr

    def post_visit(self, expr: ArrayOrNames) -> None:
        if not isinstance(expr, DictOfNamedArrays):
            self.expr_type_counts[type(expr)] += 1


def get_node_type_counts(outputs: Array | DictOfNamedArrays,
                         count_duplicates: bool = False) -> dict[type, int]:
    """A dict from node class to the number of nodes of that class in the
    DAG *outputs* (see :class:`NodeCountMapper`)."""
    mapper = NodeCountMapper(count_duplicates)
    mapper(outputs)
    return mapper.expr_type_counts


class NodeMultiplicityMapper(CachedWalkMapper[[]]):
    """:attr:`expr_multiplicity_counts` maps each node (up to structural
    equality) to its multiplicity: the number of distinct objects in the DAG
    equal to it."""

    def __init__(self, _visited_functions: set[FunctionDefinition] | None = None) -> None:
        super().__init__(_visited_functions=_visited_functions)
        self.expr_multiplicity_counts: defaultdict[ArrayOrNames, int] = (
            defaultdict(int))

    # (the default cache key, id(expr), visits every object once)

    def post_visit(self, expr: ArrayOrNames) -> None:
        if not isinstance(expr, DictOfNamedArrays):
            self.expr_multiplicity_counts[expr] += 1


def get_node_multiplicities(outputs: Array | DictOfNamedArrays
                            ) -> dict[ArrayOrNames, int]:
    """The multiplicity of every node of *outputs* (see
    :class:`NodeMultiplicityMapper`)."""
    mapper = NodeMultiplicityMapper()
    mapper(outputs)
    return mapper.expr_multiplicity_counts


def _as_tag_type_set(tag_types: type | Iterable[type]) -> frozenset[type]:
    if isinstance(tag_types, type):
        return frozenset([tag_types])
    return frozenset(tag_types)


class TagCountMapper(CachedWalkMapper[[]]):
    """Counts the nodes (up to structural equality, each once) that carry a
    tag of every type in *tag_types* (a tag class or an iterable of them).
    Calling it returns the count; :attr:`count` keeps the running total."""

    def __init__(self, tag_types: type | Iterable[type]) -> None:
        super().__init__()
        self._tag_types = _as_tag_type_set(tag_types)
        self.count = 0

    def get_cache_key(self, expr: ArrayOrNames) -> Hashable:
        return expr

    def post_visit(self, expr: ArrayOrNames) -> None:
        if isinstance(expr, Array) and self._tag_types <= frozenset(
                type(tag) for tag in expr.tags):
            self.count += 1

    # (returns the count where a walk returns None: pytato's counters do)
    def __call__(self,  # type: ignore[override]
                 expr: ArrayOrNames) -> int:
        super().__call__(expr)
        return self.count


def get_num_tags_of_type(outputs: Array | DictOfNamedArrays,
                         tag_types: type | Iterable[type]) -> int:
    """The number of nodes of *outputs* tagged with all of *tag_types*."""
    return TagCountMapper(tag_types)(outputs)


class CallSiteCountMapper(CachedWalkMapper[[]]):
    """Counts the :class:`~pytato_like.function.Call` nodes of a DAG and of
    the bodies of the functions they call, as pytato does: structurally equal
    calls of one DAG count once; each
    :class:`~pytato_like.function.FunctionDefinition` (up to equality) is
    walked once, however often it is called, in a mapper of its own (so a
    call in a body counts once per distinct definition holding it).
    Calling the mapper returns the count; :attr:`count` keeps the running
    total.

    Bodies are walked one after the other from a work list, not by nested
    walks, so neither the depth of a DAG nor the nesting of functions uses
    frames."""

    def __init__(self, _visited_functions: set[FunctionDefinition] | None = None) -> None:
        super().__init__(_visited_functions=_visited_functions)
        self.count = 0
        # definitions reached but not walked yet (shared with the mappers
        # of the bodies, so that nested definitions join the same list)
        self._pending_functions: list[FunctionDefinition] = []

    def get_cache_key(self, expr: ArrayOrNames) -> Hashable:
        return expr

    def clone_for_callee(self, function: FunctionDefinition
                         ) -> CallSiteCountMapper:
        """A mapper for the body of *function*: its own node cache, the
        same set of visited definitions and the same work list."""
        callee = type(self)(_visited_functions=self._visited_functions)
        callee._pending_functions = self._pending_functions
        return callee

    def post_visit(self, expr: ArrayOrNames) -> None:
        if isinstance(expr, Call):
            self.count += 1
            function = expr.function
            if function not in self._visited_functions:
                self._visited_functions.add(function)
                self._pending_functions.append(function)

    # (returns the count where a walk returns None: pytato's counters do)
    def __call__(self,  # type: ignore[override]
                 expr: ArrayOrNames) -> int:
        super().__call__(expr)
        pending = self._pending_functions
        while pending:
            function = pending.pop()
            callee = self.clone_for_callee(function)
            for ret in function.returns.values():
                callee.rec(ret)
            self.count += callee.count
        return self.count


@paused_collection
def get_num_call_sites(outputs: Array | DictOfNamedArrays
                       | dict[str, Array]) -> int:
    """The number of call sites in *outputs* (an array, a
    :class:`~pytato_like.array.DictOfNamedArrays` or a dict of arrays),
    counting the calls inside the bodies of called functions (see
    :class:`CallSiteCountMapper`)."""
    return CallSiteCountMapper()(normalize_outputs(outputs))


def is_materialized(expr: object) -> TypeGuard[Array]:
    """Whether *expr* has its own storage when a program runs: inputs
    (placeholders, data wrappers, size parameters), received arrays, and
    arrays tagged :class:`~pytato_like.tags.ImplStored`."""
    if not isinstance(expr, Array):
        return False
    if isinstance(expr, InputArgumentBase) \
            or type(expr).__name__ == "DistributedRecv":
        return True
    return any(isinstance(t, ImplStored) for t in expr.tags)


class MaterializedNodeCollector(CachedWalkMapper[[]]):
    """Collects in :attr:`materialized_nodes` the nodes for which
    :func:`is_materialized` holds."""

    def __init__(self) -> None:
        super().__init__()
        self.materialized_nodes: set[Array] = set()

    def post_visit(self, expr: ArrayOrNames) -> None:
        if is_materialized(expr):
            self.materialized_nodes.add(expr)


def collect_materialized_nodes(outputs: Array | DictOfNamedArrays
                               ) -> frozenset[Array]:
    """The materialized nodes of *outputs* (see
    :class:`MaterializedNodeCollector`)."""
    mapper = MaterializedNodeCollector()
    mapper(outputs)
    return frozenset(mapper.materialized_nodes)

# }}}


# {{{ names defined in modules that import loopy

def __getattr__(name: str) -> type[PytatoKeyBuilder]:
    # PEP 562: the key builder subclasses loopy's, and importing loopy costs
    # most of a second; it loads when the name is first used
    if name == "PytatoKeyBuilder":
        from pytato_like.analysis._key_builder import PytatoKeyBuilder
        return PytatoKeyBuilder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# }}}

