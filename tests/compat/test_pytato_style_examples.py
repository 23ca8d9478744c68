"""Issue 9, "Must show": the programs in examples/pytato_style/, written as
pytato users write them, run unchanged and pass their own checks against
NumPy (each exits non-zero on a mismatch). Each runs as its own process,
the distributed one under ``mpiexec -n 2``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _mpiexec import mpiexec_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "pytato_style"

#: example -> a line its successful run prints
SERIAL = {
    "demo": "demo: all results match NumPy",
    "einsum": "einsum: 6 contractions match numpy.einsum",
    "reductions": "reductions: 7 reductions match NumPy",
    "visualization": "visualization: drawings written, result matches NumPy",
}


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(tmp_path)          # show_* write their files here
    env.setdefault("PYOPENCL_CTX", "0")    # as a user picks a device
    return env


def _run(cmd: list[str], tmp_path: Path, timeout: float
         ) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env=_env(tmp_path),
                          stdin=subprocess.DEVNULL)


def test_every_example_is_exercised():
    assert {p.stem for p in EXAMPLES.glob("*.py")} == {*SERIAL, "distributed"}


@pytest.mark.opencl
@pytest.mark.parametrize("name", sorted(SERIAL))
def test_example_runs_and_matches_numpy(name, tmp_path):
    pytest.importorskip("pyopencl")
    proc = _run([sys.executable, str(EXAMPLES / f"{name}.py")], tmp_path,
                timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert SERIAL[name] in proc.stdout, proc.stdout


@pytest.mark.opencl
def test_visualization_example_writes_its_files(tmp_path):
    pytest.importorskip("pyopencl")
    proc = _run([sys.executable, str(EXAMPLES / "visualization.py")],
                tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dot = (tmp_path / "graph.dot").read_text()
    assert dot.startswith("digraph") and "array" in dot
    if shutil.which("dot"):
        assert "<svg" in (tmp_path / "graph.svg").read_text()


@pytest.mark.mpi
@pytest.mark.opencl
def test_distributed_example_on_two_ranks(tmp_path):
    pytest.importorskip("pyopencl")
    pytest.importorskip("mpi4py")
    proc = _run([mpiexec_path(), "-n", "2", sys.executable,
                 str(EXAMPLES / "distributed.py")], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "distributed: results on all 2 ranks match mpi4py" in proc.stdout
