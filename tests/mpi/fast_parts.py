"""Run by tests/test_distributed_mpi.py (fast-paths test) under ``mpiexec -n 2``: the
heat solver of examples/distributed_heat.py executed several times with
changing inputs, checked against serial NumPy, and the fast paths checked
to be taken: part programs replayed, messages as sub-buffers of one device
buffer (no pack/unpack kernels), sent outputs computed in place after the
first execution, and the executions after the first run by the steady loop
(:mod:`pytato_like.distributed.steady`) with the same results and trace,
the parts whose outputs stay inside an execution as frozen calls
(``--no-freeze``: none).
Prints ``OK fast_parts rank R`` per rank."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import distributed_heat as heat  # noqa: E402
import pyopencl as cl  # noqa: E402

import pytato_like as pt  # noqa: E402
from pytato_like.distributed import abort_on_error  # noqa: E402
from pytato_like.distributed import comm as comm_module  # noqa: E402
from pytato_like.distributed.execute import message_plan  # noqa: E402


#: ``--no-freeze``: the same checks with frozen part calls switched off
FREEZE = "--no-freeze" not in sys.argv
if not FREEZE:
    os.environ["PYTATO_LIKE_FREEZE_PARTS"] = "0"


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    n_local, n_fields, n_steps = 40, 3, 4
    n_total = n_local * size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    dag = heat.build_heat_dag(rank, size, n_local, n_fields, n_steps)
    partition = pt.find_distributed_partition(comm, dag)
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=7)
    prgs = pt.generate_code_for_partition(partition, target="loopy")
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))

    copies_in = []
    original = comm_module._PaddedMessage.copy_in

    def counting_copy_in(self, i, value):
        copies_in.append(i)
        return original(self, i, value)

    comm_module._PaddedMessage.copy_in = counting_copy_in

    kept = []
    copies_per_run = []
    schedulers = []
    for run in range(4):
        fields = [(run + 1) * heat.initial_field(n_total, f) + run
                  for f in range(n_fields)]
        inputs = {f"u{f}": fields[f][mine] for f in range(n_fields)}
        before = len(copies_in)
        stats: dict = {}
        out = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                               input_args=inputs, stats=stats)
        copies_per_run.append(len(copies_in) - before)
        schedulers.append(stats["scheduler"])
        # the executor's own host time, each kind counted once
        overhead = stats["overhead_ns"]
        assert {"enqueue", "enqueue_cpu", "launch", "pack", "post", "poll",
                "unpack"} <= set(overhead), overhead
        assert all(v >= 0 for v in overhead.values()), overhead
        assert "send" not in overhead, overhead
        assert stats["n_parts_run"] == len(partition.parts), stats
        kept.append((fields, out))
    queue.finish()
    # every execution's results are its own (later ones reuse buffers)
    for fields, out in kept:
        for f in range(n_fields):
            expected = heat.serial_heat(fields[f], n_steps)[mine]
            got = out[f"u{f}"]
            got = got.get() if hasattr(got, "get") else np.asarray(got)
            np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)

    plan = message_plan(partition, comm, queue,
                        allocator=pt.runtime.pool.get_buffer_pool(queue)
                        .memory_pool)
    outgoing = [m for msgs in plan.outgoing.values() for m in msgs]
    assert plan.incoming and outgoing
    assert all(m.padded is not None and m.unpacker is None
               for m in plan.incoming), "receives not as sub-buffers"
    assert all(m.padded is not None and m.packer is None for m in outgoing), \
        "sends not as sub-buffers"
    # the first execution copies sent values into their message buffers;
    # later ones compute them there
    assert copies_per_run[0] > 0, copies_per_run
    assert copies_per_run[1:] == [0, 0, 0], copies_per_run
    # the first execution settles the plan; later ones run the steady loop
    assert schedulers == ["general", "steady", "steady", "steady"], schedulers
    # every later call is a replay or a frozen call (parts whose outputs
    # stay inside the execution)
    counts = {pid: p.replay_counts() for pid, p in prgs.items()
              if type(p).__name__ == "BoundPyOpenCLProgram"}
    replayed = sum(c["replayed"] for c in counts.values())
    frozen = {pid: c["frozen"] for pid, c in counts.items() if c["frozen"]}
    n_programs_run = sum(1 for c in counts.values() if c["full"])
    if FREEZE:
        assert frozen and all(n == 3 for n in frozen.values()), frozen
    else:
        assert not frozen, frozen
    assert replayed + sum(frozen.values()) >= 3 * n_programs_run > 0, \
        (replayed, frozen, n_programs_run)
    # a frozen part's outputs are not results of the partition
    overall = set(partition.overall_output_names)
    assert all(overall.isdisjoint(partition.parts[pid].output_names)
               for pid in frozen)
    # overlap: the executor never blocks for messages while a part is
    # runnable (the interior of a step is enqueued before the wait for
    # that step's halos)
    handle = pt.execute_distributed_partition_async(
        partition, prgs, queue, comm, input_args=inputs)
    handle.wait()
    assert handle.stats["scheduler"] == "steady", handle.stats
    records = handle.fetch_trace()
    # the steady loop's trace has what the general scheduler's has: a
    # record per part, per message each way, and a pack per message sent
    kinds = [r.kind for r in records]
    assert kinds.count("send") == kinds.count("pack") == len(outgoing)
    assert kinds.count("recv") == len(plan.incoming)
    assert all(r.done for r in records), [r for r in records if not r.done]
    parts = [r for r in records if r.kind == "part"]
    assert len(parts) == len(partition.parts)
    for w in records:
        if w.kind == "wait" and w.name == "wait for messages":
            for p in parts:
                if p.posted_ns < w.started_ns:
                    assert p.started_ns <= w.started_ns, (p.name, w.name)
    # bad input in the steady state: the typed error of the full call
    from pytato_like.diagnostic import InputShapeMismatchError, RemoteRankError
    bad = dict(inputs, u0=inputs["u0"][:-1])
    try:
        pt.execute_distributed_partition(partition, prgs, queue, comm,
                                         input_args=bad)
    except (InputShapeMismatchError, RemoteRankError) as exc:
        assert "u0" in str(exc) or "rank" in str(exc), exc
    else:
        raise AssertionError("a wrong input shape was not refused")
    print(f"OK fast_parts rank {rank}", flush=True)


if __name__ == "__main__":
    with abort_on_error(MPI.COMM_WORLD):
        main()
