"""Bad input raises a typed exception from :mod:`pytato_like.diagnostic`
whose message names the offending shape, dtype, name or axis."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic as d


@pytest.fixture
def x():
    return pt.make_placeholder("x", (3, 4), np.float64)


def test_every_error_is_a_pytato_like_error():
    warnings = []
    for name in dir(d):
        obj = getattr(d, name)
        if isinstance(obj, type) and issubclass(obj, Warning):
            # warnings have their own base (issued, not raised)
            assert issubclass(obj, d.PytatoLikeWarning), name
            warnings.append(name)
        elif isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, d.PytatoLikeError), name
    assert "PytatoLikeWarning" in warnings


# {{{ construction

def test_mismatched_broadcast(x):
    y = pt.make_placeholder("y", (5,), np.float64)
    with pytest.raises(d.ShapeMismatchError, match=r"\(3, 4\).*\(5,\)"):
        x + y


def test_mismatched_broadcast_in_where(x):
    with pytest.raises(d.ShapeMismatchError, match=r"\(3, 4\).*\(2,\)"):
        pt.where(x > 0, x, np.zeros(2))


def test_einsum_wrong_operand_count(x):
    with pytest.raises(d.EinsumSpecError, match="'ij,jk->ik'.*2 operands.*1"):
        pt.einsum("ij,jk->ik", x)


def test_einsum_bad_character(x):
    with pytest.raises(d.EinsumSpecError, match="invalid character '1'"):
        pt.einsum("i1->i", x)


def test_einsum_subscript_rank_differs_from_operand(x):
    with pytest.raises(d.EinsumSpecError, match=r"'ijk'.*\(3, 4\)"):
        pt.einsum("ijk->i", x)


def test_einsum_index_extent_mismatch(x):
    y = pt.make_placeholder("y", (5, 2), np.float64)
    with pytest.raises(d.ShapeMismatchError, match=r"'j'.*4.*5"):
        pt.einsum("ij,jk->ik", x, y)


def test_einsum_output_index_not_in_inputs(x):
    with pytest.raises(d.EinsumSpecError, match="output index 'k'"):
        pt.einsum("ij->ik", x)


def test_einsum_repeated_output_index(x):
    with pytest.raises(d.EinsumSpecError, match="'ii'"):
        pt.einsum("ij->ii", x)


@pytest.mark.parametrize("fn", [
    lambda x: pt.sum(x, axis=2), lambda x: pt.amax(x, axis=-3),
    lambda x: pt.prod(x, axis=(0, 0)), lambda x: x.mean(axis=5)],
    ids=["sum", "amax", "prod-repeated", "mean"])
def test_reduction_bad_axis(x, fn):
    with pytest.raises(d.AxisError, match=r"\(3, 4\)"):
        fn(x)


def test_transpose_bad_axes(x):
    with pytest.raises(d.AxisError, match=r"\(3, 4\)"):
        pt.transpose(x, (1, 1))
    with pytest.raises(d.AxisError, match=r"\(3, 4\)"):
        x.transpose(0, 2)


def test_concatenate_bad_axis(x):
    with pytest.raises(d.AxisError, match=r"axis 2.*\(3, 4\)"):
        pt.concatenate([x, x], axis=2)


def test_concatenate_mismatched_shapes(x):
    y = pt.make_placeholder("y", (3, 5), np.float64)
    with pytest.raises(d.ShapeMismatchError, match=r"\(3, 4\).*\(3, 5\)"):
        pt.concatenate([x, y], axis=0)


def test_stack_bad_axis(x):
    with pytest.raises(d.AxisError, match=r"axis 3.*\(3, 4\)"):
        pt.stack([x, x], axis=3)


def test_squeeze_bad_axis(x):
    with pytest.raises(d.AxisError, match=r"axis 2.*\(3, 4\)"):
        pt.squeeze(x, axis=2)


def test_squeeze_non_unit_axis(x):
    with pytest.raises(d.ShapeMismatchError, match=r"axis 0 of length 3.*\(3, 4\)"):
        pt.squeeze(x, axis=0)


def test_out_of_range_static_index(x):
    with pytest.raises(d.IndexOutOfBoundsError, match=r"index 4.*axis 1.*size 4"):
        x[0, 4]
    with pytest.raises(d.IndexOutOfBoundsError, match=r"index -4.*axis 0.*size 3"):
        x[-4]


def test_too_many_indices(x):
    with pytest.raises(d.IndexOutOfBoundsError, match=r"too many.*\(3, 4\).*3"):
        x[0, 0, 0]


def test_non_integer_index_array(x):
    with pytest.raises(d.IndexTypeError, match="float64"):
        x[np.array([0.0, 1.0])]
    idx = pt.make_placeholder("idx", (2,), np.float32)
    with pytest.raises(d.IndexTypeError, match=r"float32.*\(2,\)"):
        x[idx]


def test_boolean_lazy_index_array(x):
    mask = pt.make_placeholder("mask", (3,), np.bool_)
    with pytest.raises(d.IndexTypeError, match=r"boolean.*\(3,\).*\(3, 4\)"):
        x[mask]


def test_reshape_size_mismatch(x):
    with pytest.raises(d.ShapeMismatchError, match=r"\(3, 4\).*size 12.*\(5, 2\)"):
        pt.reshape(x, (5, 2))
    with pytest.raises(d.ShapeMismatchError, match=r"\(3, 4\).*\(5, -1\)"):
        x.reshape(5, -1)


def test_empty_max_reduction():
    e = pt.make_placeholder("e", (2, 0), np.float64)
    with pytest.raises(d.EmptyReductionError, match=r"amax.*axis 1.*\(2, 0\)"):
        pt.amax(e, axis=1)
    with pytest.raises(d.EmptyReductionError, match=r"amin.*\(2, 0\)"):
        e.min()


def test_operation_undefined_for_dtype(x):
    with pytest.raises(d.DTypeError, match="float64"):
        x & x
    with pytest.raises(d.DTypeError, match="float64"):
        ~x


def test_python_int_out_of_range_for_dtype():
    i8 = pt.make_placeholder("i8", (3,), np.int8)
    with pytest.raises(d.DTypeError, match="1000.*int8"):
        i8 * 1000


@pytest.mark.parametrize("name", ["1x", "a b", "", "x-y", None, 3])
def test_invalid_placeholder_name(name):
    with pytest.raises(d.InvalidNameError, match=repr(name).replace("'", ".")):
        pt.make_placeholder(name, (2,), np.float64)


def test_invalid_size_param_name():
    with pytest.raises(d.InvalidNameError, match="'n m'"):
        pt.make_size_param("n m")


@pytest.mark.parametrize("shape", [(-1, 2), (2.5,), ("a",)], ids=str)
def test_invalid_placeholder_shape(shape):
    with pytest.raises(d.ShapeMismatchError, match="-1|2.5|'a'"):
        pt.make_placeholder("x", shape, np.float64)


def test_data_wrapper_shape_mismatch():
    with pytest.raises(d.ShapeMismatchError, match=r"\(3,\).*\(2,\)"):
        pt.make_data_wrapper(np.zeros(2), shape=(3,))


def test_non_array_result():
    with pytest.raises(d.NotAnArrayError, match="int"):
        pt.make_dict_of_named_arrays({"a": 3})
    with pytest.raises(d.NotAnArrayError, match="str"):
        pt.generate_numpy("x")

# }}}


# {{{ program inputs

def test_name_clash_between_different_placeholders():
    a = pt.make_placeholder("x", (3,), np.float64)
    b = pt.make_placeholder("x", (4,), np.float64)
    result = pt.make_dict_of_named_arrays({"a": a * 2, "b": b + 1})
    with pytest.raises(d.NameClashError, match=r"'x'.*\(3,\).*\(4,\)"):
        pt.generate_numpy(result)


def test_equal_placeholders_with_the_same_name_do_not_clash():
    a = pt.make_placeholder("x", (3,), np.float64)
    b = pt.make_placeholder("x", (3,), np.float64)
    out = pt.generate_numpy(a + b)(x=np.ones(3))
    np.testing.assert_array_equal(out, 2 * np.ones(3))


def test_missing_input(x):
    y = pt.make_placeholder("y", (4,), np.float32)
    with pytest.raises(d.MissingInputError, match=r"'y'.*\(4,\).*float32"):
        pt.generate_numpy(x + y)(x=np.zeros((3, 4)))


def test_missing_size_parameter():
    n = pt.make_size_param("n")
    with pytest.raises(d.MissingInputError, match="'n'"):
        pt.generate_numpy(pt.zeros((2,)) + n)()


def test_unexpected_input(x):
    with pytest.raises(d.UnexpectedInputError, match=r"'z'.*'x'"):
        pt.generate_numpy(x * 2)(x=np.zeros((3, 4)), z=np.zeros(2))


def test_input_of_wrong_shape(x):
    with pytest.raises(d.InputShapeMismatchError, match=r"'x'.*\(4, 3\).*\(3, 4\)"):
        pt.generate_numpy(x * 2)(x=np.zeros((4, 3)))


def test_input_of_wrong_dtype(x):
    with pytest.raises(d.InputDTypeMismatchError, match="'x'.*float32.*float64"):
        pt.generate_numpy(x * 2)(x=np.zeros((3, 4), np.float32))

# }}}

# vim: foldmethod=marker
