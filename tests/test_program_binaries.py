"""Program binaries across processes (:mod:`pytato_like.opencl_build`,
"program binaries"): a process saves the binaries of the programs it
built at exit, a later one loads them instead of building the source,
and builds the source when the stored binary is refused or not ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytato_like import opencl_build
from pytato_like import cache_files
from pytato_like.target.loopy import cache

cl = pytest.importorskip("pyopencl")

ROOT = Path(__file__).resolve().parent.parent

_PROGRAM = """
import json, sys
import numpy as np, pyopencl as cl
import pytato_like as pt
from pytato_like import opencl_build
queue = cl.CommandQueue(cl.create_some_context(interactive=False))
u = pt.make_placeholder("u", (64, 64), np.float64)
for _ in range(4):
    u = u + 0.1 * (pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=1) - 2 * u)
prg = pt.generate_loopy(u)
a = np.random.default_rng(0).random((64, 64))
_, (out,) = prg(queue, u=a)
ref = a
for _ in range(4):
    ref = ref + 0.1 * (np.roll(ref, 1, axis=0) + np.roll(ref, -1, axis=1) - 2 * ref)
print(json.dumps({"cache": prg.stats.cache,
                  "binaries_loaded": opencl_build.BINARIES_LOADED,
                  "equal": bool(np.array_equal(out, ref))}))
"""


def _run(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def env(tmp_path):
    # (PoCL's folder is ours, <cache dir>/pocl: binaries are used only then)
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "cache"),
               PYTATO_LIKE_CACHE="1")
    env.pop("POCL_CACHE_DIR", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _binary_entries(env: dict) -> list[Path]:
    return sorted(Path(env["PYTATO_LIKE_CACHE_DIR"]).glob(
        "pytato_like-*/binaries/*.pkl"))


def test_a_later_process_loads_the_saved_binary(env):
    cold = _run(env)
    assert cold == {"cache": "miss", "binaries_loaded": 0, "equal": True}
    assert len(_binary_entries(env)) == 1      # saved at exit
    warm = _run(env)
    assert warm == {"cache": "disk", "binaries_loaded": 1, "equal": True}


def test_a_planted_binary_is_not_loaded(env):
    _run(env)
    (entry,) = _binary_entries(env)
    # someone without the secret writes the entry: its signature fails,
    # the source is built (and its binary saved again at exit)
    entry.write_bytes(cache_files.MAGIC + os.urandom(32) + b"\x7fELF" * 64)
    again = _run(env)
    assert again == {"cache": "disk", "binaries_loaded": 0, "equal": True}
    assert _run(env)["binaries_loaded"] == 1


def test_a_damaged_pocl_entry_of_a_saved_binary_is_unpacked_again(tmp_path):
    # PoCL reads the entry a binary names from its folder, trusting it: in
    # our PoCL folder (no POCL_CACHE_DIR given) that entry is checked whole
    # before the binary is loaded, even files older than the last check
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "cache"),
               PYTATO_LIKE_CACHE="1")
    env.pop("POCL_CACHE_DIR", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    _run(env)
    files = [p for p in (tmp_path / "cache" / "pocl").rglob("*")
             if p.name == "program.bc" or p.suffix == ".so"]
    assert files
    for path in files:
        path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
        os.utime(path, (0, 0))
    again = _run(env)
    assert again == {"cache": "disk", "binaries_loaded": 1, "equal": True}


def test_binaries_are_not_used_with_a_pocl_folder_of_the_user(env, tmp_path):
    # PoCL's folder is then not checked: PoCL's own cache serves the build
    env["POCL_CACHE_DIR"] = str(tmp_path / "users-pocl")
    assert _run(env)["binaries_loaded"] == 0
    assert _binary_entries(env) == []
    assert _run(env) == {"cache": "disk", "binaries_loaded": 0, "equal": True}


def test_a_saved_binary_that_is_not_pocl_s_falls_back_to_the_source(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTATO_LIKE_CACHE", raising=False)
    ctx = cl.create_some_context(interactive=False)
    code = "__kernel void k(__global double *a) { a[0] = 2.0; }\n"
    source = opencl_build._NO_CONTRACTION + code
    # signed by us, but not a PoCL program binary (names no entry of
    # PoCL's folder to check): never handed to the driver
    cache._store("binaries", opencl_build._binary_key(ctx, source),
                 [b"not a binary"] * len(ctx.devices))
    opencl_build.clear_memory()
    loaded = opencl_build.BINARIES_LOADED
    prg = opencl_build.build_program(ctx, code)
    assert opencl_build.BINARIES_LOADED == loaded
    queue = cl.CommandQueue(ctx)
    import pyopencl.array as cla
    buf = cla.zeros(queue, 1, np.float64)
    prg.k(queue, (1,), None, buf.data)
    assert buf.get()[0] == 2.0


def test_the_entry_a_pocl_binary_names():
    from pytato_like._pocl_cache import binary_entry
    header = b"poclbin\0" + bytes(28) + b"BG/LIJMDCDHDMCINIAPIMKMDANABCELGAFLPLEGN\0"
    assert binary_entry(header + b"rest") == os.path.join(
        "BG", "LIJMDCDHDMCINIAPIMKMDANABCELGAFLPLEGN")
    assert binary_entry(b"\x7fELF" + header[4:]) is None
    assert binary_entry(b"poclbin\0" + bytes(600) + b"BG/LIJMDCDHDMCINIAP\0") is None


def test_saving_is_bounded_in_time(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTATO_LIKE_CACHE", raising=False)
    ctx = cl.create_some_context(interactive=False)
    opencl_build.clear_memory()
    monkeypatch.setattr(opencl_build, "_UNSAVED", [])
    for value in (3.0, 4.0):
        opencl_build.build_program(
            ctx, f"__kernel void k(__global double *a) {{ a[0] = {value}; }}\n")
    assert len(opencl_build._UNSAVED) == 2
    assert opencl_build.save_binaries(budget=0.0) == 0
    assert opencl_build._UNSAVED == []


def test_a_pocl_folder_set_by_a_parent_process_is_not_the_user_s(tmp_path):
    # a process started from one that imported pytato_like (mpiexec's
    # ranks, a test's subprocess) inherits the POCL_CACHE_DIR set there:
    # it still picks (and checks) its own folder
    child = ("import json, os, pytato_like\n"
             "from pytato_like._pocl_cache import private_pocl_cache_dir\n"
             "print(json.dumps([os.environ['POCL_CACHE_DIR'],"
             " private_pocl_cache_dir()]))")
    parent = ("import os, subprocess, sys, pytato_like\n"
              f"os.environ['PYTATO_LIKE_CACHE_DIR'] = {str(tmp_path / 'child')!r}\n"
              "sys.stdout.write(subprocess.run([sys.executable, '-c', "
              f"{child!r}], capture_output=True, text=True, check=True).stdout)")
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "parent"))
    env.pop("POCL_CACHE_DIR", None)
    env.pop("PYTATO_LIKE_POCL_CACHE_DIR", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", parent], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    want = str(tmp_path / "child" / "pocl")
    assert json.loads(out.stdout) == [want, want]
    # a folder the user names stays theirs
    env["POCL_CACHE_DIR"] = str(tmp_path / "users")
    out = subprocess.run([sys.executable, "-c", child], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout) == [str(tmp_path / "users"), None]


def test_a_forked_child_does_not_save_its_parent_s_binaries(env):
    # a child forked after a build exits through atexit too: it leaves the
    # binaries to the parent (its copy of the driver's state has no threads)
    code = _PROGRAM + """
import os
from pytato_like import opencl_build
pid = os.fork()
if pid == 0:
    import sys
    sys.stdout.flush()
    opencl_build._binary_persistence = (
        opencl_build._binary_persistence[0],
        lambda key, b: os.write(1, b"CHILD SAVED\\n"))
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("child status", status)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "child status 0" in out.stdout
    assert "CHILD SAVED" not in out.stdout
    assert len(_binary_entries(env)) == 1      # the parent's, at its exit
