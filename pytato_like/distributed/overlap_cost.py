"""Whether the interior/boundary split of
:mod:`~pytato_like.distributed.overlap` pays for one rank's DAG.

:func:`~pytato_like.find_distributed_partition` with
``split_interior="auto"`` (the default) makes the split, then asks
:func:`decide_split` whether to keep it, and records the answer, with a
one-line reason, as the partition's ``overlap_decision``; unless
:func:`split_cannot_pay` finds beforehand that no split could be kept
(the work on the path of the sends, which bounds what a split saves, is
below :data:`MIN_OVERLAP_ELEMENTS` per exchange), and then the split is
not made at all.

How it decides. The work of a DAG is counted in elements of the arrays
that compute something (index lambdas and einsums; views, concatenations
and inputs are not counted). Each array has a *time*, as in the
partitioner: 0 without receives, else the latest receive batch it
depends on, plus one. The work **on the path of the sends** is the work
of the arrays of time 1 or more that a send of the same time depends on:
computed after a receive arrives and before the next message can leave,
it cannot overlap the messages. What the split saves is the drop of
that work (the interior cells taken off the path: they can run while the
messages travel); what it costs is the work it duplicates (strip rows
computed twice, see the deep interiors) plus :data:`KERNEL_ELEMENTS` per
extra kernel (a head and a tail per split array). It is kept when

* the saved work per exchange (communication batch this rank waits
  for) is at least :data:`MIN_OVERLAP_ELEMENTS` -- below it a launch and
  a message's latency dwarf the interior -- and
* the saved work exceeds the cost.

The split never changes values (each cell is the same expression of the
same operands), so the decision only moves time. Both walks are
iterative passes over a topological order.

.. autoclass:: OverlapDecision
.. autoclass:: DagLists
.. autofunction:: decide_split
.. autofunction:: split_cannot_pay
.. autofunction:: send_path_work
.. data:: MIN_OVERLAP_ELEMENTS
.. data:: KERNEL_ELEMENTS
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from pytato_like._traversal import depth_first
from pytato_like.array import Array, Einsum, IndexLambda
from pytato_like.distributed.nodes import DistributedSendRefHolder
from pytato_like.transform._graph import walk_children

#: The least work (elements) per exchange the split must take off the
#: path of the sends to be kept: below it the interior is over before a
#: message's latency is.
MIN_OVERLAP_ELEMENTS = 32768

#: The cost of one extra kernel launch, in elements of work (about 10 us
#: of launch and scheduling against about 1 ns per element).
KERNEL_ELEMENTS = 8192

@dataclasses.dataclass(frozen=True)
class OverlapDecision:
    """Whether the interior/boundary split was made on this rank, and why.

    .. attribute:: split

        True if the partition was made from the split DAG.

    .. attribute:: mode

        The ``split_interior`` asked for: ``"auto"``, True or False.

    .. attribute:: reason

        One line saying why (the figures below, in words).

    .. attribute:: exchanges

        The communication batches this rank waits for (0 without
        receives).

    .. attribute:: saved_elements

        Work taken off the path of the sends by the split (elements, all
        exchanges).

    .. attribute:: cost_elements

        Duplicated work plus :data:`KERNEL_ELEMENTS` per extra kernel.
    """

    split: bool
    mode: str | bool
    reason: str
    exchanges: int = 0
    saved_elements: int = 0
    cost_elements: int = 0

    def __str__(self) -> str:
        return self.reason


@dataclasses.dataclass(frozen=True)
class Work:
    """The work of one DAG (elements of the arrays that compute)."""

    #: communication batches waited for (the largest time)
    exchanges: int
    #: all the work
    total: int
    #: the work on the path of the sends (see the module documentation)
    on_send_path: int


def _elements(node: object) -> int:
    if not isinstance(node, (IndexLambda, Einsum)):
        return 0
    if not all(isinstance(d, int) for d in node.shape):
        return 0
    return math.prod(node.shape)


def send_path_work(outputs: Mapping[str, Array],
                   source_time: Callable[[Array], int | None]) -> Work:
    """The :class:`Work` of the DAG of *outputs*; *source_time* gives a
    receive's time (one more than its batch), None for other arrays."""
    return _walk(outputs, source_time)[0]


class DagLists(Protocol):
    """A DAG as lists (as :class:`~pytato_like.partition.DagIndex` holds
    it): ``order`` (children first), ``kids[i]`` (indices of the children
    of ``order[i]``) and ``index`` (``id`` of a node -> its index)."""

    @property
    def order(self) -> Sequence[Array]: ...

    @property
    def kids(self) -> Sequence[tuple[int, ...]]: ...

    @property
    def index(self) -> Mapping[int, int]: ...


@dataclasses.dataclass
class _Lists:
    order: list[Array]
    kids: list[tuple[int, ...]]
    index: dict[int, int]


def _lists(outputs: Mapping[str, Array]) -> _Lists:
    """The DAG of *outputs* as :class:`DagLists`, in one walk."""
    lists = _Lists([], [], {})
    for node, children in depth_first(list(outputs.values()), walk_children):
        lists.index[id(node)] = len(lists.order)
        lists.order.append(node)
        lists.kids.append(tuple(lists.index[id(c)] for c in children))
    return lists


def _walk(outputs: Mapping[str, Array],
          source_time: Callable[[Array], int | None],
          dag: DagLists | None = None) -> tuple[Work, set[int]]:
    """:func:`send_path_work`, and the ids of the arrays that compute;
    *dag*, if given, is the DAG of *outputs* as lists already."""
    lists: DagLists = dag if dag is not None else _lists(outputs)
    order, kids, index = lists.order, lists.kids, lists.index
    time = [0] * len(order)
    for i, node in enumerate(order):
        if isinstance(node, DistributedSendRefHolder):
            time[i] = time[index[id(node.passthrough_data)]]
            continue
        src = source_time(node) if isinstance(node, Array) else None
        time[i] = src if src is not None else max(
            (time[k] for k in kids[i]), default=0)
    # from the sends back: the arrays of a send's time that its data needs
    on_path = [False] * len(order)
    for i in range(len(order) - 1, -1, -1):
        node = order[i]
        if isinstance(node, DistributedSendRefHolder):
            data = index[id(node.send_data)]
            on_path[data] = on_path[data] or time[data] > 0
        elif on_path[i]:
            for k in kids[i]:
                if time[k] == time[i]:
                    on_path[k] = True
    total = on_send_path = 0
    computing: set[int] = set()
    for i, node in enumerate(order):
        n = _elements(node)
        if n:
            computing.add(id(node))
        total += n
        if on_path[i]:
            on_send_path += n
    return Work(exchanges=max(time, default=0), total=total,
                on_send_path=on_send_path), computing


def split_cannot_pay(original: Mapping[str, Array],
                     source_time: Callable[[Array], int | None],
                     dag: DagLists | None = None) -> OverlapDecision | None:
    """The ``"auto"`` decision not to split *original*, made before any
    split, when no split could be kept: the saved work is at most the work
    on the path of the sends, so when that is below
    :data:`MIN_OVERLAP_ELEMENTS` per exchange the split pass (a rebuild of
    the DAG, ~2.5 ms a step of a time loop) is not run. None when a split
    might pay. *dag*: the DAG of *original* as :class:`DagLists`, if the
    caller has it."""
    before, _ = _walk(original, source_time, dag)
    bound = before.on_send_path // max(before.exchanges, 1)
    if bound >= MIN_OVERLAP_ELEMENTS:
        return None
    if not before.on_send_path:
        reason = ("not split (nothing to split): no work between a receive "
                  "and a send that waits for it")
    else:
        reason = (f"not split: interior per exchange at most {bound} "
                  f"elements < {MIN_OVERLAP_ELEMENTS} (the work on the path "
                  f"of the sends: {before.on_send_path} elements, "
                  f"{before.exchanges} exchanges)")
    return OverlapDecision(False, "auto", reason, exchanges=before.exchanges)


def decide_split(original: Mapping[str, Array], split: Mapping[str, Array],
                 n_split: int, source_time: Callable[[Array], int | None],
                 mode: str | bool = "auto",
                 dags: tuple[DagLists | None, DagLists | None] = (None, None)
                 ) -> OverlapDecision:
    """Whether to keep *split* (*original* with *n_split* arrays split by
    :func:`~pytato_like.distributed.overlap.split_interior_from_boundary`)
    by the model of the module documentation. With *mode* True the split
    is kept whatever the model says (the reason still gives its figures);
    with False it is never kept. *dags*: the DAGs of *original* and
    *split* as :class:`DagLists` where the caller has them (else each is
    walked)."""
    if mode is False:
        return OverlapDecision(False, mode, "not split: split_interior=False")
    forced = mode is True
    if not n_split:
        return OverlapDecision(
            False, mode, f"not split ({'forced, ' if forced else ''}nothing "
            "to split): no array's "
            "first-axis ends alone read receives with an interior worth "
            "computing apart")
    before, computing_before = _walk(original, source_time, dags[0])
    after, computing_after = _walk(split, source_time, dags[1])
    exchanges = max(before.exchanges, 1)
    saved = before.on_send_path - after.on_send_path
    duplicated = max(after.total - before.total, 0)
    # arrays the split made (by identity: it rebuilds only what it changes)
    new_kernels = len(computing_after - computing_before)
    # the pieces a split adds: a head and a tail per array split (its
    # interior takes the place of the array)
    extra_kernels = min(new_kernels, 2 * n_split)
    cost = duplicated + KERNEL_ELEMENTS * extra_kernels
    per_exchange = saved // exchanges
    figures = dict(exchanges=before.exchanges, saved_elements=saved,
                   cost_elements=cost)
    share = 100 * saved / before.on_send_path if before.on_send_path else 0.0
    if per_exchange < MIN_OVERLAP_ELEMENTS:
        keep = forced
        reason = (f"interior per exchange {per_exchange} elements < "
                  f"{MIN_OVERLAP_ELEMENTS}")
    elif saved <= cost:
        keep = forced
        reason = (f"interior {saved} elements <= cost {cost} ({duplicated} "
                  f"duplicated, {extra_kernels} extra kernels)")
    else:
        keep = True
        reason = (f"{before.exchanges} exchanges, interior {per_exchange} "
                  f"elements per exchange ({share:.1f} % of the work "
                  f"before the sends), cost {cost} ({duplicated} "
                  f"duplicated, {extra_kernels} extra kernels)")
    verdict = "split" if keep else "not split"
    if forced:
        verdict += " (forced)"
    return OverlapDecision(keep, mode, f"{verdict}: {n_split} arrays, "
                           + reason, **figures)
