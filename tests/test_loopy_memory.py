"""Device memory of compiled programs: temporaries live only from their
first to their last launch, and the peak is reported."""

from __future__ import annotations

import logging

import numpy as np

import pytato_like as pt


def _stencil_steps(u, steps):
    for _ in range(steps):
        u = u + 0.1 * (pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=0)
                       + pt.roll(u, 1, axis=1) + pt.roll(u, -1, axis=1) - 4 * u)
    return u


def test_temporaries_of_a_long_chain_do_not_accumulate(queue):
    n, steps = 128, 30
    u = pt.make_placeholder("u", (n, n), np.float64)
    prg = pt.generate_loopy(_stencil_steps(u, steps))
    temporaries = [b for b in prg.plan.buffers.values() if b.kind == "temporary"]
    assert len(temporaries) >= steps - 1      # one stored array per step
    uv = np.random.default_rng(0).standard_normal((n, n))
    _, (got,) = prg(queue, u=uv)
    ref = uv
    for _ in range(steps):
        ref = ref + 0.1 * (np.roll(ref, 1, 0) + np.roll(ref, -1, 0)
                           + np.roll(ref, 1, 1) + np.roll(ref, -1, 1) - 4 * ref)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # input + output + the two temporaries a step reads and writes
    assert prg.stats.peak_device_bytes <= 4 * uv.nbytes, \
        prg.stats.peak_device_bytes / uv.nbytes
    assert prg.stats.peak_device_bytes >= 2 * uv.nbytes


def test_fused_chain_peak_is_its_inputs_and_outputs(queue):
    xs = [pt.make_placeholder(name, (1000,), np.float64) for name in "abcd"]
    ys = xs
    for _ in range(20):
        ys = [ys[k] + 0.5 * ys[(k + 1) % 4] for k in range(4)]
    prg = pt.generate_loopy(dict(zip("wxyz", ys)))
    inputs = {name: np.ones(1000) for name in "abcd"}
    prg(queue, **inputs)
    assert prg.stats.peak_device_bytes == 8 * 8 * 1000     # 4 in, 4 out


def test_peak_memory_is_in_the_call_report(queue, caplog):
    u = pt.make_placeholder("u", (64, 64), np.float64)
    prg = pt.generate_loopy(_stencil_steps(u, 3), options={"report": True})
    with caplog.at_level(logging.INFO, logger="pytato_like"):
        prg(queue, u=np.zeros((64, 64)))
    lines = [r.getMessage() for r in caplog.records if r.name == "pytato_like.run"]
    assert any("peak device memory" in line for line in lines), lines
