"""Lowering stage of loopy code generation: stored arrays into instructions.

Owns :class:`Instruction` (one assignment of a stored array over its
canonical inames ``_pt_c<i>``, with the stored arrays it reads) and
:func:`lower_stored_arrays`, which lowers every stored array of a program
(and every output that is an input, as a copy) with
:class:`~pytato_like.target.loopy.lowering.NodeLowerer`. Levels, chunks
and private storage are filled in later (:mod:`~pytato_like.target.loopy.chunks`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pymbolic.primitives as prim

from pytato_like.array import Array, InputArgumentBase, NamedArray, SizeParam

if TYPE_CHECKING:
    from pytato_like.target.loopy.codegen import BufferSpec
    from pytato_like.target.loopy.naming import ProgramNames


@dataclasses.dataclass
class Instruction:
    """The assignment of one stored array (or output copy)."""

    #: the array computed (None for nothing but a copy of a size)
    node: Array | None
    #: global buffer names written (outputs, temporaries)
    targets: list[str]
    #: the value at the canonical inames *canon*
    expr: Any
    canon: tuple[str, ...]
    shape: tuple
    #: ``(id(stored array), index)`` of every read of a stored array
    refs: list[tuple[int, tuple]]
    #: ``(iname, lower bound, upper bound)`` of its reductions
    reduction_inames: list
    #: scalar helper functions used
    helpers: set
    #: set by :mod:`~pytato_like.target.loopy.chunks`
    level: int = 0
    chunk: int = 0
    #: name of the private variable holding the value, if any
    private: str | None = None


class _StoredArrayLowerer:
    """Lowers one array at a time; a read of a stored array becomes a
    subscript of its buffer and is recorded in the instruction's refs."""

    def __init__(self, names: ProgramNames, stored: dict[int, Array]) -> None:
        from pytato_like.target.loopy.lowering import NodeLowerer
        self.names = names
        self.stored = stored
        self._refs: list[tuple[int, tuple]] = []
        self.lowerer = NodeLowerer(self._stored_ref, names.dim_expr)

    def _stored_ref(self, node: Array, idx: tuple) -> Any:
        if isinstance(node, SizeParam):
            return prim.Variable(node.name)
        if id(node) not in self.stored:
            return None
        self._refs.append((id(node), idx))
        name = self.names.array_name[id(node)]
        return prim.Subscript(prim.Variable(name), idx if idx else (0,))

    def lower(self, node: Array, targets: list[str], n_red: int) -> Instruction:
        """The instruction writing *node* to *targets*; its reduction
        inames are prefixed ``_pt_r<n_red>_`` (unique in the program)."""
        from pytato_like.target.loopy.lowering import uniquify_reduction_inames
        lowerer = self.lowerer
        lowerer.iname_prefix = f"_pt_r{n_red}_"
        canon = tuple(f"_pt_c{i}" for i in range(node.ndim))
        idx = tuple(prim.Variable(v) for v in canon)
        self._refs.clear()
        lowerer._memo.clear()
        lowerer.reduction_inames = []
        lowerer.helpers_used = set()
        expr = uniquify_reduction_inames(lowerer.value_at(node, idx), lowerer)
        return Instruction(node, targets, expr, canon, node.shape,
                           list(self._refs), lowerer.reduction_inames,
                           lowerer.helpers_used)


def lower_stored_arrays(
        order: list[Array], out_nodes: dict[str, Array], costs: dict[int, Any],
        names: ProgramNames, buffers: dict[str, BufferSpec],
        outputs_of: dict[int, list[str]], out_buffer: dict[str, str],
        ) -> tuple[list[Instruction], dict[int, Instruction], dict[int, Array]]:
    """One :class:`Instruction` per stored array of *order* (in that order)
    and one copy per output that is an input.

    A stored array that is no output gets a temporary buffer, added to
    *buffers*; its buffer name goes to ``names.array_name``. Returns the
    instructions, ``id(array) -> instruction`` and ``id(array) -> array``
    of the arrays stored (inputs included).
    """
    from pytato_like.target.loopy.codegen import BufferSpec

    stored: dict[int, Array] = {}
    for node in order:
        if isinstance(node, InputArgumentBase) and not isinstance(node, SizeParam):
            stored[id(node)] = node
    lowerer = _StoredArrayLowerer(names, stored)
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
        insn = lowerer.lower(node, targets, n_red)
        n_red += 1
        insns.append(insn)
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
