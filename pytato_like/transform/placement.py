"""Device placement as a transform: where every array is computed, and the
DAG without its transfers.

* :func:`place_on_devices` -- where every array is computed. An array
  computed from arrays of one device is computed there; from inputs only,
  on the default device; a :class:`~pytato_like.device_transfer.ToDevice`
  on its device. An array reading arrays of two devices without a transfer
  is an error (:class:`~pytato_like.diagnostic.DevicePlacementError`). Each
  array also gets a *stage*: the number of transfers on the longest path
  leading to it.
* :func:`strip_device_transfers` -- the DAG without
  :class:`~pytato_like.device_transfer.ToDevice` nodes (what a
  single-device program computes).

Both are one pass over a topological order (no recursion). The device
partition built on the placement is
:func:`~pytato_like.runtime.placement.find_device_partition`.

.. autofunction:: place_on_devices
.. autofunction:: strip_device_transfers
"""

from __future__ import annotations

from typing import Any

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DictOfNamedArrays,
    InputArgumentBase,
    NamedArray,
    SizeParam,
    children_of,
    make_dict_of_named_arrays,
)
from pytato_like.device_transfer import ToDevice, check_device
from pytato_like.diagnostic import DevicePlacementError
from pytato_like.target import normalize_outputs
from pytato_like.transform.copy import rebuild_with

__all__ = ["place_on_devices", "strip_device_transfers"]


def _describe(node: Array) -> str:
    return f"{type(node).__name__} of shape {node.shape}, dtype {node.dtype}"


def place_on_devices(outputs: Any, default_device: int = 0
                     ) -> dict[int, tuple[int, int]]:
    """``id(array) -> (stage, device)`` for every array of *outputs* (see
    the module docs; inputs get ``(0, default_device)``)."""
    default_device = check_device(default_device, "default device")
    output_map, _ = normalize_outputs(outputs)
    order = topological_order(list(output_map.values()))
    placed: dict[int, tuple[int, int]] = {}
    # inputs and integer expressions of size parameters (symbolic shapes)
    # may be read on any device: they are not placed by their users
    free: set[int] = set()
    sizes: set[int] = set()
    for node in order:
        if isinstance(node, InputArgumentBase):
            placed[id(node)] = (0, default_device)
            free.add(id(node))
            if isinstance(node, SizeParam):
                sizes.add(id(node))
            continue
        children = children_of(node)
        if (children and node.ndim == 0 and node.dtype.kind in "iu"
                and all(id(k) in sizes for k in children)):
            placed[id(node)] = (0, default_device)
            free.add(id(node))
            sizes.add(id(node))
            continue
        kids = [k for k in children if id(k) not in free]
        if type(node) is ToDevice:
            if kids:
                stage, device = placed[id(kids[0])]
                if device != node.device:
                    stage += 1
            else:
                stage = 0
            placed[id(node)] = (stage, node.device)
            continue
        if not kids:
            placed[id(node)] = (0, default_device)
            continue
        stage, device = placed[id(kids[0])]
        for k in kids[1:]:
            k_stage, k_device = placed[id(k)]
            if k_device != device:
                raise DevicePlacementError(
                    f"{_describe(node)} reads an array on device {device} and "
                    f"one on device {k_device} ({_describe(k)}); move one of "
                    "them with to_device")
            stage = max(stage, k_stage)
        placed[id(node)] = (stage, device)
    return placed


def strip_device_transfers(outputs: Any) -> Any:
    """*outputs* (an array, a dict or a
    :class:`~pytato_like.DictOfNamedArrays`) with every :class:`ToDevice`
    replaced by its operand; *outputs* itself if it has none."""
    output_map, single = normalize_outputs(outputs)
    order = topological_order(list(output_map.values()))
    if not any(type(n) is ToDevice for n in order):
        return outputs
    new: dict[int, Array] = {}
    for node in order:
        if type(node) is ToDevice:
            new[id(node)] = new[id(node.array)]
        elif type(node) is NamedArray:
            new[id(node)] = new[id(node.expr)]   # same value, no container
        else:
            new[id(node)] = rebuild_with(node, lambda c: new[id(c)])
    result = {name: new[id(a)] for name, a in output_map.items()}
    if single:
        return result["_pt_out"]
    if isinstance(outputs, DictOfNamedArrays):
        return make_dict_of_named_arrays(result)
    return result
