"""Part calls with fixed buffers: what a call of a small part program
becomes in the distributed executor's steady state.

The steady loop (:mod:`pytato_like.distributed.steady`) calls each part
program once per execution, execution after execution, with inputs of one
layout. A replay (:mod:`~pytato_like.target.loopy.replay`) already skips
the full call's checks, but still does per call what comes out the same
every time: it binds the inputs to their slots, allocates the outputs and
temporaries from the pool and makes an array object per output, fills
each launch's argument list and hands back the temporaries. In the middle
of an execution that costs several times what it costs in a loop over one
call (a boundary part of the halo benchmark, 16 inputs, one kernel: 15.5
µs per call alone, 36-47 µs between the other parts' calls, MPI and the
messages), and a boundary step pays it once per time step.

A :class:`FrozenCall` does that work once. Its part's outputs and
temporaries get buffers of their own, kept from one execution to the next
(the same memory every execution; the queue is in order and the plan runs
one execution at a time, so the next execution writes them only after the
last one's kernels read them), and each launch gets a kernel object of
its own (another instance of the same compiled kernel) whose arguments
are set once: OpenCL takes a kernel's arguments as they are when it is
enqueued, and no one else sets these. A call then checks the inputs by
identity -- an input that is another array of the same layout (a solver
passes each step's results back in) is set on the kernels that read it
-- and enqueues the kernels. Anything else (another layout or queue) returns ``None``: the
caller calls the program as usual and may freeze it again.

Only parts whose outputs are used inside the execution are frozen (the
caller's choice: results handed to the user must be new arrays each
time), and only programs whose every launch was captured (see
:func:`~pytato_like.target.loopy.replay.capture_launcher`), with no
run-time checks, no input that is also an output, at most
:data:`FROZEN_TEMPORARY_BYTES` of temporaries (kept too, so they add to
the peak memory; outputs of one execution are alive together anyway) and
an in-order queue.

.. autoclass:: FrozenCall
    :members: freeze, __call__, arrays

.. autodata:: FROZEN_TEMPORARY_BYTES
"""

from __future__ import annotations

import time
from typing import Any

from pytato_like.target.loopy.replay import fits_layout

#: the most temporary memory (bytes) a frozen part program keeps
FROZEN_TEMPORARY_BYTES = 1 << 20


class FrozenCall:
    """One part program's call with its buffers fixed (see the module
    docstring); made by :meth:`freeze`."""

    __slots__ = ("program", "queue", "replay", "names", "refs", "uses",
                 "arg_lists", "steps", "outputs", "buffers", "launch_ns",
                 "enqueue", "n_calls")

    @staticmethod
    def can_freeze(program: Any, queue: Any) -> bool:
        """Whether *program*'s calls on *queue* can be frozen at all (its
        last replay decides: a program without one may be frozen once it
        has one)."""
        import pyopencl as cl
        replay = program._last_replay
        return not (
            program.checks
            or queue.properties
            & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
            or replay is not None and (
                replay.any_host or replay.passed_through
                or any(launch[-1] is None for launch in replay.launches)
                or sum(nbytes for launch in replay.launches
                       for _, nbytes in launch[4]) > FROZEN_TEMPORARY_BYTES))

    @classmethod
    def freeze(cls, program: Any, queue: Any, pool: Any,
               inputs: dict[str, Any], placed: dict[str, Any]
               ) -> FrozenCall | None:
        """The frozen call of *program* (a
        :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`) with
        *inputs* (by name, in the order of its last replay) on *queue*,
        outputs named in *placed* computed into those arrays, other
        outputs and temporaries from *pool*; ``None`` if it cannot be
        frozen (see :meth:`can_freeze`) or its last replay is not for
        these inputs' layout (nothing allocated then). Runs nothing."""
        import pyopencl as cl
        replay = program._last_replay
        if (replay is None or replay.plan is not program.plan
                or not cls.can_freeze(program, queue)):
            return None
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
        arg_lists: list[list[Any]] = []
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
                own: Any = cl.Kernel(knl.program, knl.function_name)
                own._set_arg_multi(tuple(args))
                if packed is not None:
                    own._set_arg_buf_pack_multi(packed)
                steps.append((own, gsize, lsize, offset, g_times_l,
                              allow_empty))
        outputs = {name: arrays[s] for name, s in replay.output_slots.items()}
        # the inputs' buffers are held by the arrays passed (the last ones:
        # refs), not here -- the first call's inputs may be freed
        for s in replay.input_slots:
            if s is not None:
                bufs[s] = None
        return cls(program, queue, replay, inputs, uses, arg_lists, steps,
                   outputs, bufs, cl.enqueue_nd_range_kernel)

    def __init__(self, program: Any, queue: Any, replay: Any,
                 inputs: dict[str, Any],
                 uses: dict[int, list[tuple[int, int]]],
                 arg_lists: list[list[Any]], steps: list[tuple],
                 outputs: dict[str, Any], buffers: list[Any], enqueue: Any
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
        #: :func:`~pytato_like.target.loopy.replay.capture_launcher`), and
        #: (its own kernel object, arguments set; sizes and offsets)
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

    def arrays(self) -> list[Any]:
        """The output arrays this call keeps (the same every call)."""
        return list(self.outputs.values())

    def __call__(self, queue: Any, values: dict[str, Any]
                 ) -> dict[str, Any] | None:
        """Enqueue the part's kernels with its inputs taken from *values*
        (by name); its outputs by name, or ``None`` (nothing enqueued) if
        an input or *queue* is not what the call was frozen for."""
        if queue is not self.queue:
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
