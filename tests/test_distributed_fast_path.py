"""The fast paths of repeated distributed executions under real MPI
(``mpiexec -n 2 python tests/mpi/fast_parts.py``): the heat solver run
four times with changing inputs equals serial NumPy every time, part
programs replay their recorded launches, messages travel as sub-buffers of
one device buffer (no pack or unpack kernels) and sent values are computed
in place from the second execution on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi
pytest.importorskip("pyopencl")
pytest.importorskip("mpi4py")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "mpi" / "fast_parts.py"


def _mpiexec() -> str:
    candidate = Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpiexec not found next to the Python executable or on PATH")
    return found


def test_repeated_executions_take_the_fast_paths_and_match_numpy():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, str(SCRIPT)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert f"OK fast_parts rank {rank}" in proc.stdout, proc.stdout
