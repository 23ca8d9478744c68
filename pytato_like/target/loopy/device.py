"""Device transfers and kernel builds of the loopy target: what a bound
program (:mod:`~pytato_like.target.loopy.bound`) and its replays
(:mod:`~pytato_like.target.loopy.replay`) share. A leaf of the target's
modules (pyopencl is imported on use).

NumPy inputs of one call are uploaded together, by one copy
(:class:`PackedUpload`).

.. autoclass:: PackedUpload
.. autofunction:: build_kernel
.. autofunction:: to_device
.. autofunction:: to_device_all
.. autofunction:: to_host
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from pytato_like import kernel_precompile, opencl_build
from pytato_like.target.loopy.report import ProgramStats, compiling

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.target.loopy.codegen import KernelSource

__all__ = ["PACKED_UPLOAD_MIN_INPUTS", "PackedUpload", "build_kernel",
           "to_device", "to_device_all", "to_host"]

# (context, kernel key) -> (kernels namespace, launcher function)
_BUILT: dict[tuple, tuple] = {}


def build_kernel(ctx, source: KernelSource, stats=None):
    """The OpenCL kernels and the launcher of *source* in *ctx*."""
    import pyopencl as cl
    key = (ctx, source.key)
    built = _BUILT.get(key)
    if built is not None:
        return built
    t0 = time.perf_counter()
    # the kernels of the program, and of every program generated since
    # the last build, are built at once (one clBuildProgram)
    with compiling(stats if stats is not None else ProgramStats(),
                   "the OpenCL program"):
        prg = opencl_build.kernel_program(ctx, source)
        elapsed = time.perf_counter() - t0
        if stats is not None:
            stats.record_phase("opencl_build", elapsed)
    objects = prg.all_kernels()
    kernel_precompile.set_dry_arguments(prg, objects)
    # a kernel another rank of the node compiles now: wait for it, then
    # PoCL loads it from its cache
    own = set(opencl_build.kernel_names(source.device_code))
    kernel_precompile.wait_for_other_processes(
        ctx, [k for k in objects if k.function_name in own])
    kernels = SimpleNamespace(**{k.function_name: k for k in objects})
    namespace: dict[str, object] = {}
    import pyopencl.array
    namespace["_lpy_cl"] = cl
    namespace["_lpy_np"] = np
    namespace["_lpy_cl_array"] = pyopencl.array
    exec(compile(source.host_code, f"<loopy host code {source.host_function}>",
                 "exec"), namespace)
    built = (kernels, namespace[source.host_function])
    _BUILT[key] = built
    return built


def to_device(queue, value):
    """*value* (NumPy or pyopencl array) as a contiguous device array
    (booleans viewed as int8, the type kernels store them in)."""
    import pyopencl.array as cla
    if isinstance(value, cla.Array):
        if value.queue is None or value.context != queue.context:
            value = value.get()
        else:
            if not value.flags.c_contiguous:
                value = _strided_to_host(queue, value)
            elif value.offset:
                value = value.copy(queue=queue)
            if isinstance(value, cla.Array):
                if value.dtype == np.bool_:
                    value = value.view(np.int8)
                return value
    value = np.ascontiguousarray(value)
    if value.dtype == np.bool_:
        value = value.view(np.int8)
    return cla.to_device(queue, value)


#: fewest NumPy inputs of one call uploaded together (see
#: :class:`PackedUpload`)
PACKED_UPLOAD_MIN_INPUTS = 4


class PackedUpload:
    """Device copies of many NumPy arrays made by one copy: the arrays are
    packed into one host buffer (each at an offset aligned as the device
    requires of a sub-buffer), copied into one device buffer, and each is
    a sub-buffer of it. A copy per input costs about 0.3 ms each in PoCL
    (a buffer allocation and a blocking copy): 300 ms for a call of a
    program of 1 000 inputs, against about 10 ms so.

    With *reuse* (a caller whose results never include the inputs: a
    replayed call without inputs passed through), a later call with
    arrays of the same shapes and dtypes on the same queue copies into
    the same buffers: the copy is blocking and the queue in order, so
    kernels of the previous call have read them; making the sub-buffers
    again (11 µs each) is then saved too."""

    def __init__(self, reuse: bool = False) -> None:
        self.reuse = reuse
        self._key: tuple | None = None
        self._staging: np.ndarray | None = None
        self._packed: cl.Buffer | None = None
        self._arrays: list = []
        self._offsets: list[int] = []

    def __call__(self, queue, values: list[np.ndarray]) -> list:
        import pyopencl as cl
        arrays = []
        for value in values:
            value = np.ascontiguousarray(value)
            arrays.append(value.view(np.int8) if value.dtype == np.bool_
                          else value)
        key = (queue, tuple((a.shape, a.dtype) for a in arrays))
        fresh = not (self.reuse and key == self._key)
        if fresh:
            self._layout(queue, arrays)
        staging = self._staging
        assert staging is not None
        for value, offset in zip(arrays, self._offsets, strict=True):
            staging[offset:offset + value.nbytes] = value.reshape(-1).view(
                np.uint8)
        assert self._packed is not None
        cl.enqueue_copy(queue, self._packed, staging, is_blocking=True)
        if fresh:
            self._arrays = self._sub_arrays(queue, arrays)
            self._key = key if self.reuse else None
        return self._arrays

    def _layout(self, queue, arrays: list[np.ndarray]) -> None:
        import pyopencl as cl
        align = max(queue.device.mem_base_addr_align // 8, 8)
        self._offsets = []
        total = 0
        for value in arrays:
            self._offsets.append(total)
            total += -(-max(value.nbytes, 1) // align) * align
        self._staging = np.empty(total, np.uint8)
        self._packed = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, total)

    def _sub_arrays(self, queue, arrays: list[np.ndarray]) -> list:
        import pyopencl.array as cla
        packed = self._packed
        assert packed is not None
        # (pyopencl's checked constructor costs 60 µs an array; these
        # shapes, strides and buffers are known to fit)
        return [cla.Array(queue, value.shape, value.dtype,
                          data=packed.get_sub_region(offset, value.nbytes),
                          strides=value.strides, _fast=True, _size=value.size,
                          _context=queue.context, _queue=queue)
                for value, offset in zip(arrays, self._offsets, strict=True)]


def to_device_all(queue, values: list, upload: PackedUpload | None = None
                   ) -> list:
    """:func:`to_device` of each of *values*, the NumPy arrays among them
    uploaded together (by *upload*, or a new :class:`PackedUpload`) when
    there are at least :data:`PACKED_UPLOAD_MIN_INPUTS` (empty arrays
    apart)."""
    host = [k for k, v in enumerate(values)
            if isinstance(v, np.ndarray) and v.size]
    if len(host) < PACKED_UPLOAD_MIN_INPUTS:
        return [to_device(queue, v) for v in values]
    upload = upload if upload is not None else PackedUpload()
    uploaded = dict(zip(host, upload(queue, [values[k] for k in host]),
                        strict=True))
    return [uploaded[k] if k in uploaded else to_device(queue, v)
            for k, v in enumerate(values)]


def _strided_to_host(queue, value) -> np.ndarray:
    """The non-contiguous device array *value* as a NumPy array (pyopencl
    copies only contiguous arrays): the bytes its elements span, read at
    once and viewed with its strides."""
    import pyopencl as cl
    if value.size == 0:
        return np.empty(value.shape, value.dtype)
    extents = [(n - 1) * s for n, s in zip(value.shape, value.strides, strict=True)]
    lo = value.offset + sum(min(0, e) for e in extents)
    hi = value.offset + sum(max(0, e) for e in extents) + value.dtype.itemsize
    raw = np.empty(hi - lo, np.uint8)
    cl.enqueue_copy(queue, raw, value.base_data, src_offset=lo,
                    wait_for=value.events)
    return np.ndarray(value.shape, value.dtype, buffer=raw,
                      offset=value.offset - lo, strides=value.strides).copy()


def to_host(queue, ary, dtype):
    """The device array *ary* copied to the host, as *dtype* (booleans
    live as bytes on the device)."""
    host = ary.get(queue=queue)
    if dtype == np.bool_ and host.dtype != np.bool_:
        host = host.view(np.bool_)
    return host


# vim: foldmethod=marker
