"""The program contract (pytato_like.target.program): every target's program
is a BoundProgram, called ``prg(queue, *, allocator=None, wait_for=None,
out_host=None, **inputs) -> (event, outputs)``.

Each target's program is called through the contract with the same inputs
and checked against NumPy itself and the NumPy target's short form."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import UnexpectedInputError
from pytato_like.partition import NumpyPartProgram
from pytato_like.target.program import HOST_EVENT, BoundProgram, HostBoundProgram

jax = pytest.importorskip("jax", reason="the JAX target needs the optional "
                         "jax extra")
jax.config.update("jax_enable_x64", True)

XV = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
YV = np.arange(4.0)


def _dag():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    y = pt.make_placeholder("y", (4,), np.float64)
    return x, y, pt.sin(x) * y + 1.0


def _expected():
    return np.sin(XV) * YV + 1.0


def to_host(value):
    return value.get() if hasattr(value, "get") and hasattr(value, "queue") \
        else np.asarray(value)


def _host_programs():
    _, _, out = _dag()
    named = pt.make_dict_of_named_arrays({"out": out})
    yield "numpy", pt.generate_numpy(out), False
    yield "numpy part", NumpyPartProgram(named), True
    yield "jax", pt.generate_jax(out), False


def _device_programs(queue):
    _, _, out = _dag()
    prg = pt.generate_loopy(out)
    yield "loopy", prg
    yield "loopy executable", prg.bind_to_context(queue.context)
    u = pt.make_placeholder("x", (3, 4), np.float64)
    v = pt.make_placeholder("y", (4,), np.float64)
    (res,) = pt.trace_call(lambda a, b: (pt.sin(a) * b + 1.0,), u, v)
    outlined = pt.generate_loopy(res)
    from pytato_like.target.loopy.outlined import OutlinedProgram
    assert isinstance(outlined, OutlinedProgram)
    yield "loopy outlined", outlined


def _check_contract_call(prg, queue, dict_result):
    assert isinstance(prg, BoundProgram)
    evt, outputs = prg(queue, allocator=None, wait_for=None, out_host=True,
                       x=XV, y=YV)
    evt.wait()
    if dict_result:
        assert isinstance(outputs, dict) and set(outputs) == {"out"}
        (value,) = outputs.values()
    else:
        assert isinstance(outputs, tuple) and len(outputs) == 1
        (value,) = outputs
    np.testing.assert_allclose(to_host(value), _expected(), rtol=1e-13)
    np.testing.assert_allclose(
        to_host(value), pt.generate_numpy(_dag()[2])(x=XV, y=YV), rtol=1e-13)


def test_host_programs_follow_the_contract():
    names = []
    for name, prg, dict_result in _host_programs():
        names.append(name)
        assert isinstance(prg, HostBoundProgram), name
        # host programs take any queue, None included
        _check_contract_call(prg, None, dict_result)
        evt, _ = prg(None, x=XV, y=YV)
        assert evt is HOST_EVENT
    assert names[:2] == ["numpy", "numpy part"]


def test_device_programs_follow_the_contract(queue):
    for _name, prg in _device_programs(queue):
        _check_contract_call(prg, queue, dict_result=False)


def test_host_programs_run_on_a_device_queue_too(queue):
    # an executor hands every part its queue, whatever the target
    for _name, prg, dict_result in _host_programs():
        _check_contract_call(prg, queue, dict_result)


def test_dict_results_are_dicts_on_every_target(queue):
    x, y, out = _dag()
    result = {"a": out, "b": pt.sum(x, axis=0) + y}
    ref = {"a": _expected(), "b": XV.sum(axis=0) + YV}
    progs = [pt.generate_numpy(result), pt.generate_jax(result),
             pt.generate_loopy(result)]
    for prg in progs:
        _evt, outputs = prg(queue, out_host=True, x=XV, y=YV)
        assert isinstance(outputs, dict) and set(outputs) == set(ref)
        for name, value in ref.items():
            np.testing.assert_allclose(to_host(outputs[name]), value,
                                       rtol=1e-13)


def test_numpy_short_form_is_unchanged():
    # pytato's NumPy-target convention: inputs by name, outputs alone
    _, _, out = _dag()
    got = pt.generate_numpy(out)(x=XV, y=YV)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, _expected(), rtol=1e-13)
    got = pt.generate_numpy({"out": out})(x=XV, y=YV)
    assert isinstance(got, dict)
    np.testing.assert_allclose(got["out"], _expected(), rtol=1e-13)


def test_inputs_named_like_options_are_inputs():
    names = ("queue", "allocator", "wait_for", "out_host")
    phs = [pt.make_placeholder(n, (2,), np.float64) for n in names]
    out = phs[0] + 2 * phs[1] + 3 * phs[2] + 4 * phs[3]
    values = {n: np.full(2, float(i + 1)) for i, n in enumerate(names)}
    expected = 1 + 2 * 2 + 3 * 3 + 4 * 4
    for prg in (pt.generate_numpy(out), pt.generate_jax(out)):
        np.testing.assert_allclose(np.asarray(prg(**values)), expected)
        _evt, (got,) = prg(None, **values)
        np.testing.assert_allclose(np.asarray(got), expected)


def test_options_that_are_not_inputs_are_accepted_and_ignored():
    _, _, out = _dag()
    prg = pt.generate_numpy(out)
    _evt, (got,) = prg(None, allocator=object(), wait_for=[object()],
                       out_host=False, x=XV, y=YV)
    # a host program's outputs are on the host whatever out_host says
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, _expected(), rtol=1e-13)


def test_an_input_passed_by_position_is_refused():
    _, _, out = _dag()
    for prg in (pt.generate_numpy(out), pt.generate_jax(out)):
        with pytest.raises(UnexpectedInputError, match="ndarray"):
            prg(XV, y=YV)


def test_a_plain_callable_is_not_mistaken_for_a_host_program():
    # the runtime check of a Protocol only sees __call__; the contract is
    # what executors call, so anything without __call__ is refused
    assert not isinstance(object(), BoundProgram)
    assert not isinstance(pt.make_placeholder("x", (2,), np.float64),
                          BoundProgram)
