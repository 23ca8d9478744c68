"""Graph construction speed: microseconds per node to build, hash, compare
and pickle DAGs of at least 100 000 nodes.

Styles:

``chain``      ``y = 0.5*y + 1.0``, 100 000 times (Python-scalar operands).
``broadcast``  binary operations between two arrays of shapes (64, 1) and
               (64,): ``y = y * a + b`` and ``y = (y - b) / a``, alternating.
``indexing``   reshapes, transposes, slices, rolls and index arrays mixed
               with arithmetic.
``reduce``     einsums and reductions feeding back into elementwise updates.

For each style the table shows the µs per node for construction (target
<= 5), for recomputing every node's hash from its fields, for ``==``
against an independently built copy (a full structural walk), and for
pickling plus unpickling; and the µs per operation of the same loop run
eagerly by NumPy on tiny arrays, with the ratio (lazy node / eager op).

Run: ``python -m bench.bench_construction [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import time

import numpy as np

TARGET_US_PER_NODE = 5.0


def _chain(xp, x, a, b, steps):
    y = x
    for _ in range(steps):
        y = 0.5 * y + 1.0
    return y


def _broadcast(xp, x, a, b, steps):
    y = x
    for k in range(steps):
        y = y * a + b if k % 2 == 0 else (y - b) / a
    return y


_ORDER = np.arange(63, -1, -1)


def _indexing(xp, x, a, b, steps):
    y = x
    for k in range(steps):
        step = k % 6
        if step == 0:
            y = xp.transpose(xp.reshape(y, (8, 8))).reshape(64)
        elif step == 1:
            y = y[::-1] + 1.0
        elif step == 2:
            y = xp.roll(y, 3)
        elif step == 3:
            y = y[_ORDER]
        elif step == 4:
            y = xp.concatenate([y[32:], y[:32]]) * 0.5
        else:
            y = y.reshape(2, 32)[1 - k % 2].reshape(32, 1)[:, 0].reshape(1, 32) \
                .reshape(32)
            y = xp.concatenate([y, y])
    return y


def _reduce(xp, x, a, b, steps):
    y = x
    for k in range(steps):
        if k % 3 == 0:
            y = xp.einsum("i,j->ij", y, b).sum(axis=1) * (1 / 64)
        elif k % 3 == 1:
            y = y - xp.amax(y) + xp.sum(y * y) * 1e-3
        else:
            y = xp.where(y > 0, y, -y)
    return y


STYLES = {
    "chain": (_chain, 100_000),
    "broadcast": (_broadcast, 50_000),
    "indexing": (_indexing, 30_000),
    "reduce": (_reduce, 25_000),
}


def _inputs(pt):
    x = pt.make_placeholder("x", (64,), np.float64)
    a = pt.make_placeholder("a", (64, 1), np.float64)
    b = pt.make_placeholder("b", (64,), np.float64)
    return x, a, b


def _timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def measure(style: str, scale: float = 1.0) -> dict[str, float]:
    import pytato_like as pt
    from pytato_like._traversal import topological_order

    build, steps = STYLES[style]
    steps = max(1, int(steps * scale))
    x, a, b = _inputs(pt)
    y, t_build = _timed(lambda: build(pt, x, a, b, steps))
    nodes = topological_order([y])
    n = len(nodes)

    def rehash():
        for node in nodes:
            hash((type(node), *node._field_values(), node.axes, node.tags))
    _, t_hash = _timed(rehash)

    copy = build(pt, *_inputs(pt), steps)
    equal, t_eq = _timed(lambda: copy == y)
    assert equal

    def round_trip():
        return pickle.loads(pickle.dumps(y, protocol=pickle.HIGHEST_PROTOCOL))
    restored, t_pickle = _timed(round_trip)
    assert restored.shape == y.shape

    rng = np.random.default_rng(0)
    ex, ea, eb = (rng.uniform(1, 2, s) for s in ((64,), (64, 1), (64,)))
    eager_steps = max(1, steps // 10)
    _, t_eager = _timed(lambda: build(np, ex, ea, eb, eager_steps))
    eager_ops = eager_steps * n / steps  # NumPy calls ~ lazy nodes per step

    us = 1e6
    return {
        "nodes": n,
        "build_us_per_node": t_build * us / n,
        "hash_us_per_node": t_hash * us / n,
        "equality_us_per_node": t_eq * us / n,
        "pickle_us_per_node": t_pickle * us / n,
        "numpy_eager_us_per_op": t_eager * us / eager_ops,
        "build_vs_numpy_eager": (t_build / n) / (t_eager / eager_ops),
    }


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a tenth of the nodes (for smoke tests)")
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0

    results = {style: measure(style, scale) for style in STYLES}
    header = (f"{'style':<10} {'nodes':>8} {'build':>7} {'hash':>7} {'==':>7} "
              f"{'pickle':>7} {'numpy':>7} {'build/numpy':>11}")
    print("µs per node (numpy: µs per eager op on 64-element arrays)")
    print(header)
    print("-" * len(header))
    for style, r in results.items():
        flag = "" if r["build_us_per_node"] <= TARGET_US_PER_NODE else "  > target"
        print(f"{style:<10} {r['nodes']:>8} {r['build_us_per_node']:>7.2f} "
              f"{r['hash_us_per_node']:>7.2f} {r['equality_us_per_node']:>7.2f} "
              f"{r['pickle_us_per_node']:>7.2f} {r['numpy_eager_us_per_op']:>7.2f} "
              f"{r['build_vs_numpy_eager']:>11.2f}{flag}")
    print(f"target: build <= {TARGET_US_PER_NODE} µs per node")
    return results


if __name__ == "__main__":
    main()
