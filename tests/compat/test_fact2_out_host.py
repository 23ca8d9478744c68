"""Issue 9, fact 2: where outputs live (loopy's ``out_host`` rule as pytato
applies it) and ``wait_for``.

With ``out_host=None`` outputs are NumPy arrays when every array argument
-- inputs and the data of bound data wrappers -- is a NumPy array or a
scalar, :class:`pyopencl.array.Array` s otherwise; ``out_host=True/False``
forces either. Values are checked against NumPy in every combination.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def _program():
    x = pt.make_placeholder("x", (16,), np.float64)
    s = pt.make_placeholder("s", (), np.float64)
    return pt.cos(x) * s + 1


X = np.linspace(0, 3, 16)
REF = np.cos(X) * 2.5 + 1


def _on_host(out):
    return isinstance(out, np.ndarray)


def _on_device(out, queue):
    return isinstance(out, cla.Array) and out.context == queue.context


def test_numpy_in_numpy_out(queue):
    evt, (out,) = pt.generate_loopy(_program())(queue, x=X, s=2.5)
    assert _on_host(out)
    np.testing.assert_allclose(out, REF, rtol=1e-14)


def test_device_in_device_out(queue):
    x_dev = cla.to_device(queue, X)
    evt, (out,) = pt.generate_loopy(_program())(queue, x=x_dev, s=2.5)
    assert _on_device(out, queue)
    np.testing.assert_allclose(out.get(), REF, rtol=1e-14)


def test_mixed_arguments_stay_on_the_device(queue):
    # pytato's rule: host outputs only when *every* argument is on the host
    x = pt.make_placeholder("x", (16,), np.float64)
    y = pt.make_placeholder("y", (16,), np.float64)
    prg = pt.generate_loopy({"z": x * y})
    evt, out = prg(queue, x=X, y=cla.to_device(queue, X))
    assert _on_device(out["z"], queue)
    np.testing.assert_allclose(out["z"].get(), X * X, rtol=1e-14)


@pytest.mark.parametrize("out_host", [True, False])
@pytest.mark.parametrize("device_input", [True, False])
def test_out_host_forces_where_outputs_live(queue, out_host, device_input):
    x = cla.to_device(queue, X) if device_input else X
    evt, (out,) = pt.generate_loopy(_program())(queue, x=x, s=2.5,
                                                out_host=out_host)
    if out_host:
        assert _on_host(out)
        np.testing.assert_allclose(out, REF, rtol=1e-14)
    else:
        assert _on_device(out, queue)
        np.testing.assert_allclose(out.get(), REF, rtol=1e-14)


def test_bound_data_counts_as_an_argument(queue):
    x = pt.make_placeholder("x", (16,), np.float64)
    host_data = pt.make_data_wrapper(np.arange(16.0), name="w")
    device_data = pt.make_data_wrapper(cla.to_device(queue, np.arange(16.0)),
                                       name="w")
    ref = X + np.arange(16.0)
    # NumPy datum, NumPy input: host
    _, (out,) = pt.generate_loopy(x + host_data)(queue, x=X)
    assert _on_host(out)
    np.testing.assert_allclose(out, ref, rtol=1e-14)
    # NumPy datum, device input: device
    _, (out,) = pt.generate_loopy(x + host_data)(queue, x=cla.to_device(queue, X))
    assert _on_device(out, queue)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-14)
    # device datum, NumPy input: device
    _, (out,) = pt.generate_loopy(x + device_data)(queue, x=X)
    assert _on_device(out, queue)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-14)
    # only bound NumPy data, no inputs: host
    _, (out,) = pt.generate_loopy(host_data * 3)(queue)
    assert _on_host(out)
    np.testing.assert_allclose(out, np.arange(16.0) * 3)


def test_dict_outputs_follow_the_rule_together(queue):
    x = pt.make_placeholder("x", (5,), np.int32)
    result = pt.make_dict_of_named_arrays({"a": x + 1, "b": pt.sum(x)})
    x_in = np.arange(5, dtype=np.int32)
    ref = pt.generate_numpy(result)(x=x_in)
    _, host = pt.generate_loopy(result)(queue, x=x_in)
    _, dev = pt.generate_loopy(result)(queue, x=cla.to_device(queue, x_in))
    for name in ("a", "b"):
        assert _on_host(host[name]) and _on_device(dev[name], queue)
        np.testing.assert_array_equal(host[name], ref[name])
        np.testing.assert_array_equal(dev[name].get(), ref[name])


def test_first_launch_waits_for_wait_for(queue):
    x_dev = cla.to_device(queue, X)
    prg = pt.generate_loopy(_program())
    prg(queue, x=x_dev, s=2.5)  # build the kernels first
    queue.finish()
    gate = cl.UserEvent(queue.context)
    evt, (out,) = prg(queue, x=x_dev, s=2.5, wait_for=[gate])
    # nothing may run before the gate opens
    assert evt.command_execution_status != cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    evt.wait()
    np.testing.assert_allclose(out.get(), REF, rtol=1e-14)


def test_wait_for_orders_after_a_pending_write(queue):
    # the input is written by an enqueued (non-blocking) copy whose event
    # the program waits for: the result sees the written values. Every
    # argument is on the device: a host argument is uploaded with a blocking
    # copy (as loopy does), which would wait behind the gated write.
    x_dev = cla.empty(queue, 16, np.float64)
    s_dev = cla.to_device(queue, np.array(2.5))
    prg = pt.generate_loopy(_program())
    queue.finish()
    gate = cl.UserEvent(queue.context)
    write = cl.enqueue_copy(queue, x_dev.data, X, is_blocking=False,
                            wait_for=[gate])
    evt, (out,) = prg(queue, x=x_dev, s=s_dev, wait_for=[write])
    assert evt.command_execution_status != cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    evt.wait()
    np.testing.assert_allclose(out.get(), REF, rtol=1e-14)
