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
* Anything else (an error in user code between the steps, a rank that
  already moved on) is covered by running the whole program inside
  :func:`abort_on_error`: it prints the rank and traceback to stderr and
  calls ``MPI_Abort``, which ends every rank of the job with a non-zero
  exit status. Every example and MPI test script does this.

For code that partitions without MPI (single process), pass ``None`` as
the communicator: it stands for a one-rank world
(:class:`SingleRankCommunicator`).

.. autofunction:: abort_on_error
.. autoclass:: SingleRankCommunicator
.. autofunction:: as_communicator
.. autofunction:: allgather_or_raise
.. autofunction:: gather_to_root_or_raise
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from pytato_like.diagnostic import RemoteRankError


class SingleRankCommunicator:
    """Stands in for an MPI communicator of one rank (what ``None`` means
    as a communicator): collectives return this rank's own contribution."""

    rank = 0
    size = 1

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def allgather(self, obj: Any) -> list[Any]:
        return [obj]

    def gather(self, obj: Any, root: int = 0) -> list[Any]:
        return [obj]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return obj

    def Abort(self, errorcode: int = 1) -> None:  # noqa: N802
        raise SystemExit(errorcode)


_SINGLE_RANK = SingleRankCommunicator()


def as_communicator(comm: Any) -> Any:
    """*comm*, or the :class:`SingleRankCommunicator` for ``None`` (always
    the same object, so what is cached per communicator is reused)."""
    return _SINGLE_RANK if comm is None else comm


def is_communicator(obj: Any) -> bool:
    return obj is None or (hasattr(obj, "allgather") and hasattr(obj, "bcast"))


def _attempt(work: Callable[[], Any]
             ) -> tuple[BaseException | None, tuple[bool, Any]]:
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


def allgather_or_raise(comm: Any, step: str, work: Callable[[], Any]
                       ) -> list[Any]:
    """``comm.allgather(work())``, except that if *work* raises on any rank,
    that rank re-raises its error and every other rank raises
    :class:`~pytato_like.diagnostic.RemoteRankError` naming the rank and
    *step*."""
    error, outcome = _attempt(work)
    outcomes = comm.allgather(outcome)
    if error is not None:
        raise error
    _raise_first_remote_failure(outcomes, step)
    return [payload for _, payload in outcomes]


def gather_to_root_or_raise(comm: Any, step: str, work: Callable[[], Any],
                            decide: Callable[[list[Any]], tuple[str, str] | None]
                            ) -> None:
    """Gather ``work()`` of every rank on rank 0, where *decide* returns
    ``None`` (all is well) or ``(exception class name, message)``; the
    verdict is broadcast and raised on every rank (the class is looked up in
    :mod:`pytato_like.diagnostic`). A rank whose *work* failed raises its own
    error; the others raise :class:`~pytato_like.diagnostic.RemoteRankError`.
    """
    from pytato_like import diagnostic
    error, outcome = _attempt(work)
    outcomes = comm.gather(outcome, root=0)
    verdict = None
    if comm.Get_rank() == 0:
        failed = [(rank, payload) for rank, (ok, payload) in enumerate(outcomes)
                  if not ok]
        if failed:
            rank, payload = failed[0]
            verdict = ("RemoteRankError", _failure_message(rank, step, payload))
        else:
            try:
                verdict = decide([payload for _, payload in outcomes])
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


def _raise_first_remote_failure(outcomes: list[tuple[bool, Any]],
                                step: str) -> None:
    for rank, (ok, payload) in enumerate(outcomes):
        if not ok:
            raise RemoteRankError(_failure_message(rank, step, payload))


@contextlib.contextmanager
def abort_on_error(comm: Any = None) -> Iterator[None]:
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


def _abort(comm: Any, exc: BaseException, code: int) -> None:
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(
        "".join(f"[rank {rank}] {line}\n" for line in text.rstrip().split("\n"))
        + f"[rank {rank}] aborting all ranks of the job\n")
    sys.stderr.flush()
    sys.stdout.flush()
    comm.Abort(code)
