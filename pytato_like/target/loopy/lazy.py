"""Part programs whose code is generated when first needed.

:func:`~pytato_like.partition.generate_code_for_partition` with
``lazy=True`` (the default for a distributed partition) returns a
:class:`LazyPartProgram` per part instead of generating every part's code
before the first execution. A lazy program generates its code (DAG ->
loopy -> device code, :func:`~pytato_like.generate_loopy`) the first time
it is called or any of its attributes is read, and then *becomes* the
generated program: its class and attributes are replaced by those of the
:class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram` (or
:class:`~pytato_like.target.loopy.outlined.OutlinedProgram`) made, so
every later use costs nothing extra and ``type(prg)`` says what it is.
Before that it already is a
:class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram` for
``isinstance`` (the distributed executor calls such programs with the
``placed_outputs`` keyword of
:meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram.__call__`).

The distributed executor generates them in its first execution
(:func:`codegen_while_waiting`): all at once before the first launch if a
part of the rank can run before any message arrives (their kernels then
share the first OpenCL build), else while the rank waits for its first
messages -- one part at a time in the order the parts run, looking for
arrived messages after each, then one OpenCL build of every kernel
generated and not built yet
(:func:`~pytato_like.opencl_build.build_pending`). doc/codegen.rst
("Code generation during the first communication") has the measurements
behind this rule.

Code generation errors are raised by the call (or attribute read) that
generates, inside the execution: under MPI the executor's failure path
tells the other ranks. A program whose generation failed stays lazy (a
later call tries again and raises again).

.. autoclass:: LazyPartProgram
    :members: generate
.. autofunction:: codegen_while_waiting
.. autofunction:: hold_part_compiles
.. autofunction:: compile_parts_in_background
.. autofunction:: largest_first
.. autodata:: GENERATE_REST_WHILE_WAITING
"""

from __future__ import annotations

import logging
import threading
from collections.abc import (
    Callable,
    Container,
    Hashable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

from pytato_like import opencl_build
from pytato_like.analysis import get_num_nodes
from pytato_like.target.loopy import cache
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.host_first_call import (
    PendingPlan,
    leave_compile_to_caller,
    start_jointly,
)
from pytato_like.target.loopy.report import compile_context

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.array import DictOfNamedArrays
    from pytato_like.partition import GraphPartition
    from pytato_like.runtime.trace import TraceRecorder
    from pytato_like.target.program import BoundProgram

__all__ = ["LazyPartProgram", "codegen_while_waiting",
           "compile_parts_in_background", "hold_part_compiles"]

logger = logging.getLogger("pytato_like.codegen")


class LazyPartProgram(BoundPyOpenCLProgram):
    """The program of part *pid*, computing *outputs* (a
    :class:`~pytato_like.DictOfNamedArrays`) once ``make(outputs)`` has
    generated it. Programs of one partition share *lock* (generation
    from two threads happens once)."""

    # (BoundPyOpenCLProgram.__init__ is not called: there is no plan yet)
    def __init__(self, pid: Hashable, outputs: DictOfNamedArrays,
                 # (the generated program, whose class this one takes)
                 make: Callable[[DictOfNamedArrays], Any],
                 lock: AbstractContextManager[object]) -> None:
        self.pid = pid
        self._lazy_outputs = outputs
        self._lazy_make = make
        self._lazy_lock = lock

    def generate(self) -> None:
        """Generate the code now (nothing if another thread just did) and
        become the generated program."""
        with self._lazy_lock:
            if type(self) is not LazyPartProgram:
                return      # generated while this thread waited for the lock
            logger.debug("generating the code of part %r", self.pid)
            # progress and report lines name the part (and the rank)
            with compile_context(part=self.pid):
                real = self._lazy_make(self._lazy_outputs)
            # a first call on the host does not start the compile: the
            # executor compiles the rank's parts together after it
            leave_compile_to_caller(real)
            state = dict(real.__dict__)
            self.__dict__.clear()
            self.__dict__.update(state)
            # the layouts are alike (plain classes with a __dict__)
            self.__class__ = type(real)

    def __getattr__(self, name: str) -> Any:
        # only for attributes the lazy program lacks: the generated one's
        if name.startswith("__") or name.startswith("_lazy"):
            raise AttributeError(name)
        self.generate()
        return getattr(self, name)

    def __call__(self, queue: cl.CommandQueue | None = None, /, *args: Any,
                 **kwargs: Any) -> Any:
        self.generate()
        if not isinstance(self, BoundPyOpenCLProgram):
            # an outlined program computes into its own arrays (the caller
            # compares identities) and keeps none
            for option in ("placed_outputs", "reuse_outputs"):
                if option not in self.inputs.placeholders:
                    kwargs.pop(option, None)
        return self(queue, *args, **kwargs)

    def copy(self, **kwargs: Any) -> BoundPyOpenCLProgram:
        # (the inherited copy would copy the lazy state)
        self.generate()
        return self.copy(**kwargs)

    def __repr__(self) -> str:
        return f"<LazyPartProgram of part {self.pid!r}: not generated yet>"


#: with a part that runs before any message arrives, generate only such
#: parts at once and the others while waiting (two OpenCL builds; measured
#: slower on the demo, see doc/codegen.rst) instead of all at once
GENERATE_REST_WHILE_WAITING = False


def _generate(prg: LazyPartProgram, recorder: TraceRecorder | None) -> None:
    if recorder is None:
        prg.generate()
    else:
        with recorder.record("codegen", f"codegen part {prg.pid}",
                             part_id=prg.pid):
            prg.generate()


def codegen_while_waiting(programs: Mapping[Hashable, BoundProgram],
                          partition: GraphPartition,
                          awaited: Mapping[Hashable, Sequence[str]],
                          skip: Container[Hashable] = (),
                          queue: cl.CommandQueue | None = None,
                          recorder: TraceRecorder | None = None
                          ) -> Iterator[Hashable]:
    """Code generation of the lazy programs among *programs* (by part id of
    *partition*) not generated yet, for an execution that receives the
    names *awaited* by each part (parts in *skip* are never called).

    If a part can run before any message arrives (no awaited name, needing
    only such parts), every program is generated at once, before the
    first launch: generating some later would cost a second OpenCL build,
    more than a wait hides (see doc/codegen.rst); a part whose plan
    another process is generating (a rank with an alike part: see the
    claims of :mod:`~pytato_like.target.loopy.cache`) is generated last,
    by then mostly loaded from the disk cache. Otherwise the rank's
    first launch waits for a message anyway: the returned iterator
    generates the programs one part at a time in the order the parts run,
    yielding each part id after its generation (the caller looks for
    arrived messages between parts and may stop), and after the last
    builds every kernel not built yet for *queue*'s context in one OpenCL
    build -- all while the messages travel. With a
    :class:`~pytato_like.runtime.trace.TraceRecorder` *recorder*, each
    generation is a ``"codegen"`` record and the build a ``"build"``
    record. Generation errors propagate."""
    order = [pid for pid in partition.toposorted_part_ids
             if type(programs.get(pid)) is LazyPartProgram and pid not in skip]
    if not order:
        return iter(())
    runnable: set[Hashable] = set()
    for pid in partition.toposorted_part_ids:
        if not awaited.get(pid) and all(
                q in runnable for q in partition.parts[pid].needed_pids):
            runnable.add(pid)
    if any(pid in runnable for pid in order):
        # a part whose plan another process (a rank with an alike part) is
        # generating comes last: this rank generates its other parts
        # meanwhile, then loads that plan from the disk cache; largest
        # first, so that alike ranks share the work evenly (one takes the
        # largest part while another takes the next ones)
        deferred = []
        with cache.deferring_claimed_plans():
            for pid in largest_first(programs, order):
                if pid in runnable or not GENERATE_REST_WHILE_WAITING:
                    # (order holds the parts whose program is lazy)
                    try:
                        _generate(cast(LazyPartProgram, programs[pid]),
                                  recorder)
                    except cache.PlanClaimedElsewhere:
                        deferred.append(pid)
        for pid in deferred:
            _generate(cast(LazyPartProgram, programs[pid]), recorder)
    return _while_waiting(programs, order, queue, recorder)


def largest_first(programs: Mapping[Hashable, BoundProgram],
                  order: Sequence[Hashable]) -> list[Hashable]:
    """The lazy parts *order* by decreasing number of nodes of their DAG
    (ties in *order*'s order)."""
    sizes = {pid: get_num_nodes(
                 cast(LazyPartProgram, programs[pid])._lazy_outputs,
                 count_duplicates=True)
             for pid in order}
    return sorted(order, key=lambda pid: -sizes[pid])


def _while_waiting(programs: Mapping[Hashable, BoundProgram],
                   order: list[Hashable], queue: cl.CommandQueue | None,
                   recorder: TraceRecorder | None) -> Iterator[Hashable]:
    generated_any = False
    for pid in order:
        prg = programs[pid]
        if type(prg) is not LazyPartProgram:
            continue        # generated by its call meanwhile
        _generate(prg, recorder)
        generated_any = True
        yield pid
    if generated_any and queue is not None and opencl_build.pending_kernels():
        if recorder is None:
            opencl_build.build_pending(queue.context)
        else:
            with recorder.record("build", "OpenCL build"):
                opencl_build.build_pending(queue.context)


def _pending_plans(programs: Mapping[Hashable, BoundProgram]
                   ) -> dict[Hashable, PendingPlan]:
    """The part programs among *programs* whose plan is pending (their
    first call ran, or is to run, on the host)."""
    found = {}
    for pid, prg in programs.items():
        if type(prg) is LazyPartProgram:
            continue
        plan = getattr(prg, "_plan", None)
        if isinstance(plan, PendingPlan):
            found[pid] = plan
    return found


def hold_part_compiles(programs: Mapping[Hashable, BoundProgram]) -> None:
    """The first calls on the host of the part programs among *programs*
    (generated before the execution) start no compile of their own (see
    :func:`compile_parts_in_background`)."""
    for prg in programs.values():
        if type(prg) is not LazyPartProgram:
            leave_compile_to_caller(prg)


def compile_parts_in_background(programs: Mapping[Hashable, BoundProgram],
                                queue: cl.CommandQueue | None
                                ) -> threading.Thread | None:
    """Make the pending plans of the part programs among *programs* (parts
    whose first call ran on the host, see
    :mod:`~pytato_like.target.loopy.host_first_call`) in one thread,
    largest part first (a plan another rank is generating last, as
    :func:`codegen_while_waiting` orders them), then build their kernels
    for *queue*'s context in one OpenCL build. Every such program's next
    call waits for the thread. None when no plan is pending or a thread
    already makes them."""
    pending = {pid: plan for pid, plan in _pending_plans(programs).items()
               if not plan.started()}
    if not pending:
        return None
    order = sorted(pending, key=lambda pid: -cast(
        BoundPyOpenCLProgram, programs[pid]).stats.n_nodes)

    def make(pid: Hashable) -> None:
        try:
            pending[pid].result()
        except cache.PlanClaimedElsewhere:
            raise
        except Exception:  # noqa: BLE001 - logged by the plan, raised again
            pass           # by the part's next call; the others go on

    def body() -> None:
        deferred = []
        with cache.deferring_claimed_plans():
            for pid in order:
                try:
                    make(pid)
                except cache.PlanClaimedElsewhere:
                    deferred.append(pid)
        for pid in deferred:
            make(pid)
        if queue is not None and opencl_build.pending_kernels():
            try:
                opencl_build.build_pending(queue.context)
            except Exception as exc:  # noqa: BLE001 - raised again by a call
                logger.warning("the OpenCL build of the part programs after "
                               "a first execution on the host failed (raised "
                               "again by the next execution): %s", exc)
    return start_jointly(list(pending.values()), body,
                         "pytato_like-compile-parts")


# vim: foldmethod=marker
