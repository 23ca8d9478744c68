"""Cutting a DAG with sends and receives into parts that cannot deadlock.

How :func:`find_distributed_partition` decides (collective over the
communicator):

1. Locally, find every send (through its
   :class:`~pytato_like.DistributedSendRefHolder`) and every receive, and for
   each send the receives its data depends on.
2. All ranks exchange that summary (one ``allgather``). A communication is
   identified by ``(source rank, destination rank, tag)``; it is one node of
   a global graph, with an edge from a receive to each send of the same
   rank that depends on it. Each communication gets a *batch*: the length of
   the longest chain of communications leading to it. All ranks compute the
   same batches; a cycle is a certain deadlock
   (:class:`~pytato_like.diagnostic.CycleAcrossRanksError`).
   Then, where the split pays (``split_interior="auto"``, see
   :mod:`~pytato_like.distributed.overlap_cost`), each rank rewrites its
   own DAG so that arrays whose first-axis ends alone need the receives of their
   time are computed as boundary and interior
   (:mod:`~pytato_like.distributed.overlap`); this only removes
   dependencies of sends on receives, so the batches stay valid.
3. Each array gets a *time* ``T``: 0 if it depends on no receive, else one
   more than the latest batch among the receives it depends on. The data
   of a send of batch ``b`` has time ``b`` (or earlier, after a split), so
   it can be sent as soon as the receives of earlier batches have arrived.
4. Parts are keyed ``(T, 0)`` (what the sends of time ``T`` need) and
   ``(T, 1)`` (everything else of time ``T``); empty keys are dropped, the
   rest numbered in order. So the number of parts depends only on the
   depth of the communication dependencies, never on the number of sends.
   Sends go out as soon as the part computing them ends; the other work of
   the same time runs while they travel; a receive is waited for only by
   the parts that use it.
5. Placement: results and arrays tagged
   :class:`~pytato_like.tags.ImplStored` are computed at their time, as
   early as their inputs allow; every other array is computed in the
   earliest part among its users. Every array is computed in exactly one
   part; an array used by a later part is stored as an output of its own
   part (never recomputed).

Everything is iterative (explicit passes over a topological order).

.. autoclass:: CommunicationOpIdentifier
.. data:: CommunicationDepGraph

    ``Mapping[CommunicationOpIdentifier, AbstractSet[CommunicationOpIdentifier]]``:
    each communication and the communications it waits for.

.. data:: PartId

    What identifies a part (any hashable value).

.. autoclass:: DistributedGraphPart
.. autoclass:: DistributedGraphPartition
.. autofunction:: find_distributed_partition
.. autofunction:: _schedule_task_batches_counted
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from pytato_like.array import Array
from pytato_like.collector import paused_collection
from pytato_like.diagnostic import (
    CycleAcrossRanksError,
    DistributedPartitionError,
    NotAnArrayError,
    PartitionInducedCycleError,
)
from pytato_like.distributed.nodes import DistributedRecv, DistributedSend
from pytato_like.distributed.overlap import split_interior_from_boundary
from pytato_like.distributed.overlap_cost import (
    OverlapDecision,
    decide_split,
    split_cannot_pay,
)
from pytato_like.distributed.safety import (
    allgather_or_raise,
    as_communicator,
    is_communicator,
    is_mpi,
)
from pytato_like.distributed.threads import ensure_device_threads
from pytato_like.partition import (
    COMPUTED,
    RECV,
    DagIndex,
    GraphPart,
    GraphPartition,
    PartBuilder,
    reserved_name_generator,
)
from pytato_like.tags import ImplStored
from pytato_like.target import normalize_outputs

if TYPE_CHECKING:
    from pytato_like.distributed.messages import Message
    from pytato_like.distributed.safety import Communicator


class CommunicationOpIdentifier(NamedTuple):
    """One communication: a send and its receive, named by the ranks at
    both ends and the tag (pytato's name). A tuple, so it equals
    ``(src_rank, dest_rank, comm_tag)``; which end is the local rank's
    depends on whether the local rank is *src_rank* or *dest_rank*.

    .. attribute:: src_rank
    .. attribute:: dest_rank
    .. attribute:: comm_tag
    """

    src_rank: int
    dest_rank: int
    comm_tag: Hashable


CommID = CommunicationOpIdentifier

#: What identifies a part (pytato's alias).
PartId = Hashable

#: Each communication mapped to the communications it waits for (pytato's
#: alias, for type hints).
CommunicationDepGraph = Mapping[CommunicationOpIdentifier,
                                AbstractSet[CommunicationOpIdentifier]]


@dataclasses.dataclass(frozen=True, init=False)
class DistributedGraphPart(GraphPart):
    """A :class:`~pytato_like.partition.GraphPart` with its communication,
    under pytato's attribute names. Names in :attr:`name_to_recv_node` are
    partition inputs (never outputs); names in :attr:`name_to_send_nodes`
    are outputs of the part.

    .. attribute:: name_to_recv_node

        Mapping from the names of received values this part reads to their
        :class:`~pytato_like.DistributedRecv`.

    .. attribute:: name_to_send_nodes

        Mapping from each part output name that is sent to the sequence of
        :class:`~pytato_like.DistributedSend` nodes sending it (the
        partitioner gives every send a name of its own, so each sequence
        holds one send).

    The earlier names stay available (as attributes and constructor
    keywords; as keywords they take precedence, so
    :func:`dataclasses.replace` with them works):

    .. attribute:: input_name_to_recv_node

        The same mapping as :attr:`name_to_recv_node`.

    .. attribute:: output_name_to_send_node

        Mapping from output name to its one send.

    .. attribute:: distributed_sends

        Every send issued when this part has run, as a list.
    """

    name_to_recv_node: Mapping[str, DistributedRecv]
    name_to_send_nodes: Mapping[str, Sequence[DistributedSend]]

    def __init__(self, pid: Hashable, needed_pids: frozenset,
                 user_input_names: frozenset[str],
                 partition_input_names: frozenset[str],
                 output_names: frozenset[str],
                 name_to_recv_node: Mapping[str, DistributedRecv] | None = None,
                 name_to_send_nodes: Mapping[str, Sequence[DistributedSend]]
                 | None = None, *,
                 input_name_to_recv_node: Mapping[str, DistributedRecv]
                 | None = None,
                 output_name_to_send_node: Mapping[str, DistributedSend]
                 | None = None,
                 distributed_sends: Sequence[DistributedSend] | None = None,
                 ) -> None:
        if input_name_to_recv_node is not None:
            name_to_recv_node = input_name_to_recv_node
        if output_name_to_send_node is not None:
            name_to_send_nodes = {name: (send,) for name, send
                                  in output_name_to_send_node.items()}
        name_to_send_nodes = {name: tuple(sends) for name, sends
                              in (name_to_send_nodes or {}).items()}
        if distributed_sends is not None:
            # derived from the named sends; a list that disagrees is a bug
            named = {id(s) for sends in name_to_send_nodes.values()
                     for s in sends}
            stray = [s for s in distributed_sends if id(s) not in named]
            if stray or len(named) != len({id(s) for s in distributed_sends}):
                raise ValueError(
                    f"part {pid!r}: distributed_sends must be the sends of "
                    "name_to_send_nodes (output_name_to_send_node); got "
                    f"{len(distributed_sends)} sends for {len(named)} named")
        for name in name_to_send_nodes:
            if name not in output_names:
                raise ValueError(
                    f"part {pid!r}: sent name {name!r} is not one of its "
                    f"output_names {sorted(output_names, key=str)}")
        set_ = object.__setattr__
        set_(self, "pid", pid)
        set_(self, "needed_pids", frozenset(needed_pids))
        set_(self, "user_input_names", frozenset(user_input_names))
        set_(self, "partition_input_names", frozenset(partition_input_names))
        set_(self, "output_names", frozenset(output_names))
        set_(self, "name_to_recv_node", dict(name_to_recv_node or {}))
        set_(self, "name_to_send_nodes", name_to_send_nodes)

    @property
    def input_name_to_recv_node(self) -> Mapping[str, DistributedRecv]:
        return self.name_to_recv_node

    @property
    def output_name_to_send_node(self) -> dict[str, DistributedSend]:
        # one send per name (see name_to_send_nodes); the first otherwise
        return {name: sends[0]
                for name, sends in self.name_to_send_nodes.items() if sends}

    @property
    def distributed_sends(self) -> list[DistributedSend]:
        return [send for sends in self.name_to_send_nodes.values()
                for send in sends]


@dataclasses.dataclass(frozen=True, init=False)
class DistributedGraphPartition(GraphPartition):
    """A :class:`~pytato_like.partition.GraphPartition` whose
    :attr:`~pytato_like.partition.GraphPartition.parts` are
    :class:`DistributedGraphPart` instances (pytato's attributes:
    ``parts``, ``name_to_output``, ``overall_output_names``).

    .. attribute:: messages

        The packed messages this rank sends and receives (a tuple of
        :class:`~pytato_like.distributed.messages.Message`), filled in by
        :func:`~pytato_like.number_distributed_tags`; ``None`` before. The
        executor sends one message per (part, destination rank) when they
        are known, one per array otherwise.

    .. attribute:: overlap_decision

        Whether :func:`find_distributed_partition` split this rank's DAG
        into interior and boundary, and why (an
        :class:`~pytato_like.distributed.overlap_cost.OverlapDecision`;
        ``None`` for partitions made otherwise).
    """

    # the parts communicate: compile each on first use, during the
    # first receives
    compiles_lazily = True

    messages: tuple[Message, ...] | None
    parts: Mapping[Hashable, DistributedGraphPart]
    overlap_decision: OverlapDecision | None

    def __init__(self, parts: Mapping[Hashable, DistributedGraphPart],
                 name_to_output: Mapping[str, Array] | None = None,
                 overall_output_names=(),
                 toposorted_part_ids: list[Hashable] | None = None,
                 messages: tuple[Message, ...] | None = None, *,
                 var_name_to_result: Mapping[str, Array] | None = None,
                 overlap_decision: OverlapDecision | None = None,
                 ) -> None:
        super().__init__(parts, name_to_output, overall_output_names,
                         toposorted_part_ids,
                         var_name_to_result=var_name_to_result)
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "overlap_decision", overlap_decision)

    def recv_name_to_node(self) -> dict[str, DistributedRecv]:
        """Every receive of the partition, by input name."""
        return {name: node for part in self.parts.values()
                for name, node in part.name_to_recv_node.items()}

    def send_name_to_node(self) -> dict[str, DistributedSend]:
        """Every send of the partition, by output name."""
        return {name: node for part in self.parts.values()
                for name, node in part.output_name_to_send_node.items()}


# {{{ global communication batches

def _schedule_task_batches_counted(
        task_ids_to_needed_task_ids: Mapping[Hashable, AbstractSet[Hashable]]
        ) -> tuple[list[set[Hashable]], int]:
    """Pytato's scheduler of tasks in batches (its tests call it): batch
    ``k`` holds the tasks whose longest chain of needed tasks has length
    ``k``, so a task comes in a later batch than every task it needs and
    there are as few batches as the longest chain allows. Returns the
    batches and the number of task visits made, which is twice the number
    of tasks (each is entered once by the depth-first walk and placed once
    in its batch): linear, as pytato's tests check.

    The walk runs on an explicit stack, so chains of any length work.
    *task_ids_to_needed_task_ids* must list every task as a key; a needed
    task that is not a key raises
    :class:`~pytato_like.diagnostic.DistributedPartitionError`, a cycle
    :class:`~pytato_like.diagnostic.PartitionInducedCycleError`.
    """
    needed = task_ids_to_needed_task_ids
    level: dict[Hashable, int] = {}
    visits = 0
    for root in needed:
        if root in level:
            continue
        visits += 1
        on_path = {root}
        stack = [(root, iter(needed[root]))]
        while stack:
            task, deps = stack[-1]
            for dep in deps:
                if dep in level:
                    continue
                if dep in on_path:
                    raise PartitionInducedCycleError(
                        f"the tasks form a cycle through {dep!r} (needed by "
                        f"{task!r})")
                if dep not in needed:
                    raise DistributedPartitionError(
                        f"task {task!r} needs task {dep!r}, which is not a "
                        "key of the mapping of tasks to their needed tasks")
                visits += 1
                on_path.add(dep)
                stack.append((dep, iter(needed[dep])))
                break
            else:
                stack.pop()
                on_path.discard(task)
                level[task] = 1 + max((level[d] for d in needed[task]),
                                      default=-1)
    batches: list[set[Hashable]] = [
        set() for _ in range(1 + max(level.values(), default=-1))]
    for task, task_level in level.items():
        batches[task_level].add(task)
    return batches, visits + len(level)


def _set_bits(mask: int) -> list[int]:
    """Positions of the bits set in *mask*, lowest first: as many steps as
    bits set (a few high bits of a long mask cost a few steps)."""
    positions = []
    while mask:
        lowest = mask & -mask
        positions.append(lowest.bit_length() - 1)
        mask ^= lowest
    return positions


#: how many of a rank's sends with fewer needed receives
#: :func:`_comm_batches` tries as the base of the next one
_BASE_CANDIDATES = 4


def _comm_batches(summaries: list[tuple[list, list]]) -> dict[CommID, int]:
    """Batch (longest chain length) of each communication, from every rank's
    ``(sends, recvs)`` summary. Identical on all ranks.

    Communications are numbered first, so the longest-path pass works on
    integers. A send's mask holds every receive it needs, directly or not:
    a send of step *k* of a time-stepping loop needs the receives of all
    earlier steps, so the masks hold a number of receives that grows with
    the square of the steps (3 000 steps: 2.6 s when each was expanded).
    Each send therefore needs, in the pass, a *base*: one of the rank's
    sends whose mask is a subset of its own (the largest found among the
    few before it, by number of receives), and the receives its mask adds
    to the base's. Its batch is one more than the largest of the base's
    and of those receives' batches: the same result, from as many
    receives as the loop has steps."""
    comms: list[CommID] = []
    number: dict[CommID, int] = {}

    def intern(comm: CommID) -> int:
        i = number.get(comm)
        if i is None:
            i = number[comm] = len(comms)
            comms.append(comm)
        return i

    # comm -> (comm, 1 for a receive it needs, 0 for its base): its batch
    # is the largest of their batches plus these
    needs: dict[int, list[tuple[int, int]]] = {}
    for rank, (sends, recvs) in enumerate(summaries):
        recv_ids = [intern(CommID(src, rank, tag)) for src, tag in recvs]
        # the rank's sends so far, by their number of receives
        done: list[tuple[int, int]] = []
        for dest, tag, mask in sorted(sends, key=lambda s: s[2].bit_count()):
            c = intern(CommID(rank, dest, tag))
            needed = needs.setdefault(c, [])
            added = mask
            for base, base_mask in reversed(done[-_BASE_CANDIDATES:]):
                # (a send made twice is no base of itself: it is refused
                # later, as a duplicate)
                if base != c and base_mask & ~mask == 0:
                    needed.append((base, 0))
                    added = mask & ~base_mask
                    break
            needed += [(recv_ids[i], 1) for i in _set_bits(added)]
            done.append((c, mask))

    # Kahn's algorithm, longest path
    users: list[list[tuple[int, int]]] = [[] for _ in comms]
    missing = [0] * len(comms)
    for c, needed in needs.items():
        missing[c] = len(needed)
        for n, step in needed:
            users[n].append((c, step))
    batch_of = [0] * len(comms)
    ready = [c for c in range(len(comms)) if not missing[c]]
    while ready:
        c = ready.pop()
        for u, step in users[c]:
            if batch_of[u] < batch_of[c] + step:
                batch_of[u] = batch_of[c] + step
            missing[u] -= 1
            if not missing[u]:
                ready.append(u)
    stuck = [comms[c] for c in range(len(comms)) if missing[c]]
    if stuck:
        raise CycleAcrossRanksError(
            "the sends and receives of all ranks depend on each other in a "
            "cycle, so running them would deadlock; communications on or "
            "after the cycle (source rank -> destination rank, tag): "
            + ", ".join(f"{s} -> {d}, tag {t!r}" for s, d, t in stuck[:8])
            + (" ..." if len(stuck) > 8 else ""))
    return dict(zip(comms, batch_of, strict=True))


def _recv_time(node: DistributedRecv, rank: int,
               batches: dict[CommID, int]) -> int:
    """The time of a receive of *rank*: one more than its batch."""
    cid = CommID(node.src_rank, rank, node.comm_tag)
    return batches[cid] + 1 if cid in batches else 1

# }}}


class _LocalAnalysis:
    """What one rank's DAG holds: nodes, sends, receives, dependencies."""

    def __init__(self, outputs: object, rank: int) -> None:
        self.rank = rank
        self.output_map, _ = normalize_outputs(outputs)
        dag = self.dag = DagIndex(list(self.output_map.values()))
        self.out_idx = dag.indices_of(self.output_map.values())
        self.live, self.sends = dag.live(self.out_idx, follow_sends=True)
        self.send_idx = [dag.canon[dag.index[id(s.data)]] for s in self.sends]
        self.name_gen = reserved_name_generator(dag.order, self.output_map)
        canon, kind, kids = dag.canon, dag.kind, dag.kids

        self.recvs: list[int] = []   # canonical indices
        recv_bit: dict[int, int] = {}
        for i in range(len(dag.order)):
            c = canon[i]
            if kind[c] is RECV and self.live[i] and c not in recv_bit:
                recv_bit[c] = len(self.recvs)
                self.recvs.append(c)
        self.recv_names = {c: self.name_gen("_pt_recv") for c in self.recvs}

        # which receives each array depends on, as a bit mask
        mask = [0] * len(dag.order)
        for i in range(len(dag.order)):
            if canon[i] != i:
                continue
            if kind[i] is RECV:
                mask[i] = 1 << recv_bit[i] if i in recv_bit else 0
            elif kind[i] is COMPUTED:
                m = 0
                for k in kids[i]:
                    m |= mask[canon[k]]
                mask[i] = m
        self.mask = mask

    def summary(self) -> tuple[list, list]:
        """``(sends, recvs)`` for the global batch computation: receives as
        ``(src, tag)``, sends as ``(dest, tag, mask)``, where bit *i* of
        *mask* says the send needs receive *i* of that list."""
        sends = [(send.dest_rank, send.comm_tag, self.mask[d])
                 for send, d in zip(self.sends, self.send_idx, strict=True)]
        # (the nodes at self.recvs are receives)
        received = [cast("DistributedRecv", self.dag.order[r]) for r in self.recvs]
        recvs = [(node.src_rank, node.comm_tag) for node in received]
        return sends, recvs

    def make_partition(self, batches: dict[CommID, int]
                       ) -> DistributedGraphPartition:
        dag, rank, live = self.dag, self.rank, self.live
        order, kids, canon, kind = dag.order, dag.kids, dag.canon, dag.kind
        n = len(order)

        # {{{ time of every array

        time = [0] * n
        for i in range(n):
            if canon[i] != i:
                continue
            if kind[i] is RECV:
                time[i] = _recv_time(cast(DistributedRecv, order[i]), rank,
                                     batches)
            elif kind[i] is COMPUTED:
                t = 0
                for k in kids[i]:
                    tk = time[canon[k]]
                    if tk > t:
                        t = tk
                time[i] = t

        # }}}

        # {{{ placement, users before what they use

        stored = {canon[k] for k in self.out_idx}
        earliest_user: list[tuple[int, int] | None] = [None] * n
        for d in self.send_idx:
            if kind[d] is COMPUTED:
                earliest_user[d] = (time[d], 0)

        part_of: list[tuple[int, int] | None] = [None] * n
        for i in range(n - 1, -1, -1):
            if canon[i] != i or kind[i] is not COMPUTED or not live[i]:
                continue
            t = time[i]
            first_use = earliest_user[i]
            if i in stored or any(isinstance(tag, ImplStored)
                                  for tag in order[i].tags):
                key = (t, 0) if first_use == (t, 0) else (t, 1)
            else:
                key = first_use if first_use is not None else (t, 1)
            part_of[i] = key
            for k in kids[i]:
                c = canon[k]
                if kind[c] is COMPUTED:
                    prev = earliest_user[c]
                    if prev is None or key < prev:
                        earliest_user[c] = key

        # }}}

        builder = PartBuilder(dag, part_of, live, self.name_gen, self.recv_names)
        for name, k in zip(self.output_map, self.out_idx, strict=True):
            builder.add_output(name, k, (time[canon[k]], 1))
        send_names: dict[tuple[int, int], dict[str, DistributedSend]] = {}
        # computed arrays whose part output name a send took over
        sent_under_output_name: set[int] = set()
        for send, d in zip(self.sends, self.send_idx, strict=True):
            # (a computed send is live: it has a part)
            key = (cast("tuple[int, int]", part_of[d]) if kind[d] is COMPUTED
                   else (time[d], 0))
            read_later = builder.placeholders.get(d)
            if (kind[d] is COMPUTED and read_later is not None
                    and d not in sent_under_output_name):
                # later parts read this array already: its part outputs
                # it once, under that name, for them and for the message
                # (not twice, which cost a second array per call and a
                # second store in the kernel)
                sent_under_output_name.add(d)
                name = read_later.name
            else:
                name = self.name_gen("_pt_send")
                builder.add_output(name, d, key)
            send_names.setdefault(key, {})[name] = send

        # part keys here are (time, 0 or 1)
        keys = sorted(cast("dict[tuple[int, int], object]", builder.parts))
        pid_of = {key: pid for pid, key in enumerate(keys)}
        parts: dict[Hashable, DistributedGraphPart] = {}
        for key in keys:
            build = builder.parts[key]
            sends = send_names.get(key, {})
            parts[pid_of[key]] = DistributedGraphPart(
                pid=pid_of[key],
                needed_pids=frozenset(pid_of[k] for k in build.needed),
                user_input_names=frozenset(build.user_inputs),
                partition_input_names=frozenset(build.partition_inputs),
                output_names=frozenset(build.outputs),
                name_to_recv_node=cast("dict[str, DistributedRecv]",
                                       dict(build.recvs)),
                name_to_send_nodes={name: (send,)
                                    for name, send in sends.items()})
        return DistributedGraphPartition(
            parts=parts, name_to_output=builder.var_name_to_result,
            overall_output_names=tuple(self.output_map),
            toposorted_part_ids=list(range(len(keys))))


@paused_collection  # (allocation-heavy: see pytato_like.collector)
def find_distributed_partition(mpi_communicator: object, outputs: object = None, *,
                               split_interior: bool | str = "auto",
                               deep_interiors: bool = True
                               ) -> DistributedGraphPartition:
    """Partition *outputs* (a :class:`~pytato_like.DictOfNamedArrays`, a
    dict of arrays or an array) into parts joined by sends and receives.

    Collective over *mpi_communicator* (``None`` partitions for a one-rank
    world). The older form ``find_distributed_partition(outputs)`` uses
    ``MPI.COMM_WORLD``. See the module documentation for how parts are
    chosen. Arrays whose first-axis ends alone need a time's receives can
    first be split into boundary and interior
    (:mod:`pytato_like.distributed.overlap`): *split_interior* ``"auto"``
    (the default) keeps the split where the cost model of
    :mod:`pytato_like.distributed.overlap_cost` says it pays for this DAG,
    True always splits, False never does; the partition's
    ``overlap_decision`` says what was done and why. With
    *deep_interiors* (the default) the rows no halo of any step reaches
    are computed for all steps in one fused kernel and each step computes
    thin boundary strips; without, each step's interior is computed while
    that step's messages travel (one pass over the fields per step, for
    networks whose latency outweighs it). Either way the values are
    the same, bit for bit."""
    # (a program without sends or receives starts here: see
    # distributed.threads)
    ensure_device_threads()
    if outputs is None:
        if is_communicator(mpi_communicator) and mpi_communicator is not None:
            raise NotAnArrayError(
                "find_distributed_partition(comm, outputs) needs outputs")
        outputs = mpi_communicator
        from mpi4py import MPI
        mpi_communicator = MPI.COMM_WORLD
    elif isinstance(mpi_communicator, (Array, Mapping)) and is_communicator(outputs):
        mpi_communicator, outputs = outputs, mpi_communicator
    # (a communicator now: is_communicator's test or the older form put
    # it there)
    comm = as_communicator(cast("Communicator | None", mpi_communicator))
    rank = comm.Get_rank()

    analysis: list[_LocalAnalysis] = []

    def analyse() -> tuple[list, list]:
        # (inside the collective, so every rank learns of a bad value)
        if not (isinstance(split_interior, bool) or (
                isinstance(split_interior, str) and split_interior == "auto")):
            raise DistributedPartitionError(
                f"split_interior must be 'auto', True or False, not "
                f"{split_interior!r} (on rank {rank})")
        if not isinstance(deep_interiors, bool):
            raise DistributedPartitionError(
                f"deep_interiors must be True or False, not "
                f"{deep_interiors!r} (on rank {rank})")
        analysis.append(_LocalAnalysis(outputs, rank))
        summary = analysis[0].summary()
        sends, recvs = summary
        if is_mpi(comm):
            # (a one-rank stand-in, e.g. ``None``, may name peers that only
            # exist in a real run: partitioning it inspects the program)
            check_peer_ranks(rank, comm.Get_size(),
                             [(dest, tag) for dest, tag, _ in sends],
                             list(recvs))
        return summary

    summaries = allgather_or_raise(comm, "partitioning", analyse)
    batches = _comm_batches(summaries)
    local, decision = _split_interior(analysis[0], batches, split_interior,
                                      deep_interiors)
    partition = local.make_partition(batches)
    object.__setattr__(partition, "overlap_decision", decision)
    return partition


def check_peer_ranks(rank: int, size: int,
                     sends: Iterable[tuple[int, Hashable]],
                     recvs: Iterable[tuple[int, Hashable]]) -> None:
    """Raise :class:`~pytato_like.diagnostic.DistributedPartitionError`
    naming the rank, the tag and the communicator's size if one of *sends*
    ``(destination, tag)`` or *recvs* ``(source, tag)`` of rank *rank*
    names a rank that is not one of the communicator's *size* ranks."""
    for what, peers in (("sends to", sends), ("receives from", recvs)):
        for peer, tag in peers:
            if not isinstance(peer, (int, np.integer)) or isinstance(
                    peer, bool) or not 0 <= peer < size:
                raise DistributedPartitionError(
                    f"rank {rank} {what} rank {peer!r} (tag {tag!r}), which "
                    f"is not a rank of the communicator: it has {size} "
                    f"rank(s), 0 to {size - 1}")


def _split_interior(local: _LocalAnalysis, batches: dict[CommID, int],
                    mode: bool | str = "auto", deep_interiors: bool = True
                    ) -> tuple[_LocalAnalysis, OverlapDecision]:
    """*local*, or the analysis of its DAG with boundary and interior
    split (see :mod:`~pytato_like.distributed.overlap`), as *mode* and
    the cost model of :mod:`~pytato_like.distributed.overlap_cost` decide,
    and the decision. The batches stay valid: a split only removes
    dependencies of sends on receives."""
    rank = local.rank
    if mode is False:
        return local, decide_split(local.output_map, local.output_map, 0,
                                   lambda ary: None, mode)

    def recv_time(ary: Array) -> int | None:
        return (_recv_time(ary, rank, batches)
                if isinstance(ary, DistributedRecv) else None)

    if mode == "auto":
        hopeless = split_cannot_pay(local.output_map, recv_time, local.dag)
        if hopeless is not None:
            return local, hopeless
    outputs, n_split = split_interior_from_boundary(
        local.output_map, recv_time, deep_interiors=deep_interiors)
    if not n_split and mode == "auto":
        # the split without its size threshold, for the figures of why
        # nothing is split (a small interior, or no edge rows at all)
        probe, n_probe = split_interior_from_boundary(
            local.output_map, recv_time, min_interior_elements=1,
            deep_interiors=deep_interiors)
        decision = decide_split(local.output_map, probe, n_probe, recv_time,
                                dags=(local.dag, None))
        if decision.split:
            decision = dataclasses.replace(
                decision, split=False, reason="not split: no array's "
                "interior is worth computing apart (each below "
                "MIN_INTERIOR_ELEMENTS)")
        return local, decision
    # (the analysis of the split DAG is needed if it is kept; its DAG
    # lists, like the original's, spare the decision its own walks)
    split_local = _LocalAnalysis(outputs, rank)
    decision = decide_split(local.output_map, outputs, n_split, recv_time,
                            mode, dags=(local.dag, split_local.dag))
    if not decision.split:
        return local, decision
    return split_local, decision
