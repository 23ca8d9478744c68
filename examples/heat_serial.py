"""Explicit 2-D heat equation, written once with the lazy API and run on the
NumPy reference target; the result is checked against eager NumPy.

Run: ``python examples/heat_serial.py [--n N] [--steps S]``
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import pytato_like as pt


def heat_steps(u, nu: float, steps: int):
    """*steps* explicit updates of u += nu * laplacian(u) on a periodic grid
    (works for lazy arrays and NumPy arrays alike)."""
    roll = pt.roll if isinstance(u, pt.Array) else np.roll
    for _ in range(steps):
        lap = (roll(u, 1, 0) + roll(u, -1, 0) + roll(u, 1, 1) + roll(u, -1, 1)
               - 4 * u)
        u = u + nu * lap
    return u


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    u0 = rng.random((args.n, args.n))

    t0 = time.perf_counter()
    u = pt.make_placeholder("u", u0.shape, u0.dtype)
    result = pt.make_dict_of_named_arrays({
        "u": heat_steps(u, 0.2, args.steps),
        "total_heat": pt.sum(heat_steps(u, 0.2, args.steps)),
    })
    t_build = time.perf_counter() - t0
    prg = pt.generate_numpy(result)
    t0 = time.perf_counter()
    out = prg(u=u0)
    t_run = time.perf_counter() - t0

    ref = heat_steps(u0, 0.2, args.steps)
    err = np.max(np.abs(out["u"] - ref))
    heat_err = abs(out["total_heat"] - u0.sum()) / u0.sum()
    print(f"2-D heat, {args.n}x{args.n} grid, {args.steps} steps")
    print(f"  build {t_build * 1e3:.1f} ms, NumPy-target run {t_run * 1e3:.1f} ms")
    print(f"  max |lazy - eager NumPy| = {err:.2e}")
    print(f"  relative change of total heat = {heat_err:.2e} (conserved)")
    ok = err < 1e-12 and heat_err < 1e-12
    print("  check:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
