"""Devices and transfers (pytato_like.runtime.devices): results on two
devices equal one device; adjoint is the reverse transfer; pipelined
chunks; unknown devices are rejected."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pytato_like.diagnostic import QuantityMismatchError, UnknownDeviceError
from pytato_like.runtime.devices import DeviceGroup, DeviceSpec, Transfer, to_device

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
clmath = pytest.importorskip("pyopencl.clmath")


@pytest.fixture(scope="module")
def group():
    return DeviceGroup(cl.create_some_context(interactive=False).devices)


def compute(chunk):
    """Some device work on an array (pyopencl ops run on chunk.queue)."""
    return clmath.sin(chunk) * 2.0 + chunk


def reference(x):
    return np.sin(x) * 2.0 + x


@pytest.fixture
def x(rng):
    return rng.standard_normal((257, 16))


def test_same_context_transfer_copies_on_the_device(group, x):
    src = group.specs[0]
    other = DeviceSpec.create(src.device, group.context)   # 2nd queue pair
    t = Transfer(src, other)
    a = cla.to_device(src.compute_queue, x)
    b = t(a)
    assert b is not a and b.queue is other.compute_queue
    assert b.base_data is not a.base_data
    np.testing.assert_array_equal(b.get(), x)
    np.testing.assert_array_equal(t.adjoint()(b).get(), x)


def test_cross_context_transfer_stages_through_host(group, x):
    src = group.specs[0]
    elsewhere = DeviceSpec.create(src.device)      # its own context
    assert elsewhere.context != src.context
    a = cla.to_device(src.compute_queue, x)
    b = Transfer(src, elsewhere)(a)
    assert b.context == elsewhere.context
    np.testing.assert_allclose(compute(b).get(), reference(x), rtol=1e-14)


def test_adjoint_reverses_and_normal_is_identity(group, x):
    src = group.specs[0]
    other = DeviceSpec.create(src.device, group.context)
    t = Transfer(src, other)
    assert t.adjoint().source is other and t.adjoint().target is src
    a = cla.to_device(src.compute_queue, x)
    assert t.normal().is_identity and t.normal()(a) is a
    round_trip = t.adjoint()(t(a))
    np.testing.assert_array_equal(round_trip.get(), a.get())


def test_host_array_upload_and_offset_views(group, x):
    spec = group.specs[0]
    other = DeviceSpec.create(spec.device, group.context)
    t = Transfer(spec, other)
    np.testing.assert_array_equal(t(x).get(), x)
    a = cla.to_device(spec.compute_queue, x)
    np.testing.assert_array_equal(t(a[100:150]).get(), x[100:150])


@pytest.mark.parametrize("n_chunks", [1, 3, 8])
def test_pipelined_equals_whole_array(group, x, n_chunks):
    spec = group.specs[0]
    other = DeviceSpec.create(spec.device, group.context)
    a = cla.to_device(spec.compute_queue, x)
    out = Transfer(spec, other).pipelined(a, compute, n_chunks=n_chunks)
    np.testing.assert_array_equal(out.get(), compute(a).get())
    parts = Transfer(spec, other).pipelined(a, compute, n_chunks=n_chunks,
                                            concatenate=False)
    assert len(parts) == n_chunks


def test_to_device_resolves_through_group(group, x):
    a = cla.to_device(group.specs[0].compute_queue, x)
    assert to_device(a, 0, group=group) is a          # already there
    np.testing.assert_array_equal(to_device(x, 0, group=group).get(), x)


def test_unknown_device_is_rejected(group, x):
    a = cla.to_device(group.specs[0].compute_queue, x)
    with pytest.raises(UnknownDeviceError, match=r"device 5 is not in this "
                                                  r"device group \(0: "):
        to_device(a, 5, group=group)
    with pytest.raises(UnknownDeviceError, match="without a DeviceGroup"):
        to_device(a, "gpu1")
    with pytest.raises(UnknownDeviceError, match="must be a DeviceSpec"):
        Transfer(group.specs[0], 1)
    with pytest.raises(UnknownDeviceError):
        group.transfer_queue(0, 1 + len(group))


def test_transfer_rejects_non_arrays(group):
    spec = group.specs[0]
    with pytest.raises(QuantityMismatchError, match="list"):
        Transfer(spec, DeviceSpec.create(spec.device, group.context))([1, 2])


TWO_DEVICE_SCRIPT = r"""
import json
import numpy as np
import pyopencl.array as cla
import pyopencl.clmath as clmath
from pytato_like.diagnostic import UnknownDeviceError
from pytato_like.runtime.devices import DeviceGroup, to_device

def compute(c):
    return clmath.sin(c) * 2.0 + c

g = DeviceGroup()
d0, d1 = g.specs
x = np.random.default_rng(0).standard_normal((1000, 32))
a0 = cla.to_device(d0.compute_queue, x)
single = compute(a0).get()
t = g.transfer(0, 1)
a1 = t(a0)
moved = to_device(a0, d1.device, group=g)
result = {
    "n_devices": len(g),
    "distinct_devices": d0.device.int_ptr != d1.device.int_ptr,
    "on_device_1": a1.queue.device.int_ptr == d1.device.int_ptr,
    "pair_queue_reused": g.transfer_queue(0, 1) is g.transfer_queue(d0, d1),
    "two_equals_one": bool((compute(a1).get() == single).all()),
    "to_device_equal": bool((moved.get() == x).all()),
    "pipelined_equals_one": bool(
        (t.pipelined(a0, compute, n_chunks=5).get() == single).all()),
    "adjoint_round_trip": bool((t.adjoint()(a1).get() == x).all()),
}
try:
    to_device(a0, 2, group=g)
except UnknownDeviceError as exc:
    result["unknown"] = str(exc)
print(json.dumps(result))
"""


def test_two_devices_equal_one_device(tmp_path):
    script = tmp_path / "two_devices.py"
    script.write_text(TWO_DEVICE_SCRIPT)
    env = dict(os.environ, POCL_DEVICES="pthread pthread")
    proc = subprocess.run([sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result.pop("unknown").startswith("device 2 is not in this device group")
    assert result == {"n_devices": 2, "distinct_devices": True,
                      "on_device_1": True, "pair_queue_reused": True,
                      "two_equals_one": True, "to_device_equal": True,
                      "pipelined_equals_one": True, "adjoint_round_trip": True}
