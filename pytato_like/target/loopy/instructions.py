"""Lowering stage of loopy code generation: stored arrays into instructions.

Owns :func:`lower_stored_arrays`, which makes the
:class:`~pytato_like.target.loopy.plan.Instruction` records (one
assignment of a stored array over its canonical inames ``_pt_c<i>``, with
the stored arrays it reads; a leaf module's type, so the passes and
:mod:`~pytato_like.target.loopy.read_pieces` use them without this
stage): which lowers every stored array of a program
(and every output that is an input, as a copy) with
:class:`~pytato_like.target.loopy.lowering.NodeLowerer`. Levels, chunks
and private storage are filled in later (:mod:`~pytato_like.target.loopy.chunks`).

A stored :class:`~pytato_like.array.Concatenate` or
:class:`~pytato_like.array.Stack` is written *piece by piece*
(:func:`stored_pieces`): one instruction per piece, over the piece's own
shape, writing the piece's value (no select on the position along the
axis) at its :class:`~pytato_like.target.loopy.plan.Placement` in the whole array. A select whose
branches load several values keeps devices from vectorising the loop
(PoCL: 40x slower for a stencil); the pieces are plain loops, and pieces
of one shape share one kernel. A stored array whose value *reads* a
concatenation or ``roll`` through such selects is cut the same way, into
the ranges where the selects are decided
(:mod:`~pytato_like.target.loopy.read_pieces`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import pymbolic.primitives as prim

from pytato_like.array import (
    Array,
    Concatenate,
    InputArgumentBase,
    NamedArray,
    SizeParam,
    Stack,
)
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.plan import BufferSpec, Instruction, Placement
from pytato_like.target.loopy.read_pieces import split_reads

if TYPE_CHECKING:
    from pytato_like.array import ShapeComponent
    from pytato_like.target.loopy.naming import ProgramNames
    from pytato_like.transform.materialize_cost import NodeCost

# A concatenation smaller than CodegenOptions.pieces_min_size stays one
# instruction with selects: one kernel launch instead of one per piece
# shape (launches cost more than the selects at that size); one of more
# than CodegenOptions.pieces_max pieces too.


def stored_pieces(node: Array, inlined: Callable[[Array], bool],
                  min_size: int = CodegenOptions.pieces_min_size,
                  max_pieces: int = CodegenOptions.pieces_max,
                  ) -> list[tuple[Array, Placement]] | None:
    """The pieces of the stored array *node* and where each goes, when
    *node* is to be written piece by piece: a concatenation or stack (of
    at least *min_size* elements, or of a symbolic size) of at most
    *max_pieces* non-empty pieces (the options'
    :attr:`~pytato_like.target.loopy.options.CodegenOptions.pieces_min_size`
    and :attr:`~pytato_like.target.loopy.options.CodegenOptions.pieces_max`). A piece that is an
    inlined concatenation along the same axis and of the same dtype
    (``inlined(array)`` true) is split in turn. Empty pieces are left
    out. None when *node* is written as one instruction."""
    if not isinstance(node, (Concatenate, Stack)):
        return None
    if any(isinstance(d, int) and d == 0 for d in node.shape):
        return None  # nothing to write
    if (all(isinstance(d, int) for d in node.shape)
            and math.prod(node.shape) < min_size):
        return None
    axis = node.axis
    pieces: list[tuple[Array, Placement]] = []
    if isinstance(node, Stack):
        pieces = [(a, Placement(axis, position=k))
                  for k, a in enumerate(node.arrays)]
    else:
        offset: ShapeComponent = 0
        todo = list(reversed(node.arrays))  # a stack: no recursion
        while todo:
            ary = todo.pop()
            if (isinstance(ary, Concatenate) and ary.axis == axis
                    and ary.dtype == node.dtype and inlined(ary)):
                todo.extend(reversed(ary.arrays))
                continue
            d = ary.shape[axis]
            if isinstance(d, int) and d == 0:
                continue
            pieces.append((ary, Placement(axis, offset)))
            if len(pieces) > max_pieces:
                return None
            offset = d if isinstance(offset, int) and offset == 0 \
                else offset + d
    if not pieces or len(pieces) > max_pieces:
        return None
    return pieces


class _StoredArrayLowerer:
    """Lowers one array at a time; a read of a stored array becomes a
    subscript of its buffer and is recorded in the instruction's refs."""

    def __init__(self, names: ProgramNames, stored: dict[int, Array]) -> None:
        from pytato_like.target.loopy.lowering import NodeLowerer
        self.names = names
        self.stored = stored
        self._refs: list[tuple[int, tuple]] = []
        self.lowerer = NodeLowerer(self._stored_ref, names.dim_expr)

    def _stored_ref(self, node: Array, idx: tuple
                    ) -> prim.Variable | prim.Subscript | None:
        if isinstance(node, SizeParam):
            return prim.Variable(node.name)
        if id(node) not in self.stored:
            return None
        self._refs.append((id(node), idx))
        name = self.names.array_name[id(node)]
        return prim.Subscript(prim.Variable(name), idx if idx else (0,))

    def lower(self, node: Array, targets: list[str], n_red: int,
              piece: Array | None = None,
              placement: Placement | None = None) -> Instruction:
        """The instruction writing *node* to *targets* -- or only its
        *piece* (cast to the dtype of *node*) at *placement*; its
        reduction inames are prefixed ``_pt_r<n_red>_`` (unique in the
        program)."""
        from pytato_like.target.loopy.lowering import uniquify_reduction_inames
        lowerer = self.lowerer
        lowerer.iname_prefix = f"_pt_r{n_red}_"
        value_node = node if piece is None else piece
        canon = tuple(f"_pt_c{i}" for i in range(value_node.ndim))
        idx = tuple(prim.Variable(v) for v in canon)
        self._refs.clear()
        lowerer._memo.clear()
        lowerer.reduction_inames = []
        lowerer.helpers_used = set()
        value = lowerer.cast(lowerer.value_at(value_node, idx),
                             value_node.dtype, node.dtype)
        # (no reduction inames made: no reduction to rename)
        expr = (uniquify_reduction_inames(value, lowerer)
                if lowerer.reduction_inames else value)
        return Instruction(node, targets, expr, canon, value_node.shape,
                           list(self._refs), lowerer.reduction_inames,
                           lowerer.helpers_used, placement=placement)


def lower_stored_arrays(
        order: list[Array], out_nodes: dict[str, Array],
        costs: dict[int, NodeCost],
        names: ProgramNames, buffers: dict[str, BufferSpec],
        outputs_of: dict[int, list[str]], out_buffer: dict[str, str],
        options: CodegenOptions | None = None,
        split_read_pieces: bool = True,
        ) -> tuple[list[Instruction], dict[int, Instruction], dict[int, Array]]:
    """One :class:`Instruction` per stored array of *order* (in that order;
    one per piece of those written piece by piece, see
    :func:`stored_pieces`) and one copy per output that is an input.

    A stored array that is no output gets a temporary buffer, added to
    *buffers*; its buffer name goes to ``names.array_name``. Returns the
    instructions, ``id(array) -> instruction`` (the last piece of an
    array written piece by piece) and ``id(array) -> array`` of the
    arrays stored (inputs included). *options* (default:
    :class:`~pytato_like.target.loopy.options.CodegenOptions` defaults)
    bound the arrays written or read piece by piece. With
    *split_read_pieces* false an array reading through selects stays one
    instruction (code generation cuts it in its ``read_pieces`` pass,
    :mod:`~pytato_like.target.loopy.passes`).
    """
    if options is None:
        options = CodegenOptions()
    min_size, max_pieces = options.pieces_min_size, options.pieces_max

    stored: dict[int, Array] = {}
    for node in order:
        if isinstance(node, InputArgumentBase) and not isinstance(node, SizeParam):
            stored[id(node)] = node
    lowerer = _StoredArrayLowerer(names, stored)

    def _inlined(ary: Array) -> bool:
        cost = costs.get(id(ary))
        return cost is not None and not cost.stored

    insns: list[Instruction] = []
    insn_of: dict[int, Instruction] = {}
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
            base = names.temporary_name(node)
            targets = [names.fresh(base)]
            if base != "_pt_tmp":
                names.user_named.add(targets[0])
            buffers[targets[0]] = BufferSpec(
                targets[0], names.shape_of(node), node.dtype, "temporary")
        pieces = stored_pieces(node, _inlined, min_size, max_pieces)
        if pieces is None:
            insn = lowerer.lower(node, targets, n_red)
            n_red += 1
            # reads through selects: one instruction per decided range
            read_pieces = (split_reads(insn, min_size, max_pieces)
                           if split_read_pieces else None)
            if read_pieces is None:
                insns.append(insn)
            else:
                insns.extend(read_pieces)
                insn = read_pieces[-1]
        else:
            group: list[Instruction] = []
            for piece, placement in pieces:
                insn = lowerer.lower(node, targets, n_red, piece, placement)
                n_red += 1
                insn.pieces = group
                group.append(insn)
            insns.extend(group)
        insn_of[id(node)] = insn
        names.array_name[id(node)] = targets[0]
        stored[id(node)] = node
    # outputs that are inputs: copies
    for name, node in out_nodes.items():
        if isinstance(node, InputArgumentBase):
            if isinstance(node, SizeParam):
                insn = Instruction(node, [out_buffer[name]], prim.Variable(node.name),
                                   (), (), [], [], set())
            else:
                insn = lowerer.lower(node, [out_buffer[name]], n_red)
            n_red += 1
            insns.append(insn)
    return insns, insn_of, stored
