"""Distributed benchmark: halo-exchanging heat steps on 2 MPI ranks.

A 1-D periodic domain split over 2 ranks, F fields, S explicit steps
unrolled into one DAG with one-cell halos exchanged every step (the DAG of
examples/distributed_heat.py). For 10^5 cells with 4 fields x 8 steps, 32
fields x 8 steps (many fields: packing matters most) and 4 fields x 16
steps (time linear in steps), and for 2 000 cells with 32 fields x 8 steps
(little compute: message latency shows), it reports partition and code
generation time, and per message mode:

* ``per_array`` -- one MPI message per array (the executor before packing);
* ``packed`` -- one message per (part, neighbour), persistent requests and
  preallocated buffers (with loopy part programs: packed on the ``host``
  after one device-host copy per array, or on the ``device`` with one copy
  per message);

the MPI messages per run *counted from the execution trace* (both ranks),
the first and steady (median, modes interleaved) execution time, the
steady time relative to ``per_array`` (median of the ratios within each
round of interleaved runs) and to a serial NumPy run of the whole domain, and the share of time spent waiting.

``python -m bench.bench_distributed`` launches ``mpiexec -n 2`` itself
(``--worker`` is the per-rank entry point). ``--target numpy|loopy|both``
picks the part programs (default both when loopy is available);
``--trace PATH`` writes the Chrome/Perfetto trace of one packed run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELLS = 100_000
SMALL_CELLS = 2_000
#: (cells, fields, steps): the issue's case, many fields, twice the steps,
#: and many fields on a small domain (latency-bound: packing matters most)
CASES = ((CELLS, 4, 8), (CELLS, 32, 8), (CELLS, 4, 16), (SMALL_CELLS, 32, 8))
REPEATS = 9


def _modes(target: str) -> list[tuple[str, str]]:
    if target == "loopy":
        return [("per_array", "host"), ("packed", "host"), ("packed", "device")]
    return [("per_array", "host"), ("packed", "host")]


def _label(mode: tuple[str, str], target: str) -> str:
    messages, pack_on = mode
    if messages == "per_array" or target == "numpy":
        return messages
    return f"packed/{pack_on}"


def _measure(comm, n_cells: int, n_fields: int, n_steps: int, target: str,
             trace_path: str | None) -> dict:
    import numpy as np

    import pytato_like as pt
    from pytato_like.runtime.trace import TraceRecorder, gather_traces
    sys.path.insert(0, str(ROOT / "examples"))
    from distributed_heat import build_heat_dag, initial_field, serial_heat

    rank, size = comm.Get_rank(), comm.Get_size()
    n_local = n_cells // size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    inputs = {f"u{f}": initial_field(n_cells, f)[mine] for f in range(n_fields)}

    comm.Barrier()
    t0 = time.perf_counter()
    dag = build_heat_dag(rank, size, n_local, n_fields, n_steps)
    t1 = time.perf_counter()
    partition = pt.find_distributed_partition(comm, dag)
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=100)
    pt.verify_distributed_partition(comm, partition)
    t2 = time.perf_counter()
    prgs = pt.generate_code_for_partition(partition, target=target)
    t3 = time.perf_counter()
    queue = None
    if target == "loopy":
        import pyopencl as cl
        queue = cl.CommandQueue(cl.create_some_context(interactive=False))

    def run(mode, wait=True, recorder=None):
        comm.Barrier()
        start = time.perf_counter()
        out = pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args=inputs, wait=wait,
            messages=mode[0], pack_on=mode[1], recorder=recorder)
        if not wait:
            handle, out = out, out.wait()
        if queue is not None:
            queue.finish()
        elapsed = time.perf_counter() - start
        comm.Barrier()
        return elapsed, (handle if not wait else out)

    modes = _modes(target)
    first = {m: run(m)[0] for m in modes}
    times: dict = {m: [] for m in modes}
    wait_shares: dict = {m: [] for m in modes}
    for _ in range(REPEATS):
        for m in modes:
            recorder = TraceRecorder(rank)
            times[m].append(run(m, recorder=recorder)[0])
            records = recorder.records
            span = (max(r.completed_ns for r in records)
                    - min(r.posted_ns for r in records))
            wait_shares[m].append(sum(r.duration_ns for r in records
                                      if r.kind == "wait") / span)

    per_mode = {}
    gathered_results = None
    for m in modes:
        # one more run, asynchronously, to count messages from its trace
        _, handle = run(m, wait=False)
        records = handle.fetch_trace()
        sends = sum(r.kind == "send" for r in records)
        result = {k: v.get() if hasattr(v, "queue") else v
                  for k, v in handle.wait().items()}
        # each round ran every mode back to back: compare within rounds,
        # so load changes on the shared machine cancel out
        ratios = [t / t0 for t, t0 in zip(times[m], times[modes[0]])]
        per_mode[_label(m, target)] = {
            "over_per_array": comm.allreduce(statistics.median(ratios),
                                             op=_max()),
            "first_exec_s": comm.allreduce(first[m], op=_max()),
            "steady_exec_s": comm.allreduce(statistics.median(times[m]),
                                            op=_max()),
            "messages_per_run": comm.allreduce(sends),
            "wait_share": comm.allreduce(statistics.median(wait_shares[m]),
                                         op=_max()),
        }
        if m == modes[-1]:
            gathered_results = comm.gather(result, root=0)
            if trace_path:
                merged = gather_traces(comm, handle.trace())
                if rank == 0:
                    merged.write_json(trace_path)

    serial = error = None
    if rank == 0:
        whole = [initial_field(n_cells, f) for f in range(n_fields)]
        serial_times = []
        for _ in range(3):
            start = time.perf_counter()
            expected = [serial_heat(u, n_steps) for u in whole]
            serial_times.append(time.perf_counter() - start)
        serial = statistics.median(serial_times)
        error = max(float(np.max(np.abs(
            np.concatenate([g[f"u{f}"] for g in gathered_results])
            - expected[f]))) for f in range(n_fields))
    comm.Barrier()
    return {
        "cells": n_cells, "fields": n_fields, "steps": n_steps,
        "build_s": t1 - t0,
        "partition_s": comm.allreduce(t2 - t1, op=_max()),
        "codegen_s": comm.allreduce(t3 - t2, op=_max()),
        "parts_rank0": len(partition.parts),
        "modes": per_mode, "serial_numpy_s": serial, "max_error": error,
    }


def _max():
    from mpi4py import MPI
    return MPI.MAX


def worker(targets: list[str], trace_path: str | None) -> None:
    from mpi4py import MPI

    from pytato_like.distributed import abort_on_error
    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        out = {}
        for target in targets:
            out[target] = [_measure(comm, c, f, s, target,
                                    trace_path if (c, f, s) == CASES[0]
                                    else None)
                           for c, f, s in CASES]
        if comm.Get_rank() == 0:
            print("BENCH_JSON " + json.dumps(out), flush=True)


def _mpiexec() -> str:
    candidate = Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("mpiexec not found next to Python or on PATH")
    return found


def _targets(choice: str | None) -> list[str]:
    import pytato_like as pt
    has_loopy = getattr(pt, "generate_loopy", None) is not None
    if choice in (None, "both"):
        return ["numpy", "loopy"] if has_loopy else ["numpy"]
    return [choice]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--target", choices=["numpy", "loopy", "both"],
                        default=None)
    parser.add_argument("--trace", default=None,
                        help="write the trace of one packed run (JSON)")
    args = parser.parse_args(argv)
    targets = _targets(args.target)
    if args.worker:
        worker(targets, args.trace)
        return {}

    cmd = [_mpiexec(), "-n", "2", sys.executable, "-m", "bench.bench_distributed",
           "--worker", "--target", ",".join(targets)]
    if len(targets) > 1:
        cmd[-1] = "both"
    if args.trace:
        cmd += ["--trace", str(Path(args.trace).resolve())]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=1800, stdin=subprocess.DEVNULL)
    line = next((ln for ln in proc.stdout.splitlines()
                 if ln.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"distributed benchmark failed:\n{proc.stdout}\n"
                           f"{proc.stderr}")
    data = json.loads(line[len("BENCH_JSON "):])

    figures: dict = {"ranks": 2, "targets": {}}
    for target, rows in data.items():
        print(f"\ndistributed heat, 2 ranks, part programs: {target}")
        header = ("cells", "fields", "steps", "mode", "msgs/run", "first s",
                  "steady s", "vs per_array", "vs serial np", "wait %",
                  "max err")
        print("  ".join(f"{h:>12}" for h in header))
        for r in rows:
            for label, m in r["modes"].items():
                m["steady_over_per_array"] = m["over_per_array"]
                m["steady_over_numpy"] = m["steady_exec_s"] / r["serial_numpy_s"]
                cells = (r["cells"], r["fields"], r["steps"], label,
                         m["messages_per_run"], f"{m['first_exec_s']:.4f}",
                         f"{m['steady_exec_s']:.4f}",
                         f"{m['steady_over_per_array']:.2f}",
                         f"{m['steady_over_numpy']:.2f}",
                         f"{100 * m['wait_share']:.0f}",
                         f"{r['max_error']:.1e}")
                print("  ".join(f"{c:>12}" for c in cells))
        print("  ".join(
            f"partition+verify {r['partition_s']:.3f} s, codegen "
            f"{r['codegen_s']:.3f} s ({r['fields']}x{r['steps']})"
            for r in rows[:2]))
        a = next(r for r in rows if r["steps"] == 8)
        b = next(r for r in rows if r["steps"] == 16)
        best = list(a["modes"])[-1]
        scaling = (b["modes"][best]["steady_exec_s"]
                   / a["modes"][best]["steady_exec_s"])
        print(f"{best}: steady time 16 steps / 8 steps = {scaling:.2f} "
              f"(linear: 2.00); parts per rank: {a['parts_rank0']} for 8 "
              "steps; target: one message per (part, neighbour) = steps x 2 "
              "ranks per run")
        figures["targets"][target] = {"rows": rows,
                                      "steady_scaling_16_over_8": scaling}
    return figures


if __name__ == "__main__":
    main()
