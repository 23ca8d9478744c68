"""The small-operator schedule (``einsum("ij,ej->ei", D, u)``: one work-item
per batch element, the operator staged in local memory) with 64-bit index
arithmetic (``small_operator_wide_indices``): values equal to NumPy's for
operators of several shapes (35x35 as the DG benchmark, 20x20, 1x1,
64x35), batch sizes that are not multiples of the work-group, real and
complex dtypes, with the update of the DG step fused in; the wide
indices are used exactly when the schedule is chosen and can be turned
off (same values)."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy.options import CodegenOptions


def _integer_valued(rng, shape, dtype):
    """Small integers (every summation order is exact) of *dtype*."""
    x = rng.integers(-4, 5, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-4, 5, shape).astype(dtype)
    return x


def _kernels(prg):
    return [tu.default_entrypoint for tu in prg.programs]


def _is_small_operator(knl) -> bool:
    import loopy as lp
    return any(tv.address_space == lp.AddressSpace.LOCAL
               for tv in knl.temporary_variables.values())


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


# (operator shape, batch elements, options): the DG benchmark's operator,
# a square one, a 1x1 one (not the schedule: one output), more outputs
# than terms (64 outputs: the matmul tiles by default, the small-operator
# schedule without them); batch sizes odd and not multiples of the
# work-group (128)
NO_TILES = {"tile_rows": 1, "tile_cols": 1}
CASES = [((35, 35), 1001, {}), ((35, 35), 257, {}), ((20, 20), 333, {}),
         ((1, 1), 1001, {}), ((64, 35), 515, {}), ((64, 35), 515, NO_TILES)]


@pytest.mark.parametrize("op_shape,n_el,options", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_einsum_matches_numpy(queue, op_shape, n_el, options, dtype):
    rng = np.random.default_rng(n_el + op_shape[0])
    d = _integer_valued(rng, op_shape, dtype)
    u = _integer_valued(rng, (n_el, op_shape[1]), dtype)
    pd = pt.make_placeholder("d", d.shape, dtype)
    pu = pt.make_placeholder("u", u.shape, dtype)
    prg = pt.generate_loopy(pt.einsum("ij,ej->ei", pd, pu), options=options)
    (knl,) = _kernels(prg)
    opts = CodegenOptions.from_environment(**options)
    tiles = (opts.tile_rows * opts.tile_cols > 1
             and op_shape[0] >= 8 * opts.tile_cols and n_el >= 8 * opts.tile_rows)
    chosen = op_shape[0] > 1 and not tiles
    assert _is_small_operator(knl) == chosen
    assert (knl.index_dtype.numpy_dtype == np.int64) == chosen
    _, got = prg(queue, d=d, u=u)
    expected = np.einsum("ij,ej->ei", d, u)
    assert _first(got).dtype == expected.dtype
    np.testing.assert_array_equal(_first(got), expected)


@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dg_step_matches_numpy(queue, wide, dtype):
    """``u + dt * einsum(...)`` for three steps, random values: NumPy's
    rounding (no contraction) with and without the wide indices."""
    n_el, n = 1001, 35
    rng = np.random.default_rng(3)
    d_mat = (rng.standard_normal((n, n)) / n).astype(dtype)
    u0 = rng.standard_normal((n_el, n)).astype(dtype)
    dt = dtype(0.01)
    u = pt.make_placeholder("u", u0.shape, dtype)
    d = pt.make_data_wrapper(d_mat)
    ref = u0
    for _ in range(3):
        u = u + dt * pt.einsum("ij,ej->ei", d, u)
        ref = ref + dt * np.einsum("ij,ej->ei", d_mat, ref)
    prg = pt.generate_loopy(u, options={"small_operator_wide_indices": wide})
    knls = _kernels(prg)
    assert all(_is_small_operator(k) for k in knls)
    assert all((k.index_dtype.numpy_dtype == np.int64) == wide for k in knls)
    _, got = prg(queue, u=u0)
    rtol = 1e-13 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(_first(got), ref, rtol=rtol, atol=rtol)


def test_wide_indices_from_environment(monkeypatch):
    from pytato_like.diagnostic import ConfigurationError
    variable = "PYTATO_LIKE_SMALL_OPERATOR_WIDE_INDICES"
    assert CodegenOptions.from_environment(environ={}).small_operator_wide_indices
    assert not CodegenOptions.from_environment(
        environ={variable: "0"}).small_operator_wide_indices
    with pytest.raises(ConfigurationError, match=variable):
        CodegenOptions.from_environment(environ={variable: "maybe"})


def test_code_generation_of_ilp_schedules_is_quiet(queue, monkeypatch):
    """The small-operator (DG) and register-tiled (matmul) schedules tag
    their accumulators ``ilp``, for which loopy falls back to its v1
    scheduler: that is expected, so no warning reaches the user through
    generate_loopy, the call, or reading the source. (Shapes of this test
    only and no disk cache: the kernels are generated here.)"""
    import warnings
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "0")
    rng = np.random.default_rng(4)
    d, u = rng.standard_normal((35, 35)), rng.standard_normal((1003, 35))
    a = rng.standard_normal((72, 72))
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    pa = pt.make_placeholder("a", a.shape, np.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dg = pt.generate_loopy(pu + 0.01 * pt.einsum("ij,ej->ei", pd, pu),
                               options={"host_first_call": False})
        mm = pt.generate_loopy(pa @ pa, options={"host_first_call": False})
        (got_dg,) = dg(queue, d=d, u=u)[1]
        (got_mm,) = mm(queue, a=a)[1]
        assert "__kernel" in dg.source and "__kernel" in mm.source
    assert [str(w.message) for w in caught] == []
    np.testing.assert_allclose(got_dg, u + 0.01 * np.einsum("ij,ej->ei", d, u),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got_mm, a @ a, rtol=1e-12, atol=1e-12)
