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

from typing import TYPE_CHECKING, overload

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DictOfNamedArrays,
    NamedArray,
    make_dict_of_named_arrays,
)

# place_on_devices lives beside the node: ToDevice.source asks it
from pytato_like.device_transfer import ToDevice, place_on_devices
from pytato_like.target import normalize_outputs
from pytato_like.transform.copy import rebuild_with

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["place_on_devices", "strip_device_transfers"]


@overload
def strip_device_transfers(outputs: Array) -> Array: ...
@overload
def strip_device_transfers(outputs: DictOfNamedArrays) -> DictOfNamedArrays: ...
@overload
def strip_device_transfers(outputs: Mapping[str, Array]) -> Mapping[str, Array]: ...


def strip_device_transfers(outputs: Array | DictOfNamedArrays
                           | Mapping[str, Array]
                           ) -> Array | DictOfNamedArrays | Mapping[str, Array]:
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
