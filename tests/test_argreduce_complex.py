"""argmax/argmin of complex arrays against NumPy on both targets: NumPy
orders complex values by real part, then imaginary part, and an entry with
a NaN in either part is the extreme (the first one wins)."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

nan, inf = np.nan, np.inf

CASES = {
    "ties in the real part": [1 + 2j, 3 - 1j, 3 + 5j, 3 + 5j, -4 + 9j, 3 + 4j],
    "imag decides": [2 + 0j, 2 - 1j, 2 + 1j, 1 + 7j, 2 + 1j, 0j],
    "nan real": [1 + 0j, complex(nan, 0), 9 + 9j, complex(nan, 1), -9j, 0j],
    "nan imag late": [9 + 9j, 1 + 0j, -3 + 2j, 5 + 0j, complex(0, nan), 0j],
    "nan imag first": [complex(-1, nan), 9 + 9j, complex(nan, 0), 1j, 0j, 2j],
    "infinities": [complex(inf, 0), complex(inf, -inf), complex(-inf, 3),
                   complex(inf, 1), complex(-inf, -inf), 0j],
    "signed zeros": [complex(0.0, -0.0), complex(-0.0, 0.0), 0j, -0j,
                     complex(-0.0, -0.0), 0j],
}


def _run_both(queue, lazy, **inputs):
    _, out = pt.generate_loopy(lazy)(queue, **inputs)
    host = pt.generate_numpy(lazy)(**inputs)
    return out, host


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_complex_argmax_argmin_of_a_vector(queue, dtype, case):
    zv = np.array(CASES[case], dtype)
    z = pt.make_placeholder("z", zv.shape, dtype)
    lazy = {"max": pt.argmax(z), "min": pt.argmin(z), "mmax": z.argmax(),
            "mmin": z.argmin()}
    expected = {"max": np.argmax(zv), "min": np.argmin(zv),
                "mmax": zv.argmax(), "mmin": zv.argmin()}
    for got in _run_both(queue, lazy, z=zv):
        for key, ref in expected.items():
            assert got[key].dtype == np.int64
            np.testing.assert_array_equal(got[key], ref, err_msg=f"{case} {key}")


def test_complex_argmax_argmin_along_axes(queue):
    # small integer parts: many ties in the real part; some NaNs
    rng = np.random.default_rng(5)
    zv = (rng.integers(-2, 3, (4, 5, 6)) + 1j * rng.integers(-2, 3, (4, 5, 6)))
    zv[1, 2, 3] = complex(nan, 0)
    zv[3, 0, 0] = complex(1, nan)
    zv[0, 4, 5] = complex(nan, nan)
    z = pt.make_placeholder("z", zv.shape, np.complex128)
    lazy, expected = {}, {}
    for axis in (None, 0, 1, 2, -1):
        for keepdims in (False, True):
            for name, lz, ref in (("max", pt.argmax, np.argmax),
                                  ("min", pt.argmin, np.argmin)):
                key = f"{name}_{axis}_{keepdims}"
                lazy[key] = lz(z, axis=axis, keepdims=keepdims)
                expected[key] = ref(zv, axis=axis, keepdims=keepdims)
    for got in _run_both(queue, lazy, z=zv):
        for key, ref in expected.items():
            assert got[key].shape == ref.shape, key
            np.testing.assert_array_equal(got[key], ref, err_msg=key)


def test_random_complex_vectors_match_numpy(queue):
    # one compiled program, many random inputs drawn from few values
    z = pt.make_placeholder("z", (7,), np.complex64)
    lazy = {"max": pt.argmax(z), "min": pt.argmin(z)}
    device, host = pt.generate_loopy(lazy), pt.generate_numpy(lazy)
    rng = np.random.default_rng(9)
    parts = np.array([-1.0, 0.0, -0.0, 2.0, inf, -inf, nan])
    for _ in range(30):
        zv = np.empty(7, np.complex128)   # (1j * inf would make NaNs)
        zv.real, zv.imag = rng.choice(parts[:6], 7), rng.choice(parts[:6], 7)
        if rng.random() < 0.3:
            which = rng.integers(7)
            zv[which] = complex(zv[which].real, nan) if rng.random() < 0.5 \
                else complex(nan, zv[which].imag)
        zv = zv.astype(np.complex64)
        _, got = device(queue, z=zv)
        for out in (got, host(z=zv)):
            assert int(out["max"]) == np.argmax(zv), zv
            assert int(out["min"]) == np.argmin(zv), zv
