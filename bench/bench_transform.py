"""Cost of the transforms and analyses per node, and how it scales.

The DAG has width 4 and depth ``D``: four running arrays, and at each level
``new_k = old_k + old_(k+1 mod 4)``, so every node has two users and there
are ``4 D + 4`` nodes. For ``D`` = 1 000, 10 000 and 100 000 the table gives
the time per node of building the DAG, :func:`~pytato_like.analysis.get_num_nodes`,
:class:`~pytato_like.transform.CopyMapper`,
:class:`~pytato_like.transform.InputGatherer`,
:class:`~pytato_like.transform.TopoSortMapper`,
:class:`~pytato_like.equality.EqualityComparer` (against a DAG rebuilt
separately, so no node is shared) and
:func:`~pytato_like.materialize_with_mpms` (which here stores every node
but the outputs, so it also rebuilds the DAG), and the ratio of the time at
``10 D`` to the time at ``D``: linear scaling gives 10 (the targets: at most
12, and at ``D`` = 1 000 every step under 0.2 s). Times are CPU seconds of
this process (best of 3 below ``D`` = 100 000), so that other work on a
shared machine does not count.

Run: ``.venv/bin/python -m bench.bench_transform [--depths 1000 10000 100000]``.
"""

from __future__ import annotations

import argparse
import gc
import time

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like.analysis import get_num_nodes
from pytato_like.equality import EqualityComparer

WIDTH = 4


def build(depth: int) -> pt.DictOfNamedArrays:
    arrays = [pt.make_placeholder(f"a{k}", (8,)) for k in range(WIDTH)]
    for _ in range(depth):
        arrays = [arrays[k] + arrays[(k + 1) % WIDTH] for k in range(WIDTH)]
    return pt.make_dict_of_named_arrays({f"o{k}": a for k, a in enumerate(arrays)})


def _copy(dag):
    return tr.CopyMapper()(dag)


def _inputs(dag):
    return tr.InputGatherer()(dag)


def _toposort(dag):
    mapper = tr.TopoSortMapper()
    mapper(dag)
    return mapper.topological_order


STEPS = [
    ("build", None),
    ("get_num_nodes", get_num_nodes),
    ("CopyMapper", _copy),
    ("InputGatherer", _inputs),
    ("TopoSortMapper", _toposort),
    ("equality (rebuilt copy)", None),
    ("materialize_with_mpms", pt.materialize_with_mpms),
]


def _time(fn, repeat: int) -> float:
    # CPU time of this process: the machine is shared, and wall time would
    # measure the other users' load as much as ours
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def measure(depth: int, repeat: int) -> dict[str, float]:
    """Seconds per step for one depth (best of *repeat*)."""
    times: dict[str, float] = {}
    dag = None

    def do_build():
        nonlocal dag
        dag = build(depth)

    times["build"] = _time(do_build, repeat)
    twin = build(depth)
    for name, fn in STEPS:
        if name == "build":
            continue
        if name.startswith("equality"):
            def step():
                assert EqualityComparer()(dag, twin)
        else:
            def step(fn=fn):
                fn(dag)
        times[name] = _time(step, repeat)
    # sanity: the figures are about a DAG of the advertised size
    assert get_num_nodes(dag) == WIDTH * depth + WIDTH
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+",
                        default=[1_000, 10_000, 100_000])
    args = parser.parse_args(argv)
    depths = sorted(args.depths)

    results = {}
    for depth in depths:
        repeat = 3 if depth <= 10_000 else 1
        results[depth] = measure(depth, repeat)

    nodes = {d: WIDTH * d + WIDTH for d in depths}
    header = f"{'step':<26}" + "".join(
        f"{f'D={d}: s':>14}{'us/node':>9}" for d in depths)
    ratio_cols = [(a, b) for a, b in zip(depths, depths[1:], strict=False)]
    header += "".join(f"{f'x{b // a} nodes':>13}" for a, b in ratio_cols)
    print(f"width {WIDTH}, every node has two users; CPU seconds; time "
          "ratios should be close to the node ratio (linear)")
    print(header)
    figures: dict = {"nodes": nodes, "seconds": {}, "us_per_node": {},
                     "scaling": {}}
    for name, _ in STEPS:
        row = f"{name:<26}"
        for d in depths:
            t = results[d][name]
            row += f"{t:>14.4f}{t / nodes[d] * 1e6:>9.2f}"
            figures["seconds"].setdefault(name, {})[d] = t
            figures["us_per_node"].setdefault(name, {})[d] = t / nodes[d] * 1e6
        for a, b in ratio_cols:
            ratio = results[b][name] / results[a][name]
            row += f"{ratio:>13.2f}"
            figures["scaling"].setdefault(name, {})[(a, b)] = ratio
        print(row)
    if depths[0] == 1_000:
        worst = max(results[1_000].values())
        print(f"slowest step at D=1000: {worst:.3f} s (target < 0.2 s)")
    return figures


if __name__ == "__main__":
    main()
