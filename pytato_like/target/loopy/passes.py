"""Optional optimisations of a plan, declared as ordered plan-to-plan passes.

What to compute is decided by lowering and chunking
(:mod:`pytato_like.target.loopy.codegen`);
how to make it faster is a list of passes, each a :class:`PlanPass`: a
name, the plan stage it runs at, a test saying why it does not apply
(or None when it does) and a function from a
:class:`~pytato_like.target.loopy.plan.ChunkedPlan` to a new one. Every
pass leaves the result unchanged: switching one off (the
``disabled_passes`` option of
:func:`~pytato_like.target.loopy.generate_loopy`) changes speed only.

:data:`DEFAULT_PASSES`, in order:

1. ``read_pieces`` (lowered plan): a stored array reading a
   concatenation or ``roll`` through selects is cut into the index
   ranges where the selects are decided
   (:mod:`~pytato_like.target.loopy.read_pieces`);
2. ``time_tiles`` (chunked plan): runs of stencil steps fused into one
   kernel over tiles (:mod:`~pytato_like.target.loopy.time_tiles`);
3. ``small_chunks`` (chunked plan): consecutive small chunks merged into
   one kernel of sequential loops
   (:func:`~pytato_like.target.loopy.chunks.merge_small_chunks`).

:func:`run_passes` runs the passes of the plan's stage in order and
records each one's outcome, applied or skipped with a one-line reason, in
the plan's :class:`~pytato_like.target.loopy.plan.PlanReport`.

A new pass is a :class:`PlanPass` value; give the list to
:func:`~pytato_like.target.loopy.generate_loopy` as the ``passes``
option (``[*DEFAULT_PASSES, my_pass]``): no edit of the package. A pass
never changes the plan it is given: it derives a new one
(:func:`dataclasses.replace`; instruction records are still filled in
place by the chunking functions, so a pass that calls them works on
:meth:`~pytato_like.target.loopy.plan.ChunkedPlan.copied_instructions`).

.. autoclass:: PlanPass
.. autodata:: DEFAULT_PASSES
.. autofunction:: run_passes
.. autofunction:: renumber_chunks
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy.chunks import merge_small_chunks
from pytato_like.target.loopy.plan import ChunkedPlan, Instruction, PassOutcome
from pytato_like.target.loopy.read_pieces import split_reads
from pytato_like.target.loopy.time_tiles import tile_time_steps

if TYPE_CHECKING:
    from pytato_like.target.loopy.options import CodegenOptions

# the options a pass reads: a CodegenOptions, a dict of them by name, or
# None (every option its default)
OptionsArg: TypeAlias = "CodegenOptions | Mapping[str, object] | None"

#: the plan stages a pass can run at, in pipeline order
STAGES = ("lowered", "chunked")


def option(options: OptionsArg, name: str, default: Any = None) -> Any:
    """The code generation option *name* of *options* (a dict or an
    options object), *default* when it is not set."""
    if options is None:
        return default
    if isinstance(options, dict):
        value = options.get(name)
    else:
        value = getattr(options, name, None)
    return default if value is None else value


def given_options(options: OptionsArg, **names: str) -> dict[str, Any]:
    """``keyword -> value`` of the options ``names[keyword]`` that
    *options* sets: keyword arguments for a stage function whose own
    defaults stand for the options not set."""
    values = {keyword: option(options, name) for keyword, name in names.items()}
    return {k: v for k, v in values.items() if v is not None}


def _code_id(function: Callable) -> str:
    """Where *function* is defined and a digest of its code: part of a
    pass's key, so that a changed pass misses the plan cache."""
    code = getattr(function, "__code__", None)
    digest = hashlib.sha256(code.co_code).hexdigest()[:12] if code else ""
    return (f"{getattr(function, '__module__', '?')}."
            f"{getattr(function, '__qualname__', repr(function))}:{digest}")


@dataclasses.dataclass(frozen=True)
class PlanPass:
    """One optional optimisation of a plan.

    :attr:`applies` answers ``None`` when the pass applies to the plan
    under the options, else the reason it does not (one line); then
    :attr:`run` makes the new plan. :attr:`summary` (one line) is the
    report's reason when the pass ran."""

    name: str
    #: the plan stage the pass runs at: ``"lowered"`` or ``"chunked"``
    stage: str
    summary: str
    run: Callable[[ChunkedPlan, OptionsArg], ChunkedPlan]
    applies: Callable[[ChunkedPlan, OptionsArg], str | None] = \
        lambda plan, options: None

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ConfigurationError(
                f"pass '{self.name}': stage must be one of {list(STAGES)}, "
                f"not {self.stage!r}")

    def __repr__(self) -> str:
        # (the plan cache keys options by their repr: stable across
        # processes, and different when the pass's code is)
        return (f"PlanPass({self.name!r}, {self.stage!r}, "
                f"{_code_id(self.run)}, {_code_id(self.applies)})")


def renumber_chunks(chunks: Iterable[Iterable[Instruction]]) -> None:
    """Number the instructions of *chunks* (lists of instructions, in
    launch order) by their chunk: the chunk order a pass chose. For
    instruction copies only (:meth:`ChunkedPlan.copied_instructions`)."""
    for n, chunk in enumerate(chunks):
        for insn in chunk:
            insn.chunk = n


# {{{ read pieces

def _read_pieces(plan: ChunkedPlan, options: OptionsArg) -> ChunkedPlan:
    limits = given_options(options, min_size="pieces_min_size",
                           max_pieces="pieces_max")
    insns: list[Instruction] = []
    writer_of = dict(plan.writer_of)
    n_split = 0
    for insn in plan.instructions:
        # (an array already written piece by piece, or a copy of an input,
        # is no candidate: split_reads says so)
        pieces = split_reads(insn, **limits) if insn.node is not None \
            and writer_of.get(id(insn.node)) is insn else None
        if pieces is None:
            insns.append(insn)
            continue
        n_split += 1
        insns.extend(pieces)
        writer_of[id(insn.node)] = pieces[-1]
    if not n_split:
        return plan
    return dataclasses.replace(plan, instructions=tuple(insns),
                               writer_of=writer_of).with_annotation(
        "read_pieces", n_split)


READ_PIECES = PlanPass(
    "read_pieces", "lowered",
    "stored arrays reading concatenations or rolls through selects cut into "
    "the ranges where the selects are decided",
    _read_pieces)

# }}}


# {{{ time tiles

def _time_tile(options: OptionsArg) -> int | None:
    """The ``time_tile`` option; None: the stage's default."""
    return option(options, "time_tile")


def _time_tiles_apply(plan: ChunkedPlan, options: OptionsArg) -> str | None:
    if _time_tile(options) == 0:
        return "the time_tile option is 0"
    if len(plan.chunks) < 2:
        return "fewer than two chunks: no run of steps to fuse"
    return None


def _time_tiles(plan: ChunkedPlan, options: OptionsArg) -> ChunkedPlan:
    insns, writer_of, buffers = plan.copied_instructions()
    position = {id(insn): k for k, insn in enumerate(insns)}
    runs = tile_time_steps(insns, buffers, _time_tile(options),
                           max_insns=plan.max_instructions,
                           **given_options(options, max_args="max_kernel_reads",
                                           max_stages="time_tile_stages"))
    # (the chunks are put in chain order even when no run is found)
    if not runs and all(position[id(insn)] == k
                        for k, insn in enumerate(insns)):
        return plan
    new = dataclasses.replace(plan, instructions=tuple(insns),
                              writer_of=writer_of, buffers=buffers)
    return new.with_annotation("time_tiles", tuple(runs)) if runs else new


TIME_TILES = PlanPass(
    "time_tiles", "chunked",
    "runs of stencil steps fused into one kernel over tiles",
    _time_tiles, _time_tiles_apply)

# }}}


# {{{ small chunks

def _small_chunk_elements(options: OptionsArg) -> int | None:
    """The ``small_chunk_elements`` option; None: the stage's default."""
    return option(options, "small_chunk_elements")


def _small_chunks_apply(plan: ChunkedPlan, options: OptionsArg) -> str | None:
    if _small_chunk_elements(options) == 0:
        return "the small_chunk_elements option is 0"
    if len(plan.chunks) < 2:
        return "fewer than two chunks: nothing to merge"
    return None


def _small_chunks(plan: ChunkedPlan, options: OptionsArg) -> ChunkedPlan:
    insns, writer_of, buffers = plan.copied_instructions()
    merged = merge_small_chunks(insns, plan.max_instructions,
                                _small_chunk_elements(options),
                                **given_options(options,
                                                max_ops="max_kernel_operations",
                                                max_args="max_kernel_reads"))
    if not merged:
        return plan
    return dataclasses.replace(
        plan, instructions=tuple(insns), writer_of=writer_of,
        buffers=buffers).with_annotation("small_chunks", merged)


SMALL_CHUNKS = PlanPass(
    "small_chunks", "chunked",
    "consecutive small chunks merged into one kernel of sequential loops",
    _small_chunks, _small_chunks_apply)

# }}}


#: the optional optimisations, in the order they run
DEFAULT_PASSES: tuple[PlanPass, ...] = (READ_PIECES, TIME_TILES, SMALL_CHUNKS)


def check_pass_names(passes: Sequence[PlanPass], disabled: Iterable[str]
                     ) -> frozenset[str]:
    """*disabled* as a set, checked against the names of *passes*: an
    unknown name, or two passes of one name, raise
    :class:`~pytato_like.diagnostic.ConfigurationError`."""
    if isinstance(disabled, str):
        disabled = (disabled,)
    known = [p.name for p in passes]
    doubled = sorted({n for n in known if known.count(n) > 1})
    if doubled:
        raise ConfigurationError(f"two passes are named {doubled[0]!r}; "
                                 "pass names must be unique")
    disabled = frozenset(disabled)
    unknown = sorted(disabled - set(known))
    if unknown:
        raise ConfigurationError(
            f"disabled_passes: unknown pass {unknown[0]!r}; known passes are "
            f"{known}")
    return disabled


def run_passes(plan: ChunkedPlan, options: OptionsArg = None,
               passes: Sequence[PlanPass] | None = None,
               disabled: Iterable[str] = ()) -> ChunkedPlan:
    """Run the passes of *passes* (default :data:`DEFAULT_PASSES`) that
    belong to the stage of *plan*, in order, except those named in
    *disabled*; the new plan, its report extended by one outcome per pass
    of the stage (skipped: disabled, or why it does not apply)."""
    if passes is None:
        passes = DEFAULT_PASSES
    disabled = check_pass_names(passes, disabled)
    for pass_ in passes:
        if pass_.stage != plan.stage:
            continue
        if pass_.name in disabled:
            outcome = PassOutcome(pass_.name, False,
                                  "disabled by the disabled_passes option")
        else:
            why_not = pass_.applies(plan, options)
            if why_not is not None:
                outcome = PassOutcome(pass_.name, False, why_not)
            else:
                new = pass_.run(plan, options)
                if not isinstance(new, ChunkedPlan) or new.stage != plan.stage:
                    raise ConfigurationError(
                        f"pass {pass_.name!r} returned {type(new).__name__} "
                        f"of stage {getattr(new, 'stage', None)!r}, not a "
                        f"ChunkedPlan of stage {plan.stage!r}")
                outcome = PassOutcome(
                    pass_.name, True,
                    pass_.summary if new is not plan
                    else f"nothing to change ({pass_.summary})")
                plan = new
        plan = dataclasses.replace(plan, report=plan.report.with_outcome(outcome))
    return plan

# vim: foldmethod=marker
