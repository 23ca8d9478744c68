"""``Array.__getitem__`` against NumPy: integers (negative too), slices
(negative steps), None, Ellipsis, integer index arrays (NumPy and lazy),
boolean NumPy masks, contiguous and non-contiguous advanced indices."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import IndexOutOfBoundsError, IndexTypeError
from pytato_like.testing import assert_matches_numpy, random_input

I0 = np.array([0, 2, -1])           # 1-d index array with a negative entry
I1 = np.array([[1], [0]])           # broadcasts against I0 to shape (2, 3)
I2 = np.array([3, 0, 1])
MASK = np.array([True, False, True])

BASIC_KEYS = [
    1, -1, (0, 2), (-2, -1, -4), slice(None), slice(1, None), slice(None, -1),
    slice(None, None, -1), slice(None, None, 2), slice(3, 0, -1),
    slice(-1, -4, -2), slice(10, 20), slice(-100, 100), slice(2, 1),
    (slice(None), 1), (1, slice(None, None, -2)), (Ellipsis, 0), (0, Ellipsis),
    (Ellipsis, slice(1, 3), 2), None, (None, 1), (slice(None), None, 2),
    (Ellipsis, None), (None, Ellipsis, None), (0, None, slice(None), None),
    (), Ellipsis, (slice(None, None, -1), slice(None, None, -1),
                   slice(None, None, -1)),
]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
def test_basic_indexing_matches_numpy(key, rng):
    a = random_input(rng, (3, 4, 5), "float64")
    assert_matches_numpy(lambda xp, x: x[key], a)


@pytest.mark.parametrize("key", [(0, 0), (slice(None), -1), (-1,), 0, (0, None)],
                         ids=repr)
def test_indexing_of_computed_array(key, rng):
    a = random_input(rng, (3, 4), "int32")
    assert_matches_numpy(lambda xp, x: (x * 2 + 1)[key] - 1, a)


def test_indexing_zero_dimensional_array():
    a = np.array(2.5)
    assert_matches_numpy(lambda xp, x: x[()], a)
    assert_matches_numpy(lambda xp, x: x[...], a)
    assert_matches_numpy(lambda xp, x: x[None], a)
    assert_matches_numpy(lambda xp, x: x[None, ..., None], a)


def test_numpy_integer_scalars_as_indices(rng):
    a = random_input(rng, (3, 4), "float64")
    assert_matches_numpy(lambda xp, x: x[np.int64(-1), np.uint8(2)], a)
    assert_matches_numpy(lambda xp, x: x[np.int32(1):np.int8(3)], a)


ADVANCED_KEYS = [
    I0, [0, 2], [[0, 1], [2, 2]], (I0, I2), (I1, I0), (slice(None), I0),
    (slice(None), I0, I2), (I1, slice(None), I2),  # non-contiguous
    (I0, slice(1, 3), 1),                           # int + array, separated
    (1, I0),                                        # int next to array
    (1, slice(None), I2),                           # non-contiguous via int
    (Ellipsis, I2), (I0, Ellipsis), (None, I0), (I0, None),
    (slice(None, None, -1), I0, slice(None, None, 2)),
    (I1, [1, 2, 3], slice(None)),
    (np.array([], np.int64),), (np.array(1),), (np.array([[-1]]), 0, I2),
]


@pytest.mark.parametrize("key", ADVANCED_KEYS, ids=repr)
def test_advanced_indexing_with_numpy_arrays_matches_numpy(key, rng):
    a = random_input(rng, (3, 4, 5), "float64")
    assert_matches_numpy(lambda xp, x: x[key], a)


def _lazy_key(key, xp, lazy_indices):
    """*key* with its index arrays replaced by the lazy operands."""
    if not isinstance(key, tuple):
        key = (key,)
    it = iter(lazy_indices)
    return tuple(next(it) if isinstance(k, np.ndarray) else k for k in key)


@pytest.mark.parametrize("key", [k for k in ADVANCED_KEYS
                                 if isinstance(k, np.ndarray) or (
                                     isinstance(k, tuple) and any(
                                         isinstance(e, np.ndarray) for e in k))],
                         ids=repr)
def test_advanced_indexing_with_lazy_index_arrays_matches_numpy(key, rng):
    a = random_input(rng, (3, 4, 5), "float64")
    index_arrays = [k for k in (key if isinstance(key, tuple) else (key,))
                    if isinstance(k, np.ndarray)]
    assert_matches_numpy(
        lambda xp, x, *idx: x[_lazy_key(key, xp, idx)], a, *index_arrays)


def test_computed_index_array(rng):
    a = random_input(rng, (6, 2), "float64")
    idx = np.array([5, 0, 3])
    assert_matches_numpy(lambda xp, x, i: x[(i * 2 + 1) % 6, 1], a, idx)
    assert_matches_numpy(lambda xp, x, i: x[xp.roll(i, 1)][:, ::-1], a, idx)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64"])
def test_index_arrays_of_every_integer_dtype(dtype, rng):
    a = random_input(rng, (4, 3), "float32")
    idx = np.array([3, 1, 1, 0], dtype)
    assert_matches_numpy(lambda xp, x, i: x[i], a, idx)
    assert_matches_numpy(lambda xp, x, i: x[:, i[:3] % 3], a, idx)


@pytest.mark.parametrize("mask_key", [
    MASK, (MASK, 1), (slice(None), np.array([True, False, False, True])),
    (np.ones((3, 4), bool),), (np.eye(3, 4, dtype=bool),),
    (Ellipsis, np.array([False, True, False, True, True])),
    (np.zeros(3, bool),)], ids=repr)
def test_boolean_numpy_mask_matches_numpy(mask_key, rng):
    a = random_input(rng, (3, 4, 5), "int64")
    assert_matches_numpy(lambda xp, x: x[mask_key], a)


def test_index_shared_between_two_results(rng):
    a = random_input(rng, (5,), "float64")
    x = pt.make_placeholder("x", (5,), np.float64)
    y = x[1:4]
    result = pt.make_dict_of_named_arrays({"a": y * 2, "b": y[::-1] + y})
    out = pt.generate_numpy(result)(x=a)
    np.testing.assert_array_equal(out["a"], a[1:4] * 2)
    np.testing.assert_array_equal(out["b"], a[1:4][::-1] + a[1:4])


def test_iterating_over_an_array_yields_rows(rng):
    a = random_input(rng, (3, 2), "float64")
    x = pt.make_placeholder("x", a.shape, a.dtype)
    rows = list(x)
    assert len(rows) == len(x) == 3
    out = pt.generate_numpy(pt.stack(rows[::-1]))(x=a)
    np.testing.assert_array_equal(out, a[::-1])


def test_result_classes():
    x = pt.make_placeholder("x", (3, 4, 5), np.float64)
    assert isinstance(x[0, 1:], pt.BasicIndex)
    assert isinstance(x[:, [0, 1]], pt.AdvancedIndexInContiguousAxes)
    assert isinstance(x[[0, 1], :, [0, 1]], pt.AdvancedIndexInNoncontiguousAxes)
    assert isinstance(x[0, :, [0, 1]], pt.AdvancedIndexInNoncontiguousAxes)
    assert x[:, :] is x


# {{{ errors

@pytest.mark.parametrize("key", [3, -4, (0, 5), (slice(None), -6)], ids=repr)
def test_out_of_range_static_index_raises(key):
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexOutOfBoundsError, match=r"\(3, 5\)"):
        x[key]


@pytest.mark.parametrize("key", [(0, 0, 0), (0, 0, Ellipsis, 0), (MASK, 0, 0)],
                         ids=repr)
def test_too_many_indices_raises(key):
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexOutOfBoundsError, match=r"too many.*\(3, 5\)"):
        x[key]


@pytest.mark.parametrize("key", [np.array([5]), np.array([0, -4]),
                                 (np.array([0]), np.array([[5]]))], ids=repr)
def test_out_of_range_numpy_index_array_raises(key):
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexOutOfBoundsError, match=r"-4|5.*\(3, 5\)"):
        x[key]
    with pytest.raises(IndexError):
        np.zeros((3, 5))[key]


@pytest.mark.parametrize("mask", [np.ones(4, bool), np.ones((3, 4), bool),
                                  np.ones((2, 5), bool)], ids=repr)
def test_boolean_mask_of_wrong_shape_raises(mask):
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexTypeError, match=rf"{mask.shape}.*\(3, 5\)"):
        x[mask]
    with pytest.raises(IndexError):
        np.zeros((3, 5))[mask]


def test_two_ellipses_raise():
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexTypeError, match="ellipsis"):
        x[..., 0, ...]


@pytest.mark.parametrize("key", [np.array([0.5, 1.0]), [1.5], 1.0, "a",
                                 slice(0.5, 2)], ids=repr)
def test_non_integer_index_raises(key):
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexTypeError):
        x[key]


def test_float_lazy_index_array_raises():
    x = pt.make_placeholder("x", (3, 5), np.float64)
    idx = pt.make_placeholder("idx", (2,), np.float32)
    with pytest.raises(IndexTypeError, match="float32"):
        x[idx]


def test_boolean_lazy_index_array_raises():
    x = pt.make_placeholder("x", (3, 5), np.float64)
    mask = pt.make_placeholder("mask", (3,), np.bool_)
    with pytest.raises(IndexTypeError, match=r"boolean.*\(3,\)"):
        x[mask]


def test_non_broadcastable_index_arrays_raise():
    x = pt.make_placeholder("x", (3, 5), np.float64)
    from pytato_like.diagnostic import ShapeMismatchError
    with pytest.raises(ShapeMismatchError, match=r"\(2,\).*\(3,\)"):
        x[np.array([0, 1]), np.array([0, 1, 2])]


def test_zero_slice_step_raises():
    x = pt.make_placeholder("x", (3, 5), np.float64)
    with pytest.raises(IndexTypeError, match="step"):
        x[::0]

# }}}

# vim: foldmethod=marker
