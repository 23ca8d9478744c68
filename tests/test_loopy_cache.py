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
from pytato_like import opencl_build
from pytato_like._traversal import topological_order
from pytato_like.target.loopy.cache import dag_key

pytest.importorskip("pyopencl")

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, pyopencl as cl, pytato_like as pt
    from pytato_like import opencl_build
    from pytato_like.target.loopy import generate_loopy
    x = pt.make_placeholder("x", (50, 40), np.float64)
    d = pt.make_data_wrapper(np.arange(40.0))
    y = pt.make_dict_of_named_arrays({
        "a": pt.sum(pt.roll(x, 1, axis=0) * d, axis=1),
        "b": pt.exp(x[::2]) + 1})
    prg = generate_loopy(y)
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    xv = np.linspace(0, 1, 2000).reshape(50, 40)
    _, out = prg(q, x=xv)
    print(json.dumps({"codegen_calls": opencl_build.CODEGEN_CALLS,
                      "cache": prg.stats.cache,
                      "loopy_imported": "loopy" in sys.modules,
                      "binaries_loaded": opencl_build.BINARIES_LOADED,
                      "a": out["a"].tolist(),
                      "b_sum": float(out["b"].sum())}))
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
    xv = np.linspace(0, 1, 2000).reshape(50, 40)
    np.testing.assert_allclose(
        second["a"], np.sum(np.roll(xv, 1, axis=0) * np.arange(40.0), axis=1),
        rtol=1e-13)
    # a warm start runs the cached plan through pyopencl: loopy (~0.2 s of
    # imports) is not loaded at all
    assert first["loopy_imported"] and not second["loopy_imported"]
    # the generated kernels are cached on their own (shared by programs),
    # and the program's OpenCL binary (saved at the first process's exit)
    # is what the second one loaded
    assert glob.glob(os.path.join(str(tmp_path), "*", "kernels", "*.pkl"))
    assert glob.glob(os.path.join(str(tmp_path), "*", "binaries", "*.pkl"))
    assert first["binaries_loaded"] == 0 and second["binaries_loaded"] == 1


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


def test_library_versions_are_the_installed_ones():
    # read from the dist-info folders' names, without importing loopy
    from importlib.metadata import version
    from pytato_like.target.loopy import cache
    for name in cache._KEYED_LIBRARIES:
        assert cache.installed_version(name) == version(name), name


def test_installed_version_without_a_dist_info_folder(tmp_path, monkeypatch):
    # a module with no dist-info beside it: importlib.metadata decides
    from importlib.metadata import PackageNotFoundError
    from pytato_like.target.loopy import cache
    (tmp_path / "pt_like_no_dist_module.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PackageNotFoundError):
        cache.installed_version("pt_like_no_dist_module")


def test_source_fingerprint_follows_the_python_files(tmp_path, monkeypatch):
    import pytato_like
    from pytato_like.target.loopy import cache
    (tmp_path / "sub" / "__pycache__").mkdir(parents=True)
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "sub" / "mod.py").write_text("x = 1\n")
    monkeypatch.setattr(pytato_like, "__file__", str(tmp_path / "__init__.py"))

    def fingerprint():
        cache._source_fingerprint.cache_clear()
        return cache._source_fingerprint()
    try:
        first = fingerprint()
        # byte code and other files do not count
        (tmp_path / "sub" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"x")
        (tmp_path / "notes.txt").write_text("notes")
        assert fingerprint() == first
        # an edited module (another size) or a new one does
        (tmp_path / "sub" / "mod.py").write_text("x = 12\n")
        second = fingerprint()
        assert second != first
        (tmp_path / "sub" / "new.py").write_text("")
        assert fingerprint() not in (first, second)
    finally:
        monkeypatch.undo()
        cache._source_fingerprint.cache_clear()


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


def test_key_tells_apart_operand_order_names_shapes_and_tags():
    from pytato_like.tags import ImplStored
    x = pt.make_placeholder("x", (4,), np.float64)
    y = pt.make_placeholder("y", (4,), np.float64)
    keys = [_key(pt.concatenate([x, y])), _key(pt.concatenate([y, x])),
            _key(x - y), _key(y - x), _key(x - x),
            _key(pt.reshape(pt.concatenate([x, y]), (2, 4))),
            _key(pt.reshape(pt.concatenate([x, y]), (4, 2))),
            _key(pt.roll(x, 1)), _key(pt.roll(x, 2)),
            _key((x + 1).tagged(ImplStored())), _key(x + 1),
            _key(pt.make_placeholder("z", (4,), np.float64) + 1)]
    assert len(set(keys)) == len(keys)
    # equal structure built twice: equal keys
    assert _key(pt.concatenate([x, y])) == keys[0]
    assert _key(x - y) == _key(pt.make_placeholder("x", (4,), np.float64)
                               - pt.make_placeholder("y", (4,), np.float64))


def test_key_tells_apart_arrays_inside_indices_and_shapes():
    # fields mixing arrays with other values (indices, symbolic shapes)
    # are written with each array's position: one such object shared by
    # two nodes, or two equal objects, give the text of their own arrays
    def indexed(first, second):
        x = pt.make_placeholder("x", (6, 5), np.float64)
        i = pt.make_placeholder("i", (3,), np.int64)
        j = pt.make_placeholder("j", (3,), np.int64)
        picks = {"i": i, "j": j}
        return x[picks[first], 1:4] + x[picks[second], 1:4]
    keys = [_key(indexed("i", "j")), _key(indexed("j", "i")),
            _key(indexed("i", "i")), _key(indexed("j", "j"))]
    assert len(set(keys)) == 4
    assert _key(indexed("i", "j")) == keys[0]

    def sized(name):
        n = pt.make_size_param(name)
        x = pt.make_placeholder("x", (n, 3), np.float64)
        y = 2 * x + x
        # (the result's size parameter is the operand's: built again, the
        # DAG is the same and so is its key)
        assert y.shape[0] is n
        return y
    assert _key(sized("n")) == _key(sized("n")) != _key(sized("m"))


def test_key_of_a_dag_100000_deep():
    # the key is one loop over the topological order: no recursion
    assert sys.getrecursionlimit() <= 10_000
    x = pt.make_placeholder("x", (3,), np.float64)
    u = x
    for _ in range(100_000):
        u = pt.roll(u, 1)  # the cheapest node to build
    k = _key(u)
    assert len(k) == 64 and k != _key(pt.roll(u, 1))


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


# {{{ verification, eviction, command line

def _fresh(tmp_path, monkeypatch):
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    cache.clear_memory_cache()
    return cache


def _program(k: float):
    x = pt.make_placeholder("x", (32,), np.float64)
    return x, pt.sin(x) * k + pt.roll(x, 1)


def _check(queue, y, prg):
    xv = np.linspace(0, 1, 32)
    _, (out,) = prg(queue, x=xv)
    np.testing.assert_allclose(out, pt.generate_numpy(y)(x=xv),
                               rtol=1e-13)


def test_entry_with_another_key_is_recompiled(queue, tmp_path, monkeypatch):
    import shutil
    cache = _fresh(tmp_path, monkeypatch)
    _, ya = _program(2.0)
    _, yb = _program(3.0)
    prg_a = pt.generate_loopy(ya)
    prg_b = pt.generate_loopy(yb)
    path_b = cache._path("plans", prg_b.key)
    # b's file now holds a's plan (another program): it must not be used
    shutil.copy(cache._path("plans", prg_a.key), path_b)
    cache.clear_memory_cache()
    again = pt.generate_loopy(yb)
    assert again.stats.cache == "miss"
    _check(queue, yb, again)
    assert cache._load("plans", prg_b.key) is not None  # rewritten, valid


def test_entry_failing_its_signature_is_recompiled(queue, tmp_path, monkeypatch):
    from pytato_like import cache_files
    cache = _fresh(tmp_path, monkeypatch)
    _, ya = _program(2.0)
    _, yb = _program(3.0)
    prg_a = pt.generate_loopy(ya)
    prg_b = pt.generate_loopy(yb)
    path_b = cache._path("plans", prg_b.key)
    header = len(cache_files.MAGIC) + 32
    with open(path_b, "rb") as f:
        b_header = f.read(header)
    with open(cache._path("plans", prg_a.key), "rb") as f:
        a_payload = f.read()[header:]
    # a valid pickle of another plan under b's magic and b's signature
    with open(path_b, "wb") as f:
        f.write(b_header + a_payload)
    cache.clear_memory_cache()
    again = pt.generate_loopy(yb)
    assert again.stats.cache == "miss"
    _check(queue, yb, again)


def test_entry_of_other_versions_is_never_used(tmp_path, monkeypatch):
    import shutil
    cache = _fresh(tmp_path, monkeypatch)
    _, y = _program(4.0)
    prg = pt.generate_loopy(y)
    path = cache._path("plans", prg.key)
    other = cache._versions().replace("loopy-", "loopy-0.0.")
    other_path = path.replace(cache._versions(), other)
    os.makedirs(os.path.dirname(other_path), mode=0o700)
    shutil.copy(path, other_path)  # signed for this installation only
    monkeypatch.setattr(cache, "_versions", lambda: other)
    cache.clear_memory_cache()
    assert cache.get_plan(prg.key) == (None, "miss")
    assert not os.path.exists(other_path)
    monkeypatch.undo()
    # and the versions of loopy and pyopencl name the cache directory
    assert "loopy-" in cache.cache_dir() and "pyopencl-" in cache.cache_dir()


def test_eviction_keeps_the_cache_under_its_bound(tmp_path, monkeypatch):
    cache = _fresh(tmp_path, monkeypatch)
    limit = 40_000
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", str(limit))
    keys = []
    for k in range(12):
        x = pt.make_placeholder("x", (16 + k,), np.float64)
        prg = pt.generate_loopy(pt.exp(x) * (k + 0.5) + pt.roll(x, k + 1))
        keys.append(prg.key)
        assert cache.cache_info()["bytes"] <= limit
    # the entries written last survive, the first ones were evicted
    assert os.path.exists(cache._path("plans", keys[-1]))
    assert not os.path.exists(cache._path("plans", keys[0]))


def test_eviction_removes_least_recently_used_first(tmp_path, monkeypatch):
    import time
    cache = _fresh(tmp_path, monkeypatch)
    for i in range(3):
        cache._store("plans", f"k{i}", b"x" * 1000)
        old = time.time() - 100 + i
        os.utime(cache._path("plans", f"k{i}"), (old, old))
    assert cache._load("plans", "k0") == b"x" * 1000  # k0: used just now
    cache.evict(2600)
    assert os.path.exists(cache._path("plans", "k0"))
    assert not os.path.exists(cache._path("plans", "k1"))
    assert os.path.exists(cache._path("plans", "k2"))


def test_malformed_cache_size_is_a_typed_error(tmp_path, monkeypatch):
    from pytato_like.diagnostic import ConfigurationError
    cache = _fresh(tmp_path, monkeypatch)
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", "lots")
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_CACHE_SIZE"):
        cache.cache_size_limit()
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", "2M")
    assert cache.cache_size_limit() == 2 * 2**20


def test_command_line_info_and_clear(tmp_path):
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path))
    _run(tmp_path)  # fills the cache
    n_files = len(glob.glob(os.path.join(str(tmp_path), "*", "*", "*.pkl")))
    assert n_files >= 2

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "pytato_like.cache", *args],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    info = cli("info")
    assert str(tmp_path) in info and "(this installation)" in info
    assert "plans" in info and "kernels" in info and "binaries" in info
    counts = [int(line.split()[1]) for line in info.splitlines()
              if line.strip().startswith(("plans", "kernels", "binaries",
                                          "classes"))]
    assert sum(counts) == n_files
    assert f"removed {n_files} entries" in cli("clear")
    assert not glob.glob(os.path.join(str(tmp_path), "*", "*", "*.pkl"))
    assert "entries    none" in cli("info")
    bad = subprocess.run([sys.executable, "-m", "pytato_like.cache", "info"],
                         env=dict(env, PYTATO_LIKE_CACHE_SIZE="lots"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "PYTATO_LIKE_CACHE_SIZE" in bad.stderr

# }}}


# {{{ one compile per distinct computation

def _heat(steps: int, n: int = 24):
    u = pt.make_placeholder("u", (n, n), np.float64)
    for _ in range(steps):
        u = u + 0.1 * (pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=0)
                       + pt.roll(u, 1, axis=1) + pt.roll(u, -1, axis=1) - 4 * u)
    return u


def test_time_loop_compiles_one_kernel_at_any_length(queue, tmp_path, monkeypatch):
    cache = _fresh(tmp_path, monkeypatch)
    calls = opencl_build.CODEGEN_CALLS
    short = pt.generate_loopy(_heat(3))
    assert opencl_build.CODEGEN_CALLS - calls == 1
    long = pt.generate_loopy(_heat(40))
    # the 40-step program reuses the kernel of the 3-step one
    assert opencl_build.CODEGEN_CALLS - calls == 1
    assert len(long.plan.kernels) == len(short.plan.kernels) == 1
    assert len(long.plan.launches) == 40
    u0 = np.random.default_rng(1).standard_normal((24, 24))
    ref = u0
    for _ in range(40):
        ref = ref + 0.1 * (np.roll(ref, 1, 0) + np.roll(ref, -1, 0)
                           + np.roll(ref, 1, 1) + np.roll(ref, -1, 1) - 4 * ref)
    np.testing.assert_allclose(long(queue, u=u0)[1][0], ref, rtol=1e-12)


def test_kernels_of_one_program_are_built_as_one_opencl_program(queue, tmp_path,
                                                                  monkeypatch):
    from pytato_like.opencl_build import merge_device_code
    _fresh(tmp_path, monkeypatch)
    # integer helpers in one kernel, complex arithmetic in another, float
    # reductions in a third: their preambles merge into one program text
    i = pt.make_placeholder("i", (20, 6), np.int64)
    z = pt.make_placeholder("z", (7,), np.complex128)
    y = pt.make_dict_of_named_arrays({
        "a": pt.sum(pt.roll(i // 3 % 5, 1, axis=0), axis=1),
        "b": pt.roll(z * z, 2) + 1j,
        "c": pt.amax(pt.roll(pt.sin(i * 0.5), 1, axis=1), axis=0)})
    prg = pt.generate_loopy(y)
    assert len(prg.plan.kernels) >= 3
    code = prg.plan.kernels[0].program_code
    assert all(k.program_code == code for k in prg.plan.kernels)
    assert code == merge_device_code([k.device_code for k in prg.plan.kernels])
    assert code.count("__kernel") == len(prg.plan.kernels)
    iv = np.arange(120).reshape(20, 6) - 40
    zv = np.linspace(0, 1, 7) * (1 - 2j)
    _, out = prg(queue, i=iv, z=zv)
    ref = pt.generate_numpy(y)(i=iv, z=zv)
    for name in ("a", "b", "c"):
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-12)
    assert prg.stats.phases["opencl_build"] > 0

# }}}


def test_programs_generated_together_are_built_together(queue, tmp_path,
                                                        monkeypatch):
    # as the part programs of a partition: all generated, then run
    cache = _fresh(tmp_path, monkeypatch)
    x = pt.make_placeholder("x", (40,), np.float64)
    y1 = pt.roll(pt.cos(x), 3) * 2
    y2 = pt.sum(pt.exp(x) - pt.roll(x, 1))
    prg1 = pt.generate_loopy(y1, function_name="first_part")
    prg2 = pt.generate_loopy(y2, function_name="second_part")
    xv = np.linspace(-1, 1, 40)
    builds = opencl_build.OPENCL_BUILDS
    _, (out1,) = prg1(queue, x=xv)
    assert opencl_build.OPENCL_BUILDS == builds + 1
    _, (out2,) = prg2(queue, x=xv)
    assert opencl_build.OPENCL_BUILDS == builds + 1  # built with the first
    np.testing.assert_allclose(out1, pt.generate_numpy(y1)(x=xv), rtol=1e-13)
    np.testing.assert_allclose(out2, pt.generate_numpy(y2)(x=xv), rtol=1e-13)


def test_parts_with_alike_numbered_outputs_share_kernels(queue, tmp_path,
                                                         monkeypatch):
    # as the parts of a partition: outputs _out_8/_out_65 in one part play
    # the roles of _out_1/_out_5 in another (lexicographic order differs)
    cache = _fresh(tmp_path, monkeypatch)
    # both outputs in one loop group: one kernel whose instruction order
    # (and so its structure) follows the order of the outputs
    u = pt.make_placeholder("u", (5,), np.float64)
    v = pt.make_placeholder("v", (5,), np.float64)
    d = pt.make_data_wrapper(np.arange(5.0))

    def part(first, second):
        return pt.make_dict_of_named_arrays({
            f"_out_{first}": pt.roll(u, 1) * 2 - u,
            f"_out_{second}": pt.roll(v, 2) + d})

    calls = opencl_build.CODEGEN_CALLS
    prg1 = pt.generate_loopy(part(1, 5))
    n_generated = opencl_build.CODEGEN_CALLS - calls
    prg2 = pt.generate_loopy(part(8, 65))
    assert opencl_build.CODEGEN_CALLS - calls == n_generated  # nothing new
    assert [k.key for k in prg1.plan.kernels] == [k.key for k in prg2.plan.kernels]
    assert len(prg1.plan.kernels) == 1
    uv, vv = np.linspace(0, 1, 5), np.linspace(2, 3, 5)
    for prg, y in ((prg1, part(1, 5)), (prg2, part(8, 65))):
        _, out = prg(queue, u=uv, v=vv)
        ref = pt.generate_numpy(y)(u=uv, v=vv)
        for name in ref:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-13)
