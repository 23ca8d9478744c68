"""The fast path of repeated calls of a bound loopy program: recorded
launches, replayed.

The full call of a :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`
checks every input against its placeholder, evaluates size expressions,
makes a :class:`pyopencl.array.Array` per output and temporary and looks up
each launch's kernels: about 250 µs for a part program of 20 inputs and 16
outputs, ten times the kernel launches themselves. Most programs are called
again and again with inputs of the same layout (a time step, a part program
of a distributed execution), and then all of that comes out the same.

So the first call with a given *layout* -- per argument, in the order
passed: its name and whether it is a device array (same context as the
queue, no offset), a host array (NumPy, C-contiguous) or an integer size
parameter, with shape, dtype and strides (the value, for a size
parameter); see :func:`layout_key` -- records a :class:`LaunchReplay`:
which buffer goes in which argument of which launch, the constant size
arguments, the outputs' and temporaries' shapes and byte counts and the
peak device memory beyond the inputs. A later call with the same layout
replays it: the inputs' buffers into their slots, outputs and temporaries
from the allocator (outputs wrapped by pyopencl's fast array constructor),
loopy's generated launcher per launch (which sets the kernel arguments and
enqueues). Everything else stays as in the full call: the first launch waits
for *wait_for*, temporaries go back to the allocator after their last
launch, run-time check values are read back and raise, ``out_host`` copies
outputs to the host, the stats get the call and the peak device memory.

Anything else takes the full call (and may record its own replay): another
shape, dtype, strides or size value, an offset or non-contiguous array, an
array of another context, boolean inputs (stored as bytes, viewed on each
call), Python scalars for 0-d inputs, zero-size buffers.

.. autofunction:: layout_key
.. autoclass:: LaunchReplay
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

#: replays kept per program (the most recent layouts)
MAX_REPLAYS = 8

_DEVICE, _HOST, _SIZE = "d", "h", "i"


def layout_key(kwargs: dict[str, Any], queue: Any, context: Any,
               size_params: Any) -> tuple | None:
    """The layout of a call's arguments (see the module docstring), or
    ``None`` when some argument cannot be replayed."""
    import pyopencl.array as cla
    key: list[tuple[Any, ...]] = []
    for name, value in kwargs.items():
        t = type(value)
        if t is cla.Array:
            if (value.offset or value.dtype.kind == "b"
                    or (value.queue is not queue and (
                        value.queue is None or value.context != context))):
                return None
            key.append((name, _DEVICE, value.shape, value.dtype,
                        value.strides))
        elif t is np.ndarray:
            if value.dtype.kind == "b" or not value.flags.c_contiguous:
                return None
            key.append((name, _HOST, value.shape, value.dtype))
        elif name in size_params and isinstance(value, (int, np.integer)):
            key.append((name, _SIZE, int(value)))
        else:
            return None
    return tuple(key)


class LaunchReplay:
    """What one call layout launches, recorded by the full call
    (:meth:`record`) and run again by :meth:`run`.

    Buffers are numbered slots: the inputs' (in the order of the layout),
    the bound data's (constant), the outputs' and the temporaries'.
    """

    def __init__(self) -> None:
        self.plan: Any = None
        #: per argument of the layout: its slot, or None for a size
        self.input_slots: list[int | None] = []
        self.host_inputs: list[bool] = []
        #: slot -> base_data of bound data (None elsewhere)
        self.constants: list[Any] = []
        #: id -> nbytes of bound data arrays (peak memory counts each once)
        self.data_bytes: dict[int, int] = {}
        #: slot -> bound data array (an output may be one)
        self.constant_arrays: dict[int, Any] = {}
        #: (slot, shape, dtype, strides, size, nbytes) per allocated output
        self.new_outputs: list[tuple] = []
        #: output name -> slot
        self.output_slots: dict[str, int] = {}
        #: allocated output slot -> (shape, dtype)
        self.output_layout: dict[int, tuple] = {}
        #: output name -> slot, for outputs a caller may place
        self.placeable: dict[str, int] = {}
        #: per launch: (host function, kernels, sizes, [(arg, slot)],
        #: [(slot, nbytes)] allocated before, [slot] released after)
        self.launches: list[tuple] = []
        #: peak bytes of temporaries on top of inputs, data and outputs
        self.temporary_peak = 0
        self.output_bytes = 0
        #: how many calls replayed it
        self.n_runs = 0

    @classmethod
    def record(cls, program: Any, queue: Any, kwargs: dict[str, Any],
               sizes: dict[str, int]) -> LaunchReplay | None:
        """The replay of *program*'s call with *kwargs* (which the full
        call has just run and checked); ``None`` if it cannot be replayed."""
        from pytato_like.target.loopy.bound import _build_kernel
        from pytato_like.target.loopy.codegen import storage_dtype
        plan = program.plan
        self = cls()
        self.plan = plan

        def concrete(shape: tuple) -> tuple[int, ...]:
            return tuple(sizes[d] if isinstance(d, str) else d for d in shape)

        slots: dict[str, int] = {}

        def slot(buf: str) -> int:
            return slots.setdefault(buf, len(slots))

        for name, value in kwargs.items():
            buf = plan.placeholder_buffers.get(name)
            if buf is None:
                self.input_slots.append(None)       # a size parameter
                self.host_inputs.append(False)
                continue
            spec = plan.buffers[buf]
            # used as passed: no conversion, nothing empty
            if (value.dtype != spec.dtype or value.size == 0
                    or tuple(value.shape) != concrete(spec.shape)):
                return None
            if not isinstance(value, np.ndarray) and not value.flags.c_contiguous:
                return None
            self.input_slots.append(slot(buf))
            self.host_inputs.append(isinstance(value, np.ndarray))
        if len({s for s in self.input_slots if s is not None}) != len(
                plan.placeholder_buffers):
            return None
        data = program._data_buffers(queue)
        for buf, ary in data.items():
            if not ary.size or ary.offset:
                return None
            slot(buf)
            self.data_bytes[id(ary)] = ary.nbytes
        for out_name, buf in plan.outputs.items():
            if buf not in slots:
                spec = plan.buffers[buf]
                shape = concrete(spec.shape)
                dtype = np.dtype(spec.dtype)
                size = int(np.prod(shape, dtype=np.int64))
                if size == 0:
                    return None
                strides = _c_strides(shape, dtype.itemsize)
                self.new_outputs.append((slot(buf), shape, dtype, strides,
                                         size, size * dtype.itemsize))
                self.output_layout[slots[buf]] = (shape, dtype)
                self.output_bytes += size * dtype.itemsize
            self.output_slots[out_name] = slots[buf]
        # outputs that may be computed into a caller's array: those alone in
        # their buffer (not an input, bound data or another output too)
        names_of: dict[int, list[str]] = {}
        for out_name, s in self.output_slots.items():
            names_of.setdefault(s, []).append(out_name)
        self.placeable = {names[0]: s for s, names in names_of.items()
                          if len(names) == 1 and s in self.output_layout}
        allocate_before, release_after = program._temporary_lifetimes()
        live = 0
        for i, launch in enumerate(plan.launches):
            allocated = []
            for name in allocate_before.get(i, ()):
                spec = plan.buffers[name]
                nbytes = int(np.prod(concrete(spec.shape), dtype=np.int64)
                             ) * storage_dtype(spec.dtype).itemsize
                if nbytes == 0:
                    return None
                allocated.append((slot(name), nbytes))
                live += nbytes
            self.temporary_peak = max(self.temporary_peak, live)
            kernels, host = _build_kernel(queue.context,
                                          plan.kernels[launch.kernel],
                                          program.stats)
            constant_args = {}
            buffer_args = []
            for arg, name in launch.bindings.items():
                if name in sizes:
                    constant_args[arg] = sizes[name]
                else:
                    buffer_args.append((arg, slots[name]))
            released = [slots[name] for name in release_after.get(i, ())]
            for name in release_after.get(i, ()):
                spec = plan.buffers[name]
                live -= int(np.prod(concrete(spec.shape), dtype=np.int64)
                            ) * storage_dtype(spec.dtype).itemsize
            self.launches.append((host, kernels, constant_args, buffer_args,
                                  allocated, released))
        self.constants = [None] * len(slots)
        for buf, ary in data.items():
            self.constants[slots[buf]] = ary.base_data
            self.constant_arrays[slots[buf]] = ary
        return self

    def run(self, program: Any, queue: Any, pool: Any, wait_for: Any,
            out_host: bool, kwargs: dict[str, Any], t_start: float,
            placed: dict[str, Any] | None = None):
        """Replay the recorded call with *kwargs* (of the recorded layout);
        returns what the program's call returns. Outputs named in *placed*
        are computed into those arrays where they are outputs of their own
        (see :meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram\
.call_placed`)."""
        import pyopencl.array as cla

        from pytato_like.target.loopy.bound import _to_device
        self.n_runs += 1
        bufs = list(self.constants)
        seen = dict(self.data_bytes)
        arrays = dict(self.constant_arrays)
        for (_name, value), s, host in zip(kwargs.items(), self.input_slots,
                                           self.host_inputs, strict=True):
            if s is None:
                continue
            if host:
                value = _to_device(queue, value)
            arrays[s] = value
            bufs[s] = value.base_data
            seen[id(value)] = value.nbytes
        context = queue.context
        if placed:
            for name, ary in placed.items():
                s = self.placeable.get(name)
                if (s is not None and type(ary) is cla.Array
                        and ary.shape == self.output_layout[s][0]
                        and ary.dtype == self.output_layout[s][1]
                        and not ary.offset and ary.flags.c_contiguous
                        and (ary.queue is queue or ary.context == context)):
                    arrays[s] = ary
                    bufs[s] = ary.base_data
        for s, shape, dtype, strides, size, nbytes in self.new_outputs:
            if bufs[s] is not None:
                continue        # placed
            data = pool(nbytes)
            bufs[s] = data
            arrays[s] = cla.Array(None, shape, dtype, allocator=pool,
                                  data=data, strides=strides, _fast=True,
                                  _size=size, _context=context, _queue=queue)

        def allocate(nbytes: int) -> Any:
            return pool(max(int(nbytes), 1))

        wait_for = list(wait_for) if wait_for else None
        evt = None
        launch_times = []
        perf_counter = time.perf_counter
        for host, kernels, constant_args, buffer_args, allocated, released \
                in self.launches:
            for s, nbytes in allocated:
                bufs[s] = pool(nbytes)
            args = dict(constant_args)
            for arg, s in buffer_args:
                args[arg] = bufs[s]
            t0 = perf_counter()
            evt = host(kernels, queue, wait_for=wait_for, allocator=allocate,
                       **args)
            launch_times.append(perf_counter() - t0)
            wait_for = [evt] if evt is not None else None
            for s in released:
                bufs[s] = None      # back to the pool (the queue is in order)
        program.stats.peak_device_bytes = (sum(seen.values()) + self.output_bytes
                                           + self.temporary_peak)
        results = {name: arrays[s] for name, s in self.output_slots.items()}
        return program._finish_call(queue, evt, wait_for, results, out_host,
                                    t_start, launch_times)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    stride = itemsize
    for n in reversed(shape):
        strides.append(stride)
        stride *= max(n, 1)
    return tuple(reversed(strides))
