"""Device placement (pytato_like.runtime.placement): the ToDevice node, its
adjoint, placement by device and stage, the device partition, and running
parts on several OpenCL devices (two PoCL devices in a subprocess) with
results equal to one device and to NumPy."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import (
    DevicePlacementError,
    NotAnArrayError,
    UnknownDeviceError,
)
from pytato_like.partition import execute_partition, generate_code_for_partition
from pytato_like.runtime import devices
from pytato_like.runtime.placement import (
    ToDevice,
    execute_partition_on_devices,
    find_device_partition,
    place_on_devices,
    strip_device_transfers,
    to_device,
)
from pytato_like.transform import CopyMapper


def three_stage_dag(n=50):
    """x -> y on device 0 -> w on device 1 -> a back on device 0."""
    x = pt.make_placeholder("x", (n,))
    y = pt.sin(x) * 2
    z = to_device(y, 1)
    w = z * z + 1
    back = to_device(w, 0)
    return x, y, z, w, back, {"a": back + y, "b": w}


def reference(xv):
    y = np.sin(xv) * 2
    w = y * y + 1
    return {"a": w + y, "b": w}


# {{{ the node

def test_to_device_is_an_array_like_its_operand():
    x = pt.make_placeholder("x", (3, 4), np.float32)
    t = to_device(x, 1)
    assert isinstance(t, ToDevice) and t.device == 1 and t.array is x
    assert t.shape == x.shape and t.dtype == x.dtype and t.axes == x.axes
    assert t == to_device(x, 1) and hash(t) == hash(to_device(x, 1))
    assert t != to_device(x, 0)
    assert pickle.loads(pickle.dumps(t)) == t
    # generic rewriters handle it through its fields
    assert CopyMapper()(t) is t
    xv = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(pt.generate_numpy(t * 2)(x=xv), xv * 2)


def test_runtime_to_device_of_a_lazy_array_is_the_node():
    x = pt.make_placeholder("x", (3,))
    assert devices.to_device(x, 2) == to_device(x, 2)
    with pytest.raises(UnknownDeviceError, match="device index, not a group"):
        devices.to_device(x, 0, group=object())


@pytest.mark.parametrize("bad", [-1, "gpu1", 1.5, True, None])
def test_bad_device_is_a_typed_error(bad):
    x = pt.make_placeholder("x", (3,))
    with pytest.raises(UnknownDeviceError, match="not a device index"):
        to_device(x, bad)


def test_to_device_needs_an_array():
    with pytest.raises(NotAnArrayError, match="ndarray"):
        to_device(np.ones(3), 1)


def test_adjoint_is_the_reverse_transfer_and_normal_the_identity():
    x, y, z, w, back, _ = three_stage_dag()
    adj = z.adjoint()                    # source found from the DAG
    assert (adj.device, adj.source_device, adj.array) == (0, 1, z)
    assert back.adjoint().device == 1 and back.adjoint().source_device == 0
    g = pt.make_placeholder("g", (50,))
    assert z.adjoint(g) == to_device(g, 0, source=1)
    assert to_device(y, 1, source=3).adjoint().device == 3
    assert z.normal() is y
    xv = np.linspace(0, 1, 50)
    np.testing.assert_array_equal(pt.generate_numpy(adj)(x=xv), np.sin(xv) * 2)

# }}}


# {{{ placement and partition

def test_placement_by_hand():
    x, y, z, w, back, out = three_stage_dag()
    placed = place_on_devices(out)
    assert placed[id(x)] == (0, 0)      # inputs: anywhere
    assert placed[id(y)] == (0, 0)
    assert placed[id(z)] == (1, 1)
    assert placed[id(w)] == (1, 1)
    assert placed[id(back)] == (2, 0)
    # a transfer to the device the array is on is not a new stage
    assert place_on_devices(to_device(y, 0))[id(y)] == (0, 0)
    assert place_on_devices({"s": to_device(to_device(y, 0), 0)})[
        id(y)] == (0, 0)


def test_inputs_are_read_on_every_device_and_default_device():
    x = pt.make_placeholder("x", (4,))
    on1 = to_device(x, 1) + x           # x itself is not placed by users
    assert place_on_devices(on1)[id(on1)] == (0, 1)
    free = x * 3
    assert place_on_devices(free, default_device=2)[id(free)] == (0, 2)


def test_symbolic_shapes_are_not_placed():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,))
    # shape (2*n,): the size expression is a child of both nodes below
    y = to_device(pt.concatenate([x, x]), 1) * 2
    assert any(isinstance(s, pt.Array) for s in y.shape)
    assert place_on_devices(y)[id(y)] == (1, 1)


def test_mixing_devices_without_transfer_is_an_error():
    x = pt.make_placeholder("x", (4,))
    a = to_device(x * 2, 1)
    b = x * 3                            # on device 0
    with pytest.raises(DevicePlacementError,
                       match=r"on device 1 and one on device 0"):
        place_on_devices(a + b)


def test_device_partition_runs_like_numpy():
    x, y, z, w, back, out = three_stage_dag()
    partition = find_device_partition(out)
    assert partition.toposorted_part_ids == [(0, 0), (1, 1), (2, 0)]
    xv = np.random.default_rng(0).standard_normal(50)
    got = execute_partition(partition, generate_code_for_partition(
        partition, "numpy"), None, {"x": xv})
    for k, v in reference(xv).items():
        np.testing.assert_allclose(got[k], v, rtol=1e-14)


def test_strip_removes_every_transfer():
    x, y, z, w, back, out = three_stage_dag()
    stripped = strip_device_transfers(pt.make_dict_of_named_arrays(out))
    from pytato_like._traversal import topological_order
    nodes = topological_order(list(stripped._data.values()))
    assert not any(isinstance(n, ToDevice) for n in nodes)
    yy = y
    ww = yy * yy + 1
    assert stripped["a"].expr == ww + yy and stripped["b"].expr == ww
    assert strip_device_transfers(y) is y


@pytest.fixture(scope="module")
def deep_device_chain():
    """200 000 nodes; device changes every 25 000 steps."""
    x = pt.make_placeholder("x", (3,))
    y = x
    for i in range(100_000):
        y = 0.5 * y + 1.0
        if i % 25_000 == 24_999:
            y = to_device(y, (i // 25_000 + 1) % 2)
    return x, y


def test_deep_chain_placement_and_strip(deep_device_chain):
    x, y = deep_device_chain
    assert place_on_devices(y)[id(y)] == (4, 0)
    stripped = strip_device_transfers(y)
    from pytato_like._traversal import topological_order
    assert not any(isinstance(n, ToDevice)
                   for n in topological_order([stripped]))
    partition = find_device_partition({"y": y})
    assert partition.toposorted_part_ids == [(0, 0), (1, 1), (2, 0), (3, 1),
                                             (4, 0)]

# }}}


# {{{ execution on devices

cl = pytest.importorskip("pyopencl")


def test_part_on_a_missing_device_is_a_typed_error():
    _, _, _, _, _, out = three_stage_dag()
    partition = find_device_partition(out)
    group = devices.DeviceGroup(
        cl.create_some_context(interactive=False).devices[:1])
    with pytest.raises(UnknownDeviceError,
                       match=r"part \(1, 1\) is placed on device 1, which is "
                             r"not in the device group \(0: "):
        execute_partition_on_devices(partition, {}, group, {})


def test_one_device_with_transfers_equals_numpy():
    x = pt.make_placeholder("x", (64,))
    y = to_device(pt.cos(x), 0) * 3
    group = devices.DeviceGroup(
        cl.create_some_context(interactive=False).devices[:1])
    partition = find_device_partition({"y": y})
    xv = np.linspace(-1, 1, 64)
    got = execute_partition_on_devices(
        partition, generate_code_for_partition(partition, "loopy"), group,
        {"x": xv})
    np.testing.assert_allclose(got["y"].get(), np.cos(xv) * 3, rtol=1e-14)


TWO_DEVICE_SCRIPT = r"""
import json
import numpy as np
import pytato_like as pt
from pytato_like.partition import generate_code_for_partition
from pytato_like.runtime.devices import DeviceGroup
from pytato_like.runtime.placement import (
    execute_partition_on_devices, find_device_partition,
    strip_device_transfers, to_device)
from pytato_like.runtime.trace import TraceRecorder

n = 20000
x = pt.make_placeholder("x", (n,))
y = pt.sin(x) * 2                       # device 0
w = to_device(y, 1)
w = w * w + 1                           # device 1
u = pt.exp(-to_device(x, 1))            # device 1, from the input directly
a = to_device(w, 0) + y                 # back on device 0
out = pt.make_dict_of_named_arrays({"a": a, "b": w + u})
partition = find_device_partition(out)
group = DeviceGroup()
xv = np.random.default_rng(0).standard_normal(n)
recorder = TraceRecorder()
got = execute_partition_on_devices(
    partition, generate_code_for_partition(partition, "loopy"), group,
    {"x": xv}, recorder=recorder)
_, one = pt.generate_loopy(strip_device_transfers(out))(
    group.specs[0].compute_queue, x=xv)
same_device = [got[k].queue.device.int_ptr for k in ("a", "b")]
print(json.dumps({
    "n_devices": len(group),
    "distinct": group.specs[0].device.int_ptr != group.specs[1].device.int_ptr,
    "parts": [list(p) for p in partition.toposorted_part_ids],
    "a_on": [s.device.int_ptr for s in group.specs].index(same_device[0]),
    "b_on": [s.device.int_ptr for s in group.specs].index(same_device[1]),
    "a_equal": bool((got["a"].get() == one["a"]).all()),  # NumPy in: NumPy out
    "b_equal": bool((got["b"].get() == one["b"]).all()),
    "a_err": float(np.abs(got["a"].get() - (np.sin(xv) * 2) ** 2 - 1
                          - np.sin(xv) * 2).max()),
    "transfers": sorted(r.args["source"] * 10 + r.args["target"]
                        for r in recorder.records if r.kind == "transfer"),
    "n_part_records": sum(r.kind == "part" for r in recorder.records),
}))
"""


def test_two_devices_equal_one_device(tmp_path):
    script = tmp_path / "two_devices.py"
    script.write_text(TWO_DEVICE_SCRIPT)
    env = dict(os.environ, POCL_DEVICES="pthread pthread")
    proc = subprocess.run([sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n_devices"] == 2 and out["distinct"]
    assert out["parts"] == [[0, 0], [0, 1], [1, 1], [2, 0]]
    assert (out["a_on"], out["b_on"]) == (0, 1)
    assert out["a_equal"] and out["b_equal"]
    assert out["a_err"] < 1e-12
    # y goes to device 1, w comes back to device 0
    assert out["transfers"] == [1, 10]
    assert out["n_part_records"] == 4

# }}}

# vim: foldmethod=marker
