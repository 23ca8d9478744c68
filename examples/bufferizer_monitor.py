"""Monitor an explicit 2-D heat solver with a device Bufferizer.

Each step of the solver (built lazily with pytato_like) also computes two
monitored values, the maximum temperature and the energy sum(u**2), as one
array of shape (2,). That array is appended to a :class:`Bufferizer` on the
OpenCL device every step; only when the buffer is full does its
``buffer_full_hook`` copy the whole batch to the host and flush it. So the
host sees one transfer per ``--batch`` steps instead of one per step.

With the loopy target (``pt.generate_loopy``, if this build has it) the
solver's outputs are device arrays and the appends are device-to-device
copies; with the NumPy reference target each step's monitored values are
uploaded to the buffer (host to device, never back per step).

The collected values are checked against eager NumPy.

Run: ``python examples/bufferizer_monitor.py [--n N] [--steps S] [--batch B]
[--target auto|numpy|loopy]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import pytato_like as pt
from pytato_like.runtime import Bufferizer


def heat_step(u, nu: float):
    """One explicit update u += nu * laplacian(u) on a periodic grid (lazy
    arrays or NumPy arrays alike)."""
    roll = pt.roll if isinstance(u, pt.Array) else np.roll
    lap = roll(u, 1, 0) + roll(u, -1, 0) + roll(u, 1, 1) + roll(u, -1, 1) - 4 * u
    return u + nu * lap


def step_program(n: int, nu: float):
    u = pt.make_placeholder("u", (n, n), np.float64)
    u_new = heat_step(u, nu)
    monitor = pt.stack([pt.amax(u_new), pt.sum(u_new * u_new)])
    return pt.make_dict_of_named_arrays({"u": u_new, "monitor": monitor})


def make_runner(result, target: str, queue):
    """``run(u) -> (u_new, monitor)`` on the chosen target; arrays stay where
    the target keeps them (device for loopy, host for NumPy)."""
    if target == "loopy":
        prg = pt.generate_loopy(result)

        def run(u):
            # the state stays on the device even when fed a NumPy array
            _evt, out = prg(queue, out_host=False, u=u)
            return out["u"], out["monitor"]
        return run
    prg = pt.generate_numpy(result)

    def run(u):
        out = prg(u=u)
        return out["u"], out["monitor"]
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--target", choices=("auto", "numpy", "loopy"),
                        default="auto")
    args = parser.parse_args(argv)

    import pyopencl as cl
    import pyopencl.array as cla

    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    target = args.target
    if target == "auto":
        target = "loopy" if hasattr(pt, "generate_loopy") else "numpy"

    nu = 0.2
    u0 = np.random.default_rng(0).random((args.n, args.n))
    run = make_runner(step_program(args.n, nu), target, queue)

    history: list[np.ndarray] = []
    transfers = []

    def drain(b: Bufferizer) -> None:
        # the one device -> host copy per batch
        history.append(b.array.get())
        transfers.append(len(b))
        b.flush()

    monitor = Bufferizer((2,), args.batch, np.float64, queue=queue,
                         buffer_full_hook=drain)
    u = cla.to_device(queue, u0) if target == "loopy" else u0
    for _ in range(args.steps):
        u, values = run(u)
        monitor.append(values)
    if len(monitor):
        drain(monitor)
    collected = np.concatenate(history)

    # eager NumPy reference
    ref, ref_u = [], u0
    for _ in range(args.steps):
        ref_u = heat_step(ref_u, nu)
        ref.append([ref_u.max(), (ref_u * ref_u).sum()])
    ref = np.array(ref)

    print(f"2-D heat {args.n}x{args.n}, {args.steps} steps, target {target}, "
          f"device Bufferizer of {args.batch} elements")
    print(f"  device->host transfers: {len(transfers)} (batch sizes {transfers})")
    print(f"  {'step':>5} {'max(u)':>12} {'sum(u**2)':>14}")
    for i in list(range(0, args.steps, max(1, args.steps // 5))) + [args.steps - 1]:
        print(f"  {i + 1:>5} {collected[i, 0]:>12.6f} {collected[i, 1]:>14.6f}")
    err = np.max(np.abs(collected - ref) / np.abs(ref))
    print(f"  max relative difference vs eager NumPy: {err:.2e}")
    ok = collected.shape == ref.shape and err < 1e-12
    print("  check:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
