"""Python operators on arrays against eager NumPy: binary operators and
their reflected forms, NEP 50 promotion with Python and NumPy scalars,
unary operators, and ``==`` as structural (not elementwise) equality."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from conftest import ALL_DTYPES

import pytato_like as pt
from pytato_like.diagnostic import DTypeError
from pytato_like.testing import assert_matches_numpy, assert_results_close

# Division by a zero scalar, a negative base to a fractional power: NumPy
# warns and both sides produce inf/NaN, which are compared like any value.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(divide by zero|invalid value|overflow):RuntimeWarning")

BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
    "**": operator.pow, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}

# Pairs of different dtypes whose promotion differs in interesting ways.
MIXED_DTYPE_PAIRS = [
    ("int8", "uint8"), ("uint8", "int8"), ("int32", "uint32"),
    ("int64", "uint32"), ("float32", "int64"), ("int32", "float32"),
    ("float32", "float64"), ("uint8", "float32"), ("bool", "int8"),
    ("bool", "float32"), ("float32", "complex64"), ("float64", "complex64"),
    ("int8", "complex64"), ("uint32", "float32"), ("int8", "int64"),
]
DTYPE_PAIRS = [(d, d) for d in ALL_DTYPES] + MIXED_DTYPE_PAIRS


def _left_operand(op: str, dtype: str, rng) -> np.ndarray:
    from pytato_like.testing import random_input
    a = random_input(rng, (3, 4), dtype)
    if op == "**" and np.dtype(dtype).kind in "iu":
        a = np.clip(a, -3, 3).astype(dtype)
    return a


def _right_operand(op: str, dtype: str, rng) -> np.ndarray:
    from pytato_like.testing import random_input
    dt = np.dtype(dtype)
    b = random_input(rng, (4,), dtype)
    if op in ("/", "//", "%"):
        b = np.where(b == 0, np.ones_like(b), b)  # no division by zero
    if op in ("**", "<<", ">>") and dt.kind in "iub":
        b = (np.abs(b.astype(np.int64)) % 3).astype(dtype)  # small, >= 0
    return b


@pytest.mark.parametrize("dtypes", DTYPE_PAIRS, ids="-".join)
@pytest.mark.parametrize("op", list(BINARY_OPERATORS))
def test_binary_operator_matches_numpy(op, dtypes, rng):
    fn = BINARY_OPERATORS[op]
    a = _left_operand(op, dtypes[0], rng)
    b = _right_operand(op, dtypes[1], rng)
    try:
        with np.errstate(all="ignore"):
            fn(a, b)
    except TypeError:
        # NumPy has no loop for these dtypes: neither do we, and we say so
        x = pt.make_placeholder("x", a.shape, a.dtype)
        y = pt.make_placeholder("y", b.shape, b.dtype)
        with pytest.raises(DTypeError, match=str(a.dtype)):
            fn(x, y)
        return
    # b has shape (4,): broadcast against (3, 4), and reflected order too
    assert_matches_numpy(lambda xp, x, y: fn(x, y), a, b)
    if np.dtype(dtypes[1]).kind in "iub" and op in ("**", "<<", ">>"):
        return  # reflected: exponents/shift amounts would be the random data
    if op in ("/", "//", "%"):
        a = np.where(a == 0, np.ones_like(a), a)
    assert_matches_numpy(lambda xp, x, y: fn(y, x), a, b)


SCALARS = [2, -3, 300, 0.5, 1e300, 2j, True, np.float32(2.5), np.float64(0.25),
           np.int16(3), np.uint8(7), np.bool_(False)]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "&", "|", "<"])
@pytest.mark.parametrize("reflected", [False, True], ids=["array_op_scalar",
                                                           "scalar_op_array"])
def test_operator_with_scalar_follows_nep50(op, dtype, scalar, reflected, rng):
    fn = BINARY_OPERATORS[op]
    a = _left_operand(op, dtype, rng)
    if reflected and op in ("/", "//", "%"):
        a = np.where(a == 0, np.ones_like(a), a)

    def program(xp, x):
        return fn(scalar, x) if reflected else fn(x, scalar)

    try:
        with np.errstate(all="ignore"):
            program(np, a)
    except (TypeError, OverflowError):
        x = pt.make_placeholder("x", a.shape, a.dtype)
        with pytest.raises(DTypeError, match=str(a.dtype)):
            program(pt, x)
        return
    assert_matches_numpy(program, a)


# {{{ NEP 50 spot checks with explicit expectations

def _evaluate(result, **inputs):
    return pt.generate_numpy(result)(**inputs)


def test_float32_plus_python_float_stays_float32():
    x = pt.make_placeholder("x", (3,), np.float32)
    y = x + 0.5
    assert y.dtype == np.float32
    a = np.array([1, 2, 3], np.float32)
    out = _evaluate(y, x=a)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a + np.float32(0.5))


def test_float32_plus_numpy_float64_scalar_is_float64():
    x = pt.make_placeholder("x", (3,), np.float32)
    assert (x + np.float64(0.5)).dtype == np.float64


def test_int8_plus_out_of_range_python_int_raises():
    x = pt.make_placeholder("x", (3,), np.int8)
    with pytest.raises(DTypeError, match="300.*int8"):
        x + 300


def test_uint8_minus_one_wraps_around():
    x = pt.make_placeholder("x", (3,), np.uint8)
    y = x - 1
    assert y.dtype == np.uint8
    out = _evaluate(y, x=np.array([0, 1, 255], np.uint8))
    np.testing.assert_array_equal(out, np.array([255, 0, 254], np.uint8))


def test_uint8_minus_negative_python_int_raises():
    x = pt.make_placeholder("x", (3,), np.uint8)
    with pytest.raises(DTypeError, match="uint8"):
        x - (-1)


def test_int_array_true_divide_is_float64():
    x = pt.make_placeholder("x", (2,), np.int32)
    y = x / 2
    assert y.dtype == np.float64
    np.testing.assert_array_equal(_evaluate(y, x=np.array([1, -3], np.int32)),
                                  [0.5, -1.5])


def test_floor_division_and_modulo_round_towards_minus_infinity():
    x = pt.make_placeholder("x", (4,), np.int64)
    a = np.array([7, -7, 7, -7])
    b = np.array([2, 2, -2, -2])
    y = pt.make_placeholder("y", (4,), np.int64)
    out = _evaluate(pt.make_dict_of_named_arrays({"q": x // y, "r": x % y}),
                    x=a, y=b)
    np.testing.assert_array_equal(out["q"], [3, -4, -4, 3])
    np.testing.assert_array_equal(out["r"], [1, 1, -1, -1])


def test_bool_plus_bool_is_logical_or():
    assert_matches_numpy(lambda xp, x, y: x + y,
                         np.array([True, True, False, False]),
                         np.array([True, False, True, False]))


def test_divmod_matches_numpy(rng):
    a = rng.integers(-9, 10, (5,))
    b = np.array([3, -3, 2, 7, -1])
    assert_matches_numpy(lambda xp, x, y: divmod(x, y)[0], a, b)
    assert_matches_numpy(lambda xp, x, y: divmod(x, y)[1], a, b)
    assert_matches_numpy(lambda xp, x, y: divmod(7, y)[1] + 0 * x, a, b)


@pytest.mark.parametrize("value", [300, -129, 2**70])
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_comparison_with_out_of_range_python_int_matches_numpy(op, value):
    # NumPy 2 compares integer arrays with any Python int exactly, even one
    # the array's dtype cannot hold.
    fn = {"==": lambda a, b: (a == b) if isinstance(a, np.ndarray)
          else pt.equal(a, b),
          "!=": lambda a, b: (a != b) if isinstance(a, np.ndarray)
          else pt.not_equal(a, b)}.get(op, BINARY_OPERATORS.get(op))
    a = np.array([-128, 0, 127], np.int8)
    assert_matches_numpy(lambda xp, x: fn(x, value), a)

# }}}


# {{{ unary operators

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["-", "+", "~", "abs"])
def test_unary_operator_matches_numpy(op, dtype, rng):
    fn = {"-": operator.neg, "+": operator.pos, "~": operator.invert,
          "abs": abs}[op]
    a = random_small(rng, dtype)
    try:
        fn(a)
    except TypeError:
        x = pt.make_placeholder("x", a.shape, a.dtype)
        with pytest.raises(DTypeError, match=str(a.dtype)):
            fn(x)
        return
    assert_matches_numpy(lambda xp, x: fn(x), a)


def random_small(rng, dtype):
    from pytato_like.testing import random_input
    return random_input(rng, (2, 3), dtype)


def test_negating_unsigned_wraps_around():
    assert_matches_numpy(lambda xp, x: -x, np.array([0, 1, 200], np.uint8))


def test_abs_of_most_negative_int8_wraps_like_numpy():
    assert_matches_numpy(lambda xp, x: abs(x), np.array([-128, -1, 5], np.int8))


def test_unary_plus_returns_same_node():
    x = pt.make_placeholder("x", (2,), np.float64)
    assert +x is x

# }}}


# {{{ == is structural equality

def test_double_equals_compares_graphs_not_elements():
    x = pt.make_placeholder("x", (3,), np.float64)
    assert (x + 1 == x + 1) is True
    assert (x + 1 == x + 2) is False
    assert (x + 1 != x + 2) is True
    elementwise = pt.equal(x, x + 0)
    assert isinstance(elementwise, pt.Array)
    out = pt.generate_numpy(elementwise)(x=np.array([1.0, np.nan, 3.0]))
    np.testing.assert_array_equal(out, [True, False, True])


def test_lazy_array_has_no_truth_value():
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(DTypeError, match=r"\(3,\)"):
        bool(x > 0)


def test_operators_with_numpy_array_operand_build_data_wrappers():
    x = pt.make_placeholder("x", (3,), np.float32)
    c = np.array([1.0, 2.0, 3.0], np.float32)
    a = np.array([4.0, 5.0, 6.0], np.float32)
    out = pt.generate_numpy(pt.make_dict_of_named_arrays(
        {"left": c + x, "right": x * c}))(x=a)
    assert_results_close(out, {"left": c + a, "right": a * c})

# }}}

# vim: foldmethod=marker
