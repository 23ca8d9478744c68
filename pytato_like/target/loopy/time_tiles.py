"""Time tiles: consecutive stencil steps fused into one kernel over tiles.

An explicit time loop unrolled into one DAG is a chain of chunks (see
:mod:`~pytato_like.target.loopy.chunks`): step ``k`` reads step ``k - 1``
at shifted positions (``u[i - 1]``, ``u[i]``, ``u[i + 1]``), so each
step is a level and a kernel of its own, and each one streams every
field through memory. Once the fields outgrow the cache, every step runs
at memory bandwidth.

:func:`tile_time_steps` fuses such runs of chunks into one chunk: its
kernel walks the last step's index range in tiles of :attr:`~pytato_like.target.loopy.options.CodegenOptions.time_tile`
elements (one work-item per tile), and for each tile computes every step
over the window the later steps read from it -- the tile widened by the
shifts of its readers (ghost cells, computed by both neighbouring tiles)
-- into private scratch arrays. Only the first step's inputs are read
from memory and only the last step's arrays are written there: the
intermediate steps stay in the cache of the core running the tile.

A run of chunks is fused when

- every chunk is a one-dimensional loop group of constant extent (at
  most :data:`MAX_EXTENT`) without reductions, written in one piece (no
  concatenation pieces, see
  :func:`~pytato_like.target.loopy.instructions.stored_pieces`; but see
  the pieces stage below);
- every read of an array of the run by a later chunk of the run is at the
  reader's own index plus a constant (``u[i + c]``);
- the arrays of all its chunks but the last are temporaries read nowhere
  outside the run (the last chunk's arrays are written to memory as
  usual);
- it has at most :attr:`~pytato_like.target.loopy.options.CodegenOptions.time_tile_stages` chunks and at most as many
  instructions as one kernel may have (``max_instructions_per_kernel``);
  the windows widen the tile by at most a quarter, and the scratch arrays
  a work-item keeps alive at once hold at most
  :data:`TIME_TILE_SCRATCH_BYTES`.

A run may start with a *pieces stage*: the pieces of the stored
concatenations that its first chunk reads (a field extended by halo
cells, :func:`~pytato_like.target.loopy.instructions.stored_pieces`),
when each concatenation is a one-dimensional temporary of constant
extent read only in the run, at shifted indices, and its pieces are
one-dimensional, of constant extent and offset, without reductions. The
pieces of one range (the same halo strip of every field) share a loop
over the part of the window inside that range, bounded by two integers
each tile computes first, writing the concatenations' scratch arrays:
the concatenations are never written to memory, and their pieces'
chunks (one per piece shape) are gone. Behind a pieces stage, one chunk
is a run.

The last chunk of a run may instead write *pieces* at constant offsets
of one-dimensional arrays (a concatenation written piece by piece, or the
ranges an array reading selects is cut into): its window is the pieces'
own positions, written at their offset. So an output built as
``concatenate([left, chain, right])`` -- as the distributed partitioner's
deep split leaves the outputs -- gets the chain's last step written into
it by the run, instead of into a temporary copied by another kernel.
The chunks are first put in a dependency order that keeps each chain
together (after a chunk, when it can, comes the chunk reading it at
shifted indices), so that a chain is a run of consecutive chunks even
where independent chains share levels (the boundary strips and the deep
rows of a distributed deep split).

Scratch arrays are reused once the last chunk reading them is done: a
chain keeps two per field alive. Measured (1-D heat step, 4 fields, 8
steps, 10^6 cells, PoCL on 2 cores): 12.9 ms as 8 kernels, 3.3 ms fused;
with one core 15 ms and 6.2 ms (tiles of 256 to 4096 within noise).

.. autodata:: TIME_TILE_SCRATCH_BYTES
.. autodata:: MAX_EXTENT
.. autoclass:: TiledRun
.. autofunction:: tile_time_steps
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import TYPE_CHECKING

from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.scalar_expr import affine_form
from pytato_like.target.loopy.chunks import (
    UNBOUNDED,
    KernelBudget,
    set_chunks,
    split_chunks,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from pytato_like.array import Array
    from pytato_like.target.loopy.plan import BufferSpec, Instruction

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
    scratch_arrays: dict[str, tuple[np.dtype, int]]
    #: the pieces of the concatenations computed by stage 0 (empty when
    #: stage 0 is a chunk of its own); see :func:`tile_time_steps`
    pieces: list = dataclasses.field(default_factory=list)

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


#: largest extent of a fused run's arrays: tile and window positions are
#: computed in 32-bit integers, with room for a tile's widening
MAX_EXTENT = 2**30


def _fusable(chunk: list[Instruction], last: bool = False) -> bool:
    """Whether *chunk* can be a stage of a fused run -- with *last*, its
    last stage, which may also write pieces of a one-dimensional stored
    concatenation (:func:`_placed_piece`)."""
    extent = None
    for insn in chunk:
        if (insn.node is None or len(insn.shape) != 1
                or not isinstance(insn.shape[0], int)
                or not 1 <= insn.shape[0] <= MAX_EXTENT
                or insn.reduction_inames):
            return False
        if ((insn.placement is not None or insn.pieces is not None)
                and not (last and _placed_piece(insn))):
            return False
        if extent is None:
            extent = insn.shape[0]
        elif insn.shape[0] != extent:
            return False
    return extent is not None


def _node(insn: Instruction) -> Array:
    """The array of *insn* (of a fusable chunk or piece: never None)."""
    assert insn.node is not None
    return insn.node


def _placed_piece(insn: Instruction) -> bool:
    """Whether *insn* writes a piece of a one-dimensional array at a
    constant offset (a concatenation's piece, or a range of an array whose
    reads are decided by range): the last stage of a run may, writing
    its window at that offset."""
    p = insn.placement
    node = insn.node
    return (node is not None and p is not None and p.position is None
            and p.axis == 0 and isinstance(p.offset, int)
            and len(node.shape) == 1 and isinstance(node.shape[0], int)
            and node.shape[0] <= MAX_EXTENT)


def _piece_fusable(insn: Instruction) -> bool:
    """Whether the piece *insn* of a stored concatenation can be computed
    by stage 0 of a fused run: one-dimensional, of constant extent and
    offset, without reductions."""
    return (_placed_piece(insn)
            and len(insn.shape) == 1 and isinstance(insn.shape[0], int)
            and insn.shape[0] >= 1 and not insn.reduction_inames
            and insn.private is None)


class _RunFinder:
    """Finds the fusable runs of a program's chunks."""

    def __init__(self, chunks: list[list[Instruction]],
                 buffers: dict[str, BufferSpec], max_insns: int) -> None:
        self.chunks = chunks
        self.buffers = buffers
        self.max_insns = max_insns
        #: id(array) -> the instruction writing it (the last piece of a
        #: piecewise array; its ``chunk`` is its index in *chunks*)
        self.writer: dict[int, Instruction] = {}
        for chunk in chunks:
            for insn in chunk:
                if insn.node is not None:
                    self.writer[id(insn.node)] = insn
        #: id(array) -> [(reader chunk, shift or None)]
        self.readers: dict[int, list[tuple[int, int | None]]] = {}
        #: chunk -> the chunks whose arrays it reads at an index that is
        #: not its own plus a constant
        self.unshifted_reads: list[set[int]] = [set() for _ in chunks]
        for k, chunk in enumerate(chunks):
            for insn in chunk:
                for nid, idx in insn.refs:
                    if nid in self.writer:
                        c = shift(idx, insn.canon)
                        self.readers.setdefault(nid, []).append((k, c))
                        if c is None:
                            self.unshifted_reads[k].add(self.writer[nid].chunk)
        self.fusable = [_fusable(c) for c in chunks]
        #: chunks that may end a run (those writing pieces only so)
        self.fusable_last = [_fusable(c, last=True) for c in chunks]

    def reads_shifted(self, k: int, first: int) -> bool:
        """Whether chunk *k* reads the arrays of chunks ``first..k-1`` at
        shifted indices only."""
        return not any(first <= c < k for c in self.unshifted_reads[k])

    def pulled_pieces(self, first: int, last: int) -> list[Instruction]:
        """The pieces of the stored concatenations that chunk *first*
        reads and that a run of chunks ``first..last`` may compute in a
        stage before its first chunk (stage 0): temporaries read only in
        the run, at shifted indices, whose pieces are all
        :func:`_piece_fusable` and read no private variable (which lives
        only in the piece's own chunk)."""
        pieces: list[Instruction] = []
        seen: set[int] = set()
        for insn in self.chunks[first]:
            for nid, _ in insn.refs:
                if nid in seen:
                    continue
                seen.add(nid)
                writer = self.writer.get(nid)
                if writer is None or not writer.pieces:
                    continue
                group = writer.pieces
                if not all(_piece_fusable(p) for p in group):
                    continue
                if any(self.writer[r].private is not None
                       for p in group for r, _ in p.refs if r in self.writer):
                    continue
                if any(self.buffers[t].kind != "temporary"
                       for t in writer.targets):
                    continue
                if all(first <= k <= last and c is not None
                       for k, c in self.readers.get(nid, ())):
                    pieces.extend(group)
        return pieces

    def _shifted_inside(self, first: int, last: int) -> bool:
        """Whether some chunk of ``first..last`` reads an array of an
        earlier one at a nonzero shift (a stencil step)."""
        return any(first <= k <= last and c
                   for chunk in self.chunks[first:last]
                   for insn in chunk if insn.node is not None
                   for k, c in self.readers.get(id(insn.node), ()))

    def _internal(self, insn: Instruction, first: int, last: int) -> bool:
        """Whether the array of *insn* is a temporary read only in chunks
        ``first..last``."""
        for t in insn.targets:
            if self.buffers[t].kind != "temporary":
                return False
        return all(first <= k <= last
                   for k, _ in self.readers.get(id(insn.node), ()))

    def run(self, tile: int, first: int, last: int) -> TiledRun | None:
        """The fused run of chunks ``first..last`` -- preceded by a stage
        computing the pieces of the concatenations chunk *first* reads
        (:meth:`pulled_pieces`), if any -- or None if one of the
        conditions of the module fails."""
        pieces = self.pulled_pieces(first, last)
        stages = ([pieces] if pieces else []) + self.chunks[first:last + 1]
        n = len(stages)
        if n < 2 or sum(len(st) for st in stages) > self.max_insns:
            return None
        base = 1 if pieces else 0

        def stage_of(k: int) -> int:
            return k - first + base

        for insn in (i for chunk in stages[:-1] for i in chunk):
            if not self._internal(insn, first, last):
                return None
        if not all(self.fusable[k] for k in range(first, last)):
            return None  # (a piece-writing chunk ends its run)
        if not pieces and not self._shifted_inside(first, last):
            # elementwise chunks: cut by the kernel size bound
            # (assign_chunks), and a tile would only join them again
            return None
        # (a pieces stage: its arrays' whole length, each piece bounded by
        # its own range; a stage writing pieces: the pieces' length)
        extents = [max(_node(i).shape[0] for i in st) if s < base
                   else max(i.shape[0] for i in st)
                   for s, st in enumerate(stages)]
        offsets = [0] * n
        widths = [0] * n
        for s in range(n - 2, -1, -1):
            starts: list[int] = []
            ends: list[int] = []
            for insn in stages[s]:
                for k, c in self.readers.get(id(insn.node), ()):
                    r = stage_of(k)
                    if r == s:
                        continue  # read elementwise in its own stage
                    if c is None:
                        return None
                    starts.append(offsets[r] + c)
                    ends.append(offsets[r] + widths[r] + c)
            if not starts:
                return None  # a stage nobody after it reads
            offsets[s], widths[s] = min(starts), max(ends) - min(starts)
        if max(widths) * 4 > tile:
            return None
        scratch, arrays = self._scratch(tile, stages, stage_of, widths)
        if scratch is None:
            return None
        return TiledRun(tile, extents, offsets, widths, scratch, arrays,
                        pieces)

    def _scratch(self, tile: int, stages: list, stage_of: Callable[[int], int],
                 widths: list[int]) -> tuple[dict | None, dict]:
        """Scratch arrays for the arrays read by later stages, reused once
        their last reader is done; None if they need more than
        :data:`TIME_TILE_SCRATCH_BYTES` at once, or twice that in all
        (arrays of several dtypes are not shared)."""
        scratch: dict[int, tuple[str, int]] = {}
        arrays: dict[str, tuple[np.dtype, int]] = {}
        free: list[str] = []
        #: scratch name -> last stage reading it
        busy: dict[str, int] = {}
        for s, chunk in enumerate(stages[:-1]):
            for name, until in list(busy.items()):
                if until < s:
                    free.append(name)
                    del busy[name]
            for insn in chunk:
                later = [stage_of(k) for k, _ in self.readers.get(id(insn.node), ())
                         if stage_of(k) > s]
                if not later or id(insn.node) in scratch:
                    continue  # (the pieces of one array share its scratch)
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


def _chains_contiguous(insns: list[Instruction]) -> list[list[Instruction]]:
    """The chunks of *insns* in a dependency order that keeps each chain
    together -- after a chunk comes, when it can, a chunk reading it at
    shifted indices (its next step), so that a chain is a run of
    consecutive chunks -- made the chunks of *insns* in that order.

    Among the chunks that can come next (all they read has come), the one
    continuing the chunk just placed, else the first in the current
    order. Level by level, independent chains would interleave: the
    boundary strips and the deep rows of the distributed deep split (the
    strips of step ``k`` and the deep rows of step ``k`` are one level),
    and no run could take more than one step of either."""
    chunks = split_chunks(insns)
    n = len(chunks)
    written_by: dict[int, list[int]] = {}
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            if insn.node is not None:
                written_by.setdefault(id(insn.node), []).append(k)
    #: chunk -> the chunks it reads; the chunks reading it at shifted
    #: indices
    reads: list[set[int]] = [set() for _ in chunks]
    continued_by: list[set[int]] = [set() for _ in chunks]
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            for nid, idx in insn.refs:
                for j in written_by.get(nid, ()):
                    if j == k:
                        continue
                    reads[k].add(j)
                    if shift(idx, insn.canon) is not None:
                        continued_by[j].add(k)
    readers: list[list[int]] = [[] for _ in chunks]
    for k in range(n):
        for j in reads[k]:
            readers[j].append(k)
    waiting = [len(r) for r in reads]
    # (a heap of the chunks that can come next, and their set: a chunk
    # taken out of turn stays in the heap, skipped when popped)
    heap = [k for k in range(n) if not waiting[k]]
    ready = set(heap)
    order: list[int] = []
    last = -1
    while ready:
        nxt = min((k for k in continued_by[last] if k in ready),
                  default=None) if last >= 0 else None
        if nxt is None:
            nxt = heapq.heappop(heap)
            if nxt not in ready:
                continue
        ready.remove(nxt)
        order.append(nxt)
        for k in readers[nxt]:
            waiting[k] -= 1
            if not waiting[k]:
                heapq.heappush(heap, k)
                ready.add(k)
        last = nxt
    assert len(order) == n, "chunks read each other in a cycle"
    if order == list(range(n)):
        return chunks
    result = [chunks[k] for k in order]
    set_chunks(insns, result)
    return result


def tile_time_steps(insns: list[Instruction], buffers: dict[str, BufferSpec],
                    tile: int | None = None, max_insns: int = 128,
                    max_args: int | None = None,
                    max_stages: int = CodegenOptions.time_tile_stages,
                    ) -> list[TiledRun]:
    """Fuse the runs of chunks of *insns* described in the module (chunks
    and storage already assigned) into one chunk each: puts the chunks in
    chain order (:func:`_chains_contiguous`), moves the pieces of a run's
    pieces stage into it (reordering *insns*; a chunk left empty is gone),
    renumbers the chunks, sets :attr:`Instruction.tiled` and
    :attr:`Instruction.stage`, and removes the buffers (and targets) of the
    arrays that now live in scratch arrays only. A run holds at most
    *max_insns* instructions and reads at most *max_args* arrays from
    memory (bounds on a kernel's size of
    :func:`~pytato_like.target.loopy.chunks.assign_chunks`) and at most
    *max_stages* steps; its tiles are *tile* elements of the last step
    (default and meaning: the options' :attr:`~pytato_like.target.loopy.options.CodegenOptions.time_tile`).
    Returns the runs."""
    if tile is None:
        tile = CodegenOptions.time_tile
    if not isinstance(tile, int) or isinstance(tile, bool) or tile < 0:
        raise ConfigurationError(
            f"the time_tile option must be an int >= 0, not {tile!r}")
    if tile < 1:
        return []
    chunks = _chains_contiguous(insns)
    finder = _RunFinder(chunks, buffers, max_insns)
    runs: list[tuple[int, int, TiledRun]] = []
    first = 0
    while first < len(chunks):
        if not finder.fusable[first]:
            first += 1
            continue
        last = first
        # (the steps' size is bounded by max_stages; their
        # arguments still are the kernel's)
        budget = KernelBudget(max_insns, max_ops=UNBOUNDED, max_args=max_args)
        budget.add(chunks[first])
        while (last + 1 < len(chunks) and last + 1 - first < max_stages
               and budget.fits(chunks[last + 1])
               and finder.fusable_last[last + 1]
               and finder.reads_shifted(last + 1, first)):
            last += 1
            budget.add(chunks[last])
            if not finder.fusable[last]:
                break   # (it writes pieces: it can only end the run)
        found = None
        # (one chunk is a run only behind a pieces stage)
        for end in range(last, first - 1, -1):
            found = finder.run(tile, first, end)
            if found is not None:
                runs.append((first, end, found))
                break
        first = (runs[-1][1] if found is not None else first) + 1
    if not runs:
        return []
    run_at = {first: (last, run) for first, last, run in runs}
    pulled = {id(p) for _, _, run in runs for p in run.pieces}
    new_chunks: list[list[Instruction]] = []
    k = 0
    while k < len(chunks):
        if k not in run_at:
            rest = [i for i in chunks[k] if id(i) not in pulled]
            if rest:  # (a chunk of pieces only is gone into its run)
                new_chunks.append(rest)
            k += 1
            continue
        last, run = run_at[k]
        base = 1 if run.pieces else 0
        staged = [(0, p) for p in run.pieces] + [
            (j - k + base, insn) for j in range(k, last + 1)
            for insn in chunks[j]]
        for stage, insn in staged:
            insn.tiled = run
            insn.stage = stage
            if stage < run.n_stages - 1:
                for t in insn.targets:
                    buffers.pop(t, None)  # (pieces share their targets)
                insn.targets = []
        new_chunks.append([insn for _, insn in staged])
        k = last + 1
    set_chunks(insns, new_chunks)
    return [run for _, _, run in runs]
