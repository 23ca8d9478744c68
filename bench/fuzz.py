"""Differential fuzzing: the NumPy target and the loopy/OpenCL target
against eager NumPy on random DAGs from
:func:`pytato_like.testing.make_random_dag`.

OpenCL compiles dominate the cost (code generation of ~0.1 s per kernel),
so random programs are checked in batches: the DAGs of one batch get their
placeholders renamed apart and are compiled as one program with all their
outputs. A batch that fails to compile or mismatches is halved until
the culprits are found. Programs NumPy raises on (a negative integer power,
an out-of-range gather: ``--errors`` percent of them) must raise the typed
error on both targets; they run one program each, since the first failing
check stops a program. Every mismatch prints the seed and the program.

Long runs are chunked by seed ranges: with ``--out DIR`` every batch
writes ``DIR/seeds_<first>_<last>.json`` when done, a rerun skips the
batches already written (so an interrupted run resumes and its finished
part counts), and ``--summary DIR`` adds the chunks up.

Run: ``python -m bench.fuzz --count N [--seed S] [--batch B] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
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
    """Compile the DAGs of *dags* (``[(seed, dag)]``, programs that must
    run) as one program and check every output; raises on the first
    problem."""
    import pytato_like as pt
    if not dags:
        return
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


def _check_numpy_target(dag) -> None:
    """The NumPy target on *dag*: NumPy's values, or the expected error."""
    import pytato_like as pt
    prg = pt.generate_numpy(dag.result)
    if dag.expected_error is not None:
        dag.check_raises(lambda: prg(**dag.inputs))
    else:
        dag.check(prg(**dag.inputs))


def _check_failing_dag(queue, dag) -> None:
    """The loopy target on a program NumPy raises on: the typed error."""
    import pytato_like as pt
    prg = pt.generate_loopy(dag.result)
    dag.check_raises(lambda: prg(queue, **dag.inputs))


def _problem(seed: int, dag, where: str) -> str:
    return (f"{where}: {traceback.format_exc(limit=3)}\n"
            f"program (seed {seed}):\n{dag.program_text()}")


def check_seeds(queue, seeds, n_ops: int = 12, error_percent: int = 0,
                verbose: bool = True) -> dict:
    """Check the random DAGs of *seeds* on both targets; returns
    ``{"checked", "raising", "failures": {seed: text}}`` (*raising*: how
    many programs had to raise)."""
    from pytato_like.testing import make_random_dag
    failures: dict[int, str] = {}
    good, raising = [], []
    for s in seeds:
        try:
            with np.errstate(all="ignore"):
                dag = make_random_dag(s, n_ops=n_ops, error_percent=error_percent)
        except Exception:  # noqa: BLE001 - a generator problem: reported too
            failures[s] = "generator: " + traceback.format_exc(limit=3)
            continue
        try:
            with np.errstate(all="ignore"):
                _check_numpy_target(dag)
        except Exception:  # noqa: BLE001
            failures[s] = _problem(s, dag, "NumPy target")
        (raising if dag.expected_error is not None else good).append((s, dag))
    # a failing group is split in halves until single DAGs are left:
    # one culprit in 100 costs ~14 compiles of shrinking size, not 100
    pending = [good]
    while pending:
        group = pending.pop()
        if not group:
            continue
        try:
            with np.errstate(all="ignore"):
                _check_batch(queue, group)
        except Exception:  # noqa: BLE001 - narrow down
            if len(group) == 1:
                s, dag = group[0]
                failures[s] = _problem(s, dag, "loopy target")
            else:
                half = len(group) // 2
                pending += [group[:half], group[half:]]
    for s, dag in raising:
        try:
            with np.errstate(all="ignore"):
                _check_failing_dag(queue, dag)
        except Exception:  # noqa: BLE001
            failures[s] = _problem(s, dag, "loopy target")
    if verbose:
        for s in sorted(failures):
            print(f"MISMATCH seed {s}:\n{failures[s]}\n", flush=True)
    return {"checked": len(good) + len(raising), "raising": len(raising),
            "failures": failures}


def _chunk_path(out_dir: str, first: int, last: int) -> str:
    return os.path.join(out_dir, f"seeds_{first}_{last}.json")


def fuzz(count: int, seed: int = 0, batch: int = 25, n_ops: int = 12,
         verbose: bool = True, error_percent: int = 0,
         out_dir: str | None = None) -> dict:
    """Check *count* random DAGs (seeds ``seed .. seed + count - 1``) in
    batches of *batch*; returns the counts and the failing seeds. With
    *out_dir*, batches already recorded there are skipped and new ones
    recorded."""
    import pyopencl as cl

    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    t0 = time.perf_counter()
    failures: dict[int, str] = {}
    n_checked = n_raising = n_skipped = 0
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
    for start in range(seed, seed + count, batch):
        seeds = range(start, min(start + batch, seed + count))
        path = (_chunk_path(out_dir, seeds[0], seeds[-1])
                if out_dir is not None else None)
        if path is not None and os.path.exists(path):
            n_skipped += len(seeds)
            continue
        result = check_seeds(queue, seeds, n_ops, error_percent, verbose)
        failures.update(result["failures"])
        n_checked += result["checked"]
        n_raising += result["raising"]
        if path is not None:
            with open(path + ".tmp", "w") as f:
                json.dump({"first": seeds[0], "last": seeds[-1], "n_ops": n_ops,
                           "error_percent": error_percent,
                           "checked": result["checked"],
                           "raising": result["raising"],
                           "failures": {str(k): v for k, v
                                        in result["failures"].items()}}, f)
            os.replace(path + ".tmp", path)   # a chunk is whole or absent
        if verbose:
            print(f"{n_checked + n_skipped}/{count} DAGs done ({n_skipped} "
                  f"recorded before, {n_raising} had to raise), "
                  f"{len(failures)} failing, {time.perf_counter() - t0:.1f} s",
                  flush=True)
    elapsed = time.perf_counter() - t0
    return {"count": count, "checked": n_checked, "skipped": n_skipped,
            "raising": n_raising, "failures": len(failures),
            "failing_seeds": sorted(failures), "seconds": elapsed,
            "details": failures}


def summarize(out_dir: str) -> dict:
    """Totals over the chunks recorded in *out_dir*."""
    checked = raising = 0
    failing: list[int] = []
    seeds: list[tuple[int, int]] = []
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith("seeds_") and name.endswith(".json")):
            continue
        with open(os.path.join(out_dir, name)) as f:
            chunk = json.load(f)
        checked += chunk["checked"]
        raising += chunk["raising"]
        failing += [int(s) for s in chunk["failures"]]
        seeds.append((chunk["first"], chunk["last"]))
    return {"checked": checked, "raising": raising, "failing_seeds": sorted(failing),
            "chunks": len(seeds),
            "seed_ranges": sorted(seeds)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--ops", type=int, default=12)
    parser.add_argument("--errors", type=int, default=3,
                        help="percent of programs NumPy raises on")
    parser.add_argument("--out", default=None,
                        help="directory of per-batch results (resumable)")
    parser.add_argument("--summary", default=None, metavar="DIR",
                        help="only add up the results recorded in DIR")
    args = parser.parse_args(argv)
    if args.summary:
        total = summarize(args.summary)
        print(f"fuzz: {total['checked']} random DAGs recorded in "
              f"{total['chunks']} chunks ({total['raising']} had to raise), "
              f"{len(total['failing_seeds'])} failing")
        if total["failing_seeds"]:
            print("failing seeds:", total["failing_seeds"])
        return total
    # the codegen logger reports every kernel of a big batch
    logging.getLogger("pytato_like").setLevel(logging.WARNING)
    result = fuzz(args.count, args.seed, args.batch, args.ops,
                  error_percent=args.errors, out_dir=args.out)
    print(f"fuzz: {result['checked']} random DAGs checked ({result['raising']} "
          f"had to raise, {result['skipped']} recorded before), "
          f"{result['failures']} failing, {result['seconds']:.1f} s")
    if result["failing_seeds"]:
        print("failing seeds:", result["failing_seeds"])
    return {k: v for k, v in result.items() if k != "details"}


if __name__ == "__main__":
    main()
