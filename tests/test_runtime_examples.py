"""The runtime examples run and pass their own checks against NumPy."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("target", ["numpy", "auto"])
def test_bufferizer_monitor_matches_numpy(capsys, target):
    pytest.importorskip("pyopencl")
    example = load("bufferizer_monitor")
    # 11 steps in batches of 4: two full-hook drains and a final partial one
    assert example.main(["--n", "16", "--steps", "11", "--batch", "4",
                         "--target", target]) == 0
    out = capsys.readouterr().out
    assert "batch sizes [4, 4, 3]" in out
    assert "PASSED" in out
