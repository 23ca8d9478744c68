"""Partitioning a DAG into parts that are compiled and run separately.

A *part* is a sub-DAG. Where an edge of the original DAG goes from a node in
one part to a user in another, the user's part reads a placeholder instead
and the producing part outputs the node under that placeholder's name
(:attr:`GraphPartition.name_to_output` maps every such name to the array
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
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from pytools import UniqueNameGenerator

from pytato_like._traversal import depth_first
from pytato_like.array import (
    Array,
    DataWrapper,
    InputArgumentBase,
    NamedArray,
    Placeholder,
    SizeParam,
    make_dict_of_named_arrays,
)
from pytato_like.diagnostic import PartitionInducedCycleError
from pytato_like.scheduler import PartHooks, run_parts
from pytato_like.target import BoundProgram, normalize_outputs
from pytato_like.target.numpy import NumpyBoundProgram
from pytato_like.transform.copy import rebuild_with
from pytato_like.transform.placement import strip_device_transfers

if TYPE_CHECKING:
    import numpy as np
    import pyopencl as cl

    from pytato_like.array import DictOfNamedArrays
    from pytato_like.target.program import HostEvent

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
    """One part of a :class:`GraphPartition` (pytato's attribute names).

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
        (keys of :attr:`GraphPartition.name_to_output`).

    .. automethod:: all_input_names
    """

    pid: Hashable
    needed_pids: frozenset[Hashable]
    user_input_names: frozenset[str]
    partition_input_names: frozenset[str]
    output_names: frozenset[str]

    def all_input_names(self) -> frozenset[str]:
        """Every name the part reads: user inputs and partition inputs."""
        return self.user_input_names | self.partition_input_names


def _toposorted_pids(parts: Mapping[Hashable, GraphPart]) -> list[Hashable]:
    return part_order(list(parts), {pid: part.needed_pids
                                    for pid, part in parts.items()})


@dataclasses.dataclass(frozen=True, init=False)
class GraphPartition:
    """A DAG cut into parts (pytato's attribute names; construct it as
    pytato does, ``GraphPartition(parts=..., name_to_output=...,
    overall_output_names=...)``).

    .. attribute:: parts

        Mapping from part id to :class:`GraphPart`.

    .. attribute:: name_to_output

        Mapping from each part output name to the array (in its part's
        sub-DAG) it names: values computed for other parts as well as the
        partitioned DAG's own results.

    .. attribute:: overall_output_names

        The names (keys of :attr:`name_to_output`) of the partitioned DAG's
        own results.

    .. attribute:: toposorted_part_ids

        One order of the part ids that respects
        :attr:`GraphPart.needed_pids` (computed from them when not given).

    .. attribute:: var_name_to_result

        The same mapping as :attr:`name_to_output` (its earlier name; also
        accepted as a constructor keyword).
    """

    parts: Mapping[Hashable, GraphPart]
    name_to_output: Mapping[str, Array]
    overall_output_names: tuple[str, ...]
    toposorted_part_ids: list[Hashable]

    #: whether :func:`generate_code_for_partition` compiles the parts on
    #: first use (``lazy=None``): a partition whose parts communicate sets
    #: it, so that code generation overlaps the first receives
    compiles_lazily: ClassVar[bool] = False

    def __init__(self, parts: Mapping[Hashable, GraphPart],
                 name_to_output: Mapping[str, Array] | None = None,
                 overall_output_names=(),
                 toposorted_part_ids: list[Hashable] | None = None, *,
                 var_name_to_result: Mapping[str, Array] | None = None,
                 ) -> None:
        if var_name_to_result is not None:
            # the earlier keyword; dataclasses.replace passes both, and the
            # one the caller wrote is this one
            name_to_output = var_name_to_result
        if name_to_output is None:
            raise TypeError(f"{type(self).__name__} needs name_to_output")
        if toposorted_part_ids is None:
            toposorted_part_ids = _toposorted_pids(parts)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "name_to_output", name_to_output)
        object.__setattr__(self, "overall_output_names",
                           tuple(overall_output_names))
        object.__setattr__(self, "toposorted_part_ids",
                           list(toposorted_part_ids))

    @property
    def var_name_to_result(self) -> Mapping[str, Array]:
        return self.name_to_output

# }}}


# {{{ the cut-and-rewrite engine shared with the distributed partitioner

FREE = "free"          # inputs and pure size expressions: never cut
RECV = "recv"          # values received from another rank
COMPUTED = "computed"  # everything else: computed in exactly one part

_HOLDER = "map_distributed_send_ref_holder"


class SendRefHolder(Protocol):
    """What the partitioner reads of a send-reference holder (the
    distributed layer's node kind, named here by its mapper method only:
    a stage does not import a later one)."""

    passthrough_data: Array
    send: Hashable
    send_data: Array
_RECV = "map_distributed_recv"


class DagIndex:
    """A DAG as integer-indexed lists, built in one walk, so that the
    partitioners' several passes cost a list lookup per edge.

    .. attribute:: order

        The nodes, every node after the nodes it refers to.

    .. attribute:: kids

        ``kids[i]``: indices of :func:`~pytato_like.array.children_of`
        ``order[i]``.

    .. attribute:: canon

        ``canon[i]``: index of the node whose value ``order[i]`` is
        (aliases such as named results and send holders resolve to what they
        stand for; equal receives to the first of them).

    .. attribute:: kind

        :data:`FREE`, :data:`RECV` or :data:`COMPUTED` for canonical nodes.

    .. attribute:: free_names

        For free nodes: the names of the placeholders and size parameters
        they contain.
    """

    def __init__(self, roots: list[Array]) -> None:
        order: list[Array] = []
        kids: list[tuple[int, ...]] = []
        index: dict[int, int] = {}
        for node, children in depth_first(roots):
            index[id(node)] = len(order)
            order.append(node)
            kids.append(tuple(index[id(c)] for c in children))
        self.order, self.kids, self.index = order, kids, index

        n = len(order)
        canon = list(range(n))
        first_recv: dict[Array, Array] = {}
        for i, node in enumerate(order):
            if type(node) is NamedArray:
                canon[i] = canon[kids[i][0]]
            elif node._mapper_method == _HOLDER:
                holder = cast("SendRefHolder", node)
                canon[i] = canon[index[id(holder.passthrough_data)]]
            elif node._mapper_method == _RECV:
                canon[i] = index[id(first_recv.setdefault(node, node))]
        self.canon = canon

        kind: list[str | None] = [None] * n
        free_names: dict[int, frozenset[str]] = {}
        for i, node in enumerate(order):
            if canon[i] != i:
                continue
            if isinstance(node, InputArgumentBase):
                kind[i] = FREE
                names = frozenset().union(*(free_names[canon[k]] for k in kids[i]))
                if isinstance(node, (Placeholder, SizeParam)):
                    names |= {node.name}
                free_names[i] = names
            elif node._mapper_method == _RECV:
                kind[i] = RECV
            else:
                ckids = [canon[k] for k in kids[i]]
                # integer expressions of size parameters only (symbolic
                # shapes) are as cheap as inputs and may be needed anywhere
                if (ckids and node.ndim == 0 and node.dtype.kind in "iu"
                        and all(kind[k] is FREE and not isinstance(
                            order[k], (Placeholder, DataWrapper)) for k in ckids)):
                    kind[i] = FREE
                    free_names[i] = frozenset().union(
                        *(free_names[k] for k in ckids))
                else:
                    kind[i] = COMPUTED
        self.kind = kind
        self.free_names = free_names

    def indices_of(self, arrays) -> list[int]:
        return [self.index[id(a)] for a in arrays]

    def live(self, roots: list[int], follow_sends: bool
             ) -> tuple[bytearray, list]:
        """Which nodes are needed for *roots* and (if *follow_sends*) for
        the sends held by needed send holders; and those sends, each once
        (equal sends are one send)."""
        live = bytearray(len(self.order))
        for r in roots:
            live[r] = 1
        sends: dict = {}
        index = self.index
        for i in range(len(self.order) - 1, -1, -1):  # users before used
            if not live[i]:
                continue
            node = self.order[i]
            if node._mapper_method == _HOLDER:
                holder = cast("SendRefHolder", node)
                live[index[id(holder.passthrough_data)]] = 1
                if follow_sends and holder.send not in sends:
                    sends[holder.send] = holder.send
                    live[index[id(holder.send_data)]] = 1
            else:
                for k in self.kids[i]:
                    live[k] = 1
        return live, list(sends)

    def shape_names(self, i: int) -> frozenset[str]:
        """Names of the size parameters in the shape of ``order[i]``."""
        return frozenset().union(*(
            self.free_names.get(self.canon[self.index[id(s)]], frozenset())
            for s in self.order[i].shape if isinstance(s, Array)))


@dataclasses.dataclass
class _PartBuild:
    outputs: dict[str, Array] = dataclasses.field(default_factory=dict)
    needed: set = dataclasses.field(default_factory=set)
    partition_inputs: set[str] = dataclasses.field(default_factory=set)
    user_inputs: set[str] = dataclasses.field(default_factory=set)
    recvs: dict[str, Array] = dataclasses.field(default_factory=dict)


class PartBuilder:
    """Rewrites the live computed nodes of *dag* into per-part sub-DAGs,
    given the part of each (``part_of[i]``). Named part outputs are
    requested with :meth:`add_output`; :attr:`parts` and
    :attr:`var_name_to_result` hold the result."""

    def __init__(self, dag: DagIndex, part_of: list, live: bytearray,
                 name_gen: UniqueNameGenerator,
                 recv_names: dict[int, str] | None = None) -> None:
        self.dag = dag
        self.part_of = part_of
        self.name_gen = name_gen
        self.recv_names = recv_names or {}
        self.parts: dict[Hashable, _PartBuild] = {}
        n = len(dag.order)
        self.rewritten: list[Array | None] = [None] * n
        self.placeholders: dict[int, Placeholder] = {}
        self.var_name_to_result: dict[str, Array] = {}

        order, kids, canon, kind = dag.order, dag.kids, dag.canon, dag.kind
        index = dag.index
        for i, node in enumerate(order):
            if canon[i] != i or kind[i] is not COMPUTED or not live[i]:
                continue
            pid = part_of[i]
            # the common case: every child stays what it is
            if all(self._resolve(k, pid) is order[k] for k in kids[i]):
                self.rewritten[i] = node
                continue

            def resolve(child: Array, pid: Hashable = pid) -> Array:
                return self._resolve(index[id(child)], pid)
            self.rewritten[i] = rebuild_with(node, resolve)

    def part(self, pid: Hashable) -> _PartBuild:
        build = self.parts.get(pid)
        if build is None:
            build = self.parts[pid] = _PartBuild()
        return build

    def _placeholder(self, c: int, name: str) -> Placeholder:
        ph = self.placeholders.get(c)
        if ph is None:
            node = self.dag.order[c]
            ph = self.placeholders[c] = Placeholder(
                name, node.shape, node.dtype, axes=node.axes)
        return ph

    def _resolve(self, k: int, pid: Hashable) -> Array:
        """What node *k* is inside part *pid* (registering cuts)."""
        dag = self.dag
        c = dag.canon[k]
        kind = dag.kind[c]
        ph: Placeholder | None
        if kind is FREE:
            names = dag.free_names[c]
            if names:
                self.part(pid).user_inputs.update(names)
            return dag.order[c]
        if kind is RECV:
            ph = self._placeholder(c, self.recv_names[c])
            build = self.part(pid)
            if ph.name not in build.recvs:
                build.partition_inputs.add(ph.name)
                build.recvs[ph.name] = dag.order[c]
                build.user_inputs.update(dag.shape_names(c))
            return ph
        owner = self.part_of[c]
        if owner == pid:
            # (rewritten users-first: a part's own node is done)
            return cast(Array, self.rewritten[c])
        ph = self.placeholders.get(c)
        if ph is None:
            ph = self._placeholder(c, self.name_gen("_pt_part_out"))
            value = cast(Array, self.rewritten[c])  # owner's part: done
            self.part(owner).outputs[ph.name] = value
            self.var_name_to_result[ph.name] = value
        build = self.part(pid)
        if ph.name not in build.partition_inputs:
            build.needed.add(owner)
            build.partition_inputs.add(ph.name)
            build.user_inputs.update(dag.shape_names(c))
        return ph

    def add_output(self, name: str, k: int, pid: Hashable) -> None:
        """Make node *k* the output *name* of the part computing it (of part
        *pid* if it is an input or a received value)."""
        c = self.dag.canon[k]
        if self.dag.kind[c] is COMPUTED:
            pid = self.part_of[c]
        value = self._resolve(c, pid)
        self.part(pid).outputs[name] = value
        self.var_name_to_result[name] = value


def reserved_name_generator(order: list[Array],
                            output_names) -> UniqueNameGenerator:
    """A name generator avoiding every input and output name in use."""
    # (every input kind has a name; a data wrapper's may be None)
    inputs: list[Any] = [node for node in order
                         if isinstance(node, InputArgumentBase)]
    taken = {node.name for node in inputs if node.name is not None}
    return UniqueNameGenerator(set(taken) | set(output_names))


def part_order(pids: list[Hashable],
               needed: Mapping[Hashable, set | frozenset]
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
        dag = DagIndex(list(output_map.values()))
        out_idx = dag.indices_of(output_map.values())
        live, _ = dag.live(out_idx, follow_sends=False)
        part_of: list = [None] * len(dag.order)
        for i, node in enumerate(dag.order):
            if dag.kind[i] is COMPUTED and live[i]:
                part_of[i] = self.get_part_id(node)
        builder = PartBuilder(dag, part_of, live,
                              reserved_name_generator(dag.order, output_map))
        for name, k in zip(output_map, out_idx, strict=True):
            c = dag.canon[k]
            pid = (part_of[c] if dag.kind[c] is COMPUTED
                   else self.get_part_id(dag.order[c]))
            builder.add_output(name, k, pid)
        pids = list(builder.parts)
        toposorted = part_order(pids, {p: builder.parts[p].needed for p in pids})
        parts = {
            pid: GraphPart(
                pid=pid,
                needed_pids=frozenset(builder.parts[pid].needed),
                user_input_names=frozenset(builder.parts[pid].user_inputs),
                partition_input_names=frozenset(
                    builder.parts[pid].partition_inputs),
                output_names=frozenset(builder.parts[pid].outputs))
            for pid in toposorted}
        return GraphPartition(parts=parts,
                              name_to_output=builder.var_name_to_result,
                              overall_output_names=tuple(output_map),
                              toposorted_part_ids=toposorted)


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

class NumpyPartProgram(NumpyBoundProgram):
    """A part program evaluated by the NumPy reference executor. It always
    answers in the program contract's form: ``prg(queue, **inputs) ->
    (HOST_EVENT, outputs)`` (*queue* is ignored and may be left out)."""

    def __call__(self, queue: object = None, /, **kwargs: Any
                 ) -> tuple[HostEvent, dict[str, np.ndarray] | tuple[np.ndarray]]:
        return super().__call__(queue, **kwargs)


def _loopy_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("loopy") is not None


def generate_code_for_partition(partition: GraphPartition,
                                target: str | None = None, *,
                                lazy: bool | None = None
                                ) -> dict[Hashable, BoundProgram]:
    """A bound program per part, computing the part's outputs.

    *target* is ``"loopy"`` (OpenCL, the default when
    :func:`pytato_like.generate_loopy` is available) or ``"numpy"`` (the
    reference executor; call the programs with ``queue=None``).

    *lazy* (loopy target only; NumPy part programs cost nothing to make):
    if true, each part's program is a
    :class:`~pytato_like.target.loopy.lazy.LazyPartProgram`, whose code is
    generated when first needed: at its first call or attribute read, or
    by :func:`~pytato_like.execute_distributed_partition` in the first
    execution -- while the rank waits for its first messages if every
    part of the rank waits for one (code generation and the OpenCL build
    overlap with the communication), else at the start, before the first
    launch. Code generation errors are then raised by the execution (and
    reported to the other ranks). If false, every part's code is
    generated here. The default (``None``) is lazy for a
    :class:`~pytato_like.distributed.DistributedGraphPartition` and
    eager otherwise. Either way the kernels of the parts generated
    together are built by one OpenCL build (see the code generation
    page, "Code generation during the first communication")."""
    if target is None:
        target = "loopy" if _loopy_available() else "numpy"
    make: Callable[[DictOfNamedArrays], BoundProgram]
    if target == "numpy":
        make = NumpyPartProgram
    elif target == "loopy":
        from pytato_like.target.loopy import generate_loopy

        def make(outputs):
            # device transfers happen between parts; inside one they are
            # the identity, which the loopy target need not know about
            return generate_loopy(strip_device_transfers(outputs))
    else:
        raise ValueError(f"unknown part program target {target!r}; "
                         "expected 'loopy' or 'numpy'")
    if lazy is None:
        lazy = partition.compiles_lazily
    from pytato_like.target.loopy.report import compile_context
    programs: dict[Hashable, BoundProgram] = {}
    if lazy and target == "loopy":
        import threading

        from pytato_like.target.loopy.lazy import LazyPartProgram
        lock = threading.RLock()
        for pid, part in partition.parts.items():
            programs[pid] = LazyPartProgram(
                pid, make_dict_of_named_arrays({
                    name: partition.name_to_output[name]
                    for name in sorted(part.output_names)}), make, lock)
        return programs
    for pid, part in partition.parts.items():
        # progress and report lines of this compile name the part (and,
        # under MPI, the rank)
        with compile_context(part=pid):
            programs[pid] = make(make_dict_of_named_arrays({
                name: partition.name_to_output[name]
                for name in sorted(part.output_names)}))
    return programs


def execute_partition(partition: GraphPartition,
                      prg_per_partition: Mapping[Hashable, BoundProgram],
                      queue: cl.CommandQueue | None,
                      input_args: Mapping[str, object] | None = None
                      ) -> dict[str, object]:
    """Run the parts in :attr:`~GraphPartition.toposorted_part_ids` order on
    *queue* (``None`` for NumPy part programs), by
    :func:`~pytato_like.scheduler.run_parts`. Returns every part output by
    name (the partitioned DAG's results among them); outputs of loopy part
    programs stay on the device (``out_host=False``)."""
    values, _ = run_parts(partition, prg_per_partition, PartHooks(queue),
                          input_args)
    return values

# }}}

# vim: foldmethod=marker
