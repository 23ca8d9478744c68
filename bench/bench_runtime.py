"""Benchmarks of the communication runtime (pytato_like.runtime).

Figures are ratios measured within one run:

* halo pack (NumPy variant) vs eager NumPy (``np.concatenate`` of the
  sliced, rotated regions) and vs the copy-bandwidth floor (one contiguous
  ``np.copyto`` of the same number of bytes);
* halo pack on the OpenCL device vs the NumPy variant;
* one packed message vs one message per region (2 MPI ranks);
* Bufferizer append cost vs a bare slice assignment; trace-record cost;
* a message of device arrays: packed on the device and copied to the host
  once, versus copied to the host array by array and packed there (what
  ``execute_distributed_partition(..., pack_on=...)`` chooses between);
* a program on two PoCL devices: how long the host takes to enqueue it
  versus the time to the result, and the same program on one device.

Run: ``python -m bench.bench_runtime [--quick]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytato_like.runtime import (
    Bufferizer,
    HaloDataTransformer,
    HaloExchangeSpec,
    QuantityHaloSpec,
    TraceRecorder,
)


def best_of(fn, repeat: int = 7, number: int = 1) -> float:
    """Best wall time of *number* calls, over *repeat* tries (seconds per
    call)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def halo_specs(n: int, nz: int, h: int, n_quantities: int, turns: int):
    """Four edges of each of *n_quantities* (n+2h)^2 x nz quantities."""
    q = QuantityHaloSpec((n + 2 * h, n + 2 * h, nz), np.float64, n_halo=h)
    inner = slice(h, h + n)
    edges = [(slice(h, 2 * h), inner), (slice(n, n + h), inner),
             (inner, slice(h, 2 * h)), (inner, slice(n, n + h))]
    specs = []
    for _ in range(n_quantities):
        for ex, ey in edges:
            pack = (ex, ey, slice(None))
            spec = HaloExchangeSpec(q, pack, turns, pack)
            shape = spec.packed_shape
            specs.append(HaloExchangeSpec(
                q, pack, turns, tuple(slice(0, s) for s in shape)))
    return specs


def bench_halo(n: int, nz: int, repeat: int) -> dict:
    h, nq, turns = 3, 4, 1
    specs = halo_specs(n, nz, h, nq, turns)
    rng = np.random.default_rng(0)
    fields = [rng.standard_normal(specs[0].specification.shape)
              for _ in range(nq)]
    arrays = [fields[i // 4] for i in range(len(specs))]
    t = HaloDataTransformer.get(np, specs)
    nbytes = t.get_pack_buffer().nbytes

    def pack():
        t.async_pack(arrays)
        t.synchronize()

    def eager():
        np.concatenate([np.rot90(a[s.pack_slices], turns, axes=(1, 0)).ravel()
                        for a, s in zip(arrays, specs)])

    src = np.empty(nbytes // 8)
    dst = np.empty_like(src)
    figures = {
        "pack_bytes": nbytes,
        "n_regions": len(specs),
        "pack_s": best_of(pack, repeat),
        "eager_numpy_s": best_of(eager, repeat),
        "copy_floor_s": best_of(lambda: np.copyto(dst, src), repeat),
    }
    figures["pack_vs_eager"] = figures["eager_numpy_s"] / figures["pack_s"]
    figures["pack_fraction_of_copy_bw"] = (figures["copy_floor_s"]
                                           / figures["pack_s"])
    try:
        import pyopencl as cl
        import pyopencl.array as cla
        queue = cl.CommandQueue(
            cl.create_some_context(interactive=False),
            properties=cl.command_queue_properties.PROFILING_ENABLE)
        tc = HaloDataTransformer.get(queue, specs)
        dev_fields = [cla.to_device(queue, f) for f in fields]
        dev_arrays = [dev_fields[i // 4] for i in range(len(specs))]
        kernel_times = []

        def pack_cl():
            tc.async_pack(dev_arrays)
            evt = tc._events[-1]
            tc.synchronize()
            kernel_times.append((evt.profile.end - evt.profile.start) * 1e-9)

        pack_cl()   # first launch
        figures["pack_opencl_s"] = best_of(pack_cl, repeat)
        figures["pack_opencl_kernel_s"] = min(kernel_times)
        figures["opencl_vs_numpy_pack"] = (figures["pack_s"]
                                           / figures["pack_opencl_s"])
        figures["opencl_kernel_vs_numpy_pack"] = (
            figures["pack_s"] / figures["pack_opencl_kernel_s"])
        tc.finalize()
    except Exception as err:  # noqa: BLE001 -- report, keep the other figures
        figures["opencl_error"] = f"{type(err).__name__}: {err}"
    t.finalize()
    return figures


def _pingpong_worker(n_regions: int, region_elems: int, repeat: int) -> dict:
    """Run on 2 ranks: rank 0 sends *n_regions* regions to rank 1, which
    sends them back; one message per region vs one packed message."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    peer = 1 - comm.rank
    regions = [np.full(region_elems, float(i)) for i in range(n_regions)]
    recv = [np.empty_like(r) for r in regions]
    specs = [HaloExchangeSpec.whole_array(r.shape, r.dtype) for r in regions]
    t = HaloDataTransformer.get(np, specs)

    def send_separate():
        MPI.Request.Waitall([comm.Isend(r, dest=peer, tag=i)
                             for i, r in enumerate(regions)])

    def recv_separate():
        MPI.Request.Waitall([comm.Irecv(b, source=peer, tag=i)
                             for i, b in enumerate(recv)])

    def send_packed():
        t.async_pack(regions)
        comm.Send(t.get_pack_buffer(), dest=peer, tag=0)

    def recv_packed():
        comm.Recv(t.get_unpack_buffer(), source=peer, tag=0)
        t.unpacked_views()

    def round_trip(send, receive):
        def run():
            if comm.rank == 0:
                send()
                receive()
            else:
                receive()
                send()
        return run

    number = 50
    figures = {}
    for name, fn in (("separate_s", round_trip(send_separate, recv_separate)),
                     ("packed_s", round_trip(send_packed, recv_packed))):
        comm.Barrier()
        figures[name] = best_of(fn, repeat, number) / 2   # one way
    t.finalize()
    return figures


def bench_messages(n_regions: int, region_elems: int, repeat: int) -> dict:
    """Two MPI ranks (``mpiexec -n 2``): one packed message vs one message
    per region, per one-way trip (latency per message is what packing
    saves)."""
    import json
    import pathlib
    import subprocess
    import sys
    mpiexec = pathlib.Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        return {"mpi_error": "mpiexec not found next to the interpreter"}
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, "-m", "bench.bench_runtime",
         "--pingpong-worker", str(n_regions), str(region_elems), str(repeat)],
        capture_output=True, text=True, timeout=300,
        cwd=pathlib.Path(__file__).resolve().parent.parent)
    if proc.returncode:
        return {"mpi_error": proc.stderr.strip()[-300:]}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures.update(n_regions=n_regions, region_bytes=region_elems * 8)
    figures["packed_speedup"] = figures["separate_s"] / figures["packed_s"]
    return figures


def bench_device_staging(n_arrays: int, elems: int, repeat: int) -> dict:
    """What the distributed executor does with device arrays for one
    message, on this machine's OpenCL device: pack on the device (one
    kernel) and copy one buffer to the host, versus copying each array to
    the host and packing there; and the reverse for a received message
    (one upload + unpack kernel, versus one upload per array)."""
    import pyopencl as cl
    import pyopencl.array as cla
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    rng = np.random.default_rng(0)
    arrays = [cla.to_device(queue, rng.standard_normal(elems))
              for _ in range(n_arrays)]
    specs = [HaloExchangeSpec.whole_array((elems,), np.float64)
             for _ in range(n_arrays)]
    dev = HaloDataTransformer.get(queue, specs)
    host = HaloDataTransformer.get(np, specs)
    dev_buf = dev.get_pack_buffer()
    staging = np.empty(dev_buf.nbytes, np.uint8)
    dev_unpack = dev.get_unpack_buffer()
    received = host.get_unpack_buffer()
    received[...] = 1.0

    def send_device():
        dev.async_pack(arrays)
        cl.enqueue_copy(queue, staging, dev_buf.base_data,
                        src_offset=dev_buf.offset)

    def send_host():
        host.async_pack([a.get() for a in arrays])

    def recv_device():
        evt = cl.enqueue_copy(queue, dev_unpack.base_data, received,
                              dst_offset=dev_unpack.offset, is_blocking=False)
        dev_unpack.add_event(evt)
        out = [cla.empty(queue, (elems,), np.float64) for _ in range(n_arrays)]
        dev.async_unpack(out)
        dev.synchronize()

    def recv_host():
        [cla.to_device(queue, v) for v in host.unpacked_views()]
        queue.finish()

    for fn in (send_device, send_host, recv_device, recv_host):
        fn()    # build kernels, warm pools
    figures = {"n_arrays": n_arrays, "elems": elems,
               "send_device_s": best_of(send_device, repeat, 5),
               "send_host_s": best_of(send_host, repeat, 5),
               "recv_device_s": best_of(recv_device, repeat, 5),
               "recv_host_s": best_of(recv_host, repeat, 5)}
    figures["send_host_over_device"] = (figures["send_host_s"]
                                        / figures["send_device_s"])
    figures["recv_host_over_device"] = (figures["recv_host_s"]
                                        / figures["recv_device_s"])
    dev.finalize()
    host.finalize()
    return figures


_TWO_DEVICE_BENCH = r"""
import json, sys, time
import numpy as np
import pytato_like as pt
from pytato_like.runtime.devices import DeviceGroup
from pytato_like.runtime.placement import strip_device_transfers

n, repeat = int(sys.argv[1]), int(sys.argv[2])
x = pt.make_placeholder("x", (n,))
# two independent halves, the second on device 1, joined on device 0
a, b = pt.sin(x), pt.cos(pt.to_device(x, 1))
for _ in range(4):
    a = pt.exp(-a * a) + 0.5 * a
    b = pt.tanh(b * 1.5) - 0.25
out = pt.make_dict_of_named_arrays({"y": a + pt.to_device(b, 0)})
group = DeviceGroup()
parts = pt.find_device_partition(out)
prgs = pt.generate_code_for_partition(parts)
single = pt.generate_loopy(strip_device_transfers(out))
xv = np.random.default_rng(0).standard_normal(n)
q0 = group.specs[0].compute_queue

def finish():
    for s in group.specs:
        s.compute_queue.finish()
        s.transfer_queue.finish()

def two():
    t0 = time.perf_counter()
    res = pt.execute_partition_on_devices(parts, prgs, group, {"x": xv})
    t1 = time.perf_counter()
    res["y"].get()
    finish()
    return t1 - t0, time.perf_counter() - t0

def one():
    t0 = time.perf_counter()
    single(q0, x=xv)[1]["y"]  # NumPy input: the output comes back on the host
    return time.perf_counter() - t0

two(); one()
twos = [two() for _ in range(repeat)]
ones = [one() for _ in range(repeat)]
print(json.dumps({"n_devices": len(group), "parts": len(parts.parts),
                  "enqueue_s": min(t[0] for t in twos),
                  "two_devices_s": min(t[1] for t in twos),
                  "one_device_s": min(ones)}))
"""


def bench_two_devices(n: int, repeat: int) -> dict:
    """A program split over two PoCL devices (``POCL_DEVICES="pthread
    pthread"``, in a subprocess): time until
    ``execute_partition_on_devices`` returns (everything enqueued, nothing
    waited for) versus until the result is on the host, and the same
    program on one device."""
    import json
    import os
    import pathlib
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        script = pathlib.Path(tmp) / "two_devices.py"
        script.write_text(_TWO_DEVICE_BENCH)
        proc = subprocess.run(
            [sys.executable, str(script), str(n), str(repeat)],
            env=dict(os.environ, POCL_DEVICES="pthread pthread"),
            capture_output=True, text=True, timeout=600)
    if proc.returncode:
        return {"error": proc.stderr.strip()[-300:]}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["n"] = n
    figures["enqueue_fraction"] = figures["enqueue_s"] / figures["two_devices_s"]
    figures["two_over_one"] = figures["two_devices_s"] / figures["one_device_s"]
    return figures


def bench_small_things(repeat: int) -> dict:
    n = 2000
    b = Bufferizer((2,), n, np.float64, buffer_full_hook=lambda b: b.flush())
    element = np.ones(2)
    raw = np.zeros((n, 2))

    def appends():
        for _ in range(n):
            b.append_one(element)

    def assigns():
        for i in range(n):
            raw[i] = element

    tracer = TraceRecorder()

    def records():
        for i in range(n):
            with tracer.part(i):
                pass
        tracer.clear()

    figures = {"bufferizer_append_us": best_of(appends, repeat) / n * 1e6,
               "bare_assign_us": best_of(assigns, repeat) / n * 1e6,
               "trace_part_record_us": best_of(records, repeat) / n * 1e6}
    figures["append_vs_assign"] = (figures["bufferizer_append_us"]
                                   / figures["bare_assign_us"])
    return figures


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description="runtime benchmarks")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pingpong-worker", nargs=3, type=int,
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pingpong_worker:
        import json

        from mpi4py import MPI
        figures = _pingpong_worker(*args.pingpong_worker)
        if MPI.COMM_WORLD.rank == 0:
            print(json.dumps(figures))
        return figures
    repeat = 3 if args.quick else 7
    n, nz = (48, 16) if args.quick else (96, 32)

    halo = bench_halo(n, nz, repeat)
    msgs = bench_messages(16, 64, repeat)
    small = bench_small_things(repeat)
    staging = []
    try:
        for n_arrays, elems in ((8, 1), (64, 1), (8, 10_000), (64, 10_000)):
            staging.append(bench_device_staging(n_arrays, elems, repeat))
    except Exception as err:  # noqa: BLE001 -- report, keep the other figures
        staging.append({"opencl_error": f"{type(err).__name__}: {err}"})
    two_devices = bench_two_devices(200_000 if args.quick else 2_000_000,
                                    repeat)

    print(f"halo pack: {halo['n_regions']} regions (4 edges x 4 quantities "
          f"of {n + 6}x{n + 6}x{nz}, 1 quarter turn), "
          f"{halo['pack_bytes'] / 1e6:.2f} MB in one buffer")
    print(f"  {'NumPy pack':<34} {halo['pack_s'] * 1e3:8.3f} ms")
    print(f"  {'eager NumPy (concatenate)':<34} "
          f"{halo['eager_numpy_s'] * 1e3:8.3f} ms   pack is "
          f"{halo['pack_vs_eager']:.2f}x faster")
    print(f"  {'contiguous copy of same bytes':<34} "
          f"{halo['copy_floor_s'] * 1e3:8.3f} ms   pack reaches "
          f"{100 * halo['pack_fraction_of_copy_bw']:.0f}% of copy bandwidth")
    if "pack_opencl_s" in halo:
        print(f"  {'OpenCL pack, launch to sync':<34} "
              f"{halo['pack_opencl_s'] * 1e3:8.3f} ms   "
              f"{halo['opencl_vs_numpy_pack']:.2f}x the NumPy variant's speed")
        print(f"  {'OpenCL pack, kernel time only':<34} "
              f"{halo['pack_opencl_kernel_s'] * 1e3:8.3f} ms   "
              f"{halo['opencl_kernel_vs_numpy_pack']:.2f}x the NumPy variant's "
              "speed")
    else:
        print(f"  OpenCL pack unavailable: {halo.get('opencl_error')}")
    if "packed_s" in msgs:
        print(f"messages between 2 ranks: {msgs['n_regions']} regions of "
              f"{msgs['region_bytes']} B, one way")
        print(f"  {'one message per region':<34} "
              f"{msgs['separate_s'] * 1e6:8.1f} us")
        print(f"  {'one packed message (pack+unpack)':<34} "
              f"{msgs['packed_s'] * 1e6:8.1f} us   "
              f"{msgs['packed_speedup']:.2f}x faster")
    else:
        print(f"messages: MPI unavailable ({msgs['mpi_error']})")
    print(f"Bufferizer.append_one {small['bufferizer_append_us']:.2f} us vs "
          f"bare slice assignment {small['bare_assign_us']:.2f} us "
          f"({small['append_vs_assign']:.1f}x)")
    print(f"trace record of a part: {small['trace_part_record_us']:.2f} us")
    print("device arrays in one message (distributed executor, pack_on=...): "
          "host time / device time, > 1 means packing on the device wins")
    for f in staging:
        if "opencl_error" in f:
            print(f"  OpenCL unavailable: {f['opencl_error']}")
            continue
        print(f"  {f['n_arrays']:>3} arrays x {f['elems']:>6} float64: send "
              f"device {f['send_device_s'] * 1e6:8.1f} us, host "
              f"{f['send_host_s'] * 1e6:8.1f} us ({f['send_host_over_device']:.2f}x)"
              f"; receive device {f['recv_device_s'] * 1e6:8.1f} us, host "
              f"{f['recv_host_s'] * 1e6:8.1f} us ({f['recv_host_over_device']:.2f}x)")
    if "error" in two_devices:
        print(f"two devices: unavailable ({two_devices['error']})")
    else:
        f = two_devices
        print(f"two devices ({f['n_devices']} PoCL devices, {f['parts']} parts, "
              f"{f['n']} elements): execute_partition_on_devices returns after "
              f"{f['enqueue_s'] * 1e3:.2f} ms ({100 * f['enqueue_fraction']:.0f}% "
              f"of the {f['two_devices_s'] * 1e3:.2f} ms to the result: the "
              "host does not wait); one device "
              f"{f['one_device_s'] * 1e3:.2f} ms ({f['two_over_one']:.2f}x; "
              "both PoCL devices share this machine's cores)")
    return {"halo": halo, "messages": msgs, "small": small,
            "device_staging": staging, "two_devices": two_devices}


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
