"""Stored arrays that read through selects, written piece by piece.

A concatenation or ``roll`` read inside another expression lowers to
selects on the position (``i < 1 ? ghost[i] : u[i - 1]``), and PoCL runs
a kernel holding such selects at about a third of the speed of the same
loop without them -- even where a work-group-uniform branch skips them.
:func:`split_reads` cuts the instruction of such a stored array, along
the one axis its selects test, into the index ranges in which every
select is decided, and gives each range its own instruction with the
selects resolved: the pieces of :mod:`~pytato_like.target.loopy.instructions`
(placed at their offset, pieces of one shape sharing a loop), now for
reads. The interior of a stencil becomes a plain loop; its few boundary
cells share another.

A select is decided in a range when its condition compares an affine
function of one canonical index with integer coefficients (``a * i + b <
k``, any comparison); the ranges are cut where such a condition changes
value. Where selects test several axes, the instruction is cut along
the contiguous (last) one, and the selects on the others stay: they are
constant along each piece's innermost loop (the 2-D heat equation's
``roll`` along both axes). An instruction is left whole if it has
reductions, symbolic sizes, fewer than
:attr:`~pytato_like.target.loopy.options.CodegenOptions.pieces_min_size`
elements, selects on several axes but not on the last, more than
:attr:`~pytato_like.target.loopy.options.CodegenOptions.pieces_max` ranges, or if its
largest range would still hold a select, or if its expression is deeper
than :data:`MAX_DEPTH`.

.. autodata:: MAX_DEPTH
.. autofunction:: split_reads
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pymbolic.primitives as prim
from pymbolic.mapper import IdentityMapper

from pytato_like.scalar_expr import affine_form
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.target.loopy.plan import Instruction, Placement

if TYPE_CHECKING:
    from pymbolic.typing import Expression

_COMPARE = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def _condition(cond: Expression, names: tuple[str, ...]
               ) -> tuple[str, int, int, str] | None:
    """``(index, a, b, op)`` when *cond* is ``a * index + b op 0`` with one
    canonical index, else None."""
    if not (isinstance(cond, prim.Comparison) and cond.operator in _COMPARE):
        return None
    left = affine_form(cond.left, names)
    right = affine_form(cond.right, names)
    if left is None or right is None:
        return None
    coefs = dict(left[0])
    for name, c in right[0].items():
        coefs[name] = coefs.get(name, 0) - c
    coefs = {n: c for n, c in coefs.items() if c}
    if len(coefs) != 1:
        return None
    (name, a), = coefs.items()
    return name, a, left[1] - right[1], cond.operator


def _truth(a: int, b: int, op: str, i: int) -> bool:
    return bool(_COMPARE[op](a * i + b, 0))


#: deepest expression cut into pieces (the pieces are rebuilt by a
#: recursive pymbolic mapper); a deeper one stays whole
MAX_DEPTH = 200


def _walk(expr: Expression) -> Iterator[tuple[object, int]]:
    """``(subexpression, depth)`` of every subexpression of *expr*
    (iteratively)."""
    todo = [(expr, 0)]
    while todo:
        e, depth = todo.pop()
        yield e, depth
        if isinstance(e, prim.ExpressionNode):
            for field in getattr(e, "__dataclass_fields__", {}) or ():
                value = getattr(e, field)
                if isinstance(value, tuple):
                    todo.extend((v, depth + 1) for v in value)
                else:
                    todo.append((value, depth + 1))


def _cuts(expr: Expression, names: tuple[str, ...], shape: tuple[int, ...]
          ) -> dict[str, set[int]] | None:
    """Per canonical index, the positions (within its extent) where a
    select's decidable condition changes value; None if some select is
    not decidable or *expr* is deeper than :data:`MAX_DEPTH`."""
    cuts: dict[str, set[int]] = {}
    extent = dict(zip(names, shape, strict=True))
    for e, depth in _walk(expr):
        if depth > MAX_DEPTH:
            return None
        if not isinstance(e, prim.If):
            continue
        found = _condition(e.condition, names)
        if found is None:
            return None
        name, a, b, op = found
        n = extent[name]
        # where a * i + b crosses 0: the change is next to it
        root = -b / a
        for t in {math.floor(root), math.floor(root) + 1,
                  math.ceil(root), math.ceil(root) + 1}:
            if 0 < t < n and _truth(a, b, op, t) != _truth(a, b, op, t - 1):
                cuts.setdefault(name, set()).add(t)
    return cuts


class _Resolver(IdentityMapper):
    """*expr* with the canonical index *name* shifted by *offset* and each
    select decided in ``[0, length)`` replaced by its branch."""

    def __init__(self, names: tuple[str, ...], name: str, offset: int,
                 length: int) -> None:
        super().__init__()
        self.names = names
        self.name = name
        self.offset = offset
        self.length = length
        #: selects on *name* left undecided (those on other indices stay
        #: as they are: constant along the cut axis)
        self.undecided = 0

    def map_variable(self, expr, *args):
        if expr.name == self.name and self.offset:
            return prim.Sum((expr, self.offset))
        return expr

    def map_if(self, expr, *args):
        condition = self.rec(expr.condition)
        found = _condition(condition, self.names)
        if found is not None and found[0] == self.name:
            _, a, b, op = found
            first = _truth(a, b, op, 0)
            if first == _truth(a, b, op, self.length - 1):
                # affine: the same at both ends is the same throughout
                return self.rec(expr.then if first else expr.else_)
        if found is None or found[0] == self.name:
            self.undecided += 1
        return prim.If(condition, self.rec(expr.then), self.rec(expr.else_))

    def map_type_cast(self, expr, *args):
        import loopy as lp
        return lp.TypeCast(expr.type, self.rec(expr.child))


def split_reads(insn: Instruction,
                min_size: int = CodegenOptions.pieces_min_size,
                max_pieces: int = CodegenOptions.pieces_max,
                ) -> list[Instruction] | None:
    """The pieces of the instruction *insn* (of
    :mod:`~pytato_like.target.loopy.instructions`), one per index range in
    which its selects are decided (see the module docs), or None when it
    stays whole (fewer than *min_size* elements, more than *max_pieces*
    ranges)."""
    shape = insn.shape
    if (insn.node is None or insn.placement is not None
            or insn.reduction_inames or not shape
            or not all(isinstance(d, int) for d in shape)
            or math.prod(shape) < min_size):
        return None
    names = tuple(insn.canon)
    cuts = _cuts(insn.expr, names, shape)
    if not cuts:
        return None
    if len(cuts) == 1:
        (name, positions), = cuts.items()
    elif names[-1] in cuts:
        # selects on several axes: cut the contiguous one, whose selects
        # would sit inside the innermost loop; the others are constant
        # along it (loop-invariant in a work-item's run)
        name, positions = names[-1], cuts[names[-1]]
    else:
        return None
    axis = names.index(name)
    bounds = [0, *sorted(positions), shape[axis]]
    if len(bounds) - 1 > max_pieces:
        return None
    group: list[Instruction] = []
    largest = max(range(len(bounds) - 1),
                  key=lambda k: bounds[k + 1] - bounds[k])
    for k in range(len(bounds) - 1):
        lo, hi = bounds[k], bounds[k + 1]
        resolver = _Resolver(names, name, lo, hi - lo)
        expr = resolver(insn.expr)
        if k == largest and resolver.undecided:
            return None     # the bulk would keep its selects: no gain
        refs = [(nid, tuple(resolver(i) for i in idx))
                for nid, idx in insn.refs]
        piece = Instruction(
            insn.node, insn.targets, expr, insn.canon,
            (*shape[:axis], hi - lo, *shape[axis + 1:]), refs, [],
            set(insn.helpers), placement=Placement(axis, lo))
        piece.pieces = group
        group.append(piece)
    return group
