"""Default parallel schedule: loop-group inames to OpenCL work-groups and
work-items, without user transformations.

For a loop group with inames ``(i_0, ..., i_{d-1})`` (``i_{d-1}`` the
contiguous axis):

* in groups without reductions, unless their contiguous axis is short
  and not their only axis (next rule),
  ``i_{d-1}`` is split by ``contiguous_run``: the outer part is
  ``g.0``, the inner part a loop that each work-item (work-groups of one)
  runs over consecutive elements, which LLVM vectorises with the loop
  bound as its only condition. PoCL's work-group compiler vectorises the
  ``l.0`` loop of the rule below only when the body has no condition,
  and the last work-group's bounds check is one: a one-dimensional
  stencil step ran 4-8x faster per kernel as runs of 4096 than as
  work-groups of 64 (with the work-group ids hoisted, see
  :func:`~pytato_like.target.loopy.kernels.hoist_group_ids`); runs of
  1024 and 16384 were within noise of 4096 at 2*10^5 cells, 512 and
  1024 slower at 2*10^6;
* otherwise ``i_{d-1}`` is split by ``work_group_size`` (when it is shorter than that, it is
  ``l.0`` whole and ``i_{d-2}`` is split into ``l.1`` and ``g.0`` to fill
  the work-group): the inner part becomes
  ``l.0`` (consecutive work-items touch consecutive addresses; PoCL's
  work-group compiler turns the ``l.0`` loop into a vectorisable inner
  loop) and the outer part ``g.0``;
* ``i_{d-2}`` becomes ``g.1`` and ``i_{d-3}`` ``g.2``; further outer axes
  stay sequential loops inside each work-item;
* reduction inames stay sequential loops (each work-item reduces its own
  output elements: no atomics, no local-memory trees); in groups with
  reductions and a short contiguous axis (DG-like ``einsum("ij,ej->ei")``)
  the second-to-last axis is split by ``reduction_ilp`` with an
  ``ilp`` inner part: each work-item keeps that many accumulators, which
  hides the floating-point add latency of the sequential reduction and
  loads the shared operand once (measured: ~2x on the DG benchmark);
* 2-d reduction groups of a small dense operator applied to many batch
  elements (``einsum("ij,ej->ei", D, u)`` of DG codes: a long batch axis
  ``i_0``, a short output axis ``i_1`` of at most
  ``small_operator_outputs``, the only group of its kernel) run one
  work-item per batch element: ``i_0`` is split into
  ``small_operator_local`` work-items (``l.0``) and ``g.0``, ``i_1``
  is ``ilp`` (every output of the element is an accumulator of the
  work-item, the reduction loop runs once per element). Operands read
  with ``i_1`` on a strided axis and never with ``i_0`` (``D[i, j]``) are
  copied once per work-group into local memory with that axis contiguous
  (``small_operator_staged`` elements at most), so that each
  reduction step updates the accumulators from consecutive addresses and
  LLVM's SLP vectoriser packs the update into vector multiply-adds with
  one broadcast of ``u[e, j]`` (DG benchmark: 1.3-1.8x -> 3.1-7.4x NumPy,
  median 4.9x, ahead of JAX in every run under load; work-groups of 128
  are 2-18 % faster than 64 in interleaved runs (the copy of the
  operator and the barrier are paid per work-group), 256 within noise
  of 128; tried and not
  kept: 2 or 4 elements per work-item, work-groups of 32). Its kernels
  compute indices in 64 bits (``small_operator_wide_indices``): with
  ``int`` indices LLVM could not tell that an element's outputs are
  consecutive and stored them one by one (6-7 % less CPU time per run
  of the DG benchmark, paired runs). From ``small_operator_pad_min_outputs``
  outputs on, an element's accumulators are padded to a multiple of the
  vector width ``small_operator_pad_bytes`` (35 -> 36 doubles), the
  staged operator getting zero rows: whole vectors, columns on vector
  boundaries, the same sums (the DG program 1.18-1.19x as fast);
  without enough batch elements (``small_operator_min_batch``) or
  when an operand to stage is too large, the rule above applies, and
  groups that qualify for the tiles below take those;
* 2-d groups with a reduction and two long axes (matmul-like products,
  ``sum(axis=1)`` of a 3-d array) are register-blocked instead: each
  work-item reduces a ``tile_rows`` x ``tile_cols`` tile of
  outputs (``ilp`` inames: independent accumulators, each loaded operand
  reused), work-groups are ``tile_local`` x ``tile_local``
  work-items (``l.1``, ``l.0``) so that they share rows of one operand and
  columns of the other in cache (matmul 1024^2 float64: 1.77 s -> 0.37 s
  on 2 cores; tried and not kept, all slower or within noise: local-memory
  prefetch of 64-wide reduction blocks, unrolling the reduction by 4,
  tiles 8x8, 4x16 and 4x4, and the same tiling for the DG case with
  7-wide column tiles, which the small-operator schedule above replaced).

The ``names`` above are fields of the
:class:`~pytato_like.target.loopy.options.CodegenOptions` given to
:func:`parallelize`.

PoCL's pthread device runs work-groups on all cores, so any program with
at least a few work-groups per core keeps both cores busy. Why this
mapping and this size: see :doc:`/codegen` (measured in
``bench/bench_execution.py``).

.. autofunction:: parallelize
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from pytato_like.target.loopy.options import CodegenOptions


def _register_block(knl, g: str, extents: tuple, options: CodegenOptions):
    """Each work-item reduces a ``tile_rows`` x ``tile_cols`` tile of outputs:
    PoCL runs a work-item's reduction loop as scalar code (it vectorises
    across work-items only for loop-free bodies), so the tile gives that
    loop independent accumulators and contiguous loads along the last
    axis that LLVM's SLP vectoriser packs, and reuses each loaded operand
    ``tile_rows`` or ``tile_cols`` times (matmul 1024^2: see the bench)."""
    import loopy as lp
    tile_rows, tile_cols = options.tile_rows, options.tile_cols
    tile_local = options.tile_local
    rows, cols = f"{g}_0", f"{g}_1"
    knl = lp.split_iname(knl, cols, tile_cols, inner_tag="ilp")
    # a squarish work-group tile (tile_local x tile_local work-items):
    # its work-items share the rows of one operand and the columns of the
    # other, which stay in cache while the work-group runs
    local_cols = max(1, min(tile_local, -(-extents[1] // tile_cols)))
    local_rows = max(1, min(tile_local, -(-extents[0] // tile_rows)))
    knl = lp.split_iname(knl, f"{cols}_outer", local_cols, outer_tag="g.0",
                         inner_tag="l.0")
    knl = lp.split_iname(knl, rows, tile_rows, inner_tag="ilp")
    knl = lp.split_iname(knl, f"{rows}_outer", local_rows, outer_tag="g.1",
                         inner_tag="l.1")
    return knl


def _operands_to_stage(kernel, g: str, max_staged: int):
    """For the small-operator schedule of group *g*: ``{array name: axis}``
    of the global read-only arrays read with ``{g}_1`` (the short output
    axis) in one axis that is not their contiguous one, and never with
    ``{g}_0`` (the batch axis), that are to be staged in local memory
    with that axis contiguous; None when some operand rules the schedule
    out (strided but too large, or not stageable)."""
    from loopy.kernel.data import ArrayArg
    from loopy.symbolic import WalkMapper, get_dependencies

    batch, short = f"{g}_0", f"{g}_1"
    reads: dict[str, set] = {}

    class _Subscripts(WalkMapper):
        def map_subscript(self, expr, *args):
            reads.setdefault(expr.aggregate.name, set()).add(expr.index_tuple)
            super().map_subscript(expr, *args)

    written = set()
    for insn in kernel.instructions:
        if short not in insn.within_inames:
            continue
        written.update(insn.assignee_var_names())
        _Subscripts()(insn.expression)
    stage: dict[str, int] = {}
    for name, indices in reads.items():
        arr = kernel.arg_dict.get(name)
        axes = set()
        uses_batch = False
        for index in indices:
            deps = [get_dependencies(i) for i in index]
            uses_batch |= any(batch in d for d in deps)
            axes |= {ax for ax, d in enumerate(deps) if short in d}
        if uses_batch or not axes:
            continue
        if len(axes) > 1 or not isinstance(arr, ArrayArg) or name in written:
            return None
        (axis,) = axes
        # (arguments of a kernel ready to schedule have shapes and dim tags)
        shape = cast("tuple[Any, ...]", arr.shape)
        if axis == len(shape) - 1 and cast(
                "list[Any]", arr.dim_tags)[axis].stride == 1:
            continue  # already contiguous along the short axis
        if (not all(isinstance(n, int) for n in shape)
                or int(np.prod(shape)) > max_staged):
            return None
        stage[name] = axis
    return stage


def _reductions_over(expr, short: str) -> list:
    """The reductions in *expr* whose value depends on the iname *short*,
    outermost first, each once."""
    from loopy.symbolic import ReductionCallbackMapper, get_dependencies

    found: list = []

    def note(red, rec):
        if short in get_dependencies(red) and red not in found:
            found.append(red)
        return red  # (not entered: a nested reduction goes with its outer one)

    ReductionCallbackMapper(note)(expr)
    return found


def _padded_outputs(kernel, g: str, stage: dict[str, int],
                    pad_bytes: int, min_outputs: int) -> int | None:
    """How many accumulators the small-operator schedule of group *g* gives
    each element: the output count (at least *min_outputs*) rounded up to
    a multiple of the vector width *pad_bytes* in elements of the widest
    type the reductions compute in, or None when padding does not apply.
    It applies when every read that depends on the short iname inside a
    reduction is a staged operand indexed by that iname alone on its
    staged axis (an extra output then reads only the zero rows added to
    the copy), and no reduction's domain depends on the short iname."""
    from loopy.symbolic import WalkMapper, get_dependencies
    from pymbolic.primitives import Variable

    short = f"{g}_1"
    extent = kernel.get_constant_iname_length(short)
    reductions = [red for insn in kernel.instructions
                  if short in insn.within_inames
                  for red in _reductions_over(insn.expression, short)]
    if not stage or not reductions or extent < min_outputs:
        return None
    usable = [True]
    itemsizes = [0]

    class _Reads(WalkMapper):
        def map_subscript(self, expr, *args):
            index = expr.index_tuple
            name = expr.aggregate.name
            array = kernel.arg_dict.get(name) or kernel.temporary_variables.get(name)
            if array is not None and array.dtype is not None:
                itemsizes.append(array.dtype.numpy_dtype.itemsize)
            deps = [get_dependencies(i) for i in index]
            if any(short in d for d in deps):
                axis = stage.get(name)
                if (axis is None or index[axis] != Variable(short)
                        or any(short in d for k, d in enumerate(deps)
                               if k != axis)):
                    usable[0] = False
            super().map_subscript(expr, *args)

        def map_type_cast(self, expr, *args):
            # (float32 sums are accumulated in float64: the cast says so)
            itemsizes.append(expr.type.numpy_dtype.itemsize)
            super().map_type_cast(expr, *args)

    for red in reductions:
        _Reads()(red.expr)
        for dom in kernel.domains:
            names = set(dom.get_var_dict())
            if names & set(red.inames) and short in names:
                return None
    lanes = pad_bytes // max(itemsizes) if max(itemsizes) else 1
    if not usable[0] or lanes < 2:
        return None
    padded = -(-extent // lanes) * lanes
    return padded if padded != extent else None


def _split_off_reductions(insns: list, short: str, short_padded: str,
                          padded: int, temps: dict, new_name, new_id) -> list:
    """*insns* with each reduction over the outputs (iname *short*) moved
    to an instruction of its own over *short_padded* (``0 <= . <
    padded``; the instruction's predicates with it), which stores it in a
    new private array of *padded* elements (added to *temps*); the
    instruction it came from reads that array at *short*."""
    import loopy as lp
    from loopy.symbolic import ReductionCallbackMapper, SubstitutionMapper
    from pymbolic import var
    from pymbolic.mapper.substitutor import make_subst_func
    from pymbolic.primitives import Subscript

    to_padded = SubstitutionMapper(make_subst_func({short: var(short_padded)}))
    result = []
    for insn in insns:
        reductions = (_reductions_over(insn.expression, short)
                      if short in insn.within_inames else [])
        if not reductions:
            result.append(insn)
            continue
        stored = {}
        ids = set()
        predicates: frozenset = frozenset(
            to_padded(p) for p in insn.predicates)
        for red in reductions:
            name = new_name(f"{insn.id}_red")
            temps[name] = lp.TemporaryVariable(
                name, dtype=None, shape=(padded,),
                address_space=lp.AddressSpace.PRIVATE)
            red_id = new_id(f"{name}_insn")
            result.append(lp.Assignment(
                Subscript(var(name), (var(short_padded),)), to_padded(red),
                id=red_id, depends_on=insn.depends_on,
                predicates=predicates,
                within_inames=(insn.within_inames - {short})
                | {short_padded}))
            stored[red] = Subscript(var(name), (var(short),))
            ids.add(red_id)

        def read_stored(red, rec, stored=stored):
            return stored.get(red)

        result.append(insn.copy(
            expression=ReductionCallbackMapper(read_stored)(insn.expression),
            depends_on=insn.depends_on | ids))
    return result


def _small_operator(knl, g: str, stage: dict[str, int], local_size: int,
                    wide_indices: bool, pad_bytes: int, pad_min_outputs: int):
    """One work-item per batch element (``{g}_0``, ``l.0``/``g.0``), all
    outputs along the short axis ``{g}_1`` as ``ilp`` accumulators; the
    operands in *stage* are copied once per work-group into local memory
    with the short axis contiguous, so that the unrolled update of the
    accumulators reads consecutive addresses (LLVM packs it into vector
    multiplies and adds) instead of a stride of the operator's row length.
    With *wide_indices* the kernel's index arithmetic is 64-bit: the
    element's row offset ``n * (g * local + l)`` computed in ``int`` and
    then sign-extended hid from LLVM that the stores of the element's
    outputs are consecutive, so they stayed scalar (one multiply, add and
    store per output); in ``long`` they are vector stores.

    With *pad_bytes* (when :func:`_padded_outputs` allows), each
    reduction over the outputs becomes an instruction of its own that
    fills a private array of the padded length, the staged copies get
    that many rows along the staged axis (the extra ones zero), and the
    original instruction reads the array for the real outputs only: 35
    accumulators are 9 vectors of 4 doubles instead of 8, a pair and a
    single, and each operator column in local memory starts on a vector
    boundary. The extra outputs are computed and never stored; each real
    output sums the same terms in the same order as without padding."""
    import islpy as isl
    import loopy as lp
    from loopy.symbolic import IdentityMapper
    from pymbolic import var
    from pymbolic.primitives import Subscript

    kernel = knl.default_entrypoint
    domains = list(kernel.domains)
    temps = dict(kernel.temporary_variables)
    padded = (_padded_outputs(kernel, g, stage, pad_bytes, pad_min_outputs)
              if pad_bytes else None)
    fetches = []
    renamed = {}
    fetch_local = []
    new_name = kernel.get_var_name_generator()
    for name, axis in sorted(stage.items()):
        arr = kernel.arg_dict[name]
        rank = len(arr.shape)
        staged = new_name(f"{name}_staged")
        inames = [new_name(f"{staged}_f{k}") for k in range(rank)]
        bounds = " and ".join(f"0 <= {i} < {n}" for i, n in zip(
            inames, arr.shape, strict=True))
        domains.append(isl.BasicSet(f"{{ [{', '.join(inames)}] : {bounds} }}"))
        # the short axis is stride 1, the others keep their C order
        order = [ax for ax in range(rank) if ax != axis]
        dim_tags = [""] * rank
        dim_tags[axis] = "N0"
        for level, ax in enumerate(reversed(order), start=1):
            dim_tags[ax] = f"N{level}"
        shape = list(arr.shape)
        if padded is not None:
            shape[axis] = padded
        temps[staged] = lp.TemporaryVariable(
            staged, dtype=arr.dtype, shape=tuple(shape),
            # (loopy parses a comma-separated string; its hint lists tags only)
            dim_tags=",".join(dim_tags),  # type: ignore[arg-type]
            address_space=lp.AddressSpace.LOCAL)
        fetch_id = f"{staged}_fetch"
        fetches.append(lp.Assignment(
            Subscript(var(staged), tuple(var(i) for i in inames)),
            Subscript(var(name), tuple(var(i) for i in inames)),
            id=fetch_id, within_inames=frozenset(inames)))
        renamed[name] = staged
        # consecutive work-items copy consecutive source addresses
        fetch_local.append((inames[-1], arr.shape[-1]))
        if padded is not None:
            # the rows past the operator's end are zero (the extra
            # accumulators sum zeros: finite, never stored)
            pads = [new_name(f"{staged}_z{k}") for k in range(rank)]
            starts = [arr.shape[k] if k == axis else 0 for k in range(rank)]
            pad_bounds = " and ".join(
                f"{start} <= {i} < {n}"
                for i, start, n in zip(pads, starts, shape, strict=True))
            domains.append(isl.BasicSet(
                f"{{ [{', '.join(pads)}] : {pad_bounds} }}"))
            fetches.append(lp.Assignment(
                Subscript(var(staged), tuple(var(i) for i in pads)), 0,
                id=f"{staged}_zero", within_inames=frozenset(pads)))
            fetch_local.append((pads[-1], shape[-1] - starts[-1]))

    class _Restage(IdentityMapper):
        def map_subscript(self, expr, *args):
            new = super().map_subscript(expr, *args)
            if new.aggregate.name in renamed:
                return Subscript(var(renamed[new.aggregate.name]),
                                 new.index_tuple)
            return new

    fetch_ids = frozenset(f.id for f in fetches)
    short = f"{g}_1"
    insns = []
    for insn in kernel.instructions:
        if short in insn.within_inames and fetch_ids:
            insn = insn.copy(expression=_Restage()(insn.expression),
                             depends_on=insn.depends_on | fetch_ids)
        insns.append(insn)
    short_padded = None
    if padded is not None:
        short_padded = new_name(f"{short}_pad")
        domains.append(isl.BasicSet(
            f"{{ [{short_padded}] : 0 <= {short_padded} < {padded} }}"))
        insns = _split_off_reductions(
            insns, short, short_padded, padded, temps, new_name,
            kernel.get_instruction_id_generator())
    extra: dict[str, object] = {}
    if wide_indices:
        from loopy.types import to_loopy_type
        extra["index_dtype"] = to_loopy_type(np.dtype(np.int64))
    kernel = kernel.copy(domains=domains, instructions=[*fetches, *insns],
                         temporary_variables=temps, **extra)
    knl = knl.with_kernel(kernel)
    knl = lp.split_iname(knl, f"{g}_0", local_size,
                         outer_tag="g.0", inner_tag="l.0")
    knl = lp.tag_inames(knl, {short: "ilp"})
    if short_padded is not None:
        knl = lp.tag_inames(knl, {short_padded: "ilp"})
    for iname, extent in fetch_local:
        if extent > local_size:  # no wider than the work-group
            knl = lp.split_iname(knl, iname, local_size,
                                 inner_tag="l.0")
        else:
            knl = lp.tag_inames(knl, {iname: "l.0"})
    if fetches:
        # the copies run in every work-group (they name no group axis)
        knl = lp.add_inames_for_unused_hw_axes(knl)
    return knl


def parallelize(knl, groups: dict[str, tuple], options: CodegenOptions,
                reduction_groups=frozenset()):
    """*knl* with the inames of each loop group (``name -> extents``;
    inames are ``f"{name}_{axis}"``) tagged as described above, with the
    sizes of *options*."""
    import loopy as lp
    work_group_size = options.work_group_size
    tile_rows, tile_cols = options.tile_rows, options.tile_cols
    reduction_ilp = options.reduction_ilp
    contiguous_run = options.contiguous_run
    tags = {}
    for g, extents in groups.items():
        d = len(extents)
        if d == 0:
            continue
        last = f"{g}_{d - 1}"
        extent = extents[-1]
        size = work_group_size
        if isinstance(extent, int):
            size = max(1, min(size, extent))
        outer_axes = list(range(d - 2, -1, -1))
        if (g in reduction_groups and d == 2 and tile_rows * tile_cols > 1
                and isinstance(extent, int) and isinstance(extents[0], int)
                and extent >= tile_cols * 8 and extents[0] >= tile_rows * 8):
            knl = _register_block(knl, g, extents, options)
            continue
        if (g in reduction_groups and d == 2 and len(groups) == 1
                and isinstance(extent, int) and isinstance(extents[0], int)
                and 1 < extent <= options.small_operator_outputs
                and extents[0] >= options.small_operator_min_batch):
            stage = _operands_to_stage(knl.default_entrypoint, g,
                                       options.small_operator_staged)
            if stage is not None:
                knl = _small_operator(
                    knl, g, stage, options.small_operator_local,
                    options.small_operator_wide_indices,
                    options.small_operator_pad_bytes,
                    options.small_operator_pad_min_outputs)
                continue
        if isinstance(extent, int) and 1 < extent < work_group_size and d >= 2:
            # short contiguous axis (e.g. DOFs of an element): the whole
            # axis is l.0 and the next axis fills the work-group as l.1,
            # so that work-groups are not tiny (PoCL pays per work-group)
            tags[last] = "l.0"
            per_group = max(1, work_group_size // max(extent, 1))
            second = f"{g}_{d - 2}"
            if g in reduction_groups and reduction_ilp > 1:
                # each work-item reduces for reduction_ilp rows at once:
                # independent accumulators hide the add latency and the
                # operand indexed by the short axis is loaded once
                knl = lp.split_iname(knl, second, reduction_ilp,
                                     outer_tag="g.0", inner_tag="ilp")
            elif per_group > 1:
                knl = lp.split_iname(knl, second, per_group,
                                     outer_tag="g.0", inner_tag="l.1")
            else:
                tags[second] = "g.0"
            outer_axes = outer_axes[1:]
            hw_names = ("g.1", "g.2")
        else:
            if (contiguous_run > 1 and g not in reduction_groups
                    and not (isinstance(extent, int) and extent <= 1)):
                # each work-item loops over a run of the axis (work-groups
                # of one): LLVM vectorises that loop, bounds and all
                knl = lp.split_iname(knl, last, contiguous_run,
                                     outer_tag="g.0")
            elif size > 1:
                knl = lp.split_iname(knl, last, size, outer_tag="g.0",
                                     inner_tag="l.0")
            else:
                tags[last] = "g.0"
            hw_names = ("g.1", "g.2")
        for axis, hw in zip(outer_axes, hw_names, strict=False):
            tags[f"{g}_{axis}"] = hw
    if tags:
        knl = lp.tag_inames(knl, tags)
    return knl
