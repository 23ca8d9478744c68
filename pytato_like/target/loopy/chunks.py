"""Loop groups, levels, storage classes and chunks of loopy code generation.

Given the :class:`~pytato_like.target.loopy.instructions.Instruction` of
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
- which buffers cross chunk boundaries (:func:`chunk_boundaries`).

The loopy ingredients of each chunk are made by
:mod:`~pytato_like.target.loopy.chunk_spec`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pymbolic.primitives as prim

if TYPE_CHECKING:
    from pytato_like.array import Array
    from pytato_like.target.loopy.codegen import BufferSpec
    from pytato_like.target.loopy.instructions import Instruction


def dim_key(d: Any) -> Any:
    """A hashable key of the shape component *d* (ints by value, symbolic
    components by equality)."""
    return d if isinstance(d, int) else ("sym", d)


def _same_shape(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    from pytato_like.utils import are_shape_components_equal
    return all(are_shape_components_equal(x, y) for x, y in zip(a, b, strict=True))


def _is_identity(insn: Instruction, ref_node: Array, idx: tuple) -> bool:
    """Whether *insn* reads *ref_node* at its own index and shape."""
    return (idx == tuple(prim.Variable(v) for v in insn.canon)
            and _same_shape(ref_node.shape, insn.shape))


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
                  max_insns: int) -> None:
    """Order *insns* by level and loop group and cut them into chunks:
    a chunk is one loop group of one level (one device kernel, no
    global barrier inside) of at most *max_insns* instructions. The
    body of a time step is then one chunk whatever the number of
    steps, and every step launches the same compiled kernel."""
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
    chunk, count, previous = -1, 0, None
    for insn in insns:
        key = phase(insn)
        if key != previous or count == max_insns:
            chunk, count, previous = chunk + 1, 0, key
        insn.chunk = chunk
        count += 1


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
