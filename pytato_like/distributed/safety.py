"""How a failure on one rank ends every rank instead of leaving others waiting.

Three mechanisms, from the gentlest:

* The collective steps (:func:`~pytato_like.find_distributed_partition`,
  :func:`~pytato_like.number_distributed_tags`,
  :func:`~pytato_like.verify_distributed_partition`) run their local work
  inside :func:`allgather_or_raise` / :func:`gather_to_root_or_raise`: each
  rank contributes either its result or its error to the one collective the
  step needs anyway, so when one rank fails, the failing rank raises its own
  error and every other rank raises
  :class:`~pytato_like.diagnostic.RemoteRankError` naming it.
* :func:`~pytato_like.execute_distributed_partition` tells the other ranks
  when a part fails on this rank (a short message on a reserved tag); ranks
  waiting for data raise :class:`~pytato_like.diagnostic.RemoteRankError`.
* A rank that *leaves* -- its program ends normally, calls
  ``sys.exit(0)`` or dies of an uncaught exception -- tells the other ranks
  on its way out (an :mod:`atexit` hook that runs before MPI is finalized,
  installed by :func:`as_communicator` for every MPI communicator used).
  Every wait of the executor polls the :class:`NoticeBoard` of its
  communicator: a rank waiting for data from (or a send to) a rank that
  left raises :class:`~pytato_like.diagnostic.RankDepartedError` naming it
  (after :data:`DEPARTURE_GRACE_S` for data already in flight). Having
  sent its departure notice, a rank receives the notice of every other
  rank before it lets MPI finalize (:meth:`NoticeBoard.await_departures`):
  a notice that arrived after the receive for it was cancelled would be an
  unmatched message, which makes ``MPI_Finalize`` fail; MPICH's process
  manager then kills every rank of the job with SIGKILL (on 4 or more
  ranks this happened in most runs). The wait costs nothing extra: MPI
  finalization waits for every rank anyway. For the same reason a rank
  that leaves early receives and drops what the executor's peers still
  sent it (message headers, data of partitions it no longer executes:
  :meth:`NoticeBoard.drop_unreceived`), so the job ends with the error the
  other ranks report, not with a kill. The same
  hook first lets executions whose
  :class:`~pytato_like.distributed.execute.DistributedExecution` handle
  was dropped finish (or end them with an error, see
  :func:`track_execution`), so no rank finalizes MPI under a running
  execution.
* Anything else (an error in user code between the steps, a rank that
  already moved on) is covered by running the whole program inside
  :func:`abort_on_error`: it prints the rank and traceback to stderr and
  calls ``MPI_Abort``, which ends every rank of the job with a non-zero
  exit status. Every example and MPI test script does this.

Two tags at the top of each communicator's range are reserved: ``TAG_UB``
for notices and ``TAG_UB - 1`` for the message headers the executor
exchanges on the first execution of a partition (see
:mod:`~pytato_like.distributed.comm`); user tags are numbered below them
(:func:`max_user_tag`).

Waits never block inside MPI: :func:`poll_until` tests the requests,
looks at the notices every :data:`NOTICE_POLL_EVERY` polls, yields the
core between its first
:data:`YIELDING_POLLS` tests, then sleeps with a growing back-off (up to
:data:`MAX_BACKOFF_S`, the thread's timer slack set to
:data:`WAIT_TIMER_SLACK_NS` so that short sleeps end on time), so a
waiting rank does not spin against the compute threads of its own or a
neighbouring rank.

For code that partitions without MPI (single process), pass ``None`` as
the communicator: it stands for a one-rank world
(:class:`SingleRankCommunicator`).

.. autofunction:: abort_on_error
.. autoclass:: NoticeBoard
    :members: poll, raise_if_failed, await_departures, expect_messages,
        drop_unreceived
.. autofunction:: notice_board
.. autofunction:: poll_until
.. autofunction:: track_execution
.. autofunction:: max_user_tag
.. autodata:: DEPARTURE_GRACE_S
.. autodata:: MAX_BACKOFF_S
.. autodata:: NOTICE_POLL_EVERY
.. autoclass:: SingleRankCommunicator
.. autofunction:: as_communicator
.. autofunction:: allgather_or_raise
.. autofunction:: gather_to_root_or_raise
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar, cast

if TYPE_CHECKING:
    from typing import TypeAlias

    from mpi4py import MPI

from pytato_like import diagnostic
from pytato_like.diagnostic import (
    DistributedExecutionError,
    RankDepartedError,
    RemoteRankError,
)

logger = logging.getLogger("pytato_like")

#: seconds a rank keeps polling for data a departed rank may still have in
#: flight before it raises :class:`~pytato_like.diagnostic.RankDepartedError`
DEPARTURE_GRACE_S = 2.0
#: longest sleep between two polls of a wait
MAX_BACKOFF_S = 100e-6
#: polls a wait makes, giving the core away (``sched_yield``) between
#: them, before it starts sleeping
YIELDING_POLLS = 8
#: a wait looks at the notices of other ranks every this many polls
NOTICE_POLL_EVERY = 4
#: the timer slack (ns) of a waiting thread: Linux lets a sleep overrun by
#: this much (50 us by default, which made every short sleep of a wait
#: last 60-100 us)
WAIT_TIMER_SLACK_NS = 1000
#: seconds the exit hook waits for an execution whose handle was dropped
DROPPED_EXECUTION_TIMEOUT_S = 20.0
#: seconds a rank that left waits for the others' departure notices before
#: it says on stderr which ranks it waits for (it keeps waiting, as MPI
#: finalization would)
DEPARTURE_NOTE_S = 30.0
_NOTICE_BYTES = 4096

_T = TypeVar("_T")


class SingleRankCommunicator:
    """Stands in for an MPI communicator of one rank (what ``None`` means
    as a communicator): collectives return this rank's own contribution."""

    rank = 0
    size = 1

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def allgather(self, obj: _T) -> list[_T]:
        return [obj]

    def gather(self, obj: _T, root: int = 0) -> list[_T]:
        return [obj]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        # (Any as mpi4py's: non-root ranks pass None and get root's object)
        return obj

    def Abort(self, errorcode: int = 1) -> None:  # noqa: N802
        raise SystemExit(errorcode)


_SINGLE_RANK = SingleRankCommunicator()

if TYPE_CHECKING:
    #: what a distributed execution talks through: an MPI communicator, or
    #: the stand-in of a single rank
    Communicator: TypeAlias = "MPI.Comm | SingleRankCommunicator"


def as_communicator(comm: Communicator | None) -> Communicator:
    """*comm*, or the :class:`SingleRankCommunicator` for ``None`` (always
    the same object, so what is cached per communicator is reused). An MPI
    communicator gets a :class:`NoticeBoard` and the exit hook (see the
    module docs)."""
    if comm is None:
        return _SINGLE_RANK
    if is_mpi(comm):
        notice_board(comm)
    return comm


def is_mpi(comm: Communicator) -> TypeGuard[MPI.Comm]:
    """Whether *comm* is a real MPI communicator of more than one rank."""
    return hasattr(comm, "Irecv") and comm.Get_size() > 1


def notice_tag(comm: MPI.Comm) -> int:
    from mpi4py import MPI
    return int(cast("int", comm.Get_attr(MPI.TAG_UB)))


def header_tag(comm: MPI.Comm) -> int:
    return notice_tag(comm) - 1


def max_user_tag(comm: Communicator) -> int | None:
    """The largest tag a numbered communication may use on *comm*
    (``MPI.TAG_UB`` minus the two reserved tags), ``None`` without MPI."""
    if isinstance(comm, SingleRankCommunicator) or not hasattr(comm, "Irecv"):
        return None
    return notice_tag(comm) - 2


# {{{ notices: failures and departures of other ranks

class NoticeBoard:
    """What this rank has heard about the other ranks of one communicator:
    :attr:`failed` (a rank whose execution raised) and :attr:`departed` (a
    rank that left the program), each ``{rank: text}``. One receive on the
    notice tag stays posted; :meth:`poll` picks notices up."""

    def __init__(self, comm: MPI.Comm) -> None:
        from mpi4py import MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.tag = notice_tag(comm)
        self.failed: dict[int, str] = {}
        self.departed: dict[int, str] = {}
        self._departed_at: dict[int, float] = {}
        self._lock = threading.Lock()
        self._buf = bytearray(_NOTICE_BYTES)
        self._status = MPI.Status()
        self._request: MPI.Request | None = comm.Irecv(
            [self._buf, MPI.BYTE],
                                   source=MPI.ANY_SOURCE, tag=self.tag)
        # (source rank, tag) of the executor's messages to this rank
        self._expected: set[tuple[int, int]] = set()

    def poll(self) -> None:
        """Pick up every notice that has arrived (never blocks)."""
        from mpi4py import MPI
        with self._lock:
            while self._request is not None and self._request.Test(
                    self._status):
                src = self._status.Get_source()
                count = self._status.Get_count(MPI.BYTE)
                kind, text = chr(self._buf[0]), bytes(
                    self._buf[1:count]).decode(errors="replace")
                if kind == "L":
                    self.departed.setdefault(src, text)
                    self._departed_at.setdefault(src, time.monotonic())
                else:
                    self.failed.setdefault(src, text)
                self._request = self.comm.Irecv(
                    [self._buf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=self.tag)

    def raise_if_failed(self, peers: Iterable[int] = (), what: object = ""
                        ) -> None:
        """Raise :class:`~pytato_like.diagnostic.RemoteRankError` if any rank
        failed, or :class:`~pytato_like.diagnostic.RankDepartedError` if one
        of *peers* (ranks this rank waits on, for *what*) left more than
        :data:`DEPARTURE_GRACE_S` ago."""
        if self.failed:
            src, text = min(self.failed.items())
            raise RemoteRankError(
                f"rank {src} failed during distributed execution (seen by "
                f"rank {self.rank}): {text}")
        for src in sorted(set(peers) & self.departed.keys()):
            if time.monotonic() - self._departed_at[src] > DEPARTURE_GRACE_S:
                raise RankDepartedError(
                    f"rank {src} left the program ({self.departed[src]}) "
                    f"while rank {self.rank} waits for it: {what}")

    def notify(self, kind: str, text: str) -> None:
        """Tell every other rank (``kind`` ``"F"``: this rank failed,
        ``"L"``: it leaves)."""
        from mpi4py import MPI
        data = (kind + text).encode()[:_NOTICE_BYTES]
        for dest in range(self.comm.Get_size()):
            if dest != self.rank:
                # small enough to go eagerly: never waits for the receiver
                self.comm.Isend([data, MPI.BYTE], dest=dest,
                                tag=self.tag).Free()

    def await_departures(self, note_after_s: float = 0.0) -> None:
        """Poll until every other rank's departure notice has arrived (call
        after this rank sent its own): each rank sends its notice last, so
        afterwards nothing more arrives on the notice tag and :meth:`close`
        leaves no message unmatched. A peer that never leaves keeps this
        rank waiting, as ``MPI_Finalize`` would; after *note_after_s*
        seconds (if positive) stderr says which ranks it waits for."""
        peers = set(range(self.comm.Get_size())) - {self.rank}
        start = time.monotonic()
        noted = note_after_s <= 0
        delay = 0.0
        while True:
            self.poll()
            missing = peers - self.departed.keys()
            if not missing:
                return
            if not noted and time.monotonic() - start > note_after_s:
                noted = True
                sys.stderr.write(
                    f"[rank {self.rank}] has left its program and waits for "
                    f"rank(s) {sorted(missing)} to leave theirs (MPI "
                    "finalization waits for every rank)\n")
                sys.stderr.flush()
            delay = min(1e-3, max(delay * 2, 10e-6))
            time.sleep(delay)

    def expect_messages(self, keys: Iterable[tuple[int, int]]) -> None:
        """Note ``(source rank, tag)`` of messages the executor receives on
        this communicator (what :meth:`drop_unreceived` looks for)."""
        with self._lock:
            self._expected.update(keys)

    def drop_unreceived(self) -> int:
        """Receive and drop the executor's messages (headers, and those
        noted by :meth:`expect_messages`) that arrived for this rank and
        that nothing will receive; call after :meth:`await_departures`.
        MPI keeps each sender's messages in order, so what a peer sent
        before its departure notice is here by now. Returns how many."""
        from mpi4py import MPI
        header = self.tag - 1
        peers = [p for p in range(self.comm.Get_size()) if p != self.rank]
        keys = {(p, header) for p in peers} | self._expected
        status = MPI.Status()
        dropped = 0
        for src, tag in sorted(keys):
            while self.comm.Iprobe(source=src, tag=tag, status=status):
                scratch = bytearray(max(status.Get_count(MPI.BYTE), 1))
                self.comm.Recv([scratch, MPI.BYTE], source=src, tag=tag)
                dropped += 1
                logger.debug("rank %d leaves: dropped a message of %d bytes "
                             "from rank %d (tag %d)", self.rank,
                             status.Get_count(MPI.BYTE), src, tag)
        return dropped

    def close(self) -> None:
        with self._lock:
            if self._request is not None:
                self._request.Cancel()
                self._request.Wait()
                self._request = None


_BOARDS: dict[int, NoticeBoard] = {}
_BOARDS_LOCK = threading.Lock()


def notice_board(comm: MPI.Comm) -> NoticeBoard:
    """The :class:`NoticeBoard` of MPI communicator *comm* (made on first
    use, which also installs the exit hook)."""
    board = _BOARDS.get(id(comm))
    if board is not None and board.comm is comm:
        return board
    with _BOARDS_LOCK:
        board = _BOARDS.get(id(comm))
        if board is None or board.comm is not comm:
            board = _BOARDS[id(comm)] = NoticeBoard(comm)
            _install_exit_hook()
    return board


_slack = threading.local()


def _tighten_timer_slack() -> None:
    """Let this thread's short sleeps end on time (Linux ``prctl``; once
    per thread; elsewhere nothing)."""
    if getattr(_slack, "done", False):
        return
    _slack.done = True
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_timerslack = 29
        libc.prctl(pr_set_timerslack, WAIT_TIMER_SLACK_NS, 0, 0, 0)
    except (OSError, AttributeError) as exc:   # pragma: no cover
        logger.debug("could not set the timer slack: %s", exc)


def _yield_core() -> None:
    """Give the core to another runnable thread (the device's workers),
    returning at once if there is none; ``time.sleep(0)`` would sleep for
    the timer slack instead."""
    sched_yield = getattr(os, "sched_yield", None)
    if sched_yield is not None:
        sched_yield()
    else:   # pragma: no cover
        time.sleep(0)


def poll_until(test: Callable[[], bool], comm: Communicator,
               peers: Callable[[], Iterable[int]]
               = tuple, what: object = "", cancelled: Callable[[], bool] | None
               = None) -> None:
    """Return once ``test()`` is true. Meanwhile poll the notices of
    *comm* (raising as :meth:`NoticeBoard.raise_if_failed` for the ranks
    ``peers()``) and back off: a few yields, then sleeps doubling up to
    :data:`MAX_BACKOFF_S`. ``cancelled()`` true ends the wait with
    :class:`~pytato_like.diagnostic.DistributedExecutionError`."""
    board = notice_board(comm) if is_mpi(comm) else None
    _tighten_timer_slack()
    delay = 0.0
    n = 0
    while not test():
        # the notices every few polls (each look is an MPI test and a
        # lock: a wait of a few hundred microseconds polls 10-20 times)
        if board is not None and n % NOTICE_POLL_EVERY == 0:
            board.poll()
            if board.failed or board.departed:
                try:
                    board.raise_if_failed(peers(), what)
                except RemoteRankError:
                    # what arrived before the notice still counts
                    if test():
                        return
                    raise
        if cancelled is not None and cancelled():
            raise DistributedExecutionError(
                f"rank {0 if comm is None else comm.Get_rank()}: wait "
                f"cancelled ({what})")
        n += 1
        if n <= YIELDING_POLLS:
            _yield_core()
        else:
            delay = min(MAX_BACKOFF_S, max(delay * 2, 10e-6))
            time.sleep(delay)

# }}}


# {{{ the exit hook: dropped executions, then departure notices

class _Execution(Protocol):
    """What :func:`track_execution` keeps."""

    comm: Communicator

    def wait_quietly(self, timeout: float) -> BaseException | None: ...
    def cancel(self) -> None: ...


_RUNNING: dict[int, _Execution] = {}     # id -> execution
_RUNNING_LOCK = threading.Lock()
_HOOK_INSTALLED = False
_CLEANUPS: list[Callable[[], None]] = []


def at_exit_before_finalize(fn: Callable[[], None]) -> None:
    """Run *fn* at exit after the running executions ended and before MPI
    is finalized (to free persistent requests, say)."""
    if fn not in _CLEANUPS:
        _CLEANUPS.append(fn)
    _install_exit_hook()


def track_execution(execution: _Execution) -> Callable[[], None]:
    """Keep *execution* (an object with ``wait_quietly(timeout) ->
    exception or None`` and ``cancel()``) until it ends: at exit, a rank
    first waits up to :data:`DROPPED_EXECUTION_TIMEOUT_S` for it, even if
    its handle was dropped; if it fails or does not end, the rank prints
    the error and aborts the job. Returns the function that forgets it."""
    key = id(execution)
    with _RUNNING_LOCK:
        _RUNNING[key] = execution
    _install_exit_hook()

    def forget() -> None:
        with _RUNNING_LOCK:
            _RUNNING.pop(key, None)
    return forget


def _install_exit_hook() -> None:
    global _HOOK_INSTALLED
    if not _HOOK_INSTALLED:
        _HOOK_INSTALLED = True
        # registered after mpi4py initialized MPI, so it runs before MPI is
        # finalized (mpi4py finalizes from a C-level exit hook)
        atexit.register(_at_exit)


def _why_leaving() -> str:
    exc = getattr(sys, "last_value", None)
    if exc is not None:
        return f"uncaught {type(exc).__name__}: {exc}"
    return "its program ended"


def _at_exit() -> None:
    try:
        from mpi4py import MPI
        if not MPI.Is_initialized() or MPI.Is_finalized():
            return
    except ImportError:
        return
    with _RUNNING_LOCK:
        running = list(_RUNNING.values())
    for execution in running:
        error = execution.wait_quietly(DROPPED_EXECUTION_TIMEOUT_S)
        if error is None:
            continue
        execution.cancel()
        comm = execution.comm
        rank = comm.Get_rank()
        text = "".join(traceback.format_exception(
            type(error), error, error.__traceback__)).rstrip()
        sys.stderr.write(
            f"[rank {rank}] a distributed execution still running at exit "
            "(its handle was never waited for) did not complete:\n"
            + "".join(f"[rank {rank}] {line}\n" for line in text.split("\n"))
            + f"[rank {rank}] aborting all ranks of the job\n")
        _abort_after_output_drains(comm, 1)
    for fn in _CLEANUPS:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 -- exiting; best effort
            logger.debug("exit cleanup %r failed: %s", fn, exc)
    why = _why_leaving()
    boards = list(_BOARDS.values())
    for board in boards:
        try:
            board.notify("L", why)
        except Exception as exc:  # noqa: BLE001 -- exiting; best effort
            logger.debug("departure notice on rank %d failed: %s",
                         board.rank, exc)
    # every notice sent to this rank received before MPI is finalized (see
    # the module docs: an unmatched one gets the whole job killed)
    for board in boards:
        try:
            board.await_departures(DEPARTURE_NOTE_S)
            board.drop_unreceived()
            board.close()
        except Exception as exc:  # noqa: BLE001 -- exiting; best effort
            logger.debug("departure notices on rank %d failed: %s",
                         board.rank, exc)

# }}}


def is_communicator(obj: object) -> bool:
    return obj is None or (hasattr(obj, "allgather") and hasattr(obj, "bcast"))


#: what a rank shares in a collective: ``(True, result)`` or ``(False,
#: (class name, message))``
Outcome: TypeAlias = "tuple[bool, _T | tuple[str, str]]"


def _attempt(work: Callable[[], _T]
             ) -> tuple[BaseException | None, Outcome[_T]]:
    """Run *work*: ``(None, (True, result))``, or on failure ``(error,
    (False, (class name, message)))`` -- the outcome is what a collective
    shares with the other ranks."""
    try:
        return None, (True, work())
    except Exception as exc:
        return exc, (False, (type(exc).__name__, str(exc)))


def _failure_message(rank: int, step: str, payload: tuple[str, str]) -> str:
    cls_name, msg = payload
    return f"rank {rank} failed during {step}: {cls_name}: {msg}"


def allgather_or_raise(comm: Communicator, step: str,
                       work: Callable[[], _T]) -> list[_T]:
    """``comm.allgather(work())``, except that if *work* raises on any rank,
    that rank re-raises its error and every other rank raises
    :class:`~pytato_like.diagnostic.RemoteRankError` naming the rank and
    *step*."""
    error, outcome = _attempt(work)
    outcomes = comm.allgather(outcome)
    if error is not None:
        raise error
    _raise_first_remote_failure(outcomes, step)
    # (no rank failed: every payload is a result of work)
    return cast("list[_T]", [payload for _, payload in outcomes])


def gather_to_root_or_raise(comm: Communicator, step: str,
                            work: Callable[[], _T],
                            decide: Callable[[list[_T]],
                                             tuple[str, str] | None]
                            ) -> None:
    """Gather ``work()`` of every rank on rank 0, where *decide* returns
    ``None`` (all is well) or ``(exception class name, message)``; the
    verdict is broadcast and raised on every rank (the class is looked up in
    :mod:`pytato_like.diagnostic`). A rank whose *work* failed raises its own
    error; the others raise :class:`~pytato_like.diagnostic.RemoteRankError`.
    """
    error, outcome = _attempt(work)
    # (a list on rank 0, the only one reading it)
    outcomes = cast("list[Outcome[_T]]", comm.gather(outcome, root=0))
    verdict = None
    if comm.Get_rank() == 0:
        failed = [(rank, payload) for rank, (ok, payload) in enumerate(outcomes)
                  if not ok]
        if failed:
            rank, payload = failed[0]
            verdict = ("RemoteRankError", _failure_message(
                rank, step, cast("tuple[str, str]", payload)))  # (failed)
        else:
            try:
                # (no rank failed: every payload is a result of work)
                verdict = decide(cast("list[_T]",
                                      [payload for _, payload in outcomes]))
            except Exception as exc:
                verdict = ("RemoteRankError",
                           f"rank 0 failed while checking {step}: "
                           f"{type(exc).__name__}: {exc}")
    verdict = comm.bcast(verdict, root=0)
    if error is not None:
        raise error
    if verdict is not None:
        cls_name, msg = verdict
        raise getattr(diagnostic, cls_name)(msg)


def _raise_first_remote_failure(outcomes: Sequence[Outcome[_T]],
                                step: str) -> None:
    for rank, (ok, payload) in enumerate(outcomes):
        if not ok:
            raise RemoteRankError(_failure_message(
                rank, step, cast("tuple[str, str]", payload)))  # (failed)


@contextlib.contextmanager
def abort_on_error(comm: Communicator | None = None) -> Iterator[None]:
    """Run the ``with`` body; if it raises, print ``[rank R]`` and the
    traceback to stderr and abort the whole MPI job (every rank exits with a
    non-zero status). *comm* defaults to ``MPI.COMM_WORLD``.

    ::

        with abort_on_error(comm):
            main()
    """
    try:
        yield
    except SystemExit as exc:
        if exc.code in (None, 0):
            raise
        _abort(comm, exc, int(exc.code) if isinstance(exc.code, int) else 1)
    except BaseException as exc:
        _abort(comm, exc, 1)


def _abort(comm: Communicator | None, exc: BaseException, code: int) -> None:
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(
        "".join(f"[rank {rank}] {line}\n" for line in text.rstrip().split("\n"))
        + f"[rank {rank}] aborting all ranks of the job\n")
    _abort_after_output_drains(comm, code)


#: How long a rank waits between writing its error and calling
#: ``MPI_Abort``: the process manager forwards a rank's output
#: asynchronously, and an abort that tears the job down first loses it.
ABORT_OUTPUT_GRACE_S = 0.5


def _abort_after_output_drains(comm: Communicator, code: int) -> None:
    sys.stderr.flush()
    sys.stdout.flush()
    time.sleep(ABORT_OUTPUT_GRACE_S)
    comm.Abort(code)
