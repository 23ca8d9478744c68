"""Does the frame-size trick in :mod:`pytato_like.transform._graph` pay?

:func:`~pytato_like.transform._graph.with_stack_headroom` runs whole-DAG
loops through two frames with large local arrays, so that the loop starts
with room left in CPython's current frame-stack chunk. Without it, a loop
that happens to start just below a chunk boundary maps and unmaps a chunk
on every iteration; whether that happens depends only on how deep the
caller's stack is. So the benchmark maps one DAG (a chain of ``N`` additions)
from a range of caller stack depths (``0 .. 3 * 40`` extra frames of
varying size), once with the trick and once with it replaced by a plain
call, and reports the median and the worst time per node of a
:class:`~pytato_like.transform.CopyMapper` and of a
:class:`~pytato_like.transform.CombineMapper`-based walk
(:func:`~pytato_like.analysis.get_num_nodes`) over those depths. The trick
pays if the worst case without it is clearly slower.

Run: ``.venv/bin/python -m bench.bench_graph_walk [--nodes 20000]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like.analysis import get_num_nodes
from pytato_like.transform import _graph


def build(n: int) -> pt.Array:
    x = pt.make_placeholder("x", (4,))
    y = x
    for _ in range(n):
        y = y + 1.0
    return y


def _at_depth(depth: int, pad: int, fn):
    """Call *fn* under *depth* extra frames, each with *pad* local slots."""
    if depth == 0:
        return fn()
    # locals make the frame larger and shift where the loop's frames land
    loc = [None] * pad  # noqa: F841 -- the list itself, not its frame size
    return _at_depth(depth - 1, pad, fn)


def _time_once(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run(nodes: int, depths: range) -> dict[str, dict[str, list[float]]]:
    dag = build(nodes)
    jobs = {
        "CopyMapper": lambda: tr.CopyMapper()(dag),
        "get_num_nodes": lambda: get_num_nodes(dag),
    }
    real_spacer = _graph._spacer

    def plain(_spacer, fn, *args):
        return fn(*args)

    results: dict[str, dict[str, list[float]]] = {}
    for label, spacer in (("with trick", real_spacer), ("plain call", plain)):
        _graph._spacer = spacer
        try:
            for name, job in jobs.items():
                times = []
                for depth in depths:
                    times.append(min(
                        _at_depth(depth, 1 + depth % 7, lambda: _time_once(job))
                        for _ in range(2)) / nodes)
                results.setdefault(name, {})[label] = times
        finally:
            _graph._spacer = real_spacer
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--max-depth", type=int, default=120)
    parser.add_argument("--step", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, chain of {args.nodes} additions, "
          f"caller depths 0..{args.max_depth} step {args.step}")
    print(f"{'pass':<15}{'variant':<13}{'median us/node':>16}{'worst us/node':>15}")
    results = run(args.nodes, range(0, args.max_depth + 1, args.step))
    for name, by_label in results.items():
        for label, times in by_label.items():
            print(f"{name:<15}{label:<13}{1e6 * statistics.median(times):>16.2f}"
                  f"{1e6 * max(times):>15.2f}")


if __name__ == "__main__":
    main()
