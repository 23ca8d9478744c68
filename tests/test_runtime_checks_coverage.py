"""Run-time checks where they were missing: integer powers inside
reductions and gathers along axes whose length is a size parameter. Both
targets must raise exactly when NumPy raises (the typed errors of
:mod:`pytato_like.diagnostic`, which are NumPy's ``ValueError`` and
``IndexError``) and give NumPy's values otherwise."""

from __future__ import annotations

import numpy as np
import pymbolic.primitives as prim
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.array import IndexLambda, ReductionDescriptor
from pytato_like.reductions import SumReductionOperation
from pytato_like.scalar_expr import make_reduce

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def _run_both(queue, lazy, **inputs):
    """Values of both targets, or the exception each raised."""
    outcomes = []
    for run in (lambda: pt.generate_loopy(lazy)(queue, **inputs)[1],
                lambda: pt.generate_numpy(lazy)(**inputs)):
        try:
            outcomes.append(run())
        except Exception as err:  # noqa: BLE001 - judged by the caller
            outcomes.append(err)
    return outcomes


def _assert_like_numpy(outcomes, reference, numpy_error, typed_error):
    """Each target's outcome is NumPy's: the same values, or the typed
    error where *reference* (a callable computing NumPy's value) raises."""
    try:
        with np.errstate(all="ignore"):
            expected = reference()
    except numpy_error:
        for got in outcomes:
            assert isinstance(got, typed_error), got
            assert isinstance(got, numpy_error)
        return True
    for got in outcomes:
        assert not isinstance(got, Exception), got
        if isinstance(got, dict):
            got = next(iter(got.values()))
        elif isinstance(got, tuple):
            got = got[0]
        np.testing.assert_array_equal(got, expected)
    return False


def _sum_of_powers(x, y, outer: bool):
    """``sum_r x[.., r] ** y[r]`` as one index lambda (the power inside
    the reduction, as a fused program has it)."""
    r = prim.Variable("_r0")
    if outer:        # shape (m,): out[i] = sum_r x[i, r] ** y[r]
        base = prim.Subscript(prim.Variable("x"), (prim.Variable("_0"), r))
        shape, n = (x.shape[0],), x.shape[1]
    else:
        base = prim.Subscript(prim.Variable("x"), (r,))
        shape, n = (), x.shape[0]
    expr = make_reduce(prim.Power(base, prim.Subscript(prim.Variable("y"), (r,))),
                       SumReductionOperation, {"_r0": (0, n)})
    return IndexLambda(expr, shape, np.dtype(np.int64), {"x": x, "y": y},
                       {"_r0": ReductionDescriptor()})


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("exp_t", [np.int64, np.int8])
def test_integer_powers_inside_reductions(queue, outer, exp_t):
    n = 5
    x = pt.make_placeholder("x", (3, n) if outer else (n,), np.int64)
    y = pt.make_placeholder("y", (n,), exp_t)
    lazy = _sum_of_powers(x, y, outer)
    rng = np.random.default_rng(3)
    raised = 0
    for trial in range(6):
        xv = rng.integers(1, 4, x.shape).astype(np.int64)
        yv = rng.integers(0, 3, n).astype(exp_t)
        if trial % 2:
            yv[rng.integers(n)] = -1     # one negative exponent
        raised += _assert_like_numpy(
            _run_both(queue, lazy, x=xv, y=yv),
            lambda: np.sum(xv ** yv, axis=-1),
            ValueError, diagnostic.NegativeIntegerPowerError)
    assert raised == 3


def test_power_inside_an_empty_reduction_does_not_raise(queue):
    x = pt.make_placeholder("x", (0,), np.int64)
    y = pt.make_placeholder("y", (0,), np.int64)
    outcomes = _run_both(queue, _sum_of_powers(x, y, False),
                         x=np.zeros(0, np.int64), y=np.zeros(0, np.int64))
    _assert_like_numpy(outcomes, lambda: np.sum(np.zeros(0, np.int64)),
                       ValueError, diagnostic.NegativeIntegerPowerError)


# (uint64 index arrays along a size-parameter axis do not compile: loopy
# types the clamp against the int64 length as float64; doc/numerics.rst)
@pytest.mark.parametrize("idx_t", [np.int64, np.int16, np.uint8, np.uint32])
def test_gathers_along_size_parameter_axes(queue, idx_t):
    n = pt.make_size_param("n")
    a = pt.make_placeholder("a", (n, 3), np.float64)
    i = pt.make_placeholder("i", (4,), idx_t)
    j = pt.make_placeholder("j", (2,), np.int64)
    lazy = {"rows": a[i] * 2, "both": a[i[:2], j]}
    device, host = pt.generate_loopy(lazy), pt.generate_numpy(lazy)
    rng = np.random.default_rng(4)
    signed = np.dtype(idx_t).kind == "i"
    raised = 0
    for size in (1, 4, 7, 7, 9, 4, 7):    # one program, many axis lengths
        av = rng.standard_normal((size, 3))
        iv = rng.integers(-size if signed else 0, size, 4)
        if rng.random() < 0.5:            # one entry just out of range
            iv[rng.integers(4)] = rng.choice([size, size + 2, -size - 1]
                                             if signed else [size, size + 2])
        iv = iv.astype(idx_t)
        jv = rng.integers(-3, 3, 2)
        outcomes = []
        for run in (lambda: device(queue, a=av, i=iv, j=jv)[1],
                    lambda: host(a=av, i=iv, j=jv)):
            try:
                outcomes.append(run())
            except Exception as err:  # noqa: BLE001
                outcomes.append(err)
        try:
            expected = {"rows": av[iv] * 2, "both": av[iv[:2], jv]}
        except IndexError:
            raised += 1
            for got in outcomes:
                assert isinstance(got, diagnostic.IndexOutOfBoundsError), got
                assert "out of bounds for axis 0" in str(got)
            continue
        for got in outcomes:
            assert not isinstance(got, Exception), got
            for key, ref in expected.items():
                np.testing.assert_array_equal(got[key], ref, err_msg=key)
    assert 0 < raised < 7


def test_gather_from_an_empty_size_parameter_axis_raises(queue):
    n = pt.make_size_param("n")
    a = pt.make_placeholder("a", (n,), np.float64)
    i = pt.make_placeholder("i", (2,), np.int64)
    with pytest.raises(IndexError):
        np.zeros(0)[np.array([0, 0])]
    for run in (lambda: pt.generate_loopy(a[i])(queue, a=np.zeros(0),
                                                 i=np.array([0, 0])),
                lambda: pt.generate_numpy(a[i])(a=np.zeros(0),
                                                i=np.array([0, 0]))):
        with pytest.raises(diagnostic.IndexOutOfBoundsError, match="size 0"):
            run()
