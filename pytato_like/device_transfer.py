"""The device transfer node: an array moved to another device.

:class:`ToDevice` (made by :func:`to_device`) is an IR node like those of
:mod:`pytato_like.array`: ``to_device(array, device)`` is an array equal to
*array*, living on *device* (an index into the
:class:`~pytato_like.runtime.devices.DeviceGroup` the program runs on). Its
:meth:`~ToDevice.adjoint` is the reverse transfer and its
:meth:`~ToDevice.normal` (adjoint after forward) the identity: a device
round trip is lossless.

What it means elsewhere: its index lambda is the identity (a transfer moves
data, it does not change it), so the NumPy target evaluates it as the
identity; :mod:`pytato_like.transform.placement` says where every array is
computed and removes transfers; the device executor
(:mod:`pytato_like.runtime.placement`) turns a transfer into a copy between
parts on two devices.

.. autoclass:: ToDevice
    :members: adjoint, normal, source
.. autofunction:: to_device
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pytools.tag import Tag

from pytato_like._traversal import topological_order
from pytato_like.array import (
    ARRAY,
    VALUE,
    Array,
    InputArgumentBase,
    SizeParam,
    children_of,
    normalize_outputs,
)
from pytato_like.diagnostic import (
    DevicePlacementError,
    NotAnArrayError,
    UnknownDeviceError,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytato_like.array import DictOfNamedArrays

__all__ = ["ToDevice", "to_device"]

_NO_TAGS: frozenset[Tag] = frozenset()


def check_device(device: object, what: str) -> int:
    """*device* as a device number (an integer >= 0); *what* names it in
    the error otherwise."""
    if isinstance(device, bool) or not isinstance(device, (int, np.integer)) \
            or device < 0:
        raise UnknownDeviceError(
            f"{what} {device!r} is not a device index: devices in a DAG are "
            "non-negative indices into the DeviceGroup the program runs on")
    return int(device)


class ToDevice(Array):
    """:attr:`array`, transferred to device :attr:`device`.

    .. attribute:: array
    .. attribute:: device

        Index of the target device in the
        :class:`~pytato_like.runtime.devices.DeviceGroup`.

    .. attribute:: source_device

        Index of the device :attr:`array` lives on, or ``None`` to find it
        from the DAG when needed (:meth:`adjoint`).
    """

    __slots__ = ("array", "device", "source_device")
    _mapper_method = "map_to_device"
    _fields = (("array", ARRAY), ("device", VALUE), ("source_device", VALUE))

    def __init__(self, array: Array, device: int,
                 source_device: int | None = None, axes=None,
                 tags: frozenset[Tag] = _NO_TAGS) -> None:
        self.array = array
        self.device = device
        self.source_device = source_device
        self.shape = array.shape
        self.dtype = array.dtype
        if axes is None:
            axes = array.axes
        self._finish_init(axes, tags)

    def source(self, default_device: int = 0) -> int:
        """The device :attr:`array` lives on (:attr:`source_device`, or as
        :func:`~pytato_like.transform.placement.place_on_devices` places
        it)."""
        if self.source_device is not None:
            return self.source_device
        return place_on_devices({"a": self.array}, default_device)[
            id(self.array)][1]

    def adjoint(self, cotangent: Array | None = None,
                default_device: int = 0) -> ToDevice:
        """The reverse transfer: *cotangent* (an array on :attr:`device`;
        default: this node) moved back to the source device."""
        if cotangent is None:
            cotangent = self
        return to_device(cotangent, self.source(default_device),
                         source=self.device)

    def normal(self) -> Array:
        """Adjoint after forward: the identity, so :attr:`array` itself."""
        return self.array


def to_device(array: Array, device: int, source: int | None = None
              ) -> ToDevice:
    """*array* transferred to device *device* (an index into the
    :class:`~pytato_like.runtime.devices.DeviceGroup` the program will run
    on). *source* names the device *array* lives on if known (needed only
    by :meth:`ToDevice.adjoint`, which otherwise finds it from the DAG)."""
    if not isinstance(array, Array):
        raise NotAnArrayError(
            f"to_device expects an Array, got a {type(array).__name__}")
    device = check_device(device, "target device")
    if source is not None:
        source = check_device(source, "source device")
    return ToDevice(array, device, source)


# {{{ placement

def _describe(node: Array) -> str:
    return f"{type(node).__name__} of shape {node.shape}, dtype {node.dtype}"


def place_on_devices(outputs: Array | DictOfNamedArrays | Mapping[str, Array],
                     default_device: int = 0
                     ) -> dict[int, tuple[int, int]]:
    """``id(array) -> (stage, device)`` for every array of *outputs* (see
    :mod:`pytato_like.transform.placement`, which documents and exports it;
    it is defined here, beside the node, because :meth:`ToDevice.source`
    asks it; inputs get ``(0, default_device)``)."""
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

# }}}
