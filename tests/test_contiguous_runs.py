"""Element-wise groups run as loops over runs of the contiguous axis
(target/loopy/schedule.py, the ``contiguous_run`` option) and kernels read their
work-group ids once (target/loopy/kernels.py, ``hoist_group_ids``): the
same values as NumPy at every size around a run's length, and the code
has the shape the speed depends on."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _kernel_source import kernels

import pytato_like as pt
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.kernels import hoist_group_ids

cl = pytest.importorskip("pyopencl")

RUN = CodegenOptions.from_environment().contiguous_run


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


@pytest.mark.parametrize("n", [1, 7, RUN - 1, RUN, RUN + 1, 3 * RUN + 5])
def test_stencil_matches_numpy_around_the_run_length(queue, n):
    u = pt.make_placeholder("u", (n,), np.float64)
    v = u + 0.25 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
    w = pt.sin(v) * 3 - u
    uv = np.random.default_rng(n).random(n)
    vv = uv + 0.25 * (np.roll(uv, 1) - 2 * uv + np.roll(uv, -1))
    _, out = pt.generate_loopy({"v": v, "w": w})(queue, u=uv)
    np.testing.assert_allclose(out["v"], vv, rtol=1e-15, atol=0)
    np.testing.assert_allclose(out["w"], np.sin(vv) * 3 - uv, rtol=1e-14)


@pytest.mark.parametrize("shape", [(3, 2 * RUN + 3), (5, 7, 300),
                                   (2, RUN + 1, 2)])
def test_multidimensional_groups_match_numpy(queue, shape):
    x = pt.make_placeholder("x", shape, np.float32)
    y = pt.make_placeholder("y", shape[-1:], np.float32)
    z = (x * 2 + y) / 3
    t = pt.transpose(x)
    rng = np.random.default_rng(len(shape))
    xv = rng.random(shape, dtype=np.float32)
    yv = rng.random(shape[-1:], dtype=np.float32)
    _, out = pt.generate_loopy({"z": z, "t": t})(queue, x=xv, y=yv)
    np.testing.assert_allclose(out["z"], (xv * 2 + yv) / 3, rtol=1e-6)
    np.testing.assert_array_equal(out["t"], xv.T)


def test_elementwise_kernel_is_a_loop_per_work_item():
    u = pt.make_placeholder("u", (100_000,), np.float64)
    source = pt.generate_loopy(2 * u + 1).get_source()
    (kernel,) = kernels(source)
    assert "reqd_work_group_size(1, 1, 1)" in kernel
    assert kernel.count("for (") == 1
    assert f"{RUN} * _pt_group_id_0" in kernel
    # the id is read once, before the loop
    assert kernel.count("gid(0)") == 1
    assert kernel.index("gid(0)") < kernel.index("for (")


def test_reductions_keep_their_schedule():
    a = pt.make_placeholder("a", (300, 500), np.float64)
    b = pt.make_placeholder("b", (500, 200), np.float64)
    source = pt.generate_loopy(a @ b).get_source()
    # register-blocked tiles of work-groups of 8 x 8 work-items
    assert "reqd_work_group_size(8, 8, 1)" in source


def test_run_length_zero_restores_work_groups_of_work_items():
    code = ("import numpy as np, pytato_like as pt\n"
            "u = pt.make_placeholder('u', (100000,), np.float64)\n"
            "print(pt.generate_loopy(2 * u + 1).get_source())\n")
    env = dict(os.environ, PYTATO_LIKE_CONTIGUOUS_RUN="0")
    source = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                            capture_output=True, text=True,
                            timeout=120).stdout
    assert "reqd_work_group_size(64, 1, 1)" in source
    assert "for (" not in source


# {{{ hoist_group_ids on its own

_TWO_KERNELS = """\
#define lid(N) ((int) get_local_id(N))
#define gid(N) ((int) get_group_id(N))

__kernel void a(__global double *__restrict__ x)
{
  for (int i = 0; i <= 3; ++i)
  {
    x[4 * gid(0) + i] = gid(1);
  }
}

__kernel void b(__global double *__restrict__ x)
{
  x[lid(0)] = 1.0;
}
"""


def test_hoist_reads_each_used_id_once_per_kernel():
    out = hoist_group_ids(_TWO_KERNELS)
    a, b = kernels(out)
    assert "int const _pt_group_id_0 = gid(0);" in a
    assert "int const _pt_group_id_1 = gid(1);" in a
    assert "x[4 * _pt_group_id_0 + i] = _pt_group_id_1;" in a
    assert a.count("gid(") == 2  # the two declarations only
    assert "_pt_group_id" not in b  # uses no group id
    # the macros and everything outside the bodies are untouched
    assert out.startswith(_TWO_KERNELS[:_TWO_KERNELS.index("__kernel")])


def test_hoist_keeps_the_macros_index_type():
    code = _TWO_KERNELS.replace("((int) get_group_id", "((long) get_group_id")
    (a, _) = kernels(hoist_group_ids(code))
    assert "long const _pt_group_id_0 = gid(0);" in a


def test_hoist_leaves_code_without_the_macro_alone():
    code = "__kernel void k(__global int *x) { x[0] = 1; }\n"
    assert hoist_group_ids(code) == code

# }}}
