"""Distributed execution under real MPI: each test launches
``mpiexec -n N python tests/mpi/checks.py CASE...`` (or an example) with a
timeout and checks the exit status and what every rank printed.

The cases compare each rank's results with a serial NumPy evaluation of the
same global computation (see tests/mpi/checks.py); ``packed``,
``persistent`` and ``trace`` also check the message count from the trace,
buffer reuse across executions, the asynchronous handle and the Chrome
trace."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "tests" / "mpi" / "checks.py"
FAULTS = ROOT / "tests" / "mpi" / "faults.py"
#: a fault case must end the whole job well within this (seconds)
FAULT_BOUND = 60
CORRECTNESS_CASES = ["ring", "halo", "self_send", "random1", "random2",
                     "random3", "unmatched", "packed", "persistent", "trace",
                     "mixed", "forwarding", "overlap"]
#: what each case prints per rank when it passes (some print more than one)
OK_LINES = {"packed": ["packed", "per_array"],
            "forwarding": ["forwarding"],
            "persistent": ["persistent1", "persistent2", "persistent"],
            "trace": ["trace_results", "trace"],
            "overlap": ["overlap_split1", "overlap_split0", "overlap"]}


def assert_ok(proc, cases, n):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for case in cases:
        for line in OK_LINES.get(case, [case]):
            for rank in range(n):
                assert f"OK {line} rank {rank}" in proc.stdout, (line, rank,
                                                                  proc.stdout)


def launch(n: int, script: Path, *args: str, timeout: float = 120
           ) -> subprocess.CompletedProcess:
    return run_ranks(n, script, *args, timeout=timeout)


def _loopy_available() -> bool:
    import pytato_like
    return getattr(pytato_like, "generate_loopy", None) is not None


@pytest.mark.parametrize("n", [2, 3, 4])
def test_cases_match_serial_numpy(n):
    proc = launch(n, CHECKS, *CORRECTNESS_CASES)
    assert_ok(proc, CORRECTNESS_CASES, n)


def test_per_array_messages_match_serial_numpy():
    cases = ["ring", "halo", "self_send", "random1", "random2"]
    proc = launch(3, CHECKS, "--messages", "per_array", *cases)
    assert_ok(proc, cases, 3)


@pytest.mark.parametrize("pack_on", ["device", "host"])
def test_cases_with_loopy_part_programs(pack_on):
    if not _loopy_available():
        pytest.skip("pytato_like.generate_loopy is not available yet")
    cases = ["ring", "halo", "self_send", "random1", "packed", "persistent",
             "mixed", "forwarding", "overlap"]
    proc = launch(2, CHECKS, "--target", "loopy", "--pack-on", pack_on, *cases,
                  timeout=300)
    assert_ok(proc, cases, 2)


def test_failure_in_execution_ends_every_rank():
    proc = launch(3, CHECKS, "fail_execute", timeout=30)
    assert proc.returncode != 0
    assert "[rank 1] RuntimeError: injected failure in a part on rank 1" \
        in proc.stderr
    assert "aborting all ranks" in proc.stderr


def test_failure_in_execution_reported_to_waiting_ranks_without_abort():
    proc = launch(3, CHECKS, "fail_execute_no_abort", timeout=30)
    assert proc.returncode != 0
    assert "rank 1 RuntimeError: injected failure" in proc.stdout
    # rank 2 waits for rank 1's data: it is told instead of hanging
    assert ("rank 2 RemoteRankError: rank 1 failed during distributed "
            "execution") in proc.stdout


def test_failure_in_partitioning_ends_every_rank():
    proc = launch(2, CHECKS, "fail_partition", timeout=30)
    assert proc.returncode != 0
    # whichever rank aborts first names the failure of rank 1: rank 1 its
    # own error, rank 0 the error it learnt in the same collective
    assert ("[rank 1] pytato_like.diagnostic.NotAnArrayError" in proc.stderr
            or "[rank 0] pytato_like.diagnostic.RemoteRankError: rank 1 failed "
            "during partitioning: NotAnArrayError" in proc.stderr), proc.stderr


def test_heat_example_matches_serial_numpy_on_three_ranks():
    proc = launch(3, ROOT / "examples" / "distributed_heat.py",
                  "--cells", "200", "--steps", "6", "--fields", "3",
                  "--target", "numpy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-> OK" in proc.stdout
    assert "heat equation on 3 ranks: 600 cells, 3 fields, 6 steps" in proc.stdout


@pytest.mark.parametrize("target", ["numpy", "loopy"])
def test_heat_example_with_deep_halos_matches_serial_numpy(target):
    """Halos of 3 cells every 3 steps, 7 steps (the last exchange covers
    one step): the same values as serial NumPy, to the bit, with a third
    of the messages."""
    if target == "loopy" and not _loopy_available():
        pytest.skip("no loopy")
    proc = launch(3, ROOT / "examples" / "distributed_heat.py",
                  "--cells", "20", "--steps", "7", "--fields", "2",
                  "--halo", "3", "--target", target, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max |distributed - serial NumPy| = 0.00e+00 -> OK" in proc.stdout
    # ceil(7 / 3) exchanges, one message per neighbour each
    assert "messages sent by rank 0 per run: 6 " in proc.stdout, proc.stdout


def test_deep_halos_on_many_cells_split_deep_with_the_same_bits(tmp_path):
    """Halos of 3 cells every 3 steps on 40 000 cells per rank (enough for
    the boundary/interior split): the parts before the last compute
    strips of a few cells each, never a whole field (the deep rows of all
    steps are computed in the last part), and the values are serial
    NumPy's to the bit."""
    import pickle

    import pytato_like as pt
    if not _loopy_available():
        pytest.skip("no loopy")
    saved = tmp_path / "partition.pkl"
    proc = launch(2, ROOT / "examples" / "distributed_heat.py",
                  "--cells", "40000", "--steps", "7", "--fields", "1",
                  "--halo", "3", "--target", "loopy", "--save-partition",
                  str(saved), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max |distributed - serial NumPy| = 0.00e+00 -> OK" in proc.stdout
    with open(saved, "rb") as f:
        partition = pickle.load(f)
    *boundary, last = partition.toposorted_part_ids
    widest = max(partition.name_to_output[name].shape[0]
                 for pid in boundary
                 for name in partition.parts[pid].output_names)
    # strips of at most 2 * 7 cells plus the halo (whole fields before)
    assert widest <= 2 * 7 + 3, widest
    assert all(partition.name_to_output[name].shape == (40000,)
               for name in partition.parts[last].output_names)
    # the last part computes the strips' steps and the deep rows' steps
    # as two chains: one time-tiled kernel each (before the chunks were
    # ordered chain by chain, strip and deep steps of one level
    # alternated and only the deep steps after the last strip step were
    # fused: 4 launches, 3 steps of 40 000 cells in kernels of their own)
    programs = pt.generate_code_for_partition(partition, target="loopy")
    source = programs[last].source
    assert len(programs[last].plan.launches) == 2, source
    # (each kernel keeps its steps in private scratch arrays; their names
    # depend on whether the middle steps are rolled into one loop)
    kernels = source.split("__kernel")[1:]
    assert len(kernels) == 2
    assert all("double _pt_scratch" in k for k in kernels), source


def test_demo_relaunches_itself_on_two_ranks():
    env = dict(os.environ)
    for name in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--cells", "500",
         "--steps", "4"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mpiexec -n 2" in proc.stdout
    assert "heat equation on 2 ranks" in proc.stdout
    assert "demo: PASSED" in proc.stdout
    # and the comparison on the whole domain
    assert re.search(r"demo: on the whole domain .* 2 ranks [\d.]+ ms; serial "
                     r"NumPy [\d.]+ ms \([\d.]+x\)", proc.stdout), proc.stdout


# {{{ faults without verify_distributed_partition (tests/mpi/faults.py)

def run_fault(case: str) -> subprocess.CompletedProcess:
    """Run a fault case on 2 ranks; a hang fails the test (TimeoutExpired)
    after FAULT_BOUND seconds."""
    return launch(2, FAULTS, case, timeout=FAULT_BOUND)


def reported(proc, rank: int, error: str) -> str:
    """The line in which *rank* reported catching *error*."""
    found = re.search(rf"rank {rank} {error}: [^\n]*", proc.stdout)
    if found:
        return found.group(0)
    raise AssertionError(f"rank {rank} did not report {error}:\n"
                         + proc.stdout + proc.stderr)


@pytest.mark.parametrize(("case", "sent", "received"), [
    ("shape_mismatch", "shape (1,) <f8, 8 bytes", "shape (3,) <f8, 24 bytes"),
    ("dtype_mismatch", "shape (4,) <i8, 32 bytes", "shape (4,) <f8, 32 bytes"),
])
def test_mismatched_send_and_receive_raise_on_both_ranks(case, sent, received):
    proc = run_fault(case)
    assert proc.returncode != 0
    for rank in (0, 1):
        line = reported(proc, rank, "SendRecvMismatchError")
        assert (f"rank 0 sends tag 100 as {sent} but rank 1 receives it as "
                f"{received}") in line, line


def test_duplicate_tag_raises_at_numbering():
    proc = run_fault("duplicate_tag")
    assert proc.returncode != 0
    line = reported(proc, 0, "DuplicateSendError")
    assert "rank 0 sends twice to rank 1 with tag 't'" in line
    line = reported(proc, 1, "RemoteRankError")
    assert "rank 0 failed during tag numbering: DuplicateSendError" in line


def test_negative_base_tag_raises_at_numbering():
    proc = run_fault("negative_tag")
    assert proc.returncode != 0
    for rank in (0, 1):
        line = reported(proc, rank, "CommunicationTagError")
        assert f"base_tag=-5 on rank {rank}" in line


@pytest.mark.parametrize(("case", "why"), [
    ("exit_early", "its program ended"),
    ("raise_early", "uncaught RuntimeError: rank 1 gives up"),
    ("end_early", "its program ended"),
    ("exit_late", "its program ended"),
])
def test_rank_leaving_ends_the_waiting_rank(case, why):
    proc = run_fault(case)
    assert proc.returncode != 0
    line = reported(proc, 0, "RankDepartedError")
    assert f"rank 1 left the program ({why}) while rank 0 waits for it" \
        in line, line
    if case == "exit_late":
        assert "waits for messages (rank 1, tag 100)" in line


def test_rank_leaving_inside_abort_on_error_aborts_the_job():
    proc = run_fault("exit_early_abort")
    assert proc.returncode != 0
    assert "[rank 0] pytato_like.diagnostic.RankDepartedError: rank 1 left " \
        "the program" in proc.stderr, proc.stderr
    assert "[rank 0] aborting all ranks of the job" in proc.stderr


def test_dropped_handle_completes():
    proc = run_fault("dropped_handle")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 dropped its handle" in proc.stdout
    # rank 1's results need the data rank 0's dropped execution sends
    assert "OK dropped_handle rank 1" in proc.stdout


def test_handles_dropped_on_every_rank_complete_at_exit():
    proc = run_fault("dropped_handles")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(f"rank {r} dropped its handle" in proc.stdout for r in (0, 1))
    assert "did not complete" not in proc.stderr


def test_dropped_handle_that_cannot_complete_ends_with_an_error():
    proc = run_fault("dropped_handle_orphan")
    assert proc.returncode != 0
    assert ("[rank 0] a distributed execution still running at exit (its "
            "handle was never waited for) did not complete") in proc.stderr
    assert "RankDepartedError: rank 1 left the program" in proc.stderr

# }}}

# vim: foldmethod=marker


def test_each_rank_device_gets_its_share_of_the_cores():
    """Under mpiexec, a program's first distributed step (building a
    receive) limits each rank's PoCL device to cores // ranks_on_node
    compute units (checked through OpenCL)."""
    if not _loopy_available():
        pytest.skip("no OpenCL")
    script = ROOT / "tests" / "mpi" / "device_threads.py"
    proc = launch(2, script, timeout=FAULT_BOUND)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from pytato_like.distributed.threads import POCL_VARIABLES
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    for rank in (0, 1):
        found = re.search(rf"rank {rank} compute units (\d+) expected (\d+)",
                          proc.stdout)
        assert found and found.group(1) == found.group(2), proc.stdout
        if not any(os.environ.get(v) for v in POCL_VARIABLES) and \
                not os.environ.get("PYTATO_LIKE_DEVICE_THREADS"):
            assert int(found.group(1)) == share, (found.group(0), share)


def test_partition_drawing_shows_the_profile_of_a_two_rank_trace(tmp_path):
    """Each part's mean and max time per rank and each message's bytes, as
    drawn from a saved 2-rank trace, against figures computed here from the
    Chrome JSON itself (and the bytes against a hand count)."""
    import json
    import pickle
    import statistics

    from pytato_like.visualization.dot import get_dot_graph_from_partition
    trace, saved = tmp_path / "trace.json", tmp_path / "partition.pkl"
    proc = launch(2, ROOT / "examples" / "distributed_heat.py", "--cells",
                  "40", "--steps", "3", "--fields", "2", "--target", "numpy",
                  "--runs", "3", "--trace", str(trace), "--save-partition",
                  str(saved))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(saved, "rb") as f:
        partition = pickle.load(f)
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e["ph"] == "X"]
    # (the full view: one cluster per part, whatever the partition's size)
    src = get_dot_graph_from_partition(partition, trace=str(trace),
                                       view="full")

    for pid in partition.toposorted_part_ids:
        label = re.search(rf"^ *label=<part {re.escape(str(pid))}\b.*>;$",
                          src, re.MULTILINE)
        assert label, (pid, src[:2000])
        for rank in (0, 1):
            durations = [e["dur"] / 1e3 for e in events
                         if e["cat"] == "part" and e["pid"] == rank
                         and e["args"]["part_id"] == str(pid)]
            assert len(durations) == 3          # one per traced run
            drawn = re.search(rf"rank {rank}: ([\d.]+) ms mean, ([\d.]+) ms "
                              r"max, \d+% of execution", label.group(0))
            assert drawn, label.group(0)
            assert float(drawn[1]) == pytest.approx(
                statistics.mean(durations), abs=1e-3)
            assert float(drawn[2]) == pytest.approx(max(durations), abs=1e-3)

    assert partition.messages
    for m in partition.messages:
        drawn = re.findall(rf"tag {m.tag}: (\d+) bytes", src)
        assert drawn, m
        sent = {e["args"]["nbytes"] for e in events
                if e["cat"] in ("send", "recv") and e["args"]["tag"] == m.tag}
        # one float64 halo cell per array of the message
        assert {int(b) for b in drawn} == sent == {8 * m.n_arrays}
        in_flight = re.findall(rf"tag {m.tag}: \d+ bytes</td></tr><tr><td "
                               r'align="left">in flight</td><td '
                               r'align="left">(-?[\d.]+) ms mean', src)
        # a time, matched from both sides (how exact depends on how well
        # the ranks' clocks were aligned: microseconds on an idle machine,
        # up to a millisecond on a loaded one)
        assert in_flight and all(abs(float(t)) < 1e3 for t in in_flight)


@pytest.mark.parametrize("freeze", [True, False])
def test_repeated_executions_take_the_fast_paths_and_match_numpy(freeze):
    """The fast paths of repeated executions (tests/mpi/fast_parts.py): the
    heat solver run four times with changing inputs equals serial NumPy
    every time, part programs replay their recorded launches or run frozen
    (``PYTATO_LIKE_FREEZE_PARTS=0``: replay only), messages travel as
    sub-buffers of one device buffer (no pack or unpack kernels) and sent
    values are computed in place from the second execution on."""
    pytest.importorskip("pyopencl")
    proc = launch(2, ROOT / "tests" / "mpi" / "fast_parts.py",
                  *(() if freeze else ("--no-freeze",)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert f"OK fast_parts rank {rank}" in proc.stdout, proc.stdout
