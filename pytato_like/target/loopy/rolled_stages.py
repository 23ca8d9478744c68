"""Alike stages of a fused run of stencil steps as one loop over the steps.

A fused run (:mod:`~pytato_like.target.loopy.tiled_spec`) writes one
sequential loop per stage: ``n`` steps of ``f`` fields are ``n`` loops of
``f`` statements, so loopy's code generation and the OpenCL compiler's
optimisation grow with the steps fused. The middle stages of a stencil
run are alike: each computes the same statements over a window one halo
narrower, from the scratch arrays the stage before wrote into the other
set of a ping-pong pair. :func:`roll_middle_stages` writes them as one
loop over the step ``t`` around the window loop:

* every pair of scratch arrays the stages alternate between becomes one
  array of two rows (``name[parity, w]``), the row written by step ``t``
  being ``(t - first) % 2`` -- in every instruction of the kernel, so the
  first and last stages read and write the same storage as before;
* the statements are those of the first middle stage with the row and
  the window iname made symbolic in ``t``; the window's width, offset
  and extent must be affine in the step;
* rolling is exact: before the loop replaces them, the statements are
  instantiated at every step it covers and compared with the stages as
  generated (same assignee, same expression). Any difference -- a
  boundary condition depending on the step's position, a stage reading an
  older stage, private temporaries -- keeps the stages unrolled.

The demo's 10-step runs (2 fields, both halo strips) went from 52, 56
and 32 statements to 24, 28 and 6 (see doc/codegen.rst, "Rolled time
tiles"). The work is per kernel: at most ``time_tile_stages`` stages of
at most ``max_instructions_per_kernel`` statements, whatever the depth of
the DAG; the renaming recurses only into one statement's expression, as
the chunk rewriter before it does.
``CodegenOptions.time_tile_roll`` (``PYTATO_LIKE_TIME_TILE_ROLL=0``)
keeps every stage unrolled.

.. autoclass:: RolledStages
.. autofunction:: roll_middle_stages
.. autodata:: MIN_ROLLED_STAGES
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import loopy as lp
import pymbolic.primitives as prim
from loopy.symbolic import UncachedIdentityMapper

if TYPE_CHECKING:
    from pymbolic.typing import Expression

#: fewest stages worth a loop (two stages cost less unrolled)
MIN_ROLLED_STAGES = 3
#: the inames of the loop over steps and of its window
STEP_INAME = "_pt_step"
WINDOW_INAME = "_pt_wstep"


@dataclasses.dataclass(frozen=True)
class RolledStages:
    """Stages ``first`` to ``last`` of a fused run written as one loop:
    the run's instructions and scratch temporaries with those stages
    replaced, and the window of step ``t``: ``0 <= w < width + d_width *
    (t - first)``, at ``offset + d_offset * (t - first)`` of an extent
    ``extent + d_extent * (t - first)`` (``extent``: of stage ``first``)."""

    first: int
    last: int
    insns: list
    temps: dict
    d_width: int
    d_offset: int
    d_extent: int


class _CannotRoll(Exception):
    pass


class _Rename(UncachedIdentityMapper):
    """Scratch array ``name`` -> row ``parity(p)`` of its pair's array,
    and iname *old* -> *new*."""

    def __init__(self, slots: dict[str, tuple[str, int]],
                 parity: Callable[[int], Expression], old: str | None = None,
                 new: str | None = None) -> None:
        super().__init__()
        self.slots = slots
        self.parity = parity
        self.old = old
        self.new = new

    def map_variable(self, expr, *args, **kwargs):
        if expr.name in self.slots:
            raise _CannotRoll(f"{expr.name} used without an index")
        if expr.name == self.old:
            return prim.Variable(self.new)
        return expr

    def map_subscript(self, expr, *args, **kwargs):
        agg = expr.aggregate
        if isinstance(agg, prim.Variable) and agg.name in self.slots:
            array, row = self.slots[agg.name]
            index = tuple(self.rec(i) for i in expr.index_tuple)
            return prim.Subscript(prim.Variable(array),
                                  (self.parity(row), *index))
        return super().map_subscript(expr, *args, **kwargs)


def _row_at(steps: int, row: int) -> int:
    """The row *steps* after the first rolled step writes (*row* 0) or
    reads (*row* 1)."""
    return (steps + row) % 2


def _written(insns: Sequence) -> list[str]:
    names = []
    for insn in insns:
        assignee = insn.assignee
        if not (isinstance(assignee, prim.Subscript)
                and isinstance(assignee.aggregate, prim.Variable)):
            raise _CannotRoll("a stage writes something else than scratch")
        names.append(assignee.aggregate.name)
    return names


def _affine(values: Sequence[int], first: int, last: int) -> int | None:
    step = values[first + 1] - values[first]
    if all(values[s] == values[first] + step * (s - first)
           for s in range(first, last + 1)):
        return step
    return None


def roll_middle_stages(stage_insns: Sequence[Sequence[lp.Assignment]],
                       widths: Sequence[int], offsets: Sequence[int],
                       extents: Sequence[int], temps: dict,
                       tile_iname: str) -> RolledStages | None:
    """The middle stages of a fused run (all but the first and the last)
    as one loop over the steps, or None when they are fewer than
    :data:`MIN_ROLLED_STAGES` or not alike (see the module's docstring).
    *stage_insns* are the loopy instructions of each stage in order (stage
    ``s`` loops over ``_pt_w<s>``), *widths*, *offsets*, *extents* the
    run's (``TiledRun``), *temps* its temporaries by name."""
    n = len(stage_insns)
    for first in (1, 2):
        last = n - 2
        if last - first + 1 < MIN_ROLLED_STAGES:
            return None
        try:
            rolled = _roll(stage_insns, widths, offsets, extents, temps,
                           tile_iname, first, last)
        except _CannotRoll:
            continue
        if rolled is not None:
            return rolled
    return None


def _roll(stage_insns, widths, offsets, extents, temps, tile_iname: str,
          first: int, last: int) -> RolledStages | None:
    d_width = _affine(widths, first, last)
    d_offset = _affine(offsets, first, last)
    d_extent = _affine(extents, first, last)
    if d_width is None or d_offset is None or d_extent is None:
        return None
    for s in range(first, last + 1):
        for insn in stage_insns[s]:
            if (insn.within_inames != frozenset({tile_iname, f"_pt_w{s}"})
                    or insn.predicates or insn.no_sync_with):
                return None
    even, odd = _written(stage_insns[first]), _written(stage_insns[first + 1])
    if (len(even) != len(odd) or len(set(even)) != len(even)
            or set(even) & set(odd)):
        return None
    for s in range(first, last + 1):
        if _written(stage_insns[s]) != (even if (s - first) % 2 == 0 else odd):
            return None
    if not all(n in temps and len(temps[n].shape) == 1 for n in even + odd):
        return None
    slots = {name: (name, 0) for name in even}
    slots.update((o, (e, 1)) for e, o in zip(even, odd))

    def symbolic(row: int) -> Expression:
        # the row step t writes (row 0) or reads (row 1)
        shift = row - first
        t = prim.Variable(STEP_INAME)
        return prim.Remainder(prim.Sum((t, shift)) if shift else t, 2)

    # every instruction refers to the pairs' storage (rolled or not)
    constant = _Rename(slots, lambda row: row)
    template = _Rename(slots, symbolic, f"_pt_w{first}", WINDOW_INAME)
    body = [(template(i.assignee), template(i.expression))
            for i in stage_insns[first]]
    # exact: the template at every step it covers is that stage as generated
    for s in range(first, last + 1):
        at_s = _Rename(slots, functools.partial(_row_at, s - first),
                       f"_pt_w{first}", f"_pt_w{s}")
        want = [(at_s(i.assignee), at_s(i.expression))
                for i in stage_insns[first]]
        got = [(constant(i.assignee), constant(i.expression))
               for i in stage_insns[s]]
        if want != got:
            return None

    rolled_ids = {i.id for s in range(first, last + 1) for i in stage_insns[s]}
    new_ids = [f"_pt_rolled{k}" for k in range(len(body))]
    insns = []
    for s, stage in enumerate(stage_insns):
        if first <= s <= last:
            if s == first:
                for k, (insn, (assignee, expr)) in enumerate(
                        zip(stage, body)):
                    deps = {d for d in insn.depends_on if d not in rolled_ids}
                    insns.append(insn.copy(
                        id=new_ids[k], assignee=assignee, expression=expr,
                        depends_on=frozenset(deps | set(new_ids[:k])),
                        within_inames=frozenset(
                            {tile_iname, STEP_INAME, WINDOW_INAME})))
            continue
        for insn in stage:
            deps = set(insn.depends_on)
            if deps & rolled_ids:
                deps = (deps - rolled_ids) | set(new_ids)
            if any(i in rolled_ids for i, _ in insn.no_sync_with):
                raise _CannotRoll("a later stage is unsynchronised with it")
            insns.append(insn.copy(assignee=constant(insn.assignee),
                                   expression=constant(insn.expression),
                                   depends_on=frozenset(deps)))
    new_temps = {name: tv for name, tv in temps.items() if name not in odd}
    for e, o in zip(even, odd):
        length = max(temps[e].shape[0], temps[o].shape[0])
        new_temps[e] = lp.TemporaryVariable(
            e, temps[e].dtype, shape=(2, length),
            address_space=temps[e].address_space)
    return RolledStages(first, last, insns, new_temps, d_width, d_offset,
                        d_extent)
