"""Partitioning a DAG into parts that are compiled and run separately.

A *part* is a sub-DAG. Where an edge of the original DAG goes from a node in
one part to a user in another, the user's part reads a placeholder instead
and the producing part outputs the node under that placeholder's name
(:attr:`GraphPartition.var_name_to_result` maps every such name to the array
it stands for). Inputs (placeholders, size parameters, data wrappers) and
pure size expressions are never cut: each part that needs them refers to
them directly.

Parts must be runnable in any order that respects
:attr:`GraphPart.needed_pids`; a partition whose parts depend on each other
in a cycle raises :class:`PartitionInducedCycleError`. The distributed
partitioner (:mod:`pytato_like.distributed`) builds on the same machinery.

.. autoclass:: GraphPart
.. autoclass:: GraphPartition
.. autoclass:: GraphPartitioner
.. autofunction:: find_partition
.. autofunction:: generate_code_for_partition
.. autofunction:: execute_partition
.. autoclass:: NumpyPartProgram
.. autoexception:: PartitionInducedCycleError
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from pytools import UniqueNameGenerator

from pytato_like._traversal import topological_order
from pytato_like.array import (
    IDENTITY,
    VALUE,
    Array,
    DataWrapper,
    DictOfNamedArrays,
    InputArgumentBase,
    NamedArray,
    Placeholder,
    SizeParam,
    children_of,
    make_dict_of_named_arrays,
    map_arrays_in_field,
)
from pytato_like.diagnostic import PartitionInducedCycleError
from pytato_like.target import BoundProgram, normalize_outputs

__all__ = [
    "GraphPart",
    "GraphPartition",
    "GraphPartitioner",
    "NumpyPartProgram",
    "PartitionInducedCycleError",
    "execute_partition",
    "find_partition",
    "generate_code_for_partition",
]


# {{{ data

@dataclasses.dataclass(frozen=True)
class GraphPart:
    """One part of a :class:`GraphPartition`.

    .. attribute:: pid

        The part's identifier.

    .. attribute:: needed_pids

        Parts that must run before this one (it reads their outputs).

    .. attribute:: user_input_names

        Names of the user's placeholders and size parameters the part reads.

    .. attribute:: partition_input_names

        Names of placeholders standing for values computed elsewhere (by
        other parts, or received from other ranks).

    .. attribute:: output_names

        Names of the values this part computes
        (keys of :attr:`GraphPartition.var_name_to_result`).
    """

    pid: Hashable
    needed_pids: frozenset[Hashable]
    user_input_names: frozenset[str]
    partition_input_names: frozenset[str]
    output_names: frozenset[str]

    def all_input_names(self) -> frozenset[str]:
        return self.user_input_names | self.partition_input_names


@dataclasses.dataclass(frozen=True)
class GraphPartition:
    """A DAG cut into parts.

    .. attribute:: parts

        Mapping from part id to :class:`GraphPart`.

    .. attribute:: var_name_to_result

        Mapping from each part output name to the array (in its part's
        sub-DAG) it names.

    .. attribute:: toposorted_part_ids

        One order of the part ids that respects
        :attr:`GraphPart.needed_pids`.

    .. attribute:: overall_output_names

        The names of the partitioned DAG's own results.
    """

    parts: Mapping[Hashable, GraphPart]
    var_name_to_result: Mapping[str, Array]
    toposorted_part_ids: list[Hashable]
    overall_output_names: tuple[str, ...] = ()

# }}}


# {{{ the cut-and-rewrite engine shared with the distributed partitioner

FREE = "free"          # inputs and pure size expressions: never cut
RECV = "recv"          # values received from another rank
COMPUTED = "computed"  # everything else: computed in exactly one part


def canonical_nodes(order: list[Array]) -> dict[int, Array]:
    """For each node of *order* (a topological order), the node whose value
    it is: aliases (named results, send holders) resolve to what they
    stand for."""
    canon: dict[int, Array] = {}
    # equal receives are one receive, even if built twice
    first_recv: dict[Array, Array] = {}
    for node in order:
        if type(node) is NamedArray:
            canon[id(node)] = canon[id(node.expr)]
        elif node._mapper_method == "map_distributed_send_ref_holder":
            canon[id(node)] = canon[id(node.passthrough_data)]
        elif node._mapper_method == "map_distributed_recv":
            canon[id(node)] = first_recv.setdefault(node, node)
        else:
            canon[id(node)] = node
    return canon


def live_nodes(order: list[Array], roots: list[Array], follow_sends: bool
               ) -> tuple[set[int], list]:
    """The ids of the nodes of *order* whose values are needed for *roots*
    and (if *follow_sends*) for the sends held by needed send holders, and
    those sends, each once (equal sends are one send)."""
    live = {id(r) for r in roots}
    sends: dict = {}
    for node in reversed(order):  # every user before what it uses
        if id(node) not in live:
            continue
        if node._mapper_method == "map_distributed_send_ref_holder":
            live.add(id(node.passthrough_data))
            if follow_sends and node.send not in sends:
                sends[node.send] = node.send
                live.add(id(node.send_data))
        else:
            live.update(id(c) for c in children_of(node))
    return live, list(sends)


def dataflow_children(node: Array) -> tuple[Array, ...]:
    """The arrays *node*'s value is computed from (a send holder's value does
    not depend on the data it sends)."""
    if node._mapper_method == "map_distributed_send_ref_holder":
        return (node.passthrough_data,)
    return children_of(node)


def classify_nodes(order: list[Array], canon: dict[int, Array]
                   ) -> dict[int, str]:
    """:data:`FREE`, :data:`RECV` or :data:`COMPUTED` for each canonical
    node of *order*."""
    kind: dict[int, str] = {}
    for node in order:
        if canon[id(node)] is not node:
            continue
        if isinstance(node, InputArgumentBase):
            kind[id(node)] = FREE
        elif node._mapper_method == "map_distributed_recv":
            kind[id(node)] = RECV
        else:
            children = [canon[id(c)] for c in children_of(node)]
            # integer expressions of size parameters only (symbolic shapes)
            # are as cheap as inputs and may be needed by every part
            size_only = (node.ndim == 0 and node.dtype.kind in "iu"
                         and bool(children)) and all(
                kind[id(c)] is FREE and not isinstance(c, (Placeholder, DataWrapper))
                for c in children)
            kind[id(node)] = FREE if size_only else COMPUTED
    return kind


@dataclasses.dataclass
class _PartBuild:
    outputs: dict[str, Array] = dataclasses.field(default_factory=dict)
    needed: set = dataclasses.field(default_factory=set)
    partition_inputs: set[str] = dataclasses.field(default_factory=set)
    recvs: dict[str, Array] = dataclasses.field(default_factory=dict)


class PartBuilder:
    """Rewrites a DAG into per-part sub-DAGs given the part of every
    computed node (``part_of``, keyed by ``id``). Requests for named part
    outputs go through :meth:`add_output`; :meth:`finish` returns the
    per-part data."""

    def __init__(self, order: list[Array], canon: dict[int, Array],
                 kind: dict[int, str], part_of: dict[int, Hashable],
                 name_gen: UniqueNameGenerator,
                 recv_names: dict[int, str] | None = None,
                 live: set[int] | None = None) -> None:
        self.canon = canon
        self.kind = kind
        self.part_of = part_of
        self.name_gen = name_gen
        self.recv_names = recv_names or {}
        self.parts: dict[Hashable, _PartBuild] = {}
        self.rewritten: dict[int, Array] = {}
        self.cut_placeholders: dict[int, Placeholder] = {}
        self.recv_placeholders: dict[int, Placeholder] = {}
        self.var_name_to_result: dict[str, Array] = {}

        for node in order:
            if (canon[id(node)] is not node or kind[id(node)] is not COMPUTED
                    or (live is not None and id(node) not in live)):
                continue
            pid = part_of[id(node)]
            changes = {}
            for fname, fkind in node._fields:
                if fkind is VALUE or fkind is IDENTITY:
                    continue
                value = getattr(node, fname)
                new = map_arrays_in_field(
                    value, fkind, lambda child, pid=pid: self._resolve(child, pid))
                if new is not value:
                    changes[fname] = new
            self.rewritten[id(node)] = node.copy(**changes) if changes else node

    def part(self, pid: Hashable) -> _PartBuild:
        build = self.parts.get(pid)
        if build is None:
            build = self.parts[pid] = _PartBuild()
        return build

    def _resolve(self, child: Array, pid: Hashable) -> Array:
        """What *child* is inside part *pid*."""
        c = self.canon[id(child)]
        kind = self.kind[id(c)]
        if kind is FREE:
            return c
        if kind is RECV:
            name = self.recv_names[id(c)]
            ph = self.recv_placeholders.get(id(c))
            if ph is None:
                ph = self.recv_placeholders[id(c)] = Placeholder(
                    name, c.shape, c.dtype)
            build = self.part(pid)
            build.partition_inputs.add(name)
            build.recvs[name] = c
            return ph
        owner = self.part_of[id(c)]
        if owner == pid:
            return self.rewritten[id(c)]
        ph = self.cut_placeholders.get(id(c))
        if ph is None:
            name = self.name_gen("_pt_part_out")
            ph = self.cut_placeholders[id(c)] = Placeholder(
                name, c.shape, c.dtype, axes=c.axes)
            self.part(owner).outputs[name] = self.rewritten[id(c)]
            self.var_name_to_result[name] = self.rewritten[id(c)]
        build = self.part(pid)
        build.needed.add(owner)
        build.partition_inputs.add(ph.name)
        return ph

    def add_output(self, name: str, node: Array, pid: Hashable) -> None:
        """Make *node* an output *name* of the part computing it (of part
        *pid* if it is an input or a received value)."""
        c = self.canon[id(node)]
        if self.kind[id(c)] is COMPUTED:
            pid = self.part_of[id(c)]
        value = self._resolve(c, pid)
        self.part(pid).outputs[name] = value
        self.var_name_to_result[name] = value

    def user_input_names(self, pid: Hashable) -> frozenset[str]:
        partition_names = self.parts[pid].partition_inputs
        return frozenset(
            node.name
            for node in topological_order(list(self.parts[pid].outputs.values()))
            if isinstance(node, (Placeholder, SizeParam))
            and node.name not in partition_names)


def reserved_name_generator(order: list[Array],
                            output_names) -> UniqueNameGenerator:
    """A name generator avoiding every input and output name in use."""
    taken = {node.name for node in order
             if isinstance(node, InputArgumentBase) and node.name is not None}
    return UniqueNameGenerator(set(taken) | set(output_names))


def part_order(pids: list[Hashable], needed: Mapping[Hashable, set]
               ) -> list[Hashable]:
    """*pids* in an order where each part comes after the parts it needs;
    raises :class:`PartitionInducedCycleError` naming a cycle."""
    import networkx as nx
    graph = nx.DiGraph()
    graph.add_nodes_from(pids)
    for pid in pids:
        graph.add_edges_from((q, pid) for q in needed[pid])
    try:
        return list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        path = " -> ".join(repr(u) for u, _ in cycle) + f" -> {cycle[0][0]!r}"
        raise PartitionInducedCycleError(
            f"the partition makes parts depend on each other in a cycle: "
            f"{path} (each part needs an output of the next)") from None

# }}}


# {{{ generic partitioner

class GraphPartitioner:
    """Cuts a DAG into the parts given by *get_part_id* (called on each
    computed node). Prefer :func:`find_partition`."""

    def __init__(self, get_part_id: Callable[[Array], Hashable]) -> None:
        self.get_part_id = get_part_id

    def make_partition(self, outputs) -> GraphPartition:
        output_map, _ = normalize_outputs(outputs)
        order = topological_order(list(output_map.values()))
        canon = canonical_nodes(order)
        kind = classify_nodes(order, canon)
        live, _ = live_nodes(order, list(output_map.values()), follow_sends=False)
        part_of = {id(node): self.get_part_id(node) for node in order
                   if kind.get(id(node)) is COMPUTED and id(node) in live}
        builder = PartBuilder(order, canon, kind, part_of,
                              reserved_name_generator(order, output_map),
                              live=live)
        for name, ary in output_map.items():
            c = canon[id(ary)]
            pid = (part_of[id(c)] if kind[id(c)] is COMPUTED
                   else self.get_part_id(c))
            builder.add_output(name, ary, pid)
        pids = list(builder.parts)
        toposorted = part_order(pids, {p: builder.parts[p].needed for p in pids})
        parts = {
            pid: GraphPart(
                pid=pid,
                needed_pids=frozenset(builder.parts[pid].needed),
                user_input_names=builder.user_input_names(pid),
                partition_input_names=frozenset(
                    builder.parts[pid].partition_inputs),
                output_names=frozenset(builder.parts[pid].outputs))
            for pid in toposorted}
        return GraphPartition(parts, builder.var_name_to_result, toposorted,
                              tuple(output_map))


def find_partition(outputs, part_func: Callable[[Array], Hashable],
                   partitioner_class: type[GraphPartitioner] = GraphPartitioner
                   ) -> GraphPartition:
    """Partition *outputs* (a :class:`~pytato_like.DictOfNamedArrays`, a
    dict of arrays or one array) by *part_func*, which maps each array to
    the id of its part. Raises :class:`PartitionInducedCycleError` if the
    parts would depend on each other in a cycle (e.g. ``A -> B -> C`` with
    ``A`` and ``C`` in one part and ``B`` in another)."""
    return partitioner_class(part_func).make_partition(outputs)

# }}}


# {{{ code generation and execution

class NumpyPartProgram(BoundProgram):
    """A part program evaluated by the NumPy reference executor, with the
    bound-program call convention ``prg(queue, **inputs) -> (None,
    outputs)`` (*queue* is ignored and may be ``None``)."""

    def __init__(self, outputs: DictOfNamedArrays) -> None:
        from pytato_like.target.numpy import generate_numpy
        self.program = generate_numpy(outputs)

    def __call__(self, queue: Any = None, **inputs: Any
                 ) -> tuple[None, dict[str, Any]]:
        return None, self.program(**inputs)


def _loopy_available() -> bool:
    import pytato_like
    return getattr(pytato_like, "generate_loopy", None) is not None


def generate_code_for_partition(partition: GraphPartition,
                                target: str | None = None
                                ) -> dict[Hashable, BoundProgram]:
    """A bound program per part, computing the part's outputs.

    *target* is ``"loopy"`` (OpenCL, the default when
    :func:`pytato_like.generate_loopy` is available) or ``"numpy"`` (the
    reference executor; call the programs with ``queue=None``)."""
    if target is None:
        target = "loopy" if _loopy_available() else "numpy"
    if target == "numpy":
        make = NumpyPartProgram
    elif target == "loopy":
        import pytato_like
        make = pytato_like.generate_loopy
    else:
        raise ValueError(f"unknown part program target {target!r}; "
                         "expected 'loopy' or 'numpy'")
    return {
        pid: make(make_dict_of_named_arrays({
            name: partition.var_name_to_result[name]
            for name in sorted(part.output_names)}))
        for pid, part in partition.parts.items()}


def execute_partition(partition: GraphPartition,
                      prg_per_partition: Mapping[Hashable, BoundProgram],
                      queue: Any, input_args: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
    """Run the parts in :attr:`~GraphPartition.toposorted_part_ids` order on
    *queue* (``None`` for NumPy part programs). Returns every part output by
    name (the partitioned DAG's results among them)."""
    context: dict[str, Any] = dict(input_args or {})
    for pid in partition.toposorted_part_ids:
        part = partition.parts[pid]
        inputs = {name: context[name] for name in part.all_input_names()
                  if name in context}
        _evt, outputs = prg_per_partition[pid](queue, **inputs)
        context.update(outputs)
    return context

# }}}

# vim: foldmethod=marker
