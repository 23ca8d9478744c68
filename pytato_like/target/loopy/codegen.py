"""From an array DAG to loopy kernels: the code generation pipeline.

This module owns :func:`build_plan`, which runs the stages below one
after the other, from the DAG to the
:class:`~pytato_like.target.loopy.plan.ProgramPlan` a compiled program
runs, :func:`chunk_plan` (stage 4 and 5 as one step from a lowered plan
to a chunked one). The values passed between stages are the immutable
plans of :mod:`~pytato_like.target.loopy.plan`; the optional
optimisations between them are the declared passes of
:mod:`~pytato_like.target.loopy.passes` (read pieces after lowering; time
tiles and small-chunk merging after chunking), each switched off by name
with the ``disabled_passes`` option. Each stage lives in a module of its
own:

1. **Materialisation** -- :func:`~pytato_like.transform.materialize_cost.decide_storage`
   says which arrays are stored; all others are inlined into their users.
2. **Naming** -- :mod:`~pytato_like.target.loopy.naming`: buffer names of
   inputs, outputs and stored temporaries, size names for symbolic shape
   components.
3. **Lowering** -- :mod:`~pytato_like.target.loopy.instructions`: every
   stored array becomes one instruction assigning its value
   (:class:`~pytato_like.target.loopy.lowering.NodeLowerer`) over
   canonical inames.
4. **Loop groups and levels** -- :mod:`~pytato_like.target.loopy.chunks`:
   stored arrays of one shape whose users read them elementwise at the
   same index share one set of inames (one fused, parallel loop). An
   array read at another index (a stencil, a transpose, a reduction) goes
   to the next *level*: a level waits for the previous one to finish, so
   levels run as separate kernels. A stored array read only inside its
   own group lives in a private variable (a register); others are global
   arrays.
5. **Chunks** -- :mod:`~pytato_like.target.loopy.chunks`: instructions are
   ordered by level and cut into chunks of one loop group of one level
   (one device kernel), at most ``max_instructions_per_kernel``
   instructions each.
6. **Chunk specs** -- :mod:`~pytato_like.target.loopy.chunk_spec`: each
   chunk is written with canonical local names and, where its schedule
   does not depend on them, its constant sizes as kernel arguments;
   chunks of identical structure (every step of a time loop, also one
   whose arrays shrink, the pieces of a long elementwise chain, the same
   computation in another program) share one kernel.
7. **Kernels** -- :mod:`~pytato_like.target.loopy.kernels`: one loopy
   kernel per distinct chunk, scheduled by
   :mod:`~pytato_like.target.loopy.schedule` (group inames to work-groups
   and work-items); loopy emits OpenCL C and a Python launcher for it,
   generated once (process and disk kernel cache,
   :mod:`pytato_like.target.loopy.cache`) and launched several times.
   :func:`merge_device_code` joins the kernels of a program into one
   OpenCL text (one build); :mod:`~pytato_like.target.loopy.bound` runs
   them.

.. autofunction:: build_plan
.. autofunction:: chunk_plan
"""

from __future__ import annotations

import dataclasses
import re
import time

from pytato_like._traversal import topological_order
from pytato_like.array import Array, NamedArray
from pytato_like.opencl_build import merge_device_code
from pytato_like.target import gather_program_inputs, unwrap_named
from pytato_like.target.loopy.chunks import (
    assign_chunks,
    assign_levels,
    assign_storage,
    chunk_boundaries,
)
from pytato_like.target.loopy.instructions import lower_stored_arrays
from pytato_like.target.loopy.naming import ProgramNames
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.passes import (
    OptionsArg,
    given_options,
    option,
    run_passes,
)
from pytato_like.target.loopy.plan import (
    BufferSpec,
    ChunkedPlan,
    KernelSource,
    Launch,
    ProgramPlan,
    storage_dtype,
)
from pytato_like.target.loopy.repeated_steps import (
    StepRun,
    SubPlan,
    find_step_run,
    splice_plans,
    split_step_run,
)
from pytato_like.target.loopy.report import progress
from pytato_like.transform.materialize_cost import decide_storage

# (the plan's types live in :mod:`.plan`; imported from here by cache,
# unit, chunk_spec and the tests)
__all__ = ["BufferSpec", "KernelSource", "Launch", "ProgramPlan",
           "build_plan", "storage_dtype"]


def _same_nodes(xs: list[Array], ys: list[Array]) -> bool:
    """Whether *xs* and *ys* are the same arrays (by identity: ``==`` of
    arrays is elementwise) in the same order."""
    return len(xs) == len(ys) and all(x is y for x, y in zip(xs, ys))


def _natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p
                 for p in re.split(r"([0-9]+)", name))


class PlanBuilder:
    """Builds the :class:`ProgramPlan` of one program, *outputs* (name ->
    array) compiled with *options* (the target's options dict), one stage
    after the other (:meth:`build`):

    1. :meth:`_materialize`: which arrays are stored, the DAG order and
       the program inputs (a DAG ending in a long run of alike steps is
       instead built as a head, a body repeated and a tail:
       :mod:`~pytato_like.target.loopy.repeated_steps`);
    2. :meth:`_declare_buffers`: program names
       (:class:`~pytato_like.target.loopy.naming.ProgramNames`) and the
       buffers of inputs and outputs;
    3. lowering of stored arrays into instructions
       (:func:`~pytato_like.target.loopy.instructions.lower_stored_arrays`);
    4. :meth:`_assemble`: levels, chunks and storage classes
       (:mod:`~pytato_like.target.loopy.chunks`), one kernel spec per
       chunk (:mod:`~pytato_like.target.loopy.chunk_spec`), kernels
       (:mod:`~pytato_like.target.loopy.kernels`) and the plan.

    After :meth:`build`, :attr:`translation_units` holds the loopy
    translation units built (all of them unless
    :attr:`need_translation_units` was set false) and :attr:`times` the
    seconds per phase.
    """

    def __init__(self, outputs: dict[str, Array], options: CodegenOptions,
                 known_order: list[Array] | None = None,
                 find_repeated_steps: bool = True) -> None:
        self.outputs = outputs
        self.options = options
        #: look for a run of alike steps (not in the plans of such a run)
        self.find_repeated_steps = find_repeated_steps
        #: a topological order of the DAG of ``outputs.values()`` (in the
        #: given order), when the caller has one, else None
        self.known_order = known_order
        self.known_roots = list(outputs.values())
        self.times: dict[str, float] = {}
        #: the loopy translation units built (one per distinct kernel)
        self.translation_units: list = []
        #: build the translation unit of every distinct kernel, also of
        #: those whose generated code comes from the kernel cache
        self.need_translation_units = True
        self.buffers: dict[str, BufferSpec] = {}

    def build(self) -> ProgramPlan:
        """Run all stages; the plan of the program."""

        t0 = time.perf_counter()
        out_nodes, order = self._ordered_outputs()
        if self.find_repeated_steps and self.options.repeated_steps_min \
                and not self.inputs.size_params:
            run = find_step_run(order, list(out_nodes.values()),
                                self.options.repeated_steps_min)
            if run is not None:
                self.times["repeated_steps"] = time.perf_counter() - t0
                plan = self._build_repeated(run, out_nodes, order)
                if plan is not None:
                    return plan
        costs = self._decide_storage(out_nodes, order)
        self.times["materialize"] = time.perf_counter() - t0
        progress("materialize", self.times["materialize"])

        t0 = time.perf_counter()
        self.names = ProgramNames(self.inputs)
        outputs_of, out_buffer = self._declare_buffers(out_nodes)
        insns, insn_of, stored = lower_stored_arrays(
            order, out_nodes, costs, self.names, self.buffers, outputs_of,
            out_buffer, self.options, split_read_pieces=False)
        lowered = self.run_passes(ChunkedPlan(
            "lowered", tuple(insns), insn_of, stored, self.buffers,
            int(option(self.options, "max_instructions_per_kernel", 128))))
        self.times["lower"] = time.perf_counter() - t0
        progress("lower", self.times["lower"])

        t0 = time.perf_counter()
        #: the plan after the passes, before kernel generation
        self.chunked_plan = self.run_passes(chunk_plan(lowered, self.options))
        plan = self._assemble(self.chunked_plan, out_buffer)
        # loopy and code generation are phases of their own
        assemble = (time.perf_counter() - t0 - self.times["loopy"]
                    - self.times["codegen"])
        return dataclasses.replace(
            plan, phase_times={**self.times, "assemble": assemble},
            n_stored=len(insns))

    def run_passes(self, plan: ChunkedPlan) -> ChunkedPlan:
        """*plan* after the optimisation passes of its stage: the
        ``passes`` option (default
        :data:`~pytato_like.target.loopy.passes.DEFAULT_PASSES`) but those
        the ``disabled_passes`` option names."""
        return run_passes(plan, self.options,
                          option(self.options, "passes", None),
                          option(self.options, "disabled_passes", ()))

    def _build_repeated(self, run: StepRun, out_nodes: dict[str, Array],
                        order: list[Array]) -> ProgramPlan | None:
        """The plan of a program ending in the *run* of alike steps: the
        plans of its head, body and tail spliced
        (:mod:`~pytato_like.target.loopy.repeated_steps`); None when they
        cannot be (the whole DAG is then generated as usual)."""
        programs = split_step_run(run, order, out_nodes,
                                  self.inputs.placeholders)
        subs: dict[str, SubPlan | None] = {}
        units: list = []
        for label, outputs in (("head", programs.head), ("body", programs.body),
                               ("tail", programs.tail)):
            if not outputs:
                subs[label] = None
                continue
            builder = PlanBuilder(outputs, self.options,
                                  find_repeated_steps=False)
            builder.need_translation_units = self.need_translation_units
            subs[label] = SubPlan(builder.build(),
                                  tuple(builder.names.data_wrappers))
            units += builder.translation_units
        body = subs["body"]
        assert body is not None     # (the body has outputs)
        spliced = splice_plans(programs, subs["head"], body, subs["tail"],
                               self.inputs.placeholders,
                               list(self.inputs.data_wrappers))
        if spliced is None:
            return None
        self.translation_units = units
        return dataclasses.replace(spliced, phase_times={
            **spliced.phase_times, "repeated_steps": self.times["repeated_steps"]})

    def _materialize(self) -> tuple[dict[str, Array], list[Array], dict]:
        """The output arrays (unwrapped, by name), all arrays in
        topological order and the storage decision of each
        (:func:`~pytato_like.transform.materialize_cost.decide_storage`);
        sets :attr:`inputs`."""
        out_nodes, order = self._ordered_outputs()
        return out_nodes, order, self._decide_storage(out_nodes, order)

    def _decide_storage(self, out_nodes: dict[str, Array], order: list[Array]
                        ) -> dict:
        return decide_storage(list(out_nodes.values()), self.options.cost_model,
                              order)

    def _ordered_outputs(self) -> tuple[dict[str, Array], list[Array]]:
        """The output arrays (unwrapped, by name) and all arrays in
        topological order; sets :attr:`inputs`."""

        out_nodes = {}
        # numbered names in numeric order (``out_8`` before ``out_65``): the
        # parts of a partition, whose outputs are numbered alike, then
        # list the same computations in the same order and share kernels
        for name, ary in sorted(self.outputs.items(),
                                key=lambda item: _natural_key(item[0])):
            out_nodes[name] = unwrap_named(ary)
        sorted_nodes = list(out_nodes.values())
        given_nodes = [unwrap_named(a) for a in self.outputs.values()]
        # (the caller's order is reused when it walked these very roots:
        # one walk of a 10^5-node DAG costs a noticeable part of a compile)
        order = self.known_order if self.known_order is not None \
            and _same_nodes(self.known_roots, sorted_nodes) \
            else topological_order(sorted_nodes)
        # inputs in the order of the outputs as given: the bound program
        # binds data wrappers by their position in that order
        self.inputs = gather_program_inputs(
            order if _same_nodes(given_nodes, sorted_nodes)
            else topological_order(given_nodes))
        return out_nodes, order

    def _declare_buffers(self, out_nodes: dict[str, Array]
                         ) -> tuple[dict[int, list[str]], dict[str, str]]:
        """Add the buffers of placeholders, data wrappers and outputs to
        :attr:`buffers`; returns ``id(array) -> its output buffers`` and
        ``output name -> buffer``."""
        names = self.names
        for ph in self.inputs.placeholders.values():
            buf = names.array_name[id(ph)]
            self.buffers[buf] = BufferSpec(buf, names.shape_of(ph), ph.dtype,
                                           "placeholder")
        for dw in names.data_wrappers:
            name = names.array_name[id(dw)]
            self.buffers[name] = BufferSpec(name, names.shape_of(dw), dw.dtype,
                                            "data")
        outputs_of: dict[int, list[str]] = {}
        out_buffer: dict[str, str] = {}
        for name, node in out_nodes.items():
            # suffixed: output names like "exp" would shadow C functions
            buf = names.fresh(f"{name}_out" if name.isidentifier() else "_pt_out")
            out_buffer[name] = buf
            outputs_of.setdefault(id(node), []).append(buf)
            self.buffers[buf] = BufferSpec(buf, names.shape_of(node), node.dtype,
                                           "output")
        return outputs_of, out_buffer

    def _assemble(self, plan: ChunkedPlan, out_buffer: dict[str, str]
                  ) -> ProgramPlan:
        """The spec of each chunk of *plan*, the kernels and their
        launches: the program's plan."""
        # (these stages load loopy: a compile needs it, a cache hit not)
        from pytato_like.target.loopy.chunk_spec import ChunkSpecBuilder
        from pytato_like.target.loopy.kernels import KernelGenerator
        from pytato_like.target.loopy.tiled_spec import tiled_spec

        chunks = [list(c) for c in plan.chunks]
        written_in, read_in = chunk_boundaries(chunks, self.names.array_name)
        private_of = {id(i.node): i.private for i in plan.instructions
                      if i.node is not None and i.private}
        spec_builder = ChunkSpecBuilder(self.names, dict(plan.buffers),
                                        dict(plan.writer_of), private_of,
                                        self.options)
        t_build = 0.0
        specs = []
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            if chunk and chunk[0].tiled is not None:  # a fused run
                spec = tiled_spec(spec_builder, chunk, k, written_in, read_in)
            else:
                spec = spec_builder.spec(chunk, k, written_in, read_in)
            t_build += time.perf_counter() - t0
            if spec["insns"]:
                specs.append(spec)
        generator = KernelGenerator(self.options, self.need_translation_units)
        self.translation_units = generator.translation_units
        kernels, launches = generator.kernels(specs)
        self.times["loopy"] = t_build + generator.loopy_time
        self.times["codegen"] = generator.codegen_time
        # temporaries local to a chunk are not program buffers
        program_buffers = {n: b for n, b in plan.buffers.items()
                           if b.kind != "temporary" or n in spec_builder.global_args}
        return ProgramPlan(
            kernels=kernels, launches=launches, buffers=program_buffers,
            derived_sizes=dict(self.names.derived_sizes),
            size_params=tuple(self.inputs.size_params),
            outputs=out_buffer,
            data_wrapper_buffers=tuple(self.names.array_name[id(dw)]
                                       for dw in self.names.data_wrappers),
            placeholder_buffers={name: self.names.array_name[id(ph)] for name, ph
                                 in self.inputs.placeholders.items()},
            n_instructions=len(plan.instructions), pass_report=plan.report)


def chunk_plan(plan: ChunkedPlan, options: OptionsArg = None) -> ChunkedPlan:
    """The chunked plan of the lowered *plan*: levels, chunks and storage
    classes (:mod:`~pytato_like.target.loopy.chunks`) assigned, on
    copies of its instructions, kernels bounded as *options* say."""
    insns, writer_of, buffers = plan.copied_instructions()
    stored = dict(plan.stored)
    assign_levels(insns, writer_of, stored)
    assign_chunks(insns, writer_of, plan.max_instructions,
                  **given_options(options, max_ops="max_kernel_operations",
                                  max_args="max_kernel_reads"))
    assign_storage(insns, writer_of, stored, buffers)
    return dataclasses.replace(plan, stage="chunked", instructions=tuple(insns),
                               writer_of=writer_of, buffers=buffers)


def build_plan(outputs: dict[str, Array], options: OptionsArg = None,
               known_order: list[Array] | None = None
               ) -> tuple[ProgramPlan, list | None]:
    """The :class:`ProgramPlan` computing *outputs* (name -> array) and the
    loopy translation units of its distinct kernels; *options* as
    :meth:`CodegenOptions.from_user
    <pytato_like.target.loopy.options.CodegenOptions.from_user>` takes them.
    *known_order*: the caller's topological order of the DAG of
    ``outputs.values()``, if it has one (saves a walk)."""
    if not isinstance(options, CodegenOptions):
        options = CodegenOptions.from_user(options)
    builder = PlanBuilder(outputs, options, known_order)
    # translation units are rebuilt on demand (``prg.programs``): kernels
    # from the kernel cache need none
    builder.need_translation_units = False
    plan = builder.build()
    complete = len(builder.translation_units) == len(plan.kernels)
    return plan, builder.translation_units if complete else None

