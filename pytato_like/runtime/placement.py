"""Running a DAG placed on several OpenCL devices: the device partition and
its executor.

The DAG half lives elsewhere: the transfer node
:class:`~pytato_like.device_transfer.ToDevice` (``to_device(array,
device)``) with the other IR nodes, and the placement transform
(:func:`~pytato_like.transform.placement.place_on_devices`,
:func:`~pytato_like.transform.placement.strip_device_transfers`) with the
other transforms; their names remain importable from here.

* :func:`find_device_partition` -- :func:`~pytato_like.partition.find_partition`
  with the part of each array ``(stage, device)`` from the placement:
  parts on one device between two transfers. Ordering parts by stage can
  never make a cycle.
* :func:`execute_partition_on_devices` -- runs the parts with the part
  scheduler (:func:`~pytato_like.scheduler.run_parts`), each on its
  device's compute queue. Its hooks move data: an array cut between parts
  on different devices moves with a
  :class:`~pytato_like.runtime.devices.Transfer` on the transfer queue of
  that pair of devices, waiting for the event of the part that computed
  it, and the consuming device's compute queue waits for the copy's event.
  Host inputs are uploaded the same way. The host never blocks, so a
  transfer overlaps with computation on both devices.

.. autofunction:: find_device_partition
.. autofunction:: generate_code_for_device_partition
.. autofunction:: execute_partition_on_devices
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

# the node and the placement transform, under their earlier import path
from pytato_like.device_transfer import ToDevice, check_device, to_device
from pytato_like.diagnostic import UnknownDeviceError
from pytato_like.partition import (
    GraphPartition,
    find_partition,
    generate_code_for_partition,
)
from pytato_like.runtime.devices import DeviceGroup, DeviceSpec
from pytato_like.runtime.trace import TraceRecorder
from pytato_like.scheduler import PartHooks, run_parts
from pytato_like.transform.placement import (
    place_on_devices,
    strip_device_transfers,
)

if TYPE_CHECKING:
    import pyopencl as cl
    import pyopencl.array as cla

    from pytato_like.array import Array, DictOfNamedArrays
    from pytato_like.target.program import BoundProgram

__all__ = [
    "ToDevice",
    "execute_partition_on_devices",
    "find_device_partition",
    "generate_code_for_device_partition",
    "place_on_devices",
    "strip_device_transfers",
    "to_device",
]


def find_device_partition(outputs: Array | DictOfNamedArrays | Mapping[str, Array],
                          default_device: int = 0
                          ) -> GraphPartition:
    """Partition *outputs* into parts ``(stage, device)`` by
    :func:`~pytato_like.transform.placement.place_on_devices`: a
    :class:`~pytato_like.partition.GraphPartition` whose part ids say which
    device each part runs on (``pid[1]``)."""
    placed = place_on_devices(outputs, default_device)
    return find_partition(outputs, lambda node: placed[id(node)])


# {{{ code generation and execution

def generate_code_for_device_partition(partition: GraphPartition,
                                       target: str | None = None
                                       ) -> dict[Hashable, BoundProgram]:
    """A bound program per part (as
    :func:`~pytato_like.partition.generate_code_for_partition`, which
    removes the transfer nodes, for the loopy target)."""
    return generate_code_for_partition(partition, target)


def _device_group(devices: DeviceGroup | Sequence[DeviceSpec]) -> DeviceGroup:
    if isinstance(devices, DeviceGroup):
        return devices
    return DeviceGroup.from_specs(devices)


def execute_partition_on_devices(
        partition: GraphPartition,
        prg_per_partition: Mapping[Hashable, BoundProgram],
        devices: DeviceGroup | Sequence[DeviceSpec],
        input_args: Mapping[str, object] | None = None,
        *, recorder: TraceRecorder | None = None) -> dict[str, object]:
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

    def __init__(self, group: DeviceGroup,
                 recorder: TraceRecorder | None) -> None:
        super().__init__()
        self.group = group
        self.recorder = recorder
        # name -> (device, event)
        self.where: dict[str, tuple[int, cl.Event | None]] = {}
        # (name, device) -> array
        self.moved: dict[tuple[str, int], cla.Array] = {}

    def queue_for(self, pid: Hashable) -> cl.CommandQueue:
        return self.group.spec(_part_device(pid)).compute_queue

    def prepare_inputs(self, pid: Hashable, inputs: dict[str, object]) -> None:
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
                waits.extend(moved[key].events)
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
                waits.extend(moved[key].events)
        if waits:
            # the whole part (every launch of its program) waits for them
            cl.enqueue_barrier(self.queue_for(pid), wait_for=waits)
        return None

    def part_running(self, pid: Hashable
                     ) -> contextlib.AbstractContextManager[object]:
        if self.recorder is None:
            return contextlib.nullcontext()
        return self.recorder.part(pid, device=_part_device(pid))

    def part_done(self, pid: Hashable, outputs: Mapping[str, object],
                  event: object) -> None:
        device = _part_device(pid)
        # (the event of a loopy program on a compute queue)
        done = cast("cl.Event | None", event)
        for name in outputs:
            self.where[name] = (device, done)


def _part_device(pid: Hashable) -> int:
    # a device partition's part ids are (stage, device)
    try:
        return check_device(cast("tuple[Hashable, ...]", pid)[1], f"device of part {pid!r}")
    except (TypeError, IndexError):
        raise UnknownDeviceError(
            f"part id {pid!r} does not name a device; partition with "
            "find_device_partition") from None

# }}}

# vim: foldmethod=marker
