"""The part scheduler: runs the parts of a partition in dependency order.

Every executor of a partition -- serial
(:func:`~pytato_like.partition.execute_partition`), on several devices
(:func:`~pytato_like.runtime.placement.execute_partition_on_devices`),
over MPI (:func:`~pytato_like.distributed.execute.execute_distributed_partition`)
-- is :func:`run_parts` with its own :class:`PartHooks`. The scheduler owns
the order; the hooks own everything that moves data between parts.

The order: a part is *ready* when every part in its
:attr:`~pytato_like.partition.GraphPart.needed_pids` has run and every
name the hooks say arrives from elsewhere (:meth:`PartHooks.awaited_names`)
has arrived. Of the ready parts, the one first in
:attr:`~pytato_like.partition.GraphPartition.toposorted_part_ids` runs
next, so without awaited names the parts run exactly in that order. When
no part is ready the scheduler asks the hooks for arrivals, blocking
(:meth:`PartHooks.arrivals`); after every part it picks up arrivals
without blocking. One pass over the parts with counters and a heap: no
recursion, any number of parts.

Running a part: its inputs are the values (user inputs, outputs of earlier
parts, arrivals) named by
:meth:`~pytato_like.partition.GraphPart.all_input_names`; the hooks may
replace them (:meth:`PartHooks.prepare_inputs`, e.g. a copy to the part's
device) and name events to wait for. The program is called through the
program contract (:class:`~pytato_like.target.program.BoundProgram`),
``prg(queue, out_host=False, wait_for=..., **options, **inputs)``: part
outputs feed other parts, so they stay where they were computed. Its
outputs join the values by name and go to :meth:`PartHooks.part_done`
(e.g. to be sent).

The MPI executor's hooks: ``awaited_names`` -- the part's received
names; ``arrivals``/``n_pending`` -- the exchange's arrived messages and
the number still expected; ``part_done`` -- start the sends of the part's
outputs; ``forwarded_outputs`` -- parts that only pass received values
on; ``part_ready``/``part_running`` -- trace records; ``call_options`` --
its allocator; ``call_program`` -- computing sent outputs into their
message buffers; ``blocked`` -- its error naming the rank.

.. autofunction:: run_parts
.. autoclass:: PartHooks
    :members:

The prepared mode: :func:`prepare_parts` compiles the order of a
partition (with the awaited names of its hooks and the names of the
inputs) to integer tables, a :class:`PreparedParts`, kept in the hooks'
:meth:`~PartHooks.table_cache`; its :meth:`~PreparedParts.run` is the one
part loop -- :func:`run_parts` is it with the hooks adapted, and an
executor that keeps per-part tables of its own from run to run (the
distributed executor from the second execution of a partition on, see
:mod:`~pytato_like.distributed.steady`) calls it with
:class:`PreparedHooks` of its own.

.. autofunction:: prepare_parts
.. autoclass:: PreparedParts
    :members: run
.. autoclass:: PreparedHooks
    :members:
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from pytato_like.diagnostic import MissingInputError, PartitionInducedCycleError

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.partition import GraphPart, GraphPartition
    from pytato_like.target.program import BoundProgram

__all__ = ["PartHooks", "PreparedHooks", "PreparedParts", "prepare_parts",
           "run_parts"]


class PartHooks:
    """What an executor supplies to :func:`run_parts`. The defaults run
    every part on one *queue* (``None`` for host programs) with the values
    as they are, as :func:`~pytato_like.partition.execute_partition` does;
    executors override what they need."""

    def __init__(self, queue: cl.CommandQueue | None = None) -> None:
        self.queue = queue

    def queue_for(self, pid: Hashable) -> cl.CommandQueue | None:
        """The queue part *pid* runs on."""
        return self.queue

    def awaited_names(self, pid: Hashable, part: GraphPart) -> Iterable[str]:
        """Names part *pid* reads that arrive from elsewhere (received
        messages) rather than from the inputs or another part; the part is
        ready only once they have arrived."""
        return ()

    def table_cache(self) -> dict | None:
        """A dict that outlives this run (e.g. kept with a reused message
        plan) where the scheduler may keep what it derives from the
        partition, or ``None`` to derive it again."""
        return None

    def n_pending(self) -> int:
        """How many awaited values have not arrived yet."""
        return 0

    def arrivals(self, block: bool) -> Iterable[tuple[str, object]]:
        """``(name, value)`` of values arrived since the last call; with
        *block*, wait until at least one has arrived. Called without
        *block* after every part (the hooks may progress their own work
        then, e.g. start sends whose data is ready), with *block* only
        when no part is ready and :meth:`n_pending` is not zero."""
        return ()

    def part_ready(self, pid: Hashable) -> None:
        """Part *pid* has become runnable."""

    def part_running(self, pid: Hashable
                     ) -> contextlib.AbstractContextManager[object]:
        """A context manager around the run of part *pid*."""
        return contextlib.nullcontext()

    def forwarded_outputs(self, pid: Hashable, part: GraphPart,
                          values: Mapping[str, object]
                          ) -> Mapping[str, object] | None:
        """The outputs of part *pid* if they can be had without running its
        program (e.g. a part passing received values on), else ``None``."""
        return None

    def prepare_inputs(self, pid: Hashable, inputs: dict[str, object]
                       ) -> list[cl.Event] | None:
        """Make *inputs* (name -> value, changed in place) ready for part
        *pid*, e.g. by copying them to its device; returns events the
        program must wait for (``None``: none)."""
        return None

    def call_options(self, pid: Hashable, prg: BoundProgram) -> dict[str, object]:
        """Options of the program contract for part *pid* besides
        ``out_host=False`` and ``wait_for`` (e.g. ``allocator``)."""
        return {}

    def call_program(self, pid: Hashable, prg: BoundProgram,
                     queue: cl.CommandQueue | None,
                     kwargs: dict[str, Any]
                     ) -> tuple[object, Mapping[str, object]]:
        """Call the program of part *pid*: ``prg(queue, **kwargs)`` (the
        contract's options and the inputs), ``(event, outputs)``. An
        executor may call a target-specific entry point instead (e.g. one
        computing outputs into buffers it provides)."""
        return prg(queue, **kwargs)

    def part_done(self, pid: Hashable, outputs: Mapping[str, object],
                  event: object) -> None:
        """Part *pid* has been run (or enqueued): its *outputs* by name and
        the *event* of its program (``None`` for forwarded outputs)."""

    def blocked(self, waiting: dict[Hashable, list[str]]) -> NoReturn:
        """Raise: no part is ready and nothing is pending. *waiting*: each
        part that has not run and the names it still waits for (empty if
        it waits only for other parts)."""
        if any(waiting.values()):
            raise MissingInputError(
                f"parts {sorted(waiting, key=repr)} wait for inputs nothing "
                f"provides: {waiting}")
        raise PartitionInducedCycleError(
            f"parts {sorted(waiting, key=repr)} wait for each other: their "
            "needed_pids form a cycle")


class PreparedHooks:
    """What :meth:`PreparedParts.run` asks of an executor, by part index
    (the part's position in
    :attr:`~pytato_like.partition.GraphPartition.toposorted_part_ids`).
    :func:`run_parts` adapts a :class:`PartHooks` to it; an executor with
    its own per-part tables (the distributed executor's steady state,
    :mod:`~pytato_like.distributed.steady`) implements it directly."""

    def part_ready(self, i: int) -> None:
        """Part *i* has become runnable."""

    def run_part(self, i: int, values: dict[str, object]) -> Mapping[str, object]:
        """Run (or enqueue) part *i* with its inputs from *values* and hand
        its outputs on (e.g. send them); its outputs by name."""
        raise NotImplementedError

    def n_pending(self) -> int:
        """As :meth:`PartHooks.n_pending`."""
        return 0

    def arrivals(self, block: bool) -> Iterable[tuple[str, object]]:
        """As :meth:`PartHooks.arrivals`."""
        return ()

    def blocked(self, waiting: dict[Hashable, list[str]]) -> NoReturn:
        """As :meth:`PartHooks.blocked`."""
        PartHooks.blocked(PartHooks(), waiting)
        raise AssertionError("unreachable")


class PreparedParts:
    """The part order of a partition compiled to integer tables -- per part
    its dependents, how many parts and awaited names it waits for, the
    names it reads -- made once per (partition, awaited names, provided
    input names) by :func:`prepare_parts`; :meth:`run` runs the parts with
    counters copied from them (a repeated execution pays only for those)."""

    __slots__ = ("order", "dependents", "n_waiting", "awaited", "readers",
                 "input_names", "delivers")

    def __init__(self, partition: GraphPartition, hooks: PartHooks,
                 provided: frozenset[str]) -> None:
        parts = partition.parts
        self.order = order = list(partition.toposorted_part_ids)
        position = {pid: i for i, pid in enumerate(order)}
        dependents: list[list[int]] = [[] for _ in order]
        #: per part: how many parts and awaited names it waits for
        self.n_waiting: list[int] = []
        #: per part: the awaited names not among the provided values
        self.awaited: list[tuple[str, ...]] = []
        #: per part: every name it reads (filtered by what is there)
        self.input_names: list[tuple[str, ...]] = []
        readers: dict[str, list[int]] = {}
        for i, pid in enumerate(order):
            part = parts[pid]
            for q in part.needed_pids:
                if q not in position:
                    raise MissingInputError(
                        f"part {pid!r} needs part {q!r}, which the "
                        "partition does not have")
                dependents[position[q]].append(i)
            awaited = tuple(sorted(
                {n for n in hooks.awaited_names(pid, part)
                 if n not in provided}))
            for name in awaited:
                readers.setdefault(name, []).append(i)
            self.awaited.append(awaited)
            self.n_waiting.append(len(part.needed_pids) + len(awaited))
            self.input_names.append(tuple(sorted(part.all_input_names())))
        self.dependents = [tuple(d) for d in dependents]
        #: awaited name -> the parts reading it
        self.readers = {name: tuple(r) for name, r in readers.items()}
        #: per part: whether one of its outputs is an awaited name
        self.delivers = [
            not self.readers.keys().isdisjoint(parts[pid].output_names)
            for pid in order]

    def run(self, hooks: PreparedHooks, values: dict[str, object]) -> int:
        """Run every part in the order rule of the module docs; *values*
        (the inputs) is filled with every part output and arrival. The
        number of parts run."""
        waiting = self.n_waiting.copy()
        readers = dict(self.readers) if self.readers else {}
        dependents, delivers = self.dependents, self.delivers
        part_ready, run_part = hooks.part_ready, hooks.run_part
        arrivals = hooks.arrivals
        heappush, heappop = heapq.heappush, heapq.heappop
        ready: list[int] = []
        for i, n in enumerate(waiting):
            if not n:
                part_ready(i)
                ready.append(i)         # ascending: a heap already

        def deliver(items: Iterable[tuple[str, object]]) -> None:
            for name, value in items:
                values[name] = value
                for j in readers.pop(name, ()):
                    waiting[j] -= 1
                    if not waiting[j]:
                        part_ready(j)
                        heappush(ready, j)

        n_parts = len(waiting)
        n_done = 0
        while n_done < n_parts:
            if not ready:
                if not hooks.n_pending():
                    hooks.blocked(self._still_awaited(waiting, values))
                deliver(arrivals(True))
                continue
            i = heappop(ready)
            outputs = run_part(i, values)
            if delivers[i]:
                deliver(outputs.items())
            else:
                values.update(outputs)
            for j in dependents[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    part_ready(j)
                    heappush(ready, j)
            n_done += 1
            # also a chance for the hooks to progress their own work (e.g.
            # start sends whose data is ready); cheap when there is none
            got = arrivals(False)
            if got:
                deliver(got)
        return n_done

    def _still_awaited(self, waiting: list[int], values: dict[str, object]
                       ) -> dict[Hashable, list[str]]:
        return {self.order[i]: [n for n in self.awaited[i] if n not in values]
                for i, n in enumerate(waiting) if n}


def prepare_parts(partition: GraphPartition, hooks: PartHooks,
                  provided: frozenset[str]) -> PreparedParts:
    """The :class:`PreparedParts` of *partition* with the awaited names of
    *hooks*, for runs whose inputs are named *provided*: kept in
    :meth:`PartHooks.table_cache` when the hooks have one."""
    cache = hooks.table_cache()
    if cache is None:
        return PreparedParts(partition, hooks, provided)
    key = (id(partition), provided)
    prepared = cache.get(key)
    if prepared is None:
        prepared = cache[key] = PreparedParts(partition, hooks, provided)
    return prepared


class _ContractParts(PreparedHooks):
    """:class:`PartHooks` as :class:`PreparedHooks`: each part run through
    the program contract."""

    def __init__(self, partition: GraphPartition, prepared: PreparedParts,
                 prg_per_partition: Mapping[Hashable, BoundProgram],
                 hooks: PartHooks) -> None:
        self.parts = partition.parts
        self.order = prepared.order
        self.input_names = prepared.input_names
        self.programs = prg_per_partition
        self.hooks = hooks
        self.n_pending = hooks.n_pending        # type: ignore[method-assign]
        self.arrivals = hooks.arrivals          # type: ignore[method-assign]

    def part_ready(self, i: int) -> None:
        self.hooks.part_ready(self.order[i])

    def blocked(self, waiting: dict[Hashable, list[str]]) -> NoReturn:
        self.hooks.blocked(waiting)

    def run_part(self, i: int, values: dict[str, object]) -> Mapping[str, object]:
        hooks = self.hooks
        pid = self.order[i]
        outputs = hooks.forwarded_outputs(pid, self.parts[pid], values)
        if outputs is not None:
            event = None
            with hooks.part_running(pid):
                pass
        else:
            inputs = {name: values[name] for name in self.input_names[i]
                      if name in values}
            wait_for = hooks.prepare_inputs(pid, inputs)
            prg = self.programs[pid]
            options = hooks.call_options(pid, prg)
            options["out_host"] = False
            if wait_for:
                options["wait_for"] = wait_for
            # an input named like an option is the input (the contract's
            # rule)
            options.update(inputs)
            queue = hooks.queue_for(pid)
            with hooks.part_running(pid):
                event, outputs = hooks.call_program(pid, prg, queue, options)
        hooks.part_done(pid, outputs, event)
        return outputs


def run_parts(partition: GraphPartition,
              prg_per_partition: Mapping[Hashable, BoundProgram],
              hooks: PartHooks, input_args: Mapping[str, object] | None = None
              ) -> tuple[dict[str, object], int]:
    """Run every part of *partition* (a
    :class:`~pytato_like.partition.GraphPartition` or a subclass) with its
    program in *prg_per_partition*, in dependency order (see the module
    docs). Returns every value by name (the inputs, every part output,
    every arrival) and the number of parts run."""
    values: dict[str, object] = dict(input_args or {})
    prepared = prepare_parts(partition, hooks, frozenset(values))
    n_done = prepared.run(
        _ContractParts(partition, prepared, prg_per_partition, hooks), values)
    return values, n_done

# vim: foldmethod=marker
