"""Distributed benchmark: the halo-exchanging heat solver on 2 MPI ranks.

The solver of examples/distributed_heat.py: a 1-D periodic domain split
over 2 ranks, 4 fields, S explicit steps unrolled into one DAG with
one-cell halos exchanged every step (``halo 1``) -- and, for comparison, 8
cells exchanged every 8 steps (``halo 8``: each rank recomputes a few
cells for 8 times fewer messages and parts) -- loopy part programs on each
rank's OpenCL device. For 10^5 and 10^6 cells per rank and 8 and 32 steps it
reports (steady times are medians of repeated runs after a few warm-up
runs, the first of which compiles kernels):

* the steady time of one distributed execution on 2 ranks (the slower
  rank's time, every run started after a barrier; each rank's fields
  already on its device, as a solver keeps them between calls);
* a serial NumPy run of the whole domain (``np.roll`` stencil; NumPy at
  its best: the fastest of 5 runs with the allocator keeping freed
  memory, see ``distributed_heat.serial_numpy_seconds``), and
  pytato_like in one process on the whole domain (the same steps as one
  loopy program, inputs already on the device, all cores), both measured
  by this process before the ranks start -- the same 2 cores do the work;
* the executor's own host time per part (the slower rank's mean over the
  parts of one execution), by kind: ``enqueue`` (calling the part
  program, outside OpenCL's launch calls: argument checks, buffers),
  ``pack`` (packing a part's outgoing messages), ``post`` (starting the
  MPI sends), ``poll`` (non-blocking checks for arrivals) and ``unpack``,
  summed in ``total``; and, apart, ``launch``: the time inside OpenCL's
  launch calls -- with one device thread per rank the ranks run PoCL's
  ``basic`` driver (see :mod:`pytato_like.distributed.threads`), which runs
  the kernels inside those calls, so ``launch`` is then mostly the
  kernels' own run time; from
  :attr:`~pytato_like.distributed.execute.DistributedExecution.stats`.
  Blocking waits for messages are not overhead: they are reported as the
  share of time waiting.

``python -m bench.bench_distributed`` launches ``mpiexec -n 2`` itself
(``--worker`` is the per-rank entry point); ``--quick`` runs only 10^5
cells and 8 steps; ``--trace PATH`` writes the merged Chrome/Perfetto trace
of one steady run of the first case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench._launch import RESULT_PREFIX, ROOT, run_mpi_worker
FIELDS = 4
#: (cells per rank, steps, halo width)
CASES = tuple((cells, steps, halo) for cells in (100_000, 1_000_000)
              for steps in (8, 32) for halo in (1, 8))
REPEATS = 11
#: runs before the timed ones (the one-process figure takes as many): the
#: first compiles; the next few still pay for first touches (the memory
#: pool filling, replays recorded) -- 6.3, 4.5, 4.2 ms before a steady
#: 3.9-4.0 ms on 10^5 cells, 32 steps. With 3, the first case of a run
#: (10^5 cells, 8 steps) was still 0.1-0.25 ms slower than the same case
#: measured again at the end of the run; with 6 the two agree.
WARMUP = 6
OVERHEAD_KINDS = ("enqueue", "pack", "post", "poll", "unpack")
#: the time inside OpenCL's launch calls (printed beside the overhead: with
#: the inline driver, the kernels run there)
LAUNCH_KIND = "launch"


def _heat_module():
    sys.path.insert(0, str(ROOT / "examples"))
    import distributed_heat
    return distributed_heat


# {{{ one process: serial NumPy and pytato_like on the whole domain

def serial_numpy_s(n_total: int, n_steps: int) -> float:
    return _heat_module().serial_numpy_seconds(n_total, FIELDS, n_steps)


def one_process_s(n_total: int, n_steps: int) -> float:
    """pytato_like on the whole domain in this process (see
    ``distributed_heat.one_process_seconds``)."""
    return _heat_module().one_process_seconds(n_total, FIELDS, n_steps,
                                              REPEATS, WARMUP)

# }}}


# {{{ the ranks

def _measure(comm, n_local: int, n_steps: int, halo: int,
             trace_path: str | None) -> dict:
    import pyopencl as cl
    import pyopencl.array as cla
    from mpi4py import MPI

    import pytato_like as pt
    from pytato_like.runtime.trace import gather_traces
    heat = _heat_module()
    rank, size = comm.Get_rank(), comm.Get_size()
    n_total = n_local * size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    inputs = {f"u{f}": heat.initial_field(n_total, f)[mine]
              for f in range(FIELDS)}
    dag = heat.build_heat_dag(rank, size, n_local, FIELDS, n_steps,
                              halo=halo)
    t0 = time.perf_counter()
    partition = pt.find_distributed_partition(comm, dag)
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=100)
    prgs = pt.generate_code_for_partition(partition, target="loopy")
    setup = time.perf_counter() - t0
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    # on the device already, as for the one-process figure
    inputs = {name: cla.to_device(queue, value)
              for name, value in inputs.items()}

    def run():
        comm.Barrier()
        start = time.perf_counter()
        handle = pt.execute_distributed_partition_async(
            partition, prgs, queue, comm, input_args=inputs)
        out = handle.wait()
        queue.finish()
        return comm.allreduce(time.perf_counter() - start, op=MPI.MAX), \
            handle, out

    first, _, _ = run()
    for _ in range(WARMUP - 1):
        run()
    times, handle, out = [], None, None
    for _ in range(REPEATS):
        t, handle, out = run()
        times.append(t)
    stats = handle.stats
    n_parts = len(partition.parts)
    ns = stats["overhead_ns"]
    per_part = {
        "enqueue": ns.get("enqueue", 0),
        "pack": ns.get("pack", 0),
        "post": ns.get("post", 0),
        "poll": ns.get("poll", 0),
        "unpack": ns.get("unpack", 0),
    }
    launch = comm.allreduce(ns.get(LAUNCH_KIND, 0) / n_parts / 1e3,
                            op=MPI.MAX)
    per_part = {k: comm.allreduce(v / n_parts / 1e3, op=MPI.MAX)
                for k, v in per_part.items()}
    records = handle.fetch_trace()
    span = (max(r.completed_ns for r in records)
            - min(r.posted_ns for r in records))
    waiting = sum(r.duration_ns for r in records if r.kind == "wait") / span
    if trace_path:
        merged = gather_traces(comm, handle.trace())
        if rank == 0:
            merged.write_json(trace_path)

    # check against serial NumPy (rank 0 gathers)
    got = comm.gather({k: v.get() if hasattr(v, "queue") else v
                       for k, v in out.items()}, root=0)
    error = None
    if rank == 0:
        import numpy as np
        error = max(float(np.max(np.abs(
            np.concatenate([g[f"u{f}"] for g in got])
            - heat.serial_heat(heat.initial_field(n_total, f), n_steps))))
            for f in range(FIELDS))
    return {"cells_per_rank": n_local, "steps": n_steps, "halo": halo,
            "parts": n_parts,
            "setup_s": comm.allreduce(setup, op=MPI.MAX),
            "first_s": first, "steady_s": statistics.median(times),
            "overhead_us_per_part": per_part,
            "launch_us_per_part": launch,
            "device": queue.device.name,
            "wait_share": comm.allreduce(waiting, op=MPI.MAX),
            "messages_per_run": stats["n_messages_sent"],
            "max_error": error}


def worker(cases, trace_path: str | None) -> None:
    from mpi4py import MPI

    from pytato_like.distributed import abort_on_error
    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        rows = [_measure(comm, n, s, h, trace_path if i == 0 else None)
                for i, (n, s, h) in enumerate(cases)]
        if comm.Get_rank() == 0:
            print(RESULT_PREFIX + json.dumps(rows), flush=True)

# }}}


def run_ranks(cases, trace: str | None = None) -> list[dict]:
    """Launch the 2-rank measurement of *cases*; one row per case."""
    args = ["--cases", json.dumps([list(c) for c in cases])]
    if trace:
        args += ["--trace", str(Path(trace).resolve())]
    return run_mpi_worker(2, "bench.bench_distributed", args,
                          "distributed benchmark")


def format_table(rows: list[dict]) -> str:
    header = ("cells/rank", "steps", "halo", "parts", "2 ranks s", "NumPy s",
              "1 proc s", "vs NumPy", "vs 1 proc", "wait %",
              *(f"{k} us" for k in OVERHEAD_KINDS), "total us",
              "launch us")
    lines = ["  ".join(f"{h:>10}" for h in header)]
    for r in rows:
        over = r["overhead_us_per_part"]
        cells = (r["cells_per_rank"], r["steps"], r["halo"], r["parts"],
                 f"{r['steady_s']:.4f}", f"{r['serial_numpy_s']:.4f}",
                 f"{r['one_process_s']:.4f}",
                 f"{r['serial_numpy_s'] / r['steady_s']:.2f}x",
                 f"{r['one_process_s'] / r['steady_s']:.2f}x",
                 f"{100 * r['wait_share']:.0f}",
                 *(f"{over[k]:.0f}" for k in OVERHEAD_KINDS),
                 f"{sum(over.values()):.0f}",
                 f"{r.get('launch_us_per_part', 0):.0f}")
        lines.append("  ".join(f"{c:>10}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--cases", default=None,
                        help="JSON list of [cells per rank, steps, halo]")
    parser.add_argument("--quick", action="store_true",
                        help="only 10^5 cells per rank, 8 steps (both halos)")
    parser.add_argument("--trace", default=None,
                        help="write the trace of one steady run (JSON)")
    args = parser.parse_args(argv)
    cases = [tuple(c) for c in json.loads(args.cases)] if args.cases else \
        list(CASES[:2] if args.quick else CASES)
    if args.worker:
        worker(cases, args.trace)
        return {}
    # one process first, on an idle machine (the ranks are not started
    # yet); pytato_like before NumPy, which changes this process's
    # allocator settings (the ranks keep the defaults, as this one then)
    sizes = list(dict.fromkeys(c[:2] for c in cases))
    one = {c: one_process_s(2 * c[0], c[1]) for c in sizes}
    single = {c: (serial_numpy_s(2 * c[0], c[1]), one[c]) for c in sizes}
    rows = run_ranks(cases, args.trace)
    for r in rows:
        r["serial_numpy_s"], r["one_process_s"] = single[
            (r["cells_per_rank"], r["steps"])]
    print(f"distributed heat solver, 2 ranks, {FIELDS} fields, loopy part "
          "programs; steady times (median of "
          f"{REPEATS} after {WARMUP} warm-up runs); executor overhead per "
          "part (us, slower rank)")
    print(format_table(rows))
    print("device of the ranks: " + ", ".join(sorted({r["device"] for r in rows})))
    print("max |2 ranks - serial NumPy|: "
          + ", ".join(f"{r['max_error']:.1e}" for r in rows))
    return {"ranks": 2, "fields": FIELDS, "rows": rows}


if __name__ == "__main__":
    main()

# vim: foldmethod=marker
