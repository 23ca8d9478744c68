"""The plan of a compiled program, as immutable values.

A leaf module: it imports nothing of the package but
:mod:`pytato_like.diagnostic` and :mod:`pytato_like.opencl_build` (and
NumPy and pymbolic) (where
:class:`~pytato_like.opencl_build.KernelSource` lives: the runtime builds
kernels too), so every stage of code generation and
every pass (:mod:`~pytato_like.target.loopy.passes`) can import it
without pulling in another stage. It owns

- :class:`BufferSpec`, :class:`Launch` and
  :class:`ProgramPlan`: what a compiled program runs (kernels, their
  launches, the program's buffers); picklable, the disk cache stores it;
- :class:`ChunkedPlan`: the plan between lowering and kernel generation,
  the value the optimisation passes transform: the instructions in
  launch order, which instruction writes each stored array, the
  program's buffers, one annotation per pass that left one, and the
  :class:`PlanReport` of the passes so far;
- :class:`PassOutcome` and :class:`PlanReport`: which passes ran, which
  were skipped, and a one-line reason for each.

Every value here is a frozen dataclass: a stage derives a new value with
:func:`dataclasses.replace` (or the ``with_*`` helpers) and never changes
the one it was given.

- :class:`Instruction` and :class:`Placement`: one assignment of a stored
  array (made by :mod:`~pytato_like.target.loopy.instructions`), and
  where a piece of an array goes in the whole array;
- :func:`storage_dtype`: the dtype of an array in generated code.

What still mutates (the next step of issue 36): the instruction records
themselves (:class:`Instruction`).
The chunking functions fill them in place: ``level`` and ``chunk``
(:func:`~pytato_like.target.loopy.chunks.assign_levels`,
:func:`~pytato_like.target.loopy.chunks.assign_chunks`), ``private`` and
``targets`` (:func:`~pytato_like.target.loopy.chunks.assign_storage`; the
time tiles empty the targets of arrays kept in scratch), ``tiled`` and
``stage`` (:func:`~pytato_like.target.loopy.time_tiles.tile_time_steps`),
``sequential`` (:func:`~pytato_like.target.loopy.chunks.merge_small_chunks`)
and ``size_memo`` (:class:`~pytato_like.target.loopy.chunks.KernelBudget`).
Every stage and pass that calls them therefore works on copies
(:meth:`ChunkedPlan.copied_instructions`), so the plan it was given keeps
its instructions as they were. The passes' decisions are also recorded
apart, in :attr:`ChunkedPlan.annotations` (the fused runs, the number of
chunks merged, of arrays cut into read pieces), but the chunk specs still
read ``tiled``, ``stage`` and ``sequential`` from the records: moving
those readers to the annotations, and freezing the record, is what is
left.

.. autoclass:: BufferSpec
.. autoclass:: Launch
.. autoclass:: ProgramPlan
.. autoclass:: ChunkedPlan
.. autoclass:: Instruction
    :members: writers
.. autoclass:: Placement
    :members: index
.. autofunction:: storage_dtype
.. autoclass:: PassOutcome
.. autoclass:: PlanReport
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
import pymbolic.primitives as prim

from pytato_like.diagnostic import ConfigurationError
from pytato_like.opencl_build import KernelSource

if TYPE_CHECKING:
    from pymbolic.typing import ArithmeticExpression, Expression

    from pytato_like.array import Array, ShapeComponent
    from pytato_like.target.loopy.time_tiles import TiledRun


# {{{ what a compiled program runs

def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array of *dtype* has in generated code (booleans are
    bytes: OpenCL has no boolean buffers)."""
    return np.dtype(np.int8) if dtype == np.bool_ else dtype


@dataclasses.dataclass(frozen=True)
class BufferSpec:
    """A program-level array: input, output or temporary between chunks."""

    name: str
    shape: tuple  # ints and size names
    dtype: np.dtype  # the array's dtype (booleans stored as int8)
    kind: str  # "placeholder", "data", "output", "temporary"


@dataclasses.dataclass(frozen=True)
class Launch:
    """One call of a :class:`KernelSource`: ``kernel argument -> program
    buffer or size name``."""

    kernel: int
    bindings: dict[str, str]


@dataclasses.dataclass(frozen=True)
class ProgramPlan:
    """Everything needed to run a program, picklable (the disk cache stores
    it): kernels, launches, buffers, size expressions, output names, and
    the report of the optimisation passes."""

    kernels: list[KernelSource]
    launches: list[Launch]
    buffers: dict[str, BufferSpec]
    #: derived size name -> pymbolic expression over size parameter names
    derived_sizes: dict[str, Expression]
    size_params: tuple[str, ...]
    #: user output name -> buffer name
    outputs: dict[str, str]
    #: buffer names of the data wrappers, in DAG order
    data_wrapper_buffers: tuple[str, ...]
    #: placeholder name -> buffer name
    placeholder_buffers: dict[str, str] = dataclasses.field(default_factory=dict)
    phase_times: dict[str, float] = dataclasses.field(default_factory=dict)
    n_stored: int = 0
    n_instructions: int = 0
    materialization_table: str = ""
    #: which optimisation passes ran and why (:class:`PlanReport`)
    pass_report: PlanReport | None = None

# }}}


# {{{ the report of the passes

@dataclasses.dataclass(frozen=True)
class PassOutcome:
    """What one pass did: :attr:`applied` or not, and why, in one line."""

    name: str
    applied: bool
    reason: str

    def __str__(self) -> str:
        return (f"{self.name}: {'applied' if self.applied else 'skipped'} "
                f"-- {self.reason}")


@dataclasses.dataclass(frozen=True)
class PlanReport:
    """The outcomes of the passes run on a plan, in the order they ran."""

    outcomes: tuple[PassOutcome, ...] = ()

    def with_outcome(self, outcome: PassOutcome) -> PlanReport:
        return PlanReport((*self.outcomes, outcome))

    def __getitem__(self, name: str) -> PassOutcome:
        for outcome in self.outcomes:
            if outcome.name == name:
                return outcome
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(o.name == name for o in self.outcomes)

    @property
    def applied(self) -> tuple[str, ...]:
        """Names of the passes that ran, in order."""
        return tuple(o.name for o in self.outcomes if o.applied)

    @property
    def skipped(self) -> tuple[str, ...]:
        """Names of the passes skipped, in order."""
        return tuple(o.name for o in self.outcomes if not o.applied)

    def __str__(self) -> str:
        return "\n".join(str(o) for o in self.outcomes)

# }}}


# {{{ the plan the passes transform

@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """Where a piece of a piecewise stored array goes in the whole array:
    its index along :attr:`axis` plus :attr:`offset` (a piece of a
    concatenation; an int or a shape expression), or :attr:`position`
    inserted as axis :attr:`axis` (an array of a stack)."""

    axis: int
    offset: ShapeComponent = 0
    position: int | None = None

    def index(self, idx: tuple, offset: ArithmeticExpression) -> tuple:
        """The index in the whole array of the piece's index *idx*, with
        *offset* the offset as an expression."""
        if self.position is not None:
            return (*idx[:self.axis], self.position, *idx[self.axis:])
        if isinstance(offset, int) and offset == 0:
            return idx
        return (*idx[:self.axis], prim.Sum((idx[self.axis], offset)),
                *idx[self.axis + 1:])


@dataclasses.dataclass
class Instruction:
    """The assignment of one stored array (or output copy)."""

    #: the array computed (None for nothing but a copy of a size)
    node: Array | None
    #: global buffer names written (outputs, temporaries)
    targets: list[str]
    #: the value at the canonical inames *canon*
    expr: Expression
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
    #: for a piece of a piecewise stored array (:func:`stored_pieces`):
    #: where it goes (its value and :attr:`shape` are the piece's)
    placement: Placement | None = None
    #: for a piece: the instructions of all pieces of :attr:`node` (one
    #: list shared by them); readers of the array wait for all of them
    pieces: list[Instruction] | None = None
    #: for a step of a fused run of chunks (see
    #: :mod:`~pytato_like.target.loopy.time_tiles`): the run, and the
    #: position of the instruction's chunk in it
    tiled: TiledRun | None = None
    stage: int = 0
    #: set by :func:`~pytato_like.target.loopy.chunks.merge_small_chunks`:
    #: the instruction's chunk is small chunks merged into one kernel of
    #: sequential loops (one work-item, no barrier)
    sequential: bool = False
    #: ``(limit, expression_size(expr, limit))`` once a kernel budget
    #: sized it (budgets of several passes share it)
    size_memo: tuple[int, int] | None = None

    def writers(self) -> list[Instruction]:
        """The instructions writing :attr:`node`: the pieces, or this one."""
        return self.pieces or [self]



def _frozen_mapping(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclasses.dataclass(frozen=True, eq=False)
class ChunkedPlan:
    """The plan between lowering and kernel generation.

    :attr:`stage` is ``"lowered"`` (instructions in DAG order, no levels
    or chunks yet) or ``"chunked"`` (levels, chunks and storage classes
    assigned; :attr:`instructions` in chunk order, chunk numbers
    consecutive from 0). Mappings are read-only views of copies; derive a
    new plan with :func:`dataclasses.replace` or the ``with_*`` methods.
    """

    stage: str
    #: the instructions, in the order their chunks are launched
    instructions: tuple[Instruction, ...]
    #: ``id(stored array) -> the instruction writing it`` (one of the
    #: pieces for an array written piece by piece)
    writer_of: Mapping[int, Instruction]
    #: ``id(array) -> array`` of the arrays stored (inputs included)
    stored: Mapping[int, Array]
    #: the program's buffers by name
    buffers: Mapping[str, BufferSpec]
    #: most instructions of one kernel (the code generation option)
    max_instructions: int
    #: pass name -> what the pass left for later stages (its decisions)
    annotations: Mapping[str, object] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))
    report: PlanReport = PlanReport()

    def __post_init__(self) -> None:
        if self.stage not in ("lowered", "chunked"):
            raise ConfigurationError(
                f"a plan's stage is 'lowered' or 'chunked', not {self.stage!r}")
        set_ = object.__setattr__  # (normalising the frozen fields once)
        set_(self, "instructions", tuple(self.instructions))
        for name in ("writer_of", "stored", "buffers", "annotations"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                set_(self, name, _frozen_mapping(value))

    @property
    def chunks(self) -> tuple[tuple[Instruction, ...], ...]:
        """The instructions of each chunk, in launch order (empty before
        chunking)."""
        if self.stage != "chunked":
            return ()
        chunks: list[list[Instruction]] = []
        for insn in self.instructions:
            if insn.chunk == len(chunks):
                chunks.append([])
            chunks[insn.chunk].append(insn)
        return tuple(tuple(c) for c in chunks)

    def copied_instructions(self) -> tuple[list[Instruction],
                                           dict[int, Instruction],
                                           dict[str, BufferSpec]]:
        """Fresh copies of the instruction records (in order), the writer
        mapping over the copies and the buffers, as new mutable values:
        what a pass may change in place before it makes its new plan of
        them, leaving this plan as it was. The pieces of one array share
        one new list of pieces, as the originals do."""
        copy_of: dict[int, Instruction] = {}
        for insn in (*self.instructions, *self.writer_of.values()):
            if id(insn) not in copy_of:
                new = copy_of[id(insn)] = copy.copy(insn)
                # (the chunking functions assign a new list or none: a
                # copy keeps any change away from the original record)
                new.targets = list(new.targets)
        new_pieces: dict[int, list] = {}
        for new in copy_of.values():
            if new.pieces is not None:
                old = new.pieces
                group = new_pieces.get(id(old))
                if group is None:
                    group = new_pieces[id(old)] = [copy_of[id(p)] for p in old]
                new.pieces = group
        insns = [copy_of[id(i)] for i in self.instructions]
        writer_of = {nid: copy_of[id(i)] for nid, i in self.writer_of.items()}
        return insns, writer_of, dict(self.buffers)

    def with_annotation(self, pass_name: str, annotation: object) -> ChunkedPlan:
        """This plan with *annotation* recorded for *pass_name*."""
        return dataclasses.replace(
            self, annotations={**self.annotations, pass_name: annotation})

# }}}

# vim: foldmethod=marker
