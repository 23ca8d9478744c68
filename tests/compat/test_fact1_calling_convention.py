"""Issue 9, fact 1: the bound program follows loopy's calling convention.

Programs written as a pytato user writes them: ``evt, (out,) = prg(queue,
...)`` for an array result, ``evt, out = prg(queue, ...)`` (a dict) for a
:class:`DictOfNamedArrays` result; ``options`` as a :class:`loopy.Options`;
``return_dict`` that does not match the result is a :class:`ValueError`.
Every result is checked against NumPy and the NumPy target.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError

lp = pytest.importorskip("loopy")
cl = pytest.importorskip("pyopencl")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def test_array_result_is_a_one_tuple(queue):
    a = pt.make_placeholder("a", (4, 5), np.float64)
    b = pt.make_placeholder("b", (5,), np.float64)
    result = pt.sin(a) * b + 1
    a_in = np.linspace(0, 1, 20).reshape(4, 5)
    b_in = np.arange(5.0)

    prg = pt.generate_loopy(result)
    evt, outputs = prg(queue, a=a_in, b=b_in)
    assert isinstance(outputs, tuple) and len(outputs) == 1
    (out,) = outputs
    evt.wait()
    np.testing.assert_allclose(out, np.sin(a_in) * b_in + 1, rtol=1e-14)
    np.testing.assert_allclose(out, pt.generate_numpy(result)(a=a_in, b=b_in),
                               rtol=1e-14)


def test_dict_results_are_dicts(queue):
    x = pt.make_placeholder("x", (6,), np.float32)
    x_in = np.arange(6, dtype=np.float32)
    ref = {"twice": 2 * x_in, "total": np.sum(x_in)}
    for result in (pt.make_dict_of_named_arrays({"twice": 2 * x, "total": pt.sum(x)}),
                   {"twice": 2 * x, "total": pt.sum(x)}):
        evt, out = pt.generate_loopy(result)(queue, x=x_in)
        assert isinstance(out, dict) and set(out) == {"twice", "total"}
        for name, value in ref.items():
            np.testing.assert_allclose(out[name], value, rtol=1e-6)
        np.testing.assert_allclose(
            out["total"], pt.generate_numpy(result)(x=x_in)["total"], rtol=1e-6)


def test_loopy_options_are_accepted(queue):
    x = pt.make_placeholder("x", (8,), np.float64)
    x_in = np.linspace(-1, 1, 8)
    # pytato users pass loopy's Options; return_dict matches the result
    prg = pt.generate_loopy(pt.exp(x), options=lp.Options(return_dict=False))
    _, (out,) = prg(queue, x=x_in)
    np.testing.assert_allclose(out, np.exp(x_in), rtol=1e-14)
    prg = pt.generate_loopy({"y": pt.exp(x)},
                            options=lp.Options(return_dict=True, no_numpy=True))
    _, out = prg(queue, x=cl.array.to_device(queue, x_in))
    np.testing.assert_allclose(out["y"].get(), np.exp(x_in), rtol=1e-14)


@pytest.mark.parametrize("result_is_dict", [False, True])
def test_return_dict_mismatch_is_a_value_error(result_is_dict):
    x = pt.make_placeholder("x", (3,), np.float64)
    result = {"y": x + 1} if result_is_dict else x + 1
    with pytest.raises(ValueError, match="return_dict"):
        pt.generate_loopy(result,
                          options=lp.Options(return_dict=not result_is_dict))
    with pytest.raises(ValueError, match="return_dict"):
        pt.generate_loopy(result, options={"return_dict": not result_is_dict})


def test_dict_options_keep_our_keys_and_name_unknown_ones(queue):
    x = pt.make_placeholder("x", (10,), np.float64)
    x_in = np.arange(10.0)
    prg = pt.generate_loopy(x * x + 1, options={
        "max_instructions_per_kernel": 4, "report": False})
    _, (out,) = prg(queue, x=x_in)
    np.testing.assert_allclose(out, x_in * x_in + 1)
    with pytest.raises(ConfigurationError, match="'not_an_option'"):
        pt.generate_loopy(x + 1, options={"not_an_option": 3})


def test_function_name_and_cl_device_keywords(queue):
    x = pt.make_placeholder("x", (5,), np.int64)
    prg = pt.generate_loopy(x * 3, function_name="triple",
                            cl_device=queue.device)
    assert "triple" in prg.program.entrypoints
    _, (out,) = prg(queue, x=np.arange(5))
    np.testing.assert_array_equal(out, np.arange(5) * 3)


def test_tag_propagation_keywords(queue):
    from pytato_like.tags import ImplStored
    x = pt.make_placeholder("x", (4,), np.float64)
    prg = pt.generate_loopy(2 * x, array_tag_t_to_not_propagate=frozenset(
        [ImplStored]), axis_tag_t_to_not_propagate=frozenset())
    _, (out,) = prg(queue, x=np.arange(4.0))
    np.testing.assert_array_equal(out, 2 * np.arange(4.0))
    with pytest.raises(ConfigurationError, match="axis_tag_t_to_not_propagate"):
        pt.generate_loopy(2 * x, axis_tag_t_to_not_propagate=frozenset([3]))


def test_positional_inputs_are_refused(queue):
    from pytato_like.diagnostic import UnexpectedInputError
    x = pt.make_placeholder("x", (2,), np.float64)
    with pytest.raises(UnexpectedInputError, match="by name"):
        pt.generate_loopy(x + 1)(queue, np.zeros(2))
