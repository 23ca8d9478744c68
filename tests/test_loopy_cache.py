"""The compile cache: persistent structural keys, a second process that
skips code generation, invalidation, and corrupted entries."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytato_like as pt
from pytato_like._traversal import topological_order
from pytato_like.target.loopy.cache import dag_key

pytest.importorskip("pyopencl")

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, pyopencl as cl, pytato_like as pt
    from pytato_like.target.loopy import cache, generate_loopy
    x = pt.make_placeholder("x", (50, 40), np.float64)
    d = pt.make_data_wrapper(np.arange(40.0))
    y = pt.make_dict_of_named_arrays({
        "a": pt.sum(pt.roll(x, 1, axis=0) * d, axis=1),
        "b": pt.exp(x[::2]) + 1})
    prg = generate_loopy(y)
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    xv = np.linspace(0, 1, 2000).reshape(50, 40)
    _, out = prg(q, x=xv)
    print(json.dumps({"codegen_calls": cache.CODEGEN_CALLS,
                      "cache": prg.stats.cache,
                      "a": out["a"].get().tolist(),
                      "b_sum": float(out["b"].get().sum())}))
""")


def _run(cache_dir):
    import json
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_skips_code_generation(tmp_path):
    first = _run(tmp_path)
    assert first["cache"] == "miss" and first["codegen_calls"] >= 1
    second = _run(tmp_path)
    assert second["cache"] == "disk"
    assert second["codegen_calls"] == 0
    assert second["a"] == first["a"] and second["b_sum"] == first["b_sum"]
    # the generated kernels are cached on their own (shared by programs);
    # OpenCL binaries are left to PoCL's and pyopencl's caches
    assert glob.glob(os.path.join(str(tmp_path), "*", "kernels", "*.pkl"))
    assert not glob.glob(os.path.join(str(tmp_path), "*", "binaries"))


def test_corrupted_entries_are_recompiled(tmp_path):
    first = _run(tmp_path)
    files = glob.glob(os.path.join(str(tmp_path), "*", "*", "*.pkl"))
    assert files
    for f in files:
        with open(f, "wb") as fh:
            fh.write(b"\x80\x05garbage")
    again = _run(tmp_path)
    assert again["cache"] == "miss" and again["codegen_calls"] >= 1
    assert again["a"] == first["a"]


def test_version_change_invalidates(tmp_path, monkeypatch):
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    d1 = cache.cache_dir()
    monkeypatch.setattr(pt, "__version__", "999.0")
    assert cache.cache_dir() != d1


def _key(y):
    outs = {"_pt_out": y}
    return dag_key(outs, topological_order([y]))


def test_key_is_structural_and_ignores_data_values():
    def build(data):
        x = pt.make_placeholder("x", (4,), np.float64)
        return pt.sin(x) + pt.make_data_wrapper(data)
    k1 = _key(build(np.zeros(4)))
    k2 = _key(build(np.ones(4)))  # same structure, other data
    assert k1 == k2
    assert _key(build(np.zeros(4, np.float32))) != k1  # other dtype
    x = pt.make_placeholder("x", (4,), np.float64)
    assert _key(pt.cos(x) + 1) != _key(pt.sin(x) + 1)
    assert _key(x * 2.0) != _key(x * 3.0)


def test_key_is_equal_across_processes():
    code = ("import numpy as np, pytato_like as pt;"
            "from pytato_like._traversal import topological_order as t;"
            "from pytato_like.target.loopy.cache import dag_key;"
            "x = pt.make_placeholder('x', (4, 5), np.float32);"
            "y = pt.sum(pt.exp(x) * 2, axis=1);"
            "print(dag_key({'_pt_out': y}, t([y])))")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True,
                           text=True, check=True).stdout.strip()
            for _ in range(2)}
    assert len(keys) == 1


def test_memory_cache_hit_in_same_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    from pytato_like.target.loopy import generate_loopy
    x = pt.make_placeholder("x", (7,), np.float64)
    generate_loopy(x * 3 + 2)
    prg = generate_loopy(x * 3 + 2)
    assert prg.stats.cache == "memory"
