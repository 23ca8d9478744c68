"""Repeat the ring of issue 38 over separate launches and count the runs
that were correct, killed or hung: ``python tests/mpi/ring_tries.py
[--ranks 3 4 5 8] [--tries 4] [--shapes 1/1000/4 ...]``.

Each try is one ``mpiexec -n N python tests/mpi/ranks.py ring --fields F
--cells C --steps S`` (four executions, every rank compares with NumPy bit
for bit) with a time limit; a run counts as correct when it exits with
status 0, every rank printed its ``OK`` line and MPICH reported no killed
process. Not a pytest module (a try costs a launch); the tests in
``tests/test_ranks_mpi.py`` run one launch per rank count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from pytato_like.check_env import find_mpiexec

ROOT = Path(__file__).resolve().parent.parent.parent
RANKS = ROOT / "tests" / "mpi" / "ranks.py"
ISSUE_SHAPES = ["1/1000/4", "1/1000/2", "2/1000/2", "4/1e5/8"]


def mpiexec() -> str:
    return find_mpiexec() or "mpiexec"


def one_try(n: int, shape: str, target: str, limit: float,
            extra: list[str]) -> tuple[str, float]:
    fields, cells, steps = shape.split("/")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [mpiexec(), "-n", str(n), sys.executable, str(RANKS), "ring",
             "--fields", fields, "--cells", cells, "--steps", steps,
             "--target", target, *extra],
            capture_output=True, text=True, timeout=limit, cwd=ROOT, env=env,
            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "hung", time.monotonic() - start
    seconds = time.monotonic() - start
    output = proc.stdout + proc.stderr
    if "BAD TERMINATION" in output or proc.returncode in (9, -9, 137):
        return "killed", seconds
    ok = proc.returncode == 0 and all(
        f"OK ring rank {r}\n" in proc.stdout for r in range(n))
    if not ok:
        sys.stderr.write(output[-2000:])
    return ("correct" if ok else f"failed ({proc.returncode})"), seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[3, 4, 5, 8])
    parser.add_argument("--tries", type=int, default=4)
    parser.add_argument("--shapes", nargs="+", default=ISSUE_SHAPES,
                        help="fields/cells per rank/steps")
    parser.add_argument("--target", default="loopy",
                        choices=["loopy", "numpy"])
    parser.add_argument("--limit", type=float, default=300,
                        help="seconds before a try counts as hung")
    parser.add_argument("--exit-exchange", action="store_true",
                        help="pass --stagger 0.1 --exit-exchange to the "
                             "ring (see tests/mpi/ranks.py)")
    args = parser.parse_args(argv)
    extra = ["--stagger", "0.1", "--exit-exchange"] if args.exit_exchange \
        else []
    all_correct = True
    print(f"{'ranks':>5} {'shape':>10}  outcomes of {args.tries} launches "
          "(seconds each)")
    for n in args.ranks:
        for shape in args.shapes:
            outcomes = [one_try(n, shape, args.target, args.limit, extra)
                        for _ in range(args.tries)]
            all_correct &= all(o == "correct" for o, _ in outcomes)
            print(f"{n:>5} {shape:>10}  " + ", ".join(
                f"{o} ({s:.0f})" for o, s in outcomes), flush=True)
    print("every run correct" if all_correct else "NOT every run correct")
    return 0 if all_correct else 1


if __name__ == "__main__":
    sys.exit(main())
