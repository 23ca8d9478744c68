"""Placing a DAG on several OpenCL devices: a transfer node, a partition by
device, and an executor with per-device queues and events.

* :class:`ToDevice` / :func:`to_device` -- ``to_device(array, device)`` is
  an array equal to *array*, living on *device* (an index into the
  :class:`~pytato_like.runtime.devices.DeviceGroup` the program runs on).
  Its :meth:`~ToDevice.adjoint` is the reverse transfer and its
  :meth:`~ToDevice.normal` (adjoint after forward) the identity: a device
  round trip is lossless. The NumPy target evaluates it as the identity.
* :func:`place_on_devices` -- where every array is computed. An array
  computed from arrays of one device is computed there; from inputs only,
  on the default device; a :class:`ToDevice` on its device. An array
  reading arrays of two devices without a transfer is an error
  (:class:`~pytato_like.diagnostic.DevicePlacementError`). Each array also
  gets a *stage*: the number of transfers on the longest path leading to
  it.
* :func:`find_device_partition` -- :func:`~pytato_like.partition.find_partition`
  with the part of each array ``(stage, device)``: parts on one device
  between two transfers. Ordering parts by stage can never make a cycle.
* :func:`execute_partition_on_devices` -- runs each part on its device's
  compute queue; an array cut between parts on different devices moves with
  a :class:`~pytato_like.runtime.devices.Transfer` on the transfer queue of
  that pair of devices, waiting for the event of the part that computed
  it, and the consuming device's compute queue waits for the copy's event.
  Host inputs are uploaded the same way. The host never blocks, so a
  transfer overlaps with computation on both devices.
* :func:`strip_device_transfers` -- the DAG without :class:`ToDevice` nodes
  (what a single-device program computes).

.. autoclass:: ToDevice
    :members: adjoint, normal
.. autofunction:: to_device
.. autofunction:: place_on_devices
.. autofunction:: find_device_partition
.. autofunction:: strip_device_transfers
.. autofunction:: generate_code_for_device_partition
.. autofunction:: execute_partition_on_devices
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from pytools.tag import Tag

from pytato_like.array import (
    ARRAY,
    VALUE,
    Array,
    DictOfNamedArrays,
    InputArgumentBase,
    NamedArray,
    SizeParam,
    children_of,
    make_dict_of_named_arrays,
)
from pytato_like.diagnostic import (
    DevicePlacementError,
    NotAnArrayError,
    UnknownDeviceError,
)
from pytato_like.scheduler import PartHooks
from pytato_like.target import normalize_outputs

_NO_TAGS: frozenset[Tag] = frozenset()


# {{{ the node

def _check_device(device: Any, what: str) -> int:
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
        :func:`place_on_devices` places it)."""
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
    device = _check_device(device, "target device")
    if source is not None:
        source = _check_device(source, "source device")
    return ToDevice(array, device, source)

# }}}


# {{{ placement

def _describe(node: Array) -> str:
    return f"{type(node).__name__} of shape {node.shape}, dtype {node.dtype}"


def place_on_devices(outputs: Any, default_device: int = 0
                     ) -> dict[int, tuple[int, int]]:
    """``id(array) -> (stage, device)`` for every array of *outputs* (see
    the module docs; inputs get ``(0, default_device)``). One pass over a
    topological order, no recursion."""
    from pytato_like._traversal import topological_order
    default_device = _check_device(default_device, "default device")
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


def find_device_partition(outputs: Any, default_device: int = 0):
    """Partition *outputs* into parts ``(stage, device)`` by
    :func:`place_on_devices`: a :class:`~pytato_like.partition.GraphPartition`
    whose part ids say which device each part runs on (``pid[1]``)."""
    from pytato_like.partition import find_partition
    placed = place_on_devices(outputs, default_device)
    return find_partition(outputs, lambda node: placed[id(node)])


def strip_device_transfers(outputs: Any) -> Any:
    """*outputs* (an array, a dict or a
    :class:`~pytato_like.DictOfNamedArrays`) with every :class:`ToDevice`
    replaced by its operand; *outputs* itself if it has none."""
    from pytato_like._traversal import topological_order
    from pytato_like.transform.copy import rebuild_with
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

# }}}


# {{{ code generation and execution

def generate_code_for_device_partition(partition: Any,
                                       target: str | None = None
                                       ) -> dict[Hashable, Any]:
    """A bound program per part (as
    :func:`~pytato_like.partition.generate_code_for_partition`, which
    removes the transfer nodes, for the loopy target)."""
    from pytato_like.partition import generate_code_for_partition
    return generate_code_for_partition(partition, target)


def _device_group(devices: Any) -> Any:
    from pytato_like.runtime.devices import DeviceGroup
    if isinstance(devices, DeviceGroup):
        return devices
    return DeviceGroup.from_specs(devices)


def execute_partition_on_devices(partition: Any,
                                 prg_per_partition: Mapping[Hashable, Any],
                                 devices: Any,
                                 input_args: Mapping[str, Any] | None = None,
                                 *, recorder: Any = None) -> dict[str, Any]:
    """Run the parts of a :func:`find_device_partition` partition, each on
    the compute queue of its device (``pid[1]``, an index into *devices*:
    a :class:`~pytato_like.runtime.devices.DeviceGroup` or a sequence of
    :class:`~pytato_like.runtime.devices.DeviceSpec` sharing a context).
    Returns every part output by name (the results among them), as
    :func:`~pytato_like.partition.execute_partition` does; results stay on
    the device that computed them.

    Nothing blocks the host: kernels and copies are ordered by events (see
    the module docs). *recorder*, a
    :class:`~pytato_like.runtime.trace.TraceRecorder`, gets a ``"part"``
    record per part and a ``"transfer"`` record per cut array moved
    (enqueue times)."""
    from pytato_like.scheduler import run_parts
    group = _device_group(devices)
    for pid in partition.toposorted_part_ids:
        device = _part_device(pid)
        if not 0 <= device < len(group):
            known = ", ".join(f"{i}: {s.device.name}"
                              for i, s in enumerate(group.specs))
            raise UnknownDeviceError(
                f"part {pid!r} is placed on device {device}, which is not in "
                f"the device group ({known})")
    values, _ = run_parts(partition, prg_per_partition,
                          _DeviceHooks(group, recorder), input_args)
    return values


class _DeviceHooks(PartHooks):
    """The device executor's part of the schedule: each part on its
    device's compute queue, its inputs moved there first (see the module
    docs)."""

    def __init__(self, group: Any, recorder: Any) -> None:
        super().__init__()
        self.group = group
        self.recorder = recorder
        self.where: dict[str, tuple[int, Any]] = {}   # name -> (device, event)
        self.moved: dict[tuple[str, int], Any] = {}   # (name, device) -> array

    def queue_for(self, pid: Hashable) -> Any:
        return self.group.spec(_part_device(pid)).compute_queue

    def prepare_inputs(self, pid: Hashable, inputs: dict[str, Any]) -> None:
        import pyopencl as cl
        import pyopencl.array as cla
        device = _part_device(pid)
        group, moved, recorder = self.group, self.moved, self.recorder
        waits = []
        for name, value in inputs.items():
            src = self.where.get(name)
            if src is None and isinstance(value, np.ndarray):
                # a host input: upload it without blocking the host (a
                # blocking upload would wait for the device's earlier work)
                key = (name, device)
                if key not in moved:
                    moved[key] = group.transfer(device, device)(value)
                inputs[name] = moved[key]
                waits.extend(inputs[name].events)
            elif src is not None and src[0] != device and isinstance(
                    value, cla.Array):
                key = (name, device)
                if key not in moved:
                    rec = None if recorder is None else recorder.record(
                        "transfer", f"{name} {src[0]}->{device}",
                        nbytes=value.nbytes, source=src[0], target=device)
                    moved[key] = group.transfer(src[0], device)(
                        value, wait_for=None if src[1] is None else [src[1]])
                    if rec is not None:
                        rec.complete()
                inputs[name] = moved[key]
                waits.extend(inputs[name].events)
        if waits:
            # the whole part (every launch of its program) waits for them
            cl.enqueue_barrier(self.queue_for(pid), wait_for=waits)
        return None

    def part_running(self, pid: Hashable) -> Any:
        if self.recorder is None:
            return contextlib.nullcontext()
        return self.recorder.part(pid, device=_part_device(pid))

    def part_done(self, pid: Hashable, outputs: Mapping[str, Any],
                  event: Any) -> None:
        device = _part_device(pid)
        for name in outputs:
            self.where[name] = (device, event)


def _part_device(pid: Hashable) -> int:
    try:
        return _check_device(pid[1], f"device of part {pid!r}")
    except (TypeError, IndexError):
        raise UnknownDeviceError(
            f"part id {pid!r} does not name a device; partition with "
            "find_device_partition") from None

# }}}

# vim: foldmethod=marker
