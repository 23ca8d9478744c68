"""Handles, barriers and registered receive buffers
(pytato_like.runtime.handles, pytato_like.runtime.recv_buffers), in one
process and across two MPI ranks."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from pytato_like.diagnostic import BufferRegistrationError
from pytato_like.runtime.handles import Handle, wait_all
from pytato_like.runtime.pool import get_buffer_pool
from pytato_like.runtime.recv_buffers import ReceiveBufferRegistry
from pytato_like.runtime.trace import TraceRecorder

# {{{ thread handles


def test_thread_handle_returns_result_and_traces():
    gate = threading.Event()
    tracer = TraceRecorder(rank=2)

    def work(a, b=0):
        gate.wait(5)
        return a + b

    h = Handle.run_in_thread(work, 2, b=3, recorder=tracer, name="add")
    assert not h.done()
    gate.set()
    assert h.wait(5) == 5
    assert h.done()
    own, waited = h.fetch_trace()
    assert own.kind == "task" and own.name == "add" and own.rank == 2
    assert own.posted_ns <= own.started_ns <= own.completed_ns
    assert waited.kind == "wait"
    assert waited.started_ns <= own.completed_ns <= waited.completed_ns
    assert h.timestamps == (own.posted_ns, own.started_ns, own.completed_ns)
    assert tracer.records == [own, waited]


def test_wait_runs_a_task_no_thread_has_started_in_the_waiting_thread(
        monkeypatch):
    from pytato_like.runtime import workers
    handed = []
    # no thread picks the task up until wait() has run it
    monkeypatch.setattr(workers, "submit",
                        lambda task, name: handed.append(task))
    runs = []

    def work():
        runs.append(threading.get_ident())
        return len(runs)

    h = Handle.run_in_thread(work, name="steal me")
    assert not h.done()
    # (should wait() not run it, this does, late: the test fails, not hangs)
    late = threading.Timer(5, handed[0])
    late.start()
    assert h.wait() == 1
    late.cancel()
    assert runs == [threading.get_ident()] and h.done()
    assert h.record.posted_ns <= h.record.started_ns <= h.record.completed_ns
    handed[0]()           # the thread it was handed to comes late: no-op
    assert runs == [threading.get_ident()] and h.wait() == 1
    # an error is re-raised the same way
    boom = Handle.run_in_thread(lambda: {}["part 3"])
    with pytest.raises(KeyError, match="part 3"):
        boom.wait()


def test_wait_does_not_run_a_task_a_thread_has_started_again():
    started, gate = threading.Event(), threading.Event()
    runs = []

    def work():
        runs.append(threading.get_ident())
        started.set()
        gate.wait(5)
        return "done"

    h = Handle.run_in_thread(work)
    assert started.wait(5)
    threading.Timer(0.05, gate.set).start()
    assert h.wait() == "done"
    assert len(runs) == 1 and runs[0] != threading.get_ident()


def test_thread_handle_reraises_exception():
    def boom():
        raise KeyError("part 7 failed")

    h = Handle.run_in_thread(boom)
    with pytest.raises(KeyError, match="part 7 failed"):
        h.wait(5)
    assert h.done() and h.record.done


def test_thread_handle_timeout():
    gate = threading.Event()
    h = Handle.run_in_thread(gate.wait, 5)
    with pytest.raises(TimeoutError):
        h.wait(0.01)
    gate.set()
    assert h.wait(5) is True


def test_handles_on_an_executor_run_concurrently():
    barrier = threading.Barrier(2, timeout=5)   # deadlocks unless concurrent
    with ThreadPoolExecutor(2) as pool:
        handles = [Handle.run_in_thread(lambda i=i: (barrier.wait(), i)[1],
                                        executor=pool) for i in range(2)]
        assert wait_all(handles, 5) == [0, 1]


def test_handles_without_executor_run_concurrently_in_kept_threads():
    # three tasks that wait for each other: each gets a thread of its own
    # (none waits for an idle one) ...
    barrier = threading.Barrier(3, timeout=5)

    def meet(i):
        barrier.wait()
        return i, threading.get_ident(), threading.current_thread().name

    handles = [Handle.run_in_thread(meet, i, name=f"meet {i}")
               for i in range(3)]
    got = wait_all(handles, 5)
    assert [g[0] for g in got] == [0, 1, 2]
    assert len({g[1] for g in got}) == 3
    assert [g[2] for g in got] == ["meet 0", "meet 1", "meet 2"]
    # ... and the next task runs in one of those threads, now idle
    time.sleep(0.05)
    again = Handle.run_in_thread(threading.get_ident).wait(5)
    assert again in {g[1] for g in got}


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"),
                    reason="needs fork")
def test_a_forked_child_starts_threads_of_its_own():
    import os
    # an idle kept thread in the parent ...
    assert Handle.run_in_thread(lambda: 1).wait(5) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:    # pragma: no cover -- the child reports through the pipe
        code = 1
        try:
            # ... is not in the child: the task runs in a new thread
            h = Handle.run_in_thread(lambda: 42)
            code = 0 if h.wait(5) == 42 else 1
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    try:
        got = os.read(read, 1)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert got == b"\x00"


def test_an_idle_kept_thread_ends_after_a_while(monkeypatch):
    from pytato_like.runtime import workers
    monkeypatch.setattr(workers, "IDLE_S", 0.05)
    thread = Handle.run_in_thread(threading.current_thread).wait(5)
    deadline = time.monotonic() + 5
    while thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not thread.is_alive()
    # (tasks still run: a new thread)
    assert Handle.run_in_thread(lambda: 7).wait(5) == 7


def test_started_is_when_the_thread_began_running():
    with ThreadPoolExecutor(1) as pool:
        first = Handle.run_in_thread(time.sleep, 0.05, executor=pool)
        second = Handle.run_in_thread(lambda: None, executor=pool)
        wait_all([first, second], 5)
    # the second task was queued behind the first
    assert second.record.started_ns >= first.record.completed_ns
    assert second.record.posted_ns < second.record.started_ns

# }}}


# {{{ receive buffers

def test_registry_hands_out_the_same_buffer_per_key():
    reg = ReceiveBufferRegistry()
    a = reg.get(1, 7, (4, 5), np.float64)
    assert reg.get(1, 7, (4, 5), "float64") is a
    assert reg.get(1, 8, (4, 5), np.float64) is not a      # other tag
    assert reg.get(0, 7, (4, 5), np.float64) is not a      # other peer
    assert reg.get(1, 7, (20,), np.float64) is not a       # other shape
    assert reg.get(1, 7, (4, 5), np.float32) is not a      # other dtype
    assert (reg.n_allocated, reg.n_reused) == (5, 1)
    assert len(reg) == 5 and (1, 7, (4, 5), np.float64) in reg
    assert reg.nbytes == 4 * 20 * 8 + 20 * 4


def test_registered_buffer_is_used_and_conflicts_are_rejected():
    reg = ReceiveBufferRegistry()
    mine = np.zeros((3, 3))
    reg.register(2, "halo", mine)
    assert reg.get(2, "halo", (3, 3), np.float64) is mine
    reg.register(2, "halo", mine)                  # same buffer again: fine
    with pytest.raises(BufferRegistrationError,
                       match=r"shape \(3, 3\) and dtype float64 .* peer 2, "
                             r"tag 'halo'"):
        reg.register(2, "halo", np.zeros((3, 3)))
    with pytest.raises(BufferRegistrationError, match="C-contiguous"):
        reg.register(2, "other", np.zeros((4, 4))[:, ::2])


def test_clear_returns_allocated_buffers_to_the_pool():
    pool = get_buffer_pool(np)
    reg = ReceiveBufferRegistry()
    reg.get(0, 1, (123, 7), np.int16)
    reg.register(0, 2, np.zeros(5))
    free = pool.n_free
    reg.clear()
    assert pool.n_free == free + 1       # only the one allocated here
    assert len(reg) == 0


def test_device_registry():
    cl = pytest.importorskip("pyopencl")
    cla = pytest.importorskip("pyopencl.array")
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    reg = ReceiveBufferRegistry(queue)
    buf = reg.get(1, 0, (8,), np.float32)
    assert isinstance(buf, cla.Array)
    assert reg.get(1, 0, (8,), np.float32) is buf

# }}}


# {{{ two MPI ranks

MPI_SCRIPT = r"""
import json, sys
import numpy as np
from mpi4py import MPI
from pytato_like.runtime.handles import Handle, barrier, wait_all
from pytato_like.runtime.recv_buffers import ReceiveBufferRegistry
from pytato_like.runtime.trace import TraceRecorder, gather_traces

comm = MPI.COMM_WORLD
rank, peer = comm.rank, 1 - comm.rank
tracer = TraceRecorder(rank)
registry = ReceiveBufferRegistry()
buffer_ids, ok = set(), True
for step in range(3):
    recv_buf = registry.get(peer, 7, (100,), np.float64)
    buffer_ids.add(id(recv_buf))
    send_buf = np.full(100, 10.0 * rank + step)
    hr = Handle.from_requests(comm.Irecv(recv_buf, source=peer, tag=7),
                              kind="recv", recorder=tracer, peer=peer, tag=7,
                              nbytes=recv_buf.nbytes)
    hs = Handle.from_requests(comm.Isend(send_buf, dest=peer, tag=7),
                              kind="send", recorder=tracer, peer=peer, tag=7,
                              nbytes=send_buf.nbytes)
    with tracer.part(step):
        np.sin(np.arange(10000.0)).sum()
    wait_all([hs, hr])
    ok &= hr.done() and bool((recv_buf == 10.0 * peer + step).all())
barrier(comm, recorder=tracer)
barrier(comm, blocking=False, recorder=tracer).wait()
merged = gather_traces(comm, tracer)
result = {"ok": ok, "n_buffers": len(buffer_ids)}
results = comm.gather(result)
if rank == 0:
    merged.write_json(sys.argv[1])
    print(json.dumps({"ranks": results, "summary": merged.summary()}))
"""


@pytest.fixture(scope="module")
def mpi_run(tmp_path_factory):
    pytest.importorskip("mpi4py")
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        pytest.skip("mpiexec not installed next to the interpreter")
    tmp = tmp_path_factory.mktemp("mpi")
    script = tmp / "exchange.py"
    script.write_text(MPI_SCRIPT)
    trace_path = tmp / "trace.json"
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, str(script), str(trace_path)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, json.loads(trace_path.read_text())


def test_mpi_handles_deliver_into_the_same_registered_buffer(mpi_run):
    out, _ = mpi_run
    assert out["ranks"] == [{"ok": True, "n_buffers": 1}] * 2


def test_mpi_trace_has_one_event_per_message_and_part(mpi_run):
    out, doc = mpi_run
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    count = {}
    for e in events:
        count[(e["pid"], e["cat"])] = count.get((e["pid"], e["cat"]), 0) + 1
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert e["args"]["posted_us"] <= e["ts"]
    for rank in (0, 1):
        assert count[(rank, "send")] == 3
        assert count[(rank, "recv")] == 3
        assert count[(rank, "part")] == 3
        # 6 message waits + the blocking barrier + waiting on the Ibarrier
        assert count[(rank, "wait")] == 8
        assert count[(rank, "barrier")] == 1
    sends = [e for e in events if e["cat"] == "send"]
    assert {(e["pid"], e["args"]["peer"]) for e in sends} == {(0, 1), (1, 0)}
    assert all(e["args"]["nbytes"] == 800 and e["args"]["tag"] == 7
               for e in sends)
    summary = out["summary"]
    for rank in ("0", "1"):
        assert summary[rank]["bytes_sent"] == 3 * 800
        assert summary[rank]["bytes_received"] == 3 * 800
        assert summary[rank]["n_parts"] == 3

# }}}

# vim: foldmethod=marker
