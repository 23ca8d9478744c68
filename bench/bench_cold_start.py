"""Time to the first result: the 2-D heat stencil as a notebook user runs it.

For a 2-D periodic heat stencil on 256x256 with 10, 50 and 200 explicit
steps, each measurement runs in a fresh Python process and times
everything from the framework's imports to the result on the host
(``import pyopencl, pytato_like`` and the OpenCL context and queue, or
``import jax``; building the DAG, ``generate_loopy``, the OpenCL build,
the first call; NumPy and the input data are made before the clock
starts). The figure without the imports (from building the DAG on) is
printed below each row:

* **cold**: a private, empty ``PYTATO_LIKE_CACHE_DIR``, which holds
  PoCL's folder (``POCL_CACHE_DIR`` unset, as a user leaves it), and an
  empty ``XDG_CACHE_HOME`` (loopy's and pyopencl's caches): nothing
  compiled before. The first call runs on the host while the program
  compiles (:mod:`pytato_like.target.loopy.host_first_call`, the
  default); the line below the row says when the second call's compiled
  result came;
* **compiled**: the same with ``PYTATO_LIKE_HOST_FIRST_CALL=0``: the
  first result waits for code generation, the OpenCL build and the
  kernels' first launches (every cache empty again);
* **warm**: the same caches, populated by the cold run (a user restarting
  the kernel on an unchanged program: the program binaries saved by the
  cold run are loaded);
* **jax**: ``jax.jit`` of the same steps in a fresh process with JAX's
  persistent compilation cache off (when ``jax`` is importable);
* **floor**: after each warm run, a fresh process doing only what a warm
  start cannot do without: importing pyopencl and the third-party modules
  ``import pytato_like`` loads (pymbolic, pytools, constantdict) and
  making the context and queue. The line "ours" is each warm run less the
  floor run after it (median): the part of a warm start that is this
  package's.

The package is byte-compiled first, as an installed one is (an editable
checkout under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
module in every fresh process). Every result is checked against NumPy. Run:
``python -m bench.bench_cold_start [--steps 10,50,200] [--repeat 3]
[--profile N]`` (each figure is the median of ``--repeat`` runs);
``--profile N`` runs the cold N-step case under cProfile in this process
(private empty caches) and prints the top functions by cumulative time.

``--demo N`` instead runs ``examples/demo.py`` (2 ranks) N times, each with
private empty caches, and prints its code generation and first execution
(the issue's target: both together <= 3 s), with the load average before
each run; extra demo options follow ``--`` (e.g. ``-- --halo 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from bench._launch import byte_compile_package, empty_caches_env

N = 256
C = 0.1

_SCRIPT = r"""
import time
T_START = time.perf_counter()
import json, sys
import numpy as np
kind, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
C = 0.1
rng = np.random.default_rng(0)
u0 = rng.standard_normal((n, n))

def step(u, m):
    return u + C * (m.roll(u, 1, axis=0) + m.roll(u, -1, axis=0)
                    + m.roll(u, 1, axis=1) + m.roll(u, -1, axis=1) - 4 * u)

t_imports = time.perf_counter()
if kind == "floor":
    # what a warm start cannot do without: the imports of the third-party
    # modules ``import pyopencl, pytato_like`` loads and the context
    import pyopencl as cl
    import constantdict, pymbolic.primitives, pytools.tag  # noqa: F401
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    t0 = time.perf_counter()
    result = u0
    for _ in range(steps):
        result = step(result, np)
    elapsed = 0.0
elif kind == "jax":
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    t0 = time.perf_counter()
    def f(u):
        for _ in range(steps):
            u = step(u, jnp)
        return u
    result = np.asarray(jax.jit(f)(u0))
    elapsed = time.perf_counter() - t0
else:
    import pyopencl as cl
    import pytato_like as pt
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    t0 = time.perf_counter()
    u = pt.make_placeholder("u", (n, n), np.float64)
    for _ in range(steps):
        u = step(u, pt)
    prg = pt.generate_loopy(u)
    _, (result,) = prg(queue, u=u0)  # NumPy in, NumPy out
    elapsed = time.perf_counter() - t0
t_end = time.perf_counter()
if kind == "floor":
    t_end = t0  # (NumPy's result only makes the check below pass)
if kind not in ("jax", "floor"):
    host_calls = prg.replay_counts()["host"]
    # the second call: the compiled kernels (after the compile a first
    # call on the host left running)
    _, (compiled,) = prg(queue, u=u0)
    t_compiled = time.perf_counter()
    stats = prg.stats
ref = u0
for _ in range(steps):
    ref = step(ref, np)
err = float(np.max(np.abs(result - ref)))
if kind not in ("jax", "floor"):
    err = max(err, float(np.max(np.abs(compiled - ref))))
# seconds: imports of the framework, context/queue, DAG, compile, first
# result (numpy and the input data excluded, same for both);
# after_imports: from the DAG on (what earlier versions of this bench
# printed); process: from the script's first line
info = {"seconds": t_end - t_imports, "after_imports": elapsed,
        "imports": t0 - t_imports, "process": t_end - T_START,
        "max_error": err}
if kind not in ("jax", "floor"):
    info.update(host_calls=host_calls, compiled=t_compiled - t_imports,
                cache=stats.cache, kernels=stats.n_kernels,
                launches=stats.n_launches,
                phases={k: round(v, 4) for k, v in stats.phases.items()})
print(json.dumps(info))
"""


def _run(kind: str, steps: int, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, kind, str(N), str(steps)],
                          env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {steps} steps failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _have_jax() -> bool:
    proc = subprocess.run([sys.executable, "-c", "import jax"],
                          capture_output=True)
    return proc.returncode == 0


def _median(runs: list[dict]) -> dict:
    """The run with the median time (the machine is shared: single runs
    vary by 2x)."""
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def measure(steps_list: list[int], repeat: int = 3, verbose: bool = True
            ) -> list[dict]:
    rows = []
    jax = _have_jax()
    for steps in steps_list:
        colds, compileds, warms, jaxs, floors = [], [], [], [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                # every cache empty, the first call compiled
                compileds.append(_run("pytato_like", steps, dict(
                    empty_caches_env(tmp), PYTATO_LIKE_HOST_FIRST_CALL="0")))
            with tempfile.TemporaryDirectory() as tmp:
                # (the package's default: bench/__init__ turns it off)
                env = dict(empty_caches_env(tmp), PYTATO_LIKE_HOST_FIRST_CALL="1")
                colds.append(_run("pytato_like", steps, env))
                warms.append(_run("pytato_like", steps, env))
                # right after each warm run, under the same load
                floors.append(_run("floor", steps, env))
                if jax:
                    jenv = dict(env, JAX_ENABLE_COMPILATION_CACHE="false",
                                JAX_PLATFORMS="cpu")
                    jaxs.append(_run("jax", steps, jenv))
        row = {"steps": steps, "cold": _median(colds), "warm": _median(warms),
               "compiled": _median(compileds),
               "cold_all": [r["seconds"] for r in colds],
               "warm_all": [r["seconds"] for r in warms],
               "warm_after_imports": sorted(r["after_imports"]
                                            for r in warms)[len(warms) // 2],
               "warm_imports": sorted(r["imports"]
                                      for r in warms)[len(warms) // 2],
               "floor": sorted(r["seconds"] for r in floors)[len(floors) // 2],
               # each warm run less the floor run that followed it
               "ours": sorted(w["seconds"] - f["seconds"] for w, f
                              in zip(warms, floors))[len(warms) // 2]}
        if jaxs:
            row["jax"] = _median(jaxs)
        for kind in ("cold", "compiled", "warm", "jax"):
            if kind in row and row[kind]["max_error"] > 1e-8:
                raise AssertionError(f"{kind} {steps} steps: wrong result "
                                     f"(max error {row[kind]['max_error']})")
        rows.append(row)
        if verbose:
            print(_format_row(row), flush=True)
            print(f"      cold runs {[round(t, 2) for t in row['cold_all']]}, "
                  f"warm runs {[round(t, 3) for t in row['warm_all']]}",
                  flush=True)
            jax_after = (f", jax {row['jax']['after_imports']:.2f}"
                         if "jax" in row else "")
            print(f"      without imports: cold "
                  f"{row['cold']['after_imports']:.2f}, warm "
                  f"{row['warm_after_imports']:.3f}{jax_after}; warm imports "
                  f"and context {row['warm_imports']:.3f}", flush=True)
            print(f"      warm: the floor (import of pyopencl, pymbolic, "
                  f"pytools, constantdict; the context) {row['floor']:.3f}, "
                  f"ours (warm less the floor, run by run) "
                  f"{row['ours']:.3f}", flush=True)
            print(f"      cold: {row['cold']['host_calls']} first call on the "
                  f"host; compiled result of its second call after "
                  f"{row['cold']['compiled']:.2f} s", flush=True)
            print(f"      compiled phases (median run) "
                  f"{row['compiled']['phases']}", flush=True)
    return rows


def _format_row(row: dict) -> str:
    jax = f"{row['jax']['seconds']:8.2f}" if "jax" in row else "     n/a"
    return (f"{row['steps']:5d}  {row['cold']['seconds']:8.2f}  "
            f"{row['compiled']['seconds']:8.2f}  "
            f"{row['warm']['seconds']:8.3f}  {jax}  "
            f"{row['cold']['kernels']:7d}  {row['cold']['launches']:8d}")


def profile(steps: int, top: int = 40) -> None:
    """cProfile of one cold compile and first call (imports excluded)."""
    import cProfile
    import pstats
    tmp = tempfile.mkdtemp()
    os.environ["PYTATO_LIKE_CACHE_DIR"] = os.path.join(tmp, "pytato_like")
    os.environ["POCL_CACHE_DIR"] = os.path.join(tmp, "pocl")
    import loopy  # noqa: F401 - imports are not what we profile
    import numpy as np
    import pyopencl as cl

    import pytato_like as pt
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    u0 = np.random.default_rng(0).standard_normal((N, N))

    def run():
        u = pt.make_placeholder("u", (N, N), np.float64)
        for _ in range(steps):
            u = u + C * (pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=0)
                         + pt.roll(u, 1, axis=1) + pt.roll(u, -1, axis=1) - 4 * u)
        prg = pt.generate_loopy(u)
        prg(queue, u=u0)  # NumPy in: the result is copied to the host
        return prg

    prof = cProfile.Profile()
    prof.enable()
    prg = run()
    prof.disable()
    print(prg.stats.table())
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def _demo_env(tmp: str) -> dict:
    # (the package's default first call: bench/__init__ turns it off)
    env = dict(empty_caches_env(tmp), PYTATO_LIKE_HOST_FIRST_CALL="1")
    env["PATH"] = (os.path.dirname(sys.executable) + os.pathsep
                   + os.environ.get("PATH", ""))
    return env


def measure_demo(runs: int, extra: list[str], verbose: bool = True
                 ) -> list[dict]:
    """``make demo`` cold: code generation and first execution of
    *runs* fresh runs of examples/demo.py with empty caches."""
    demo = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "examples", "demo.py")
    rows = []
    for _ in range(runs):
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run([sys.executable, demo, *extra],
                                  env=_demo_env(tmp), capture_output=True,
                                  text=True, timeout=900)
        codegen = re.search(r"codegen ([0-9.]+) s", proc.stdout)
        first = re.search(r"first run ([0-9.]+) s", proc.stdout)
        if proc.returncode != 0 or not (codegen and first):
            raise RuntimeError(f"demo failed:\n{proc.stdout}\n{proc.stderr}")
        compiled = re.search(r"first compiled run done ([0-9.]+) s",
                             proc.stdout)
        row = {"load": load, "codegen": float(codegen.group(1)),
               "first": float(first.group(1)),
               # the first run on the host: when the compiled run was done
               "compiled": float(compiled.group(1)) if compiled else None}
        row["total"] = row["codegen"] + row["first"]
        rows.append(row)
        if verbose:
            host = ("" if row["compiled"] is None else
                    f"  (first run on the host; first compiled run done "
                    f"{row['compiled']:.2f} s after it began)")
            print(f"load {row['load']:5.2f}  codegen {row['codegen']:6.2f} s  "
                  f"first run {row['first']:6.2f} s  total "
                  f"{row['total']:6.2f} s{host}", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="10,50,200")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per figure (the median is shown)")
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--demo", type=int, default=0,
                        help="time N cold runs of examples/demo.py instead")
    parser.add_argument("demo_args", nargs="*",
                        help="options for the demo (after --)")
    args = parser.parse_args(argv)
    print(byte_compile_package())
    if args.demo:
        print("make demo, cold caches, 2 ranks: code generation + first "
              "execution (target <= 3 s)")
        rows = measure_demo(args.demo, args.demo_args)
        totals = sorted(r["total"] for r in rows)
        print(f"total: min {totals[0]:.2f} s, median "
              f"{totals[len(totals) // 2]:.2f} s, max {totals[-1]:.2f} s")
        return
    if args.profile:
        profile(args.profile)
        return
    print(f"2-D heat stencil {N}x{N}: seconds from the imports to the "
          f"result on the host (fresh process each; median of {args.repeat})")
    print("steps      cold  compiled      warm       jax  kernels  launches")
    measure([int(s) for s in args.steps.split(",")], repeat=args.repeat)


if __name__ == "__main__":
    main()
