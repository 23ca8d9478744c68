"""Issue 9, fact 7: the front-end keywords pytato has, used as pytato
programs use them: reductions' ``initial=`` and ``axis_to_reduction_descr=``,
``einsum(..., index_to_redn_descr=)``, ``zeros/ones/full(..., order=)``,
``make_data_wrapper(data, name=None, shape=None, axes=None, tags=...)`` and
``make_placeholder(name, shape, dtype, axes=, tags=)``. Values are checked
against NumPy through the NumPy target (and loopy where it runs)."""

import numpy as np
import pytest
from pytools.tag import Tag, tag_dataclass

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.raising import index_lambda_to_high_level_op


@tag_dataclass
class FooRednTag(Tag):
    pass


@tag_dataclass
class BarAxisTag(Tag):
    pass


# {{{ reductions

@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64"])
@pytest.mark.parametrize(("pt_func", "np_func", "initial"), [
    (pt.sum, np.sum, 5), (pt.prod, np.prod, 3), (pt.amax, np.max, 4),
    (pt.amin, np.min, 2),
])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_reduction_initial(dtype, pt_func, np_func, initial, axis):
    xv = (np.arange(12).reshape(3, 4) % 7).astype(dtype)
    x = pt.make_placeholder("x", (3, 4), dtype)
    result = pt_func(x, axis=axis, initial=initial)
    expected = np_func(xv, axis=axis, initial=initial)
    out = pt.generate_numpy(result)(x=xv)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_reduction_initial_over_empty_axis():
    xv = np.zeros((0, 3), np.float32)
    x = pt.make_placeholder("x", (0, 3), np.float32)
    for pt_func, np_func in ((pt.amax, np.max), (pt.amin, np.min),
                             (pt.sum, np.sum)):
        out = pt.generate_numpy(pt_func(x, axis=0, initial=5.0))(x=xv)
        expected = np_func(xv, axis=0, initial=5.0)
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(out, expected)
    with pytest.raises(diagnostic.EmptyReductionError):
        pt.amax(x, axis=0)


def test_reduction_initial_neutral_is_plain_reduction():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    assert pt.sum(x, axis=1, initial=0) == pt.sum(x, axis=1)
    assert pt.prod(x, axis=1, initial=1) == pt.prod(x, axis=1)


def test_axis_to_reduction_descr():
    x = pt.make_placeholder("x", (3, 4, 5), np.float64)
    descr = pt.ReductionDescriptor(frozenset({FooRednTag()}))
    s = pt.sum(x, axis=(0, 2), axis_to_reduction_descr={2: descr})
    hlo = index_lambda_to_high_level_op(s)
    assert s.var_to_reduction_descr[hlo.axes[2]] == descr
    assert s.var_to_reduction_descr[hlo.axes[0]].tags == frozenset()
    # negative axes name the same axis
    assert pt.amax(x, axis=-1, axis_to_reduction_descr={-1: descr}) \
        .var_to_reduction_descr[index_lambda_to_high_level_op(
            pt.amax(x, axis=-1)).axes[2]] == descr
    xv = np.random.default_rng(0).random((3, 4, 5))
    np.testing.assert_allclose(pt.generate_numpy(s)(x=xv), xv.sum(axis=(0, 2)))
    for func in (pt.prod, pt.amin, pt.any, pt.all):
        r = func(x, axis=1, axis_to_reduction_descr={1: descr})
        assert list(r.var_to_reduction_descr.values()) == [descr]
    with pytest.raises(diagnostic.NotAReductionAxis, match="axis 1"):
        pt.sum(x, axis=0, axis_to_reduction_descr={1: descr})
    with pytest.raises(diagnostic.NotAReductionAxis):
        pt.sum(x, axis=0, axis_to_reduction_descr={0: FooRednTag()})


def test_reduction_keywords_on_loopy(queue):
    x = pt.make_placeholder("x", (3, 4), np.float64)
    xv = np.arange(12.0).reshape(3, 4)
    descr = pt.ReductionDescriptor(frozenset({FooRednTag()}))
    result = pt.amax(x, axis=1, initial=6.5, axis_to_reduction_descr={1: descr})
    _evt, (out,) = pt.generate_loopy(result)(queue, x=xv)
    np.testing.assert_array_equal(out, pt.generate_numpy(result)(x=xv))
    np.testing.assert_array_equal(out, np.max(xv, axis=1, initial=6.5))

# }}}


# {{{ einsum

def test_einsum_index_to_redn_descr():
    a = pt.make_placeholder("a", (3, 4), np.float64)
    b = pt.make_placeholder("b", (4, 5), np.float64)
    descr = pt.ReductionDescriptor(frozenset({FooRednTag()}))
    e = pt.einsum("ij,jk->ik", a, b, index_to_redn_descr={"j": descr})
    assert list(e.redn_axis_to_redn_descr.values()) == [descr]
    assert e != pt.einsum("ij,jk->ik", a, b)  # the descriptor is part of it
    rng = np.random.default_rng(1)
    av, bv = rng.random((3, 4)), rng.random((4, 5))
    np.testing.assert_allclose(pt.generate_numpy(e)(a=av, b=bv), av @ bv)
    e2 = pt.einsum("ijk,jk->i", pt.make_placeholder("c", (2, 3, 4)),
                   pt.make_placeholder("d", (3, 4)),
                   index_to_redn_descr={"k": descr})
    # summed indices are numbered in sorted order: j -> 0, k -> 1
    assert e2.redn_axis_to_redn_descr[pt.EinsumReductionAxis(1)] == descr
    assert e2.redn_axis_to_redn_descr[pt.EinsumReductionAxis(0)].tags == frozenset()
    with pytest.raises(diagnostic.NotAReductionAxis, match="'i'"):
        pt.einsum("ij,jk->ik", a, b, index_to_redn_descr={"i": descr})

# }}}


# {{{ creation with order=

@pytest.mark.parametrize("order", ["C", "F"])
def test_creation_order(order):
    np.testing.assert_array_equal(
        pt.generate_numpy(pt.zeros((2, 3), np.int32, order=order))(),
        np.zeros((2, 3), np.int32, order=order))
    np.testing.assert_array_equal(
        pt.generate_numpy(pt.ones((2, 3), order=order))(),
        np.ones((2, 3), order=order))
    np.testing.assert_array_equal(
        pt.generate_numpy(pt.full((2, 3), 4.5, np.float32, order=order))(),
        np.full((2, 3), 4.5, np.float32, order=order))
    np.testing.assert_array_equal(
        pt.generate_numpy(pt.full((2,), 7, order=order))(), np.full((2,), 7))


def test_creation_bad_order():
    for func in (pt.zeros, pt.ones):
        with pytest.raises(diagnostic.InvalidOrderError, match="'K'"):
            func((2,), order="K")
    with pytest.raises(diagnostic.InvalidOrderError, match="full"):
        pt.full((2,), 1.0, order="A")

# }}}


# {{{ input constructors

def test_make_data_wrapper_keywords():
    data = np.arange(6.0).reshape(2, 3)
    axes = (pt.Axis(frozenset({BarAxisTag()})), pt.Axis(frozenset()))
    w = pt.make_data_wrapper(data, name="w", shape=(2, 3), axes=axes,
                             tags=frozenset({pt.tags.ImplStored()}))
    assert w.name == "w" and w.shape == (2, 3) and w.axes == axes
    assert pt.tags.ImplStored() in w.tags
    anonymous = pt.make_data_wrapper(data)
    assert anonymous.name is None and anonymous.shape == (2, 3)
    np.testing.assert_array_equal(pt.generate_numpy(2 * w + anonymous)(),
                                  3 * data)
    n = pt.make_size_param("n")
    symbolic = pt.make_data_wrapper(np.arange(4.0), shape=(n,))
    assert symbolic.shape == (n,)
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"\(3, 2\).*\(2, 3\)"):
        pt.make_data_wrapper(data, shape=(3, 2))
    with pytest.raises(diagnostic.AxisError):
        pt.make_data_wrapper(data, axes=(pt.Axis(frozenset()),))
    with pytest.raises(diagnostic.InvalidNameError):
        pt.make_data_wrapper(data, name="not a name")


def test_make_placeholder_argument_order():
    axes = (pt.Axis(frozenset({BarAxisTag()})),)
    x = pt.make_placeholder("x", (4,), np.float32, axes, frozenset({FooRednTag()}))
    y = pt.make_placeholder("x", shape=(4,), dtype="float32", axes=axes,
                            tags=frozenset({FooRednTag()}))
    assert x == y and x.dtype == np.float32 and x.axes == axes
    assert x.tags == frozenset({FooRednTag()})
    assert pt.make_placeholder("z", (2, 2)).dtype == np.float64
    xv = np.arange(4, dtype=np.float32)
    out = pt.generate_numpy(x * 2)(x=xv)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, 2 * xv)
    with pytest.raises(diagnostic.AxisError):
        pt.make_placeholder("x", (4,), np.float32, axes=axes * 2)

# }}}
