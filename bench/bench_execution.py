"""Execution speed of the loopy/OpenCL target against NumPy eager and the
memory-bandwidth floor.

Programs (all float64):

(a) ``fields``: 4 fields of 2*10^6 elements, each updated 20 times from the
    others -- memory bound; fused into one kernel with the intermediates in
    registers, it should move only 4 reads + 4 writes.
(b) ``dg``: ``u <- u + dt * einsum("ij,ej->ei", D, u)`` with a 35x35 ``D``
    and 5*10^4 elements, 3 steps (small-operator schedule: one work-item
    per element, ``D`` staged in local memory, 64-bit indices; run with
    ``PYTATO_LIKE_SMALL_OPERATOR_OUTPUTS=0`` for the generic schedule it
    replaced, with ``PYTATO_LIKE_SMALL_OPERATOR_WIDE_INDICES=0`` for
    32-bit indices, with ``PYTATO_LIKE_SMALL_OPERATOR_PAD_BYTES=0`` for
    35 accumulators per element instead of 36).
(c) ``heat``: 10 explicit steps of the 2-D heat equation on 1024^2 written
    with ``roll``.
(d) ``sum``: the sum of 10^8 float64 (a full reduction: two parallel
    stages; target at least 50 % of the copy-bandwidth floor).
(e) ``matmul``: ``a @ b`` of two 1024x1024 float64 (register-blocked
    kernel; target at least 25 % of NumPy/BLAS speed, i.e. "x numpy"
    >= 0.25).

``dg`` and ``matmul`` also run as ``jax.jit`` functions (float64, results
waited for) when JAX is importable: JAX's ratio to NumPy measured in the
same run is printed beside ours, with the ratio of the two times (target
for ``dg``: at least 2x JAX's speed, issue 39), and then the medians of
rounds that alternate one call of ours and one of JAX's (JAX's time moves
by 2x between sittings, ours less: alternating compares the two under
the same load of the shared machine).

For each: time per run of NumPy eager and of the compiled program (median
of several runs after a warm-up), their ratio, the bandwidth floor (minimal
bytes moved / measured ``np.copyto`` bandwidth) and the fraction of it
reached, the cold compile time (empty cache, includes the OpenCL build) and
the warm start (a new process with the cache filled: from ``generate_loopy``
to the first launch enqueued, and to its results; imports and DAG
construction excluded).

Run: ``python -m bench.bench_execution [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def copy_bandwidth(nbytes: int = 64 * 2**20, repeat: int = 7) -> float:
    """Bytes per second moved by ``np.copyto`` (read + write)."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t = _median_time(lambda: np.copyto(dst, src), repeat)
    return 2 * src.nbytes / t


# {{{ programs: (lazy builder, numpy eager, inputs, minimal bytes)

def program_fields(n: int = 2_000_000, steps: int = 20):
    def step(u, v, w, p, mod):
        return (u + 0.1 * (v - w), v + 0.1 * (w - p), w + 0.1 * (p - u),
                p + 0.1 * (u - v))

    def lazy():
        import pytato_like as pt
        fs = [pt.make_placeholder(name, (n,), np.float64) for name in "uvwp"]
        for _ in range(steps):
            fs = step(*fs, pt)
        return pt.make_dict_of_named_arrays(dict(zip("uvwp", fs, strict=True)))

    def eager(u, v, w, p):
        fs = (u, v, w, p)
        for _ in range(steps):
            fs = step(*fs, np)
        return fs

    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal(n) for name in "uvwp"}
    return lazy, eager, inputs, 8 * n * 8


def program_dg(n_el: int = 50_000, n_dof: int = 35, steps: int = 3):
    rng = np.random.default_rng(1)
    d_mat = rng.standard_normal((n_dof, n_dof)) / n_dof
    dt = 0.01

    def lazy():
        import pytato_like as pt
        u = pt.make_placeholder("u", (n_el, n_dof), np.float64)
        d = pt.make_data_wrapper(d_mat)
        for _ in range(steps):
            u = u + dt * pt.einsum("ij,ej->ei", d, u)
        return u

    def eager(u):
        for _ in range(steps):
            u = u + dt * np.einsum("ij,ej->ei", d_mat, u)
        return u

    def jax_version():
        import jax
        import jax.numpy as jnp
        d = jnp.asarray(d_mat)

        @jax.jit
        def run(u):
            for _ in range(steps):
                u = u + dt * jnp.einsum("ij,ej->ei", d, u)
            return u
        return run

    eager.jax = jax_version

    return lazy, eager, {"u": rng.standard_normal((n_el, n_dof))}, \
        2 * n_el * n_dof * 8


def program_heat(n: int = 1024, steps: int = 10):
    c = 0.1

    def step(u, m):
        return u + c * (m.roll(u, 1, axis=0) + m.roll(u, -1, axis=0)
                        + m.roll(u, 1, axis=1) + m.roll(u, -1, axis=1) - 4 * u)

    def lazy():
        import pytato_like as pt
        u = pt.make_placeholder("u", (n, n), np.float64)
        for _ in range(steps):
            u = step(u, pt)
        return u

    def eager(u):
        for _ in range(steps):
            u = step(u, np)
        return u

    rng = np.random.default_rng(2)
    return lazy, eager, {"u": rng.standard_normal((n, n))}, 2 * n * n * 8


def program_sum(n: int = 100_000_000):
    def lazy():
        import pytato_like as pt
        return pt.sum(pt.make_placeholder("x", (n,), np.float64))

    def eager(x):
        return x.sum()

    rng = np.random.default_rng(3)
    return lazy, eager, {"x": rng.standard_normal(n)}, 8 * n


def program_matmul(n: int = 1024):
    def lazy():
        import pytato_like as pt
        return (pt.make_placeholder("a", (n, n), np.float64)
                @ pt.make_placeholder("b", (n, n), np.float64))

    def eager(a, b):
        return a @ b

    def jax_version():
        import jax
        return jax.jit(lambda a, b: a @ b)

    eager.jax = jax_version
    rng = np.random.default_rng(4)
    return lazy, eager, {"a": rng.standard_normal((n, n)),
                         "b": rng.standard_normal((n, n))}, 3 * n * n * 8


PROGRAMS = {"fields": program_fields, "dg": program_dg, "heat": program_heat,
            "sum": program_sum, "matmul": program_matmul}

# }}}


_WARM_SCRIPT = """
import json, sys, time
t_import = time.perf_counter()
import numpy as np, pyopencl as cl, pyopencl.array, pytato_like as pt
from bench.bench_execution import PROGRAMS
t_import = time.perf_counter() - t_import
name, quick = sys.argv[1], sys.argv[2] == "1"
lazy, eager, inputs, _ = PROGRAMS[name](**QUICK[name]) if quick else PROGRAMS[name]()
q = cl.CommandQueue(cl.create_some_context(interactive=False))
devin = {k: cl.array.to_device(q, v) for k, v in inputs.items()}
q.finish()
t0 = time.perf_counter()
result = lazy()
t1 = time.perf_counter()
prg = pt.generate_loopy(result)
evt, out = prg(q, **devin)
t2 = time.perf_counter()
evt.wait()
t3 = time.perf_counter()
print(json.dumps({"build_dag": t1 - t0, "warm_start": t2 - t1,
                  "warm_first_result": t3 - t1,
                  "cache": prg.stats.cache, "import": t_import}))
"""

QUICK = {"fields": {"n": 200_000}, "dg": {"n_el": 5_000},
         "heat": {"n": 256}, "sum": {"n": 1_000_000}, "matmul": {"n": 256}}


def _warm_start(name: str, quick: bool, cache_dir: str) -> dict:
    # Warm means every cache filled: ours (written by the cold run) and
    # PoCL's kernel cache, which holds the OpenCL binaries now that we keep
    # none ourselves. The cold run disables PoCL's cache, so a first
    # unmeasured process fills a private one and a second one is measured.
    env = {k: v for k, v in os.environ.items() if k != "POCL_KERNEL_CACHE"}
    env.update(PYTATO_LIKE_CACHE_DIR=cache_dir,
               POCL_CACHE_DIR=os.path.join(cache_dir, "pocl"))
    script = "QUICK = " + repr(QUICK) + "\n" + _WARM_SCRIPT
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", script, name, "1" if quick else "0"],
            env=env, capture_output=True, text=True, cwd=here, timeout=600)
        if proc.returncode:
            return {"error": proc.stderr[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_program(name: str, queue, bandwidth: float, quick: bool, repeat: int,
                cache_dir: str) -> dict:
    import pyopencl.array as cla

    import pytato_like as pt
    from pytato_like.testing import assert_results_close

    lazy, eager, inputs, min_bytes = (PROGRAMS[name](**QUICK[name]) if quick
                                      else PROGRAMS[name]())
    devin = {k: cla.to_device(queue, v) for k, v in inputs.items()}
    queue.finish()

    t0 = time.perf_counter()
    result = lazy()
    t_dag = time.perf_counter() - t0
    t0 = time.perf_counter()
    prg = pt.generate_loopy(result)
    evt, out = prg(queue, **devin)
    queue.finish()
    t_cold = time.perf_counter() - t0

    ref = eager(**inputs)
    if isinstance(out, dict):
        got = [out[k].get() for k in "uvwp"]
        for g, r in zip(got, ref, strict=True):
            assert_results_close(g, r)
    else:
        assert_results_close(out[0].get(), ref)  # device inputs: device out

    def run_lazy():
        prg(queue, **devin)
        queue.finish()

    t_lazy = _median_time(run_lazy, repeat)
    t_eager = _median_time(lambda: eager(**inputs), max(3, repeat // 2))
    t_jax, interleaved = _jax_times(eager, inputs, repeat, run_lazy)
    floor = min_bytes / bandwidth
    warm = _warm_start(name, quick, cache_dir)
    return {
        "numpy_s": t_eager, "loopy_s": t_lazy, "speedup_vs_numpy": t_eager / t_lazy,
        "floor_s": floor, "fraction_of_bandwidth": floor / t_lazy,
        "cold_compile_s": t_cold, "build_dag_s": t_dag,
        "warm_start_s": warm.get("warm_start"),
        "warm_first_result_s": warm.get("warm_first_result"),
        "warm_import_s": warm.get("import"), "warm_cache": warm.get("cache"),
        "warm_error": warm.get("error"),
        "kernels": len(prg.plan.kernels), "launches": len(prg.plan.launches),
        "stored_arrays": prg.plan.n_stored,
        "jax_s": t_jax,
        # medians of rounds alternating one call of each (both see the
        # same state of the shared machine)
        "interleaved_loopy_s": interleaved[0], "interleaved_jax_s": interleaved[1],
        "jax_speedup_vs_numpy": t_eager / t_jax if t_jax else None,
    }


def _jax_times(eager, inputs: dict, repeat: int, run_lazy
               ) -> tuple[float | None, tuple[float | None, float | None]]:
    """Median time of the program's JAX version (jit, float64, results
    waited for), when it has one and JAX is importable (else None); then
    the medians of ours and JAX's over 3 x *repeat* rounds that alternate
    one call of each (JAX's time moves by 2x between sittings: this
    compares the two under the same load)."""
    if not hasattr(eager, "jax"):
        return None, (None, None)
    try:
        import jax
    except ImportError:
        return None, (None, None)
    jax.config.update("jax_enable_x64", True)
    run = eager.jax()
    args = {k: jax.device_put(v) for k, v in inputs.items()}

    def run_jax():
        run(**args).block_until_ready()

    run_jax()  # compile
    t_jax = _median_time(run_jax, repeat)
    ours, theirs = [], []
    for _ in range(3 * repeat):
        ours.append(_median_time(run_lazy, 1))
        theirs.append(_median_time(run_jax, 1))
    return t_jax, (float(np.median(ours)), float(np.median(theirs)))


def sweep_work_group_sizes(sizes: list[int], programs: list[str], quick: bool,
                           repeat: int) -> dict:
    """Speed-up over NumPy of each program for each work-group size, all
    measured in this one run (interleaved, to share the machine's noise)."""
    import pyopencl as cl
    import pyopencl.array as cla

    import pytato_like as pt
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    figures: dict = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["PYTATO_LIKE_CACHE_DIR"] = cache_dir
        for name in programs:
            lazy, eager, inputs, _ = (PROGRAMS[name](**QUICK[name]) if quick
                                      else PROGRAMS[name]())
            devin = {k: cla.to_device(queue, v) for k, v in inputs.items()}
            prgs = {}
            for wg in sizes:
                prgs[wg] = pt.generate_loopy(
                    lazy(), options={"work_group_size": wg})
                prgs[wg](queue, **devin)
            queue.finish()
            times = {wg: [] for wg in sizes}
            t_np = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                eager(**inputs)
                t_np.append(time.perf_counter() - t0)
                for wg in sizes:
                    t0 = time.perf_counter()
                    prgs[wg](queue, **devin)
                    queue.finish()
                    times[wg].append(time.perf_counter() - t0)
            figures[name] = {wg: float(np.median(t_np) / np.median(times[wg]))
                             for wg in sizes}
    print("speed-up over NumPy eager by work-group size")
    print(f"{'program':<8}" + "".join(f"{wg:>8}" for wg in sizes))
    for name in programs:
        print(f"{name:<8}" + "".join(f"{figures[name][wg]:8.2f}" for wg in sizes))
    return figures


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (smoke test)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--sweep", default="",
                        help="comma-separated work-group sizes to compare "
                        "(schedule study; skips the warm-start runs)")
    args = parser.parse_args(argv)
    if args.sweep:
        return sweep_work_group_sizes(
            [int(w) for w in args.sweep.split(",")], args.programs.split(","),
            args.quick, args.repeat)

    # "cold" means cold: PoCL's own kernel cache would hide the OpenCL
    # build (the warm-start runs use a private PoCL cache of their own)
    os.environ.setdefault("POCL_KERNEL_CACHE", "0")
    import pyopencl as cl
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    bandwidth = copy_bandwidth()
    figures: dict = {"copy_bandwidth_GBps": bandwidth / 1e9}
    with tempfile.TemporaryDirectory() as cache_dir:
        old = os.environ.get("PYTATO_LIKE_CACHE_DIR")
        os.environ["PYTATO_LIKE_CACHE_DIR"] = cache_dir
        try:
            for name in args.programs.split(","):
                figures[name] = run_program(name, queue, bandwidth, args.quick,
                                            args.repeat, cache_dir)
        finally:
            if old is None:
                del os.environ["PYTATO_LIKE_CACHE_DIR"]
            else:
                os.environ["PYTATO_LIKE_CACHE_DIR"] = old

    print(f"copy bandwidth (np.copyto): {figures['copy_bandwidth_GBps']:.2f} GB/s")
    header = (f"{'program':<8}{'numpy ms':>10}{'loopy ms':>10}{'x numpy':>9}"
              f"{'floor ms':>10}{'%floor':>8}{'cold s':>8}{'warm ms':>9}"
              f"{'result ms':>10}{'kernels':>8}{'launch':>7}")
    print(header)
    for name in args.programs.split(","):
        f = figures[name]
        warm = (f"{f['warm_start_s'] * 1e3:9.1f}"
                f"{f['warm_first_result_s'] * 1e3:10.1f}"
                if f["warm_start_s"] is not None else f"{'error':>19}")
        print(f"{name:<8}{f['numpy_s'] * 1e3:10.2f}{f['loopy_s'] * 1e3:10.2f}"
              f"{f['speedup_vs_numpy']:9.2f}{f['floor_s'] * 1e3:10.2f}"
              f"{100 * f['fraction_of_bandwidth']:8.1f}{f['cold_compile_s']:8.2f}"
              f"{warm}{f['kernels']:8d}{f['launches']:7d}")
        if f.get("warm_error"):
            print("  warm start failed:", f["warm_error"])
    for name in args.programs.split(","):
        f = figures[name]
        if f.get("jax_s"):
            print(f"{name}: JAX {f['jax_s'] * 1e3:.2f} ms = "
                  f"{f['jax_speedup_vs_numpy']:.2f} x NumPy; loopy "
                  f"{f['speedup_vs_numpy']:.2f} x NumPy (same run); "
                  f"loopy {f['jax_s'] / f['loopy_s']:.2f} x JAX")
            print(f"{name}: interleaved rounds: loopy "
                  f"{f['interleaved_loopy_s'] * 1e3:.2f} ms, JAX "
                  f"{f['interleaved_jax_s'] * 1e3:.2f} ms; loopy "
                  f"{f['interleaved_jax_s'] / f['interleaved_loopy_s']:.2f}"
                  " x JAX")
    if "matmul" in figures:
        print(f"matmul: loopy reaches {100 * figures['matmul']['speedup_vs_numpy']:.1f}"
              " % of NumPy/BLAS speed (target >= 25 %)")
    return figures


if __name__ == "__main__":
    main()
