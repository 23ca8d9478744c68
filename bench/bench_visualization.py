"""Cost of drawing a DAG, per node and relative to walking it.

For an update chain ``y = 0.5*y + 1.0`` (two nodes per level) and a wide
random DAG, times :func:`pytato_like.get_dot_graph` and
:func:`pytato_like.get_ascii_graph` against two baselines measured in the
same run: a bare :func:`topological_order` walk and ``repr`` (the
stringifier, which also formats every node). Rendering the dot source to
SVG with graphviz is timed for a small graph only: it is graphviz's cost,
not ours.

Run: ``.venv/bin/python -m bench.bench_visualization [--levels N]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time

import pytato_like as pt
from pytato_like._traversal import topological_order


def _best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _chain(levels: int):
    y = pt.make_placeholder("x", (16,))
    for _ in range(levels):
        y = 0.5 * y + 1.0
    return y


def _wide(n_ops: int, seed: int = 0):
    rng = random.Random(seed)
    pool = [pt.make_placeholder(f"in{i}", (8,)) for i in range(64)]
    for _ in range(n_ops):
        a, b = rng.choice(pool), rng.choice(pool)
        pool.append(a * b if rng.random() < 0.5 else a + pt.sin(b))
    return pt.make_dict_of_named_arrays(
        {f"o{i}": ary for i, ary in enumerate(pool[-32:])})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=20_000)
    args = parser.parse_args(argv)

    figures: dict = {}
    rows = []
    for name, result in (("chain", _chain(args.levels)),
                         ("wide random", _wide(args.levels))):
        roots = (list(result._data.values())
                 if isinstance(result, pt.DictOfNamedArrays) else [result])
        nnodes = len(topological_order(roots))
        t_walk = _best_of(lambda: topological_order(roots))
        t_repr = _best_of(lambda: repr(result))
        t_dot = _best_of(lambda: pt.get_dot_graph(result))
        t_ascii = _best_of(lambda: pt.get_ascii_graph(result, use_color=False))
        figures[name] = {
            "nodes": nnodes,
            "dot_us_per_node": 1e6 * t_dot / nnodes,
            "ascii_us_per_node": 1e6 * t_ascii / nnodes,
            "dot_vs_walk": t_dot / t_walk,
            "ascii_vs_walk": t_ascii / t_walk,
            "dot_vs_repr": t_dot / t_repr,
            "ascii_vs_repr": t_ascii / t_repr,
        }
        rows.append((name, figures[name]))

    print(f"{'DAG':<12} {'nodes':>8} {'dot us/node':>12} {'ascii us/node':>14} "
          f"{'dot/walk':>9} {'ascii/walk':>11} {'dot/repr':>9} {'ascii/repr':>11}")
    for name, f in rows:
        print(f"{name:<12} {f['nodes']:>8} {f['dot_us_per_node']:>12.1f} "
              f"{f['ascii_us_per_node']:>14.1f} {f['dot_vs_walk']:>9.1f} "
              f"{f['ascii_vs_walk']:>11.1f} {f['dot_vs_repr']:>9.2f} "
              f"{f['ascii_vs_repr']:>11.2f}")

    if shutil.which("dot"):
        from pytato_like.visualization import render_svg
        small = _chain(50)
        source = pt.get_dot_graph(small)
        t_svg = _best_of(lambda: render_svg(source), repeat=1)
        t_src = _best_of(lambda: pt.get_dot_graph(small))
        figures["svg_101_nodes"] = {"graphviz_s": t_svg,
                                    "graphviz_vs_dot_source": t_svg / t_src}
        print(f"graphviz dot -Tsvg on 101 nodes: {t_svg * 1e3:.0f} ms "
              f"({t_svg / t_src:.0f}x the time to write its dot source)")
    return figures


if __name__ == "__main__":
    main()
