"""Time tiles: consecutive stencil steps fused into one kernel over tiles.

An explicit time loop unrolled into one DAG is a chain of chunks (see
:mod:`~pytato_like.target.loopy.chunks`): step ``k`` reads step ``k - 1``
at shifted positions (``u[i - 1]``, ``u[i]``, ``u[i + 1]``), so each
step is a level and a kernel of its own, and each one streams every
field through memory. Once the fields outgrow the cache, every step runs
at memory bandwidth.

:func:`tile_time_steps` fuses such runs of chunks into one chunk: its
kernel walks the last step's index range in tiles of :data:`TIME_TILE`
elements (one work-item per tile), and for each tile computes every step
over the window the later steps read from it -- the tile widened by the
shifts of its readers (ghost cells, computed by both neighbouring tiles)
-- into private scratch arrays. Only the first step's inputs are read
from memory and only the last step's arrays are written there: the
intermediate steps stay in the cache of the core running the tile.

A run of chunks is fused when

- every chunk is a one-dimensional loop group of constant extent without
  reductions, written in one piece (no concatenation pieces, see
  :func:`~pytato_like.target.loopy.instructions.stored_pieces`);
- every read of an array of the run by a later chunk of the run is at the
  reader's own index plus a constant (``u[i + c]``);
- the arrays of all its chunks but the last are temporaries read nowhere
  outside the run (the last chunk's arrays are written to memory as
  usual);
- it has at most :data:`TIME_TILE_STAGES` chunks and at most as many
  instructions as one kernel may have (``max_instructions_per_kernel``);
  the windows widen the tile by at most a quarter, and the scratch arrays
  a work-item keeps alive at once hold at most
  :data:`TIME_TILE_SCRATCH_BYTES`.

Scratch arrays are reused once the last chunk reading them is done: a
chain keeps two per field alive. Measured (1-D heat step, 4 fields, 8
steps, 10^6 cells, PoCL on 2 cores): 12.9 ms as 8 kernels, 3.3 ms fused;
with one core 15 ms and 6.2 ms (tiles of 256 to 4096 within noise).

.. autodata:: TIME_TILE
.. autodata:: TIME_TILE_STAGES
.. autodata:: TIME_TILE_SCRATCH_BYTES
.. autoclass:: TiledRun
.. autofunction:: tile_time_steps
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pytato_like._env import env_int
from pytato_like.scalar_expr import affine_form

if TYPE_CHECKING:
    from pytato_like.target.loopy.codegen import BufferSpec
    from pytato_like.target.loopy.instructions import Instruction

#: elements of the last step computed by one work-item of a fused run (0:
#: no fusion); the ``time_tile`` option of
#: :func:`~pytato_like.target.loopy.generate_loopy` overrides it
TIME_TILE = env_int("PYTATO_LIKE_TIME_TILE", 512, minimum=0)
#: most chunks (steps) fused into one
TIME_TILE_STAGES = env_int("PYTATO_LIKE_TIME_TILE_STAGES", 16, minimum=1)
#: most bytes of scratch arrays one work-item keeps at once
TIME_TILE_SCRATCH_BYTES = 256 * 1024


@dataclasses.dataclass
class TiledRun:
    """A run of chunks fused into one tiled chunk.

    Stage ``s`` (the ``s``-th chunk of the run) computes, for tile ``t``,
    the positions ``tile * t + offsets[s] + w`` for ``0 <= w < tile +
    widths[s]`` that lie in ``[0, extents[s])``."""

    tile: int
    extents: list[int]
    offsets: list[int]
    widths: list[int]
    #: ``id(array) -> (scratch array name, stage)`` of the arrays read by
    #: a later stage
    scratch: dict[int, tuple[str, int]]
    #: scratch array name -> (dtype, length)
    scratch_arrays: dict[str, tuple[Any, int]]

    @property
    def n_stages(self) -> int:
        return len(self.extents)


def shift(idx: tuple, canon: tuple[str, ...]) -> int | None:
    """``c`` when *idx* is ``(canon[0] + c,)``, else None."""
    if len(idx) != 1 or len(canon) != 1:
        return None
    form = affine_form(idx[0], canon)
    if form is None:
        return None
    coefs, const = form
    if {n: c for n, c in coefs.items() if c} != {canon[0]: 1}:
        return None
    return const if isinstance(const, int) else None


def _fusable(chunk: list[Instruction]) -> bool:
    """Whether *chunk* can be a stage of a fused run."""
    extent = None
    for insn in chunk:
        if (insn.node is None or len(insn.shape) != 1
                or not isinstance(insn.shape[0], int) or insn.shape[0] < 1
                or insn.reduction_inames or insn.placement is not None
                or insn.pieces is not None):
            return False
        if extent is None:
            extent = insn.shape[0]
        elif insn.shape[0] != extent:
            return False
    return extent is not None


class _RunFinder:
    """Finds the fusable runs of a program's chunks."""

    def __init__(self, chunks: list[list[Instruction]],
                 buffers: dict[str, BufferSpec]) -> None:
        self.chunks = chunks
        self.buffers = buffers
        #: id(array) -> chunk writing it
        self.chunk_of: dict[int, int] = {}
        for k, chunk in enumerate(chunks):
            for insn in chunk:
                if insn.node is not None:
                    self.chunk_of[id(insn.node)] = k
        #: id(array) -> [(reader chunk, shift or None)]
        self.readers: dict[int, list[tuple[int, int | None]]] = {}
        #: chunk -> the chunks whose arrays it reads at an index that is
        #: not its own plus a constant
        self.unshifted_reads: list[set[int]] = [set() for _ in chunks]
        for k, chunk in enumerate(chunks):
            for insn in chunk:
                for nid, idx in insn.refs:
                    if nid in self.chunk_of:
                        c = shift(idx, insn.canon)
                        self.readers.setdefault(nid, []).append((k, c))
                        if c is None:
                            self.unshifted_reads[k].add(self.chunk_of[nid])
        self.fusable = [_fusable(c) for c in chunks]

    def reads_shifted(self, k: int, first: int) -> bool:
        """Whether chunk *k* reads the arrays of chunks ``first..k-1`` at
        shifted indices only."""
        return not any(first <= c < k for c in self.unshifted_reads[k])

    def _internal(self, insn: Instruction, first: int, last: int) -> bool:
        """Whether the array of *insn* is a temporary read only in chunks
        ``first..last``."""
        for t in insn.targets:
            if self.buffers[t].kind != "temporary":
                return False
        return all(first <= k <= last
                   for k, _ in self.readers.get(id(insn.node), ()))

    def run(self, tile: int, first: int, last: int) -> TiledRun | None:
        """The fused run of chunks ``first..last``, or None if one of the
        conditions of the module fails."""
        chunks = self.chunks[first:last + 1]
        for insn in (i for chunk in chunks[:-1] for i in chunk):
            if not self._internal(insn, first, last):
                return None
        n = len(chunks)
        extents = [chunk[0].shape[0] for chunk in chunks]
        offsets = [0] * n
        widths = [0] * n
        for s in range(n - 2, -1, -1):
            starts: list[int] = []
            ends: list[int] = []
            for insn in chunks[s]:
                for k, c in self.readers.get(id(insn.node), ()):
                    if k == first + s:
                        continue  # read elementwise in its own stage
                    if c is None:
                        return None
                    r = k - first
                    starts.append(offsets[r] + c)
                    ends.append(offsets[r] + widths[r] + c)
            if not starts:
                return None  # a stage nobody after it reads
            offsets[s], widths[s] = min(starts), max(ends) - min(starts)
        if max(widths) * 4 > tile:
            return None
        scratch, arrays = self._scratch(tile, first, chunks, widths)
        if scratch is None:
            return None
        return TiledRun(tile, extents, offsets, widths, scratch, arrays)

    def _scratch(self, tile: int, first: int, chunks: list,
                 widths: list[int]) -> tuple[dict | None, dict]:
        """Scratch arrays for the arrays read by later stages, reused once
        their last reader is done; None if they need more than
        :data:`TIME_TILE_SCRATCH_BYTES` at once, or twice that in all
        (arrays of several dtypes are not shared)."""
        scratch: dict[int, tuple[str, int]] = {}
        arrays: dict[str, tuple[Any, int]] = {}
        free: list[str] = []
        #: scratch name -> last stage reading it
        busy: dict[str, int] = {}
        for s, chunk in enumerate(chunks[:-1]):
            for name, until in list(busy.items()):
                if until < s:
                    free.append(name)
                    del busy[name]
            for insn in chunk:
                later = [k - first for k, _ in self.readers.get(id(insn.node), ())
                         if k - first > s]
                if not later:
                    continue
                assert insn.node is not None  # (fusable chunks only)
                dtype = insn.node.dtype
                reused = next((f for f in free if arrays[f][0] == dtype), None)
                if reused is None:
                    name = f"_pt_scratch{len(arrays)}"
                    arrays[name] = (dtype, 0)
                else:
                    name = reused
                    free.remove(name)
                arrays[name] = (dtype, max(arrays[name][1], tile + widths[s]))
                busy[name] = max(later)
                scratch[id(insn.node)] = (name, s)
            live = sum(arrays[n][0].itemsize * arrays[n][1] for n in busy)
            if live > TIME_TILE_SCRATCH_BYTES:
                return None, {}
        total = sum(dt.itemsize * n for dt, n in arrays.values())
        if total > 2 * TIME_TILE_SCRATCH_BYTES:
            return None, {}
        return scratch, arrays


def tile_time_steps(insns: list[Instruction], buffers: dict[str, BufferSpec],
                    tile: int | None = None, max_insns: int = 128
                    ) -> list[TiledRun]:
    """Fuse the runs of chunks of *insns* described in the module (chunks
    and storage already assigned) into one chunk each: renumbers the
    chunks, sets :attr:`Instruction.tiled` and :attr:`Instruction.stage`,
    and removes the buffers (and targets) of the arrays that now live in
    scratch arrays only. A run holds at most *max_insns* instructions (the
    bound on a kernel's size of :func:`~pytato_like.target.loopy.chunks.assign_chunks`).
    Returns the runs."""
    from pytato_like.target.loopy.chunks import split_chunks
    if tile is None:
        tile = TIME_TILE
    if not isinstance(tile, int) or isinstance(tile, bool) or tile < 0:
        from pytato_like.diagnostic import ConfigurationError
        raise ConfigurationError(
            f"the time_tile option must be an int >= 0, not {tile!r}")
    if tile < 1:
        return []
    chunks = split_chunks(insns)
    finder = _RunFinder(chunks, buffers)
    runs: list[tuple[int, int, TiledRun]] = []
    first = 0
    while first < len(chunks):
        if not finder.fusable[first]:
            first += 1
            continue
        last, size = first, len(chunks[first])
        while (last + 1 < len(chunks) and last + 1 - first < TIME_TILE_STAGES
               and size + len(chunks[last + 1]) <= max_insns
               and finder.fusable[last + 1]
               and finder.reads_shifted(last + 1, first)):
            last += 1
            size += len(chunks[last])
        found = None
        for end in range(last, first, -1):
            found = finder.run(tile, first, end)
            if found is not None:
                runs.append((first, end, found))
                break
        first = (runs[-1][1] if found is not None else first) + 1
    if not runs:
        return []
    new_chunk: list[int] = []
    merged = 0
    run_of = {}
    for first, last, run in runs:
        for k in range(first, last + 1):
            run_of[k] = (first, run)
    for k in range(len(chunks)):
        if k in run_of and run_of[k][0] != k:
            merged += 1
            new_chunk.append(new_chunk[run_of[k][0]])
        else:
            new_chunk.append(k - merged)
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            insn.chunk = new_chunk[k]
            if k in run_of:
                first, run = run_of[k]
                insn.tiled = run
                insn.stage = k - first
                if insn.stage < run.n_stages - 1:
                    for t in insn.targets:
                        del buffers[t]
                    insn.targets = []
    return [run for _, _, run in runs]


#: the iname of the tiles of a fused run (one work-group each)
TILE_INAME = "_pt_tile"


def tiled_spec(builder: Any, chunk: list[Instruction], k: int,
               written_in: dict[str, int], read_in: dict[str, set[int]],
               canonical: bool) -> dict:
    """The loopy ingredients of the fused chunk *k* (see
    :meth:`~pytato_like.target.loopy.chunk_spec.ChunkSpecBuilder.spec`,
    whose keys it returns, with ``tags``: iname -> loopy tag)."""
    import loopy as lp
    import pymbolic.primitives as prim

    from pytato_like.target.loopy.chunk_spec import _ChunkRewriter, _ChunkScope
    from pytato_like.target.loopy.codegen import storage_dtype

    run: TiledRun = chunk[0].tiled
    scope = _ChunkScope(builder.names, canonical)
    as_arguments = builder.sizes_as_arguments

    def extent(n: int) -> Any:
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

    def add(assignee: Any, expr: Any, deps: set, stage: int, w: str) -> str:
        iid = f"_pt_insn{len(lp_insns)}"
        lp_insns.append(lp.Assignment(
            assignee, expr, id=iid, depends_on=frozenset(deps),
            within_inames=frozenset({TILE_INAME, w})))
        stage_ids[stage].append(iid)
        return iid

    for insn in sorted(chunk, key=lambda i: i.stage):
        s = insn.stage
        w = f"_pt_w{s}"
        offset = run.offsets[s]
        position = run.tile * tile + prim.Variable(w)
        if offset:
            position = position + offset
        rw = _ChunkRewriter(scope, builder, insn, (w,), positions=(position,))
        expr = rw(insn.expr)
        helpers |= insn.helpers
        deps = set(stage_ids[s - 1]) if s else set()
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
            iid = add(prim.Subscript(prim.Variable(name), (prim.Variable(w),)),
                      expr, deps, s, w)
            writer_id.setdefault(nid, iid)
        for t in insn.targets:
            scope.arrays_used.add(t)
            iid = add(prim.Subscript(prim.Variable(scope.local(t, "a")),
                                     (position,)), expr, deps, s, w)
            writer_id.setdefault(nid, iid)

    extents = [extent(n) for n in run.extents]
    args, bindings, wide = builder._arguments(scope, k, written_in, read_in, temps)
    params = ",".join(sorted(a.name for a in args if isinstance(a, lp.ValueArg)))
    domains = [f"[{params}] -> {{[{TILE_INAME}]: 0 <= {run.tile}*{TILE_INAME} "
               f"< {scope.isl(extents[-1])}}}"]
    sep = "," if params else ""
    for s in range(run.n_stages):
        w = f"_pt_w{s}"
        domains.append(
            f"[{params}{sep}{TILE_INAME}] -> {{[{w}]: 0 <= {w} < "
            f"{run.tile + run.widths[s]} and 0 <= {run.tile}*{TILE_INAME} + "
            f"{w} + {run.offsets[s]} < {scope.isl(extents[s])}}}")
    key = builder._key(wide, domains, lp_insns, args, temps, helpers)
    return {"key": key, "domains": domains, "insns": lp_insns, "args": args,
            "temps": list(temps.values()), "bindings": bindings,
            "helpers": helpers, "groups": {}, "reduction_groups": set(),
            "wide_offsets": False, "tags": {TILE_INAME: "g.0"},
            "const_sizes": {scope.local(n, "s"): v
                            for n, v in scope.const_sizes.items()},
            "name": None}
