"""Runtime pieces the executors use: halo packing, buffer pools, Bufferizer,
traces, handles, registered receive buffers, devices and device placement."""

from pytato_like.runtime.bufferizer import Bufferizer
from pytato_like.runtime.devices import DeviceGroup, DeviceSpec, Transfer, to_device
from pytato_like.runtime.halo import (
    HaloDataTransformer,
    HaloExchangeSpec,
    QuantityHaloSpec,
)
from pytato_like.runtime.handles import Handle, barrier, wait_all
from pytato_like.runtime.placement import (
    ToDevice,
    execute_partition_on_devices,
    find_device_partition,
    place_on_devices,
    strip_device_transfers,
)
from pytato_like.runtime.pool import BufferPool, get_buffer_pool
from pytato_like.runtime.recv_buffers import ReceiveBufferRegistry
from pytato_like.runtime.trace import (
    Trace,
    TraceRecord,
    TraceRecorder,
    gather_traces,
    merge_traces,
)

__all__ = ["BufferPool", "Bufferizer", "DeviceGroup", "DeviceSpec",
           "HaloDataTransformer",
           "HaloExchangeSpec", "Handle", "QuantityHaloSpec",
           "ReceiveBufferRegistry", "ToDevice", "Trace", "TraceRecord",
           "TraceRecorder", "Transfer", "barrier",
           "execute_partition_on_devices", "find_device_partition",
           "gather_traces", "get_buffer_pool", "merge_traces",
           "place_on_devices", "strip_device_transfers", "to_device",
           "wait_all"]
