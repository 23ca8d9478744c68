"""``pt.pad`` against :func:`numpy.pad`: every supported mode, widths
larger than the axis (NumPy repeats the pattern), odd reflection, several
dtypes, on the NumPy target (hypothesis-generated cases) and on the loopy
target (PoCL); the errors NumPy raises, typed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytato_like as pt
from pytato_like.diagnostic import (
    PadModeError,
    ShapeMismatchError,
    UnsupportedPadModeError,
)

MODES = [("constant", {}), ("constant", {"constant_values": ((1, 2), (3, 4))}),
         ("edge", {}), ("wrap", {}),
         ("reflect", {}), ("reflect", {"reflect_type": "odd"}),
         ("symmetric", {}), ("symmetric", {"reflect_type": "odd"})]
MODE_IDS = [f"{m}-{'-'.join(map(str, kw.values())) or 'default'}"
            for m, kw in MODES]


def _run_numpy(result, **inputs):
    return pt.generate_numpy(result)(**inputs)


def _assert_same(actual, expected):
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


@st.composite
def pad_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    widths = tuple((draw(st.integers(0, 9)), draw(st.integers(0, 9)))
                   for _ in range(ndim))
    mode, kwargs = draw(st.sampled_from(MODES[0:1] + MODES[2:]))
    dtype = draw(st.sampled_from(["float64", "float32", "int8", "int64",
                                  "complex128"]))
    return shape, widths, mode, kwargs, dtype


@settings(max_examples=150, deadline=None)
@given(pad_cases())
def test_pad_matches_numpy_pad(case):
    shape, widths, mode, kwargs, dtype = case
    rng = np.random.default_rng(sum(shape) + 7 * len(widths))
    data = (rng.standard_normal(shape) * 50).astype(dtype)
    x = pt.make_placeholder("x", shape, dtype)
    out = _run_numpy(pt.pad(x, widths, mode, **kwargs), x=data)
    with np.errstate(over="ignore"):  # odd reflection of int8 wraps, as here
        expected = np.pad(data, widths, mode, **kwargs)
    _assert_same(out, expected)


@pytest.mark.parametrize(("mode", "kwargs"), MODES, ids=MODE_IDS)
def test_pad_on_loopy_target_matches_numpy(queue, mode, kwargs, rng):
    """Widths below, equal to and far above the axis length, one 2-d
    array padded on both axes (corners), as one program."""
    cases = {"short": ((4,), (2, 1)), "equal": ((3,), (3, 3)),
             "long": ((3,), (11, 8)), "single": ((1,), (2, 3)),
             "corners": ((3, 4), ((2, 5), (4, 1)))}
    if mode == "constant" and "constant_values" in kwargs:
        cases = {"corners": cases["corners"]}
    outputs = {}
    inputs = {}
    for name, (shape, widths) in cases.items():
        x = pt.make_placeholder(f"x_{name}", shape, np.float64)
        outputs[name] = pt.pad(x, widths, mode, **kwargs)
        inputs[f"x_{name}"] = rng.standard_normal(shape)
    _, out = pt.generate_loopy(pt.make_dict_of_named_arrays(outputs))(
        queue, **inputs)
    for name, (shape, widths) in cases.items():
        expected = np.pad(inputs[f"x_{name}"], widths, mode, **kwargs)
        _assert_same(out[name], expected)


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
def test_pad_of_bool_and_uint8_matches_numpy(mode):
    for dtype in ("bool", "uint8"):
        data = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
        x = pt.make_placeholder("x", data.shape, dtype)
        for kwargs in ([{}, {"reflect_type": "odd"}]
                       if mode in ("reflect", "symmetric") else [{}]):
            with np.errstate(over="ignore"):
                expected = np.pad(data, ((3, 5), (6, 2)), mode, **kwargs)
            _assert_same(_run_numpy(pt.pad(x, ((3, 5), (6, 2)), mode,
                                           **kwargs), x=data), expected)


def test_pad_reflect_odd_with_long_widths_rounds_as_numpy(rng):
    """NumPy builds odd reflections from values it computed before; the
    result is bit-identical because the steps are the same."""
    data = rng.standard_normal(5) * 1e3
    x = pt.make_placeholder("x", data.shape, np.float64)
    for mode in ("reflect", "symmetric"):
        out = _run_numpy(pt.pad(x, (37, 23), mode, reflect_type="odd"), x=data)
        _assert_same(out, np.pad(data, (37, 23), mode, reflect_type="odd"))


def test_pad_of_computed_array_feeds_arithmetic(rng):
    data = rng.standard_normal((4, 3))
    x = pt.make_placeholder("x", data.shape, np.float64)
    out = _run_numpy(2 * pt.pad(pt.sin(x), ((1, 6), (5, 0)), "symmetric") + 1,
                     x=data)
    np.testing.assert_allclose(
        out, 2 * np.pad(np.sin(data), ((1, 6), (5, 0)), "symmetric") + 1)


def test_pad_empty_axis_only_constant_fills_it():
    x = pt.make_placeholder("x", (0, 3), np.float64)
    data = np.zeros((0, 3))
    _assert_same(_run_numpy(pt.pad(x, 2), x=data), np.pad(data, 2))
    # widths on non-empty axes of an empty array: an empty result
    _assert_same(_run_numpy(pt.pad(x, ((0, 0), (2, 2)), "reflect"), x=data),
                 np.pad(data, ((0, 0), (2, 2)), "reflect"))
    with pytest.raises(ValueError, match="empty axis"):
        np.pad(data, 1, "edge")
    with pytest.raises(ShapeMismatchError, match=r"empty axis 0 of shape \(0, 3\)"):
        pt.pad(x, 1, "edge")


def test_pad_mode_errors_are_typed_as_numpy_raises():
    x = pt.make_placeholder("x", (3,), np.float64)
    data = np.zeros(3)
    # NumPy: ValueError for an unknown mode and a keyword the mode refuses
    with pytest.raises(ValueError):
        np.pad(data, 1, "mirror")
    with pytest.raises(PadModeError, match="'mirror'"):
        pt.pad(x, 1, "mirror")
    with pytest.raises(ValueError):
        np.pad(data, 1, "edge", constant_values=3)
    with pytest.raises(PadModeError, match="constant_values"):
        pt.pad(x, 1, "edge", constant_values=3)
    with pytest.raises(PadModeError, match="reflect_type"):
        pt.pad(x, 1, "reflect", reflect_type="sideways")
    # a NumPy mode not implemented here
    with pytest.raises(UnsupportedPadModeError, match="'median'"):
        pt.pad(x, 1, "median")
    with pytest.raises(NotImplementedError):
        pt.pad(x, 1, "linear_ramp")
