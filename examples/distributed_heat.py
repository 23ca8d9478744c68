"""1-D periodic heat equation on a block-decomposed grid, over MPI.

Run with ``mpiexec -n 3 python examples/distributed_heat.py [--cells N]
[--steps S] [--fields F] [--trace trace.json]``.

Each rank owns ``N`` consecutive cells of a periodic domain of ``N * ranks``
cells and ``F`` independent fields on it. Every explicit step exchanges
one-cell halos with both neighbours (``staple_distributed_send`` of the
boundary cells, ``make_distributed_recv`` of the neighbours'), and all steps
are unrolled into one lazy DAG, which is partitioned, verified, compiled and
executed: all halos a part sends to one neighbour travel as one packed
message. Later executions (``--runs``, default 1) are started
asynchronously and their traces (every message and part, timestamped) are
gathered on rank 0; ``--trace`` writes them as Chrome/Perfetto JSON and
prints the summary table, ``--save-partition`` pickles rank 0's partition
(draw both with ``get_dot_graph_from_partition(partition, trace=...)``, as
examples/distributed_profile.ipynb does). Rank 0
compares the result with a serial NumPy run of the whole domain, printing
the error and timings; the exit status is non-zero if they disagree.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like.distributed import abort_on_error
from pytato_like.runtime.trace import TraceRecorder, gather_traces
from pytato_like.tags import ImplStored

COURANT = 0.25  # dt * kappa / dx**2, stable for <= 0.5


def initial_field(n_total: int, field: int) -> np.ndarray:
    """A smooth periodic profile plus a bump, different for each field."""
    x = np.arange(n_total) / n_total
    return np.sin(2 * np.pi * (field + 1) * x) + np.exp(-200 * (x - 0.3) ** 2)


def build_heat_dag(rank: int, size: int, n_local: int, n_fields: int,
                   n_steps: int, split: bool = False, halo: int = 1
                   ) -> pt.DictOfNamedArrays:
    """This rank's part of the unrolled computation: result ``u<f>`` for
    each field *f*, from placeholders ``u<f>``.

    Each step is written as a whole: one stencil over the field extended
    by the neighbours' halos. Only its two end cells read the halos, and
    the partitioner sees that: it computes the cells that no halo of any
    step reaches for all steps at once, before the first halo arrives, and
    each step's part computes a few boundary cells per field and sends
    (:mod:`pytato_like.distributed.overlap`). With *split* (needs
    ``n_local >= 4``) the DAG spells that split out by hand instead: each
    step computes the two boundary cells apart from the interior. Both
    compute the same values.

    With ``halo=k > 1`` (needs ``n_local >= k``), ranks exchange *k* cells
    each way every *k* steps and each rank computes the *k* steps on its
    halo-extended field, which shrinks by one cell per side and step: a
    few cells computed twice for *k* times fewer messages and parts (the
    same values again, to the bit)."""
    if halo > 1:
        return _deep_halo_dag(rank, size, n_local, n_fields, n_steps, halo)
    if split and n_local < 4:
        raise ValueError(f"split steps need at least 4 cells per rank, "
                         f"not {n_local}")
    if split:
        return _hand_split_dag(rank, size, n_local, n_fields, n_steps)
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n_local,))
        for step in range(n_steps):
            # send my boundary cells (the sends run when the DAG runs) ...
            u = pt.staple_distributed_send(u[:1], left, ("left", f, step), u)
            u = pt.staple_distributed_send(u[-1:], right, ("right", f, step),
                                           u)
            # ... and receive the neighbours' (what they sent "right"/"left")
            ghost_l = pt.make_distributed_recv(left, ("right", f, step), (1,))
            ghost_r = pt.make_distributed_recv(right, ("left", f, step), (1,))
            ext = pt.concatenate([ghost_l, u, ghost_r])
            u = u + COURANT * (ext[:-2] - 2 * u + ext[2:])
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def _hand_split_dag(rank: int, size: int, n_local: int, n_fields: int,
                    n_steps: int) -> pt.DictOfNamedArrays:
    """:func:`build_heat_dag` with each step's boundary cells computed
    apart from its interior, by hand."""
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n_local,))
        first, interior, last = u[:1], u[1:-1], u[-1:]
        for step in range(n_steps):
            held = pt.staple_distributed_send(first, left, ("left", f, step),
                                              first)
            held = pt.staple_distributed_send(last, right, ("right", f, step),
                                              held)
            ghost_l = pt.make_distributed_recv(left, ("right", f, step), (1,))
            ghost_r = pt.make_distributed_recv(right, ("left", f, step), (1,))
            # the interior's new values, stored: computed as soon as the
            # previous step is, while the halos travel (it does not need
            # them); its two end cells read the boundary cells, the rest
            # only the interior (one pass, no copy of the whole field)
            new_interior = pt.concatenate([
                interior[:1] + COURANT * (
                    held - 2 * interior[:1] + interior[1:2]),
                interior[1:-1] + COURANT * (
                    interior[:-2] - 2 * interior[1:-1] + interior[2:]),
                interior[-1:] + COURANT * (
                    interior[-2:-1] - 2 * interior[-1:] + last),
            ]).tagged(ImplStored())
            # the boundary cells from the pieces (never from the whole
            # array), so the sending part computes only them
            first = held + COURANT * (ghost_l - 2 * held + interior[:1])
            last = last + COURANT * (interior[-1:] - 2 * last + ghost_r)
            interior = new_interior
            u = pt.concatenate([first, interior, last])
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def _deep_halo_dag(rank: int, size: int, n_local: int, n_fields: int,
                   n_steps: int, halo: int) -> pt.DictOfNamedArrays:
    """:func:`build_heat_dag` with *halo* cells exchanged every *halo*
    steps."""
    if not 1 < halo <= n_local:
        raise ValueError(f"halo={halo} needs 1 < halo <= cells per rank "
                         f"({n_local})")
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n_local,))
        done = 0
        while done < n_steps:
            steps = min(halo, n_steps - done)
            tag = (f, done)
            u = pt.staple_distributed_send(u[:halo], left, ("left", tag), u)
            u = pt.staple_distributed_send(u[-halo:], right, ("right", tag), u)
            ghost_l = pt.make_distributed_recv(left, ("right", tag), (halo,))
            ghost_r = pt.make_distributed_recv(right, ("left", tag), (halo,))
            ext = pt.concatenate([ghost_l, u, ghost_r]).tagged(ImplStored())
            for _ in range(steps):
                # one step on the cells whose neighbours are known
                ext = (ext[1:-1] + COURANT * (ext[:-2] - 2 * ext[1:-1]
                                              + ext[2:])).tagged(ImplStored())
            u = ext[halo - steps:halo - steps + n_local]
            done += steps
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def serial_heat(u: np.ndarray, n_steps: int) -> np.ndarray:
    """The same steps on the whole periodic domain with NumPy."""
    for _ in range(n_steps):
        u = u + COURANT * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def one_process_seconds(n_total: int, n_fields: int, n_steps: int,
                        repeats: int = 5, warmup: int = 1) -> float:
    """pytato_like in one process on the whole domain (no MPI): the same
    steps as one loopy program, inputs already on the device; the median
    steady time of *repeats* runs after *warmup* and the compile (a
    first call runs on the host while the program compiles)."""
    import statistics

    import pyopencl as cl
    import pyopencl.array as cla
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n_total,))
        for _ in range(n_steps):
            u = u + COURANT * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
        outputs[f"u{f}"] = u
    prg = pt.generate_loopy(pt.make_dict_of_named_arrays(outputs))
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    inputs = {f"u{f}": cla.to_device(queue, initial_field(n_total, f))
              for f in range(n_fields)}

    def run() -> float:
        start = time.perf_counter()
        prg(queue, **inputs)
        queue.finish()
        return time.perf_counter() - start

    for _ in range(warmup):
        run()
    if not prg.compiled():
        run()  # (a first call ran on the host while the program compiled)
    return statistics.median(run() for _ in range(repeats))


def _keep_freed_memory() -> None:
    """Let the C library's allocator keep freed memory for the next
    allocation (glibc ``mallopt``: no ``mmap`` per large block, no
    trimming), as a NumPy user tuning for speed would; elsewhere nothing."""
    import ctypes
    import sys
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 1 << 30)
        libc.mallopt(m_trim_threshold, (1 << 31) - 1)
    except (OSError, AttributeError):
        pass


def serial_numpy_seconds(n_total: int, n_fields: int, n_steps: int,
                         repeats: int = 5) -> float:
    """The fastest of *repeats* runs of :func:`serial_heat` on every field,
    after one run not counted, NumPy at its best: with glibc's default
    allocator settings each step's temporaries (800 KB at 10^5 cells) may
    come from fresh pages of the operating system and the same steps take
    up to 3x longer (24 ms instead of 8 ms for the demo's sizes), so this
    first tells the allocator to keep freed memory (for the rest of the
    process)."""
    _keep_freed_memory()
    whole = [initial_field(n_total, f) for f in range(n_fields)]
    for u in whole:
        serial_heat(u, n_steps)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for u in whole:
            serial_heat(u, n_steps)
        times.append(time.perf_counter() - start)
    return min(times)


def solve(comm, n_local: int, n_fields: int, n_steps: int,
          target: str | None = None, trace_path: str | None = None,
          runs: int = 1, partition_path: str | None = None,
          halo: int = 1) -> dict:
    """Run the distributed solver; returns (on every rank) figures and, on
    rank 0, the maximum error against the serial NumPy run."""
    rank, size = comm.Get_rank(), comm.Get_size()
    n_total = n_local * size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    inputs = {f"u{f}": initial_field(n_total, f)[mine] for f in range(n_fields)}

    t0 = time.perf_counter()
    dag = build_heat_dag(rank, size, n_local, n_fields, n_steps, halo=halo)
    t1 = time.perf_counter()
    partition = pt.find_distributed_partition(comm, dag)
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=100)
    pt.verify_distributed_partition(comm, partition)
    t2 = time.perf_counter()
    prgs = pt.generate_code_for_partition(partition, target=target)
    t3 = time.perf_counter()
    queue = None
    if target in (None, "loopy") and getattr(pt, "generate_loopy", None):
        import pyopencl as cl
        import pyopencl.array as cla
        queue = cl.CommandQueue(cl.create_some_context(interactive=False))
        # a solver keeps its state on the device between calls (as the
        # one-process comparison does): no host copies in the timed runs
        inputs = {name: cla.to_device(queue, value)
                  for name, value in inputs.items()}
    stats: dict = {}
    result = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                              input_args=inputs, stats=stats)
    t_first = time.perf_counter()
    first_result = {k: v.get() if hasattr(v, "queue") else np.asarray(v)
                    for k, v in result.items()}
    # parts not compiled before run their first call on the host (NumPy)
    # while they compile: the next run waits for their kernels
    host_calls = sum(prg.replay_counts()["host"] for prg in prgs.values()
                     if hasattr(prg, "replay_counts"))
    if host_calls:
        result = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                                  input_args=inputs)
    t_compiled = time.perf_counter()
    # later runs show the steady cost (the first compiles kernels); they
    # are started asynchronously and waited for, keeping their traces
    recorder = TraceRecorder(rank)
    later = []
    for _ in range(max(runs, 1)):
        comm.Barrier()
        start = time.perf_counter()
        handle = pt.execute_distributed_partition_async(
            partition, prgs, queue, comm, input_args=inputs, recorder=recorder)
        result = handle.wait()
        if queue is not None:
            queue.finish()
        later.append(time.perf_counter() - start)
    # the slower rank's median
    execute_s = comm.allreduce(sorted(later)[len(later) // 2], op=MPI.MAX)
    messages = sum(r.kind == "send" for r in handle.fetch_trace())
    trace = gather_traces(comm, recorder)
    if partition_path and rank == 0:
        import pickle
        with open(partition_path, "wb") as f:
            pickle.dump(partition, f)
    if trace is not None and trace_path:
        trace.write_json(trace_path)
    result = {k: v.get() if hasattr(v, "queue") else np.asarray(v)
              for k, v in result.items()}

    # the first run's results are checked too
    gathered = comm.gather((result, first_result), root=0)
    figures = {
        "ranks": size, "cells": n_total, "fields": n_fields, "steps": n_steps,
        "parts": len(partition.parts),
        "messages_sent": stats["n_messages_sent"],
        "messages_in_trace": messages,
        "summary": None if trace is None else trace.format_summary(),
        "build_s": t1 - t0, "partition_s": t2 - t1, "codegen_s": t3 - t2,
        "execute_first_s": t_first - t3, "execute_s": execute_s,
        # from the first run's start to the end of the first compiled one
        "compiled_s": t_compiled - t3,
        "host_first_calls": comm.allreduce(host_calls),
        "target": "loopy" if queue is not None else "numpy",
    }
    if rank == 0:
        initial = [initial_field(n_total, f) for f in range(n_fields)]
        expected = [serial_heat(u, n_steps) for u in initial]
        figures["serial_numpy_s"] = serial_numpy_seconds(n_total, n_fields,
                                                         n_steps)
        figures["max_error"] = float(max(
            np.max(np.abs(np.concatenate([g[run][f"u{f}"] for g in gathered])
                          - expected[f]))
            for f in range(n_fields) for run in range(2)))
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=1000,
                        help="cells per rank (default 1000)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--fields", type=int, default=2)
    parser.add_argument("--target", choices=["numpy", "loopy"], default=None,
                        help="part programs (default: loopy if available)")
    parser.add_argument("--trace", default=None, metavar="PATH",
                        help="write the Chrome/Perfetto trace of the runs "
                             "after the first and print its summary")
    parser.add_argument("--runs", type=int, default=1,
                        help="traced runs after the first (default 1)")
    parser.add_argument("--save-partition", default=None, metavar="PATH",
                        help="pickle rank 0's partition (to draw it with "
                             "the trace)")
    parser.add_argument("--halo", type=int, default=1,
                        help="halo width: exchange this many cells every "
                             "this many steps (default 1)")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    figures = solve(comm, args.cells, args.fields, args.steps, args.target,
                    args.trace, args.runs, args.save_partition, args.halo)
    if comm.Get_rank() != 0:
        return 0
    ok = figures["max_error"] < 1e-10
    print(f"heat equation on {figures['ranks']} ranks: {figures['cells']} cells, "
          f"{figures['fields']} fields, {figures['steps']} steps")
    if args.halo > 1:
        print(f"  halos of {args.halo} cells, exchanged every {args.halo} steps")
    print(f"  part programs: {figures['target']}; parts on rank 0: "
          f"{figures['parts']}, messages sent by rank 0 per run: "
          f"{figures['messages_sent']} (trace: {figures['messages_in_trace']}; "
          "one per part and neighbour)")
    print(f"  build {figures['build_s']:.3f} s, partition+verify "
          f"{figures['partition_s']:.3f} s, codegen {figures['codegen_s']:.3f} s"
          + (" (lazy part programs: generated in the first run)"
             if figures["target"] == "loopy" else ""))
    if figures["host_first_calls"]:
        print(f"  execute: first run {figures['execute_first_s']:.3f} s (the "
              f"parts' first calls on the host while they compile), first "
              f"compiled run done {figures['compiled_s']:.3f} s after the "
              f"first run began (includes code generation and kernel "
              f"compilation)")
    else:
        print(f"  execute: first run {figures['execute_first_s']:.3f} s "
              f"(includes code generation and kernel compilation)")
    print(f"  later run {figures['execute_s']:.4f} s (median); "
          f"serial NumPy {figures['serial_numpy_s']:.3f} s")
    print(f"  max |distributed - serial NumPy| = {figures['max_error']:.2e} "
          f"-> {'OK' if ok else 'MISMATCH'}")
    if args.trace:
        print(f"  trace of {args.runs} run(s) after the first written to "
              f"{args.trace}:")
        print(figures["summary"])
    return 0 if ok else 1


if __name__ == "__main__":
    with abort_on_error(MPI.COMM_WORLD):
        status = main()
    sys.exit(status)
