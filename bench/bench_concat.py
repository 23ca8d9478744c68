"""Stored concatenations on the loopy/OpenCL target against NumPy.

Programs (float64, ``--n`` elements, default 10^5):

``stencil``
    The distributed heat solver's update of one rank's field: a three-point
    stencil whose first and last cells read the halo values ``a`` and
    ``c``, written as ``concatenate([e0, inner, e1])`` of three computed
    pieces and stored (:class:`~pytato_like.tags.ImplStored`).
``copy``
    A plain three-piece concatenation ``concatenate([a, b, c])`` of inputs
    of sizes 1, n-2 and 1 (a copy).
``thirds``
    ``concatenate([x, y, z])`` of three inputs of n/3 elements each.
``inner``
    The stencil's interior alone, stored (no concatenation): what the
    ``stencil`` program cannot beat.

Each runs with its inputs on the device, twice: compiled as before this
change (``selects``: one instruction over the whole array, a select on
the position along the axis -- what ``PYTATO_LIKE_PIECES_MIN_SIZE`` above
the size gives) and written piece by piece (``pieces``, the default).
The time per call (results waited for) is the median of ``--repeat``
calls after a warm-up; NumPy (``np.concatenate`` of the same pieces
computed eagerly) is timed in the same run. Printed: the times, the
ratio to NumPy (> 1: faster than NumPy), the number of kernel launches
and whether the device code holds a select (``?``).

PoCL runs on one thread unless ``POCL_MAX_PTHREAD_COUNT`` is set (the
figures of :doc:`/codegen` were taken that way).

Run: ``.venv/bin/python -m bench.bench_concat [--n 100000] [--repeat 200]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

C = 0.25


def _programs(n: int) -> dict:
    """``name -> (lazy builder, eager function, inputs)``."""
    import pytato_like as pt
    from pytato_like.tags import ImplStored

    rng = np.random.default_rng(0)
    a, b, c = rng.random(1), rng.random(n - 2), rng.random(1)
    third = n // 3
    x, y, z = rng.random(third), rng.random(third), rng.random(n - 2 * third)

    def stencil_lazy():
        first = pt.make_placeholder("a", (1,), np.float64)
        interior = pt.make_placeholder("b", (n - 2,), np.float64)
        last = pt.make_placeholder("c", (1,), np.float64)
        e0 = interior[:1] + C * (first - 2 * interior[:1] + interior[1:2])
        inner = interior[1:-1] + C * (interior[:-2] - 2 * interior[1:-1]
                                      + interior[2:])
        e1 = interior[-1:] + C * (interior[-2:-1] - 2 * interior[-1:] + last)
        return pt.concatenate([e0, inner, e1]).tagged(ImplStored())

    def stencil_eager(a, b, c):
        e0 = b[:1] + C * (a - 2 * b[:1] + b[1:2])
        inner = b[1:-1] + C * (b[:-2] - 2 * b[1:-1] + b[2:])
        e1 = b[-1:] + C * (b[-2:-1] - 2 * b[-1:] + c)
        return np.concatenate([e0, inner, e1])

    def inner_lazy():
        interior = pt.make_placeholder("b", (n - 2,), np.float64)
        return (interior[1:-1] + C * (interior[:-2] - 2 * interior[1:-1]
                                      + interior[2:])).tagged(ImplStored())

    def inner_eager(b):
        return b[1:-1] + C * (b[:-2] - 2 * b[1:-1] + b[2:])

    def copy_lazy():
        return pt.concatenate([pt.make_placeholder(k, s, np.float64)
                               for k, s in (("a", (1,)), ("b", (n - 2,)),
                                            ("c", (1,)))])

    def thirds_lazy():
        return pt.concatenate([pt.make_placeholder(k, v.shape, np.float64)
                               for k, v in (("x", x), ("y", y), ("z", z))])

    return {
        "stencil": (stencil_lazy, stencil_eager, {"a": a, "b": b, "c": c}),
        "copy": (copy_lazy, lambda a, b, c: np.concatenate([a, b, c]),
                 {"a": a, "b": b, "c": c}),
        "thirds": (thirds_lazy, lambda x, y, z: np.concatenate([x, y, z]),
                   {"x": x, "y": y, "z": z}),
        "inner": (inner_lazy, inner_eager, {"b": b}),
    }


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")

    import pyopencl as cl
    import pyopencl.array as cla

    import pytato_like as pt
    from pytato_like.target.loopy.options import CodegenOptions

    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    print(f"n = {args.n}, POCL_MAX_PTHREAD_COUNT = "
          f"{os.environ['POCL_MAX_PTHREAD_COUNT']}, load {os.getloadavg()[0]:.2f}")
    print(f"{'program':10s} {'code':8s} {'numpy ms':>9s} {'loopy ms':>9s} "
          f"{'x numpy':>8s} {'launches':>8s} {'select':>6s}")
    default_min = CodegenOptions.from_environment().pieces_min_size
    for name, (lazy, eager, inputs) in _programs(args.n).items():
        devin = {k: cla.to_device(queue, v) for k, v in inputs.items()}
        # (the plan cache key includes the setting)
        for code, min_size in (("selects", 2**62), ("pieces", default_min)):
            prg = pt.generate_loopy(lazy(),
                                    options={"pieces_min_size": min_size})
            _, out = prg(queue, **devin)
            got = out[0].get() if isinstance(out, (list, tuple)) else out.get()
            np.testing.assert_allclose(got, eager(**inputs), rtol=1e-12)

            def run(prg=prg, devin=devin):
                prg(queue, **devin)
                queue.finish()

            for _ in range(5):
                run()
            t_lazy = _median(run, args.repeat)
            t_np = _median(lambda eager=eager, inputs=inputs: eager(**inputs),
                           args.repeat)
            select = "?" in prg.get_source()
            print(f"{name:10s} {code:8s} {t_np * 1e3:9.3f} {t_lazy * 1e3:9.3f} "
                  f"{t_np / t_lazy:8.2f} {len(prg.plan.launches):8d} "
                  f"{'yes' if select else 'no':>6s}", flush=True)


if __name__ == "__main__":
    main()
