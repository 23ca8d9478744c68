"""Compile at application scale: wide, deep and long programs, cold and warm.

Cases (issue 39), each checked against NumPy:

``sum``
    ``x_0 + x_1 + ... + x_{N-1}`` of *N* placeholders of ``--n`` elements
    (2 N nodes): many inputs, one output.
``concat``
    ``concatenate`` of *N* slices of one placeholder (of ``max(2, n // N)``
    elements each), in reverse order.
``stencil``
    *N* steps of the 1-D heat stencil ``u + c (roll(u, 1) - 2 u +
    roll(u, -1))`` on ``--n`` cells: a long explicit time loop.
``chain``
    ``0.5 * x + 1`` applied *N* times: a deep elementwise chain.
``mixed``
    the sum of *N* placeholders plus 2 *N* stencil steps on the sum.
``mpms``
    :func:`~pytato_like.materialize_with_mpms` on
    :func:`bench.bench_transform.build` of depth *N* (no code generation;
    its check is the node count and that every non-output node is
    stored).

Each measurement runs in a fresh Python process (imports excluded from
the figures) and times building the DAG, :func:`~pytato_like.generate_loopy`,
the first call (the OpenCL build happens there) and the median of later
calls, with the inputs on the host (NumPy in, NumPy out, as a user calls
it):

* **cold**: private, empty ``PYTATO_LIKE_CACHE_DIR`` (which holds PoCL's
  folder: ``POCL_CACHE_DIR`` unset, as a user leaves it) and
  ``XDG_CACHE_HOME`` (loopy's and pyopencl's caches): nothing compiled
  before;
* **warm**: a second process with the same caches.

Printed per case and size: nodes, seconds (build, generate, first call,
first result = generate + first call, per later call) and nodes per
second of the first result. ``--profile CASE:N`` runs one cold case under
cProfile in this process (private empty caches) and prints the top
functions.

Run: ``.venv/bin/python -m bench.bench_compile_scale [--cases sum,concat]
[--sizes sum=1000,10000 ...] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench._launch import empty_caches_env

#: sizes of the full run (the issue's targets) and of ``--quick``
FULL_SIZES = {
    "sum": [1_000, 10_000],
    "concat": [1_000, 5_000],
    "stencil": [1_000, 20_000],
    "chain": [10_000],
    "mixed": [1_000],
    "mpms": [10_000],
}
QUICK_SIZES = {
    "sum": [100],
    "concat": [100],
    "stencil": [100],
    "chain": [1_000],
    "mixed": [100],
    "mpms": [1_000],
}

_SCRIPT = r"""
import json, os, statistics, sys, time
import numpy as np
case, count, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, os.getcwd())
from bench.bench_compile_scale import build_case
import pytato_like as pt
from pytato_like.analysis import get_num_nodes

info = {}
t0 = time.perf_counter()
dag, inputs, reference = build_case(case, count, n)
info["build"] = time.perf_counter() - t0
info["nodes"] = get_num_nodes(dag)
if case == "mpms":
    t0 = time.perf_counter()
    result = pt.materialize_with_mpms(dag)
    info["generate"] = time.perf_counter() - t0
    info["first_call"] = info["per_call"] = 0.0
    info["max_error"] = 0.0 if reference(result) else float("inf")
else:
    import pyopencl as cl
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    t0 = time.perf_counter()
    prg = pt.generate_loopy(dag)
    info["generate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, (out,) = prg(queue, **inputs)
    info["first_call"] = time.perf_counter() - t0
    calls = []
    for _ in range(5):
        t0 = time.perf_counter()
        prg(queue, **inputs)
        calls.append(time.perf_counter() - t0)
    info["per_call"] = statistics.median(calls)
    ref = reference()
    info["max_error"] = float(np.max(np.abs(out - ref)) / max(1.0, np.max(np.abs(ref))))
    stats = prg.stats
    info.update(kernels=stats.n_kernels, launches=stats.n_launches,
                phases={k: round(v, 3) for k, v in stats.phases.items()})
print(json.dumps(info))
"""


def build_case(case: str, count: int, n: int):
    """``(dag, inputs, reference)`` of one case: *count* is the case's size
    (inputs, pieces, steps, depth), *n* the array length. *reference*
    computes the expected result with NumPy (for ``mpms``: checks the
    materialised DAG and returns True when it is right)."""
    import numpy as np

    import pytato_like as pt
    rng = np.random.default_rng(0)
    c = 0.1

    def stencil(u, m, steps):
        for _ in range(steps):
            u = u + c * (m.roll(u, 1) - 2 * u + m.roll(u, -1))
        return u

    if case in ("sum", "mixed"):
        xs = [pt.make_placeholder(f"x{k}", (n,), np.float64) for k in range(count)]
        data = {f"x{k}": rng.standard_normal(n) for k in range(count)}
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        steps = 2 * count if case == "mixed" else 0

        def reference():
            ref = data["x0"].copy()
            for k in range(1, count):
                ref = ref + data[f"x{k}"]
            return stencil(ref, np, steps)
        return stencil(total, pt, steps), data, reference

    if case == "concat":
        width = max(2, n // count)
        x = pt.make_placeholder("x", (count * width,), np.float64)
        data = {"x": rng.standard_normal(count * width)}
        pieces = [x[k * width:(k + 1) * width] for k in reversed(range(count))]

        def reference():
            return np.concatenate([data["x"][k * width:(k + 1) * width]
                                   for k in reversed(range(count))])
        return pt.concatenate(pieces), data, reference

    if case == "stencil":
        u = pt.make_placeholder("u", (n,), np.float64)
        data = {"u": rng.standard_normal(n)}
        return stencil(u, pt, count), data, lambda: stencil(data["u"], np, count)

    if case == "chain":
        x = pt.make_placeholder("x", (n,), np.float64)
        data = {"x": rng.standard_normal(n)}

        def chain(v):
            for _ in range(count):
                v = 0.5 * v + 1
            return v
        return chain(x), data, lambda: chain(data["x"])

    if case == "mpms":
        from bench.bench_transform import WIDTH, build
        from pytato_like.analysis import get_num_nodes
        from pytato_like.tags import ImplStored
        dag = build(count)

        def check(result) -> bool:
            # every computed node but the outputs is stored: here each has
            # two users, so the MPMS rule selects all of them
            from pytato_like._traversal import topological_order
            from pytato_like.array import InputArgumentBase
            outputs = [result[name].expr for name in result]
            output_ids = {id(a) for a in outputs}
            stored = all(node.tags_of_type(ImplStored) or id(node) in output_ids
                         or isinstance(node, InputArgumentBase)
                         for node in topological_order(outputs))
            return get_num_nodes(result) == WIDTH * count + WIDTH and stored
        return dag, {}, check

    raise ValueError(f"unknown case {case!r}")


def _run(case: str, count: int, n: int, env: dict, timeout: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, case, str(count),
                               str(n)], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=os.path.dirname(
                                  os.path.dirname(os.path.abspath(__file__))))
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"error": last[0][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(case: str, count: int, n: int, timeout: float) -> dict:
    """The cold and the warm measurement of one case and size."""
    with tempfile.TemporaryDirectory() as tmp:
        env = empty_caches_env(tmp)
        cold = _run(case, count, n, env, timeout)
        warm = _run(case, count, n, env, timeout) if "error" not in cold else cold
    for kind, row in (("cold", cold), ("warm", warm)):
        if "error" not in row and row["max_error"] > 1e-9:
            raise AssertionError(f"{case} {count} ({kind}): wrong result "
                                 f"(relative error {row['max_error']})")
    return {"case": case, "count": count, "cold": cold, "warm": warm}


def _format(row: dict) -> str:
    out = []
    for kind in ("cold", "warm"):
        r = row[kind]
        label = f"{row['case']:<8}{row['count']:>7} {kind:<5}"
        if "error" in r:
            out.append(f"{label} {r['error']}")
            continue
        first = r["generate"] + r["first_call"]
        out.append(
            f"{label}{r['nodes']:>8}{r['build']:>9.3f}{r['generate']:>10.3f}"
            f"{r['first_call']:>10.3f}{first:>10.3f}"
            f"{r['per_call'] * 1e3:>10.2f}{r['nodes'] / max(first, 1e-9):>12.0f}"
            f"  {r.get('kernels', '')}/{r.get('launches', '')}")
    return "\n".join(out)


HEADER = (f"{'case':<8}{'size':>7} {'':<5}{'nodes':>8}{'build s':>9}"
          f"{'generate':>10}{'1st call':>10}{'1st res':>10}{'call ms':>10}"
          f"{'nodes/s':>12}  kernels/launches")


def _profile(spec: str, n: int) -> None:
    import cProfile
    import pstats
    case, count = spec.split(":")
    tmp = tempfile.mkdtemp()
    for var, sub in (("PYTATO_LIKE_CACHE_DIR", "pytato_like"),
                     ("POCL_CACHE_DIR", "pocl"), ("XDG_CACHE_HOME", "xdg")):
        os.environ[var] = os.path.join(tmp, sub)
    sys.path.insert(0, os.getcwd())
    import pyopencl as cl

    import pytato_like as pt
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    dag, inputs, _ = build_case(case, int(count), n)
    profiler = cProfile.Profile()
    profiler.enable()
    if case == "mpms":
        pt.materialize_with_mpms(dag)
    else:
        prg = pt.generate_loopy(dag)
        prg(queue, **inputs)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(20)


def _parse_sizes(items: list[str], base: dict) -> dict:
    sizes = {k: list(v) for k, v in base.items()}
    for item in items:
        case, values = item.split("=")
        sizes[case] = [int(v) for v in values.split(",")]
    return sizes


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(FULL_SIZES))
    parser.add_argument("--sizes", nargs="*", default=[],
                        help="CASE=N1,N2 (overrides the defaults)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (a run of a minute)")
    parser.add_argument("--n", type=int, default=1000,
                        help="array length (concat: total length)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--profile", help="CASE:N, cold, under cProfile")
    args = parser.parse_args(argv)
    if args.profile:
        _profile(args.profile, args.n)
        return []
    sizes = _parse_sizes(args.sizes, QUICK_SIZES if args.quick else FULL_SIZES)
    print(HEADER, flush=True)
    rows = []
    for case in args.cases.split(","):
        for count in sizes[case]:
            row = measure(case, count, args.n, args.timeout)
            rows.append(row)
            print(_format(row), flush=True)
    return rows


if __name__ == "__main__":
    main()
