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
peak device memory beyond the inputs -- once its inputs are checked,
before anything is launched -- and runs it; a later call with the same
layout replays it: the inputs' buffers into their slots, outputs and
temporaries from the allocator, and per launch the kernel enqueues
loopy's generated launcher would make.
What a launcher does is found once, by :func:`capture_launcher` running its
code on stand-ins; a replay then sets the kernel arguments and enqueues
directly (a third of the launcher's cost), or calls the launcher itself if
the capture refused. Outputs are copies of a template array recorded with
the replay (the buffer, queue and allocator swapped in), four times cheaper
than pyopencl's constructor. The replay run last is tried first, its layout
compared argument by argument without building a key. Everything else
stays as in the full call: the first launch waits for *wait_for*,
temporaries go back to the allocator after their last launch, run-time
check values are read back and raise, ``out_host`` copies outputs to the
host, the stats get the call and the peak device memory.

Anything else takes the full call (and may record its own replay): another
shape, dtype, strides or size value, an offset or non-contiguous array, an
array of another context, boolean inputs (stored as bytes, viewed on each
call), Python scalars for 0-d inputs, zero-size buffers.

.. autofunction:: layout_key
.. autoclass:: LaunchReplay
.. autoclass:: FrozenLaunches
.. autoclass:: KeptOutputs
.. autodata:: FROZEN_TEMPORARY_BYTES
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import numpy as np
from pytato_like.target.loopy.plan import storage_dtype
from pytato_like.kernel_precompile import kernel_object
from pytato_like.target.loopy.device import PackedUpload, build_kernel, to_device_all

if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Collection, Sequence

    import pyopencl as cl
    import pyopencl.array as cla
    from pyopencl.tools import MemoryPool

    from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
    from pytato_like.target.loopy.plan import ProgramPlan

    #: a device buffer: one of bound data or from a pool
    Buffer = cl.MemoryObjectHolder | cl.SVMPointer

#: replays kept per program (the most recent layouts)
MAX_REPLAYS = 8

#: the attributes of a pyopencl array (what a replay copies to make its
#: outputs); another set, from another pyopencl, disables replays
_ARRAY_STATE = frozenset({"_flags", "allocator", "base_data", "context",
                          "dtype", "events", "nbytes", "offset", "queue",
                          "shape", "size", "strides"})
#: the buffer of an array state recorded as a template
_NO_DATA = object()

_DEVICE, _HOST, _SIZE = "d", "h", "i"


def layout_key(kwargs: dict[str, Any], queue: cl.CommandQueue,
               context: cl.Context, size_params: Collection[str]
               ) -> tuple | None:
    """The layout of a call's arguments (see the module docstring), or
    ``None`` when some argument cannot be replayed."""
    import pyopencl.array as cla
    key: list[tuple[object, ...]] = []
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
        self.plan: ProgramPlan | None = None
        #: per argument of the layout: its slot, or None for a size
        self.input_slots: list[int | None] = []
        self.host_inputs: list[bool] = []
        #: slot -> base_data of bound data (None elsewhere)
        self.constants: list[Buffer | None] = []
        #: id -> nbytes of bound data arrays (peak memory counts each once)
        self.data_bytes: dict[int, int] = {}
        #: slot -> bound data array (an output may be one)
        self.constant_arrays: dict[int, cla.Array] = {}
        #: (index among the array arguments, slot) of inputs that are
        #: outputs too
        self.passed_through: list[tuple[int, int]] = []
        self.any_host = False
        #: (slot, state of its pyopencl array but the buffer, queue,
        #: allocator and events, nbytes) per allocated output
        self.new_outputs: list[tuple] = []
        self.array_class: type[cla.Array] | None = None
        #: the layout recorded (see :func:`layout_key`)
        self.layout: tuple = ()
        #: the queue of the last call, and per argument (name, slot,
        #: layout) for :meth:`run_if_same_layout` on it
        self.queue: cl.CommandQueue | None = None
        self.checks: list[tuple[str, int | None, object]] = []
        #: the peak device memory of a call whose inputs are distinct arrays
        self.peak_bytes = 0
        #: output name -> slot
        self.output_slots: dict[str, int] = {}
        #: allocated output slot -> (shape, dtype)
        self.output_layout: dict[int, tuple] = {}
        #: output name -> slot, for outputs a caller may place
        self.placeable: dict[str, int] = {}
        #: output name -> the caller's array last placed there (checked)
        self.placed_ok: dict[str, cla.Array] = {}
        #: per launch: (host function, kernels, sizes, [(arg, slot)],
        #: [(slot, nbytes)] allocated before, [slot] released after,
        #: its captured steps or None: see :func:`capture_launcher`)
        self.launches: list[tuple] = []
        #: peak bytes of temporaries on top of inputs, data and outputs
        self.temporary_peak = 0
        self.output_bytes = 0
        #: how many calls replayed it
        self.n_runs = 0
        #: the upload of host inputs (see
        #: :class:`~pytato_like.target.loopy.device.PackedUpload`)
        self.upload: PackedUpload | None = None
        #: the frozen form of this replay (see :class:`FrozenLaunches`):
        #: ``None`` not made yet, ``False`` it cannot be made
        self.frozen: FrozenLaunches | Literal[False] | None = None

    @classmethod
    def record(cls, program: BoundPyOpenCLProgram, queue: cl.CommandQueue,
               kwargs: dict[str, Any],
               sizes: dict[str, int], layout: tuple) -> LaunchReplay | None:
        """The replay of *program*'s call with *kwargs* (which the full
        call has just run and checked; *layout* is their
        :func:`layout_key`); ``None`` if it cannot be replayed."""
        import pyopencl.array as cla

        plan = program.plan
        self = cls()
        self.plan = plan
        self.array_class = cla.Array

        def concrete(shape: tuple) -> tuple[int, ...]:
            return tuple(sizes[d] if isinstance(d, str) else d for d in shape)

        # (shape, dtype) -> bytes: a time loop's temporaries share a few
        layout_bytes: dict[tuple, int] = {}

        def stored_bytes(spec) -> int:
            key = (spec.shape, spec.dtype)
            nbytes = layout_bytes.get(key)
            if nbytes is None:
                # (math.prod: np.prod costs ~3 µs a call)
                nbytes = layout_bytes[key] = (
                    math.prod(concrete(spec.shape))
                    * storage_dtype(spec.dtype).itemsize)
            return nbytes

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
            self.peak_bytes += value.nbytes
        if len({s for s in self.input_slots if s is not None}) != len(
                plan.placeholder_buffers):
            return None
        data = program._data_buffers(queue)
        for buf, ary in data.items():
            if not ary.size or ary.offset:
                return None
            slot(buf)
            self.data_bytes[id(ary)] = ary.nbytes
            self.peak_bytes += ary.nbytes
        for out_name, buf in plan.outputs.items():
            if buf not in slots:
                spec = plan.buffers[buf]
                shape = concrete(spec.shape)
                dtype = np.dtype(spec.dtype)
                size = math.prod(shape)
                if size == 0:
                    return None
                strides = _c_strides(shape, dtype.itemsize)
                template = cla.Array(None, shape, dtype, data=_NO_DATA,
                                     strides=strides, _fast=True, _size=size,
                                     _context=queue.context, _queue=queue)
                state = dict(template.__dict__)
                if set(state) != _ARRAY_STATE:
                    return None     # another pyopencl: no copies of arrays
                self.new_outputs.append((slot(buf), state,
                                         size * dtype.itemsize))
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
        # per form of launch -- its kernel, and per argument the size it
        # takes or None for a buffer (a time loop's steps share a few) --
        # the kernels, launcher, constant arguments, buffer argument names
        # and captured steps (see capture_launcher), found once
        forms: dict[tuple, tuple] = {}
        for i, launch in enumerate(plan.launches):
            allocated = []
            for name in allocate_before.get(i, ()):
                nbytes = stored_bytes(plan.buffers[name])
                if nbytes == 0:
                    return None
                allocated.append((slot(name), nbytes))
                live += nbytes
            self.temporary_peak = max(self.temporary_peak, live)
            bindings = launch.bindings
            form = (launch.kernel, *[(arg, name if name in sizes else None)
                                     for arg, name in bindings.items()])
            known = forms.get(form)
            if known is None:
                kernels, host = build_kernel(queue.context,
                                              plan.kernels[launch.kernel],
                                              program.stats)
                constant_args = {arg: sizes[name]
                                 for arg, name in bindings.items()
                                 if name in sizes}
                names = [arg for arg, name in bindings.items()
                         if name not in sizes]
                # (captured with each buffer argument's position as its
                # slot: each launch puts its own slots in)
                known = forms[form] = (
                    kernels, host, constant_args, names,
                    capture_launcher(host, kernels, constant_args,
                                     list(zip(names, range(len(names))))))
            kernels, host, constant_args, names, steps = known
            buffer_slots = [slots[name] for name in bindings.values()
                            if name not in sizes]
            released = [slots[name] for name in release_after.get(i, ())]
            for name in release_after.get(i, ()):
                live -= stored_bytes(plan.buffers[name])
            self.launches.append((host, kernels, constant_args,
                                  list(zip(names, buffer_slots)),
                                  allocated, released,
                                  _slotted(steps, buffer_slots)))
        self.peak_bytes += self.output_bytes + self.temporary_peak
        self.layout = layout
        self._check_for(queue)
        self.any_host = any(self.host_inputs)
        output_slots = set(self.output_slots.values())
        array_slots = [s for s in self.input_slots if s is not None]
        self.passed_through = [(i, s) for i, s in enumerate(array_slots)
                               if s in output_slots]
        # (the uploaded inputs stay inside the call unless passed through)
        self.upload = PackedUpload(reuse=not self.passed_through)
        self.constants = [None] * len(slots)
        for buf, ary in data.items():
            self.constants[slots[buf]] = ary.base_data
            self.constant_arrays[slots[buf]] = ary
        return self

    def run(self, program: BoundPyOpenCLProgram, queue: cl.CommandQueue,
            pool: MemoryPool, wait_for: Sequence[cl.Event] | None,
            out_host: bool, kwargs: dict[str, Any], t_start: float,
            placed: dict[str, cla.Array] | None = None, *,
            counted: bool = True):
        """Replay the recorded call with *kwargs* (of the recorded layout:
        :func:`layout_key` said so); returns what the program's call
        returns (*counted* false: the call that recorded it, counted as a
        full call). Outputs named in *placed* are computed into those arrays
        where they are outputs of their own (see
        :meth:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram\
.__call__`, ``placed_outputs``)."""
        if queue is not self.queue:
            self._check_for(queue)
        bufs = self.constants[:]
        values = []
        if self.any_host:
            passed = [(value, s) for value, s in zip(
                kwargs.values(), self.input_slots, strict=True)
                if s is not None]
            # (device arrays come back as they are)
            for value, (_, slot) in zip(to_device_all(
                    queue, [v for v, _ in passed], self.upload), passed,
                    strict=True):
                values.append(value)
                bufs[slot] = value.base_data
        else:
            for value, s in zip(kwargs.values(), self.input_slots,
                                strict=True):
                if s is not None:
                    values.append(value)
                    bufs[s] = value.base_data
        if counted:
            self.n_runs += 1
        return self._run(program, queue, pool, wait_for, out_host, bufs,
                         values, t_start, placed)

    def run_if_same_layout(self, program: BoundPyOpenCLProgram,
                           queue: cl.CommandQueue, pool: MemoryPool,
                           wait_for: Sequence[cl.Event] | None,
                           out_host: bool,
                           kwargs: dict[str, Any], t_start: float,
                           placed: dict[str, cla.Array] | None = None):
        """:meth:`run`, if *kwargs* have the recorded layout, checked
        against the record directly (no :func:`layout_key` to build and
        hash) -- device arrays of this :attr:`queue` and sizes only;
        ``None`` (nothing done) otherwise."""
        bound = self.bind_same_layout(queue, kwargs)
        if bound is None:
            return None
        self.n_runs += 1
        return self._run(program, queue, pool, wait_for, out_host, *bound,
                         t_start, placed)

    def run_frozen(self, program: BoundPyOpenCLProgram,
                   queue: cl.CommandQueue, pool: MemoryPool,
                   kwargs: dict[str, Any],
                   placed: dict[str, cla.Array] | None
                   ) -> KeptOutputs | None:
        """The call with *kwargs* through this replay's frozen form (made
        now if it has none and can have one, made again if the inputs'
        layout changed): its outputs, or ``None`` (nothing ran) if it
        cannot be frozen or *kwargs* do not fit."""
        frozen = self.frozen
        if frozen is False:
            return None
        if frozen is not None:
            outputs = frozen(queue, kwargs)
            if outputs is not None:
                return outputs
            self.frozen = None              # another layout or queue: thaw
        if not FrozenLaunches.can_freeze(program, queue, self):
            self.frozen = False
            return None
        made = FrozenLaunches.freeze(program, self, queue, pool, kwargs,
                                     placed or {})
        if made is None:
            return None
        outputs = made(queue, kwargs)
        if outputs is not None:
            self.frozen = made
        return outputs

    def bind_same_layout(self, queue: cl.CommandQueue,
                         kwargs: dict[str, Any]
                         ) -> tuple[list[Buffer | None], list[cla.Array]
                                    ] | None:
        """The slots' buffers with *kwargs*'s put in, and the device arrays
        passed (in order), if *kwargs* have the recorded layout on *queue*;
        ``None`` otherwise."""
        if queue is not self.queue or len(kwargs) != len(self.checks):
            return None
        array_class = self.array_class
        bufs = self.constants[:]
        values = []
        for (name, value), (key_name, s, layout) in zip(
                kwargs.items(), self.checks, strict=True):
            if name != key_name:
                return None
            # (fits_layout, inlined: a call per argument costs 0.4-0.8 µs
            # of a 16 µs call of a 16-input part program)
            if s is None:
                if not (isinstance(value, (int, np.integer))
                        and value == layout):
                    return None
                continue
            # (shape, dtype, strides, offset, queue); a tuple compares its
            # items by identity first
            if type(value) is not array_class or (
                    value.shape, value.dtype, value.strides, value.offset,
                    value.queue) != layout:
                return None
            values.append(value)
            bufs[s] = value.base_data
        return bufs, values

    def _check_for(self, queue: cl.CommandQueue) -> None:
        """What :meth:`run_if_same_layout` compares, for calls on *queue*
        (device inputs of that queue, as outputs of a replay are)."""
        self.queue = queue
        self.checks = []
        if self.any_host:
            return
        for (name, kind, *layout), s in zip(self.layout, self.input_slots,
                                            strict=True):
            if kind == _DEVICE:
                shape, dtype, strides = layout
                self.checks.append((name, s, (shape, dtype, strides, 0,
                                              queue)))
            else:
                self.checks.append((name, None, layout[0]))

    def _run(self, program: BoundPyOpenCLProgram, queue: cl.CommandQueue,
             pool: MemoryPool, wait_for: Sequence[cl.Event] | None,
             out_host: bool, bufs: list[Buffer | None],
             values: list[cla.Array], t_start: float,
             placed: dict[str, cla.Array] | None):
        """The replay, the inputs' buffers in *bufs* (the device arrays
        *values*)."""
        arrays = self.constant_arrays.copy()
        for i, s in self.passed_through:
            arrays[s] = values[i]
        # peak memory: inputs (each array once), data, outputs, temporaries
        ids = set(map(id, values))
        if len(ids) == len(values) and ids.isdisjoint(self.data_bytes):
            peak = self.peak_bytes
        else:
            seen = dict(self.data_bytes)
            for value in values:
                seen[id(value)] = value.nbytes
            peak = (sum(seen.values()) + self.output_bytes
                    + self.temporary_peak)
        if placed:
            self.place(placed, queue, bufs, arrays)
        self.allocate_outputs(queue, pool, bufs, arrays)

        wait_for = list(wait_for) if wait_for else None
        evt = None
        launch_times = []
        perf_counter = time.perf_counter
        for host, kernels, constant_args, buffer_args, allocated, released, \
                direct in self.launches:
            for s, nbytes in allocated:
                bufs[s] = pool(nbytes)
            t0 = perf_counter()
            if direct is not None:
                evt = _launch(direct, queue, bufs, wait_for)
            else:
                args = dict(constant_args)
                for arg, s in buffer_args:
                    args[arg] = bufs[s]
                evt = host(kernels, queue, wait_for=wait_for,
                           allocator=_Allocate(pool), **args)
            launch_times.append(perf_counter() - t0)
            wait_for = [evt] if evt is not None else None
            for s in released:
                bufs[s] = None      # back to the pool (the queue is in order)
        program.stats.peak_device_bytes = peak
        results = {name: arrays[s] for name, s in self.output_slots.items()}
        return program._finish_call(queue, evt, wait_for, results, out_host,
                                    t_start, launch_times)

    def allocate_outputs(self, queue: cl.CommandQueue, pool: MemoryPool,
                         bufs: list[Buffer | None],
                         arrays: dict[int, cla.Array]) -> None:
        """Allocate the outputs not placed (their slots in *bufs* empty)
        from *pool*: buffers in *bufs*, arrays in *arrays*."""
        new = _new_object
        array_class = self.array_class
        assert array_class is not None      # (set by record)
        for s, template, nbytes in self.new_outputs:
            if bufs[s] is not None:
                continue        # placed
            data = bufs[s] = pool(nbytes)
            # a copy of the record's array with this call's buffer, queue
            # and allocator (pyopencl's own fast constructor costs 4x more)
            ary = new(array_class)
            state = template.copy()
            state["base_data"] = data
            state["events"] = []
            state["queue"] = queue
            state["allocator"] = pool
            ary.__dict__ = state
            arrays[s] = ary

    def place(self, placed: dict[str, cla.Array], queue: cl.CommandQueue,
              bufs: list[Buffer | None],
              arrays: dict[int, cla.Array]) -> None:
        """Put the caller's arrays of *placed* that fit in their output
        slots. An array checked once is known by identity afterwards (its
        layout does not change: pyopencl arrays are not reshaped in
        place)."""
        fitting = self.placed_ok
        for name, ary in placed.items():
            s = self.placeable.get(name)
            if s is None:
                continue
            known = fitting.get(name)
            if known is not ary:
                import pyopencl.array as cla
                context = queue.context
                shape, dtype = self.output_layout[s]
                if not (type(ary) is cla.Array and ary.shape == shape
                        and ary.dtype == dtype and not ary.offset
                        and ary.flags.c_contiguous
                        and (ary.queue is queue or ary.context == context)):
                    continue
                fitting[name] = ary
            arrays[s] = ary
            bufs[s] = ary.base_data


def fits_layout(value: Any, slot: int | None, layout: object,
                array_class: type[cla.Array] | None) -> bool:
    """Whether *value* has the recorded *layout* of an argument (one of
    :attr:`LaunchReplay.checks`, which
    :meth:`LaunchReplay.bind_same_layout` compares the same way): for a
    size (*slot* ``None``) the same integer value; for an array, a device
    array of *array_class* with the same (shape, dtype, strides, offset,
    queue)."""
    if slot is None:
        return isinstance(value, (int, np.integer)) and value == layout
    return type(value) is array_class and (
        value.shape, value.dtype, value.strides, value.offset,
        value.queue) == layout


class _Allocate:
    """The allocator loopy's launchers get: the pool, never asked for
    zero bytes."""

    __slots__ = ("pool",)

    def __init__(self, pool: MemoryPool) -> None:
        self.pool = pool

    def __call__(self, nbytes: int) -> Buffer:
        return self.pool(max(int(nbytes), 1))


_new_object = object.__new__


# {{{ frozen launches: a replay whose buffers and kernel arguments are kept

#: the most temporary memory (bytes) a frozen replay keeps
FROZEN_TEMPORARY_BYTES = 1 << 20


class KeptOutputs(dict):
    """The outputs (name -> array) of a frozen call: the same arrays, in
    the same dict, on every call of that frozen form -- the next call
    writes them again. A caller handing results out copies them first."""


class FrozenLaunches:
    """A :class:`LaunchReplay` with its buffers fixed: what a call with
    ``reuse_outputs=True`` becomes once the replay fits (see the module
    docstring of :mod:`~pytato_like.target.loopy.bound`).

    A replay still does per call what comes out the same every time: it
    binds the inputs to their slots, allocates outputs and temporaries from
    the pool, makes an array per output, fills each launch's argument
    list. In the middle of a distributed execution that costs several
    times what it costs in a loop over one call (a boundary part of the
    halo benchmark, 16 inputs, one kernel: 15.5 µs per call alone, 36-47
    µs between the other parts' calls). A frozen form does it once: the
    outputs and temporaries get buffers of their own, kept from call to
    call (the queue is in order, so the next call writes them only after
    the last one's kernels read them), and each launch gets a kernel
    object of its own whose arguments are set once (OpenCL takes them as
    they are at the enqueue). A call checks the inputs by identity -- an
    input that is another array of the same layout is set on the kernels
    reading it -- and enqueues the kernels.

    Only replays whose every launch was captured (see
    :func:`capture_launcher`), of programs without run-time checks, with
    no host input and no input that is also an output, at most
    :data:`FROZEN_TEMPORARY_BYTES` of temporaries (kept too), on an
    in-order queue are frozen."""

    __slots__ = ("program", "queue", "replay", "names", "refs", "uses",
                 "arg_lists", "steps", "outputs", "buffers", "launch_ns",
                 "enqueue", "n_calls")

    @staticmethod
    def can_freeze(program: BoundPyOpenCLProgram, queue: cl.CommandQueue,
                   replay: LaunchReplay) -> bool:
        """Whether calls of *program* on *queue* through *replay* can be
        frozen at all."""
        import pyopencl as cl
        return not (
            program.checks or program.single_output
            or queue.properties
            & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
            or replay.any_host or replay.passed_through
            or any(launch[-1] is None for launch in replay.launches)
            or sum(nbytes for launch in replay.launches
                   for _, nbytes in launch[4]) > FROZEN_TEMPORARY_BYTES)

    @classmethod
    def freeze(cls, program: BoundPyOpenCLProgram, replay: LaunchReplay,
               queue: cl.CommandQueue, pool: MemoryPool,
               inputs: dict[str, Any], placed: dict[str, cla.Array]
               ) -> FrozenLaunches | None:
        """The frozen form of *replay* (of *program*) for *inputs* on
        *queue*, outputs named in *placed* computed into those arrays,
        other outputs and temporaries from *pool*; ``None`` (nothing
        allocated) if *inputs* do not have the replay's layout. Runs
        nothing."""
        import pyopencl as cl
        bound = replay.bind_same_layout(queue, inputs)
        if bound is None:
            return None
        bufs, _ = bound
        arrays = dict(replay.constant_arrays)
        if placed:
            replay.place(placed, queue, bufs, arrays)
        replay.allocate_outputs(queue, pool, bufs, arrays)
        for launch in replay.launches:
            for s, nbytes in launch[4]:
                bufs[s] = pool(nbytes)      # kept, never released

        uses: dict[int, list[tuple[int, int]]] = {}
        arg_lists: list[list[object]] = []
        steps: list[tuple] = []
        for launch in replay.launches:
            for knl, template, fills, packed, gsize, lsize, offset, \
                    g_times_l, allow_empty in launch[-1]:
                args = list(template)
                for pos, s in fills:
                    args[pos] = bufs[s]
                    uses.setdefault(s, []).append((len(steps), pos))
                arg_lists.append(args)
                # a kernel object of its own (the program's kernels are
                # shared with other programs and calls): its arguments,
                # set now, stay set until an input is rebound
                own: cl.Kernel = kernel_object(knl.program, knl.function_name)
                # (pyopencl's stubs omit its private fast setters)
                own._set_arg_multi(tuple(args))  # type: ignore[attr-defined]
                if packed is not None:
                    own._set_arg_buf_pack_multi(  # type: ignore[attr-defined]
                        packed)
                steps.append((own, gsize, lsize, offset, g_times_l,
                              allow_empty))
        outputs = KeptOutputs(
            (name, arrays[s]) for name, s in replay.output_slots.items())
        # the inputs' buffers are held by the arrays passed (the last ones:
        # refs), not here -- the first call's inputs may be freed
        for s in replay.input_slots:
            if s is not None:
                bufs[s] = None
        return cls(program, queue, replay, inputs, uses, arg_lists, steps,
                   outputs, bufs, cl.enqueue_nd_range_kernel)

    def __init__(self, program: BoundPyOpenCLProgram,
                 queue: cl.CommandQueue, replay: LaunchReplay,
                 inputs: dict[str, Any],
                 uses: dict[int, list[tuple[int, int]]],
                 arg_lists: list[list[object]], steps: list[tuple],
                 outputs: KeptOutputs, buffers: list[Buffer | None],
                 enqueue: Callable[..., cl.Event]
                 ) -> None:
        self.program = program
        self.queue = queue
        self.replay = replay
        #: the inputs' names (in the replay's order) and the arrays last
        #: passed for them
        self.names = tuple(inputs)
        self.refs = list(inputs.values())
        #: slot -> [(step, argument position)] reading it
        self.uses = uses
        #: per kernel enqueue: its arguments (as captured by
        #: :func:`capture_launcher`), and (its own kernel object, arguments
        #: set; sizes and offsets)
        self.arg_lists = arg_lists
        self.steps = steps
        self.outputs = outputs
        #: the kept buffers (outputs and temporaries) and bound data, by
        #: slot
        self.buffers = buffers
        self.enqueue = enqueue
        #: nanoseconds the last call spent enqueueing its kernels
        self.launch_ns = 0
        #: calls that enqueued the kernels
        self.n_calls = 0

    def __call__(self, queue: cl.CommandQueue, values: dict[str, Any]
                 ) -> KeptOutputs | None:
        """Enqueue the kernels with the inputs *values* (by name); the
        outputs, or ``None`` (nothing enqueued) if an input or *queue* is
        not what the form was frozen for."""
        if queue is not self.queue or len(values) != len(self.names):
            return None
        refs = self.refs
        for k, name in enumerate(self.names):
            value = values.get(name)
            if value is not refs[k] and not self._rebind(k, value):
                return None
        t0 = time.perf_counter_ns()
        enqueue = self.enqueue
        for knl, gsize, lsize, offset, g_times_l, allow_empty in self.steps:
            # (an in-order queue: no events to chain)
            enqueue(queue, knl, gsize, lsize, offset, None,
                    g_times_l=g_times_l, allow_empty_ndrange=allow_empty)
        self.launch_ns = dt = time.perf_counter_ns() - t0
        self.n_calls += 1
        self.program.stats.record_call(dt * 1e-9, [dt * 1e-9])
        return self.outputs

    def _rebind(self, k: int, value: Any) -> bool:
        """Put *value* in for input *k* if it has the recorded layout."""
        _, s, layout = self.replay.checks[k]
        if not fits_layout(value, s, layout, self.replay.array_class):
            return False
        self.refs[k] = value
        if s is not None:
            data = value.base_data
            for j, pos in self.uses.get(s, ()):
                args = self.arg_lists[j]
                args[pos] = data
                self.steps[j][0]._set_arg_multi(tuple(args))
        return True

# }}}


# {{{ launches without loopy's launcher

def _launch(steps: tuple, queue: cl.CommandQueue, bufs: list[Buffer | None],
            wait_for: list[cl.Event] | None) -> cl.Event | None:
    """Run the captured *steps* of one launcher (see :func:`capture_launcher`)
    with this call's buffers; the last event."""
    enqueue = _ENQUEUE or _load_enqueue()
    evt = None
    for knl, template, fills, packed, gsize, lsize, offset, g_times_l, \
            allow_empty in steps:
        if fills:
            args = template[:]
            for pos, s in fills:
                args[pos] = bufs[s]
            knl._set_arg_multi(tuple(args))
        if packed is not None:
            knl._set_arg_buf_pack_multi(packed)
        evt = enqueue(queue, knl, gsize, lsize, offset, wait_for,
                      g_times_l=g_times_l, allow_empty_ndrange=allow_empty)
        wait_for = [evt]
    return evt


#: pyopencl's enqueue_nd_range_kernel, looked up on first use (this module
#: imports without pyopencl)
_ENQUEUE: Callable[..., cl.Event] | None = None


def _load_enqueue() -> Callable[..., cl.Event]:
    global _ENQUEUE
    import pyopencl as cl
    _ENQUEUE = cl.enqueue_nd_range_kernel
    return _ENQUEUE


class _Refused(Exception):
    """The launcher did something a capture does not reproduce."""


class _Marker:
    """Stands for the buffer argument number :attr:`slot` in a captured
    launch."""

    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


class _Refuse:
    """Any use but the few a capture knows refuses it."""

    def __getattr__(self, name: str) -> object:
        raise _Refused(name)

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise _Refused("call")


class _CapturedKernel(_Refuse):
    def __init__(self, knl: cl.Kernel, log: list) -> None:
        self._knl = knl
        self._log = log

    @property
    def num_args(self) -> int:
        return self._knl.num_args

    def _set_arg_multi(self, args: tuple) -> None:
        self._log.append(("set", self, tuple(args)))

    def _set_arg_buf_pack_multi(self, args: tuple) -> None:
        self._log.append(("pack", self, tuple(args)))


class _CapturedKernels(_Refuse):
    def __init__(self, kernels: object, log: list) -> None:
        self._kernels = kernels
        self._log = log

    def __getattr__(self, name: str) -> _CapturedKernel:
        return _CapturedKernel(getattr(self._kernels, name), self._log)


class _CapturedCL(_Refuse):
    def __init__(self, queue: object, log: list) -> None:
        self._queue = queue
        self._log = log

    def enqueue_nd_range_kernel(self, queue: object, kernel: object,
                                gsize: object, lsize: object,
                                offset: object = None,
                                wait_for: object = None,
                                g_times_l: bool = False,
                                allow_empty_ndrange: bool = False) -> object:
        if queue is not self._queue or type(kernel) is not _CapturedKernel:
            raise _Refused("enqueue_nd_range_kernel")
        evt = object()
        self._log.append(("enqueue", kernel, wait_for, gsize, lsize, offset,
                          g_times_l, allow_empty_ndrange, evt))
        return evt


def _sizes(value: object, none_ok: bool = False) -> bool:
    """Whether *value* is a tuple of integers (or ``None``, if *none_ok*):
    a constant size of an enqueue."""
    if value is None:
        return none_ok
    return type(value) is tuple and all(
        isinstance(v, (int, np.integer)) for v in value)


def capture_launcher(host: types.FunctionType, kernels: object,
                     constant_args: dict[str, int],
                     buffer_args: list[tuple[str, int]]) -> tuple | None:
    """What loopy's launcher *host* does with these arguments, as steps
    :func:`_launch` repeats: per kernel enqueue, the kernel, the buffer
    arguments to set (argument index -> slot), the packed scalar
    arguments and the enqueue's sizes. Found by running the launcher's
    code on stand-ins that record what it does (nothing reaches OpenCL);
    ``None`` if it does anything else (touches the queue or the
    allocator, calls another pyopencl function, passes a buffer through a
    scalar or a value through a buffer argument, enqueues nothing), and
    then the replay calls the launcher itself. (A replay captures each
    form of launch once, with positions for slots, and puts each launch's
    own slots in with :func:`_slotted`: the steps of a time loop.)"""
    steps = _capture(host, kernels, constant_args,
                     tuple(arg for arg, _ in buffer_args))
    return _slotted(steps, [s for _, s in buffer_args])


def _slotted(steps: tuple | None, slots: Sequence[int]) -> tuple | None:
    """Captured *steps* (see :func:`_capture`) with the slot ``slots[i]``
    in place of buffer argument position *i*."""
    if steps is None:
        return None
    return tuple((knl, template, tuple((pos, slots[i]) for pos, i in fills),
                  *rest) for knl, template, fills, *rest in steps)


def _capture(host: types.FunctionType, kernels: object,
             constant_args: dict[str, int],
             names: tuple[str, ...]) -> tuple | None:
    """:func:`capture_launcher`'s steps with the positions in *names*
    of the buffer arguments in place of slots."""
    import builtins
    import types
    log: list[tuple] = []
    queue = _Refuse()
    wait_marker = object()
    namespace = {"__builtins__": builtins, "_lpy_cl": _CapturedCL(queue, log),
                 "_lpy_np": np, "_lpy_cl_array": _Refuse()}
    fake = types.FunctionType(host.__code__, namespace, host.__name__,
                              host.__defaults__, host.__closure__)
    fake.__kwdefaults__ = host.__kwdefaults__
    args: dict[str, object] = dict(constant_args)
    for i, arg in enumerate(names):
        args[arg] = _Marker(i)
    try:
        result = fake(_CapturedKernels(kernels, log), queue,
                      wait_for=wait_marker, allocator=_Refuse(), **args)
    except Exception:       # noqa: BLE001 (anything unexpected: not captured)
        return None
    steps = []
    pending: dict[object, list[tuple]] = {}
    last_evt: object = None
    for entry in log:
        if entry[0] != "enqueue":
            pending.setdefault(entry[1], []).append(entry)
            continue
        (_, kernel, wait_for, gsize, lsize, offset, g_times_l, allow_empty,
         evt) = entry
        # the first waits for the caller's events, each later one for the
        # one before (what _launch passes)
        expected = wait_marker if last_evt is None else None
        if not (wait_for is expected if expected is not None
                else (type(wait_for) is list and len(wait_for) == 1
                      and wait_for[0] is last_evt)):
            return None
        template: list[object] = []
        fills: list[tuple[int, int]] = []
        packed: list[object] = []
        for what, _, values in pending.pop(kernel, ()):
            if what == "set":
                for index, value in zip(values[::2], values[1::2],
                                        strict=True):
                    if type(value) is not _Marker:
                        return None
                    fills.append((len(template) + 1, value.slot))
                    template += [index, None]
            else:
                if any(type(v) is _Marker for v in values):
                    return None
                packed += values
        if not (_sizes(gsize) and _sizes(lsize) and _sizes(offset, True)):
            return None
        steps.append((kernel._knl, template, tuple(fills),
                      tuple(packed) if packed else None, gsize, lsize,
                      offset, g_times_l, allow_empty))
        last_evt = evt
    if pending or not steps or result is not last_evt:
        return None
    return tuple(steps)

# }}}


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    stride = itemsize
    for n in reversed(shape):
        strides.append(stride)
        stride *= max(n, 1)
    return tuple(reversed(strides))
