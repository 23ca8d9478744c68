"""The ``mpiexec`` MPI tests launch: the venv's (MPICH from PyPI, installed
by the bootstrap) or the one on PATH. Missing, it fails the test: the
project's set-up installs it, so a skip would hide a broken set-up."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def mpiexec_path() -> str:
    candidate = Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpiexec not found next to the Python executable or on PATH")
    return found
