"""The small-operator schedule's padding of an element's accumulators
(``small_operator_pad_bytes``, ``small_operator_pad_min_outputs``): the
reduction over the outputs moves to its own instruction over a padded
output range, the staged operator gets zero rows up to that range, and
only the real outputs are stored.

Checked: where it applies (output counts from the minimum on, not
multiples of the vector width, every read the extra outputs make being
of a zero row), that padded and unpadded kernels give bitwise equal
values (each real output sums the same terms in the same order) and
values equal to NumPy's, that an operand read in place along the outputs
turns the padding off (it has no zero rows to read), an operator of three
axes, and the options' environment variables. (A 100 000-deep chain
feeding a padded einsum:
``test_tiled_products.test_small_operator_after_a_deep_chain``.)"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy.options import CodegenOptions


def _staged_shapes(prg) -> list[tuple]:
    """The shapes of the local-memory copies of each kernel of *prg*."""
    import loopy as lp
    return [tuple(tv.shape) for tu in prg.programs
            for tv in tu.default_entrypoint.temporary_variables.values()
            if tv.address_space == lp.AddressSpace.LOCAL]


def _dg_program(n: int, dtype, steps: int = 3):
    """*steps* DG updates ``u + dt * einsum("ij,ej->ei", d, u)`` and their
    NumPy reference for random values."""
    rng = np.random.default_rng(n)
    d_mat = (rng.standard_normal((n, n)) / n).astype(dtype)
    u0 = rng.standard_normal((1001, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        d_mat = d_mat + 1j * rng.standard_normal((n, n)).astype(dtype) / n
        u0 = u0 + 1j * rng.standard_normal((1001, n)).astype(dtype)
    dt = np.dtype(dtype).type(0.01)
    u = pt.make_placeholder("u", u0.shape, dtype)
    d = pt.make_data_wrapper(d_mat)
    ref = u0
    for _ in range(steps):
        u = u + dt * pt.einsum("ij,ej->ei", d, u)
        ref = ref + dt * np.einsum("ij,ej->ei", d_mat, ref)
    return u, u0, ref


@pytest.mark.parametrize("n", [35, 27, 45])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_padded_equals_unpadded_bitwise(queue, n, dtype):
    u, u0, ref = _dg_program(n, dtype)
    padded = pt.generate_loopy(u)
    plain = pt.generate_loopy(u, options={"small_operator_pad_bytes": 0})
    # 4 doubles to a vector of 32 bytes (float32 sums in float64), 2
    # complex128: 35 -> 36, 27 -> 28, 45 -> 48 or 46
    lanes = 2 if np.dtype(dtype).kind == "c" else 4
    rows = -(-n // lanes) * lanes
    assert set(_staged_shapes(padded)) == {(rows, n)}
    assert set(_staged_shapes(plain)) == {(n, n)}
    (got,) = padded(queue, u=u0)[1]
    (expected,) = plain(queue, u=u0)[1]
    np.testing.assert_array_equal(got, expected)
    rtol = 1e-12 if np.dtype(dtype).itemsize >= 8 else 1e-5
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("n,options,rows", [
    (28, {}, 28),                                    # a multiple of 4
    (26, {}, 26),                                    # below the minimum
    (26, {"small_operator_pad_min_outputs": 26}, 28),
    (7, {"small_operator_pad_min_outputs": 1}, 8),
    (35, {"small_operator_pad_bytes": 16}, 36),      # 2 doubles a vector
    (35, {"small_operator_pad_bytes": 64}, 40),      # 8 doubles a vector
    (35, {"small_operator_pad_bytes": 8}, 35),       # one double: no vector
])
def test_where_padding_applies(queue, n, options, rows):
    u, u0, ref = _dg_program(n, np.float64, steps=1)
    prg = pt.generate_loopy(u, options=options)
    assert _staged_shapes(prg) == [(rows, n)]
    (got,) = prg(queue, u=u0)[1]
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-14)


def test_operand_read_in_place_along_the_outputs_is_not_padded(queue):
    """``einsum("ij,ej,i->ei", d, u, w)``: ``w[i]`` is contiguous along the
    outputs, so it is read in place, not staged; an extra output would
    read past its end, so the accumulators are not padded (values as
    NumPy's)."""
    n, n_el = 35, 1001
    rng = np.random.default_rng(11)
    d, u, w = (rng.standard_normal((n, n)), rng.standard_normal((n_el, n)),
               rng.standard_normal(n))
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    pw = pt.make_placeholder("w", w.shape, np.float64)
    prg = pt.generate_loopy(pt.einsum("ij,ej,i->ei", pd, pu, pw))
    assert _staged_shapes(prg) == [(n, n)]
    (got,) = prg(queue, d=d, u=u, w=w)[1]
    np.testing.assert_allclose(got, np.einsum("ij,ej,i->ei", d, u, w),
                               rtol=1e-12, atol=1e-13)


def test_options_from_environment():
    defaults = CodegenOptions.from_environment(environ={})
    assert defaults.small_operator_pad_bytes == 32
    assert defaults.small_operator_pad_min_outputs == 27
    options = CodegenOptions.from_environment(environ={
        "PYTATO_LIKE_SMALL_OPERATOR_PAD_BYTES": "0",
        "PYTATO_LIKE_SMALL_OPERATOR_PAD_MIN_OUTPUTS": "40"})
    assert options.small_operator_pad_bytes == 0
    assert options.small_operator_pad_min_outputs == 40
    assert options.cache_key() != defaults.cache_key()
    for variable in ("PYTATO_LIKE_SMALL_OPERATOR_PAD_BYTES",
                     "PYTATO_LIKE_SMALL_OPERATOR_PAD_MIN_OUTPUTS"):
        with pytest.raises(ConfigurationError, match=variable):
            CodegenOptions.from_environment(environ={variable: "wide"})
        with pytest.raises(ConfigurationError, match=variable):
            CodegenOptions.from_environment(environ={variable: "-1"})


def test_operator_of_three_axes_is_padded(queue):
    """``einsum("ijk,ejk->ei")``: the operator's output axis is staged
    contiguous and padded (35 -> 36 rows of 5 x 7 zeros past the end);
    values bitwise equal to the unpadded kernel's, and NumPy's."""
    rng = np.random.default_rng(2)
    d, u = rng.standard_normal((35, 5, 7)), rng.standard_normal((1001, 5, 7))
    pd = pt.make_placeholder("d", d.shape, np.float64)
    pu = pt.make_placeholder("u", u.shape, np.float64)
    expr = pt.einsum("ijk,ejk->ei", pd, pu)
    padded = pt.generate_loopy(expr)
    plain = pt.generate_loopy(expr, options={"small_operator_pad_bytes": 0})
    assert _staged_shapes(padded) == [(36, 5, 7)]
    assert _staged_shapes(plain) == [(35, 5, 7)]
    (got,) = padded(queue, d=d, u=u)[1]
    np.testing.assert_array_equal(got, plain(queue, d=d, u=u)[1][0])
    np.testing.assert_allclose(got, np.einsum("ijk,ejk->ei", d, u),
                               rtol=1e-12, atol=1e-13)
