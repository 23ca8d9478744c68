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

Options: ``--ranks N`` (default 2), ``--cells``, ``--steps``, ``--fields``
(see examples/distributed_heat.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
    cmd = [mpiexec, "-n", ranks, sys.executable, str(Path(__file__).resolve()),
           *argv]
    print(f"demo: launching {' '.join(cmd[:3])} {Path(sys.executable).name} "
          f"examples/demo.py {' '.join(argv)}".rstrip(), flush=True)
    try:
        return subprocess.run(cmd, timeout=600, stdin=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        print("demo: timed out after 600 s", file=sys.stderr)
        return 1


def _run(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    from mpi4py import MPI

    import distributed_heat

    from pytato_like.distributed import abort_on_error

    comm = MPI.COMM_WORLD
    defaults = ["--cells", "50000", "--steps", "20", "--fields", "2"]
    with abort_on_error(comm):
        status = distributed_heat.main(defaults + argv)
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
