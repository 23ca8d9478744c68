"""Running a compiled program: :class:`LoopyBoundProgram`.

A bound program holds a :class:`~pytato_like.target.loopy.codegen.ProgramPlan`
(kernels, launches, buffers). Calling it checks and uploads the inputs,
binds data wrappers and size parameters, allocates outputs and the
temporaries that cross kernel boundaries from a memory pool, and runs each
launch through the Python launcher loopy generated for its kernel. The
kernels are built once per context, together with those of the other
programs generated since the last build (one ``clBuildProgram``, see
:func:`~pytato_like.target.loopy.cache.kernel_program`).

.. autoclass:: LoopyBoundProgram
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import numpy as np

from pytato_like.target import BoundProgram, check_input_value
from pytato_like.target.loopy.codegen import KernelSource, ProgramPlan, storage_dtype

# context -> memory pool (one per context, shared by all programs)
_POOLS: dict[Any, Any] = {}
# (context, kernel key) -> (kernels namespace, launcher function)
_BUILT: dict[tuple, tuple] = {}


def _pool(queue):
    import pyopencl.tools as cl_tools
    ctx = queue.context
    pool = _POOLS.get(ctx)
    if pool is None:
        pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
        _POOLS[ctx] = pool
    return pool


def _build_kernel(ctx, source: KernelSource, stats=None):
    """The OpenCL kernels and the launcher of *source* in *ctx*."""
    import pyopencl as cl
    key = (ctx, source.key)
    built = _BUILT.get(key)
    if built is not None:
        return built
    from pytato_like.target.loopy import cache
    from pytato_like.target.loopy.report import ProgramStats, compiling
    t0 = time.perf_counter()
    # the kernels of the program, and of every program generated since
    # the last build, are built at once (one clBuildProgram)
    with compiling(stats if stats is not None else ProgramStats(),
                   "the OpenCL program"):
        prg = cache.kernel_program(ctx, source)
        elapsed = time.perf_counter() - t0
        if stats is not None:
            stats.record_phase("opencl_build", elapsed)
    kernels = SimpleNamespace(**{k.function_name: k for k in prg.all_kernels()})
    namespace: dict[str, Any] = {}
    import pyopencl.array
    namespace["_lpy_cl"] = cl
    namespace["_lpy_np"] = np
    namespace["_lpy_cl_array"] = pyopencl.array
    exec(compile(source.host_code, f"<loopy host code {source.host_function}>",
                 "exec"), namespace)
    built = (kernels, namespace[source.host_function])
    _BUILT[key] = built
    return built


def _to_device(queue, value):
    """*value* (NumPy or pyopencl array) as a contiguous device array
    (booleans viewed as int8, the type kernels store them in)."""
    import pyopencl.array as cla
    if isinstance(value, cla.Array):
        if value.queue is None or value.context != queue.context:
            value = value.get()
        else:
            if not value.flags.c_contiguous or value.offset:
                value = value.copy(queue=queue)
                if not value.flags.c_contiguous:
                    value = value.get()
            if isinstance(value, cla.Array):
                if value.dtype == np.bool_:
                    value = value.view(np.int8)
                return value
    value = np.ascontiguousarray(value)
    if value.dtype == np.bool_:
        value = value.view(np.int8)
    return cla.to_device(queue, value)


class LoopyBoundProgram(BoundProgram):
    """A program compiled to OpenCL through loopy.

    ``prg(queue, **inputs)`` returns ``(event, outputs)``: a dict of
    :class:`pyopencl.array.Array` for a
    :class:`~pytato_like.DictOfNamedArrays` result, one array for an
    :class:`~pytato_like.Array` result.

    .. attribute:: plan

        The :class:`~pytato_like.target.loopy.codegen.ProgramPlan`.

    .. autoattribute:: source
    .. autoattribute:: program
    .. attribute:: stats

        A :class:`~pytato_like.target.loopy.report.ProgramStats` with
        compile phase times and per-call launch times.
    """

    def __init__(self, plan: ProgramPlan, inputs, data_wrappers, single_output: bool,
                 outputs, options: dict, stats) -> None:
        self.plan = plan
        self.inputs = inputs
        self.data_wrappers = data_wrappers
        self.single_output = single_output
        self._outputs = outputs
        self.options = options
        self.stats = stats
        self._device_data: dict[Any, list] = {}
        self._translation_units = None

    # {{{ inspection

    @property
    def source(self) -> str:
        """The OpenCL C source of all kernels of the program."""
        return "\n\n".join(k.device_code for k in self.plan.kernels)

    def get_source(self) -> str:
        return self.source

    @property
    def program(self):
        """The loopy translation unit (the first kernel's, for programs of
        several chunks see :attr:`programs`)."""
        programs = self.programs
        return programs[0] if programs else None

    @property
    def programs(self) -> list:
        """The loopy translation units of all distinct kernels (rebuilt on
        demand when the plan came from the cache)."""
        if self._translation_units is None:
            from pytato_like.target.loopy.codegen import _Builder
            builder = _Builder(self._outputs, dict(self.options))
            builder.build()
            self._translation_units = builder.translation_units
        return self._translation_units

    # }}}

    def _data_buffers(self, queue) -> dict[str, Any]:
        ctx = queue.context
        bufs = self._device_data.get(ctx)
        if bufs is None:
            bufs = {}
            for name, dw in zip(self.plan.data_wrapper_buffers, self.data_wrappers,
                                strict=True):
                bufs[name] = _to_device(queue, dw.data)
            self._device_data[ctx] = bufs
        return bufs

    def __call__(self, queue, *args, allocator=None, **kwargs):
        import pyopencl.array as cla
        if args:
            from pytato_like.diagnostic import UnexpectedInputError
            raise UnexpectedInputError(
                f"inputs must be passed by name; got {len(args)} positional "
                "argument(s)")
        t_start = time.perf_counter()
        plan = self.plan
        values = self.inputs.check_and_convert(kwargs, _as_checked_value)
        sizes: dict[str, int] = {name: int(values[name])
                                 for name in plan.size_params}
        for name, expr in plan.derived_sizes.items():
            from pymbolic import evaluate
            sizes[name] = int(evaluate(expr, sizes))

        def concrete(shape):
            return tuple(sizes[d] if isinstance(d, str) else d for d in shape)

        # the caller's allocator (e.g. the distributed executor's pool) when
        # given, so intermediates and communication buffers share one pool
        pool = allocator if allocator is not None else _pool(queue)
        buffers: dict[str, Any] = {}
        for name, ph in self.inputs.placeholders.items():
            value = values[name]
            buf = plan.placeholder_buffers[name]
            check_input_value(value, ph, concrete(plan.buffers[buf].shape))
            buffers[buf] = _to_device(queue, value)
        buffers.update(self._data_buffers(queue))
        results = {}
        for out_name, buf_name in plan.outputs.items():
            spec = plan.buffers[buf_name]
            if buf_name not in buffers:
                # booleans are allocated as such: kernels see their bytes
                ary = cla.empty(queue, concrete(spec.shape), spec.dtype,
                                allocator=pool)
                buffers[buf_name] = ary
            results[out_name] = buffers[buf_name]
        for name, spec in plan.buffers.items():
            if spec.kind == "temporary" and name not in buffers:
                buffers[name] = cla.empty(queue, concrete(spec.shape),
                                          storage_dtype(spec.dtype), allocator=pool)

        def allocate(nbytes):
            return pool(max(int(nbytes), 1))

        dummy = None
        evt = None
        wait_for = None
        launch_times = []
        for launch in plan.launches:
            source = plan.kernels[launch.kernel]
            kernels, host = _build_kernel(queue.context, source, self.stats)
            kwargs_k = {}
            for arg, name in launch.bindings.items():
                if name in sizes:
                    kwargs_k[arg] = sizes[name]
                    continue
                ary = buffers[name]
                data = ary.base_data if ary.size else None
                if data is None:
                    if dummy is None:
                        dummy = pool(8)
                    data = dummy
                kwargs_k[arg] = data
            t0 = time.perf_counter()
            evt = host(kernels, queue, wait_for=wait_for, allocator=allocate,
                       **kwargs_k)
            wait_for = [evt] if evt is not None else None
            launch_times.append(time.perf_counter() - t0)
        for out_name, ary in results.items():
            if ary.dtype == np.int8 and plan.buffers[
                    plan.outputs[out_name]].dtype == np.bool_:
                results[out_name] = ary.view(np.bool_)  # an input passed through
        self.stats.record_call(time.perf_counter() - t_start, launch_times)
        if evt is None:
            import pyopencl as cl
            evt = cl.enqueue_marker(queue)
        if self.single_output:
            return evt, results["_pt_out"]
        return evt, results


def _as_checked_value(value, ph):
    """Input values are checked against the placeholder; NumPy scalars
    convert for 0-d inputs (as the NumPy target does)."""
    import pyopencl.array as cla
    if isinstance(value, cla.Array):
        return value
    from pytato_like.target import scalar_input_as_placeholder_dtype
    return scalar_input_as_placeholder_dtype(np.asarray(value), ph)
