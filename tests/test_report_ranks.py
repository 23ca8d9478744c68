"""Under MPI only rank 0 reports on stderr unless asked
(``PYTATO_LIKE_REPORT_RANKS``), and the rank is found without importing
mpi4py (:mod:`pytato_like.target.loopy.report`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy import report
from tests._mpiexec import mpiexec_path

pytest.importorskip("pyopencl")

_LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK",
                       "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE",
                       "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE",
                       "PYTATO_LIKE_REPORT", "PYTATO_LIKE_REPORT_RANKS")

# a compile with the full report on; prints whether mpi4py got imported
_COMPILE_SCRIPT = """
import sys
import numpy as np
import pytato_like as pt
x = pt.make_placeholder("x", (10,), np.float64)
pt.generate_loopy(pt.sinh(x) + 7)
print("mpi4py imported:", "mpi4py" in sys.modules)
"""


def _clean_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARIABLES}
    env["PYTATO_LIKE_CACHE_DIR"] = str(tmp_path)
    env["PYTATO_LIKE_REPORT"] = "1"
    env.update(extra)
    return env


def _report_lines(env: dict[str, str]) -> tuple[list[str], str]:
    res = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines()
             if line.startswith("pytato_like.")]
    return lines, res.stdout


@pytest.fixture
def no_launcher(monkeypatch):
    for name in _LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # an MPI that an earlier test of the session initialised answers first:
    # hide it, as in a process that never imported mpi4py
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)


def test_rank_from_mpich_environment(no_launcher, monkeypatch):
    monkeypatch.setenv("PMI_RANK", "3")
    monkeypatch.setenv("PMI_SIZE", "4")
    assert report.mpi_rank() == (3, 4)


def test_rank_from_open_mpi_environment(no_launcher, monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert report.mpi_rank() == (1, 2)


def test_no_rank_outside_mpi(no_launcher):
    assert report.mpi_rank() is None


@pytest.mark.parametrize(("value", "expected"), [
    (None, frozenset({0})), ("all", None), ("0,3", frozenset({0, 3})),
    (" 2 ", frozenset({2}))])
def test_reporting_ranks_setting(no_launcher, monkeypatch, value, expected):
    if value is not None:
        monkeypatch.setenv("PYTATO_LIKE_REPORT_RANKS", value)
    assert report.reporting_ranks() == expected


@pytest.mark.parametrize("value", ["", "first", "0;1", "-1"])
def test_malformed_reporting_ranks_is_a_typed_error(monkeypatch, value):
    monkeypatch.setenv("PYTATO_LIKE_REPORT_RANKS", value)
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_REPORT_RANKS"):
        report.reporting_ranks()


def test_rank_0_reports_with_its_rank(tmp_path):
    lines, out = _report_lines(_clean_env(tmp_path, PMI_RANK="0", PMI_SIZE="2"))
    assert any("[rank 0]" in line and "compiled" in line for line in lines)
    assert "mpi4py imported: False" in out


def test_other_ranks_are_quiet_by_default(tmp_path):
    lines, out = _report_lines(_clean_env(tmp_path, PMI_RANK="1", PMI_SIZE="2"))
    assert lines == []
    assert "mpi4py imported: False" in out


def test_other_ranks_report_when_asked(tmp_path):
    lines, _ = _report_lines(_clean_env(
        tmp_path, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2",
        PYTATO_LIKE_REPORT_RANKS="all"))
    assert any("[rank 1]" in line for line in lines)


@pytest.mark.mpi
def test_mpiexec_two_ranks_report_once(tmp_path):
    # the real launcher: each rank compiles the same program with the
    # report on; only rank 0's lines reach stderr
    env = _clean_env(tmp_path)
    script = tmp_path / "compile.py"
    script.write_text(_COMPILE_SCRIPT)
    res = subprocess.run([mpiexec_path(), "-n", "2", sys.executable,
                          str(script)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines()
             if line.startswith("pytato_like.")]
    # (one report's head; a slow compile adds a progress line of rank 0's)
    compiled = [line for line in lines if re.search(r"compiled \(", line)]
    assert len(compiled) == 1 and "[rank 0]" in compiled[0]
    assert not [line for line in lines if "[rank 1]" in line]
    assert res.stdout.count("mpi4py imported: False") == 2
