"""Host cost of calling a loopy part program, as the distributed executor
does in its steady state, against the bare cost of launching its kernels.

The programs: the parts of examples/distributed_heat.py's partitioned DAG
(4 fields of 10^5 float64 cells, 8 explicit steps, one-cell halos every
step -- ``halo 1``, 17 parts of 1 to 3 kernels: interiors of 4 x 10^5
cells, boundaries of a few cells from 12 to 24 inputs -- or 8 cells every
8 steps, ``halo 8``), partitioned for one rank
(:class:`~pytato_like.distributed.safety.SingleRankCommunicator`), so each
rank sends its halos to itself. One process, no MPI: the parts run in
dependency order, each called as the executor calls it --
:meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram.__call__` (``placed_outputs``)
with its sent outputs placed in sub-buffers of one pre-allocated buffer,
``out_host=False``, inputs on the device (earlier parts' outputs; a
received value is the array its send computed), ``allocator`` the memory
pool of :func:`~pytato_like.runtime.pool.get_buffer_pool` -- and the
values of one execution stay alive until its end. Every execution's
result is checked against serial NumPy.

Per part call (median over executions after the first two, which compile
and record): the host time and the CPU time of the call, and the *floor*:
the same kernels enqueued directly with ``pyopencl.enqueue_nd_range_kernel``
(arguments set once, each launch waiting for the previous one, as the
program's launches do) -- what PoCL itself costs. Everything above the
floor is the program call's own. Kernels of earlier parts are still
running while a part is called, as in the executor: PoCL's threads
compete with the calling thread for the cores (with the device idle
before each call, the enqueues cost more: PoCL wakes its threads). The
machine may be shared: the figures are ratios within one run, with the
load average printed.

Run: ``.venv/bin/python -m bench.bench_part_call [--executions 200]
[--halo 1] [--profile]`` (``--profile`` prints cProfile's top functions of
the steady calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIELDS = 4
CELLS = 100_000
STEPS = 8


def _heat_module():
    sys.path.insert(0, str(ROOT / "examples"))
    import distributed_heat
    return distributed_heat


class _Parts:
    """The partition of the heat DAG for one rank, its part programs and
    what an execution needs (placed outputs, received values)."""

    def __init__(self, queue: Any, halo: int) -> None:
        import pyopencl as cl
        import pyopencl.array as cla

        import pytato_like as pt
        from pytato_like.runtime.pool import get_buffer_pool
        heat = self.heat = _heat_module()
        dag = heat.build_heat_dag(0, 1, CELLS, FIELDS, STEPS, halo=halo)
        partition = pt.find_distributed_partition(None, dag)
        partition, _ = pt.number_distributed_tags(None, partition,
                                                  base_tag=100)
        self.partition = partition
        self.prgs = pt.generate_code_for_partition(partition, target="loopy")
        self.queue = queue
        self.pool = get_buffer_pool(queue).memory_pool
        self.inputs = {f"u{f}": heat.initial_field(CELLS, f)
                       for f in range(FIELDS)}
        self.device_inputs = {name: cla.to_device(queue, value,
                                                  allocator=self.pool)
                              for name, value in self.inputs.items()}
        # a received value is what its send computed (a rank sending to
        # itself): recv name -> sent name
        sent = {}
        for part in partition.parts.values():
            for name, sends in part.name_to_send_nodes.items():
                for send in sends:
                    sent[send.dest_rank, send.comm_tag] = name
        self.received = {
            name: sent[recv.src_rank, recv.comm_tag]
            for part in partition.parts.values()
            for name, recv in part.name_to_recv_node.items()}
        # sent outputs computed into sub-buffers of one buffer per part,
        # as the executor's padded messages are
        align = max(queue.device.mem_base_addr_align // 8, 1)
        self.placed: dict[Any, dict[str, Any]] = {}
        for pid, part in partition.parts.items():
            names = sorted(part.name_to_send_nodes)
            if not names:
                continue
            ph = self.prgs[pid].plan
            specs = [ph.buffers[ph.outputs[n]] for n in names]
            sizes = [int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize
                     for s in specs]
            pitch = -(-max(sizes) // align) * align
            parent = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE,
                               pitch * len(names))
            self.placed[pid] = {
                n: cla.Array(queue, tuple(s.shape), s.dtype,
                             data=parent.get_sub_region(i * pitch, nbytes))
                for i, (n, s, nbytes) in enumerate(zip(names, specs, sizes,
                                                       strict=True))}
        self.order = self._order()

    def _order(self) -> list[Any]:
        """An order in which every part's inputs exist before it runs."""
        parts = self.partition.parts
        done: set[Any] = set()
        have = set(self.inputs)
        order = []
        while len(order) < len(parts):
            for pid in sorted(parts, key=repr):
                part = parts[pid]
                if pid not in done and part.needed_pids <= done and all(
                        name in have or name not in self.received
                        for name in part.all_input_names()):
                    order.append(pid)
                    done.add(pid)
                    have |= part.output_names
                    have |= {r for r, s in self.received.items()
                             if s in part.output_names}
                    break
            else:
                raise RuntimeError("no runnable part")
        return order

    def execute(self, times: dict[Any, list[tuple[int, int]]] | None
                ) -> dict[str, Any]:
        """One execution: every part called as the executor calls it;
        per part, its call's (host ns, CPU ns) appended to *times*."""
        values: dict[str, Any] = dict(self.device_inputs)
        queue, pool = self.queue, self.pool
        perf, cpu = time.perf_counter_ns, time.thread_time_ns
        for pid in self.order:
            part = self.partition.parts[pid]
            for name in part.name_to_recv_node:
                values[name] = values[self.received[name]]
            kwargs = {name: values[name] for name in part.all_input_names()}
            prg = self.prgs[pid]
            placed = self.placed.get(pid, {})
            t0, c0 = perf(), cpu()
            _evt, outputs = prg(queue, placed_outputs=placed, allocator=pool,
                                out_host=False, **kwargs)
            t1, c1 = perf(), cpu()
            if times is not None:
                times[pid].append((t1 - t0, c1 - c0))
            values.update(outputs)
        queue.finish()
        return values

    def check(self, values: dict[str, Any]) -> float:
        """The largest difference from serial NumPy over the fields."""
        return max(float(np.max(np.abs(
            values[f"u{f}"].get() - self.heat.serial_heat(self.inputs[f"u{f}"],
                                                          STEPS))))
            for f in range(FIELDS))


class _Floor:
    """Part *pid*'s kernels enqueued directly: the launches a call made,
    captured from loopy's launchers, replayed with their arguments as
    last set."""

    def __init__(self, parts: _Parts, pid: Any) -> None:
        import pyopencl as cl
        import pyopencl.array as cla
        self.launches: list[tuple[Any, Any, Any]] = []
        prg = parts.prgs[pid]
        from pytato_like.target.loopy.bound import build_kernel
        hosts = {build_kernel(parts.queue.context, k)[1]
                 for k in prg.plan.kernels}
        launches = self.launches

        class Capture:
            def __getattr__(self, name: str) -> Any:
                return getattr(cl, name)

            @staticmethod
            def enqueue_nd_range_kernel(queue, knl, gsize, lsize, *args):
                launches.append((knl, gsize, lsize))
                return cl.enqueue_nd_range_kernel(queue, knl, gsize, lsize,
                                                  *args)

        saved = {}
        for host in hosts:
            saved[host] = host.__globals__["_lpy_cl"]
            host.__globals__["_lpy_cl"] = Capture()
        try:
            # any values of the right layout do (the kernels' cost only)
            kwargs = {name: cla.zeros(parts.queue, ph.shape, ph.dtype,
                                      allocator=parts.pool)
                      for name, ph in prg.inputs.placeholders.items()}
            prg.__dict__.pop("_replays", None)      # a full call: all launches
            prg(parts.queue, allocator=parts.pool, out_host=False, **kwargs)
        finally:
            for host, value in saved.items():
                host.__globals__["_lpy_cl"] = value
        prg.__dict__.pop("_replays", None)
        parts.queue.finish()

    def run(self, queue: Any) -> Any:
        import pyopencl as cl
        enqueue = cl.enqueue_nd_range_kernel
        wait_for = None
        evt = None
        for knl, gsize, lsize in self.launches:
            evt = enqueue(queue, knl, gsize, lsize, None, wait_for, True, True)
            wait_for = [evt]
        return evt


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def measure(executions: int, halo: int, profile: bool = False) -> dict:
    import pyopencl as cl
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    parts = _Parts(queue, halo)
    # the floors first (their full calls record nothing that stays)
    floors = {pid: _Floor(parts, pid) for pid in parts.order}
    errors = [parts.check(parts.execute(None)) for _ in range(2)]
    times: dict[Any, list[tuple[int, int]]] = {pid: [] for pid in parts.order}
    floor_ns: dict[Any, list[int]] = {pid: [] for pid in parts.order}
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile()
    perf = time.perf_counter_ns
    for i in range(executions):
        if profiler is not None:
            profiler.enable()
        values = parts.execute(times)
        if profiler is not None:
            profiler.disable()
        if i % 50 == 0:
            errors.append(parts.check(values))
        del values
        for pid in parts.order:
            t0 = perf()
            floors[pid].run(queue)
            floor_ns[pid].append(perf() - t0)
        queue.finish()
    if profiler is not None:
        import pstats
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    per_part = []
    for pid in parts.order:
        prg = parts.prgs[pid]
        host = [t for t, _ in times[pid]]
        cpu_ns = [c for _, c in times[pid]]
        per_part.append({
            "pid": pid, "launches": len(floors[pid].launches),
            "inputs": len(prg.inputs.placeholders),
            "outputs": len(prg.plan.outputs),
            "placed": len(parts.placed.get(pid, ())),
            "host_us": _median_us(host), "cpu_us": _median_us(cpu_ns),
            "floor_us": _median_us(floor_ns[pid])})
    n = len(per_part)
    return {
        "halo": halo, "parts": n, "executions": executions,
        "host_us": sum(p["host_us"] for p in per_part) / n,
        "cpu_us": sum(p["cpu_us"] for p in per_part) / n,
        "floor_us": sum(p["floor_us"] for p in per_part) / n,
        "launches": sum(p["launches"] for p in per_part) / n,
        "max_error": max(errors), "per_part": per_part,
        "loadavg": os.getloadavg()}


def report(result: dict, detail: bool) -> None:
    print(f"halo {result['halo']}: {result['parts']} parts, "
          f"{result['launches']:.2f} launches per part, "
          f"{result['executions']} executions; max |error| vs NumPy "
          f"{result['max_error']:.1e}; load average "
          + " ".join(f"{x:.2f}" for x in result["loadavg"]))
    if detail:
        print(f"{'part':>6}{'launches':>10}{'inputs':>8}{'outputs':>8}"
              f"{'placed':>8}{'host us':>10}{'cpu us':>10}{'floor us':>10}"
              f"{'host/floor':>12}")
        for p in result["per_part"]:
            print(f"{p['pid']!s:>6}{p['launches']:>10}{p['inputs']:>8}"
                  f"{p['outputs']:>8}{p['placed']:>8}{p['host_us']:>10.1f}"
                  f"{p['cpu_us']:>10.1f}{p['floor_us']:>10.1f}"
                  f"{p['host_us'] / p['floor_us']:>12.2f}")
    print(f"mean per part call: host {result['host_us']:.1f} us, CPU "
          f"{result['cpu_us']:.1f} us, floor {result['floor_us']:.1f} us "
          f"(host/floor {result['host_us'] / result['floor_us']:.2f}, "
          f"over the floor {result['host_us'] - result['floor_us']:.1f} us)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--halo", type=int, action="append",
                        help="halo width(s) (default: 1 and 8)")
    parser.add_argument("--detail", action="store_true",
                        help="a line per part")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    for halo in args.halo or (1, 8):
        report(measure(args.executions, halo, args.profile), args.detail)


if __name__ == "__main__":
    main()
