"""Distributed benchmark: halo-exchanging heat steps on 2 MPI ranks.

A 1-D periodic domain split over 2 ranks, 4 fields of 10^5 cells each,
8 explicit steps unrolled into one DAG with one-cell halos exchanged every
step (the DAG of examples/distributed_heat.py). Reports partition time,
code generation time, first and steady execution time, parts, MPI messages
per run, and the ratio of steady execution to a serial NumPy run of the
whole domain; and the same with 16 steps, to show time is linear in the
number of steps.

``python -m bench.bench_distributed`` launches ``mpiexec -n 2`` itself
(``--worker`` is the per-rank entry point). ``--target numpy|loopy`` picks
the part programs (default: loopy when available).
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
FIELDS = 4
STEPS = (8, 16)
REPEATS = 5


def _measure(comm, n_steps: int, target: str | None) -> dict:
    import numpy as np

    import pytato_like as pt
    sys.path.insert(0, str(ROOT / "examples"))
    from distributed_heat import build_heat_dag, initial_field, serial_heat

    rank, size = comm.Get_rank(), comm.Get_size()
    n_local = CELLS // size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    inputs = {f"u{f}": initial_field(CELLS, f)[mine] for f in range(FIELDS)}

    comm.Barrier()
    t0 = time.perf_counter()
    dag = build_heat_dag(rank, size, n_local, FIELDS, n_steps)
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

    def run() -> tuple[float, dict]:
        stats: dict = {}
        comm.Barrier()
        start = time.perf_counter()
        result = pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args=inputs, stats=stats)
        if queue is not None:
            queue.finish()
        comm.Barrier()
        return time.perf_counter() - start, stats | {"result": result}

    first, stats = run()
    steady = statistics.median(run()[0] for _ in range(REPEATS))
    messages = comm.allreduce(stats["n_messages_sent"])
    result = {k: v.get() if hasattr(v, "queue") else v
              for k, v in stats["result"].items()}
    gathered = comm.gather(result, root=0)

    serial = None
    error = None
    if rank == 0:
        whole = [initial_field(CELLS, f) for f in range(FIELDS)]
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            expected = [serial_heat(u, n_steps) for u in whole]
            times.append(time.perf_counter() - start)
        serial = statistics.median(times)
        error = max(float(np.max(np.abs(
            np.concatenate([g[f"u{f}"] for g in gathered]) - expected[f])))
            for f in range(FIELDS))
    comm.Barrier()
    return {
        "steps": n_steps, "build_s": t1 - t0,
        "partition_s": comm.allreduce(t2 - t1, op=_max()),
        "codegen_s": comm.allreduce(t3 - t2, op=_max()),
        "first_exec_s": first, "steady_exec_s": steady,
        "parts_rank0": len(partition.parts) if rank == 0 else None,
        "messages_per_run": messages, "serial_numpy_s": serial,
        "max_error": error,
    }


def _max():
    from mpi4py import MPI
    return MPI.MAX


def worker(target: str | None) -> None:
    from mpi4py import MPI

    import pytato_like as pt
    from pytato_like.distributed import abort_on_error
    comm = MPI.COMM_WORLD
    if target is None:
        target = "loopy" if getattr(pt, "generate_loopy", None) else "numpy"
    with abort_on_error(comm):
        rows = [_measure(comm, n, target) for n in STEPS]
        if comm.Get_rank() == 0:
            print("BENCH_JSON " + json.dumps({"target": target, "rows": rows}),
                  flush=True)


def _mpiexec() -> str:
    candidate = Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("mpiexec not found next to Python or on PATH")
    return found


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--target", choices=["numpy", "loopy"], default=None)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.target)
        return {}

    cmd = [_mpiexec(), "-n", "2", sys.executable, "-m", "bench.bench_distributed",
           "--worker"] + (["--target", args.target] if args.target else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=900, stdin=subprocess.DEVNULL)
    line = next((ln for ln in proc.stdout.splitlines()
                 if ln.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"distributed benchmark failed:\n{proc.stdout}\n"
                           f"{proc.stderr}")
    data = json.loads(line[len("BENCH_JSON "):])
    rows = data["rows"]

    print(f"distributed heat: 2 ranks, {FIELDS} fields x {CELLS} cells, "
          f"part programs: {data['target']}")
    header = ("steps", "parts", "msgs/run", "partition s", "codegen s",
              "first s", "steady s", "serial np s", "steady/np", "max err")
    print("  ".join(f"{h:>11}" for h in header))
    for r in rows:
        r["steady_over_numpy"] = r["steady_exec_s"] / r["serial_numpy_s"]
        cells = (r["steps"], r["parts_rank0"], r["messages_per_run"],
                 f"{r['partition_s']:.3f}", f"{r['codegen_s']:.3f}",
                 f"{r['first_exec_s']:.4f}", f"{r['steady_exec_s']:.4f}",
                 f"{r['serial_numpy_s']:.4f}", f"{r['steady_over_numpy']:.2f}",
                 f"{r['max_error']:.1e}")
        print("  ".join(f"{c:>11}" for c in cells))
    a, b = rows
    scaling = b["steady_exec_s"] / a["steady_exec_s"]
    print(f"steady time {b['steps']} steps / {a['steps']} steps = {scaling:.2f} "
          f"(linear: {b['steps'] / a['steps']:.2f}); targets: steady/np <= 3, "
          "partition + codegen < 2 s")
    return {"target": data["target"], "rows": rows,
            "steady_scaling_16_over_8": scaling}


if __name__ == "__main__":
    main()
