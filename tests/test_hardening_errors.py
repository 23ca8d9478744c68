"""Issue 37's front-end cases, each against NumPy's own behaviour: lists
and tuples as operands (values and dtypes as ``np.asarray`` gives them),
NumPy's exception classes where NumPy raises (typed subclasses from
:mod:`pytato_like.diagnostic`), invalid operands and size values named in
the message, and what NumPy may do with a lazy array (build the operator
result, or raise a typed error saying what to call instead)."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import (
    IndexTypeError,
    InvalidIndexError,
    InvalidOperandError,
    InvalidSizeError,
    LazyArrayConversionError,
    PytatoLikeError,
    ScalarOverflowError,
)


def _evaluate(result, **inputs):
    return pt.generate_numpy(result)(**inputs)


def _assert_same(actual, expected):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


# {{{ lists and tuples as operands

LIST_OPERANDS = [[1, 2, 3], (1.5, -2.0, 3.25), [[1], [2]], [True, False, True],
                 [1 + 2j, 0, 3], [2**40, 1, 0]]
DTYPES = ["float32", "int8", "int64", "uint8", "bool", "complex64"]
OPERATORS = [operator.add, operator.sub, operator.mul, operator.lt,
             operator.ge, operator.and_]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.__name__)
def test_list_operand_on_either_side_matches_numpy(op, dtype):
    data = np.array([3, 0, 1], dtype=dtype)
    x = pt.make_placeholder("x", (3,), dtype)
    for operand in LIST_OPERANDS:
        for args, lazy_args in (((data, operand), (x, operand)),
                                ((operand, data), (operand, x))):
            try:
                with np.errstate(all="ignore"):
                    expected = op(*args)
            except (TypeError, OverflowError) as err:
                # NumPy refuses (bitwise and of floats, bool minus bool):
                # a typed error of the same class
                with pytest.raises(type(err) if isinstance(err, OverflowError)
                                   else TypeError) as info:
                    op(*lazy_args)
                assert isinstance(info.value, PytatoLikeError)
                continue
            with np.errstate(all="ignore"):
                _assert_same(_evaluate(op(*lazy_args), x=data), expected)


def test_list_operands_of_elementwise_functions_match_numpy():
    data = np.array([3.0, -1.0, 2.0])
    x = pt.make_placeholder("x", (3,), np.float64)
    for pt_fn, np_fn in ((pt.maximum, np.maximum), (pt.minimum, np.minimum),
                         (pt.arctan2, np.arctan2)):
        _assert_same(_evaluate(pt_fn(x, [1, 5, 2]), x=data),
                     np_fn(data, [1, 5, 2]))
        _assert_same(_evaluate(pt_fn([[0.5], [9.0]], x), x=data),
                     np_fn([[0.5], [9.0]], data))
    _assert_same(_evaluate(pt.where(x > 0, [1, 2, 3], x), x=data),
                 np.where(data > 0, [1, 2, 3], data))


def test_list_operand_of_int8_array_takes_numpy_2_promotion():
    """Python ints inside a list make an int64 array (np.asarray), so the
    result is int64, where a bare Python int would keep int8."""
    data = np.array([1, 2, 3], dtype=np.int8)
    x = pt.make_placeholder("x", (3,), np.int8)
    assert (x + [1, 2, 3]).dtype == (data + [1, 2, 3]).dtype == np.int64
    assert (x + 1).dtype == (data + 1).dtype == np.int8


def test_list_operand_that_numpy_cannot_broadcast_raises_shape_error():
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(ValueError):
        np.zeros(3) + [1, 2]
    with pytest.raises(ValueError, match=r"\(3,\)"):
        x + [1, 2]


@pytest.mark.parametrize("operand", [[[1], [2, 3]], ["a", "b", "c"],
                                     [object(), 1, 2]],
                         ids=["ragged", "strings", "objects"])
def test_list_operand_without_numeric_array_raises_typed_error(operand):
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(InvalidOperandError, match="operand"):
        x + operand


def test_list_holding_lazy_arrays_says_to_stack():
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(LazyArrayConversionError, match="pt.stack"):
        x + [x, x, x]

# }}}


# {{{ NumPy's exception classes

@pytest.mark.parametrize("index", [1.5, np.float64(1.0), "a", [0.5],
                                   (0, ..., ...)],
                         ids=["float", "np.float64", "str", "float-list",
                              "two-ellipses"])
def test_invalid_index_raises_index_error_as_numpy(index):
    with pytest.raises(IndexError):
        np.zeros((3, 2))[index]
    x = pt.make_placeholder("x", (3, 2), np.float64)
    with pytest.raises(InvalidIndexError) as info:
        x[index]
    assert isinstance(info.value, IndexError)
    assert isinstance(info.value, IndexTypeError)  # the class raised before
    assert "(3, 2)" in str(info.value) or "..." in str(info.value)


@pytest.mark.parametrize(("dtype", "value"), [("int8", 300), ("uint8", -1),
                                              ("int16", 2**15),
                                              ("uint32", 2**32)])
def test_out_of_range_python_int_raises_overflow_error_as_numpy_2(dtype, value):
    with pytest.raises(OverflowError):
        np.zeros(3, dtype) + value
    x = pt.make_placeholder("x", (3,), dtype)
    with pytest.raises(ScalarOverflowError, match=f"{value}.*{dtype}") as info:
        x + value
    assert isinstance(info.value, OverflowError)


def test_in_range_python_int_keeps_the_array_dtype():
    data = np.array([1, 2, 3], dtype=np.int8)
    x = pt.make_placeholder("x", (3,), np.int8)
    _assert_same(_evaluate(x + 127, x=data), data + 127)

# }}}


# {{{ operands that are no numbers

@pytest.mark.parametrize("other", ["a", None, {}, b"z", {1}],
                         ids=["str", "None", "dict", "bytes", "set"])
@pytest.mark.parametrize("op", [operator.add, operator.mul, operator.lt,
                                operator.truediv],
                         ids=lambda op: op.__name__)
def test_non_numeric_operand_raises_typed_type_error_naming_it(op, other):
    with pytest.raises(TypeError):
        op(np.zeros(3), other)
    x = pt.make_placeholder("x", (3,), np.float64)
    for args in ((x, other), (other, x)):
        with pytest.raises(InvalidOperandError) as info:
            op(*args)
        assert isinstance(info.value, TypeError)
        assert type(other).__name__ in str(info.value)
        assert "float64" in str(info.value)


def test_object_with_reflected_operator_still_gets_its_turn():
    class Units:
        def __radd__(self, other):
            return "Units.__radd__"

    x = pt.make_placeholder("x", (3,), np.float64)
    assert x + Units() == "Units.__radd__"

# }}}


# {{{ size parameters at call time

@pytest.mark.parametrize("value", [-3, 2.5, "4"])
def test_invalid_size_parameter_value_raises_naming_it(value):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    prg = pt.generate_numpy(2 * x + pt.zeros((n,)))
    with pytest.raises(InvalidSizeError, match="'n'"):
        prg(x=np.zeros(3), n=value)


def test_size_parameter_given_as_numpy_integer_runs():
    n = pt.make_size_param("n")
    out = pt.generate_numpy(pt.ones((n,)) * 2)(n=np.int32(4))
    _assert_same(out, np.full(4, 2.0))

# }}}


# {{{ NumPy handed a lazy array

@pytest.fixture
def x():
    return pt.make_placeholder("x", (3,), np.float64)


@pytest.mark.parametrize("convert", [np.asarray, np.array, np.ascontiguousarray,
                                     lambda v: np.array([v, v])],
                         ids=["asarray", "array", "ascontiguousarray",
                              "list-of-lazy"])
def test_numpy_conversion_raises_saying_how_to_evaluate(x, convert):
    with pytest.raises(LazyArrayConversionError) as info:
        convert(x)
    message = str(info.value)
    assert "generate_numpy" in message and "generate_loopy" in message
    assert "'x'" in message and "(3,)" in message


@pytest.mark.parametrize(("call", "pt_name"), [
    (np.sin, "pt.sin"), (np.exp, "pt.exp"), (np.abs, "pt.abs"),
    (np.sqrt, "pt.sqrt"), (np.sum, "pt.sum"), (np.mean, "pt.mean"),
    (np.max, "pt.amax"), (np.transpose, "pt.transpose"),
    (np.add.reduce, "pt.sum"),
    (lambda v: np.concatenate([v, v]), "pt.concatenate"),
    (lambda v: np.stack([v, v]), "pt.stack"),
    (lambda v: np.where(v, 1, 2), "pt.where"),
    (lambda v: np.einsum("i->", v), "pt.einsum"),
], ids=["sin", "exp", "abs", "sqrt", "sum", "mean", "max", "transpose",
        "add.reduce", "concatenate", "stack", "where", "einsum"])
def test_numpy_function_on_lazy_array_names_the_pt_function(x, call, pt_name):
    with pytest.raises(LazyArrayConversionError, match=pt_name.replace(".", r"\.")):
        call(x)


@pytest.mark.parametrize("call", [np.cumsum, np.sort, lambda v: np.log1p(v)],
                         ids=["cumsum", "sort", "log1p"])
def test_numpy_function_without_pt_counterpart_says_how_to_evaluate(x, call):
    with pytest.raises(LazyArrayConversionError, match="generate_numpy"):
        call(x)


def test_numpy_shape_ndim_and_size_answer(x):
    assert np.shape(x) == (3,)
    assert np.ndim(x) == 1
    # (arraycontext's container maps call np.size on its arrays)
    assert np.size(x) == 3
    assert np.size(x, 0) == 3
    y = pt.make_placeholder("y", (2, 5), np.float64)
    ref = np.zeros((2, 5))
    assert (np.shape(y), np.ndim(y), np.size(y), np.size(y, axis=1)) == \
        (np.shape(ref), np.ndim(ref), np.size(ref), np.size(ref, axis=1))
    assert np.size(pt.make_data_wrapper(np.float64(1.5))) == 1


@pytest.mark.parametrize("scalar", [np.float64(2), np.float32(2), np.int8(3),
                                    2, 2.0, np.array(2.0)],
                         ids=["float64", "float32", "int8", "int", "float",
                              "0-d array"])
@pytest.mark.parametrize("op", [operator.mul, operator.add, operator.sub,
                                operator.truediv, operator.pow, operator.lt,
                                operator.ge, operator.floordiv, operator.mod],
                         ids=lambda op: op.__name__)
def test_numpy_scalar_on_the_left_builds_the_lazy_result(x, op, scalar):
    data = np.array([1.0, 2.0, 3.0])
    result = op(scalar, x)
    assert isinstance(result, pt.Array)
    with np.errstate(all="ignore"):
        _assert_same(_evaluate(result, x=data), op(scalar, data))


def test_numpy_array_on_the_left_builds_the_lazy_result(x):
    data = np.array([1.0, 2.0, 3.0])
    other = np.array([[2.0], [4.0]])
    for op in (operator.mul, operator.sub, operator.gt, operator.matmul):
        rhs = x if op is not operator.matmul else x
        lhs = other if op is not operator.matmul else np.ones((2, 3))
        result = op(lhs, rhs)
        assert isinstance(result, pt.Array)
        _assert_same(_evaluate(result, x=data), op(lhs, data))
    quotient, remainder = divmod(np.float64(7), x)
    _assert_same(_evaluate(quotient, x=data), np.float64(7) // data)
    _assert_same(_evaluate(remainder, x=data), np.float64(7) % data)


def test_numpy_scalar_times_lazy_is_the_same_node_as_before(x):
    """``np.float64(2) * x`` goes through ``__array_ufunc__`` now; it must
    build the node ``x.__rmul__`` builds (a constant, no data wrapper)."""
    assert np.float64(2) * x == x.__rmul__(np.float64(2))
    # a comparison hands NumPy's scalar over as a 0-d array: still a constant
    for result in (np.float64(2) * x, np.float32(2) < x, np.int8(1) - x):
        assert dict(result.bindings) == {"_in0": x}


def test_equality_with_numpy_operand_stays_structural(x):
    """``==`` of lazy arrays is structural equality (pytato's rule); a NumPy
    scalar or array on the left answers the same way instead of raising."""
    assert (2.0 == x) is False
    assert (np.float64(2) == x) is False
    assert (np.float64(2) != x) is True
    assert (np.ones(3) == x) is False
    assert x in [np.float64(1), x]


def test_in_place_numpy_operator_with_lazy_operand_raises(x):
    arr = np.ones(3)
    with pytest.raises(LazyArrayConversionError, match="arr = arr"):
        arr += x
    np.testing.assert_array_equal(arr, np.ones(3))

# }}}
