"""The ``mpiexec`` MPI tests launch: the venv's (MPICH from PyPI, installed
by the bootstrap) or the one on PATH. Missing, it fails the test: the
project's set-up installs it, so a skip would hide a broken set-up.
:func:`run_ranks` launches a script of the repository on *n* ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytato_like.check_env import find_mpiexec


def mpiexec_path() -> str:
    found = find_mpiexec()
    if found is None:
        pytest.fail("mpiexec not found next to the Python executable or on PATH")
    return found


ROOT = Path(__file__).resolve().parent.parent


def run_ranks(n: int, script: Path, *args: str, timeout: float
              ) -> subprocess.CompletedProcess:
    """``mpiexec -n <n> python <script> <args>`` from the repository's root
    with it on PYTHONPATH, bounded by *timeout* seconds (output captured)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [mpiexec_path(), "-n", str(n), sys.executable, str(script), *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
        stdin=subprocess.DEVNULL)
