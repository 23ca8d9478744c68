"""ToDevice lives with the IR nodes (pytato_like.device_transfer) and
placement is a transform (pytato_like.transform.placement); the earlier
import paths name the same objects."""

from __future__ import annotations

import numpy as np

import pytato_like as pt
import pytato_like.runtime as runtime
import pytato_like.runtime.placement as old
from pytato_like import device_transfer
from pytato_like.transform import placement


def test_old_and_new_paths_name_the_same_objects():
    assert old.ToDevice is device_transfer.ToDevice is pt.ToDevice \
        is runtime.ToDevice
    assert old.to_device is device_transfer.to_device
    assert old.place_on_devices is placement.place_on_devices
    assert old.strip_device_transfers is placement.strip_device_transfers


def test_transfer_node_through_the_new_paths_matches_numpy():
    x = pt.make_placeholder("x", (5,), np.float64)
    moved = device_transfer.to_device(2 * x, 1)
    out = {"y": moved + 1, "z": device_transfer.to_device(moved * 3, 0)}
    placed = placement.place_on_devices(out)
    assert placed[id(out["y"])] == (1, 1)
    assert placed[id(out["z"])] == (2, 0)
    xv = np.linspace(-1, 1, 5)
    stripped = placement.strip_device_transfers(out)
    for result in (out, stripped):
        got = pt.generate_numpy(result)(x=xv)
        np.testing.assert_allclose(got["y"], 2 * xv + 1, rtol=1e-15)
        np.testing.assert_allclose(got["z"], 6 * xv, rtol=1e-15)
    partition = old.find_device_partition(out)
    values = pt.partition.execute_partition(
        partition, pt.generate_code_for_partition(partition, target="numpy"),
        None, {"x": xv})
    np.testing.assert_allclose(values["z"], 6 * xv, rtol=1e-15)
    # its adjoint is the reverse transfer, found by the placement transform
    assert moved.adjoint().device == 0
