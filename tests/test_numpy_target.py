"""The NumPy reference executor (:func:`pytato_like.generate_numpy`):
result forms, memory ownership, reuse, scalar inputs, size parameters,
shared subexpressions evaluated once."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import InputShapeMismatchError
from pytato_like.testing import assert_results_close


def test_array_result_is_an_ndarray_and_dict_result_a_dict():
    x = pt.make_placeholder("x", (3,), np.float64)
    a = np.array([1.0, 2.0, 3.0])
    single = pt.generate_numpy(x * 2)(x=a)
    assert isinstance(single, np.ndarray)
    np.testing.assert_array_equal(single, a * 2)
    many = pt.generate_numpy(pt.make_dict_of_named_arrays(
        {"double": x * 2, "square": x * x}))(x=a)
    assert isinstance(many, dict) and set(many) == {"double", "square"}
    assert_results_close(many, {"double": a * 2, "square": a * a})


def test_plain_dict_result_is_accepted():
    x = pt.make_placeholder("x", (2,), np.float64)
    out = pt.generate_numpy({"y": x + 1})(x=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(out["y"], [2.0, 3.0])


def test_generate_numpy_like_is_the_same_executor():
    assert pt.generate_numpy_like is pt.generate_numpy


def test_outputs_never_alias_inputs_or_wrapped_data():
    a = np.array([1.0, 2.0, 3.0])
    data = np.array([4.0, 5.0])
    x = pt.make_placeholder("x", (3,), np.float64)
    dw = pt.make_data_wrapper(data)
    out = pt.generate_numpy(pt.make_dict_of_named_arrays(
        {"input": x, "view": x[::-1], "reshaped": x.reshape(3, 1),
         "data": dw}))(x=a)
    for value in out.values():
        value[...] = 0
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(data, [4.0, 5.0])


def test_program_can_be_called_repeatedly_with_new_inputs(rng):
    x = pt.make_placeholder("x", (4,), np.float64)
    prg = pt.generate_numpy(pt.sum(x * x))
    for _ in range(3):
        a = rng.standard_normal(4)
        np.testing.assert_allclose(prg(x=a), np.sum(a * a))


def test_zero_dimensional_input_accepts_python_scalar():
    s = pt.make_placeholder("s", (), np.float32)
    x = pt.make_placeholder("x", (2,), np.float32)
    out = pt.generate_numpy(x * s)(x=np.array([1, 2], np.float32), s=2.5)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [2.5, 5.0])


def test_named_array_of_a_result_can_be_reused(rng):
    x = pt.make_placeholder("x", (3,), np.float64)
    d = pt.make_dict_of_named_arrays({"a": x + 1, "b": x * 2})
    assert isinstance(d["a"], pt.NamedArray)
    assert d["a"].expr is d._data["a"]
    a = rng.standard_normal(3)
    out = pt.generate_numpy(d["a"] * d["b"])(x=a)
    np.testing.assert_allclose(out, (a + 1) * (a * 2))


def test_inconsistent_size_parameter_values_raise():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    y = pt.make_placeholder("y", (n,), np.float64)
    with pytest.raises(InputShapeMismatchError, match=r"'[xy]' has shape \((3|4),\)"):
        pt.generate_numpy(x + y)(x=np.zeros(3), y=np.zeros(4))


def test_shared_subexpressions_are_evaluated_once(monkeypatch):
    # 40 levels, each using the previous level twice: 2**40 paths, 81 nodes
    import pytato_like.target.numpy as numpy_target

    calls = []
    original = numpy_target.evaluate_index_lambda

    def counting(expr, bindings, shape):
        calls.append(expr)
        return original(expr, bindings, shape)

    monkeypatch.setattr(numpy_target, "evaluate_index_lambda", counting)
    x = pt.make_placeholder("x", (2,), np.float64)
    y = x
    for _ in range(40):
        y = (y * 0.5 + y * 0.25) / 0.75
    out = pt.generate_numpy(y)(x=np.array([1.0, -2.0]))
    np.testing.assert_allclose(out, [1.0, -2.0])
    assert len(calls) == len({id(e) for e in calls}) == 40 * 4


def test_pyopencl_array_as_data_wrapper():
    import pyopencl as cl
    import pyopencl.array as cla
    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    dw = pt.make_data_wrapper(cla.to_device(queue, host))
    out = pt.generate_numpy(dw.T * 2)()
    assert_results_close(out, host.T * 2)
