"""Register-blocked products on the loopy target: matmul-like reductions
over 2-d output groups run with a tile of outputs per work-item, and small
dense operators applied to many batch elements (the DG einsum) run one
work-item per batch element with the operator staged in local memory
(:func:`pytato_like.target.loopy.schedule.parallelize`); values as NumPy's
at sizes that do and do not divide the tile or the work-group, for other
reductions over 2-d groups too, and the schedules are checked to be the
ones chosen (kernel inames, tags and temporaries)."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy.options import CodegenOptions

#: the options generate_loopy uses here (no PYTATO_LIKE_* variable set)
OPTIONS = CodegenOptions.from_environment()

# (rows, reduction, columns): tile-divisible, ragged in every axis, and
# below the size where blocking starts (plain schedule)
SHAPES = [(256, 64, 128), (203, 77, 157), (33, 5, 70), (7, 9, 11)]


def _uses_tiles(m, n):
    return (m >= OPTIONS.tile_rows * 8 and n >= OPTIONS.tile_cols * 8)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_matmul_matches_numpy(queue, m, k, n, dtype):
    rng = np.random.default_rng(m + k + n)
    a = rng.integers(-5, 6, (m, k)).astype(dtype)
    b = rng.integers(-5, 6, (k, n)).astype(dtype)
    pa = pt.make_placeholder("a", (m, k), dtype)
    pb = pt.make_placeholder("b", (k, n), dtype)
    _, got = pt.generate_loopy(pa @ pb)(queue, a=a, b=b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    # small integers: every order of summation is exact
    np.testing.assert_array_equal(got, a @ b)


def test_tiles_are_applied_to_large_products(queue):
    """The kernel of a 256x128 product carries the ilp tile inames (the
    test above would pass without blocking; this one would not)."""
    m, k, n = 256, 64, 128
    assert _uses_tiles(m, n)
    pa = pt.make_placeholder("a", (m, k), np.float64)
    pb = pt.make_placeholder("b", (k, n), np.float64)
    prg = pt.generate_loopy(pa @ pb)
    source = prg.source if isinstance(prg.source, str) else prg.get_source()
    accumulators = OPTIONS.tile_rows * OPTIONS.tile_cols
    assert f"[{accumulators - 1}]" in source


@pytest.mark.parametrize("reduce", ["sum", "amax", "prod"])
def test_other_reductions_over_2d_groups(queue, reduce):
    x = np.random.default_rng(3).random((70, 13, 97)) + 0.5
    x[5, 3, 7] = np.nan
    p = pt.make_placeholder("x", x.shape, np.float64)
    _, got = pt.generate_loopy(getattr(pt, reduce)(p, axis=1))(queue, x=x)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, getattr(np, reduce)(x, axis=1),
                               rtol=1e-13)
    assert np.isnan(got[5, 7]) and np.isnan(getattr(np, reduce)(x, axis=1)[5, 7])


def test_matmul_chain_and_transposed_operand(queue):
    rng = np.random.default_rng(1)
    a, b = rng.random((130, 90)), rng.random((130, 90))
    pa = pt.make_placeholder("a", a.shape, np.float64)
    pb = pt.make_placeholder("b", b.shape, np.float64)
    expr = (pa @ pb.T) @ pa + 1.0
    _, got = pt.generate_loopy(expr)(queue, a=a, b=b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, (a @ b.T) @ a + 1.0, rtol=1e-12)


def test_dg_einsum_matches_numpy(queue):
    rng = np.random.default_rng(2)
    n_el, n_dof = 1001, 35
    d, u = rng.random((n_dof, n_dof)), rng.random((n_el, n_dof))
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    expr = pu + 0.1 * pt.einsum("ij,ej->ei", pd, pu)
    _, got = pt.generate_loopy(expr)(queue, d=d, u=u)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, u + 0.1 * np.einsum("ij,ej->ei", d, u),
                               rtol=1e-12)


# {{{ small dense operators applied to many batch elements

def _small_operator_kernels(prg):
    """(ilp inames, local-memory temporaries, l.0 inames) of each kernel."""
    import loopy as lp
    found = []
    for tu in prg.programs:
        knl = tu.default_entrypoint
        ilp = {name for name, iname in knl.inames.items()
               if any(isinstance(t, lp.kernel.data.IlpBaseTag) for t in iname.tags)}
        local_l0 = {name for name, iname in knl.inames.items()
                    if any(isinstance(t, lp.kernel.data.LocalInameTag)
                           and t.axis == 0 for t in iname.tags)}
        staged = {name: tv for name, tv in knl.temporary_variables.items()
                  if tv.address_space == lp.AddressSpace.LOCAL}
        found.append((ilp, staged, local_l0, knl))
    return found


def _integer_valued(rng, shape, dtype):
    """Small integers (every summation order is exact) of *dtype*."""
    x = rng.integers(-4, 5, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-4, 5, shape).astype(dtype)
    return x


# (einsum spec, operator shape, batch operand's trailing shape): the DG
# case (operator strided along the outputs: staged transposed), the
# operator already contiguous along the outputs (read in place), more
# outputs than reduction terms and the reverse
SMALL_OPERATOR_CASES = [
    ("ij,ej->ei", (35, 35), (35,)),
    ("ji,ej->ei", (35, 35), (35,)),
    ("ij,ej->ei", (10, 13), (13,)),
    ("ij,ej->ei", (20, 3), (3,)),
    # operator rows longer than the work-group (copied in strips)
    ("ij,ej->ei", (20, 150), (150,)),
]


@pytest.mark.parametrize("spec,op_shape,tail,n_batch,dtype", [
    *[(*case, n_batch, np.float64) for case in SMALL_OPERATOR_CASES
      for n_batch in (1, 131, 1001)],
    *[(*SMALL_OPERATOR_CASES[k], n_batch, dtype) for k in (0, 2)
      for n_batch in (1, 131)
      for dtype in (np.float32, np.complex64, np.complex128)],
])
def test_small_operator_matches_numpy(queue, spec, op_shape,
                                      tail, n_batch, dtype):
    # every batch size here runs the small-operator schedule (the test
    # below checks that it is the one chosen)
    rng = np.random.default_rng(n_batch + op_shape[0])
    d = _integer_valued(rng, op_shape, dtype)
    u = _integer_valued(rng, (n_batch, *tail), dtype)
    pd = pt.make_placeholder("d", d.shape, dtype)
    pu = pt.make_placeholder("u", u.shape, dtype)
    prg = pt.generate_loopy(pt.einsum(spec, pd, pu),
                            options={"small_operator_min_batch": 1})
    (ilp, _, local_l0, _), = _small_operator_kernels(prg)
    assert ilp and local_l0
    _, got = prg(queue, d=d, u=u)
    got = got[0] if isinstance(got, (tuple, list)) else got
    expected = np.einsum(spec, d, u)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n_el", [128, 1001])
def test_dg_steps_with_data_wrapper_operator(queue, n_el):
    """The bench's DG program at small sizes: the operator is a data
    wrapper, three steps, random values (rounding as NumPy's to 1e-13)."""
    rng = np.random.default_rng(7)
    d_mat = rng.standard_normal((35, 35)) / 35
    u0 = rng.standard_normal((n_el, 35))
    u = pt.make_placeholder("u", u0.shape, np.float64)
    d = pt.make_data_wrapper(d_mat)
    ref = u0
    for _ in range(3):
        u = u + 0.01 * pt.einsum("ij,ej->ei", d, u)
        ref = ref + 0.01 * np.einsum("ij,ej->ei", d_mat, ref)
    _, got = pt.generate_loopy(u)(queue, u=u0)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("pad_bytes", [32, 0])
def test_small_operator_schedule_is_chosen(queue, pad_bytes):
    """The DG einsum at the bench's shape runs the small-operator schedule:
    the 35 outputs of an element are ilp accumulators, the batch axis is
    l.0 in work-groups of SMALL_OPERATOR_LOCAL, and the operator is staged
    in local memory with the output axis contiguous (stride 1). By default
    the accumulators are padded to 36 (9 vectors of 4 doubles) and the
    staged operator has a 36th, zero row; with ``pad_bytes`` 0 neither."""
    n_el, n = 5000, 35
    rows = 36 if pad_bytes else n
    pd = pt.make_placeholder("d", (n, n), np.float64)
    pu = pt.make_placeholder("u", (n_el, n), np.float64)
    prg = pt.generate_loopy(pu + 0.1 * pt.einsum("ij,ej->ei", pd, pu),
                            options={"small_operator_pad_bytes": pad_bytes})
    (ilp, staged, local_l0, knl), = _small_operator_kernels(prg)
    assert sorted(knl.get_constant_iname_length(i) for i in ilp) == sorted(
        {n, rows})
    assert any(knl.get_constant_iname_length(i) == OPTIONS.small_operator_local
               for i in local_l0)
    (tv,) = staged.values()
    assert tuple(tv.shape) == (rows, n)
    # axis 0 of d (the output axis i) is the contiguous one in the copy
    assert [t.stride for t in tv.dim_tags] == [1, rows]
    # the plain schedule's accumulator count was REDUCTION_ILP
    assert f"[{rows - 1}]" in prg.source
    rng = np.random.default_rng(0)
    d, u = rng.random((n, n)), rng.random((n_el, n))
    _, got = prg(queue, d=d, u=u)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, u + 0.1 * np.einsum("ij,ej->ei", d, u),
                               rtol=1e-13)


def test_operator_contiguous_along_outputs_is_not_staged():
    """An operator already contiguous along the outputs (``ej,ji->ei``,
    i.e. ``u @ d``) is read in place: no local-memory copy."""
    pd = pt.make_placeholder("d", (35, 35), np.float64)
    pu = pt.make_placeholder("u", (5000, 35), np.float64)
    (ilp, staged, _, _), = _small_operator_kernels(pt.generate_loopy(pu @ pd))
    assert ilp and not staged


@pytest.mark.parametrize("op_shape,n_batch", [
    ((40, 200), 500),   # operator too large to stage (8000 elements)
    ((35, 35), 100),    # too few batch elements for two work-groups
    ((100, 20), 500),   # too many outputs per batch element
])
def test_small_operator_not_chosen_outside_its_range(queue, op_shape,
                                                     n_batch):
    rng = np.random.default_rng(op_shape[1])
    d = _integer_valued(rng, op_shape, np.float64)
    u = _integer_valued(rng, (n_batch, op_shape[1]), np.float64)
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    prg = pt.generate_loopy(pt.einsum("ij,ej->ei", pd, pu))
    (_, staged, _, _), = _small_operator_kernels(prg)
    assert not staged
    assert f"[{op_shape[0] - 1}]" not in prg.source
    _, got = prg(queue, d=d, u=u)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_array_equal(got, np.einsum("ij,ej->ei", d, u))

# }}}


@pytest.mark.parametrize("pad_min_outputs,rows", [(27, 7), (1, 8)])
def test_small_operator_after_a_deep_chain(queue, pad_min_outputs, rows):
    """A 100 000-deep elementwise chain feeding the DG einsum compiles at
    the default recursion limit (the schedule's walks over kernel
    expressions see chunked, bounded expressions) and matches NumPy, with
    the 7 accumulators of an element as they are and padded to 8 (the
    padding's walks and reduction split included)."""
    import sys
    assert sys.getrecursionlimit() <= 1000 + 100
    n_el, n = 301, 7
    pu = pt.make_placeholder("u", (n_el, n), np.float64)
    pd = pt.make_placeholder("d", (n, n), np.float64)
    y = pu
    for _ in range(100_000):
        y = 0.5 * y + 1.0
    prg = pt.generate_loopy(pt.einsum("ij,ej->ei", pd, y), options={
        "small_operator_pad_min_outputs": pad_min_outputs})
    rng = np.random.default_rng(5)
    u, d = rng.random((n_el, n)), rng.random((n, n))
    ref = u.copy()
    for _ in range(100_000):
        ref = 0.5 * ref + 1.0
    _, got = prg(queue, u=u, d=d)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, np.einsum("ij,ej->ei", d, ref),
                               rtol=1e-12)
    assert any(tuple(tv.shape) == (rows, n)
               for _, staged, _, _ in _small_operator_kernels(prg)
               for tv in staged.values())
