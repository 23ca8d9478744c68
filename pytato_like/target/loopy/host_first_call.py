"""The first call of a program not compiled before, run on the host while
its kernels are generated and built.

A compile from empty caches costs at least the OpenCL compiler's start:
PoCL loads LLVM and its kernel library in every process (0.6-1 s on this
project's machine, before any kernel of ours is compiled), then each
kernel's work-group function at its first launch. A small program waits
far longer for its kernels than it runs: the 10-step 2-D heat stencil on
256x256 (``bench/bench_cold_start.py``) took 1.4 s from ``generate_loopy``
to its first result, of which its NumPy evaluation needs 0.03 s.

So when :func:`~pytato_like.target.loopy.generate_loopy` finds no plan in
the cache and the program is cheap to evaluate on the host
(:func:`estimated_host_seconds` at most :data:`HOST_BUDGET_S`), it
returns a program whose plan is a :class:`PendingPlan`:

* the first call evaluates the DAG with the NumPy target (NumPy is the
  semantics every target is checked against), returns the outputs where
  the compiled program would (host or device, see
  :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`), then
  starts code generation and the OpenCL build in a thread;
* every later call, and anything that needs the plan (``.program``,
  ``.source``, ``.plan``), waits for that thread (or generates the plan
  itself if no call started it) and runs the compiled kernels (``.stats``
  holds the compile's figures once it is done; ``prg.compiled()`` says
  whether it is);
* the thread is not a daemon: a process that ends after one call still
  finishes the compile and stores it, so that its next start is warm.

PoCL's compiler start (:mod:`.pocl_warmup`) begins when the program is
returned, beside the host evaluation: it runs outside Python's lock.
Code generation waits for the host call (it holds Python's lock most of
its time, and would stall the host evaluation between NumPy calls).

The part programs of a distributed partition take part too: their first
calls (the first execution) run on the host, and the executor makes the
rank's pending plans afterwards in one thread and one OpenCL build
(:func:`~pytato_like.target.loopy.lazy.compile_parts_in_background`).
The budget holds for all programs whose host call is still to come
(:func:`reserve`), so a rank's whole first execution stays within it.

Not used (the first call compiles, as before) when the option
:attr:`~pytato_like.target.loopy.options.CodegenOptions.host_first_call`
(``PYTATO_LIKE_HOST_FIRST_CALL``) is off, for programs with run-time
checks, with symbolic shapes, with data bound on the device, and for
programs whose translation unit is read (or transformed) before their
first call.

.. autodata:: HOST_BUDGET_S
.. autofunction:: estimated_host_seconds
.. autofunction:: reserve
.. autofunction:: pending_plan
.. autoclass:: PendingPlan
    :members: result, start, started, done, take_host_call
.. autofunction:: start_jointly
.. autofunction:: leave_compile_to_caller
.. autofunction:: run_on_host
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

import numpy as np

from pytato_like._shapes import concrete_size
from pytato_like.array import Einsum
from pytato_like.target.loopy.cache import PlanClaimedElsewhere
from pytato_like.target.numpy import NumpyBoundProgram

if TYPE_CHECKING:
    import loopy as lp

    from pytato_like.array import Array
    from pytato_like.target.loopy.plan import ProgramPlan

#: what making a plan gives: the plan and the translation units made with
#: it (None when they were not)
Made = tuple["ProgramPlan", Union["list[lp.TranslationUnit]", None]]

logger = logging.getLogger("pytato_like.codegen")

#: the most estimated seconds of host evaluation run instead of waiting
#: for the compile (a cold compile takes 1 s or more here): for one
#: program, and for all programs whose host call is still to come (the
#: part programs of a distributed execution are generated before their
#: calls: their first execution stays within it)
HOST_BUDGET_S = 0.5
#: the NumPy target's cost per node and per element of a node's value,
#: measured on the 2-D heat stencil (256x256, 10-200 steps: 0.034 s for
#: 121 nodes, 0.885 s for 2401 nodes)
SECONDS_PER_NODE = 20e-6
SECONDS_PER_ELEMENT = 6e-9
#: the cost per multiply-add of an einsum's contraction, which the
#: elements of its value do not show: measured 0.38 ns for a 1024^3
#: matmul and 1.8 ns for the DG operator (35x35 on 50 000 elements)
SECONDS_PER_PRODUCT = 1e-9


def estimated_host_seconds(order: Sequence[Array]) -> float | None:
    """The estimated seconds of evaluating the DAG whose nodes are *order*
    with the NumPy target; None when a shape is symbolic (a size known
    only at the call)."""
    elements = 0
    products = 0
    for node in order:
        size = concrete_size(node.shape)
        if size is None:
            return None
        elements += size
        if type(node) is Einsum:
            # each element of the value sums over the reduction axes
            reduced = concrete_size(tuple(
                node._get_reduction_extents().values()))
            if reduced is None:
                return None
            products += size * reduced
    return (len(order) * SECONDS_PER_NODE + elements * SECONDS_PER_ELEMENT
            + products * SECONDS_PER_PRODUCT)


# estimated host seconds of the pending plans whose host call is to come
_RESERVED = [0.0]


def reserve(seconds: float) -> bool:
    """Take *seconds* of :data:`HOST_BUDGET_S` for a program's host call
    to come; False (nothing taken) when they do not fit."""
    with _PENDING_LOCK:
        if _RESERVED[0] + seconds > HOST_BUDGET_S:
            return False
        _RESERVED[0] += seconds
        return True


# key -> the pending plan of that DAG (until it is made): a second
# generate_loopy of the same DAG shares it
_PENDING: dict[str, PendingPlan] = {}
_PENDING_LOCK = threading.Lock()


def pending_plan(key: str) -> PendingPlan | None:
    """The plan being made (or to be made) for the DAG of cache key *key*
    after a first call on the host, if any."""
    return _PENDING.get(key)


class PendingPlan:
    """The plan of a program whose first call runs on the host: made by
    *make* (``make() -> (plan, translation units or None)``) in a thread
    started after that call (:meth:`start`; or by the caller of several
    programs, :func:`start_jointly`), or by the first caller of
    :meth:`result` when no thread was started.

    ``start_after_host_call`` (true by default) says whether the host call
    starts the thread; the distributed executor clears it and makes the
    plans of a rank's part programs in one thread after its first
    execution (:func:`~pytato_like.target.loopy.lazy.compile_parts_in_background`).
    """

    def __init__(self, key: str, make: Callable[[], Made],
                 reserved: float = 0.0) -> None:
        self.key = key
        self._make = make
        # the budget taken by reserve(), given back once the host call is
        # taken or the plan is made
        self._reserved = reserved
        # held while the plan is made
        self._lock = threading.Lock()
        self._flag_lock = threading.Lock()
        self._outcome: tuple[Made | None, BaseException | None] | None = None
        #: the thread making this plan (maybe with others): result()
        #: waits for all of its work (the OpenCL build included)
        self.job: threading.Thread | None = None
        self.start_after_host_call = True
        self._host_call_taken = False
        with _PENDING_LOCK:
            _PENDING[key] = self

    def take_host_call(self) -> bool:
        """True once, for the call that runs on the host (none once the
        plan is made or a thread makes it)."""
        with self._flag_lock:
            if self._host_call_taken or self.started():
                return False
            self._host_call_taken = True
        self.give_back()
        return True

    def give_back(self) -> None:
        """Return the budget this plan's host call took (once the call
        is taken, the plan made, or the program dropped uncalled)."""
        with _PENDING_LOCK:
            _RESERVED[0] = max(0.0, _RESERVED[0] - self._reserved)
            self._reserved = 0.0

    def done(self) -> bool:
        """Whether the plan is made (or making it failed)."""
        return self._outcome is not None

    def started(self) -> bool:
        """Whether a thread makes the plan, or it is made."""
        return self.job is not None or self._outcome is not None

    def start(self, after: Callable[[ProgramPlan], None] | None = None
              ) -> None:
        """Make the plan, then run ``after(plan)`` (the OpenCL build; its
        errors are logged and left to the next call, which builds again
        and raises them), in a non-daemon thread."""
        def body() -> None:
            made, _ = self._outcome_of()
            if after is not None and made is not None:
                try:
                    after(made[0])
                except Exception as exc:  # noqa: BLE001 - see the docstring
                    logger.debug("OpenCL build after a first call on the "
                                 "host failed: %s", exc)
        start_jointly([self], body, f"pytato_like-compile-{self.key[:12]}")

    def _outcome_of(self) -> tuple[Made | None, BaseException | None]:
        with self._lock:
            if self._outcome is not None:
                return self._outcome
            try:
                self._outcome = (self._make(), None)
            except PlanClaimedElsewhere:
                raise       # (asked to defer it: made later)
            except BaseException as exc:  # noqa: BLE001 - re-raised by result()
                self._outcome = (None, exc)
                if threading.current_thread() is self.job:
                    logger.warning("code generation after a first call on the "
                                   "host failed (raised again by the next "
                                   "call): %s", exc)
            finally:
                if self._outcome is not None:
                    with _PENDING_LOCK:
                        if _PENDING.get(self.key) is self:
                            del _PENDING[self.key]
                    self.give_back()
            return self._outcome

    def result(self) -> Made:
        """``(plan, translation units or None)``, once the thread making
        it has ended (or made now, when none was started); raises what
        making it raised."""
        job = self.job
        if job is not None and job is not threading.current_thread():
            job.join()
        made, error = self._outcome_of()
        if error is not None:
            raise error
        assert made is not None
        return made


def leave_compile_to_caller(prg: object) -> None:
    """If the program *prg* (what
    :func:`~pytato_like.target.loopy.generate_loopy` returned) has a
    pending plan, its host call does not start the compile: the caller
    does (:func:`start_jointly`)."""
    pending = getattr(prg, "_plan", None)
    if isinstance(pending, PendingPlan):
        pending.start_after_host_call = False


def start_jointly(plans: Sequence[PendingPlan], body: Callable[[], None],
                  name: str) -> threading.Thread:
    """Run *body*, which makes the pending *plans* (by their
    :meth:`~PendingPlan.result`), in a non-daemon thread that each of them
    waits for before handing out its plan."""
    thread = threading.Thread(target=body, name=name, daemon=False)
    for plan in plans:
        plan.job = thread
    thread.start()
    return thread


def run_on_host(prg, queue, outputs: dict[str, Array], allocator, wait_for,
                out_host: bool, kwargs: dict[str, object]):
    """``(event, outputs)`` of a call of the program *prg* (a
    :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`) whose
    outputs *outputs* are evaluated by the NumPy target, with the inputs
    *kwargs* (host or device arrays, scalars); outputs are NumPy arrays
    if *out_host*, else device arrays of *queue* made by *allocator*."""
    import pyopencl as cl
    import pyopencl.array as cla

    t_start = time.perf_counter()
    if wait_for:
        cl.wait_for_events(list(wait_for))
    if any(isinstance(v, cla.Array) for v in kwargs.values()):
        queue.finish()  # (device inputs may be written by queued kernels)
    values = NumpyBoundProgram(outputs).evaluate(**kwargs)
    assert isinstance(values, dict)
    results: dict[str, object] = {}
    for name, value in values.items():
        host = np.asarray(value, dtype=outputs[name].dtype)
        if not host.flags.c_contiguous:
            host = host.copy(order="C")   # (as the kernels write outputs)
        results[name] = host if out_host else cla.to_device(
            queue, host, allocator=allocator)
    evt = cl.enqueue_marker(queue)
    prg.stats.record_call(time.perf_counter() - t_start, [])
    if prg.single_output:
        return evt, (results["_pt_out"],)
    return evt, results
