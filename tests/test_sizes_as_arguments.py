"""Kernels that differ only in array sizes are one kernel (sizes passed as
kernel arguments), where that leaves the schedule unchanged; elsewhere the
sizes stay constants. Results are checked against the NumPy target."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import opencl_build

cl = pytest.importorskip("pyopencl")


def _shrinking_steps(n: int, steps: int, shape_tail=()):
    u = pt.make_placeholder("u", (n, *shape_tail), np.float64)
    a = u
    for _ in range(steps):
        a = a[1:-1] + 0.25 * (a[:-2] - 2 * a[1:-1] + a[2:])
    return u, a


def _run_both(queue, y, **inputs):
    # steps not fused into one kernel (time tiles, tested on their own):
    # one launch per step, of one kernel
    prg = pt.generate_loopy(y, options={"time_tile": 0})
    _, (out,) = prg(queue, **inputs)
    ref = pt.generate_numpy(y)(**inputs)
    ref = ref[0] if isinstance(ref, tuple) else ref
    np.testing.assert_allclose(out, ref, rtol=1e-14, atol=0)
    return prg


def test_steps_of_a_shrinking_loop_are_one_kernel(queue, rng):
    _, y = _shrinking_steps(3000, 12)
    prg = _run_both(queue, y, u=rng.standard_normal(3000))
    assert len(prg.plan.kernels) == 1
    assert len(prg.plan.launches) == 12
    # the sizes are arguments, the indices stay 32-bit
    code = prg.plan.kernels[0].device_code
    assert "int const _pt_s0" in code and "(int) get_local_id" in code


def test_programs_of_other_sizes_reuse_the_kernel(queue, rng):
    _, y1 = _shrinking_steps(1000, 3)
    _run_both(queue, y1, u=rng.standard_normal(1000))
    calls = opencl_build.CODEGEN_CALLS
    _, y2 = _shrinking_steps(1700, 5)
    _run_both(queue, y2, u=rng.standard_normal(1700))
    assert opencl_build.CODEGEN_CALLS == calls          # nothing generated


def test_short_last_axis_keeps_constant_sizes(queue, rng):
    # a last axis shorter than a work-group is scheduled by its extent
    # (whole axis on l.0, rows packed into the work-group): constants kept
    _, y = _shrinking_steps(400, 4, shape_tail=(6,))
    prg = _run_both(queue, y, u=rng.standard_normal((400, 6)))
    assert len(prg.plan.kernels) == 4


def test_reductions_keep_constant_sizes(queue, rng):
    x = pt.make_placeholder("x", (300, 200), np.float64)
    ys = pt.make_dict_of_named_arrays({
        f"r{k}": pt.sum(x[k:, :] * 2.0, axis=1) for k in range(3)})
    prg = pt.generate_loopy(ys)
    xv = rng.standard_normal((300, 200))
    _, out = prg(queue, x=xv)
    for k in range(3):
        np.testing.assert_allclose(out[f"r{k}"], (xv[k:] * 2.0).sum(axis=1),
                                   rtol=1e-12, atol=1e-12)
    assert all("int const _pt_s" not in k.device_code
               for k in prg.plan.kernels)


def test_option_turns_sizes_as_arguments_off(queue, rng):
    _, y = _shrinking_steps(500, 3)
    prg = pt.generate_loopy(y, options={"sizes_as_arguments": False,
                                        "time_tile": 0,
                                        "small_chunk_elements": 0})
    uv = rng.standard_normal(500)
    _, (out,) = prg(queue, u=uv)
    np.testing.assert_allclose(out, pt.generate_numpy(y)(u=uv), rtol=1e-14)
    assert len(prg.plan.kernels) == 3


def test_sizes_past_2_to_the_31_get_64_bit_arguments_and_indices():
    # code generation only: nothing of this size is allocated
    from pytato_like.target.loopy.codegen import build_plan
    _, big = _shrinking_steps(2**31 + 100, 2)
    _, small = _shrinking_steps(1000, 2)
    (big_plan, _), (small_plan, _) = build_plan({"y": big}), build_plan(
        {"y": small})
    assert len(big_plan.kernels) == len(small_plan.kernels) == 1
    assert big_plan.kernels[0].key != small_plan.kernels[0].key
    code = big_plan.kernels[0].device_code
    assert "long const _pt_s0" in code and "(long) get_local_id" in code
