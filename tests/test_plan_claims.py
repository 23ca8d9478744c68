"""Claims on plans (:mod:`pytato_like.target.loopy.cache`, "Claims"): a
process generating a plan claims its key, so that ranks or processes
compiling alike programs at once generate each plan once and load it from
the disk cache otherwise."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pytato_like import cache_files
from pytato_like.target.loopy import cache

pytest.importorskip("pyopencl")

ROOT = Path(__file__).resolve().parent.parent
KEY = "ab" * 32


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTATO_LIKE_CACHE", raising=False)
    yield tmp_path / "cache"
    # every claim a test took is given up (a claim held makes waits return)
    assert not cache_files.holds_claims()


def _claim_file() -> Path:
    return Path(cache_files.entry_path(cache._versions(), "plans", KEY)
                ).with_suffix(".claim")


def _plant_claim(owner: str, age: float = 0.0) -> Path:
    """A claim file as another process writes it."""
    path = _claim_file()
    if not path.parent.exists():
        assert cache.claim_plan(KEY)    # makes the folders
        cache.release_plan(KEY)
    path.write_text(owner)
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


def _ended_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_claim_is_exclusive_and_released_by_its_owner(private_cache):
    assert cache.claim_plan(KEY)
    path = _claim_file()
    assert path.read_text() == f"{socket.gethostname()} {os.getpid()}\n"
    assert not cache_files.claimed_elsewhere(cache._versions(), "plans", KEY)
    cache.release_plan(KEY)
    assert not path.exists()


def test_a_live_process_s_claim_is_respected(private_cache):
    # the parent process (pytest's launcher or a shell) is alive
    path = _plant_claim(f"{socket.gethostname()} {os.getppid()}\n")
    assert not cache.claim_plan(KEY)
    assert cache_files.claimed_elsewhere(cache._versions(), "plans", KEY)
    cache.release_plan(KEY)             # not ours: stays
    assert path.exists()


def test_an_ended_process_s_claim_is_replaced(private_cache):
    _plant_claim(f"{socket.gethostname()} {_ended_pid()}\n")
    assert not cache_files.claimed_elsewhere(cache._versions(), "plans", KEY)
    assert cache.claim_plan(KEY)
    assert _claim_file().read_text().endswith(f" {os.getpid()}\n")
    cache.release_plan(KEY)


def test_a_claim_not_refreshed_is_stale(private_cache):
    # another host's (no process to look up), or a live process that
    # hangs: the claim's time decides
    for owner in ("elsewhere.example 12345\n",
                  f"{socket.gethostname()} {os.getppid()}\n"):
        _plant_claim(owner)
        assert not cache.claim_plan(KEY)
        _plant_claim(owner, age=cache_files.CLAIM_STALE_S + 5)
        assert cache.claim_plan(KEY)
        cache.release_plan(KEY)


def test_held_claims_are_refreshed(private_cache, monkeypatch):
    monkeypatch.setattr(cache_files, "CLAIM_REFRESH_S", 0.05)
    monkeypatch.setattr(cache_files, "_REFRESHER", None)
    assert cache.claim_plan(KEY)
    path = _claim_file()
    then = time.time() - 1000
    os.utime(path, (then, then))
    deadline = time.monotonic() + 10
    while path.stat().st_mtime < then + 500 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.stat().st_mtime > then + 500
    cache.release_plan(KEY)
    assert not path.exists()


def test_something_else_at_the_claim_s_name_is_neither_waited_for_nor_removed(
        private_cache):
    path = _plant_claim("not a claim at all")
    assert cache.claim_plan(KEY)        # generate without a claim
    assert not cache_files.claimed_elsewhere(cache._versions(), "plans", KEY)
    cache.release_plan(KEY)
    assert path.read_text() == "not a claim at all"


def test_claims_are_off_without_the_disk_cache(private_cache, monkeypatch):
    _plant_claim(f"{socket.gethostname()} {os.getppid()}\n")
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "0")
    assert cache.claim_plan(KEY)


def test_a_wait_ends_when_the_claim_goes_away_without_a_plan(private_cache):
    path = _plant_claim(f"{socket.gethostname()} {os.getppid()}\n")
    threading.Timer(0.3, path.unlink).start()
    t0 = time.monotonic()
    assert cache.wait_for_plan(KEY) == (None, "miss")
    assert 0.25 < time.monotonic() - t0 < 30


def test_a_wait_is_bounded(private_cache):
    _plant_claim(f"{socket.gethostname()} {os.getppid()}\n")
    t0 = time.monotonic()
    assert cache.wait_for_plan(KEY, timeout=0.2) == (None, "miss")
    assert time.monotonic() - t0 < 10


def test_clear_removes_a_left_over_claim(private_cache):
    path = _plant_claim(f"{socket.gethostname()} {_ended_pid()}\n")
    assert cache.clear_disk_cache() >= 1
    assert not path.exists()


_SAME_PROGRAM = """
import json, sys
import numpy as np, pyopencl as cl
import pytato_like as pt
queue = cl.CommandQueue(cl.create_some_context(interactive=False))
u = pt.make_placeholder("u", (300,), np.float64)
for _ in range(150):
    u = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
prg = pt.generate_loopy(u)
a = np.linspace(0.0, 1.0, 300)
_, (out,) = prg(queue, u=a)
ref = a
for _ in range(150):
    ref = ref + 0.1 * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))
print(json.dumps({"cache": prg.stats.cache,
                  "equal": bool(np.array_equal(out, ref))}))
"""


def test_processes_compiling_one_program_at_once_generate_it_once(tmp_path):
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "cache"),
               POCL_CACHE_DIR=str(tmp_path / "pocl"), PYTATO_LIKE_CACHE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    procs = [subprocess.Popen([sys.executable, "-c", _SAME_PROGRAM], env=env,
                              cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["equal"] for r in results)
    # one generated it; the others waited for it (or came after it)
    assert sorted(r["cache"] for r in results) == ["disk", "disk", "miss"]


SCRIPT = Path(__file__).resolve().parent / "mpi" / "shared_codegen.py"


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3, 4])
def test_ranks_with_alike_parts_generate_each_plan_once(n, tmp_path,
                                                        monkeypatch):
    # the ranks share one empty cache (their environment is this one's)
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "pocl"))
    monkeypatch.delenv("PYTATO_LIKE_CACHE", raising=False)
    from _mpiexec import run_ranks
    proc = run_ranks(n, SCRIPT, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(n):
        assert f"OK shared rank {rank}" in proc.stdout, proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PLANS"))
    generated, distinct = (int(w.split("=")[1]) for w in line.split()[1:])
    # without claims every rank generates every plan: n * distinct
    assert distinct >= 2
    assert generated == distinct


def test_deferred_parts_are_generated_after_the_others(private_cache, queue):
    # the executor's first execution generates a part whose plan another
    # process has claimed after its other parts (then loads it, or
    # generates it once the claim is gone)
    import pytato_like as pt
    from pytato_like.partition import (
        execute_partition,
        find_partition,
        generate_code_for_partition,
    )
    from pytato_like.target.loopy.lazy import codegen_while_waiting

    x = pt.make_placeholder("x", (8,), np.float64)
    a = pt.sin(x) * 2.0
    b = pt.cos(a) + 1.0
    where = {id(a): 0, id(b): 1}
    partition = find_partition(pt.make_dict_of_named_arrays({"a": a, "b": b}),
                               lambda node: where.get(id(node), 0))
    first = partition.toposorted_part_ids[0]
    # the plan keys, in generation order, as generate_loopy looks them up
    seen: list[str] = []
    real_get_plan = cache.get_plan
    cache.get_plan = lambda key: (seen.append(key), real_get_plan(key))[1]
    try:
        generate_code_for_partition(partition, lazy=False)
    finally:
        cache.get_plan = real_get_plan
    cache.clear_disk_cache()
    # another live process claims the first part's plan, and gives the
    # claim up after a while without storing it
    first_key = seen[0]
    assert cache.claim_plan(first_key)
    cache.release_plan(first_key)
    claim = Path(cache_files.entry_path(cache._versions(), "plans", first_key)
                 ).with_suffix(".claim")
    claim.write_text(f"{socket.gethostname()} {os.getppid()}\n")
    threading.Timer(0.5, claim.unlink).start()

    prgs = generate_code_for_partition(partition, lazy=True)
    order = []
    for pid, prg in prgs.items():
        make = prg._lazy_make
        prg._lazy_make = (lambda make, pid: lambda outs: (
            order.append(pid), make(outs))[1])(make, pid)
    list(codegen_while_waiting(prgs, partition, {}, ()))
    # tried first, deferred, generated after the other part
    assert len(order) == 3 and order[0] == first and order[-1] == first
    assert order[1] != first
    xv = np.linspace(-1.0, 1.0, 8)
    out = execute_partition(partition, prgs, queue, input_args={"x": xv})
    av = np.sin(xv) * 2.0
    got = {k: v.get() if hasattr(v, "get") else np.asarray(v)
           for k, v in out.items()}
    # (OpenCL's sin and cos may differ from NumPy's in the last bit)
    np.testing.assert_allclose(got["a"], av, rtol=1e-15)
    np.testing.assert_allclose(got["b"], np.cos(av) + 1.0, rtol=1e-15)


def test_a_process_holding_a_claim_does_not_wait(private_cache):
    # (a plan generated inside the generation of another: two processes
    # each waiting for the other's plan would wait PLAN_WAIT_S)
    other = "cd" * 32
    assert cache.claim_plan(other)
    try:
        _plant_claim(f"{socket.gethostname()} {os.getppid()}\n")
        t0 = time.monotonic()
        assert cache.wait_for_plan(KEY) == (None, "miss")
        assert time.monotonic() - t0 < 1.0
    finally:
        cache.release_plan(other)
