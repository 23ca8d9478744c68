"""Loop groups, levels, storage classes and chunks of loopy code generation.

Given the :class:`~pytato_like.target.loopy.plan.Instruction` of
every stored array, this module decides

- the *level* of each instruction (:func:`assign_levels`): one more than
  the level of a stored array it reads at another index or shape than its
  own (a stencil, a transpose, a reduction), so a level waits for the
  previous one; readers of an array written piece by piece (see
  :func:`~pytato_like.target.loopy.instructions.stored_pieces`) wait for
  all its pieces, one level above the highest;
- the *chunks* (:func:`assign_chunks`): instructions ordered by level and
  loop group, cut into runs of one loop group of one level (one device
  kernel) of at most ``max_instructions_per_kernel`` instructions;
- the *storage class* (:func:`assign_storage`): an array read only
  elementwise within its own loop group and chunk lives in a private
  variable; a temporary nobody else reads loses its buffer;
- which buffers cross chunk boundaries (:func:`chunk_boundaries`);
- which consecutive small chunks become one kernel of sequential loops
  (:func:`merge_small_chunks`); :func:`set_chunks` makes a new order of
  chunks the program's.

**Small chunks, one launch.** The parts of a partitioned stencil compute
a few boundary cells per step, then copy the cells they send: two loop
groups of a few elements, so two kernels -- and on a CPU device each
launch costs more host time than its loops (about 5 µs in PoCL and 10
more in the program's call). Consecutive chunks of at most
:attr:`~pytato_like.target.loopy.options.CodegenOptions.small_chunk_elements`
elements in all (no reduction, no fused run,
constant shapes) are merged into one chunk whose kernel runs every loop
in one work-item, one after the other: data written by one loop and read
by a later one needs no barrier there. (0 merges nothing.)

**Kernels of bounded size.** A chunk, a merged run of small chunks and a
time-tile run take at most
:attr:`~pytato_like.target.loopy.options.CodegenOptions.max_kernel_operations` expression
nodes and :attr:`~pytato_like.target.loopy.options.CodegenOptions.max_kernel_reads` arrays read
(:class:`KernelBudget`): loopy's code generation costs about 1 ms per
expression node (every pass walks every expression), and
PoCL's kernel compile grows with the size of
a kernel, faster than linearly with its arguments (1 000 pointers: a
minute), while chunks of one
structure are one compiled kernel however often they are launched. So a
long elementwise chain or a sum of thousands of inputs costs a few
kernels of bounded size, not one kernel as large as the DAG.

.. autoclass:: KernelBudget
.. autofunction:: merge_small_chunks
.. autofunction:: set_chunks

The loopy ingredients of each chunk are made by
:mod:`~pytato_like.target.loopy.chunk_spec`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import TYPE_CHECKING

import pymbolic.primitives as prim

from pytato_like.diagnostic import ConfigurationError
from pytato_like.scalar_expr import expression_size
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.utils import are_shape_components_equal

if TYPE_CHECKING:
    from pytato_like.array import Array, ShapeComponent
    from pytato_like.target.loopy.plan import BufferSpec, Instruction


def dim_key(d: ShapeComponent) -> Hashable:
    """A hashable key of the shape component *d* (ints by value, symbolic
    components by equality)."""
    return d if isinstance(d, int) else ("sym", d)


def _same_shape(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    return all(are_shape_components_equal(x, y) for x, y in zip(a, b, strict=True))


def _is_identity(insn: Instruction, ref_node: Array, idx: tuple) -> bool:
    """Whether *insn* reads *ref_node* at its own index and shape."""
    return (idx == tuple(prim.Variable(v) for v in insn.canon)
            and _same_shape(ref_node.shape, insn.shape))


#: a bound that is no bound
UNBOUNDED = 1 << 62


class KernelBudget:
    """What one kernel may still take: instructions, expression nodes
    and distinct arrays read (by default the
    :class:`~pytato_like.target.loopy.options.CodegenOptions` defaults). :meth:`fits` says whether instructions
    fit, :meth:`add` takes them, :meth:`reset` starts a new kernel."""

    def __init__(self, max_insns: int, max_ops: int | None = None,
                 max_args: int | None = None) -> None:
        self.max_insns = max_insns
        self.max_ops = (CodegenOptions.max_kernel_operations if max_ops is None
                        else max_ops)
        self.max_args = (CodegenOptions.max_kernel_reads if max_args is None
                         else max_args)
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.ops = 0
        self.reads: set[int] = set()
        #: arrays computed in the kernel: reading them takes no argument
        self.written: set[int] = set()

    def _size(self, insn: Instruction) -> int:
        if self.max_ops >= UNBOUNDED:
            return 0
        memo = insn.size_memo
        # (a size below its limit is exact; one at the limit is at least
        # the limit, which is as good for any smaller one)
        if memo is not None and (memo[1] < memo[0] or memo[0] >= self.max_ops):
            return memo[1]
        size = expression_size(insn.expr, self.max_ops)
        insn.size_memo = (self.max_ops, size)
        return size

    def fits(self, insns: list[Instruction]) -> bool:
        """Whether *insns* fit (always, into an empty kernel)."""
        if not self.count:
            return True
        if self.count + len(insns) > self.max_insns:
            return False
        if self.ops + sum(self._size(i) for i in insns) > self.max_ops:
            return False
        written = self.written | {id(i.node) for i in insns}
        reads = self.reads.union(*({nid for nid, _ in i.refs} for i in insns))
        return len(reads - written) <= self.max_args

    def add(self, insns: list[Instruction]) -> None:
        self.count += len(insns)
        self.ops += sum(self._size(i) for i in insns)
        self.reads.update(nid for i in insns for nid, _ in i.refs)
        self.written.update(id(i.node) for i in insns)


def assign_levels(insns: list[Instruction], insn_of: dict[int, Instruction],
                  stored: dict[int, Array]) -> None:
    """Set the level of every instruction of *insns* (in dependency
    order): the highest level it reads, plus one for a read that is not
    elementwise."""
    for insn in insns:
        level = 0
        for nid, idx in insn.refs:
            dep = insn_of.get(nid)
            if dep is None:
                continue
            if dep.pieces:
                # written by loops of other shapes: read from memory after
                # all of them
                level = max(level, *(p.level + 1 for p in dep.pieces))
                continue
            level = max(level, dep.level
                        + (0 if _is_identity(insn, stored[nid], idx) else 1))
        insn.level = level


def assign_chunks(insns: list[Instruction], insn_of: dict[int, Instruction],
                  max_insns: int, max_ops: int | None = None,
                  max_args: int | None = None) -> None:
    """Order *insns* by level and loop group and cut them into chunks:
    a chunk is one loop group of one level (one device kernel, no
    global barrier inside) of at most *max_insns* instructions, and
    (see :class:`KernelBudget`) of at most *max_ops* expression nodes and *max_args* arrays read. The
    body of a time step is then one chunk whatever the number of
    steps, and every step launches the same compiled kernel; a long
    elementwise chain or a sum of many inputs is a run of chunks of one
    structure, so also one compiled kernel launched several times."""
    first_seen: dict[tuple, int] = {}

    def phase(insn: Instruction) -> tuple:
        key = (insn.level, tuple(dim_key(d) for d in insn.shape))
        return insn.level, first_seen.setdefault(key, len(first_seen))

    ordered = sorted(insns, key=phase)
    # same-level reads are elementwise reads in the same loop group, so
    # this order is topological; symbolic shapes equal but not
    # identical could break that: keep the original order then
    position = {id(insn): i for i, insn in enumerate(ordered)}
    if all(position[id(writer)] < position[id(insn)]
           for insn in ordered for nid, _ in insn.refs if nid in insn_of
           for writer in insn_of[nid].writers()):
        insns[:] = ordered
    budget = KernelBudget(max_insns, max_ops, max_args)
    chunk, previous = -1, None
    for insn in insns:
        key = phase(insn)
        if key != previous or not budget.fits([insn]):
            chunk, previous = chunk + 1, key
            budget.reset()
        insn.chunk = chunk
        budget.add([insn])


def assign_storage(insns: list[Instruction], insn_of: dict[int, Instruction],
                   stored: dict[int, Array],
                   buffers: dict[str, BufferSpec]) -> dict[int, str]:
    """Give a private variable ``_pt_p<n>`` to every array read
    elementwise from the same loop group of the same chunk (never to one
    written piece by piece); a temporary
    read nowhere else loses its buffer (removed from *buffers* and from
    the instruction's targets). Returns ``id(array) -> private name``."""
    needs_global: dict[int, bool] = {}
    needs_private: dict[int, bool] = {}
    for insn in insns:
        for nid, idx in insn.refs:
            dep = insn_of.get(nid)
            if dep is None:
                continue
            if (_is_identity(insn, stored[nid], idx) and not dep.pieces
                    and dep.level == insn.level and dep.chunk == insn.chunk
                    and _same_shape(dep.shape, insn.shape)):
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
        if (not needs_global.get(nid) and buffers[buf].kind == "temporary"
                and insn.private is not None):
            del buffers[buf]
            insn.targets = []
    return {id(i.node): i.private for i in insns
            if i.node is not None and i.private}


def split_chunks(insns: list[Instruction]) -> list[list[Instruction]]:
    """The instructions of each chunk, in chunk order."""
    chunks: list[list[Instruction]] = []
    for insn in insns:
        if insn.chunk == len(chunks):
            chunks.append([])
        chunks[insn.chunk].append(insn)
    return chunks


def set_chunks(insns: list[Instruction], chunks: list[list[Instruction]]
               ) -> None:
    """Make *chunks* (lists of the instructions of *insns*) the chunks of
    *insns*, in that order: numbered, and *insns* ordered by them."""
    for n, chunk in enumerate(chunks):
        for insn in chunk:
            insn.chunk = n
    insns[:] = [insn for chunk in chunks for insn in chunk]


def chunk_boundaries(chunks: list[list[Instruction]], array_name: dict[int, str]
                     ) -> tuple[dict[str, int], dict[str, set[int]]]:
    """``buffer -> chunk writing it`` and ``buffer -> chunks reading it``:
    buffers used across chunks become program buffers (kernel
    arguments); temporaries used within one chunk stay kernel
    temporaries."""
    written_in: dict[str, int] = {}
    read_in: dict[str, set[int]] = {}
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            for t in insn.targets:
                written_in[t] = k
    for k, chunk in enumerate(chunks):
        for insn in chunk:
            for nid, _ in insn.refs:
                name = array_name.get(nid)
                if name is not None:
                    read_in.setdefault(name, set()).add(k)
    return written_in, read_in


def _small_size(chunk: list[Instruction]) -> int | None:
    """The elements *chunk* computes, if it may join a sequential kernel:
    constant shapes, no reduction, not a fused run; else None."""
    total = 0
    for insn in chunk:
        if (insn.tiled is not None or insn.reduction_inames
                or not all(isinstance(d, int) for d in insn.shape)):
            return None
        total += math.prod(insn.shape)
    return total


def merge_small_chunks(insns: list[Instruction], max_insns: int,
                       max_elements: int | None = None,
                       max_ops: int | None = None,
                       max_args: int | None = None) -> int:
    """Merge runs of consecutive small chunks of *insns* (see the module
    documentation: at most *max_elements* elements, default
    :attr:`~pytato_like.target.loopy.options.CodegenOptions.small_chunk_elements`, and *max_insns* instructions, *max_ops*
    expression nodes and *max_args* arrays read in all, see
    :class:`KernelBudget`)
    into one chunk each, marked :attr:`Instruction.sequential`, and
    renumber the chunks. Returns the number of chunks merged away."""
    if max_elements is None:
        max_elements = CodegenOptions.small_chunk_elements
    if (not isinstance(max_elements, int) or isinstance(max_elements, bool)
            or max_elements < 0):
        raise ConfigurationError(
            "the small_chunk_elements option must be an int >= 0, not "
            f"{max_elements!r}")
    if max_elements < 1:
        return 0
    chunks = split_chunks(insns)
    runs: list[list[list[Instruction]]] = []
    budget = KernelBudget(max_insns, max_ops, max_args)
    #: elements of the last run, if it may grow
    open_run: int | None = None
    for chunk in chunks:
        size = _small_size(chunk)
        if size is not None and open_run is not None \
                and open_run + size <= max_elements and budget.fits(chunk):
            runs[-1].append(chunk)
            open_run += size
            budget.add(chunk)
            continue
        runs.append([chunk])
        open_run = None if size is None or size > max_elements else size
        budget.reset()
        budget.add(chunk)
    merged = []
    for run in runs:
        chunk = [insn for part in run for insn in part]
        for insn in chunk:
            insn.sequential = len(run) > 1
        merged.append(chunk)
    set_chunks(insns, merged)
    return len(chunks) - len(merged)
