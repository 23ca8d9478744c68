"""From an array DAG to loopy kernels: the code generation pipeline.

This module owns the plan a compiled program runs (:class:`ProgramPlan`,
with its kernels, launches and buffers), :func:`build_plan`, which runs
the stages below one after the other, :func:`merge_device_code` and
:func:`hoist_group_ids` (device code text). Each
stage lives in a module of its own:

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

.. autoclass:: ProgramPlan
.. autofunction:: build_plan
.. autofunction:: merge_device_code
.. autofunction:: hoist_group_ids
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from pytato_like.array import Array, NamedArray
from pytato_like.target.loopy.report import progress

if TYPE_CHECKING:
    from pytato_like.target.loopy.instructions import Instruction


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of *dtype* has in generated code (booleans are
    bytes: OpenCL has no boolean buffers)."""
    return np.dtype(np.int8) if dtype == np.bool_ else dtype


@dataclasses.dataclass
class KernelSource:
    """One distinct compiled chunk."""

    key: str
    device_code: str
    host_code: str
    host_function: str
    #: canonical argument names of the launcher, in order
    arg_names: tuple[str, ...]
    #: the OpenCL text of all kernels of the program this kernel belongs
    #: to: the whole program is built at once
    program_code: str = ""


@dataclasses.dataclass
class Launch:
    """One call of a :class:`KernelSource`: ``kernel argument -> program
    buffer or size name``."""

    kernel: int
    bindings: dict[str, str]


@dataclasses.dataclass
class BufferSpec:
    """A program-level array: input, output or temporary between chunks."""

    name: str
    shape: tuple  # ints and size names
    dtype: np.dtype  # the array's dtype (booleans stored as int8)
    kind: str  # "placeholder", "data", "output", "temporary"


@dataclasses.dataclass
class ProgramPlan:
    """Everything needed to run a program, picklable (the disk cache stores
    it): kernels, launches, buffers, size expressions, output names."""

    kernels: list[KernelSource]
    launches: list[Launch]
    buffers: dict[str, BufferSpec]
    #: derived size name -> pymbolic expression over size parameter names
    derived_sizes: dict[str, Any]
    size_params: tuple[str, ...]
    #: user output name -> buffer name
    outputs: dict[str, str]
    #: buffer names of the data wrappers, in DAG order
    data_wrapper_buffers: tuple[str, ...]
    #: placeholder name -> buffer name
    placeholder_buffers: dict[str, str] = dataclasses.field(default_factory=dict)
    phase_times: dict[str, float] = dataclasses.field(default_factory=dict)
    n_stored: int = 0
    n_instructions: int = 0
    materialization_table: str = ""


def _unwrap(ary: Array) -> Array:
    while isinstance(ary, NamedArray):
        ary = ary.expr
    return ary


def _natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p
                 for p in re.split(r"([0-9]+)", name))


class _Builder:
    """Builds the :class:`ProgramPlan` of one program, *outputs* (name ->
    array) compiled with *options* (the target's options dict), one stage
    after the other (:meth:`build`):

    1. :meth:`_materialize`: which arrays are stored, the DAG order and
       the program inputs;
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

    def __init__(self, outputs: dict[str, Array], options: dict) -> None:
        self.outputs = outputs
        self.options = options
        self.times: dict[str, float] = {}
        #: the loopy translation units built (one per distinct kernel)
        self.translation_units: list = []
        #: build the translation unit of every distinct kernel, also of
        #: those whose generated code comes from the kernel cache
        self.need_translation_units = True
        self.buffers: dict[str, BufferSpec] = {}

    def build(self) -> ProgramPlan:
        """Run all stages; the plan of the program."""
        from pytato_like.target.loopy.instructions import lower_stored_arrays
        from pytato_like.target.loopy.naming import ProgramNames

        t0 = time.perf_counter()
        out_nodes, order, costs = self._materialize()
        self.times["materialize"] = time.perf_counter() - t0
        progress("materialize", self.times["materialize"])

        t0 = time.perf_counter()
        self.names = ProgramNames(self.inputs)
        outputs_of, out_buffer = self._declare_buffers(out_nodes)
        insns, insn_of, stored = lower_stored_arrays(
            order, out_nodes, costs, self.names, self.buffers, outputs_of,
            out_buffer)
        self.times["lower"] = time.perf_counter() - t0
        progress("lower", self.times["lower"])

        t0 = time.perf_counter()
        plan = self._assemble(insns, insn_of, stored, out_buffer)
        plan.phase_times.update(self.times)
        # loopy and code generation are phases of their own
        plan.phase_times["assemble"] = (time.perf_counter() - t0
                                        - self.times["loopy"]
                                        - self.times["codegen"])
        plan.n_stored = len(insns)
        return plan

    def _materialize(self) -> tuple[dict[str, Array], list[Array], dict]:
        """The output arrays (unwrapped, by name), all arrays in
        topological order and the storage decision of each
        (:func:`~pytato_like.transform.materialize_cost.decide_storage`);
        sets :attr:`inputs`."""
        from pytato_like._traversal import topological_order
        from pytato_like.target import gather_program_inputs
        from pytato_like.transform.materialize_cost import decide_storage

        out_nodes = {}
        # numbered names in numeric order (``out_8`` before ``out_65``): the
        # parts of a partition, whose outputs are numbered alike, then
        # list the same computations in the same order and share kernels
        for name, ary in sorted(self.outputs.items(),
                                key=lambda item: _natural_key(item[0])):
            out_nodes[name] = _unwrap(ary)
        order = topological_order(list(out_nodes.values()))
        # inputs in the order of the outputs as given: the bound program
        # binds data wrappers by their position in that order
        self.inputs = gather_program_inputs(topological_order(
            [_unwrap(a) for a in self.outputs.values()]))
        model = self.options.get("cost_model")
        costs = decide_storage(list(out_nodes.values()), model, order)
        return out_nodes, order, costs

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

    def _assemble(self, insns: list[Instruction], insn_of: dict[int, Instruction],
                  stored: dict[int, Array], out_buffer: dict[str, str]
                  ) -> ProgramPlan:
        """Levels, chunks and storage classes of *insns*, the spec of each
        chunk, the kernels and their launches: the plan."""
        from pytato_like.target.loopy.chunk_spec import ChunkSpecBuilder
        from pytato_like.target.loopy.chunks import (
            assign_chunks,
            assign_levels,
            assign_storage,
            chunk_boundaries,
            merge_small_chunks,
            split_chunks,
        )
        from pytato_like.target.loopy.kernels import KernelGenerator
        from pytato_like.target.loopy.time_tiles import tile_time_steps

        max_insns = int(self.options.get("max_instructions_per_kernel", 128))
        assign_levels(insns, insn_of, stored)
        assign_chunks(insns, insn_of, max_insns)
        private_of = assign_storage(insns, insn_of, stored, self.buffers)
        tile_time_steps(insns, self.buffers, self.options.get("time_tile"),
                        max_insns=max_insns)
        merge_small_chunks(insns, max_insns,
                           self.options.get("small_chunk_elements"))
        chunks = split_chunks(insns)
        written_in, read_in = chunk_boundaries(chunks, self.names.array_name)

        spec_builder = ChunkSpecBuilder(self.names, self.buffers, insn_of,
                                        private_of, self.options)
        t_build = 0.0
        specs = []
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
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
        program_buffers = {n: b for n, b in self.buffers.items()
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
            n_instructions=len(insns))


def _preamble_items(head: str) -> list[str]:
    """The items of a kernel preamble: preprocessor lines, whole
    ``#if``...``#endif`` groups, and C declarations or functions."""
    items: list[str] = []
    lines = head.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        j = i + 1
        if line.startswith("#if"):
            depth = 1
            while j < len(lines) and depth:
                if lines[j].startswith("#if"):
                    depth += 1
                elif lines[j].startswith("#endif"):
                    depth -= 1
                j += 1
        elif not line.startswith("#"):
            depth = line.count("{") - line.count("}")
            opened = depth > 0
            while j < len(lines) and (depth > 0 or not (
                    opened or lines[j - 1].rstrip().endswith(";"))):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or depth > 0
                j += 1
        items.append("\n".join(lines[i:j]))
        i = j
    return items


_INDEX_MACROS = ("#define lid(", "#define gid(")

_GID_MACRO = re.compile(r"#define gid\(N\) \(\(([\w ]+)\) get_group_id\(N\)\)")
_GID_USE = re.compile(r"\bgid\(([0-2])\)")


def hoist_group_ids(code: str) -> str:
    """*code* (loopy's device code) with each kernel's work-group ids read
    once, into constants at the top of its body, instead of at every use.

    PoCL reads ``get_group_id`` from the work-group's context through a
    pointer that the kernel's global stores may alias, so a loop that
    indexes with ``gid(0)`` reloads it at every iteration and LLVM does
    not vectorise the loop: the heat solver's stencil kernel, each
    work-item a loop over 4096 of 10^6 cells, took 760-1010 µs with
    ``gid(0)`` in the loop and 180-220 µs with it hoisted (see
    :doc:`/codegen`, "Schedule")."""
    macro = _GID_MACRO.search(code)
    if macro is None:
        return code
    index_type = macro.group(1)
    out: list[str] = []
    pos = 0
    while True:
        start = code.find("__kernel ", pos)
        if start < 0:
            break
        open_brace = code.find("{", start)
        depth, end = 0, open_brace
        for end in range(open_brace, len(code)):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
        body = code[open_brace + 1:end]
        axes = sorted(set(_GID_USE.findall(body)))
        if axes:
            body = _GID_USE.sub(r"_pt_group_id_\1", body)
            decls = "".join(f"\n  {index_type} const _pt_group_id_{a} = "
                            f"gid({a});" for a in axes)
            body = decls + body
        out.append(code[pos:open_brace + 1] + body)
        pos = end
    out.append(code[pos:])
    return "".join(out)


def merge_device_code(codes: list[str]) -> str:
    """One OpenCL program text for the device codes of several kernels:
    each preamble item (``#define``, ``#if`` group, helper function) once,
    in order of first use, then every kernel -- one ``clBuildProgram`` per
    program instead of one per kernel."""
    if len(codes) == 1:
        return codes[0]
    seen: set[str] = set()
    preamble: list[str] = []
    bodies: list[str] = []
    heads = []
    for code in codes:
        cut = code.find("__kernel ")
        head, body = (code[:cut], code[cut:]) if cut >= 0 else (code, "")
        heads.append(_preamble_items(head))
        bodies.append(body)
    # loopy defines lid/gid with the kernel's index type: kernels with
    # 32-bit and 64-bit indices each get their own definition, just before
    # their body (one shared definition would retype the other kernels)
    index_macros = {item for items in heads for item in items
                    if item.startswith(_INDEX_MACROS)}
    per_kernel = len(index_macros) > 2
    for k, items in enumerate(heads):
        if per_kernel:
            local = [item for item in items if item.startswith(_INDEX_MACROS)]
            items = [item for item in items if item not in local]
            bodies[k] = "\n".join(
                [f"#undef {item.split()[1].split('(')[0]}\n{item}"
                 for item in local] + [bodies[k]])
        for item in items:
            if item not in seen:
                seen.add(item)
                preamble.append(item)
    # pyopencl-complex.h defines cdouble only if asked before its first
    # include (a complex64 kernel may come first): hoist the request
    early = [i for i in preamble if i.startswith((
        "#pragma OPENCL EXTENSION cl_khr_fp64", "#define PYOPENCL_DEFINE_CDOUBLE"))]
    preamble = early + [i for i in preamble if i not in early]
    return "\n".join(preamble) + "\n\n" + "\n\n".join(bodies)


def build_plan(outputs: dict[str, Array], options: dict | None = None
               ) -> tuple[ProgramPlan, list | None]:
    """The :class:`ProgramPlan` computing *outputs* (name -> array) and the
    loopy translation units of its distinct kernels."""
    builder = _Builder(outputs, dict(options or {}))
    # translation units are rebuilt on demand (``prg.programs``): kernels
    # from the kernel cache need none
    builder.need_translation_units = False
    plan = builder.build()
    complete = len(builder.translation_units) == len(plan.kernels)
    return plan, builder.translation_units if complete else None

