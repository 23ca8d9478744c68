"""Launching a benchmark's measurement in other processes.

The distributed benchmarks run their own module under ``mpiexec`` in
worker mode and read one ``BENCH_JSON <json>`` line back
(:func:`run_mpi_worker`); the cold-start and compile-scale benchmarks run
fresh processes whose caches (ours, PoCL's, loopy's and pyopencl's under
``XDG_CACHE_HOME``) all start empty (:func:`empty_caches_env`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytato_like.check_env import find_mpiexec

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "BENCH_JSON "


def mpiexec_path() -> str:
    """The ``mpiexec`` next to this Python (the venv's MPICH), else on PATH."""
    found = find_mpiexec()
    if found is None:
        raise RuntimeError("mpiexec not found next to Python or on PATH")
    return found


def run_mpi_worker(ranks: int, module: str, args: list[str],
                   what: str) -> Any:
    """Run ``python -m <module> --worker <args>`` on *ranks* MPI ranks and
    return the JSON its rank 0 printed after :data:`RESULT_PREFIX`; raise
    with both output streams (*what* names the run) if it failed."""
    cmd = [mpiexec_path(), "-n", str(ranks), sys.executable, "-m", module,
           "--worker", *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=3600, stdin=subprocess.DEVNULL)
    line = next((ln for ln in proc.stdout.splitlines()
                 if ln.startswith(RESULT_PREFIX)), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{what} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(line[len(RESULT_PREFIX):])


def empty_caches_env(folder: str) -> dict[str, str]:
    """This process's environment with every compile cache in a fresh
    subfolder of *folder* (a "cold" start) and our reports off.

    PoCL's folder is the one the package gives PoCL when the user names
    none, ``<PYTATO_LIKE_CACHE_DIR>/pocl`` (empty too), as a user who sets
    nothing has it: that folder is the package's to check, so a warm start
    loads the binaries saved by the cold run. A ``POCL_CACHE_DIR`` in this
    process's environment (the user's, or the one the package set here on
    import) is not passed on."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("POCL_CACHE_DIR", "PYTATO_LIKE_POCL_CACHE_DIR")}
    return dict(env,
                PYTATO_LIKE_CACHE_DIR=os.path.join(folder, "pytato_like"),
                # loopy's and pyopencl's own caches start empty too
                XDG_CACHE_HOME=os.path.join(folder, "xdg"),
                PYTATO_LIKE_REPORT="0")


def byte_compile_package() -> str:
    """Compile the package's modules to bytecode (``__pycache__``) before
    fresh processes are timed, as ``pip install`` does for an installed
    package. Without it, an editable checkout run with
    ``PYTHONDONTWRITEBYTECODE`` set (as on this project's machines)
    compiles every module from source in every process: 0.2 s more for a
    warm start of ``bench_cold_start``. A line saying what was done."""
    import compileall
    import py_compile
    compileall.compile_dir(str(ROOT / "pytato_like"), quiet=1,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return ("byte-compiled pytato_like first, as an install does"
            + (f" (PYTHONDONTWRITEBYTECODE={flag} here)" if flag else ""))
