"""The loopy program pytato hands out: one translation unit, one entrypoint.

pytato's users (arraycontext, meshmode, grudge, mirgecom) inspect and
transform the loopy program of a compiled DAG: ``t_unit.default_entrypoint``,
arguments looked up by placeholder name, stored temporaries by their
:class:`~pytato_like.tags.Named` tag, inames split and tagged. This module
builds that program, :func:`build_translation_unit`:

* exactly one kernel, named ``function_name``, the entrypoint;
* its arguments: every placeholder under its own name, every data wrapper
  under its name (``_pt_data<n>`` when it has none), every size parameter
  as a value argument, every output under its output name (``_pt_out``
  for a single-array result), written only;
* every array the cost model stores (:func:`~pytato_like.transform.
  materialize_cost.decide_storage`, so shared subexpressions are never
  recomputed) is one instruction over inames of its own, ``<name>_dim<i>``,
  into a global temporary named by its naming tag or ``_pt_tmp<n>``;
  instructions depend on the writers of what they read;
* no schedule: every loop is sequential until the user's transformation
  parallelises it. The kernel sets loopy's ``insert_gbarriers`` so a
  transformation that gives two dependent loops their own work-groups
  gets the global barrier between them (loopy then emits one device kernel
  per barrier-free stretch).

The fast path stays ours: a program whose unit nobody transforms (or
transforms without a change to its code, such as tagging the kernel) runs
the plan of :mod:`~pytato_like.target.loopy.codegen` -- fused, scheduled,
replayed kernels. A unit that was changed runs as it is, through loopy's
own executor (:class:`UnitRunner`).

.. autoclass:: UnitInterface
.. autofunction:: build_translation_unit
.. autofunction:: same_code
.. autoclass:: UnitRunner
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import pymbolic.primitives as prim

# the package's own outlined kinds register on their modules' import (the
# check for owners other than sparse products reads the registry)
import pytato_like.target.loopy.external
import pytato_like.target.loopy.function_calls
import pytato_like.target.loopy.sparse  # noqa: F401
from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DataWrapper,
    InputArgumentBase,
    Placeholder,
    ShapeComponent,
)
from pytato_like.diagnostic import PytatoLikeError
from pytato_like.sparse import CSRMatmul
from pytato_like.tags import ForceValueArgTag
from pytato_like.target import gather_program_inputs, unwrap_named
from pytato_like.target.loopy.cut_results import ResultsAsPlaceholders
from pytato_like.target.loopy.device import to_device, to_host
from pytato_like.target.loopy.instructions import lower_stored_arrays
from pytato_like.target.loopy.naming import CL_FUNCTIONS, C_KEYWORDS, ProgramNames
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.plan import BufferSpec, storage_dtype
from pytato_like.target.loopy.outlined_kinds import OWNERS

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl
    import pyopencl.array as cla
    from loopy.symbolic import SubstitutionMapper
    from pymbolic.typing import Expression
    from pyopencl.typing import Allocator, WaitList

#: the output name of a single-array result (pytato's)
SINGLE_OUTPUT_NAME = "_pt_out"


@dataclasses.dataclass
class UnitInterface:
    """A translation unit and how a call's values map onto its arguments."""

    t_unit: lp.TranslationUnit
    #: placeholder name -> argument name
    placeholder_args: dict[str, str]
    #: (argument name, data wrapper), in argument order
    data_args: list[tuple[str, DataWrapper]]
    #: output name -> argument name
    output_args: dict[str, str]
    #: argument name -> pymbolic expression over size parameter names, for
    #: the derived sizes (``2*n``) that cannot be written into a domain
    derived_size_args: dict[str, Expression]
    #: names of the outputs whose dtype is bool (stored as int8)
    bool_outputs: frozenset[str]
    #: argument names of the 0-d placeholders passed by value
    #: (:class:`~pytato_like.tags.ForceValueArgTag`)
    value_args: frozenset[str] = frozenset()

    @property
    def entrypoint(self) -> str:
        (name,) = self.t_unit.entrypoints
        return name


def _variable_names(expr: Expression) -> list[str]:
    """The names of the variables *expr* depends on, sorted."""
    from pymbolic.mapper.dependency import DependencyMapper
    return sorted(getattr(v, "name", str(v))
                  for v in DependencyMapper(composite_leaves=False)(expr))


def _isl_expr(expr: Expression) -> str | None:
    """*expr* (an int or pymbolic expression over size names) in ISL
    syntax, if it is affine (None otherwise)."""
    import islpy as isl
    text = str(expr)
    params = _variable_names(expr) if not isinstance(expr, int) else []
    try:
        isl.Set(f"[{','.join(params)}] -> {{[_pt_i]: 0 <= _pt_i < {text}}}")
    except isl.Error:
        return None
    return text


class _UnitBuilder:
    """Builds the one-kernel translation unit of *outputs*."""

    def __init__(self, outputs: dict[str, Array], options: CodegenOptions,
                 lp_options: lp.Options, function_name: str) -> None:
        self.outputs = outputs
        self.options = options
        self.lp_options = lp_options
        self.function_name = function_name

    def build(self) -> UnitInterface:
        import loopy as lp

        # (the code generator too: a program loaded from the cache runs
        # without it)
        from pytato_like.target.loopy.codegen import PlanBuilder
        from pytato_like.target.loopy.evaluation_order import OrderedPyOpenCLTarget
        from pytato_like.target.loopy.functions import register_helpers

        outputs, sparse = _cut_sparse_products(self.outputs)
        planner = PlanBuilder(outputs, self.options)
        out_nodes, order, costs = planner._materialize()
        inputs = planner.inputs
        if sparse:
            # inputs that only sparse products read are inputs too
            inputs = gather_program_inputs(topological_order([
                *(planner.outputs[name] for name in planner.outputs),
                *(a for site in sparse for a in site.input_arguments.values())]))
        names = ProgramNames(inputs)
        # results of sparse products: temporaries, no arguments
        product_results = {site.result.name for site in sparse}
        # data wrappers under their own names, as pytato names them
        for dw in names.data_wrappers:
            if dw.name is not None and dw.name.isidentifier() \
                    and not names.vng.is_name_conflicting(dw.name) \
                    and names.safe(dw.name) == dw.name:
                names.vng.add_name(dw.name)
                names.array_name[id(dw)] = dw.name
        buffers: dict[str, BufferSpec] = {}
        for ph in inputs.placeholders.values():
            buf = names.array_name[id(ph)]
            buffers[buf] = BufferSpec(buf, names.shape_of(ph), ph.dtype,
                                      "temporary" if ph.name in product_results
                                      else "placeholder")
        for dw in names.data_wrappers:
            buf = names.array_name[id(dw)]
            buffers[buf] = BufferSpec(buf, names.shape_of(dw), dw.dtype, "data")
        outputs_of: dict[int, list[str]] = {}
        out_buffer: dict[str, str] = {}
        for name, node in out_nodes.items():
            clash = (not name.isidentifier() or name in C_KEYWORDS
                     or name in CL_FUNCTIONS or name.startswith("_lpy")
                     or names.vng.is_name_conflicting(name))
            buf = names.fresh(f"{name}_out" if name.isidentifier() else "_pt_out") \
                if clash else name
            names.vng.add_name(buf)
            out_buffer[name] = buf
            outputs_of.setdefault(id(node), []).append(buf)
            buffers[buf] = BufferSpec(buf, names.shape_of(node), node.dtype,
                                      "output")
        insns, _insn_of, _stored = lower_stored_arrays(
            order, out_nodes, costs, names, buffers, outputs_of, out_buffer,
            self.options)
        # the arguments of sparse products are temporaries, not outputs
        computed_buffers: dict[str, str] = {}
        for site in sparse:
            for value_name in site.computed_arguments.values():
                computed_buffers[value_name] = out_buffer.pop(value_name)
                buf = computed_buffers[value_name]
                buffers[buf] = dataclasses.replace(buffers[buf], kind="temporary")

        # derived sizes: written into domains and expressions where affine,
        # value arguments otherwise
        size_subst: dict[str, Expression] = {}
        derived_args: dict[str, Expression] = {}
        for sname, expr in names.derived_sizes.items():
            if isinstance(expr, int):
                size_subst[sname] = expr
            elif _isl_expr(expr) is not None:
                size_subst[sname] = expr
            else:
                derived_args[sname] = expr

        def extent(d: str | Expression) -> Expression:
            if isinstance(d, str):
                return size_subst.get(d, prim.Variable(d))
            return d

        def isl(e: Expression) -> str:
            if isinstance(e, prim.Variable) and e.name in size_subst:
                e = size_subst[e.name]
            return str(e)

        params = sorted({*inputs.size_params, *derived_args})
        param_decl = f"[{','.join(params)}] -> " if params else ""
        zero_d = {n for n, b in buffers.items() if not b.shape}

        domains: list[str] = []
        lp_insns: list = []
        writer_ids: dict[int, list[str]] = {}
        product_ids = []
        for site in sparse:
            iid = names.fresh(f"{names.array_name[id(site.result)]}_store")
            product_ids.append(iid)
            writer_ids[id(site.result)] = [iid]
        helpers: set = set()
        # pytato copies array tags onto the loopy variables and axis tags
        # onto the inames, but for the tag types the caller filters out
        array_filter = tuple(self.options.array_tags_not_propagated)
        axis_filter = tuple(self.options.axis_tags_not_propagated)
        var_tags: dict[str, frozenset] = {}
        iname_tags: dict[str, frozenset] = {}

        def kept(tags: frozenset, dropped: tuple) -> frozenset:
            return frozenset(t for t in tags if not isinstance(t, dropped))

        for ph in inputs.placeholders.values():
            var_tags[names.array_name[id(ph)]] = kept(ph.tags, array_filter)
        for dw in names.data_wrappers:
            var_tags[names.array_name[id(dw)]] = kept(dw.tags, array_filter)
        for insn in insns:
            base = insn.targets[0]
            inames = [names.fresh(f"{base}_dim{i}") for i in range(len(insn.canon))]
            if inames:
                conds = " and ".join(
                    f"0 <= {i} < {isl(_dim_expr(names, d))}"
                    for i, d in zip(inames, insn.shape, strict=True))
                domains.append(f"{param_decl}{{[{','.join(inames)}]: {conds}}}")
            stored = insn.node
            if stored is not None:
                for t in insn.targets:
                    var_tags.setdefault(t, kept(stored.tags, array_filter))
                if insn.placement is None and len(inames) == stored.ndim:
                    for iname, axis in zip(inames, stored.axes, strict=True):
                        tags = kept(axis.tags, axis_filter)
                        if tags:
                            iname_tags[iname] = tags
            subst: dict[str, Expression] = {c: prim.Variable(i)
                                     for c, i in zip(insn.canon, inames, strict=True)}
            subst.update(size_subst)
            for name, lo, hi in insn.reduction_inames:
                domains.append(f"{param_decl}{{[{name}]: {isl(lo)} <= {name} "
                               f"< {isl(hi)}}}")
            mapper = _unit_rewriter(subst, zero_d)
            expr = mapper(insn.expr)
            helpers |= insn.helpers
            deps: set[str] = set()
            for nid, _ in insn.refs:
                deps.update(writer_ids.get(nid, ()))
            idx: tuple = tuple(prim.Variable(i) for i in inames)
            previous: list[str] = []
            if insn.placement is not None:
                offset = insn.placement.offset
                if not isinstance(offset, int):
                    offset = mapper(names.dim_expr(offset))
                idx = insn.placement.index(idx, offset)
                previous = writer_ids.get(id(insn.node), [])
                deps.update(previous)
            ids = []
            for t in insn.targets:
                iid = names.fresh(f"{t}_store")
                assignee = prim.Variable(t) if t in zero_d else \
                    prim.Subscript(prim.Variable(t), idx)
                lp_insns.append(lp.Assignment(
                    assignee, expr, id=iid, depends_on=frozenset(deps),
                    within_inames=frozenset(inames),
                    no_sync_with=frozenset((p, "any") for p in previous)))
                ids.append(iid)
            if insn.node is not None:
                writer_ids[id(insn.node)] = [*previous, *ids]

        private_temps = []
        for site, iid in zip(sparse, product_ids, strict=True):
            arg_buffers: dict[str, str] = {}
            sp_deps: set[str] = set()
            for arg, ary in site.input_arguments.items():
                arg_buffers[arg] = names.array_name[id(ary)]
                sp_deps.update(writer_ids.get(id(ary), ()))
            for arg, value_name in site.computed_arguments.items():
                arg_buffers[arg] = computed_buffers[value_name]
                sp_deps.update(writer_ids.get(id(out_nodes[value_name]), ()))
            sp_domains, sp_insns, sp_temps = _sparse_product_instructions(
                site, iid, names, arg_buffers, sp_deps, isl)
            domains.extend(sp_domains)
            lp_insns.extend(sp_insns)
            private_temps.extend(sp_temps)

        def arg_shape(spec: BufferSpec) -> tuple:
            return tuple(extent(d) for d in spec.shape)

        args: list = []
        placeholder_args = {}
        value_args = set()
        for pname, ph in inputs.placeholders.items():
            if pname in product_results:
                continue
            buf = names.array_name[id(ph)]
            placeholder_args[pname] = buf
            if not ph.shape and ph.tags_of_type(ForceValueArgTag):
                # a scalar passed by value, as pytato passes it
                value_args.add(buf)
                args.append(lp.ValueArg(buf, storage_dtype(ph.dtype)))
                continue
            args.append(lp.GlobalArg(buf, storage_dtype(ph.dtype),
                                     shape=arg_shape(buffers[buf]),
                                     is_input=True, is_output=False,
                                     tags=var_tags.get(buf, frozenset())))
        data_args = []
        for dw in names.data_wrappers:
            buf = names.array_name[id(dw)]
            data_args.append((buf, dw))
            args.append(lp.GlobalArg(buf, storage_dtype(dw.dtype),
                                     shape=arg_shape(buffers[buf]),
                                     is_input=True, is_output=False,
                                     tags=var_tags.get(buf, frozenset())))
        for name in params:
            args.append(lp.ValueArg(name, np.int64))
        for name, buf in out_buffer.items():
            args.append(lp.GlobalArg(buf, storage_dtype(buffers[buf].dtype),
                                     shape=arg_shape(buffers[buf]),
                                     is_input=False, is_output=True,
                                     tags=var_tags.get(buf, frozenset())))
        temps = [lp.TemporaryVariable(n, storage_dtype(b.dtype), shape=arg_shape(b),
                                      address_space=lp.AddressSpace.GLOBAL,
                                      tags=var_tags.get(n, frozenset()))
                 for n, b in buffers.items() if b.kind == "temporary"]
        temps.extend(private_temps)
        options = self.lp_options.copy(
            # index expressions are guarded by Ifs (concatenate, padding):
            # loopy cannot prove their bounds
            enforce_array_accesses_within_bounds="no_check",
            insert_gbarriers=True)
        knl = lp.make_kernel(
            domains or "{:}", lp_insns or [], [*args, *temps],
            lang_version=(2018, 2), target=OrderedPyOpenCLTarget(),
            name=self.function_name, seq_dependencies=False, options=options,
            silenced_warnings=["inferred_iname", "unused_inames",
                               "single_writer_after_creation"])
        knl = register_helpers(knl, helpers)
        if iname_tags:
            knl = lp.tag_inames(knl, {i: list(t) for i, t in iname_tags.items()})
        return UnitInterface(
            t_unit=knl, placeholder_args=placeholder_args, data_args=data_args,
            output_args=out_buffer, derived_size_args=derived_args,
            value_args=frozenset(value_args),
            bool_outputs=frozenset(n for n, node in out_nodes.items()
                                   if n in out_buffer and node.dtype == np.bool_))


@dataclasses.dataclass
class _SparseProduct:
    """A :class:`~pytato_like.sparse.CSRMatmul` of the unit: the
    placeholder standing for its result in the rest of the DAG, and where
    each of its arguments comes from -- an input node, or an extra output
    (named in :attr:`computed_arguments`) that the unit computes into a
    temporary."""

    node: CSRMatmul
    #: the placeholder standing for the product
    result: Placeholder
    input_arguments: dict[str, Array]
    computed_arguments: dict[str, str]


_SPARSE_ARGUMENTS = ("elem_values", "elem_col_indices", "row_starts", "array")


def _cut_sparse_products(outputs: dict[str, Array]
                         ) -> tuple[dict[str, Array], list[_SparseProduct]]:
    """*outputs* with every sparse product replaced by a placeholder and
    the products' computed arguments added as outputs; the products."""
    order = topological_order(list(outputs.values()))
    others = sorted({type(n).__name__ for n in order
                     if type(n) in OWNERS and not isinstance(n, CSRMatmul)})
    if others:
        raise PytatoLikeError(
            f"no one-entrypoint translation unit for a program with "
            f"{', '.join(others)} nodes yet (inline function calls first; "
            f"calls of loopy kernels run as programs of their own)")
    products = [node for node in order if isinstance(node, CSRMatmul)]
    if not products:
        return outputs, []
    taken = {getattr(n, "name", None) for n in order}
    result_names = {}
    for k, node in enumerate(products):
        name = f"_pt_csr{k}"
        while name in taken:
            name = "_" + name
        result_names[id(node)] = name
    cutter = ResultsAsPlaceholders(result_names)
    new_outputs = {name: cutter(ary) for name, ary in outputs.items()}
    sites = []
    for k, node in enumerate(products):
        site = _SparseProduct(node, cast(Placeholder, cutter(node)), {}, {})
        for arg in _SPARSE_ARGUMENTS:
            cut = cutter(getattr(node, arg))
            if isinstance(cut, InputArgumentBase):
                site.input_arguments[arg] = cut
            else:
                value_name = f"{result_names[id(node)]}_{arg}"
                new_outputs[value_name] = cut
                site.computed_arguments[arg] = value_name
        sites.append(site)
    return new_outputs, sites


def _sparse_product_instructions(site: _SparseProduct, iid: str,
                                 names: ProgramNames,
                                 arg_buffers: dict[str, str], deps: set[str],
                                 isl: Callable[[Expression], str]
                                 ) -> tuple[list[str], list, list]:
    """The domains, instructions and private temporaries computing the
    sparse product *site* (its instruction id *iid*, its arguments in
    *arg_buffers*, written by the instructions *deps*): a loop over rows,
    each summing over its nonzeros between bounds read from
    ``row_starts`` -- loop bounds that depend on data, which loopy takes
    from private temporaries."""
    import loopy as lp
    from loopy.symbolic import Reduction

    node = site.node
    out = names.array_name[id(site.result)]
    row, nz = names.fresh(f"{out}_row"), names.fresh(f"{out}_nz")
    start, length = names.fresh(f"{out}_rowstart"), names.fresh(f"{out}_rowlen")
    comp = names.fresh(f"{out}_dim1") if len(node.shape) == 2 else None
    row_inames = [row] + ([comp] if comp else [])
    conds = [f"0 <= {row} < {node.shape[0]}"]
    params: list[str] = []
    if comp:
        extent = _dim_expr(names, node.shape[1])
        conds.append(f"0 <= {comp} < {isl(extent)}")
        if not isinstance(extent, int):
            params = _variable_names(extent)
    prefix = f"[{','.join(params)}] -> " if params else ""
    domains = [f"{prefix}{{[{','.join(row_inames)}]: {' and '.join(conds)}}}",
               f"[{length}] -> {{[{nz}]: 0 <= {nz} < {length}}}"]
    dtype = storage_dtype(node.row_starts.dtype)
    temps = [lp.TemporaryVariable(v, dtype, shape=(),
                                  address_space=lp.AddressSpace.PRIVATE)
             for v in (start, length)]
    var = prim.Variable
    starts = var(arg_buffers["row_starts"])
    entry = prim.Sum((var(start), var(nz)))
    col = prim.Subscript(var(arg_buffers["elem_col_indices"]), (entry,))
    x_idx = (col, var(comp)) if comp else (col,)
    product = prim.Product((
        prim.Subscript(var(arg_buffers["elem_values"]), (entry,)),
        prim.Subscript(var(arg_buffers["array"]), x_idx)))
    within = frozenset(row_inames)
    insns = [
        lp.Assignment(var(start), prim.Subscript(starts, (var(row),)),
                      id=f"{iid}_start", depends_on=frozenset(deps),
                      within_inames=frozenset([row])),
        lp.Assignment(var(length), prim.Sum((
            prim.Subscript(starts, (prim.Sum((var(row), 1)),)),
            prim.Product((-1, var(start))))),
            id=f"{iid}_length", depends_on=frozenset([f"{iid}_start"]),
            within_inames=frozenset([row])),
        lp.Assignment(prim.Subscript(var(out), tuple(var(i) for i in row_inames)),
                      Reduction("sum", (nz,), product), id=iid,
                      depends_on=frozenset([*deps, f"{iid}_length"]),
                      within_inames=within),
    ]
    return domains, insns, temps


def _dim_expr(names: ProgramNames, d: ShapeComponent) -> int | prim.Variable:
    """A shape component as an int or a size variable."""
    return d if isinstance(d, int) else names.dim_expr(d)


def _unit_rewriter(subst: dict[str, Expression], zero_d: set[str]
                   ) -> SubstitutionMapper:
    """A :class:`_UnitRewriter` (made here: loopy is imported on use)."""
    from loopy.symbolic import SubstitutionMapper

    class _UnitRewriter(SubstitutionMapper):
        """Canonical inames to the instruction's own, derived sizes to
        their expressions, reads of 0-d buffers (``x[0]``) to ``x``."""

        def map_subscript(self, expr, *args, **kwargs):
            if isinstance(expr.aggregate, prim.Variable) \
                    and expr.aggregate.name in zero_d:
                return expr.aggregate
            return super().map_subscript(expr, *args, **kwargs)

    from pymbolic.mapper.substitutor import make_subst_func
    return _UnitRewriter(make_subst_func(subst))


def unit_data_wrappers(outputs: dict[str, Array]) -> list[DataWrapper]:
    """The data wrappers of the unit of *outputs* (with no sparse
    products), in the order of its data arguments."""
    inputs = gather_program_inputs(topological_order(
        [unwrap_named(a) for a in outputs.values()]))
    # each once, as ProgramNames numbers them
    return list({id(dw): dw for dw in inputs.data_wrappers}.values())


def build_translation_unit(outputs: dict[str, Array], options: CodegenOptions,
                           lp_options: lp.Options, function_name: str
                           ) -> UnitInterface:
    """The one-entrypoint translation unit computing *outputs* (output
    name -> array; a single-array result is named ``_pt_out``)."""
    return _UnitBuilder(outputs, options, lp_options, function_name).build()


def same_code(a: lp.TranslationUnit, b: lp.TranslationUnit) -> bool:
    """Whether the translation units *a* and *b* generate the same code:
    equal but for the tags of their entrypoint (arraycontext tags the
    kernel it compiles; tags do not change code)."""
    if a is b:
        return True
    if set(a.entrypoints) != set(b.entrypoints):
        return False
    (name,) = a.entrypoints
    ka, kb = a[name], b[name]
    if ka.tags != kb.tags:
        b = b.with_kernel(kb.copy(tags=ka.tags))
    return bool(a == b)


class UnitRunner:
    """Runs a (transformed) translation unit through loopy's executor, with
    the values of a call of the bound program."""

    def __init__(self, interface: UnitInterface, t_unit: lp.TranslationUnit
                 ) -> None:
        self.interface = interface
        self.t_unit = t_unit
        self._executors: dict[cl.Context, lp.ExecutorBase] = {}

    def executor(self, context: cl.Context) -> lp.ExecutorBase:
        exe = self._executors.get(context)
        if exe is None:
            exe = self._executors[context] = self.t_unit.executor(context)
        return exe

    def __call__(self, queue: cl.CommandQueue, data_buffers: dict[str, cla.Array],
                 values: Mapping[str, object], sizes: dict[str, int],
                 allocator: Allocator | None, wait_for: WaitList, out_host: bool
                 ) -> tuple[cl.Event | None, dict[str, object]]:
        from pymbolic import evaluate

        iface = self.interface
        kwargs: dict[str, object] = {}
        for pname, arg in iface.placeholder_args.items():
            value = values[pname]
            if arg in iface.value_args:
                value = value.get(queue=queue) if hasattr(value, "get") else value
                kwargs[arg] = np.asarray(value)[()]
            else:
                kwargs[arg] = to_device(queue, value)
        kwargs.update(data_buffers)
        kwargs.update(sizes)
        for arg, expr in iface.derived_size_args.items():
            kwargs[arg] = int(evaluate(expr, sizes))
        entry = self.t_unit.default_entrypoint
        kwargs = {k: v for k, v in kwargs.items() if k in entry.arg_dict}
        evt, out = self.executor(queue.context)(
            queue, allocator=allocator, wait_for=wait_for, out_host=False,
            **kwargs)
        if not isinstance(out, dict):
            out = dict(zip([a.name for a in entry.args if a.is_output], out,
                           strict=True))
        results = {}
        for name, arg in iface.output_args.items():
            ary = out[arg]
            dtype = np.dtype(np.bool_) if name in iface.bool_outputs else ary.dtype
            if out_host:
                ary = to_host(queue, ary, dtype)
            elif dtype == np.bool_:
                ary = ary.view(np.bool_)
            results[name] = ary
        return evt, results
