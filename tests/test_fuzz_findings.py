"""Cases the random-DAG fuzzer (``python -m bench.fuzz``) found where the
loopy target disagreed with NumPy, kept as direct tests on both targets."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_log10_matches_numpy(queue, dtype):
    # seed 16: complex log10 failed to compile (loopy has no complex log10)
    zv = np.array([1 + 1j, -2 - 0j, -2 + 0j, 1e-3j, 3.5 - 2j, 1e30 + 1e30j,
                   -0.5 + 1e-20j], dtype)
    z = pt.make_placeholder("z", zv.shape, dtype)
    expected = np.log10(zv)
    _, (got,) = pt.generate_loopy(pt.log10(z))(queue, z=zv)
    host = pt.generate_numpy(pt.log10(z))(z=zv)
    for value in (got, host):
        assert value.dtype == expected.dtype
        np.testing.assert_allclose(value, expected,
                                   rtol=4 * np.finfo(dtype).eps)
        # the branch cut: the sign of a zero imaginary part picks the side
        np.testing.assert_array_equal(np.signbit(value.imag),
                                      np.signbit(expected.imag))


@pytest.mark.parametrize(("st", "ut"), [(np.int32, np.uint64), (np.int64, np.uint64),
                                        (np.int32, np.uint32), (np.int8, np.uint16),
                                        (np.int64, np.uint8)])
def test_signed_unsigned_comparisons_are_exact(queue, st, ut):
    # seed 16: int32 > uint64 compared -3 as a huge unsigned number (C's
    # conversion); NumPy compares the mathematical values
    sv = np.array([-3, -1, 0, 2, 5, 7, np.iinfo(st).max, np.iinfo(st).min], st)
    uv = np.array([5, 0, 0, 2, 3, 7, np.iinfo(ut).max, 1], ut)
    s = pt.make_placeholder("s", sv.shape, st)
    u = pt.make_placeholder("u", uv.shape, ut)
    ops = {"lt": (lambda x, y: x < y), "le": (lambda x, y: x <= y),
           "gt": (lambda x, y: x > y), "ge": (lambda x, y: x >= y),
           "eq": pt.equal, "ne": pt.not_equal}
    lazy, expected = {}, {}
    for name, op in ops.items():
        nop = getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater",
                           "ge": "greater_equal", "eq": "equal",
                           "ne": "not_equal"}[name])
        lazy[name + "_su"], expected[name + "_su"] = op(s, u), nop(sv, uv)
        lazy[name + "_us"], expected[name + "_us"] = op(u, s), nop(uv, sv)
    lazy["neg_literal"] = u > -1      # a negative Python int beside unsigned
    expected["neg_literal"] = uv > -1
    _, got = pt.generate_loopy(lazy)(queue, s=sv, u=uv)
    host = pt.generate_numpy(lazy)(s=sv, u=uv)
    for key, ref in expected.items():
        np.testing.assert_array_equal(got[key], ref, err_msg=key)
        np.testing.assert_array_equal(host[key], ref, err_msg=key)


def test_computed_uint64_gather_indices(queue):
    # seed 114: a where() or % of uint64 values as gather index failed to
    # compile (loopy typed the select float64: the int8 condition promoted
    # with uint64)
    xv = np.array([3, 0, 2, 7], np.uint64)
    cv = np.array([True, False, False, True])
    av = np.arange(4.0) * 1.5
    x = pt.make_placeholder("x", xv.shape, np.uint64)
    c = pt.make_placeholder("c", cv.shape, np.bool_)
    a = pt.make_placeholder("a", av.shape, np.float64)
    lazy = {"where": a[pt.where(c, x % 4, x // 3)], "mod": a[x % 2],
            "both": a[pt.where(c, x, x) % 3],
            "value": pt.where(c, x, np.uint64(2**64 - 1))}
    expected = {"where": av[np.where(cv, xv % 4, xv // 3)], "mod": av[xv % 2],
                "both": av[np.where(cv, xv, xv) % 3],
                "value": np.where(cv, xv, np.uint64(2**64 - 1))}
    _, got = pt.generate_loopy(lazy)(queue, x=xv, c=cv, a=av)
    host = pt.generate_numpy(lazy)(x=xv, c=cv, a=av)
    for key, ref in expected.items():
        assert got[key].dtype == ref.dtype, key
        np.testing.assert_array_equal(got[key], ref, err_msg=key)
        np.testing.assert_array_equal(host[key], ref, err_msg=key)


@pytest.mark.parametrize("to", [np.float32, np.float64])
def test_float_to_int64_cast_inside_a_float_cast(queue, to):
    # seed 5247: the out-of-range fallback of a float -> int64 cast, an
    # integer constant, was printed as a float literal under an enclosing
    # cast to float32, and ~ of it failed to compile
    xv = np.array([1.5, -2.7, 1e300, np.nan, -1e19, 0.0])
    x = pt.make_placeholder("x", xv.shape, np.float64)
    i = x.astype(np.int64)
    lazy = {"not": (~pt.maximum(i, i[::-1])).astype(to),
            "plain": i.astype(to), "int32": (~x.astype(np.int32)).astype(to)}
    with np.errstate(invalid="ignore"):   # NumPy's scalar-loop values
        iv = np.array([np.array([v]).astype(np.int64)[0] for v in xv])
        jv = np.array([np.array([v]).astype(np.int32)[0] for v in xv])
    expected = {"not": (~np.maximum(iv, iv[::-1])).astype(to),
                "plain": iv.astype(to), "int32": (~jv).astype(to)}
    _, got = pt.generate_loopy(lazy)(queue, x=xv)
    for key, ref in expected.items():
        assert got[key].dtype == ref.dtype
        np.testing.assert_array_equal(got[key], ref, err_msg=key)


def test_min_reduction_of_a_float_to_int32_cast(queue):
    # seed 1706: the int32 fallback printed as -2147483648 is a long in C,
    # so min(int, long) of the reduction was ambiguous and did not compile
    xv = np.random.default_rng(0).uniform(-3, 3, (5, 4, 5)).astype(np.float32)
    xv[0, 0, 0], xv[1, 2, 3] = np.nan, 3e9
    x = pt.make_placeholder("x", xv.shape, np.float32)
    i = x.astype(np.int32)
    lazy = {"min": pt.amin(i, axis=2), "max": pt.amax(i, axis=0)}
    with np.errstate(invalid="ignore"):   # NumPy's scalar-loop values
        iv = np.array([np.array([v]).astype(np.int32)[0]
                       for v in xv.ravel()]).reshape(xv.shape)
    _, got = pt.generate_loopy(lazy)(queue, x=xv)
    np.testing.assert_array_equal(got["min"], iv.min(axis=2))
    np.testing.assert_array_equal(got["max"], iv.max(axis=0))


#: consumers of a complex value that give a real (or boolean) one
_COMPLEX_TO_REAL = {
    "real": (pt.real, np.real),
    "imag": (pt.imag, np.imag),
    "abs": (pt.abs, np.abs),
    "not": (pt.logical_not, np.logical_not),
    "all": (pt.all, np.all),
    "where": (lambda c: pt.where(c, 1.5, -2.0), lambda c: np.where(c, 1.5, -2.0)),
    "to_real": (lambda c: c.astype(c.dtype.type(0).real.dtype),
                lambda c: c.real.astype(c.dtype.type(0).real.dtype)),
    "to_float32": (lambda c: c.astype(np.float32),
                   lambda c: c.real.astype(np.float32)),
}


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("consumer", sorted(_COMPLEX_TO_REAL))
@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_complex_arithmetic_on_converted_real_values(queue, src, consumer):
    # seeds 7887, 8845, 9745: loopy prints complex + * - as cfloat_add,
    # cfloat_mul, ... only in a kernel with a complex argument or temporary;
    # complex values computed from real ones and consumed as real ones
    # (no complex variable anywhere) were printed as C operators on
    # cfloat_t and did not compile
    cplx = np.result_type(src, np.complex64)
    xv = np.array([0.0, 1.5, -2.0, 3.25, -0.0, 7.0], src)
    x = pt.make_placeholder("x", xv.shape, src)
    forms = {
        "neg": (lambda a: -a.astype(cplx), lambda a: -a.astype(cplx)),
        "scaled": (lambda a: 2 * a.astype(cplx), lambda a: 2 * a.astype(cplx)),
        "shifted": (lambda a: a.astype(cplx) * (1 - 2j) + (a - 1.5),
                    lambda a: a.astype(cplx) * (1 - 2j) + (a - 1.5)),
        "created": (lambda a: pt.zeros_like(a, dtype=cplx) + 1 - a,
                    lambda a: np.zeros_like(a, dtype=cplx) + 1 - a),
    }
    lazy_op, np_op = _COMPLEX_TO_REAL[consumer]
    for form, (lazy_form, np_form) in forms.items():
        expected = np.asarray(np_op(np_form(xv)))
        # one program per form: no other output may bring a complex variable
        _, (got,) = pt.generate_loopy(lazy_op(lazy_form(x)))(queue, x=xv)
        host = pt.generate_numpy(lazy_op(lazy_form(x)))(x=xv)
        for value in (got, host):
            assert value.dtype == expected.dtype, form
            np.testing.assert_allclose(value, expected, err_msg=form,
                                       rtol=4 * np.finfo(src).eps)


@pytest.mark.parametrize("seed", [7887, 8845, 9745])
def test_fuzz_seeds_with_intermediate_complex_values(queue, seed):
    # the fuzz seeds of the bug above; each output compiled alone, so that
    # a complex output cannot enable complex arithmetic for the others
    from pytato_like._traversal import topological_order
    from pytato_like.testing import assert_results_close, make_random_dag
    with np.errstate(all="ignore"):
        dag = make_random_dag(seed, n_ops=12, error_percent=3)
    assert dag.expected_error is None
    assert "complex" in dag.program_text()
    assert any(dag.expected[name].dtype.kind != "c" for name in dag.outputs)
    for name, ary in dag.outputs.items():
        reads = {n.name for n in topological_order([ary])
                 if isinstance(n, pt.Placeholder)}
        _, (got,) = pt.generate_loopy(ary)(
            queue, **{k: v for k, v in dag.inputs.items() if k in reads})
        rtol, atol = dag.tolerances[name]
        assert_results_close(got, dag.expected[name], rtol=rtol, atol=atol,
                             err_msg=f"{name} of\n{dag.program_text()}")
