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

from typing import Any

import numpy as np
from pytools.tag import Tag

from pytato_like.array import ARRAY, VALUE, Array
from pytato_like.diagnostic import NotAnArrayError, UnknownDeviceError

__all__ = ["ToDevice", "to_device"]

_NO_TAGS: frozenset[Tag] = frozenset()


def check_device(device: Any, what: str) -> int:
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
        # the one place an IR node asks the placement transform
        from pytato_like.transform.placement import place_on_devices
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
