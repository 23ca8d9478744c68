"""Distributed runs on 3 to 8 ranks (oversubscribed on a small machine:
MPICH allows it), each a launch of ``mpiexec -n N python tests/mpi/ranks.py
CASE`` bounded in time; the rank programs compare their results with
NumPy bit for bit (see tests/mpi/ranks.py).

The ring runs with staggered departures and an exit handler that
communicates: on 4 or more ranks that made every run of the executor
before issue 38 end with MPICH killing the job (a departure notice taken
in by MPI after the receive for it was cancelled: an unmatched message,
``MPI_Finalize`` failed). ``tests/mpi/ring_tries.py`` repeats the issue's
ring shapes over separate launches."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parent.parent
RANKS = ROOT / "tests" / "mpi" / "ranks.py"
#: seconds a fault case on 4 ranks may take to end every rank
FAULT_BOUND = 60
KILLED = "BAD TERMINATION"


def launch(n: int, *args: str, timeout: float = 150
           ) -> subprocess.CompletedProcess:
    return run_ranks(n, RANKS, *args, timeout=timeout)


def assert_every_rank_ok(proc, case: str, n: int) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert KILLED not in output, output
    for rank in range(n):
        assert f"OK {case} rank {rank}\n" in proc.stdout, output


def reported(proc, rank: int) -> str:
    """What *rank* reported catching (``rank R <Error>: <message>``)."""
    found = re.search(rf"^rank {rank} (\w+): (.*)$", proc.stdout, re.M)
    if found is None:
        raise AssertionError(f"rank {rank} reported nothing:\n"
                             + proc.stdout + proc.stderr)
    return found.group(0)


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_ring_matches_numpy_bit_for_bit_and_every_rank_ends_cleanly(n):
    proc = launch(n, "ring", "--target", "loopy", "--stagger", "0.1",
                  "--exit-exchange")
    assert_every_rank_ok(proc, "ring", n)


def test_ring_with_several_fields_on_the_numpy_target_on_five_ranks():
    proc = launch(5, "ring", "--fields", "2", "--steps", "2", "--stagger",
                  "0.1", "--exit-exchange")
    assert_every_rank_ok(proc, "ring", 5)


@pytest.mark.parametrize(("n", "target"), [(3, "numpy"), (4, "loopy"),
                                           (5, "numpy")])
def test_sends_to_several_neighbours_of_different_sizes(n, target):
    proc = launch(n, "neighbours", "--target", target)
    assert_every_rank_ok(proc, "neighbours", n)


@pytest.mark.parametrize("n", [2, 3])
def test_partitions_with_the_same_tags_run_in_opposite_orders_stay_apart(n):
    # before issue 38 each rank received the other partition's data
    proc = launch(n, "same_tags")
    assert_every_rank_ok(proc, "same_tags", n)


@pytest.mark.parametrize("target", ["numpy", "loopy"])
def test_zero_size_messages(target):
    # 3 ranks: one message holds a (3, 0) input alone (before issue 38 the
    # loopy target raised TypeError from enqueue_copy on it)
    proc = launch(3, "zero_size", "--target", target)
    assert_every_rank_ok(proc, "zero_size", 3)


def test_send_to_a_rank_outside_the_communicator_names_rank_and_size():
    proc = launch(2, "bad_rank")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    text = ("rank 0 sends to rank 5 (tag 't'), which is not a rank of the "
            "communicator: it has 2 rank(s), 0 to 1")
    assert reported(proc, 0) == f"rank 0 DistributedPartitionError: {text}"
    assert reported(proc, 1) == (
        "rank 1 RemoteRankError: rank 0 failed during partitioning: "
        f"DistributedPartitionError: {text}")


# {{{ faults on 4 ranks: every rank ends with a clear error, in bounded time

def run_fault(case: str) -> subprocess.CompletedProcess:
    """Run a fault case on 4 ranks; a hang fails the test (TimeoutExpired)
    after FAULT_BOUND seconds."""
    return launch(4, case, timeout=FAULT_BOUND)


def test_part_raising_on_one_rank_aborts_every_rank():
    proc = run_fault("fault_raise")
    assert proc.returncode != 0
    assert "[rank 2] RuntimeError: injected failure on rank 2" in proc.stderr
    for rank in (0, 1, 3):
        assert (f"[rank {rank}] pytato_like.diagnostic.RemoteRankError: rank 2 "
                "failed during distributed execution") in proc.stderr, \
            proc.stderr
    for rank in range(4):
        assert f"[rank {rank}] aborting all ranks of the job" in proc.stderr


def test_part_raising_is_reported_by_every_rank_without_abort():
    proc = run_fault("fault_raise_no_abort")
    assert proc.returncode != 0
    assert reported(proc, 2) == \
        "rank 2 RuntimeError: injected failure on rank 2"
    for rank in (0, 1, 3):
        line = reported(proc, rank)
        assert line.startswith(
            f"rank {rank} RemoteRankError: rank 2 failed during distributed "
            f"execution (seen by rank {rank}): RuntimeError: injected "
            "failure on rank 2"), line
    assert KILLED not in proc.stdout + proc.stderr


def test_rank_leaving_early_ends_every_rank_with_an_error_naming_a_rank():
    proc = run_fault("fault_exit")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "rank 2 leaves" in proc.stdout
    # the neighbours of rank 2 wait for it; rank 0 waits for them
    for rank in (1, 3):
        line = reported(proc, rank)
        assert line.startswith(
            f"rank {rank} RankDepartedError: rank 2 left the program "
            f"(its program ended) while rank {rank} waits for it: rank "
            f"{rank} waits for messages"), line
    line = reported(proc, 0)
    assert re.match(r"rank 0 RankDepartedError: rank [13] left the program",
                    line), line
    # no unmatched message left behind: MPICH did not kill anyone
    assert KILLED not in proc.stdout + proc.stderr


def test_rank_killed_by_sigkill_ends_the_job():
    proc = run_fault("fault_sigkill")
    assert proc.returncode != 0
    assert "rank 2 kills itself" in proc.stdout
    # MPICH's process manager names the signal and ends every rank
    assert "Killed (signal 9)" in proc.stdout + proc.stderr

# }}}

# vim: foldmethod=marker
