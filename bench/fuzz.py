"""Differential fuzzing: the loopy/OpenCL target against NumPy on random
DAGs from :func:`pytato_like.testing.make_random_dag`.

OpenCL compiles dominate the cost (~0.5 s each), so random programs are
checked in batches: the DAGs of one batch get their placeholders renamed
apart and are compiled as one program with all their outputs. A batch
that fails to compile or mismatches is rerun DAG by DAG to name the
culprits. Every mismatch prints the seed and the program.

Run: ``python -m bench.fuzz --count N [--seed S] [--batch B]``.
"""

from __future__ import annotations

import argparse
import time
import traceback

import numpy as np


def _rename_placeholders(outputs: dict, prefix: str) -> dict:
    """*outputs* with every placeholder ``p`` renamed ``prefix + p``
    (iterative rebuild in topological order)."""
    from pytato_like._traversal import topological_order
    from pytato_like.array import NamedArray, Placeholder, map_arrays_in_field
    order = topological_order(list(outputs.values()))
    new: dict[int, object] = {}
    for node in order:
        if isinstance(node, Placeholder):
            new[id(node)] = node.copy(name=prefix + node.name)
            continue
        if isinstance(node, NamedArray):  # pragma: no cover - not produced
            new[id(node)] = node
            continue
        changes = {}
        for name, kind in node._fields:
            value = getattr(node, name)
            mapped = map_arrays_in_field(value, kind, lambda a: new[id(a)])
            if mapped is not value:
                changes[name] = mapped
        new[id(node)] = node.copy(**changes) if changes else node
    return {name: new[id(a)] for name, a in outputs.items()}


def _check_batch(queue, dags: list) -> None:
    """Compile the DAGs of *dags* (``[(seed, dag)]``) as one program and
    check every output; raises on the first problem."""
    import pytato_like as pt
    outputs = {}
    inputs = {}
    for seed, dag in dags:
        prefix = f"s{seed}_"
        for name, ary in _rename_placeholders(dag.outputs, prefix).items():
            outputs[prefix + name] = ary
        for name, value in dag.inputs.items():
            inputs[prefix + name] = value
    prg = pt.generate_loopy(pt.make_dict_of_named_arrays(outputs))
    _, out = prg(queue, **inputs)
    for seed, dag in dags:
        prefix = f"s{seed}_"
        dag.check({name: out[prefix + name] for name in dag.outputs})


def fuzz(count: int, seed: int = 0, batch: int = 25, n_ops: int = 12,
         verbose: bool = True) -> dict:
    """Check *count* random DAGs (seeds ``seed .. seed + count - 1``);
    returns the counts and the failing seeds."""
    import pyopencl as cl

    from pytato_like.testing import make_random_dag
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    t0 = time.perf_counter()
    failures: dict[int, str] = {}
    n_checked = 0
    for start in range(seed, seed + count, batch):
        seeds = range(start, min(start + batch, seed + count))
        dags = []
        for s in seeds:
            try:
                with np.errstate(all="ignore"):
                    dags.append((s, make_random_dag(s, n_ops=n_ops)))
            except Exception:  # noqa: BLE001 - generator problems are not ours
                failures[s] = "generator: " + traceback.format_exc(limit=2)
        try:
            with np.errstate(all="ignore"):
                _check_batch(queue, dags)
        except Exception:  # noqa: BLE001 - narrow down to single DAGs
            for s, dag in dags:
                try:
                    with np.errstate(all="ignore"):
                        _check_batch(queue, [(s, dag)])
                except Exception:  # noqa: BLE001
                    failures[s] = (f"{traceback.format_exc(limit=3)}\n"
                                   f"program (seed {s}):\n{dag.program_text()}")
                    if verbose:
                        print(f"MISMATCH seed {s}:\n{failures[s]}\n")
        n_checked += len(dags)
        if verbose:
            print(f"{n_checked}/{count} DAGs checked, {len(failures)} failing, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    elapsed = time.perf_counter() - t0
    return {"count": count, "checked": n_checked, "failures": len(failures),
            "failing_seeds": sorted(failures), "seconds": elapsed,
            "details": failures}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--ops", type=int, default=12)
    args = parser.parse_args(argv)
    result = fuzz(args.count, args.seed, args.batch, args.ops)
    print(f"fuzz: {result['checked']} random DAGs, {result['failures']} "
          f"failing, {result['seconds']:.1f} s")
    if result["failing_seeds"]:
        print("failing seeds:", result["failing_seeds"])
    return {k: v for k, v in result.items() if k != "details"}


if __name__ == "__main__":
    main()
