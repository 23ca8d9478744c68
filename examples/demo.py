"""The main demo: a distributed heat-equation solver on 2 MPI ranks.

``python examples/demo.py`` (or ``make demo``) relaunches itself under
``mpiexec -n 2`` (the ``mpiexec`` next to the Python executable, else the
one on ``PATH``). Each rank builds a lazy DAG of 20 explicit steps of a 1-D
periodic heat equation on its half of the domain, with one-cell halo
exchanges every step; the DAG is partitioned into parts joined by
sends/receives, verified across ranks, compiled and executed. Rank 0
gathers the result, compares it with a serial NumPy run of the whole
domain, and prints a summary. The exit status is non-zero if anything
fails or the results disagree.

Before launching the ranks, the demo times the same computation on the
whole domain in this process -- serial NumPy and pytato_like (one loopy
program on all cores) -- and afterwards prints how the distributed run
compares (its steady time: the run after the first, which compiles).

The ranks exchange 10-cell halos every 10 steps (``--halo 10``): each
recomputes a few cells its neighbour also computes, for ten times fewer
messages and parts than one-cell halos every step (``--halo 1``).

Options: ``--ranks N`` (default 2), ``--cells``, ``--steps``, ``--fields``,
``--halo`` (see examples/distributed_heat.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: 10-cell halos, exchanged every 10 steps (see distributed_heat's --halo)
DEFAULTS = ["--cells", "50000", "--steps", "20", "--fields", "2", "--runs", "5",
            "--halo", "10"]


def _sizes(argv: list[str]) -> tuple[int, int, int]:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--cells", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--fields", type=int)
    args, _ = parser.parse_known_args(DEFAULTS + argv)
    return args.cells, args.steps, args.fields


def _one_process_times(n_total: int, n_steps: int, n_fields: int
                       ) -> tuple[float, float | None]:
    """Serial NumPy and (if OpenCL works) one-process pytato_like seconds
    on the whole domain."""
    sys.path.insert(0, str(HERE))
    import distributed_heat
    # pytato_like first: NumPy's measurement changes this process's
    # allocator settings (the ranks keep the defaults)
    try:
        one_s = distributed_heat.one_process_seconds(n_total, n_fields, n_steps)
    except Exception as exc:  # noqa: BLE001 -- the comparison is optional
        print(f"demo: no one-process pytato_like timing ({exc})")
        one_s = None
    numpy_s = distributed_heat.serial_numpy_seconds(n_total, n_fields, n_steps)
    return numpy_s, one_s


def _under_mpiexec() -> bool:
    return any(name in os.environ for name in
               ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"))


def _mpiexec() -> str | None:
    candidate = Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    return shutil.which("mpiexec")


def _relaunch(argv: list[str]) -> int:
    ranks = "2"
    if "--ranks" in argv:
        i = argv.index("--ranks")
        ranks = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    mpiexec = _mpiexec()
    if mpiexec is None:
        print("demo: mpiexec not found next to the Python executable or on "
              "PATH; run `make bootstrap` first", file=sys.stderr)
        return 2
    cells, steps, fields = _sizes(argv)
    numpy_s, one_s = _one_process_times(cells * int(ranks), steps, fields)
    cmd = [mpiexec, "-n", ranks, sys.executable, str(Path(__file__).resolve()),
           *argv]
    print(f"demo: launching {' '.join(cmd[:3])} {Path(sys.executable).name} "
          f"examples/demo.py {' '.join(argv)}".rstrip(), flush=True)
    try:
        proc = subprocess.run(cmd, timeout=600, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        print("demo: timed out after 600 s", file=sys.stderr)
        return 1
    print(proc.stdout, end="", flush=True)
    found = re.search(r"later run ([\d.]+) s", proc.stdout)
    if proc.returncode == 0 and found:
        dist_s = float(found[1])
        print(f"demo: on the whole domain ({cells * int(ranks)} cells, "
              f"{fields} fields, {steps} steps): {ranks} ranks "
              f"{dist_s * 1e3:.1f} ms; serial NumPy {numpy_s * 1e3:.1f} ms "
              f"({numpy_s / dist_s:.2f}x)" + (
                  "" if one_s is None else
                  f"; pytato_like in one process {one_s * 1e3:.1f} ms "
                  f"({one_s / dist_s:.2f}x)"), flush=True)
    return proc.returncode


def _run(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    from mpi4py import MPI

    import distributed_heat

    from pytato_like.distributed import abort_on_error

    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        status = distributed_heat.main(DEFAULTS + argv)
        if comm.Get_rank() == 0:
            print("demo: " + ("PASSED" if status == 0 else "FAILED"), flush=True)
    return status


def main() -> int:
    argv = sys.argv[1:]
    if _under_mpiexec():
        return _run(argv)
    return _relaunch(argv)


if __name__ == "__main__":
    sys.exit(main())
