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
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NoReturn

from pytato_like.diagnostic import MissingInputError, PartitionInducedCycleError

__all__ = ["PartHooks", "run_parts"]


class PartHooks:
    """What an executor supplies to :func:`run_parts`. The defaults run
    every part on one *queue* (``None`` for host programs) with the values
    as they are, as :func:`~pytato_like.partition.execute_partition` does;
    executors override what they need."""

    def __init__(self, queue: Any = None) -> None:
        self.queue = queue

    def queue_for(self, pid: Hashable) -> Any:
        """The queue part *pid* runs on."""
        return self.queue

    def awaited_names(self, pid: Hashable, part: Any) -> Iterable[str]:
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

    def arrivals(self, block: bool) -> Iterable[tuple[str, Any]]:
        """``(name, value)`` of values arrived since the last call; with
        *block*, wait until at least one has arrived. Called without
        *block* after every part (the hooks may progress their own work
        then, e.g. start sends whose data is ready), with *block* only
        when no part is ready and :meth:`n_pending` is not zero."""
        return ()

    def part_ready(self, pid: Hashable) -> None:
        """Part *pid* has become runnable."""

    def part_running(self, pid: Hashable) -> contextlib.AbstractContextManager[Any]:
        """A context manager around the run of part *pid*."""
        return contextlib.nullcontext()

    def forwarded_outputs(self, pid: Hashable, part: Any,
                          values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The outputs of part *pid* if they can be had without running its
        program (e.g. a part passing received values on), else ``None``."""
        return None

    def prepare_inputs(self, pid: Hashable, inputs: dict[str, Any]
                       ) -> list[Any] | None:
        """Make *inputs* (name -> value, changed in place) ready for part
        *pid*, e.g. by copying them to its device; returns events the
        program must wait for (``None``: none)."""
        return None

    def call_options(self, pid: Hashable, prg: Any) -> dict[str, Any]:
        """Options of the program contract for part *pid* besides
        ``out_host=False`` and ``wait_for`` (e.g. ``allocator``)."""
        return {}

    def call_program(self, pid: Hashable, prg: Any, queue: Any,
                     kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """Call the program of part *pid*: ``prg(queue, **kwargs)`` (the
        contract's options and the inputs), ``(event, outputs)``. An
        executor may call a target-specific entry point instead (e.g. one
        computing outputs into buffers it provides)."""
        return prg(queue, **kwargs)

    def part_done(self, pid: Hashable, outputs: Mapping[str, Any],
                  event: Any) -> None:
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


class _Tables:
    """What the scheduler derives from a partition and the awaited names,
    the same for every run: made once per (partition, hooks' table cache,
    input names) and reused (a repeated execution pays only for its
    counters)."""

    __slots__ = ("order", "position", "dependents", "n_needed", "awaited",
                 "input_names")

    def __init__(self, partition: Any, hooks: PartHooks,
                 provided: frozenset[str]) -> None:
        parts = partition.parts
        self.order = order = list(partition.toposorted_part_ids)
        self.position = {pid: i for i, pid in enumerate(order)}
        self.dependents: dict[Hashable, list[Hashable]] = {
            pid: [] for pid in order}
        self.n_needed: dict[Hashable, int] = {}
        #: per part, the awaited names not among the provided values
        self.awaited: dict[Hashable, tuple[str, ...]] = {}
        #: per part, every name it reads (filtered by what is there)
        self.input_names: dict[Hashable, tuple[str, ...]] = {}
        for pid in order:
            part = parts[pid]
            for q in part.needed_pids:
                if q not in self.dependents:
                    raise MissingInputError(
                        f"part {pid!r} needs part {q!r}, which the "
                        "partition does not have")
                self.dependents[q].append(pid)
            self.n_needed[pid] = len(part.needed_pids)
            self.awaited[pid] = tuple(sorted(
                {n for n in hooks.awaited_names(pid, part)
                 if n not in provided}))
            self.input_names[pid] = tuple(sorted(part.all_input_names()))


def _tables(partition: Any, hooks: PartHooks, provided: frozenset[str]
            ) -> _Tables:
    cache = hooks.table_cache()
    if cache is None:
        return _Tables(partition, hooks, provided)
    key = (id(partition), provided)
    tables = cache.get(key)
    if tables is None:
        tables = cache[key] = _Tables(partition, hooks, provided)
    return tables


def run_parts(partition: Any, prg_per_partition: Mapping[Hashable, Any],
              hooks: PartHooks, input_args: Mapping[str, Any] | None = None
              ) -> tuple[dict[str, Any], int]:
    """Run every part of *partition* (a
    :class:`~pytato_like.partition.GraphPartition` or a subclass) with its
    program in *prg_per_partition*, in dependency order (see the module
    docs). Returns every value by name (the inputs, every part output,
    every arrival) and the number of parts run."""
    parts = partition.parts
    values: dict[str, Any] = dict(input_args or {})
    tables = _tables(partition, hooks, frozenset(values))
    order, position = tables.order, tables.position
    dependents = tables.dependents
    ready: list[tuple[int, Hashable]] = []

    def make_ready(pid: Hashable) -> None:
        hooks.part_ready(pid)
        heapq.heappush(ready, (position[pid], pid))

    # waiting[pid]: how many parts and awaited names part pid waits for
    waiting = {}
    readers: dict[str, list[Hashable]] = {}
    for pid in order:
        names = tables.awaited[pid]
        for name in names:
            readers.setdefault(name, []).append(pid)
        waiting[pid] = tables.n_needed[pid] + len(names)
        if not waiting[pid]:
            make_ready(pid)

    def release(pid: Hashable) -> None:
        waiting[pid] -= 1
        if not waiting[pid]:
            make_ready(pid)

    def deliver(name: str, value: Any) -> None:
        values[name] = value
        pids = readers.pop(name, None)
        if pids:
            for pid in pids:
                release(pid)

    def still_awaited() -> dict[Hashable, list[str]]:
        return {pid: [n for n in tables.awaited[pid] if n not in values]
                for pid, n in waiting.items() if n}

    # the loop runs once per part: hooks bound once, no helper calls
    n_parts = len(order)
    heappop = heapq.heappop
    forwarded_outputs = hooks.forwarded_outputs
    prepare_inputs = hooks.prepare_inputs
    call_options = hooks.call_options
    queue_for = hooks.queue_for
    part_running = hooks.part_running
    call_program = hooks.call_program
    part_done = hooks.part_done
    arrivals = hooks.arrivals
    input_names = tables.input_names
    n_done = 0
    while n_done < n_parts:
        if not ready:
            if not hooks.n_pending():
                hooks.blocked(still_awaited())
            for name, value in arrivals(block=True):
                deliver(name, value)
            continue
        _, pid = heappop(ready)
        part = parts[pid]
        outputs = forwarded_outputs(pid, part, values)
        if outputs is not None:
            event = None
            with part_running(pid):
                pass
        else:
            inputs = {name: values[name] for name in input_names[pid]
                      if name in values}
            wait_for = prepare_inputs(pid, inputs)
            prg = prg_per_partition[pid]
            options = call_options(pid, prg)
            options["out_host"] = False
            if wait_for:
                options["wait_for"] = wait_for
            # an input named like an option is the input (the contract's
            # rule)
            options.update(inputs)
            queue = queue_for(pid)
            with part_running(pid):
                event, outputs = call_program(pid, prg, queue, options)
        part_done(pid, outputs, event)
        for name, value in outputs.items():
            deliver(name, value)
        for q in dependents[pid]:
            release(q)
        n_done += 1
        # also a chance for the hooks to progress their own work (e.g.
        # start sends whose data is ready); cheap when there is none
        for name, value in arrivals(block=False):
            deliver(name, value)
    return values, n_done

# vim: foldmethod=marker
