"""Helpers for testing targets against NumPy: comparisons, inputs, random DAGs.

Differential testing is how this project knows a target is right: the same
program is evaluated lazily (by the target under test) and eagerly (by
NumPy), and the results must agree in shape, dtype and value.

Comparing results
-----------------

.. autofunction:: assert_results_close
.. autofunction:: default_tolerance
.. autofunction:: random_input
.. autofunction:: evaluate_lazy_and_eager
.. autofunction:: assert_matches_numpy
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# {{{ comparing results


def default_tolerance(dtype: Any) -> float:
    """Relative tolerance for comparing values of *dtype* computed in a
    different order (0 for exact dtypes: integers and booleans)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return 0.0
    eps = np.finfo(dtype).eps
    # float64: 1e-10, float32: ~1e-4, float16: ~1e-1
    return float(min(1e-1, max(1e-10, 1e3 * eps)))


def assert_results_close(actual: Any, expected: Any, *, rtol: float | None = None,
                         atol: float | None = None, check_dtype: bool = True,
                         err_msg: str = "") -> None:
    """Assert that *actual* matches *expected* in shape, dtype and value.

    Both may be arrays (or NumPy scalars) or mappings from names to arrays
    (the result of a program returning a
    :class:`~pytato_like.DictOfNamedArrays`). Integers and booleans must match
    exactly. Floating-point and complex values match within *rtol* (default
    :func:`default_tolerance` of the dtype) and *atol* (default ``rtol``
    times the largest magnitude in *expected*, at least ``rtol``), so that
    cancellation in a different summation order does not fail a test; NaNs
    must sit at the same positions.
    """
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            raise AssertionError(f"{err_msg}expected a mapping of results, got "
                                 f"{type(actual).__name__}")
        if set(actual) != set(expected):
            raise AssertionError(f"{err_msg}result names differ: got "
                                 f"{sorted(actual)}, expected {sorted(expected)}")
        for name in expected:
            assert_results_close(actual[name], expected[name], rtol=rtol,
                                 atol=atol, check_dtype=check_dtype,
                                 err_msg=f"{err_msg}[{name!r}] ")
        return

    if not isinstance(actual, (np.ndarray, np.generic)):
        raise AssertionError(f"{err_msg}expected a NumPy array, got "
                             f"{type(actual).__name__}")
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(f"{err_msg}shape {actual.shape} != expected "
                             f"{expected.shape}")
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{err_msg}dtype {actual.dtype} != expected "
                             f"{expected.dtype}")
    if expected.dtype.kind not in "fc" and actual.dtype.kind not in "fc":
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    if rtol is None:
        rtol = max(default_tolerance(actual.dtype), default_tolerance(expected.dtype))
    if atol is None:
        finite = np.abs(expected[np.isfinite(expected)])
        scale = float(finite.max()) if finite.size else 1.0
        atol = rtol * max(1.0, scale)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=err_msg)


def random_input(rng: np.random.Generator, shape: tuple[int, ...],
                 dtype: Any) -> np.ndarray:
    """Test data of *shape* and *dtype*: small integers (non-negative for
    unsigned dtypes), standard normal floats, random booleans."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 10, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-5, 6, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape)
                + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def evaluate_lazy_and_eager(fn: Callable[..., Any], *arrays: np.ndarray,
                            as_data_wrappers: bool = False) -> tuple[Any, Any]:
    """``(lazy, eager)``: *fn* applied to lazy inputs and evaluated by
    :func:`~pytato_like.generate_numpy`, and *fn* applied to *arrays*
    directly.

    *fn* is called as ``fn(xp, *operands)`` where *xp* is
    :mod:`pytato_like` or :mod:`numpy`, so one function states the program
    for both sides. The lazy inputs are placeholders named ``x0``, ``x1``,
    ... (data wrappers if *as_data_wrappers*).
    """
    import pytato_like as pt

    if as_data_wrappers:
        operands = [pt.make_data_wrapper(a) for a in arrays]
        inputs: dict[str, np.ndarray] = {}
    else:
        operands = [pt.make_placeholder(f"x{i}", a.shape, a.dtype)
                    for i, a in enumerate(arrays)]
        inputs = {f"x{i}": a for i, a in enumerate(arrays)}
    result = fn(pt, *operands)
    # A program need not read every input (``imag`` of a real array is
    # zeros): pass only the ones it reads, as a caller would.
    read = _placeholder_names(result)
    lazy = pt.generate_numpy(result)(**{name: value for name, value in inputs.items()
                                        if name in read})
    with np.errstate(all="ignore"):
        eager = fn(np, *arrays)
    return lazy, eager


def _placeholder_names(result: Any) -> set[str]:
    from pytato_like._traversal import topological_order
    from pytato_like.array import DictOfNamedArrays, Placeholder
    roots = list(result._data.values()) if isinstance(result, DictOfNamedArrays) \
        else [result]
    return {node.name for node in topological_order(roots)
            if isinstance(node, Placeholder)}


def assert_matches_numpy(fn: Callable[..., Any], *arrays: np.ndarray,
                         rtol: float | None = None, atol: float | None = None,
                         as_data_wrappers: bool = False) -> None:
    """Assert that *fn* (see :func:`evaluate_lazy_and_eager`) gives NumPy's
    shape, dtype and values when built lazily and run by the NumPy target."""
    lazy, eager = evaluate_lazy_and_eager(fn, *arrays,
                                          as_data_wrappers=as_data_wrappers)
    if not isinstance(eager, Mapping):
        eager = np.asarray(eager)
    assert_results_close(lazy, eager, rtol=rtol, atol=atol)

# }}}

# vim: foldmethod=marker
