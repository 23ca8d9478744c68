"""The loopy ingredients of a fused run of stencil steps (a time tile).

:func:`~pytato_like.target.loopy.time_tiles.tile_time_steps` (a pass on
the chunked plan) finds the runs of steps worth fusing and marks their
instructions with their :class:`~pytato_like.target.loopy.time_tiles.TiledRun`;
this module makes the chunk spec of such a run -- the same keys as
:meth:`~pytato_like.target.loopy.chunk_spec.ChunkSpecBuilder.spec` -- one
work-group per tile, each stage of the run computed over its window into
private scratch arrays (:doc:`/codegen`, "Time tiles"). The code
generator calls :func:`tiled_spec` for a chunk whose instructions carry a
run. A module of its own so that the pass, which runs on every compile,
does not load loopy, and the chunk specs do not depend on the pass.

.. autofunction:: tiled_spec
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import loopy as lp
import pymbolic.primitives as prim

from pytato_like.target.loopy.chunk_spec import ChunkRewriter, ChunkScope
from pytato_like.target.loopy.plan import storage_dtype
from pytato_like.target.loopy.rolled_stages import (
    STEP_INAME,
    WINDOW_INAME,
    roll_middle_stages,
)
from pytato_like.target.loopy.time_tiles import TiledRun

if TYPE_CHECKING:
    from pymbolic.typing import ArithmeticExpression, Expression

    from pytato_like.target.loopy.chunk_spec import ChunkSpecBuilder
    from pytato_like.target.loopy.plan import Instruction


#: the iname of the tiles of a fused run (one work-group each)
TILE_INAME = "_pt_tile"


def _bound_names(w: str) -> tuple[str, str]:
    """The private variables holding the bounds of the piece loop *w*."""
    return f"{w}_lo", f"{w}_hi"


def _piece_bounds(w: str, run: TiledRun, tile: prim.Variable,
                  offset: ArithmeticExpression, length: ArithmeticExpression,
                  temps: dict, lp_insns: list) -> set[str]:
    """Add to *lp_insns* the instructions computing, per tile, the range
    of the pieces stage's window that the piece at *offset* of *length*
    covers (the bounds of its loop *w*), and their variables to *temps*;
    their ids.

    Computed bounds, not a domain intersecting the window with the piece:
    loopy writes the latter's loop with a conditional around each
    assignment, a copy loop the compiler vectorises only with masks,
    which cost the pieces stage more than several of the steps it feeds
    (see doc/codegen.rst, "Time tiles")."""
    base = run.tile * tile + run.offsets[0]
    window = run.tile + run.widths[0]
    start, end = offset - base, offset + length - base
    ids = set()
    for name, expr in zip(_bound_names(w), (
            prim.If(prim.Comparison(start, ">", 0), start, 0),
            prim.If(prim.Comparison(end, "<", window), end, window))):
        temps[name] = lp.TemporaryVariable(
            name, shape=(), address_space=lp.AddressSpace.PRIVATE)
        iid = f"_pt_insn{len(lp_insns)}"
        lp_insns.append(lp.Assignment(
            prim.Variable(name), expr, id=iid,
            within_inames=frozenset({TILE_INAME})))
        ids.add(iid)
    return ids


def tiled_spec(builder: ChunkSpecBuilder, chunk: list[Instruction], k: int,
               written_in: dict[str, int], read_in: dict[str, set[int]],
               canonical: bool = True) -> dict:
    """The loopy ingredients of the fused chunk *k* (see
    :meth:`~pytato_like.target.loopy.chunk_spec.ChunkSpecBuilder.spec`,
    whose keys it returns, with ``tags``: iname -> loopy tag)."""
    run = chunk[0].tiled
    assert run is not None      # (a fused chunk's steps are of a run)
    scope = ChunkScope(builder.names, canonical)
    as_arguments = builder.sizes_as_arguments

    def extent(n: int) -> int | prim.Variable:
        # as in ChunkSpecBuilder.spec: a program size name, made local by
        # scope.isl
        if as_arguments and n > 1:
            return prim.Variable(scope.const_size(n))
        return n

    temps = {name: lp.TemporaryVariable(
                 name, storage_dtype(dtype), shape=(length,),
                 address_space=lp.AddressSpace.PRIVATE)
             for name, (dtype, length) in run.scratch_arrays.items()}
    tile = prim.Variable(TILE_INAME)
    stage_ids: list[list[str]] = [[] for _ in range(run.n_stages)]
    writer_id: dict[int, str] = {}
    lp_insns: list = []
    helpers: set = set()

    def add(assignee: prim.Variable | prim.Subscript, expr: Expression,
            deps: set, stage: int, w: str,
            no_sync: frozenset = frozenset()) -> str:
        iid = f"_pt_insn{len(lp_insns)}"
        lp_insns.append(lp.Assignment(
            assignee, expr, id=iid, depends_on=frozenset(deps),
            within_inames=frozenset({TILE_INAME, w}), no_sync_with=no_sync))
        stage_ids[stage].append(iid)
        return iid

    def local_size(n: int) -> int | prim.Variable:
        # a size in an instruction: the local name of extent(n)
        e = extent(n)
        return prim.Variable(scope.local(e.name, "s")) \
            if isinstance(e, prim.Variable) else e

    #: ``(offset, length)`` of a piece of stage 0 -> its loop's iname:
    #: the pieces of one range (the same halo strip of every field) share
    #: a loop, whose bounds instructions compute (:func:`_piece_bounds`)
    piece_loops: dict[tuple[int, int], str] = {}
    #: iname of a piece loop -> the ids of the instructions computing its
    #: bounds
    bound_ids: dict[str, set[str]] = {}
    #: scratch name -> ids of the pieces' writes to it so far
    piece_writes: dict[str, list[str]] = {}
    for insn in sorted(chunk, key=lambda i: i.stage):
        s = insn.stage
        w = f"_pt_w{s}"
        offset = run.offsets[s]
        placement = insn.placement
        pulled = placement is not None and s == 0 and bool(run.pieces)
        if placement is not None and pulled:
            # a piece of a concatenation: a loop over the part of the
            # window inside the piece
            piece = (placement.offset, insn.shape[0])
            w = piece_loops.get(piece, "")
            if not w:
                w = piece_loops[piece] = f"_pt_w{s}_{len(piece_loops)}"
                bound_ids[w] = _piece_bounds(
                    w, run, tile, local_size(piece[0]), local_size(piece[1]),
                    temps, lp_insns)
        position = run.tile * tile + prim.Variable(w)
        if offset:
            position = position + offset
        index = position
        #: where the value goes in its targets
        target_index = position
        if placement is not None and placement.offset:
            if pulled:
                index = position - local_size(placement.offset)
            else:
                # a piece written by the last stage: its window is the
                # piece's own positions, its offset places them
                target_index = position + local_size(placement.offset)
        rw = ChunkRewriter(scope, builder, insn, (w,), positions=(index,))
        expr = rw(insn.expr)
        helpers |= insn.helpers
        deps = set(stage_ids[s - 1]) if s else set(bound_ids.get(w, ()))
        deps.update(writer_id[nid] for nid, _ in insn.refs if nid in writer_id)
        nid = id(insn.node)
        assert insn.node is not None  # (fusable chunks only)
        if insn.private is not None:
            pname = scope.local(insn.private, "p")
            temps[pname] = lp.TemporaryVariable(
                pname, storage_dtype(insn.node.dtype), shape=(),
                address_space=lp.AddressSpace.PRIVATE)
            iid = add(prim.Variable(pname), expr, deps, s, w)
            writer_id[nid] = iid
            expr, deps = prim.Variable(pname), {iid}
        if nid in run.scratch:
            name = run.scratch[nid][0]
            no_sync: frozenset = frozenset()
            if insn.placement is not None:
                # after the earlier pieces of the array, as in
                # ChunkSpecBuilder: they write disjoint ranges of its
                # scratch, no synchronisation needed
                previous = piece_writes.setdefault(name, [])
                deps.update(previous)
                no_sync = frozenset((i, "any") for i in previous)
            iid = add(prim.Subscript(prim.Variable(name), (prim.Variable(w),)),
                      expr, deps, s, w, no_sync)
            writer_id.setdefault(nid, iid)
            if insn.placement is not None:
                piece_writes[name].append(iid)
        for t in insn.targets:
            scope.arrays_used.add(t)
            target_deps, no_sync = deps, frozenset()
            if insn.placement is not None:
                # the last stage writing several pieces of one array
                # (both boundary strips of a field): ordered after the
                # earlier ones, disjoint ranges, no synchronisation
                previous = piece_writes.setdefault(t, [])
                target_deps = deps | set(previous)
                no_sync = frozenset((i, "any") for i in previous)
            iid = add(prim.Subscript(prim.Variable(scope.local(t, "a")),
                                     (target_index,)), expr, target_deps, s,
                      w, no_sync)
            writer_id.setdefault(nid, iid)
            if insn.placement is not None:
                piece_writes[t].append(iid)

    rolled = None
    if builder.time_tile_roll:
        by_id = {insn.id: insn for insn in lp_insns}
        rolled = roll_middle_stages(
            [[by_id[i] for i in ids] for ids in stage_ids], run.widths,
            run.offsets, run.extents, temps, TILE_INAME)
    if rolled is not None:
        staged = {i for ids in stage_ids for i in ids}
        lp_insns = [i for i in lp_insns if i.id not in staged] + rolled.insns
        temps = rolled.temps
    in_loop = range(rolled.first, rolled.last + 1) if rolled else range(0)
    # (a pieces stage is bounded by its pieces' ranges, not its extent; the
    # rolled stages' by the first one's)
    extents = [None if (s == 0 and piece_loops) or (s in in_loop and s != in_loop[0])
               else extent(n) for s, n in enumerate(run.extents)]
    args, bindings, wide = builder._arguments(scope, k, written_in, read_in, temps)
    params = ",".join(sorted(a.name for a in args if isinstance(a, lp.ValueArg)))
    domains = [f"[{params}] -> {{[{TILE_INAME}]: 0 <= {run.tile}*{TILE_INAME} "
               f"< {scope.isl(extents[-1])}}}"]
    sep = "," if params else ""
    for w in piece_loops.values():
        lo, hi = _bound_names(w)
        domains.append(f"[{lo}, {hi}] -> {{[{w}]: {lo} <= {w} < {hi}}}")
    for s in range(1 if piece_loops else 0, run.n_stages):
        if s in in_loop:
            continue
        w = f"_pt_w{s}"
        domains.append(
            f"[{params}{sep}{TILE_INAME}] -> {{[{w}]: 0 <= {w} < "
            f"{run.tile + run.widths[s]} and 0 <= {run.tile}*{TILE_INAME} + "
            f"{w} + {run.offsets[s]} < {scope.isl(extents[s])}}}")
    if rolled is not None:
        a, t, w = rolled.first, STEP_INAME, WINDOW_INAME

        def plus(d: int) -> str:
            # d * (t - a), signed for ISL
            return "" if not d else f" {'+' if d > 0 else '-'} {abs(d)}*({t} - {a})"

        domains.append(
            f"[{params}{sep}{TILE_INAME}] -> {{[{t}, {w}]: {a} <= {t} <= "
            f"{rolled.last} and 0 <= {w} < {run.tile + run.widths[a]}"
            f"{plus(rolled.d_width)} and 0 <= {run.tile}*{TILE_INAME} + {w} + "
            f"{run.offsets[a]}{plus(rolled.d_offset)} < "
            f"{scope.isl(extents[a])}{plus(rolled.d_extent)}}}")
    key = builder._key(wide, domains, lp_insns, args, temps, helpers)
    return {"key": key, "domains": domains, "insns": lp_insns, "args": args,
            "temps": list(temps.values()), "bindings": bindings,
            "helpers": helpers, "groups": {}, "reduction_groups": set(),
            "wide_offsets": False, "tags": {TILE_INAME: "g.0"},
            "const_sizes": {scope.local(n, "s"): v
                            for n, v in scope.const_sizes.items()},
            "name": None}
