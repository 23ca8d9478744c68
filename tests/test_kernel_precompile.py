"""Work-group functions compiled ahead, once per node
(pytato_like.kernel_precompile): the dry argument every generated kernel
has, dry launches, and the claims that share them between processes."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from pytato_like import kernel_precompile as kp

_KERNELS = textwrap.dedent("""\
    #define lid(N) ((int) get_local_id(N))
    static inline double helper(double x) { return 2.0 * x; }

    __kernel void __attribute__ ((reqd_work_group_size(1, 1, 1))) first(__global double const *__restrict__ a, __global double *__restrict__ out, int const n, unsigned long const m)
    {
      for (int i = 0; i < n; ++i)
        out[i] = helper(a[i]) + (double) m;
    }

    __kernel void __attribute__ ((reqd_work_group_size(1, 1, 1))) second()
    {
      ;
    }

    __kernel void __attribute__ ((reqd_work_group_size(4, 1, 1))) wide(__global double *out)
    {
      out[lid(0)] = 1.0;
    }

    __kernel void free_size(__global double *out)
    {
      out[0] = 1.0;
    }
    """)


def test_kernels_of_one_work_item_get_the_dry_argument_and_return_on_it():
    code = kp.add_dry_argument(_KERNELS)
    assert ("first(__global double const *__restrict__ a, __global double "
            "*__restrict__ out, int const n, unsigned long const m, int const "
            "_pt_dry)\n{\n  if (_pt_dry)\n    return;\n  for (int i") in code
    assert "second(int const _pt_dry)\n{\n  if (_pt_dry)\n    return;\n  ;" in code
    # larger or free work-groups (PoCL loops over their work-items, which
    # an early return keeps from vectorising) are left alone, as is the
    # helper function; adding twice adds nothing
    assert "wide(__global double *out)\n{\n  out[lid(0)]" in code
    assert "free_size(__global double *out)\n{\n  out[0]" in code
    assert "static inline double helper(double x) { return 2.0 * x; }" in code
    assert kp.add_dry_argument(code) == code


def test_the_launcher_counts_the_dry_argument():
    host = ("    _lpy_knl = _lpy_cl_kernels.k\n"
            "    assert _lpy_knl.num_args == 2, f'count (2) does not match'\n"
            "    _lpy_knl = _lpy_cl_kernels.other\n"
            "    assert _lpy_knl.num_args == 5, f'count (5) does not match'\n")
    assert kp.host_code_with_dry_argument(host, ["k"]) == host.replace(
        "== 2", "== 3")
    assert kp.host_code_with_dry_argument(host, []) == host


def test_dry_launches_know_their_arguments_and_work_group():
    launches = kp.dry_launches(kp.add_dry_argument(_KERNELS))
    assert [launch.name for launch in launches] == ["first", "second"]
    first, second = launches
    assert first.arguments == ("buffer", "buffer", np.int32, np.uint64)
    assert first.work_group == (1, 1, 1)
    assert second.arguments == () and second.work_group == (1, 1, 1)
    odd = kp.add_dry_argument(
        "__kernel void __attribute__ ((reqd_work_group_size(1, 1, 1))) "
        "k(__local float *scratch, cdouble_t const z)\n{\n}\n")
    (launch,) = kp.dry_launches(odd)
    # an argument a dry launch does not make (local memory, a scalar of
    # another type) is None: the kernel is not launched dry
    assert launch.arguments == (None, None)
    assert kp.dry_launches(_KERNELS) == []   # kernels without it


def _program_and_inputs():
    import pytato_like as pt
    x = pt.make_placeholder("x", (5000,), np.float64)
    y = pt.make_placeholder("y", (5000,), np.float64)
    result = 2 * pt.roll(x, 1) + y * y
    rng = np.random.default_rng(3)
    xv, yv = rng.standard_normal(5000), rng.standard_normal(5000)
    return result, {"x": xv, "y": yv}, 2 * np.roll(xv, 1) + yv * yv


def test_generated_kernels_compute_numpy_and_do_nothing_dry(queue):
    import pyopencl as cl

    import pytato_like as pt
    result, inputs, expected = _program_and_inputs()
    prg = pt.generate_loopy(result)
    for _ in range(2):      # the second call replays the first's launches
        _, (out,) = prg(queue, **inputs)
        np.testing.assert_array_equal(out, expected)
    code = prg.get_source()
    launches = kp.dry_launches(code)
    assert launches and len(launches) == code.count("__kernel")
    # (its kernels are all of one work-item per work-group)
    # a dry launch of each kernel on real buffers writes nothing
    ctx = queue.context
    program = cl.Program(ctx, code).build()
    sentinel = np.full(1 << 16, 7.5)
    for launch in launches:
        assert launch.work_group is not None
        kernel = cl.Kernel(program, launch.name)
        buffers = []
        args: list[object] = []
        for kind in launch.arguments:
            if kind == "buffer":
                buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE
                                | cl.mem_flags.COPY_HOST_PTR, hostbuf=sentinel)
                buffers.append(buf)
                args.append(buf)
            else:
                args.append(kind(0))
        kernel.set_args(*args, np.int32(1))
        cl.enqueue_nd_range_kernel(queue, kernel, launch.work_group,
                                   launch.work_group).wait()
        for buf in buffers:
            back = np.empty_like(sentinel)
            cl.enqueue_copy(queue, back, buf)
            np.testing.assert_array_equal(back, sentinel)


def test_kernels_of_larger_work_groups_keep_their_arguments(queue):
    import pytato_like as pt
    x = pt.make_placeholder("x", (300_000,), np.float64)
    xv = np.random.default_rng(5).integers(-9, 9, 300_000).astype(np.float64)
    prg = pt.generate_loopy(pt.sum(x))
    _, (out,) = prg(queue, x=xv)
    assert out == xv.sum()      # small integers: every order is exact
    code = prg.get_source()
    wide = [k for k in code.split("__kernel")[1:]
            if "reqd_work_group_size(1, 1, 1)" not in k]
    assert wide     # the reduction's work-groups
    assert all("_pt_dry" not in k for k in wide)


def test_kernel_objects_are_ready_for_real_launches(queue):
    import pyopencl as cl
    ctx = queue.context
    # one kernel name in two programs, with and without the dry argument,
    # with as many arguments (arraycontext names every program's kernel
    # after its entrypoint)
    guarded_code = kp.add_dry_argument(
        "__kernel void __attribute__ ((reqd_work_group_size(1, 1, 1))) "
        "kp_ready(__global double *out)\n{\n  out[0] = 3.0;\n}\n")
    plain_code = ("__kernel void __attribute__ ((reqd_work_group_size(1, 1, 1))) "
                  "kp_ready(__global double *out, __global double *more)\n"
                  "{\n  out[0] = 4.0;\n  more[0] = 5.0;\n}\n")
    guarded = cl.Program(ctx, guarded_code).build()
    plain = cl.Program(ctx, plain_code).build()
    kp.note_program(guarded, guarded_code)
    kp.note_program(plain, plain_code)
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 8)
    more = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 8)
    back = np.zeros(1)
    for program, buffers, value in ((guarded, [out], 3.0),
                                    (plain, [out, more], 4.0)):
        kernel = kp.kernel_object(program, "kp_ready")
        for i, buf in enumerate(buffers):  # by position, as loopy's launcher
            kernel.set_arg(i, buf)
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,)).wait()
        cl.enqueue_copy(queue, back, out)
        assert back[0] == value


class _FakeClaims:
    def __init__(self, busy_for: float):
        self.until = time.monotonic() + busy_for

    def claimed_elsewhere(self, key):
        return time.monotonic() < self.until


def _claims_of(fake):
    return kp.CompileClaims(lambda key: True, lambda key: None,
                            fake.claimed_elsewhere, lambda key: False,
                            lambda key: None)


def test_first_launch_waits_for_another_process_bounded(monkeypatch, queue):
    ctx = queue.context
    launch = kp.DryLaunch("kp_waited", ("buffer",), (1, 1, 1))
    monkeypatch.setitem(kp._STARTED, (ctx, "source"), (b"digest", [launch]))

    class Kernel:
        function_name = "kp_waited"

    monkeypatch.setattr(kp, "_claims", _claims_of(_FakeClaims(0.3)))
    t0 = time.monotonic()
    kp.wait_for_other_processes(ctx, [Kernel()])
    assert 0.25 < time.monotonic() - t0 < 5
    # a claim that is never released is waited for at most the timeout
    monkeypatch.setattr(kp, "_claims", _claims_of(_FakeClaims(1e9)))
    t0 = time.monotonic()
    kp.wait_for_other_processes(ctx, [Kernel()], timeout=0.2)
    assert 0.15 < time.monotonic() - t0 < 5
    # a kernel of no program started here is not waited for
    Kernel.function_name = "kp_other"
    t0 = time.monotonic()
    kp.wait_for_other_processes(ctx, [Kernel()], timeout=2)
    assert time.monotonic() - t0 < 0.15


_NODE_SCRIPT = textwrap.dedent("""
    import glob, json, os, sys
    import numpy as np, pyopencl as cl, pytato_like as pt
    from pytato_like import kernel_precompile as kp
    x = pt.make_placeholder("x", (5000,), np.float64)
    y = pt.make_placeholder("y", (5000,), np.float64)
    rng = np.random.default_rng(3)
    xv, yv = rng.standard_normal(5000), rng.standard_normal(5000)
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    prg = pt.generate_loopy(2 * pt.roll(x, 1) + y * y)
    _, (out,) = prg(q, x=xv, y=yv)
    assert kp.wait_for_precompiles(60)
    folder = os.environ["POCL_CACHE_DIR"]
    names = [launch.name for launch in kp.dry_launches(prg.get_source())]
    print(json.dumps({
        "equal": bool(np.array_equal(out, 2 * np.roll(xv, 1) + yv * yv)),
        "names": names, "compiled": kp.DRY_LAUNCHED,
        "left": kp.LEFT_TO_OTHERS,
        "libraries": {n: bool(glob.glob(f"{folder}/*/*/{n}/*/{n}.so"))
                      for n in names}}))
""")


def _node_run(cache, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("POCL_CACHE_DIR", "PYTATO_LIKE_POCL_CACHE_DIR",
                        "MPI_LOCALNRANKS", "MPI_LOCALRANKID",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", kp.SETTING)}
    env.update(PYTATO_LIKE_CACHE_DIR=str(cache), **env_extra)
    proc = subprocess.run([sys.executable, "-c", _NODE_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["equal"]
    return result


def test_one_process_of_a_node_compiles_each_kernel_ahead(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    # "rank 0 of 2 on this node": its kernels are compiled ahead, and PoCL's
    # folder (the package's, in the cache folder) holds them
    first = _node_run(cache, MPI_LOCALNRANKS="2", MPI_LOCALRANKID="0")
    assert first["names"] and sorted(first["compiled"]) == sorted(first["names"])
    assert first["left"] == []
    assert all(first["libraries"].values())
    # "rank 1", building the source too (the binary saved at the first
    # one's exit removed): the kernels are done, it compiles none ahead
    for path in glob.glob(str(cache / "*" / "binaries" / "*.pkl")):
        os.remove(path)
    second = _node_run(cache, MPI_LOCALNRANKS="2", MPI_LOCALRANKID="1")
    assert second["names"] == first["names"]
    assert second["compiled"] == [] and sorted(second["left"]) == sorted(
        first["names"])
    # a warm start loads the binary: nothing is built, nothing compiled
    third = _node_run(cache, MPI_LOCALNRANKS="2", MPI_LOCALRANKID="0")
    assert third["compiled"] == [] and third["left"] == []


@pytest.mark.parametrize("env", [{}, {"MPI_LOCALNRANKS": "1"},
                                 {"MPI_LOCALNRANKS": "2", kp.SETTING: "0"}])
def test_nothing_is_compiled_ahead_alone_or_when_turned_off(tmp_path, env):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    result = _node_run(cache, **env)
    assert result["compiled"] == [] and result["left"] == []


def test_a_setting_that_is_not_a_switch_is_refused(monkeypatch, queue):
    from pytato_like.diagnostic import ConfigurationError
    monkeypatch.setenv(kp.SETTING, "sometimes")
    with pytest.raises(ConfigurationError, match=kp.SETTING):
        kp.enabled(queue.context)


SCRIPT = Path(__file__).resolve().parent / "mpi" / "shared_precompile.py"


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_ranks_of_a_node_compile_each_kernel_once(n, tmp_path, monkeypatch):
    # the ranks share one empty cache, and PoCL's folder inside it
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("POCL_CACHE_DIR", "PYTATO_LIKE_POCL_CACHE_DIR",
                 "PYTATO_LIKE_CACHE", kp.SETTING):
        monkeypatch.delenv(name, raising=False)
    from _mpiexec import run_ranks
    proc = run_ranks(n, SCRIPT, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(n):
        assert f"OK precompile rank {rank}" in proc.stdout, proc.stdout
    line = next(ln for ln in proc.stdout.splitlines()
                if ln.startswith("KERNELS"))
    report = json.loads(line.split(" ", 1)[1])
    names = set(report["names"])
    compiled = report["compiled"]       # per rank
    assert names
    # every kernel compiled ahead by exactly one rank
    assert sorted(k for ks in compiled for k in ks) == sorted(names)
    # and the work shared: no rank compiled them all
    assert max(len(ks) for ks in compiled) < len(names)
    assert glob.glob(str(tmp_path / "cache" / "pocl" / "*" / "*" / "*" / "*"
                         / "*.so"))
