"""Size-parameter shapes: components are compared by value, not only by
structure, and such programs evaluate like their concrete NumPy versions."""

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ShapeMismatchError
from pytato_like.utils import are_shape_components_equal


@pytest.fixture
def n():
    return pt.make_size_param("n")


def test_equal_size_expressions_written_differently_are_equal(n):
    assert are_shape_components_equal(3 * n, n + n + n)
    assert are_shape_components_equal(n * 3, 3 * n)
    assert are_shape_components_equal((n + 1) * 2, 2 * n + 2)


def test_different_size_expressions_are_not_equal(n):
    assert not are_shape_components_equal(3 * n, 2 * n)
    assert not are_shape_components_equal(n + 1, n)
    assert not are_shape_components_equal(3 * n, 7)


def test_reshape_to_an_equal_symbolic_size_evaluates_like_numpy(n):
    x = pt.make_placeholder("x", (n, 3), np.float64)
    y = x.reshape(3 * n) * 2
    value = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(pt.generate_numpy(y)(x=value),
                                  value.reshape(12) * 2)


def test_reshape_to_a_different_symbolic_size_is_refused(n):
    x = pt.make_placeholder("x", (n, 3), np.float64)
    with pytest.raises(ShapeMismatchError, match="reshape"):
        x.reshape(2 * n)


def test_broadcasting_matches_equal_symbolic_extents(n):
    x = pt.make_placeholder("x", (2 * n + 2,), np.float64)
    y = pt.make_placeholder("y", ((n + 1) * 2,), np.float64)
    out = pt.generate_numpy(x + y)(x=np.ones(10), y=np.full(10, 2.0), n=4)
    np.testing.assert_array_equal(out, np.full(10, 3.0))
