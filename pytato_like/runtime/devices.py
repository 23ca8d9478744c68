"""Devices and transfers between them, with events for pipelining.

* :class:`DeviceSpec` -- one OpenCL device with a *compute* queue (kernels)
  and a *transfer* queue (copies), so copies and kernels can overlap.
* :class:`DeviceGroup` -- devices sharing one OpenCL context (copies between
  them are device-to-device ``enqueue_copy`` calls, no host staging); looks
  devices up by index, :class:`pyopencl.Device` or spec, and keeps one
  transfer queue per (source, target) pair.
* :class:`Transfer` -- moves arrays from a source to a target device. Its
  :meth:`~Transfer.adjoint` is the reverse transfer and its
  :meth:`~Transfer.normal` (adjoint after forward) is the identity, as a
  device round trip is lossless. :meth:`~Transfer.pipelined` splits an
  array into chunks so the transfer of chunk *k+1* overlaps the computation
  on chunk *k*.
* :func:`to_device` -- the one-call form.

Every copy is enqueued without blocking: it waits for the events of the
array it reads, and its event is attached to the array it produces, so
pyopencl operations on the result (on any queue) wait for the data.
Arrays in different contexts are staged through host memory.

Plugging into the DAG
---------------------

This module is the runtime half of a DAG-level transfer. The DAG half is
the IR node :class:`~pytato_like.device_transfer.ToDevice`:
``to_device(array, device)`` (also what :func:`to_device` returns for a
lazy array) is an array node with the shape and dtype of its operand and a
target device index; its ``_mapper_method`` is ``map_to_device``. The NumPy
target evaluates it as the identity. For OpenCL it is a partition
boundary: :func:`~pytato_like.runtime.placement.find_device_partition`
puts producer and consumers in parts on the source and target devices, and
:func:`~pytato_like.runtime.placement.execute_partition_on_devices` calls
:meth:`Transfer.__call__` between them on the :class:`DeviceGroup` queues.
Its adjoint is the reverse transfer, as :meth:`Transfer.adjoint` is here.

.. autoclass:: DeviceSpec
    :members:
.. autoclass:: DeviceGroup
    :members:
.. autoclass:: Transfer
    :members:
    :special-members: __call__
.. autofunction:: to_device
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from pytato_like.array import Array
from pytato_like.device_transfer import to_device as lazy_to_device
from pytato_like.diagnostic import QuantityMismatchError, UnknownDeviceError

if TYPE_CHECKING:
    from typing import TypeAlias

    import pyopencl as cl
    import pyopencl.array as cla

    #: a device of a group: its index, the device or its DeviceSpec
    DeviceRef: TypeAlias = "int | cl.Device | DeviceSpec"


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceSpec:
    """A device and the two queues used on it (both in the same context)."""

    device: cl.Device
    compute_queue: cl.CommandQueue
    transfer_queue: cl.CommandQueue

    @classmethod
    def create(cls, device: cl.Device, context: cl.Context | None = None
               ) -> DeviceSpec:
        """Queues on *device* in *context* (a new one-device context if
        ``None``)."""
        import pyopencl as cl
        if context is None:
            context = cl.Context([device])
        return cls(device, cl.CommandQueue(context, device),
                   cl.CommandQueue(context, device))

    @property
    def context(self) -> cl.Context:
        return self.compute_queue.context

    def __repr__(self) -> str:
        return f"DeviceSpec({self.device.name!r})"


class DeviceGroup:
    """Devices in one shared context, each with a :class:`DeviceSpec`.

    :arg devices: the devices (default: all devices of the first platform
        that has any).
    :arg context: a context holding them (default: a new one).
    """

    def __init__(self, devices: Sequence[cl.Device] | None = None,
                 context: cl.Context | None = None) -> None:
        import pyopencl as cl
        if devices is None:
            if context is not None:
                devices = context.devices
            else:
                devices = next(p.get_devices() for p in cl.get_platforms()
                               if p.get_devices())
        devices = list(devices)
        if context is None:
            context = cl.Context(devices)
        self.context = context
        self.specs = tuple(DeviceSpec.create(d, context) for d in devices)
        self._pair_queues: dict[tuple[int, int], cl.CommandQueue] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_specs(cls, specs: Sequence[DeviceSpec]) -> DeviceGroup:
        """A group of existing :class:`DeviceSpec` objects (their queues are
        used as they are); they must share one context."""
        specs = tuple(specs)
        if not specs or not all(isinstance(s, DeviceSpec) for s in specs):
            raise UnknownDeviceError(
                "a DeviceGroup needs one or more DeviceSpec, got "
                f"{[type(s).__name__ for s in specs]}")
        if any(s.context != specs[0].context for s in specs):
            raise UnknownDeviceError(
                "the DeviceSpecs of a group must share one OpenCL context")
        group = cls.__new__(cls)
        group.context = specs[0].context
        group.specs = specs
        group._pair_queues = {}
        group._lock = threading.Lock()
        return group

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self) -> Iterator[DeviceSpec]:
        return iter(self.specs)

    def index(self, device: DeviceRef) -> int:
        """Position of *device* (index, :class:`pyopencl.Device` or
        :class:`DeviceSpec`) in the group."""
        if isinstance(device, (int, np.integer)):
            if 0 <= device < len(self.specs):
                return int(device)
        else:
            for i, spec in enumerate(self.specs):
                if device is spec or device == spec.device:
                    return i
        known = ", ".join(f"{i}: {s.device.name}" for i, s in enumerate(self.specs))
        name = getattr(getattr(device, "device", device), "name", device)
        raise UnknownDeviceError(
            f"device {name!r} is not in this device group ({known})")

    def spec(self, device: DeviceRef) -> DeviceSpec:
        """The :class:`DeviceSpec` for *device*."""
        return self.specs[self.index(device)]

    def transfer_queue(self, source: DeviceRef, target: DeviceRef
                       ) -> cl.CommandQueue:
        """The queue (on the target device) dedicated to copies from
        *source* to *target*; created on first use, then reused."""
        import pyopencl as cl
        key = (self.index(source), self.index(target))
        with self._lock:
            queue = self._pair_queues.get(key)
            if queue is None:
                queue = self._pair_queues[key] = cl.CommandQueue(
                    self.context, self.specs[key[1]].device)
            return queue

    def transfer(self, source: DeviceRef, target: DeviceRef) -> Transfer:
        """A :class:`Transfer` between two devices of the group."""
        return Transfer(self.spec(source), self.spec(target),
                        self.transfer_queue(source, target))


class Transfer:
    """Moves arrays from *source* to *target*.

    :arg source, target: :class:`DeviceSpec` objects.
    :arg queue: the queue for the copies (default: the target's transfer
        queue).
    """

    def __init__(self, source: DeviceSpec, target: DeviceSpec,
                 queue: cl.CommandQueue | None = None) -> None:
        for what, spec in (("source", source), ("target", target)):
            if not isinstance(spec, DeviceSpec):
                raise UnknownDeviceError(
                    f"transfer {what} must be a DeviceSpec, got "
                    f"{type(spec).__name__} {spec!r}")
        self.source = source
        self.target = target
        self.queue = target.transfer_queue if queue is None else queue

    @property
    def is_identity(self) -> bool:
        return self.source is self.target

    def adjoint(self) -> Transfer:
        """The reverse transfer (target back to source)."""
        return Transfer(self.target, self.source)

    def normal(self) -> Transfer:
        """``adjoint() ∘ self``: a round trip, which is the identity."""
        return Transfer(self.source, self.source)

    def __call__(self, array: cla.Array | np.ndarray,
                 wait_for: Sequence[cl.Event] | None = None) -> cla.Array:
        """*array* (a :class:`pyopencl.array.Array` on the source device, or
        a :class:`numpy.ndarray`) as a new array on the target device, bound
        to its compute queue. Returns without waiting for the copy."""
        import pyopencl as cl
        import pyopencl.array as cla

        if self.is_identity and isinstance(array, cla.Array):
            return array
        if isinstance(array, np.ndarray):
            host = np.ascontiguousarray(array)
            out = cla.empty(self.target.compute_queue, host.shape, host.dtype)
            evt = cl.enqueue_copy(self.queue, cast("cl.Buffer", out.base_data),
                                  host, is_blocking=False, wait_for=wait_for)
            out.add_event(evt)
            return out
        if not isinstance(array, cla.Array):
            raise QuantityMismatchError(
                f"cannot transfer a {type(array).__name__}; expected a "
                "pyopencl.array.Array or numpy.ndarray")
        if not array.flags.c_contiguous:
            raise QuantityMismatchError(
                f"cannot transfer a non-contiguous array of shape {array.shape}")
        out = cla.empty(self.target.compute_queue, array.shape, array.dtype)
        if not array.nbytes:
            return out
        deps = list(array.events) + list(wait_for or [])
        if array.context == self.target.context:
            evt = cl.enqueue_copy(
                self.queue, cast("cl.Buffer", out.base_data),
                cast("cl.Buffer", array.base_data),
                byte_count=array.nbytes, src_offset=array.offset,
                dst_offset=0, wait_for=deps or None)
        else:
            # Events do not cross contexts: stage through the host.
            host = np.empty(array.shape, array.dtype)
            cl.enqueue_copy(self.source.transfer_queue, host,
                            cast("cl.Buffer", array.base_data),
                            src_offset=array.offset, wait_for=deps or None,
                            is_blocking=True)
            evt = cl.enqueue_copy(self.queue, cast("cl.Buffer", out.base_data),
                                  host, is_blocking=False)
        out.add_event(evt)
        return out

    def pipelined(self, array: cla.Array | np.ndarray,
                  compute: Callable[[cla.Array], cla.Array],
                  n_chunks: int = 4, concatenate: bool = True
                  ) -> cla.Array | list[cla.Array]:
        """Transfer *array* in *n_chunks* chunks along axis 0 and apply
        ``compute(chunk)`` to each on the target (the chunk is bound to the
        target's compute queue and carries its copy event, so pyopencl
        kernels on it wait for the copy). All copies are enqueued first on
        the transfer queue; while the device computes on chunk *k*, chunk
        *k+1* is being copied.

        Returns the results concatenated along axis 0 (or the list of
        results if *concatenate* is false)."""
        import pyopencl.array as cla
        n = array.shape[0]
        n_chunks = max(1, min(int(n_chunks), n))
        bounds = np.linspace(0, n, n_chunks + 1).astype(int)
        chunks = [self(array[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
        results = [compute(chunk) for chunk in chunks]
        if not concatenate:
            return results
        return cla.concatenate(results, queue=self.target.compute_queue)


def to_device(array: Array | cla.Array | np.ndarray, target: DeviceRef,
              group: DeviceGroup | None = None,
              source: DeviceRef | None = None) -> Array | cla.Array:
    """*array* copied to *target* (a :class:`DeviceSpec`, or an index or
    :class:`pyopencl.Device` of *group*). The source defaults to the device
    of the array's queue (looked up in *group* when given).

    For a lazy :class:`~pytato_like.Array`, this is the DAG node instead:
    :func:`pytato_like.device_transfer.to_device` (*target* and *source*
    are then device indices)."""
    if isinstance(array, Array):
        if group is not None:
            raise UnknownDeviceError(
                "to_device of a lazy array takes a device index, not a group: "
                "the group is given when the program runs")
        # (device indices for a lazy array)
        return lazy_to_device(array, cast(int, target),
                              cast("int | None", source))
    import pyopencl.array as cla
    if group is not None:
        target = group.spec(target)
    elif not isinstance(target, DeviceSpec):
        raise UnknownDeviceError(
            f"cannot resolve device {target!r} without a DeviceGroup; pass a "
            "DeviceSpec or group=")
    if source is None:
        queue = array.queue if isinstance(array, cla.Array) else None
        if queue is None:
            source = target
        elif group is not None:
            try:
                source = group.spec(queue.device)
            except UnknownDeviceError:
                source = DeviceSpec(queue.device, queue, queue)
        else:
            source = DeviceSpec(queue.device, queue, queue)
    elif group is not None:
        source = group.spec(source)
    source = cast(DeviceSpec, source)  # resolved above
    if (isinstance(array, cla.Array) and source.device == target.device
            and array.context == target.context):
        return array
    queue = None if group is None or source not in group.specs else \
        group.transfer_queue(source, target)
    return Transfer(source, target, queue)(array)
