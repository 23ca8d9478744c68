"""Waitable handles for asynchronous work, and barriers.

Nonblocking communication and background work both end in the same
question: *is it done, and wait for it*. A :class:`Handle` answers it for

* work run in a background thread (:meth:`Handle.run_in_thread`): packing
  a buffer, running a part, a host-side copy;
* MPI requests (:meth:`Handle.from_requests`): ``Isend``/``Irecv``/
  ``Ibarrier`` from :mod:`mpi4py`.

:meth:`~Handle.wait` blocks and returns the result (or re-raises the
thread's exception), :meth:`~Handle.done` polls without blocking, and
:meth:`~Handle.fetch_trace` returns the handle's
:class:`~pytato_like.runtime.trace.TraceRecord` list: its own record
(posted when the handle was made, started when the work began, completed
when completion was observed) plus a ``wait`` record for each blocking
wait. If a :class:`~pytato_like.runtime.trace.TraceRecorder` is given, the
records are also kept there, so a rank's whole timeline can be exported.

.. autoclass:: Handle
    :members:
.. autofunction:: wait_all
.. autofunction:: barrier
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pytato_like.runtime import workers
from pytato_like.runtime.trace import TraceRecord, TraceRecorder, now_ns

if TYPE_CHECKING:
    from mpi4py import MPI


#: what a handle's :meth:`~Handle.wait` returns: the task's result
#: (``None`` for MPI requests)
ResultT = TypeVar("ResultT")
_T = TypeVar("_T")


class Handle(Generic[ResultT]):
    """A waitable piece of asynchronous work. Make one with
    :meth:`run_in_thread` or :meth:`from_requests`."""

    def __init__(self, record: TraceRecord,
                 recorder: TraceRecorder | None = None) -> None:
        self.record = record
        self._recorder = recorder
        self._extra: list[TraceRecord] = []
        self._lock = threading.Lock()
        self._future: Future[ResultT] | None = None
        self._requests: list[MPI.Request] | None = None
        # the task of run_in_thread, for wait() to run if no thread has
        # started it yet (None once taken)
        self._run_here: Callable[[], None] | None = None

    # {{{ constructors

    @classmethod
    def run_in_thread(cls: type[Handle[_T]], fn: Callable[..., _T], *args: Any,
                      name: str | None = None,
                      recorder: TraceRecorder | None = None,
                      executor: Executor | None = None,
                      **kwargs: Any) -> Handle[_T]:
        """Run ``fn(*args, **kwargs)`` in a background thread (an idle
        daemon thread kept for such work, or a new one, see
        :mod:`~pytato_like.runtime.workers`; or *executor*'s).
        :meth:`wait` returns its result; a :meth:`wait` without a timeout
        that comes before the thread has started the task runs it itself
        (see there)."""
        record = _new_record(recorder, "task", cast(str, name or getattr(
            fn, "__name__", "task")))
        handle = cls(record, recorder)

        def run() -> _T:
            record.start()
            try:
                return fn(*args, **kwargs)
            finally:
                record.complete()

        if executor is not None:
            handle._future = executor.submit(run)
        else:
            future: Future[_T] = Future()
            future.set_running_or_notify_cancel()
            taken = threading.Lock()

            def thread_main() -> None:
                # (whichever comes first runs it: the thread, or wait())
                if not taken.acquire(blocking=False):
                    return
                try:
                    future.set_result(run())
                except BaseException as exc:  # noqa: BLE001 -- re-raised by wait
                    future.set_exception(exc)

            handle._future = future
            handle._run_here = thread_main
            # looked up per call: tests replace workers.submit
            workers.submit(thread_main, record.name)
        return handle

    @classmethod
    def from_requests(cls, requests: list[MPI.Request]
                      | tuple[MPI.Request, ...] | MPI.Request, *,
                      kind: str = "task", name: str | None = None,
                      recorder: TraceRecorder | None = None,
                      **record_fields: Any) -> Handle[None]:
        """Wrap mpi4py request(s) posted just before. *kind* is the record
        kind (``"send"``, ``"recv"``, ...); *record_fields* may give
        ``peer``, ``tag``, ``nbytes``, ``part_id``."""
        if not isinstance(requests, (list, tuple)):
            requests = [requests]
        record = _new_record(recorder, kind, name or kind, **record_fields)
        record.start(record.posted_ns)
        # (a handle of requests waits for no result)
        handle = cast("Handle[None]", cls(record, recorder))
        handle._requests = list(requests)
        return handle

    # }}}

    def done(self) -> bool:
        """Whether the work has finished (never blocks)."""
        if self._future is not None:
            return self._future.done()
        if self.record.done:
            return True
        from mpi4py import MPI
        with self._lock:
            # (a handle without a future waits for MPI requests)
            if MPI.Request.Testall(cast("list[MPI.Request]", self._requests)):
                self.record.complete()
        return self.record.done

    def wait(self, timeout: float | None = None) -> ResultT:
        """Block until the work is done; return its result (threads) or
        ``None`` (requests). Re-raises the thread's exception. Raises
        :class:`TimeoutError` after *timeout* seconds. MPI requests are
        tested with a growing sleep in between (up to 250 µs), not waited
        for inside MPI, which would spin a core.

        A task of :meth:`run_in_thread` that no thread has started yet
        is run by this call, in the calling thread, when there is no
        *timeout*: this thread would only block meanwhile, and handing
        the task to another thread and the result back costs two thread
        wake-ups (and the GIL twice) -- measured at 50-100 µs each way for
        a distributed execution started and waited for at once."""
        wait_rec = TraceRecord("wait", f"wait {self.record.name}",
                               self.record.rank, now_ns()).start()
        try:
            if self._future is not None:
                run_here = self._run_here
                if run_here is not None and timeout is None:
                    self._run_here = None
                    run_here()      # (returns at once if a thread has it)
                return self._future.result(timeout)
            if not self.record.done:
                _poll_requests(cast("list[MPI.Request]", self._requests), timeout,
                               self._lock)
                with self._lock:
                    self.record.complete()
            # (a handle of requests: ResultT is None)
            return cast("ResultT", None)
        finally:
            wait_rec.complete()
            self._add(wait_rec)

    def fetch_trace(self) -> list[TraceRecord]:
        """The handle's own record followed by its wait records."""
        with self._lock:
            return [self.record, *self._extra]

    @property
    def timestamps(self) -> tuple[int | None, int | None, int | None]:
        """``(posted, started, completed)`` in nanoseconds (StepMesh's
        ``fetch_trace`` shape)."""
        r = self.record
        return (r.posted_ns, r.started_ns, r.completed_ns)

    def _add(self, rec: TraceRecord) -> None:
        with self._lock:
            self._extra.append(rec)
        if self._recorder is not None and self._recorder.enabled:
            with self._recorder._lock:
                self._recorder._records.append(rec)

    def __repr__(self) -> str:
        state = "done" if self.record.done else "pending"
        return f"<Handle {self.record.name!r} {state}>"


def _poll_requests(requests: list[MPI.Request], timeout: float | None,
                   lock: threading.Lock) -> None:
    """Test *requests* until all completed, sleeping between tests (each
    test under *lock*: :meth:`Handle.done` may test from another thread)."""
    import time

    from mpi4py import MPI
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.0

    def test() -> bool:
        with lock:
            return MPI.Request.Testall(requests)

    while not test():
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"MPI requests not complete after {timeout} s")
        delay = min(250e-6, max(2 * delay, 10e-6))
        time.sleep(delay)


def _new_record(recorder: TraceRecorder | None, kind: str, name: str,
                **fields: Any) -> TraceRecord:
    if recorder is not None:
        return recorder.record(kind, name, **fields)
    return TraceRecord(kind=kind, name=name, rank=0, posted_ns=now_ns(),
                       **fields)


def wait_all(handles: Iterable[Handle[_T]], timeout: float | None = None
             ) -> list[_T]:
    """Wait for every handle; their results in order."""
    return [h.wait(timeout) for h in handles]


def barrier(comm: MPI.Comm, *, blocking: bool = True,
            recorder: TraceRecorder | None = None) -> Handle[None] | None:
    """Synchronize all ranks of *comm*. Blocking: ``comm.Barrier()``
    (recorded as a wait if *recorder* is given). Nonblocking: a
    :class:`Handle` around ``comm.Ibarrier()``."""
    if not blocking:
        return Handle.from_requests(comm.Ibarrier(), kind="barrier",
                                    name="barrier", recorder=recorder)
    if recorder is None:
        comm.Barrier()
        return None
    with recorder.wait("barrier"):
        comm.Barrier()
    return None

# vim: foldmethod=marker
