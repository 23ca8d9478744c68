"""Cost of the run-time checks (gather bounds, negative integer powers).

A gather-heavy program: ``y = a[i] * 2 + b[j] - a[j]`` with ``a``, ``b`` of
10^6 float64 and index arrays ``i``, ``j`` of 10^7 int64 entries (so the
checks reduce 160 MB of indices). The same DAG is compiled with and
without ``runtime_checks`` and timed in this one run (median of several
calls, device inputs, waiting for the results); the ratio is the cost of
checking (target: at most 10 %).

Run: ``.venv/bin/python -m bench.bench_checks [--n 10000000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)

    import pyopencl as cl
    import pyopencl.array as cla

    import pytato_like as pt
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    m = 1_000_000
    rng = np.random.default_rng(0)
    host = {"a": rng.standard_normal(m), "b": rng.standard_normal(m),
            "i": rng.integers(-m, m, args.n), "j": rng.integers(0, m, args.n)}
    dev = {k: cla.to_device(queue, v) for k, v in host.items()}
    a = pt.make_placeholder("a", (m,), np.float64)
    b = pt.make_placeholder("b", (m,), np.float64)
    i = pt.make_placeholder("i", (args.n,), np.int64)
    j = pt.make_placeholder("j", (args.n,), np.int64)
    y = a[i] * 2 + b[j] - a[j]
    programs = {"checked": pt.generate_loopy(y),
                "unchecked": pt.generate_loopy(
                    y, options={"runtime_checks": False})}
    ref = host["a"][host["i"]] * 2 + host["b"][host["j"]] - host["a"][host["j"]]
    times: dict[str, list[float]] = {name: [] for name in programs}
    for name, prg in programs.items():
        _, (out,) = prg(queue, **dev)
        np.testing.assert_allclose(out.get(), ref, rtol=1e-14)
    for _ in range(args.repeat):      # interleaved: both see the same noise
        for name, prg in programs.items():
            t0 = time.perf_counter()
            prg(queue, **dev)
            queue.finish()
            times[name].append(time.perf_counter() - t0)
    med = {name: float(np.median(t)) for name, t in times.items()}
    cost = med["checked"] / med["unchecked"] - 1
    print(f"gather of {args.n} indices into {m} elements (device inputs)")
    for name in programs:
        print(f"  {name:<10} {med[name] * 1e3:8.1f} ms")
    print(f"  cost of the run-time checks: {100 * cost:.1f} % (target <= 10 %)")
    return {"times": med, "cost": cost}


if __name__ == "__main__":
    main()
