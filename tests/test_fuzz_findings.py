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
