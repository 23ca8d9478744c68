"""PoCL's compiler loaded in the background while a cold compile generates
code (:mod:`pytato_like.target.loopy.pocl_warmup`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from pytato_like.target.loopy import pocl_warmup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = r"""
import json, os, sys
import numpy as np
import pyopencl as cl
import pytato_like as pt
from pytato_like.target.loopy import pocl_warmup
queue = cl.CommandQueue(cl.create_some_context(interactive=False))
x = pt.make_placeholder("x", (1000,), np.float64)
prg = pt.generate_loopy(2 * x + 1)
started = pocl_warmup._THREAD is not None
pocl_warmup.wait_for_warmup()
data = np.linspace(0, 1, 1000)
_, (out,) = prg(queue, x=data)
# a second program: no second warm-up
prg2 = pt.generate_loopy(3 * x)
left = []
folder = os.environ.get("POCL_CACHE_DIR")
for root, dirs, files in os.walk(folder):
    for f in files:
        if f == "program.bc":
            with open(os.path.join(root, f), "rb") as fh:
                if b"_pytato_like_warmup" in fh.read():
                    left.append(root)
print(json.dumps({"started": started, "seconds": pocl_warmup.warmup_seconds,
                  "equal": bool(np.array_equal(out, 2 * data + 1)),
                  "second": pocl_warmup.start_compiler_warmup(),
                  "warmup_entries_left": len(left),
                  "platform": queue.device.platform.name}))
"""


def _run(env_changes: dict[str, str | None], tmp_path) -> dict:
    env = dict(os.environ)
    env.update(PYTATO_LIKE_CACHE_DIR=str(tmp_path / "ours"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTATO_LIKE_REPORT="0")
    env.pop("POCL_CACHE_DIR", None)
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cold_compile_warms_pocl_and_removes_its_entry(tmp_path):
    # the package's own PoCL folder: a source new to PoCL, its entry removed
    info = _run({}, tmp_path)
    if "portable computing language" not in info["platform"].lower():
        pytest.fail(f"the test machine's OpenCL is PoCL, not {info['platform']}")
    assert info["started"] is True
    assert info["seconds"] is not None and info["seconds"] > 0
    assert info["equal"] is True
    assert info["second"] is False  # once per process
    assert info["warmup_entries_left"] == 0
    # the user's program is still cached by PoCL
    assert any(f == "program.bc" for _, _, files in
               os.walk(tmp_path / "ours" / "pocl") for f in files)


def test_users_pocl_folder_gets_the_fixed_source_once(tmp_path):
    folder = tmp_path / "users_pocl"
    info = _run({"POCL_CACHE_DIR": str(folder)}, tmp_path)
    assert info["started"] is True and info["equal"] is True
    # a folder the user chose is not cleaned: one fixed entry stays
    assert info["warmup_entries_left"] == 1
    again = _run({"POCL_CACHE_DIR": str(folder),
                  "PYTATO_LIKE_CACHE_DIR": str(tmp_path / "ours2")}, tmp_path)
    assert again["equal"] is True and again["warmup_entries_left"] == 1


def test_only_pocl_platforms_are_warmed():
    pocl = types.SimpleNamespace(name="Portable Computing Language")
    other = types.SimpleNamespace(name="NVIDIA CUDA")
    from pytato_like._pocl_cache import is_pocl_platform
    assert is_pocl_platform(pocl)
    assert not is_pocl_platform(other)
    device = types.SimpleNamespace(platform=other)
    assert pocl_warmup._pocl_device(device) is None


def test_switched_off_by_environment(tmp_path):
    info = _run({"PYTATO_LIKE_COMPILER_WARMUP": "0"}, tmp_path)
    assert info["started"] is False and info["seconds"] is None
    assert info["equal"] is True
    assert info["warmup_entries_left"] == 0
