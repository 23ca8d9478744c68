"""Repeated distributed executions (tests/mpi/repeated_executions.py) on 2
and 3 ranks: four executions of a ring exchange equal serial NumPy; the
later ones run through the scheduler's prepared mode with the steady hooks
and call the part programs through their one call path (replays, frozen
calls)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _mpiexec import run_ranks

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mpi4py")
pytest.importorskip("pyopencl")


@pytest.mark.parametrize("n_ranks", [2, 3])
def test_repeated_executions_equal_numpy(n_ranks):
    proc = run_ranks(n_ranks, ROOT / "tests" / "mpi" / "repeated_executions.py",
                     timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(n_ranks):
        assert f"OK repeated rank {rank}" in proc.stdout, proc.stdout + proc.stderr
