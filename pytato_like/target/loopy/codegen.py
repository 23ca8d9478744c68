"""From an array DAG to loopy kernels: the code generation pipeline.

1. **Materialisation** -- :func:`~pytato_like.transform.materialize_cost.decide_storage`
   says which arrays are stored; all others are inlined into their users.
2. **Lowering** -- every stored array becomes one loopy assignment of its
   value (:class:`~pytato_like.target.loopy.lowering.NodeLowerer`) over the
   inames of its *loop group*.
3. **Loop groups** -- stored arrays of one shape whose users read them
   elementwise at the same index share one set of inames (one fused,
   parallel loop). An array read at another index (a stencil, a
   transpose, a reduction) goes to the next *level*: a level waits for
   the previous one to finish, so levels run as separate kernels. A
   stored array read only inside its own group lives in a private
   variable (a register); others are global arrays.
4. **Chunks** -- instructions are ordered by level and cut into chunks of
   one loop group of one level (one device kernel), at most
   ``max_instructions_per_kernel`` instructions each. Each chunk is
   written with canonical local names and, where its schedule does not
   depend on them, its constant sizes as kernel arguments; chunks of
   identical structure (every step of a time loop, also one whose arrays
   shrink, the pieces of a long elementwise chain, the same computation
   in another program) share one kernel, generated
   once (process and disk kernel cache,
   :mod:`pytato_like.target.loopy.cache`) and launched
   several times.
5. **Scheduling** -- :mod:`~pytato_like.target.loopy.schedule` maps group
   inames to work-groups and work-items.
6. **Code generation** -- loopy emits OpenCL C and a Python launcher per
   distinct chunk; :func:`merge_device_code` joins the kernels of a
   program into one OpenCL text (one build); :mod:`~pytato_like.target.loopy.bound`
   runs them.

.. autoclass:: ProgramPlan
.. autofunction:: build_plan
.. autofunction:: merge_device_code
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
from typing import Any

import numpy as np
import pymbolic.primitives as prim

from pytato_like.array import Array, InputArgumentBase, NamedArray, SizeParam
from pytato_like.target.loopy.report import progress


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of *dtype* has in generated code (booleans are
    bytes: OpenCL has no boolean buffers)."""
    return np.dtype(np.int8) if dtype == np.bool_ else dtype

_C_KEYWORDS = frozenset("""auto break case char const continue default do double
else enum extern float for goto if inline int long register restrict return
short signed sizeof static struct switch typedef union unsigned void volatile
while kernel global local private constant half bool uchar ushort uint ulong
image2d_t image3d_t sampler_t event_t""".split())


_CL_FUNCTIONS = frozenset("""abs fabs sqrt exp log log10 log2 sin cos tan asin
acos atan atan2 sinh cosh tanh pow floor ceil fmod copysign fmin fmax min max
real imag conj isnan select mad clamp sign round trunc exp2 expm1 log1p cbrt
hypot dot cross length normalize get_global_id get_local_id get_group_id
barrier lid gid""".split())


_CANONICAL_RE = re.compile(r"_pt_[asp][0-9]+")
_DEFAULT_FUNCTION_NAME = "_pt_kernel"


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


@dataclasses.dataclass
class _Insn:
    node: Array | None
    targets: list[str]  # global buffer names written (outputs / temps)
    expr: Any
    canon: tuple[str, ...]
    shape: tuple
    refs: list[tuple[int, tuple]]
    reduction_inames: list
    helpers: set
    level: int = 0
    chunk: int = 0
    private: str | None = None


def _unwrap(ary: Array) -> Array:
    while isinstance(ary, NamedArray):
        ary = ary.expr
    return ary


def _natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p
                 for p in re.split(r"([0-9]+)", name))


def _dim_key(d) -> Any:
    return d if isinstance(d, int) else ("sym", d)


class _Builder:
    def __init__(self, outputs: dict[str, Array], options: dict) -> None:
        self.outputs = outputs
        self.options = options
        self.times: dict[str, float] = {}
        self._global_args: set[str] = set()
        self._user_named: set[str] = set()
        #: the loopy translation units built (one per distinct kernel)
        self.translation_units: list = []
        #: build the translation unit of every distinct kernel, also of
        #: those whose generated code comes from the kernel cache
        self.need_translation_units = True
        self._loopy_time = 0.0
        self._codegen_time = 0.0

    # {{{ names

    def _names(self, order, inputs):
        from pytools import UniqueNameGenerator
        taken = set(inputs.placeholders) | set(inputs.size_params)
        self.vng = UniqueNameGenerator(forced_prefix="")
        for n in taken:
            self.vng.add_name(n)
        self.array_name: dict[int, str] = {}
        self.buffers: dict[str, BufferSpec] = {}
        for name, ph in inputs.placeholders.items():
            self.array_name[id(ph)] = self._safe(name)
        self.data_wrappers = []
        for dw in inputs.data_wrappers:
            if id(dw) in self.array_name:
                continue
            name = self.vng(f"_pt_data{len(self.data_wrappers)}")
            self.array_name[id(dw)] = name
            self.data_wrappers.append(dw)
        # symbolic shape components -> size names
        self.size_name: dict[int, str] = {}
        self.derived_sizes: dict[str, Any] = {}
        self._size_by_key: dict[Any, str] = {}

    def _safe(self, name: str) -> str:
        """*name*, unless it would clash with C or OpenCL names."""
        if name in _C_KEYWORDS or name in _CL_FUNCTIONS or name.startswith("_lpy"):
            return self.vng(f"{name}_in")
        return name

    def _temporary_name(self, node: Array) -> str:
        """Base name of a stored intermediate: from a
        :class:`~pytato_like.tags.Named`, :class:`~pytato_like.tags.PrefixNamed`
        or :class:`~pytato_like.tags.CountNamed` tag, else ``_pt_tmp``
        (made unique by the name generator)."""
        from pytato_like.tags import CountNamed, Named, PrefixNamed
        for tag in node.tags:
            if isinstance(tag, Named) and tag.name.isidentifier():
                return self._safe(tag.name)
            if isinstance(tag, (PrefixNamed, CountNamed)) and tag.prefix.isidentifier():
                return self._safe(tag.prefix)
        return "_pt_tmp"

    def dim_expr(self, d):
        if isinstance(d, int):
            return d
        if isinstance(d, SizeParam):
            return prim.Variable(d.name)
        name = self.size_name.get(id(d))
        if name is None:
            from pytato_like.utils import dim_to_index_lambda_components
            from pytato_like.scalar_expr import substitute
            expr, bindings = dim_to_index_lambda_components(d)
            expr = substitute(expr, {k: prim.Variable(v.name)
                                     for k, v in bindings.items()})
            key = str(expr)
            name = self._size_by_key.get(key)
            if name is None:
                name = self.vng("_pt_size")
                self._size_by_key[key] = name
                self.derived_sizes[name] = expr
            self.size_name[id(d)] = name
        return prim.Variable(name)

    def shape_of(self, ary: Array) -> tuple:
        return tuple(d if isinstance(d, int) else self.dim_expr(d).name
                     for d in ary.shape)

    # }}}

    def build(self) -> ProgramPlan:
        from pytato_like._traversal import topological_order
        from pytato_like.target import gather_program_inputs
        from pytato_like.target.loopy.lowering import (
            NodeLowerer,
            uniquify_reduction_inames,
        )
        from pytato_like.transform.materialize_cost import decide_storage

        t0 = time.perf_counter()
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
        inputs = gather_program_inputs(topological_order(
            [_unwrap(a) for a in self.outputs.values()]))
        self.inputs = inputs
        model = self.options.get("cost_model")
        costs = decide_storage(list(out_nodes.values()), model, order)
        self.times["materialize"] = time.perf_counter() - t0
        progress("materialize", self.times["materialize"])

        t0 = time.perf_counter()
        self._names(order, inputs)
        for name, ph in inputs.placeholders.items():
            buf = self.array_name[id(ph)]
            self.buffers[buf] = BufferSpec(buf, self.shape_of(ph), ph.dtype,
                                           "placeholder")
        for dw in self.data_wrappers:
            name = self.array_name[id(dw)]
            self.buffers[name] = BufferSpec(name, self.shape_of(dw), dw.dtype,
                                            "data")

        outputs_of: dict[int, list[str]] = {}
        out_buffer: dict[str, str] = {}
        for name, node in out_nodes.items():
            # suffixed: output names like "exp" would shadow C functions
            buf = self.vng(f"{name}_out" if name.isidentifier() else "_pt_out")
            out_buffer[name] = buf
            outputs_of.setdefault(id(node), []).append(buf)
            self.buffers[buf] = BufferSpec(buf, self.shape_of(node), node.dtype,
                                           "output")

        stored: dict[int, Array] = {}
        insns: list[_Insn] = []
        insn_of: dict[int, _Insn] = {}
        current_refs: list = []

        def stored_ref(node, idx):
            if isinstance(node, SizeParam):
                return prim.Variable(node.name)
            if id(node) not in stored:
                return None
            current_refs.append((id(node), idx))
            name = self.array_name[id(node)]
            return prim.Subscript(prim.Variable(name), idx if idx else (0,))

        for node in order:
            if isinstance(node, InputArgumentBase):
                if not isinstance(node, SizeParam):
                    stored[id(node)] = node
                continue
            c = costs[id(node)]
            if not c.stored or isinstance(node, NamedArray):
                continue
        lowerer = NodeLowerer(stored_ref, self.dim_expr)

        def lower(node, targets):
            canon = tuple(f"_pt_c{i}" for i in range(node.ndim))
            idx = tuple(prim.Variable(v) for v in canon)
            current_refs.clear()
            lowerer._memo.clear()
            lowerer.reduction_inames = []
            lowerer.helpers_used = set()
            expr = uniquify_reduction_inames(lowerer.value_at(node, idx), lowerer)
            insn = _Insn(node, targets, expr, canon, node.shape,
                         list(current_refs), lowerer.reduction_inames,
                         lowerer.helpers_used)
            # reduction inames must be unique across the program
            return insn

        n_red = 0
        for node in order:
            if isinstance(node, (InputArgumentBase, NamedArray)):
                continue
            if not costs[id(node)].stored:
                continue
            if not outputs_of.get(id(node)) and any(
                    isinstance(d, int) and d == 0 for d in node.shape):
                continue  # nothing to compute or read
            targets = outputs_of.get(id(node), [])
            if not targets:
                base = self._temporary_name(node)
                targets = [self.vng(base)]
                if base != "_pt_tmp":
                    self._user_named.add(targets[0])
                self.buffers[targets[0]] = BufferSpec(
                    targets[0], self.shape_of(node), node.dtype, "temporary")
            lowerer.iname_prefix = f"_pt_r{n_red}_"
            insn = lower(node, targets)
            n_red += 1
            insns.append(insn)
            insn_of[id(node)] = insn
            self.array_name[id(node)] = targets[0]
            stored[id(node)] = node
        # outputs that are inputs: copies
        for name, node in out_nodes.items():
            if isinstance(node, InputArgumentBase):
                lowerer.iname_prefix = f"_pt_r{n_red}_"
                n_red += 1
                if isinstance(node, SizeParam):
                    insn = _Insn(node, [out_buffer[name]], prim.Variable(node.name),
                                 (), (), [], [], set())
                else:
                    insn = lower(node, [out_buffer[name]])
                insns.append(insn)
        self.times["lower"] = time.perf_counter() - t0
        progress("lower", self.times["lower"])

        t0 = time.perf_counter()
        plan = self._assemble(insns, insn_of, stored, costs, out_buffer)
        plan.phase_times.update(self.times)
        # loopy and code generation are phases of their own
        plan.phase_times["assemble"] = (time.perf_counter() - t0
                                        - self.times["loopy"]
                                        - self.times["codegen"])
        plan.n_stored = len(insns)
        return plan

    # {{{ levels, storage classes, chunks

    def _assemble(self, insns, insn_of, stored, costs, out_buffer):
        max_insns = int(self.options.get("max_instructions_per_kernel", 128))

        def same_shape(a, b):
            if len(a) != len(b):
                return False
            from pytato_like.utils import are_shape_components_equal
            return all(are_shape_components_equal(x, y) for x, y in zip(a, b))

        def is_identity(insn, ref_node, idx):
            return (idx == tuple(prim.Variable(v) for v in insn.canon)
                    and same_shape(ref_node.shape, insn.shape))

        # levels
        for insn in insns:
            level = 0
            for nid, idx in insn.refs:
                dep = insn_of.get(nid)
                if dep is None:
                    continue
                level = max(level, dep.level
                            + (0 if is_identity(insn, stored[nid], idx) else 1))
            insn.level = level
        self._assign_chunks(insns, insn_of, max_insns)
        # storage class: private when all reads are identity reads from
        # the same loop group of the same chunk
        needs_global: dict[int, bool] = {}
        needs_private: dict[int, bool] = {}
        for insn in insns:
            for nid, idx in insn.refs:
                dep = insn_of.get(nid)
                if dep is None:
                    continue
                if (is_identity(insn, stored[nid], idx)
                        and dep.level == insn.level and dep.chunk == insn.chunk
                        and same_shape(dep.shape, insn.shape)):
                    needs_private[nid] = True
                else:
                    needs_global[nid] = True
        n_private = 0
        for insn in insns:
            if insn.node is None:
                continue
            nid = id(insn.node)
            if needs_private.get(nid):
                insn.private = f"_pt_p{n_private}"
                n_private += 1
            buf = insn.targets[0]
            if (not needs_global.get(nid) and self.buffers[buf].kind == "temporary"
                    and insn.private is not None):
                del self.buffers[buf]
                insn.targets = []
        self.private_of = {id(i.node): i.private for i in insns
                           if i.node is not None and i.private}
        self.insn_of = insn_of
        self.stored = stored

        chunks: list[list[_Insn]] = []
        for insn in insns:
            if insn.chunk == len(chunks):
                chunks.append([])
            chunks[insn.chunk].append(insn)
        # buffers used across chunks become program buffers (kernel args);
        # temporaries used within one chunk stay kernel temporaries
        written_in: dict[str, int] = {}
        read_in: dict[str, set] = {}
        for k, chunk in enumerate(chunks):
            for insn in chunk:
                for t in insn.targets:
                    written_in[t] = k
        for k, chunk in enumerate(chunks):
            for insn in chunk:
                for nid, _ in insn.refs:
                    name = self.array_name.get(nid)
                    if name is not None:
                        read_in.setdefault(name, set()).add(k)
        t_build = 0.0
        specs = []
        self._name_to_node = {v: n for n, v in self.array_name.items()}
        self._spec_keys: dict[tuple, str] = {}
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            spec = self._chunk_spec(chunk, k, written_in, read_in, True)
            t_build += time.perf_counter() - t0
            if spec["insns"]:
                specs.append(spec)
        kernels, launches = self._kernels(specs)
        self.times["loopy"] = t_build + self._loopy_time
        self.times["codegen"] = self._codegen_time
        # temporaries local to a chunk are not program buffers
        program_buffers = {n: b for n, b in self.buffers.items()
                           if b.kind != "temporary" or n in self._global_args}
        return ProgramPlan(
            kernels=kernels, launches=launches, buffers=program_buffers,
            derived_sizes=dict(self.derived_sizes),
            size_params=tuple(self.inputs.size_params),
            outputs=out_buffer,
            data_wrapper_buffers=tuple(self.array_name[id(dw)]
                                       for dw in self.data_wrappers),
            placeholder_buffers={name: self.array_name[id(ph)] for name, ph
                                 in self.inputs.placeholders.items()},
            n_instructions=len(insns))

    # }}}

    _global_args: set

    def _chunk_spec(self, chunk, k, written_in, read_in, canonical):
        """The loopy ingredients of one chunk, with canonical names when
        *canonical* (so structurally equal chunks compare equal)."""
        import loopy as lp
        from loopy.symbolic import IdentityMapper

        rename: dict[str, str] = {}
        counters = {"a": 0, "s": 0, "p": 0}

        def local(name: str, kind: str) -> str:
            if name not in rename:
                if name in self._user_named and not _CANONICAL_RE.fullmatch(name):
                    # named by the user (Named, PrefixNamed): kept readable
                    rename[name] = name
                elif canonical:
                    rename[name] = f"_pt_{kind}{counters[kind]}"
                    counters[kind] += 1
                else:
                    rename[name] = name
            return rename[name]

        # loop groups of this chunk
        groups: dict[tuple, str] = {}
        group_extents: dict[str, tuple] = {}

        def group_of(insn) -> str:
            key = (insn.level, tuple(_dim_key(d) for d in insn.shape))
            g = groups.get(key)
            if g is None:
                g = f"_pt_g{len(groups)}"
                groups[key] = g
                group_extents[g] = tuple(self.dim_expr(d) for d in insn.shape)
                for e in group_extents[g]:
                    if isinstance(e, prim.Variable):
                        sizes_used.add(e.name)
            return g

        builder = self
        sizes_used: set[str] = set()

        class Rewriter(IdentityMapper):
            """Group inames for canonical ones; private reads for
            identity reads of private arrays; local names."""

            def __init__(self, insn, inames):
                super().__init__()
                self.insn = insn
                self.subst = dict(zip(insn.canon, inames))
                self.red = {}
                for name, _, _ in insn.reduction_inames:
                    self.red[name] = f"_pt_red{n_red_chunk[0]}"
                    n_red_chunk[0] += 1

            def map_variable(self, expr, *args):
                name = expr.name
                if name in self.subst:
                    return prim.Variable(self.subst[name])
                if name in self.red:
                    return prim.Variable(self.red[name])
                if name in builder.inputs.size_params or \
                        name in builder.derived_sizes:
                    sizes_used.add(name)
                    return prim.Variable(local(name, "s"))
                return expr

            def map_reduction(self, expr, *args):
                return lp.Reduction(expr.operation,
                                    tuple(self.red.get(i, i) for i in expr.inames),
                                    self.rec(expr.expr, *args),
                                    allow_simultaneous=expr.allow_simultaneous)

            def map_subscript(self, expr, *args):
                name = expr.aggregate.name
                nid = name_to_node.get(name)
                if nid is not None:
                    dep = builder.insn_of.get(nid)
                    priv = builder.private_of.get(nid)
                    if (priv is not None and dep is not None
                            and dep.chunk == self.insn.chunk
                            and dep.level == self.insn.level
                            and (expr.index == tuple(prim.Variable(v)
                                                     for v in self.insn.canon)
                                 or (not self.insn.canon and not dep.shape))
                            and len(dep.shape) == len(self.insn.shape)):
                        return prim.Variable(local(priv, "p"))
                    arrays_used.add(name)
                return prim.Subscript(prim.Variable(local(name, "a")),
                                      tuple(self.rec(i, *args) for i in expr.index))

        name_to_node = self._name_to_node
        arrays_used: set[str] = set()
        lp_insns = []
        domains = []
        temps = {}
        level_insn_ids: dict[tuple, list[str]] = {}
        writer_id: dict[int, str] = {}
        # one phase per (level, loop group): loopy needs all instructions
        # of a device kernel to use the same hardware axes, and global
        # barriers between phases make each phase its own device kernel
        phase_keys = sorted({(insn.level, group_of(insn)) for insn in chunk
                             if not any(isinstance(d, int) and d == 0
                                        for d in insn.shape)},
                            key=lambda lg: (lg[0], int(lg[1][len("_pt_g"):])))
        levels = phase_keys
        barrier_of: dict[tuple, str] = {}
        for pos, lvl in enumerate(levels[:-1]):
            barrier_of[levels[pos + 1]] = f"_pt_barrier{pos}"
        n_insn = 0
        n_red_chunk = [0]
        reduction_groups: set[str] = set()
        for insn in chunk:
            if any(isinstance(d, int) and d == 0 for d in insn.shape):
                continue  # an empty array: nothing to write
            g = group_of(insn)
            if insn.reduction_inames:
                reduction_groups.add(g)
            inames = tuple(f"{g}_{i}" for i in range(len(insn.shape)))
            rw = Rewriter(insn, inames)
            expr = rw(insn.expr)
            for name, lo, hi in insn.reduction_inames:
                lo_e, hi_e = rw(lo) if not isinstance(lo, int) else lo, \
                    rw(hi) if not isinstance(hi, int) else hi
                domains.append((rw.red[name], lo_e, hi_e))
            deps = set()
            for nid, _ in insn.refs:
                if nid in writer_id:
                    deps.add(writer_id[nid])
            phase = (insn.level, g)
            if phase in barrier_of:
                deps.add(barrier_of[phase])
            within = frozenset(inames)
            idx = tuple(prim.Variable(v) for v in inames) or (0,)
            dtype = storage_dtype(insn.node.dtype) if insn.node is not None \
                else np.dtype(np.int64)
            ids = []
            if insn.private is not None:
                pname = local(insn.private, "p")
                temps[pname] = lp.TemporaryVariable(
                    pname, dtype, shape=(), address_space=lp.AddressSpace.PRIVATE)
                iid = f"_pt_insn{n_insn}"
                n_insn += 1
                lp_insns.append(lp.Assignment(
                    prim.Variable(pname), expr, id=iid,
                    depends_on=frozenset(deps), within_inames=within))
                ids.append(iid)
                expr = prim.Variable(pname)
                deps = {iid}
                writer_id[id(insn.node)] = iid
            for t in insn.targets:
                iid = f"_pt_insn{n_insn}"
                n_insn += 1
                arrays_used.add(t)
                lp_insns.append(lp.Assignment(
                    prim.Subscript(prim.Variable(local(t, "a")), idx), expr,
                    id=iid, depends_on=frozenset(deps), within_inames=within))
                ids.append(iid)
                if insn.node is not None and insn.private is None:
                    writer_id.setdefault(id(insn.node), iid)
            level_insn_ids.setdefault(phase, []).extend(ids)
        barriers = []
        for pos, lvl in enumerate(levels[:-1]):
            deps = set(level_insn_ids.get(lvl, ()))
            if pos:
                deps.add(f"_pt_barrier{pos - 1}")
            barriers.append(lp.BarrierInstruction(
                id=f"_pt_barrier{pos}", synchronization_kind="global",
                mem_kind="global", depends_on=frozenset(deps)))
        lp_insns.extend(barriers)

        # sizes as arguments: a chunk whose schedule does not depend on its
        # sizes gets them as kernel arguments, so that the steps of a
        # shrinking (or growing) loop are one kernel
        const_sizes: dict[str, int] = {}
        global_temps = any(
            self.buffers[n].kind == "temporary" and written_in.get(n) == k
            and not read_in.get(n, set()) - {k} for n in arrays_used)
        if self._sizes_as_arguments(group_extents, reduction_groups, temps,
                                    global_temps):
            for g, extents in group_extents.items():
                group_extents[g] = tuple(
                    prim.Variable(self._const_size(e, local, sizes_used,
                                                   const_sizes))
                    if isinstance(e, int) else e for e in extents)

        def dim(d):
            if isinstance(d, str):
                sizes_used.add(d)
                return prim.Variable(local(d, "s"))
            if const_sizes and d > 1:
                return prim.Variable(local(self._const_size(
                    d, local, sizes_used, const_sizes), "s"))
            return d

        # arguments: arrays crossing the chunk boundary or program inputs
        # and outputs; others are kernel temporaries
        args = []
        bindings = {}
        for name in sorted(arrays_used, key=lambda n: rename.get(n, n)):
            spec = self.buffers[name]
            shape = tuple(dim(d) for d in spec.shape) or (1,)
            lname = local(name, "a")
            crosses = spec.kind != "temporary" or (
                written_in.get(name) != k or read_in.get(name, set()) - {k})
            if crosses:
                self._global_args.add(name)
                args.append(lp.GlobalArg(lname, storage_dtype(spec.dtype),
                                         shape=shape))
                bindings[lname] = name
            else:
                temps[lname] = lp.TemporaryVariable(
                    lname, storage_dtype(spec.dtype), shape=shape,
                    address_space=lp.AddressSpace.GLOBAL)
        # 64-bit indices if a size passed as argument needs them; else
        # such sizes are 32-bit like the indices they bound (a 64-bit bound
        # made a cache-resident 1-D stencil ~15% slower on PoCL)
        wide = any(v > _INT32_MAX for v in const_sizes.values())
        for name in sorted(sizes_used, key=lambda n: local(n, "s")):
            lname = local(name, "s")
            args.append(lp.ValueArg(lname, np.int32 if name in const_sizes
                                    and not wide else np.int64))
            bindings[lname] = name

        # domains
        dom_strs = []
        params = ",".join(sorted(a.name for a in args if isinstance(a, lp.ValueArg)))
        for g, extents in group_extents.items():
            if not extents:
                continue
            inames = [f"{g}_{i}" for i in range(len(extents))]
            conds = " and ".join(
                f"0 <= {i} < {self._isl(e, local)}" for i, e in zip(inames, extents))
            dom_strs.append(f"[{params}] -> {{[{','.join(inames)}]: {conds}}}")
        for name, lo, hi in domains:
            dom_strs.append(f"[{params}] -> {{[{name}]: {self._isl(lo, local)} <= "
                            f"{name} < {self._isl(hi, local)}}}")
        helpers = set()
        for insn in chunk:
            helpers |= insn.helpers
        # the persistent key renders the chunk as text; rendering is the
        # slow part, so chunks equal to an earlier one (the steps of a
        # time loop) find their key by (hashed) structural equality
        structure = (wide, tuple(dom_strs),
                     tuple((type(i).__name__, i.id, getattr(i, "assignee", None),
                            getattr(i, "expression", None), i.depends_on,
                            i.within_inames) for i in lp_insns),
                     tuple((a.name, a.dtype, getattr(a, "shape", None))
                           for a in args),
                     tuple((t.name, t.dtype, t.shape, t.address_space)
                           for t in temps.values()),
                     tuple(sorted(helpers)))
        key = self._spec_keys.get(structure)
        if key is None:
            text = "\n".join([f"wide={wide}", *dom_strs,
                              *(str(i) for i in lp_insns),
                              *(f"{a.name}:{a.dtype}:{getattr(a, 'shape', '')}"
                                for a in args),
                              *(f"{t.name}:{t.dtype}:{t.shape}:{t.address_space}"
                                for t in temps.values()),
                              *sorted(helpers)])
            key = hashlib.sha256(text.encode()).hexdigest()
            self._spec_keys[structure] = key
        return {"key": key, "domains": dom_strs, "insns": lp_insns,
                "args": args, "temps": list(temps.values()),
                "bindings": bindings, "helpers": helpers,
                "groups": group_extents, "reduction_groups": reduction_groups,
                "const_sizes": {local(n, "s"): v for n, v in const_sizes.items()},
                "name": None}  # set by _kernels

    def _sizes_as_arguments(self, group_extents, reduction_groups, temps,
                            global_temps: bool) -> bool:
        """Whether a chunk takes its constant sizes as arguments: only when
        that cannot change its code beyond the sizes -- no reduction (the
        register-blocked and small-operator schedules need constant
        extents), no global temporary (allocated from its shape), every
        extent constant, and every last axis at least a work-group long
        (a shorter one is scheduled by its extent)."""
        from pytato_like.target.loopy.schedule import WORK_GROUP_SIZE
        if not self.options.get("sizes_as_arguments", True):
            return False
        if reduction_groups or not group_extents or global_temps:
            return False
        if any(t.address_space != _private_space() for t in temps.values()):
            return False
        for extents in group_extents.values():
            if not all(isinstance(e, int) for e in extents):
                return False
            if extents and extents[-1] < WORK_GROUP_SIZE:
                return False
        return True

    def _const_size(self, value: int, local, sizes_used, const_sizes) -> str:
        """The program size name standing for the constant *value* (one per
        value), noted as used by the chunk."""
        key = ("const", value)
        name = self._size_by_key.get(key)
        if name is None:
            name = self.vng("_pt_size")
            self._size_by_key[key] = name
            self.derived_sizes[name] = value
        sizes_used.add(name)
        const_sizes[name] = value
        local(name, "s")  # numbered in order of first use: deterministic
        return name

    def _isl(self, e, local) -> str:
        if isinstance(e, prim.Variable):
            n = e.name
            if n in self.inputs.size_params or n in self.derived_sizes:
                return local(n, "s")
            return n
        return str(e)

    def _assign_chunks(self, insns, insn_of, max_insns) -> None:
        """Order *insns* by level and loop group and cut them into chunks:
        a chunk is one loop group of one level (one device kernel, no
        global barrier inside) of at most *max_insns* instructions. The
        body of a time step is then one chunk whatever the number of
        steps, and every step launches the same compiled kernel."""
        first_seen: dict[tuple, int] = {}

        def phase(insn) -> tuple:
            key = (insn.level, tuple(_dim_key(d) for d in insn.shape))
            return insn.level, first_seen.setdefault(key, len(first_seen))

        ordered = sorted(insns, key=phase)
        # same-level reads are elementwise reads in the same loop group, so
        # this order is topological; symbolic shapes equal but not
        # identical could break that: keep the original order then
        position = {id(insn): i for i, insn in enumerate(ordered)}
        if all(position[id(insn_of[nid])] < position[id(insn)]
               for insn in ordered for nid, _ in insn.refs if nid in insn_of):
            insns[:] = ordered
        chunk, count, previous = -1, 0, None
        for insn in insns:
            key = phase(insn)
            if key != previous or count == max_insns:
                chunk, count, previous = chunk + 1, 0, key
            insn.chunk = chunk
            count += 1

    def _kernels(self, specs) -> tuple[list[KernelSource], list[Launch]]:
        """One :class:`KernelSource` per distinct chunk structure (from the
        process and disk kernel cache when another program -- another
        length of the same time loop, another part of a partition --
        generated it before) and one :class:`Launch` per chunk; all
        kernels of the program share one OpenCL program text."""
        from pytato_like.target.loopy import cache
        from pytato_like.target.loopy.schedule import parameters
        function_name = self.options.get("function_name", _DEFAULT_FUNCTION_NAME)
        distinct = list(dict.fromkeys(spec["key"] for spec in specs))
        kernels: list[KernelSource] = []
        kernel_index: dict[str, int] = {}
        launches: list[Launch] = []
        for spec in specs:
            skey = spec["key"]
            if skey not in kernel_index:
                # kernels are named after their structure: the same
                # structure has the same name (and code) in every program,
                # and kernels of different programs built together do not
                # clash; a lone kernel keeps a name the user chose
                spec["name"] = (function_name if len(distinct) == 1
                                and function_name != _DEFAULT_FUNCTION_NAME
                                else f"{function_name}_{skey[:10]}")
                spec["wide_indices"] = _needs_wide_indices(spec)
                key = hashlib.sha256(repr((
                    skey, spec["name"], parameters(),
                    spec["wide_indices"])).encode()).hexdigest()
                source = cache.get_kernel(key)
                knl = None
                if source is None or self.need_translation_units:
                    knl = self._translation_unit(spec)
                if source is None:
                    t0 = time.perf_counter()
                    source = self._generate(knl, spec, key)
                    cache.put_kernel(key, source)
                    progress(f"kernel {len(kernels) + 1} of "
                             f"{len(distinct)} (loopy, code generation)",
                             time.perf_counter() - t0)
                kernel_index[skey] = len(kernels)
                kernels.append(source)
            launches.append(Launch(kernel_index[skey], spec["bindings"]))
        code = merge_device_code([k.device_code for k in kernels])
        kernels = [dataclasses.replace(k, program_code=code) for k in kernels]
        return kernels, launches

    def _translation_unit(self, spec):
        import loopy as lp

        from pytato_like.target.loopy.functions import register_helpers
        from pytato_like.target.loopy.schedule import parallelize

        t0 = time.perf_counter()
        knl = lp.make_kernel(
            spec["domains"] or "{:}", spec["insns"],
            [*spec["args"], *spec["temps"]],
            lang_version=(2018, 2), target=lp.PyOpenCLTarget(),
            name=spec["name"], seq_dependencies=False,
            index_dtype=np.int64 if spec["wide_indices"] else np.int32,
            # index expressions are guarded by Ifs (concatenate, padding)
            # and sizes may be derived: loopy cannot prove bounds there
            options=lp.Options(enforce_array_accesses_within_bounds="no_check",
                               return_dict=True),
            silenced_warnings=["inferred_iname", "unused_inames",
                               "single_writer_after_creation"])
        knl = register_helpers(knl, spec["helpers"])
        knl = parallelize(knl, spec["groups"],
                          reduction_groups=spec["reduction_groups"])
        self.translation_units.append(knl)
        from pytato_like.target.loopy.report import logger
        if logger.isEnabledFor(logging.DEBUG):  # PYTATO_LIKE_REPORT=debug
            logger.debug("loopy kernel %s:\n%s", spec["name"], knl)
        self._loopy_time += time.perf_counter() - t0
        return knl

    def _generate(self, knl, spec, key: str) -> KernelSource:
        import loopy as lp

        from pytato_like.target.loopy import cache as _cache
        t0 = time.perf_counter()
        _cache.CODEGEN_CALLS += 1
        cg = lp.generate_code_v2(knl)
        device = cg.device_code()
        host = cg.host_code()
        self._codegen_time += time.perf_counter() - t0
        arg_names = tuple(a.name for a in spec["args"])
        return KernelSource(key, device, host, f"_lpy_host_{spec['name']}",
                            arg_names)


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


_INT_LITERAL = re.compile(r"\d+")
_INT32_MAX = 2**31 - 1


def _private_space():
    import loopy as lp
    return lp.AddressSpace.PRIVATE


def _needs_wide_indices(spec: dict) -> bool:
    """Whether a kernel's loop and index variables must be 64-bit: when a
    loop bound reaches 2^31 or a size is only known at run time (a size
    parameter; constant sizes passed as arguments count by their value).
    Otherwise they stay 32-bit, which is cheaper on devices."""
    import loopy as lp
    const = spec.get("const_sizes", {})
    if any(v > _INT32_MAX for v in const.values()):
        return True
    if any(isinstance(arg, lp.ValueArg) and arg.name not in const
           for arg in spec["args"]):
        return True
    for domain in spec["domains"] or ():
        text = domain if isinstance(domain, str) else str(domain)
        if any(int(m) > _INT32_MAX for m in _INT_LITERAL.findall(text)):
            return True
    return False


_INDEX_MACROS = ("#define lid(", "#define gid(")


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

