"""Running a compiled program: :class:`BoundPyOpenCLProgram` (alias
``LoopyBoundProgram``) and, bound to one context,
:class:`BoundPyOpenCLExecutable`.

A bound program holds a :class:`~pytato_like.target.loopy.codegen.ProgramPlan`
(kernels, launches, buffers). Calling it checks and uploads the inputs,
binds data wrappers and size parameters, allocates outputs and the
temporaries that cross kernel boundaries from a memory pool, and runs each
launch through the Python launcher loopy generated for its kernel; a
later call whose inputs have the same layout replays the recorded launches
instead (:mod:`~pytato_like.target.loopy.replay`). That is the one call
path (:meth:`BoundPyOpenCLProgram.__call__`): computing outputs into the
caller's buffers (``placed_outputs``) and frozen calls, whose buffers and
kernel arguments are kept from call to call (``reuse_outputs``), are
keywords of it; the replay cache, keyed by the arguments' layout, lives in
the program. The
kernels are built once per context, together with those of the other
programs generated since the last build (one ``clBuildProgram``, see
:func:`~pytato_like.opencl_build.kernel_program`).

NumPy inputs of one call are uploaded together, by one copy
(:class:`~pytato_like.target.loopy.device.PackedUpload`; the device
transfers and kernel builds are in :mod:`~pytato_like.target.loopy.device`,
which the replays share).

.. autoclass:: BoundPyOpenCLProgram
.. autoclass:: BoundPyOpenCLExecutable
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np

from pytato_like._traversal import topological_order
from pytato_like.diagnostic import PytatoLikeError, QueueError, UnexpectedInputError
from pytato_like.collector import collection_paused, pausing_enabled
from pytato_like.target import (
    BoundProgram,
    check_input_value,
    gather_program_inputs,
    scalar_input_as_placeholder_dtype,
)
from pytato_like.target.loopy import cache
from pytato_like.target.loopy.host_first_call import PendingPlan, run_on_host
from pytato_like.target.loopy.plan import ProgramPlan, storage_dtype
from pytato_like.target.loopy.replay import MAX_REPLAYS, LaunchReplay, layout_key
from pytato_like.target.loopy.device import (
    build_kernel,
    to_device,
    to_device_all,
    to_host,
)
from pytato_like.target.loopy.report import ProgramStats
from pytato_like.transform.runtime_checks import raise_failed_checks

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl
    import pyopencl.array as cla
    import pyopencl.tools as cl_tools

    from types import ModuleType

    from pytato_like.array import Array
    from pytato_like.target.loopy.options import CodegenOptions
    from pytato_like.target.loopy.unit import UnitInterface, UnitRunner

# context -> memory pool (one per context, shared by all programs)
_POOLS: dict[cl.Context, cl_tools.MemoryPool] = {}


def _pool(queue):
    import pyopencl.tools as cl_tools
    ctx = queue.context
    pool = _POOLS.get(ctx)
    if pool is None:
        pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
        _POOLS[ctx] = pool
    return pool


def _unit() -> ModuleType:
    """:mod:`~pytato_like.target.loopy.unit`, imported on first use: the
    translation unit is built when :attr:`BoundPyOpenCLProgram.program`
    is asked for or transformed, which the run of a cached program never
    needs (the builder, and the outlined kinds it registers, were ~8 ms
    of importing the loopy target)."""
    import pytato_like.target.loopy.unit as unit
    return unit


def _is_host_value(value) -> bool:
    """Whether *value* counts as a host argument in the out_host rule
    (a NumPy array or a scalar)."""
    return isinstance(value, np.ndarray) or np.isscalar(value)


class BoundPyOpenCLProgram(BoundProgram):
    """A program compiled to OpenCL through loopy (what
    :func:`~pytato_like.generate_loopy` returns).

    ``prg(queue, *, allocator=None, wait_for=None, out_host=None, **inputs)``
    returns ``(event, outputs)``; *outputs* is the 1-tuple ``(out,)`` for an
    :class:`~pytato_like.Array` result and a dict name -> array for a
    :class:`~pytato_like.DictOfNamedArrays` (or dict) result.

    Where outputs live (loopy's rule as pytato applies it): with
    ``out_host=None`` they are NumPy arrays when every array argument --
    the inputs and the data of bound data wrappers -- is a NumPy array (or
    a scalar), and :class:`pyopencl.array.Array` s otherwise;
    ``out_host=True``/``False`` forces either. With the loopy option
    ``no_numpy`` set, ``out_host=None`` keeps them on the device. The first
    launch waits for the events in *wait_for*; *allocator* provides outputs
    and temporaries.

    .. attribute:: program

        The loopy :class:`~loopy.TranslationUnit` holding every distinct
        kernel of the program, one entrypoint each.

    .. attribute:: bound_arguments

        Data wrapper name -> its data (the arrays bound into the program).

    .. attribute:: target

        The :class:`~pytato_like.target.loopy.LoopyPyOpenCLTarget`.

    .. attribute:: plan

        The :class:`~pytato_like.target.loopy.codegen.ProgramPlan` (read
        after a first call on the host, it waits for the compile: see
        :mod:`~pytato_like.target.loopy.host_first_call`).

    .. attribute:: stats

        A :class:`~pytato_like.target.loopy.report.ProgramStats` with
        compile phase times and per-call launch times.

    .. automethod:: __call__
    .. automethod:: compiled
    .. automethod:: replay_counts
    .. automethod:: copy
    .. automethod:: with_transformed_program
    .. automethod:: bind_to_context
    .. autoattribute:: source
    .. autoattribute:: programs
    .. autoattribute:: kernel
    """

    #: the cache key of the DAG (set by generate_loopy)
    key: str
    #: replay plans by call signature (made on first use)
    #: (context, layout) -> the replay, or False: not replayable
    _replays: dict[tuple[cl.Context, tuple], LaunchReplay | Literal[False]]
    #: the replay run last (tried first)
    _last_replay: LaunchReplay | None = None

    def __init__(self, plan: ProgramPlan, inputs, data_wrappers, single_output: bool,
                 outputs, options: CodegenOptions, stats, *, target=None,
                 loopy_options=None, checks=()) -> None:
        # the plan, or its PendingPlan while the first call runs on the
        # host (read through the plan property, which waits for it)
        self._plan: ProgramPlan | PendingPlan | None = plan
        #: :class:`~pytato_like.transform.runtime_checks.RuntimeCheck` s
        #: whose values the program computes beside its outputs
        self.checks = list(checks)
        self.inputs = inputs
        self.data_wrappers = data_wrappers
        self.single_output = single_output
        self._outputs = outputs
        self.options = options
        self.stats = stats
        self.target = target
        self.loopy_options = loopy_options
        self._device_data: dict[cl.Context, dict[str, cla.Array]] = {}
        self._translation_units: list[lp.TranslationUnit] | None = None
        #: the translation unit handed out (built on first use), and a
        #: runner of it once a transformation changed it
        self._program: lp.TranslationUnit | None = None
        self._runner: UnitRunner | None = None
        #: the outputs as the user gave them (before run-time checks), the
        #: entrypoint's name: what :attr:`program` is built from
        self._unit_outputs = outputs
        self.function_name = options.function_name
        self._unit_interface: UnitInterface | None = None
        self._original_data_wrappers = list(data_wrappers)

    @classmethod
    def unit_only(cls, outputs: dict[str, Array], single_output: bool,
                  options: CodegenOptions, loopy_options: lp.Options,
                  target: object,
                  function_name: str) -> BoundPyOpenCLProgram:
        """A program with no plan of its own: it runs its translation unit
        (:attr:`program`, transformed or not) through loopy's executor.
        The unit of a DAG our plans compile in several programs (calls,
        sparse products)."""
        inputs = gather_program_inputs(topological_order(list(outputs.values())))
        prg = cls(None, inputs, list(inputs.data_wrappers),  # type: ignore[arg-type]
                  single_output, outputs,
                  dataclasses.replace(options, function_name=function_name),
                  ProgramStats(enabled=False, n_nodes=0), target=target,
                  loopy_options=loopy_options)
        return prg

    @property
    def plan(self) -> ProgramPlan:
        """The program's plan (None for a unit-only program); waits for
        code generation started after a first call on the host (or does
        it now, if no call started it)."""
        plan = self._plan
        if isinstance(plan, PendingPlan):
            made, units = plan.result()
            self._plan = made
            if units is not None and self._translation_units is None:
                self._translation_units = units
            return made
        return plan  # type: ignore[return-value]

    @plan.setter
    def plan(self, value: ProgramPlan) -> None:
        self._plan = value

    def compiled(self) -> bool:
        """Whether the program's plan is made (false while its code is
        generated after a first call on the host)."""
        plan = self._plan
        return not isinstance(plan, PendingPlan) or plan.done()

    # {{{ inspection

    @property
    def source(self) -> str:
        """The OpenCL C source of all kernels of the program (of the
        transformed :attr:`program` once a transformation changed it)."""
        if self._runner is not None or self.plan is None:
            import loopy as lp
            return lp.generate_code_v2(self.program).device_code()
        return "\n\n".join(dict.fromkeys(k.device_code for k in self.plan.kernels))

    def get_source(self) -> str:
        return self.source

    @property
    def programs(self) -> list:
        """The loopy translation units of the kernels the program runs
        when :attr:`program` is not transformed (fused, scheduled; one per
        distinct kernel; rebuilt on demand when the plan came from the
        cache)."""
        if self._translation_units is None:
            # (the code generator is imported when first used: a program
            # loaded from the cache runs without it)
            from pytato_like.target.loopy.codegen import PlanBuilder
            builder = PlanBuilder(self._outputs, self.options)
            builder.build()
            self._translation_units = builder.translation_units
        return self._translation_units

    def _interface(self):
        """The :class:`~pytato_like.target.loopy.unit.UnitInterface` of
        the program (built on first use, or loaded from the code cache)."""
        if self._unit_interface is None:
            import loopy as lp

            lp_options = self.loopy_options if self.loopy_options is not None \
                else lp.Options(return_dict=not self.single_output)
            # programs with a plan hold no sparse products (those are
            # outlined): their data wrappers are found without the builder
            key = None
            if self.plan is not None and getattr(self, "key", None):
                import hashlib
                key = hashlib.sha256(repr((
                    "unit", self.key, self.function_name, repr(lp_options),
                    self.options.cache_key())).encode()
                ).hexdigest()
                record = cache.get_unit(key)
                if record is not None:
                    dws = _unit().unit_data_wrappers(self._unit_outputs)
                    if len(dws) == len(record["data_arg_names"]):
                        fields = {k: v for k, v in record.items()
                                  if k != "data_arg_names"}
                        self._unit_interface = _unit().UnitInterface(
                            data_args=list(zip(record["data_arg_names"], dws,
                                               strict=True)), **fields)
                        return self._unit_interface
            iface = _unit().build_translation_unit(
                self._unit_outputs, self.options, lp_options, self.function_name)
            if key is not None:
                import dataclasses
                # every field but the data wrappers (found again on load)
                record = {f.name: getattr(iface, f.name)
                          for f in dataclasses.fields(iface)
                          if f.name != "data_args"}
                record["data_arg_names"] = [name for name, _ in iface.data_args]
                cache.put_unit(key, record)
            self._unit_interface = iface
        return self._unit_interface

    @property
    def program(self):
        """The loopy :class:`~loopy.TranslationUnit` of the program, as
        pytato hands it out: one entrypoint named ``function_name``,
        arguments named after the placeholders, data wrappers and outputs
        (see :mod:`~pytato_like.target.loopy.unit`). Transform it with
        :meth:`with_transformed_program`."""
        if self._program is None:
            self._program = self._interface().t_unit
        return self._program

    @property
    def kernel(self):
        """The loopy kernel of :attr:`program` (its entrypoint)."""
        return self.program.default_entrypoint

    @property
    def bound_arguments(self) -> dict[str, object]:
        """Data wrapper name -> its data (unnamed data wrappers by the name
        their buffer has in the program)."""
        if self.plan is None:
            return {dw.name if dw.name is not None else f"_pt_data{i}": dw.data
                    for i, dw in enumerate(self.data_wrappers)}
        return {dw.name if dw.name is not None else buf: dw.data
                for buf, dw in zip(self.plan.data_wrapper_buffers,
                                   self.data_wrappers, strict=True)}

    # }}}

    # {{{ copies and transformations

    def copy(self, **kwargs) -> BoundPyOpenCLProgram:
        """A copy of the program; keywords (``program``, ``bound_arguments``,
        ``target``, ``plan``, ...) replace the corresponding attributes.
        A new ``program`` is compiled and is what the copy runs."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._device_data = {}
        new._replays = {}
        new._last_replay = None
        new.__dict__.pop("_n_full_calls", None)     # (replay_counts: its own)
        new.__dict__.pop("_n_host_calls", None)
        program = kwargs.pop("program", None)
        bound = kwargs.pop("bound_arguments", None)
        for name, value in kwargs.items():
            if (name not in self.__dict__ and name != "plan") \
                    or name.startswith("_"):
                raise PytatoLikeError(f"copy(): unknown attribute '{name}' of "
                                      f"{type(self).__name__}")
            setattr(new, name, value)
        if bound is not None:
            new._rebind(bound)
        if program is not None and program is not self.program:
            new._install_program(program)
        return new

    def with_transformed_program(self, f) -> BoundPyOpenCLProgram:
        """A copy of the program whose loopy translation unit is
        ``f(self.program)``: the transformed kernels are what the copy runs
        (a hook for loopy transformations: splitting, tagging, prefetching).
        *f* must keep the entrypoints' names and arguments."""
        return self.copy(program=f(self.program))

    def _rebind(self, bound: Mapping[str, object]) -> None:
        """Replace the data of bound data wrappers (by name)."""
        known = self.bound_arguments
        unknown = set(bound) - set(known)
        if unknown:
            raise UnexpectedInputError(
                f"bound_arguments {sorted(unknown)} are not data wrappers of "
                f"the program (those are {sorted(known)})")
        names = list(known)
        self.data_wrappers = [
            dw if names[i] not in bound else dw.copy(data=bound[names[i]])
            for i, dw in enumerate(self.data_wrappers)]

    def _install_program(self, program) -> None:
        """Run the translation unit *program* from now on: through the
        fast plan while its code is that of :attr:`program` (only its
        kernel's tags changed, say), through loopy's executor otherwise."""
        import loopy as lp

        if not isinstance(program, lp.TranslationUnit):
            raise PytatoLikeError(
                f"the transformation returned a {type(program).__name__}, "
                f"not a loopy TranslationUnit")
        if len(program.entrypoints) != 1:
            raise PytatoLikeError(
                f"the transformed program has the entrypoints "
                f"{sorted(program.entrypoints)}; it must keep the one entrypoint "
                f"'{self.function_name}'")
        # an unchanged code keeps the fast plan (arraycontext tags the
        # kernel, its tests apply the identity)
        if self._runner is not None or self.plan is None \
                or not _unit().same_code(self._interface().t_unit, program):
            self._runner = _unit().UnitRunner(self._interface(), program)
            self._replays = {}
            self._last_replay = None
        self._program = program

    def bind_to_context(self, context, allocator=None
                        ) -> BoundPyOpenCLExecutable:
        """An executable bound to the :class:`pyopencl.Context` *context*:
        the bound data is uploaded now and the executable is called like
        the program (*allocator*, if given, provides its outputs and
        temporaries)."""
        import pyopencl as cl
        queue = cl.CommandQueue(context)
        self._data_buffers(queue)
        queue.finish()
        return BoundPyOpenCLExecutable(self, context, allocator)

    # }}}

    def _data_buffers(self, queue: cl.CommandQueue) -> dict[str, cla.Array]:
        if self.plan is None:  # a unit-only program uploads per call
            return {}
        ctx = queue.context
        bufs = self._device_data.get(ctx)
        if bufs is None:
            bufs = {}
            for name, dw in zip(self.plan.data_wrapper_buffers, self.data_wrappers,
                                strict=True):
                bufs[name] = to_device(queue, dw.data)
            self._device_data[ctx] = bufs
        return bufs

    def _outputs_on_host(self, kwargs: Mapping[str, object]) -> bool:
        """The ``out_host=None`` rule: host outputs iff every argument and
        every bound data wrapper's data is a NumPy array or a scalar."""
        if self.loopy_options is not None and self.loopy_options.no_numpy:
            return False
        return (all(_is_host_value(dw.data) for dw in self.data_wrappers)
                and all(_is_host_value(v) for v in kwargs.values()))

    def _temporary_lifetimes(self) -> tuple[dict[int, list[str]],
                                            dict[int, list[str]]]:
        """``(launch -> temporaries to allocate before it, launch ->
        temporaries to release after it)``, computed once per plan."""
        cached = getattr(self, "_lifetimes", None)
        if cached is not None and cached[0] is self.plan:
            return cached[1]
        temporaries = {name for name, spec in self.plan.buffers.items()
                       if spec.kind == "temporary"}
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for i, launch in enumerate(self.plan.launches):
            for name in launch.bindings.values():
                if name in temporaries:
                    if name not in first:
                        first[name] = i
                    last[name] = i
        allocate_before: dict[int, list[str]] = {}
        release_after: dict[int, list[str]] = {}
        for name, i in first.items():
            allocate_before.setdefault(i, []).append(name)
            release_after.setdefault(last[name], []).append(name)
        self._lifetimes = (self.plan, (allocate_before, release_after))
        return allocate_before, release_after

    def __call__(self, queue: cl.CommandQueue | None = None, /, *args,
                 allocator=None, wait_for=None,
                 out_host: bool | None = None, placed_outputs=None,
                 reuse_outputs: bool = False, **kwargs):
        """Run the program on *queue* (positional, or the keyword
        ``queue=`` when no queue is passed positionally); see the class
        docstring. The one way to call a program: the replay cache, placed
        outputs and frozen calls are modes of it.

        :arg placed_outputs: output name -> a device array (contiguous,
            offset 0, the output's shape and dtype) the output is computed
            into where it can be: on a replayed call (the first call of a
            layout records its replay and runs it), for an output that is
            not another output or an input too. Other outputs (and all of a
            call that cannot be replayed) are allocated as usual: the caller
            compares identities.
        :arg reuse_outputs: the caller will not use this call's outputs
            once it calls again with ``reuse_outputs=True``: a replayed call
            with outputs on the device and nothing to wait for may then run
            frozen (:class:`~pytato_like.target.loopy.replay.FrozenLaunches`:
            the same output arrays, temporaries and kernel arguments every
            call; the outputs come as a
            :class:`~pytato_like.target.loopy.replay.KeptOutputs` and the
            event is ``None``: the queue is in order).
        """
        queue = queue_argument(self.inputs, queue, kwargs)
        if _option_named_inputs(self.inputs):
            allocator, wait_for, out_host, placed_outputs, reuse_outputs = \
                _options_unless_inputs(
                    self.inputs, kwargs, allocator=allocator,
                    wait_for=wait_for, out_host=out_host,
                    placed_outputs=placed_outputs,
                    reuse_outputs=reuse_outputs or None)
        elif reuse_outputs and out_host is False and not wait_for and not args:
            # the frozen form of the replay run last, tried first: a part
            # program of the executor's steady state, called once per
            # part and execution (what _run would reach, without its steps)
            last = self._last_replay
            if (last is not None and last.frozen and last.queue is queue
                    and last.plan is self.plan):
                kept = last.frozen(queue, kwargs)
                if kept is not None:
                    return None, kept
        if out_host is None:
            out_host = self._outputs_on_host(kwargs)
        pending = self._plan
        if (isinstance(pending, PendingPlan) and not args
                and self._runner is None
                and all(a is b for a, b in zip(
                    self.data_wrappers, self._original_data_wrappers,
                    strict=True))
                and pending.take_host_call()):
            return self._call_on_host(pending, queue, allocator, wait_for,
                                      bool(out_host), kwargs)
        return self._run(queue, args, allocator, wait_for, bool(out_host), kwargs,
                         placed_outputs, bool(reuse_outputs))

    def _call_on_host(self, pending: PendingPlan, queue, allocator,
                      wait_for, out_host: bool, kwargs):
        """The first call of a program not compiled yet, evaluated on the
        host; then its code generation and OpenCL build start in a thread
        (see :mod:`~pytato_like.target.loopy.host_first_call`)."""
        self.__dict__["_n_host_calls"] = self.__dict__.get("_n_host_calls", 0) + 1
        try:
            return run_on_host(self, queue, self._outputs,
                               allocator if allocator is not None
                               else _pool(queue), wait_for, out_host, kwargs)
        finally:
            if pending.start_after_host_call:
                context = queue.context

                def build(plan: ProgramPlan) -> None:
                    if plan.launches:
                        build_kernel(context,
                                     plan.kernels[plan.launches[0].kernel],
                                     self.stats)
                pending.start(after=build)

    def last_launch_ns(self) -> int:
        """Nanoseconds the last call spent inside OpenCL's launch calls
        (with a driver that runs kernels in the caller's thread, such as
        PoCL's ``basic``, the kernels' run time is in there)."""
        calls = self.stats.calls
        return int(sum(calls[-1][1]) * 1e9) if calls else 0

    def replay_counts(self) -> dict[str, int]:
        """How the calls so far ran: ``"host"`` (evaluated on the host
        while the program compiled, see
        :mod:`~pytato_like.target.loopy.host_first_call`), ``"full"``
        (checked, launched, maybe
        recorded), ``"replayed"`` (a replay cache hit) and ``"frozen"``
        (a replay cache hit run by its frozen form)."""
        replays = [r for r in self.__dict__.get("_replays", {}).values() if r]
        return {"host": self.__dict__.get("_n_host_calls", 0),
                "full": self.__dict__.get("_n_full_calls", 0),
                "replayed": sum(r.n_runs for r in replays),
                "frozen": sum(r.frozen.n_calls for r in replays
                              if r.frozen)}

    def _run(self, queue: cl.CommandQueue, args, allocator, wait_for,
             out_host: bool, kwargs,
             placed: dict[str, cla.Array] | None = None, reuse: bool = False):
        import pyopencl.array as cla
        if args:
            raise UnexpectedInputError(
                f"inputs must be passed by name; got {len(args)} positional "
                "argument(s)")
        if self._runner is None and self.plan is None:
            self._runner = _unit().UnitRunner(self._interface(), self.program)
        if self._runner is not None:
            return self._run_unit(queue, allocator, wait_for, out_host, kwargs)
        t_start = time.perf_counter()
        plan = self.plan
        # the pool: the caller's allocator (e.g. the distributed executor's
        # pool) when given, so intermediates and communication buffers
        # share one pool
        pool = allocator if allocator is not None else _pool(queue)
        # the fast path: a call with a layout seen before replays its
        # launches; first tried: the replay run last, checked directly
        last = self._last_replay
        if last is not None and last.queue is queue and last.plan is plan:
            if reuse and not out_host and not wait_for:
                kept = last.run_frozen(self, queue, pool, kwargs, placed)
                if kept is not None:
                    return None, kept
            result = last.run_if_same_layout(self, queue, pool, wait_for,
                                             out_host, kwargs, t_start,
                                             placed)
            if result is not None:
                return result
        context = queue.context
        layout = layout_key(kwargs, queue, context, self.inputs.size_params)
        replays = self.__dict__.setdefault("_replays", {})
        if layout is not None:
            replay = replays.get((context, layout))
            if replay and replay.plan is plan:
                self._last_replay = replay
                return replay.run(self, queue, pool, wait_for, out_host,
                                  kwargs, t_start, placed)
        self.__dict__["_n_full_calls"] = self.__dict__.get("_n_full_calls", 0) + 1
        values = self.inputs.check_and_convert(kwargs, _as_checked_value)
        sizes: dict[str, int] = {name: int(values[name])
                                 for name in plan.size_params}
        for name, expr in plan.derived_sizes.items():
            from pymbolic import evaluate
            sizes[name] = int(evaluate(expr, sizes))

        def concrete(shape):
            return tuple(sizes[d] if isinstance(d, str) else d for d in shape)

        buffers: dict[str, cla.Array] = {}
        for name, ph in self.inputs.placeholders.items():
            buf = plan.placeholder_buffers[name]
            check_input_value(values[name], ph, concrete(plan.buffers[buf].shape))
        if layout is not None:
            # the inputs are checked: the call is recorded, then replayed
            # (what the launches do is the same; the replay skips loopy's
            # launchers and makes no array per temporary)
            if len(replays) >= MAX_REPLAYS:
                del replays[next(iter(replays))]
            # (False: not replayable)
            with collection_paused(pausing_enabled()):
                replay = LaunchReplay.record(self, queue, kwargs, sizes,
                                             layout) or False
            replays[context, layout] = replay
            if isinstance(replay, LaunchReplay):
                self._last_replay = replay
                return replay.run(self, queue, pool, wait_for, out_host,
                                  kwargs, t_start, placed, counted=False)
        names = list(self.inputs.placeholders)
        for name, ary in zip(names, to_device_all(
                queue, [values[name] for name in names]), strict=True):
            buffers[plan.placeholder_buffers[name]] = ary
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
        # temporaries live from the launch that first uses them to the last
        # one: released to the pool after that one is enqueued (the queue
        # is in order, so a later allocation of the same memory is used
        # only after it), which bounds the peak memory of long chains
        allocate_before, release_after = self._temporary_lifetimes()
        # inputs, bound data and outputs (each array once)
        live = sum({id(a): a.nbytes for a in buffers.values()}.values())
        peak = live

        def allocate(nbytes):
            return pool(max(int(nbytes), 1))

        dummy = None
        evt = None
        # the first launch waits for the caller's events
        wait_for = list(wait_for) if wait_for else None
        launch_times = []
        for i, launch in enumerate(plan.launches):
            for name in allocate_before.get(i, ()):
                spec = plan.buffers[name]
                ary = buffers[name] = cla.empty(
                    queue, concrete(spec.shape), storage_dtype(spec.dtype),
                    allocator=pool)
                live += ary.nbytes
            peak = max(peak, live)
            source = plan.kernels[launch.kernel]
            kernels, host = build_kernel(queue.context, source, self.stats)
            kwargs_k: dict[str, object] = {}
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
            for name in release_after.get(i, ()):
                live -= buffers.pop(name).nbytes
        self.stats.peak_device_bytes = peak
        for out_name, ary in results.items():
            if ary.dtype == np.int8 and plan.buffers[
                    plan.outputs[out_name]].dtype == np.bool_:
                results[out_name] = ary.view(np.bool_)  # an input passed through
        return self._finish_call(queue, evt, wait_for, results, out_host,
                                 t_start, launch_times)

    def _run_unit(self, queue, allocator, wait_for, out_host: bool, kwargs):
        """A call of the transformed translation unit (loopy's executor)."""
        runner = self._runner
        assert runner is not None
        t_start = time.perf_counter()
        values = self.inputs.check_and_convert(kwargs, _as_checked_value)
        sizes = {name: int(values[name]) for name in self.inputs.size_params}
        for name, ph in self.inputs.placeholders.items():
            value = values[name]
            if len(ph.shape) != np.ndim(value):
                check_input_value(value, ph, ph.shape)  # raises
            # symbolic components as the value has them (loopy checks)
            check_input_value(value, ph, tuple(
                d if isinstance(d, int) else sizes.get(getattr(d, "name", ""), n)
                for d, n in zip(ph.shape, np.shape(value), strict=True)))
        # the data of the unit's data wrappers: this program's (rebound)
        # data, matched by the original wrapper's identity
        position = {id(dw): i for i, dw in enumerate(self._original_data_wrappers)}
        data: dict[str, cla.Array] = {}
        for arg, dw in runner.interface.data_args:
            i = position.get(id(dw))
            value = self.data_wrappers[i].data if i is not None else dw.data
            data[arg] = to_device(queue, value)
        pool = allocator if allocator is not None else _pool(queue)
        evt, results = runner(queue, data, values, sizes, pool,
                                    list(wait_for) if wait_for else None,
                                    out_host)
        self.stats.record_call(time.perf_counter() - t_start, [])
        if self.single_output:
            return evt, (results[next(iter(results))],)
        return evt, results

    def _finish_call(self, queue, evt, wait_for, results: dict[str, cla.Array],
                     out_host: bool, t_start: float, launch_times: list[float]):
        """The end of a call, after the launches: the returned event, the
        run-time checks (read back; raise), outputs to the host if asked,
        the call's stats."""
        plan = self.plan
        if evt is None:
            import pyopencl as cl
            evt = (cl.enqueue_marker(queue, wait_for=wait_for) if wait_for
                   else cl.enqueue_marker(queue))
        if self.checks:
            check_values = {name: results.pop(name).get(queue=queue)
                            for check in self.checks for name in check.outputs}
            raise_failed_checks(self.checks, check_values)
        if out_host:
            results = {name: to_host(queue, ary, plan.buffers[
                plan.outputs[name]].dtype) for name, ary in results.items()}
        self.stats.record_call(time.perf_counter() - t_start, launch_times)
        if self.single_output:
            return evt, (results["_pt_out"],)
        return evt, results


#: the name the class had before it followed pytato's
LoopyBoundProgram = BoundPyOpenCLProgram


class BoundPyOpenCLExecutable(BoundProgram):
    """A :class:`BoundPyOpenCLProgram` bound to one
    :class:`pyopencl.Context` (made by
    :meth:`BoundPyOpenCLProgram.bind_to_context`): its bound data is on
    that context's device already. Called like the program
    (``exe(queue, **inputs)`` or ``exe(queue=queue, **inputs)``); outputs
    stay on the device unless ``out_host=True`` (or every input is a NumPy
    array and the program binds no data).

    .. attribute:: program

        As in pytato, a loopy executor (:class:`loopy.ExecutorBase`) of
        the translation unit, for :attr:`cl_context`: ``.t_unit`` and
        ``.entrypoint``.

    .. attribute:: bound_program

        The :class:`BoundPyOpenCLProgram` it runs.

    .. attribute:: cl_context
    .. automethod:: __call__
    .. automethod:: with_transformed_translation_unit
    """

    def __init__(self, program: BoundPyOpenCLProgram, cl_context,
                 allocator=None) -> None:
        self.bound_program = program
        self.cl_context = cl_context
        self.allocator = allocator
        self.target = program.target
        self._executor: lp.ExecutorBase | None = None

    @property
    def program(self):
        if self._executor is None:
            self._executor = self.bound_program.program.executor(self.cl_context)
        return self._executor

    @property
    def bound_arguments(self) -> dict[str, object]:
        """Data wrapper name -> its device array in :attr:`cl_context`."""
        if self.bound_program.plan is None:  # uploads per call
            return dict(self.bound_program.bound_arguments)
        bufs = self.bound_program._device_data.get(self.cl_context, {})
        names = list(self.bound_program.bound_arguments)
        return {names[i]: bufs[buf] for i, buf in
                enumerate(self.bound_program.plan.data_wrapper_buffers)
                if buf in bufs}

    @property
    def kernel(self):
        return self.bound_program.kernel

    def with_transformed_translation_unit(self, f) -> BoundPyOpenCLExecutable:
        """A copy running ``f(translation unit)`` (see
        :meth:`BoundPyOpenCLProgram.with_transformed_program`)."""
        return self.bound_program.with_transformed_program(f).bind_to_context(
            self.cl_context, self.allocator)

    def __call__(self, queue=None, /, *args, allocator=None, wait_for=None,
                 out_host: bool | None = None, placed_outputs=None,
                 reuse_outputs: bool = False, **kwargs):
        """The program's call (:meth:`BoundPyOpenCLProgram.__call__`, the
        same options) on a queue of :attr:`cl_context`."""
        program = self.bound_program
        queue = queue_argument(program.inputs, queue, kwargs)
        allocator, wait_for, out_host, placed_outputs, reuse_outputs = \
            inputs_named_like_options(
                program.inputs, kwargs, allocator=allocator,
                wait_for=wait_for, out_host=out_host,
                placed_outputs=placed_outputs,
                reuse_outputs=reuse_outputs or None)
        if queue.context != self.cl_context:
            raise QueueError(
                f"the queue's context ({queue.context}) is not the one this "
                f"executable of '{program.function_name}' is bound to "
                f"({self.cl_context})")
        if out_host is None:
            out_host = (not program.data_wrappers
                        and program._outputs_on_host(kwargs))
        return program._run(
            queue, args, allocator if allocator is not None else self.allocator,
            wait_for, bool(out_host), kwargs, placed_outputs,
            bool(reuse_outputs))


def queue_argument(inputs, queue, kwargs: dict) -> cl.CommandQueue:
    """The command queue of a call: the positional one, else the keyword
    ``queue`` (taken out of *kwargs*; with a positional queue, a keyword
    ``queue`` is an input of that name)."""
    if queue is not None:
        return queue
    if "queue" not in kwargs:
        raise QueueError(
            "no command queue: call the program as prg(queue, **inputs) or "
            "prg(queue=queue, **inputs)")
    return kwargs.pop("queue")


#: the keyword options of a call; an input of the same name takes the
#: keyword instead (see :func:`inputs_named_like_options`)
CALL_OPTIONS = ("allocator", "wait_for", "out_host", "placed_outputs",
                "reuse_outputs")


def _option_named_inputs(inputs) -> tuple[str, ...]:
    """The inputs of *inputs* named like a call option, found once per
    (frozen) inputs object and kept in its __dict__; most programs have
    none."""
    named = inputs.__dict__.get("_option_named_inputs")
    if named is None:
        names = inputs.placeholders.keys() | inputs.size_params.keys()
        named = inputs.__dict__["_option_named_inputs"] = tuple(
            name for name in CALL_OPTIONS if name in names)
    return named


def _options_unless_inputs(inputs, kwargs: dict, **options) -> tuple:
    """The values of *options* (in their order), after moving into
    *kwargs* those that name inputs of the program (then ``None``)."""
    for name in _option_named_inputs(inputs):
        if name in options and options[name] is not None:
            kwargs[name] = options[name]
            options[name] = None
    return tuple(options.values())


def inputs_named_like_options(inputs, kwargs: dict, **options) -> tuple:
    """The values of the call *options* (keywords of :data:`CALL_OPTIONS`,
    in their order), after moving into *kwargs* the keywords that name
    inputs of the program: a placeholder may be called ``allocator``,
    ``wait_for``, ... (or ``queue``, which the call takes positionally
    only), and then the keyword of that name is its value, not the
    option (which is then ``None``)."""
    if not _option_named_inputs(inputs):
        return tuple(options.values())
    return _options_unless_inputs(inputs, kwargs, **options)


def _as_checked_value(value, ph):
    """Input values are checked against the placeholder; NumPy scalars
    convert for 0-d inputs (as the NumPy target does)."""
    import pyopencl.array as cla
    if isinstance(value, cla.Array):
        return value
    return scalar_input_as_placeholder_dtype(np.asarray(value), ph)
