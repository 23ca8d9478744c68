"""Hostile inputs on which the device must agree with NumPy: float to
integer casts, input names that are call options, sizes past 2^31, shapes
past what an int64 addresses."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic

INTEGER_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                 np.uint64, np.int64]


@pytest.mark.parametrize("length", [3, 4, 8, 17])
def test_float_to_uint8_wraps_as_numpy(queue, length):
    # the reported case: [-1, 256, 300.7, 2.9] -> [255, 0, 44, 2], whatever
    # the array length (NumPy's vector loops start at 4 elements)
    values = np.resize(np.array([-1.0, 256.0, 300.7, 2.9]), length)
    x = pt.make_placeholder("x", (length,), np.float64)
    _, (got,) = pt.generate_loopy(x.astype(np.uint8))(queue, x=values)
    np.testing.assert_array_equal(got, values.astype(np.uint8))
    np.testing.assert_array_equal(pt.generate_numpy(x.astype(np.uint8))(x=values),
                                  values.astype(np.uint8))


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
@pytest.mark.parametrize("src", [np.float64, np.float32])
def test_float_to_integer_casts_match_numpys_scalar_results(queue, dtype, src):
    # values inside the int64 range but outside (or at the edge of) the
    # target type: NumPy's C cast goes through a 64-bit integer and wraps.
    # Reference: NumPy on one element at a time (its scalar loop); beyond
    # the target range NumPy's own vector loops disagree with it.
    values = np.array([-1.0, 256.0, 300.7, 2.9, -129.5, 70000.2, -3.7, 65535.9,
                       -40000.5, 4294967295.0, -2.0**31, 1.5e9, 0.0, -0.9],
                      dtype=src)
    if np.dtype(dtype) == np.uint64:
        values = np.concatenate([values, np.array([1e19, 2.0**63 + 2.0**40],
                                                  dtype=src)])
    with np.errstate(invalid="ignore"):    # NumPy warns out of range
        ref = np.array([np.array([v]).astype(dtype)[0] for v in values])
    x = pt.make_placeholder("x", values.shape, src)
    _, (got,) = pt.generate_loopy(x.astype(dtype))(queue, x=values)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.dtype(dtype)
    with np.errstate(invalid="ignore"):
        one_by_one = [pt.generate_numpy(y.astype(dtype))(y=np.array([v]))[0]
                      for v in values
                      for y in [pt.make_placeholder("y", (1,), src)]]
    np.testing.assert_array_equal(one_by_one, ref)


@pytest.mark.parametrize("name", ["queue", "allocator", "wait_for", "out_host"])
def test_inputs_may_be_named_like_call_options(queue, name):
    import pyopencl.array as cla
    x = pt.make_placeholder(name, (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    result = 2 * x + y
    xv, yv = np.arange(3.0), np.ones(3)
    _, (got,) = pt.generate_loopy(result)(queue, **{name: xv, "y": yv})
    np.testing.assert_array_equal(got, 2 * xv + yv)
    # a device input of that name: outputs stay on the device as usual
    _, (dev,) = pt.generate_loopy(result)(
        queue, **{name: cla.to_device(queue, xv), "y": cla.to_device(queue, yv)})
    assert isinstance(dev, cla.Array)
    np.testing.assert_array_equal(dev.get(), 2 * xv + yv)
    np.testing.assert_array_equal(pt.generate_numpy(result)(**{name: xv, "y": yv}),
                                  2 * xv + yv)


def test_options_still_work_beside_ordinary_inputs(queue):
    import pyopencl.array as cla
    x = pt.make_placeholder("x", (3,), np.float64)
    _, (got,) = pt.generate_loopy(x + 1)(queue, x=np.zeros(3), out_host=False)
    assert isinstance(got, cla.Array)


@pytest.mark.parametrize("make", [
    lambda: pt.make_placeholder("a", (2**40, 2**40), np.float64),
    lambda: pt.zeros((2**32, 2**32)),
    lambda: pt.make_placeholder("a", (2**40, 1)) + pt.make_placeholder(
        "b", (1, 2**40)),
    lambda: pt.einsum("i,j->ij", pt.make_placeholder("a", (2**40,)),
                      pt.make_placeholder("b", (2**40,))),
])
def test_shapes_past_int64_are_refused(make):
    with pytest.raises(diagnostic.ArrayTooLargeError, match="elements"):
        make()


def test_largest_addressable_shape_is_accepted():
    a = pt.make_placeholder("a", (2**31, 2**31), np.int8)
    assert a.size == 2**62


def test_reduction_past_two_to_the_31_completes(queue):
    # the loop counter must be 64-bit: a 32-bit one never ends
    n = 2**31 + 5
    prg = pt.generate_loopy(pt.sum(pt.ones(n, dtype=np.int64)))
    assert "long" in prg.source
    _, (got,) = prg(queue)
    assert int(got) == n


def test_size_parameter_past_two_to_the_31(queue):
    # a size known only at run time gets 64-bit indices: a sum over
    # n = 2^33 ones (no memory of that size is used)
    n = pt.make_size_param("n")
    prg = pt.generate_loopy(pt.sum(pt.ones(n, dtype=np.int64)))
    assert "long" in prg.source
    _, (got,) = prg(queue, n=2**33)
    assert int(got) == 2**33


# {{{ run-time checks: what NumPy raises, the device raises


@pytest.mark.parametrize("bad", [[10, 11, 100], [0, -11, 2], [3, 10, 4]])
def test_out_of_range_gather_raises_index_error(queue, bad):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.int64)
    av, iv = np.arange(10.0), np.array(bad)
    with pytest.raises(IndexError):
        av[iv]                                          # NumPy raises
    with pytest.raises(IndexError):
        pt.generate_numpy(a[i] * 2)(a=av, i=iv)
    prg = pt.generate_loopy(a[i] * 2)
    with pytest.raises(diagnostic.IndexOutOfBoundsError,
                       match=r"is out of bounds for axis 0 with size 10") as err:
        prg(queue, a=av, i=iv)
    offending = max(bad) if max(bad) >= 10 else min(bad)
    assert f"index {offending} " in str(err.value)
    # in range (negative entries wrap): no error, NumPy's values
    good = np.array([1, -10, 9])
    _, (got,) = prg(queue, a=av, i=good)
    np.testing.assert_array_equal(got, 2 * av[good])


def test_gather_checks_name_the_axis_of_a_two_dimensional_gather(queue):
    a = pt.make_placeholder("a", (4, 6), np.float64)
    rows = pt.make_placeholder("rows", (2,), np.int32)
    cols = pt.make_placeholder("cols", (2,), np.int32)
    prg = pt.generate_loopy(a[:, cols] + a[rows, 1:3].sum())
    av = np.arange(24.0).reshape(4, 6)
    with pytest.raises(IndexError, match="axis 1 with size 6"):
        prg(queue, a=av, rows=np.array([0, 1], np.int32),
            cols=np.array([0, 6], np.int32))
    with pytest.raises(IndexError, match="axis 0 with size 4"):
        prg(queue, a=av, rows=np.array([-5, 1], np.int32),
            cols=np.array([0, 5], np.int32))
    _, (got,) = prg(queue, a=av, rows=np.array([3, -1], np.int32),
                    cols=np.array([-6, 5], np.int32))
    np.testing.assert_array_equal(
        got, av[:, [-6, 5]] + av[[3, -1], 1:3].sum())


def test_negative_integer_powers_raise_value_error(queue):
    x = pt.make_placeholder("x", (3,), np.int64)
    y = pt.make_placeholder("y", (3,), np.int64)
    xv = np.array([2, 3, 4])
    for expr, yv in ((x ** y, np.array([1, -2, 0])), (x ** -1, None),
                     (1 + x ** (y - 5), np.array([1, 2, 3]))):
        inputs = {"x": xv} if yv is None else {"x": xv, "y": yv}
        with pytest.raises(ValueError, match="negative integer powers"):
            pt.generate_numpy(expr)(**inputs)       # NumPy's own error
        with pytest.raises(diagnostic.NegativeIntegerPowerError,
                           match="negative integer powers"):
            pt.generate_loopy(expr)(queue, **inputs)
    # non-negative exponents: NumPy's values; float powers are not checked
    _, (got,) = pt.generate_loopy(x ** y)(queue, x=xv, y=np.array([1, 2, 0]))
    np.testing.assert_array_equal(got, xv ** np.array([1, 2, 0]))
    f = pt.make_placeholder("f", (3,), np.float64)
    _, (got,) = pt.generate_loopy(f ** y)(queue, f=np.ones(3) * 2,
                                         y=np.array([-1, 0, 2]))
    np.testing.assert_allclose(got, 2.0 ** np.array([-1, 0, 2]))


def test_checks_can_be_switched_off(queue):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.int64)
    checked = pt.generate_loopy(a[i])
    unchecked = pt.generate_loopy(a[i], options={"runtime_checks": False})
    assert checked.checks and not unchecked.checks
    assert len(unchecked.plan.launches) < len(checked.plan.launches)
    # no error (the values are unspecified, as NumPy would have raised)
    unchecked(queue, a=np.arange(10.0), i=np.array([10, 11, 100]))

# }}}


@pytest.mark.parametrize(("start", "stop", "step"), [
    (0.1, 1.7, 0.1), (-3.3, 7.1, 0.37), (1e-3, 2.0, 1 / 3), (5.0, -2.0, -0.7),
    (1.5, 1000.3, 0.013)])
@pytest.mark.parametrize("dtype", [None, np.float32])
def test_float_arange_is_bit_exact(queue, start, stop, step, dtype):
    # NumPy fills start + i * ((start + step) - start), each operation
    # rounded: a fused multiply-add on the device changed the last bit
    ref = np.arange(start, stop, step, dtype=dtype)
    lazy = pt.arange(start, stop, step, dtype=dtype)
    _, (got,) = pt.generate_loopy(lazy + 0)(queue)
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(pt.generate_numpy(lazy)(), ref)


# {{{ complex edge cases (C99 Annex G as NumPy implements it)


def _assert_same_complex(got, ref, rtol=1e-12):
    got, ref = np.asarray(got), np.asarray(ref)
    for part in (np.real, np.imag):
        g, r = part(got), part(ref)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
        np.testing.assert_array_equal(np.isinf(g), np.isinf(r))
        finite = np.isfinite(r)
        np.testing.assert_allclose(g[finite], r[finite], rtol=rtol, atol=1e-300)
        np.testing.assert_array_equal(np.sign(g[np.isinf(r)]),
                                      np.sign(r[np.isinf(r)]))


@pytest.mark.parametrize("ctype", [np.complex128, np.complex64])
def test_complex_power_and_division_edge_cases(queue, ctype):
    z = pt.make_placeholder("z", (7,), ctype)
    w = pt.make_placeholder("w", (7,), ctype)
    zv = np.array([0j, 0j, 1 + 1j, 2 - 1j, 1e30 + 1e30j, 0.5j, -3 + 0j],
                  dtype=ctype)
    wv = np.array([0j, 2 + 0j, 0j, -2 + 0j, 0j, 1.5 - 0.5j, 3 + 0j],
                  dtype=ctype)
    rtol = 1e-12 if ctype == np.complex128 else 1e-5
    prg = pt.generate_loopy({"pow": z ** w, "div": z / w})
    _, got = prg(queue, z=zv, w=wv)
    with np.errstate(all="ignore"):
        ref_target = pt.generate_numpy({"pow": z ** w, "div": z / w})(z=zv, w=wv)
        for key, ref in (("pow", zv ** wv), ("div", zv / wv)):
            _assert_same_complex(got[key], ref, rtol)
            _assert_same_complex(ref_target[key], ref, rtol)


def test_complex_sqrt_exp_and_inverse_trig(queue):
    z = pt.make_placeholder("z", (8,), np.complex128)
    zv = np.array([1e308 + 1e308j, -4 - 0j, -4 + 0j, 710 + 1j, 0.3 - 0.2j,
                   -2.5 + 1j, complex(np.inf, np.nan), 709.5 - 2j])
    prg = pt.generate_loopy({"sqrt": pt.sqrt(z), "exp": pt.exp(z)})
    _, got = prg(queue, z=zv)
    with np.errstate(all="ignore"):
        ref_target = pt.generate_numpy({"sqrt": pt.sqrt(z), "exp": pt.exp(z)})(z=zv)
        for key, ref in (("sqrt", np.sqrt(zv)), ("exp", np.exp(zv))):
            _assert_same_complex(got[key], ref)
            _assert_same_complex(ref_target[key], ref)
    # inverse trigonometric functions of complex values compile and match
    u = pt.make_placeholder("u", (6,), np.complex128)
    uv = np.array([0.3 - 0.2j, -2.5 + 1j, 1.5 + 0j, 0.1j, -0.7 - 3j, 4 + 4j])
    prg = pt.generate_loopy({"asin": pt.arcsin(u), "acos": pt.arccos(u),
                             "atan": pt.arctan(u)})
    _, got = prg(queue, u=uv)
    ref_target = pt.generate_numpy({"asin": pt.arcsin(u), "acos": pt.arccos(u),
                                    "atan": pt.arctan(u)})(u=uv)
    for key, ref in (("asin", np.arcsin(uv)), ("acos", np.arccos(uv)),
                     ("atan", np.arctan(uv))):
        _assert_same_complex(got[key], ref, 1e-10)
        _assert_same_complex(ref_target[key], ref, 1e-15)

# }}}


def test_complex_hyperbolic_and_log_match_numpy(queue):
    u = pt.make_placeholder("u", (9,), np.complex128)
    uv = np.array([0.3 - 0.2j, -2.5 + 1j, 1.5 + 0j, 0.1j, -0.7 - 3j, 4 + 4j,
                   -0.0 + 0j, -1 - 0j, 300 + 2j])
    funcs = ["sinh", "cosh", "tanh", "log", "sin", "cos", "tan"]
    result = {f: getattr(pt, f)(u) for f in funcs}
    _, got = pt.generate_loopy(result)(queue, u=uv)
    with np.errstate(all="ignore"):
        ref_target = pt.generate_numpy(result)(u=uv)
        for f in funcs:
            ref = getattr(np, f)(uv)
            _assert_same_complex(got[f], ref, 1e-10)
            _assert_same_complex(ref_target[f], ref, 1e-15)
    # log of a signed zero: -inf real part, the sign of the imaginary part
    # picks +-pi or 0 as in NumPy
    z = pt.make_placeholder("z", (3,), np.complex128)
    zv = np.array([0j, complex(-0.0, 0.0), complex(-0.0, -0.0)])
    _, (got,) = pt.generate_loopy(pt.log(z))(queue, z=zv)
    with np.errstate(divide="ignore"):
        _assert_same_complex(got, np.log(zv))
        np.testing.assert_array_equal(np.signbit(got.imag),
                                      np.signbit(np.log(zv).imag))


@pytest.mark.parametrize("dtype", [np.uint64, np.uint32, np.uint8])
def test_unsigned_index_arrays(queue, dtype):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (4,), dtype)
    av, good, bad = np.arange(10.0), np.array([1, 9, 3, 0], dtype), \
        np.array([1, 10, 3, 0], dtype)
    prg = pt.generate_loopy(a[i] * 2)
    _, (got,) = prg(queue, a=av, i=good)
    np.testing.assert_array_equal(got, av[good] * 2)
    np.testing.assert_array_equal(pt.generate_numpy(a[i] * 2)(a=av, i=good),
                                  av[good] * 2)
    with pytest.raises(IndexError):
        av[bad]
    with pytest.raises(diagnostic.IndexOutOfBoundsError, match="index 10 "):
        prg(queue, a=av, i=bad)
    unchecked = pt.generate_loopy(a[i] * 2, options={"runtime_checks": False})
    _, (got,) = unchecked(queue, a=av, i=good)
    np.testing.assert_array_equal(got, av[good] * 2)


@pytest.mark.parametrize("name", ["int", "double", "kernel", "global", "half",
                                  "sizeof", "restrict", "get_global_id",
                                  "self", "np", "cl", "lp", "i0", "out"])
def test_inputs_may_carry_c_and_host_code_names(queue, name):
    x = pt.make_placeholder(name, (3,), np.float64)
    xv = np.arange(3.0)
    _, (got,) = pt.generate_loopy(2 * x + 1)(queue, **{name: xv})
    np.testing.assert_array_equal(got, 2 * xv + 1)
    np.testing.assert_array_equal(pt.generate_numpy(2 * x + 1)(**{name: xv}),
                                  2 * xv + 1)


# {{{ argmax / argmin


ARG_CASES = [
    np.array([[1.0, np.nan, 3, 3], [5, 2, 5, -1], [0, 0, np.nan, np.nan]]),
    np.array([[4, 4, -2, 7], [7, 7, 7, 7], [-3, 9, 9, -3]], dtype=np.int32),
    np.array([[2.5, -np.inf, np.inf, np.inf], [-0.0, 0.0, 1, -1],
              [3, 1, 3, 1]], dtype=np.float32),
    np.array([[True, False, True, True], [False] * 4, [False, False, True,
                                                        True]]),
    np.array([[3, 3, 2, 250], [250, 0, 0, 251], [1, 1, 1, 1]], dtype=np.uint8),
]


@pytest.mark.parametrize("xv", ARG_CASES)
def test_argmax_argmin_first_occurrence_and_nan(queue, xv):
    x = pt.make_placeholder("x", xv.shape, xv.dtype)
    cases = {}
    refs = {}
    for which in ("argmax", "argmin"):
        for axis, keepdims in ((None, False), (None, True), (0, False),
                               (1, False), (-1, True)):
            key = f"{which}_{axis}_{keepdims}"
            cases[key] = getattr(pt, which)(x, axis=axis, keepdims=keepdims)
            refs[key] = getattr(np, which)(xv, axis=axis, keepdims=keepdims)
        cases[f"{which}_method"] = getattr(x, which)(axis=1)
        refs[f"{which}_method"] = getattr(xv, which)(axis=1)
    _, got = pt.generate_loopy(cases)(queue, x=xv)
    ref_target = pt.generate_numpy(cases)(x=xv)
    for key, ref in refs.items():
        np.testing.assert_array_equal(got[key], ref, err_msg=key)
        np.testing.assert_array_equal(ref_target[key], ref, err_msg=key)
        assert got[key].shape == ref.shape


def test_argmax_of_empty_and_bad_axis_raise():
    with pytest.raises(ValueError):
        np.argmax(np.zeros((0, 3)), axis=0)
    with pytest.raises(diagnostic.EmptyReductionError, match=r"\(0, 3\)"):
        pt.argmax(pt.make_placeholder("e", (0, 3), np.float64), axis=0)
    with pytest.raises(diagnostic.AxisError, match="axis 2"):
        pt.argmin(pt.make_placeholder("a", (2, 3), np.float64), axis=2)

# }}}


# {{{ seeded fuzzing of the hostile cases: random values, one compiled
# program run on many inputs, NumPy deciding values and errors


@pytest.mark.parametrize("length", [1, 4, 7, 16, 33])
def test_fuzz_float_to_integer_casts(queue, length):
    x = pt.make_placeholder("x", (length,), np.float64)
    prg = pt.generate_loopy({np.dtype(t).name: x.astype(t)
                             for t in INTEGER_TYPES})
    rng = np.random.default_rng(length)
    for _ in range(4):
        # small values, values past each narrow type, past 2^32, fractions
        scale = rng.choice([1.0, 300.0, 7e4, 5e9, 1e18], size=length)
        values = np.round(rng.standard_normal(length) * scale, 1)
        _, got = prg(queue, x=values)
        for t in INTEGER_TYPES:
            with np.errstate(invalid="ignore"):   # NumPy's scalar loop
                ref = np.array([np.array([v]).astype(t)[0] for v in values])
            np.testing.assert_array_equal(got[np.dtype(t).name], ref,
                                          err_msg=f"{t.__name__} {values}")


@pytest.mark.parametrize(("base_t", "exp_t"), [
    (np.int64, np.int64), (np.int32, np.int8), (np.uint8, np.int16),
    (np.int16, np.uint8)])
def test_fuzz_integer_powers_raise_exactly_when_numpy_does(queue, base_t,
                                                            exp_t):
    x = pt.make_placeholder("x", (6,), base_t)
    y = pt.make_placeholder("y", (6,), exp_t)
    lazy = x ** y + 1
    device, host = pt.generate_loopy(lazy), pt.generate_numpy(lazy)
    rng = np.random.default_rng(7)
    raised = 0
    for _ in range(8):
        lo = 0 if np.dtype(exp_t).kind == "u" else -2
        xv = rng.integers(0, 4, 6).astype(base_t)
        yv = rng.integers(lo, 4, 6).astype(exp_t)
        try:
            ref = xv ** yv + 1
        except ValueError:
            raised += 1
            with pytest.raises(diagnostic.NegativeIntegerPowerError):
                prg_out = device(queue, x=xv, y=yv)
            with pytest.raises(ValueError, match="negative integer powers"):
                host(x=xv, y=yv)
            continue
        _, (prg_out,) = device(queue, x=xv, y=yv)
        np.testing.assert_array_equal(prg_out, ref)
        np.testing.assert_array_equal(host(x=xv, y=yv), ref)
    if np.dtype(exp_t).kind != "u":
        assert raised    # the seed does draw negative exponents


@pytest.mark.parametrize("idx_t", [np.int64, np.int8, np.uint16, np.uint64])
def test_fuzz_gathers_raise_exactly_when_numpy_does(queue, idx_t):
    a = pt.make_placeholder("a", (5, 7), np.float64)
    i = pt.make_placeholder("i", (4,), idx_t)
    j = pt.make_placeholder("j", (4,), idx_t)
    lazy = a[i, j] - a[i].sum(axis=1)
    device, host = pt.generate_loopy(lazy), pt.generate_numpy(lazy)
    av = np.arange(35.0).reshape(5, 7)
    rng = np.random.default_rng(11)
    raised = 0
    for _ in range(10):
        signed = np.dtype(idx_t).kind == "i"
        iv = rng.integers(-5 if signed else 0, 5, 4)
        jv = rng.integers(-7 if signed else 0, 7, 4)
        if rng.random() < 0.5:     # one entry just out of range
            which, size = (iv, 5) if rng.random() < 0.5 else (jv, 7)
            which[rng.integers(4)] = rng.choice(
                [size, size + 3, -size - 1] if signed else [size, size + 3])
        iv, jv = iv.astype(idx_t), jv.astype(idx_t)
        try:
            ref = av[iv, jv] - av[iv].sum(axis=1)
        except IndexError:
            raised += 1
            with pytest.raises(diagnostic.IndexOutOfBoundsError):
                device(queue, a=av, i=iv, j=jv)
            with pytest.raises(IndexError):
                host(a=av, i=iv, j=jv)
            continue
        _, (got,) = device(queue, a=av, i=iv, j=jv)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(host(a=av, i=iv, j=jv), ref)
    assert 0 < raised < 10      # both outcomes drawn

# }}}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64,
                                   np.int32, np.int64])
def test_integer_min_max_at_the_extremes_of_the_type(queue, dtype):
    info = np.iinfo(dtype)
    xv = np.array([[info.max, 5, info.max - 1], [7, info.min, 3]], dtype)
    x = pt.make_placeholder("x", xv.shape, dtype)
    lazy = {"min": pt.amin(x), "max": pt.amax(x), "min1": pt.amin(x, axis=1),
            "max0": x.max(axis=0)}
    refs = {"min": xv.min(), "max": xv.max(), "min1": xv.min(axis=1),
            "max0": xv.max(axis=0)}
    _, got = pt.generate_loopy(lazy)(queue, x=xv)
    host = pt.generate_numpy(lazy)(x=xv)
    for key, ref in refs.items():
        np.testing.assert_array_equal(got[key], ref, err_msg=key)
        np.testing.assert_array_equal(host[key], ref, err_msg=key)
        assert got[key].dtype == np.dtype(dtype)


def test_random_dags_with_unsigned_and_complex_types(queue):
    # the random-DAG generator over unsigned and complex dtypes (seeds
    # 13, 20 and 23 found a uint32 min, and complex64 kernels merged before
    # complex128 ones, failing to compile)
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from bench.fuzz import _check_batch

    from pytato_like.testing import make_random_dag
    dtypes = ("uint16", "uint32", "uint64", "uint8", "complex64", "complex128",
              "float64", "int32")
    with np.errstate(all="ignore"):
        dags = [(s, make_random_dag(s, dtypes=dtypes)) for s in range(40)]
        _check_batch(queue, dags)
