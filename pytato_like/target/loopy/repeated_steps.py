"""Programs that repeat one step: code generated for a few steps, launched
for all of them.

An explicit time loop written in Python unrolls into a DAG of ``K`` alike
*blocks*: the nodes of step ``k`` are those of step ``k - 1``, each
reading the steps before where that one read its own steps before, and
the same *invariant* arrays (inputs, operators computed once).
Generating code per step (storage decision, lowering, chunk specs: ~1 ms
a step) made a 20 000-step stencil take 17 s to generate. Here:

1. :func:`find_step_run` finds such a run in the DAG's topological order,
   which a loop unrolls into as ``K`` consecutive blocks of ``P`` nodes:
   node ``i`` and node ``i - P`` must be alike but for their arrays (the
   same class, field values, axes and tags; see
   :func:`~pytato_like._traversal.fields_pair`), and each array of node
   ``i`` either the array of node ``i - P`` shifted one block (a value of
   the steps before, at most :data:`MAX_LAG` blocks back: *carried*) or
   the very same array, from before the run (*invariant*). The run may
   end up to :data:`MAX_SUFFIX` nodes before the end of the order; those
   nodes (the outputs computed after the loop) and the outputs may read
   the run's last :data:`MAX_LAG` blocks only. Scans back from the end,
   at most a few node comparisons per node of the DAG.
2. :func:`split_step_run` cuts the program in three: a *head* (what
   comes before the run and its first ``K mod M`` blocks) computing the
   carried values the run starts from and the invariants that are not
   inputs, a *body* of ``M`` blocks whose carried and invariant arrays
   are placeholders, and a *tail* (the nodes after the run, on
   placeholders of what they read of it).
3. Code generation builds their plans, and :func:`splice_plans` makes
   the program's plan: the head's launches, the body's launches
   ``(K - K mod M) / M`` times, each time reading the carried buffers the
   time before wrote (two sets, used in turn) and writing temporaries of
   its own (so a program still holds one step's temporaries at a time),
   then the tail's.

The plan runs, step by step, the kernels the plan of the whole DAG would
(each step's storage decision and kernels are the body's), so the values
are those of the unrolled program; only kernels fused across steps (time
tiles) end where a repetition of the body ends.
``CodegenOptions.repeated_steps_min`` (default 256 blocks; 0: never)
sets the fewest blocks for which this is done.

.. autoclass:: StepRun
.. autofunction:: find_step_run
.. autoclass:: StepPrograms
.. autofunction:: split_step_run
.. autoclass:: SubPlan
.. autofunction:: splice_plans
.. autodata:: BODY_BLOCKS
.. autodata:: BODY_NODES
.. autodata:: MAX_LAG
.. autodata:: MAX_SUFFIX
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from pytato_like._traversal import fields_pair
from pytato_like.array import (
    Array,
    DataWrapper,
    InputArgumentBase,
    NamedArray,
    Placeholder,
    children_of,
)
from pytato_like.opencl_build import merge_device_code
from pytato_like.target.loopy.plan import BufferSpec, KernelSource, Launch, ProgramPlan
from pytato_like.transform.copy import rebuild_with

if TYPE_CHECKING:
    from pymbolic.typing import Expression

#: fewest blocks of the body program (fewer when the run has fewer than
#: four times as many): its code generation is that of this many steps
BODY_BLOCKS = 64
#: nodes of the body program when its blocks are small: a body of more
#: steps keeps the kernels that fuse many small steps (an elementwise
#: chain) as long as in the whole program, so there are as few launches
BODY_NODES = 2048
#: most candidate periods tried (each failing one costs a few comparisons)
_MAX_CANDIDATES = 32
#: most blocks back a block may read (the topological order of a loop of
#: several fields interleaves two steps: a block then reads two back)
MAX_LAG = 4
#: most nodes after the run (the outputs computed from the last steps;
#: the last steps of a loop of several fields, ordered otherwise)
MAX_SUFFIX = 64
#: the kinds of the names the head's, body's and tail's own inputs and
#: outputs take (after a prefix no input name starts with)
CARRY_IN = "carry_in"
CARRY_OUT = "carry_out"
INVARIANT = "invariant"
RESULT = "result"
TAIL_IN = "tail_in"


def _unused_prefix(names: Collection[str]) -> str:
    """``_pt_rs_``, with underscores added until no name of *names* (the
    program's placeholders) starts with it."""
    prefix = "_pt_rs_"
    while any(name.startswith(prefix) for name in names):
        prefix += "_"
    return prefix


def _named(prefix: str, kind: str, key: object) -> str:
    return f"{prefix}{kind}{key}"


@dataclasses.dataclass(frozen=True)
class StepRun:
    """``blocks`` alike blocks of ``period`` nodes of a topological order,
    the first at ``start``, the last ending before ``end`` (the nodes from
    ``end`` on, the *suffix*, compute the outputs from the last blocks).
    ``carried``: how far before a block's first node each node of the
    blocks before that it reads is (``d``: the block starting at ``b``
    reads ``order[b - d]``, at most :data:`MAX_LAG` blocks back);
    ``invariants``: the positions (before ``start``) of the arrays every
    block reads itself."""

    start: int
    end: int
    period: int
    blocks: int
    carried: tuple[int, ...]
    invariants: tuple[int, ...]


class _Budget:
    """Node comparisons left to the search: a few per node of the DAG, so
    that the search stays linear whatever it meets."""

    def __init__(self, n: int) -> None:
        self.left = 2 * n + 10_000


def _compatible_from(order: list[Array], index: dict[int, int], period: int,
                     end: int, budget: _Budget) -> int:
    """The first position from which every node before *end* is alike
    the node one block before (scanning back from ``end - 1``): array by
    array, the same array shifted by one block (into at most
    :data:`MAX_LAG` blocks before its own), or the very same array.
    (*end* when the budget runs out.)"""
    pairs: list[tuple[Array, Array]] = []
    i = end - 1
    while i - period >= 0:
        budget.left -= 1
        if budget.left < 0:
            return end
        a, b = order[i], order[i - period]
        pairs.clear()
        if not fields_pair(a, b, pairs):
            break
        block_start = end - ((end - 1 - i) // period + 1) * period
        lowest = block_start - MAX_LAG * period
        for ca, cb in pairs:
            ia, ib = index[id(ca)], index[id(cb)]
            if ia == ib:
                continue        # the same array (checked to be invariant later)
            if ia != ib + period or ia < lowest:
                break
        else:
            i -= 1
            continue
        break
    return i + 1


def _run_of_period(order: list[Array], index: dict[int, int], period: int,
                   end: int, min_blocks: int, budget: _Budget) -> StepRun | None:
    first = _compatible_from(order, index, period, end, budget)
    blocks = (end - first) // period + 1
    if blocks < min_blocks:
        return None
    start = end - blocks * period
    carried: set[int] = set()
    invariants: set[int] = set()
    pairs: list[tuple[Array, Array]] = []
    # (every block is like the last: its arrays tell the run's wiring)
    last = end - period
    for i in range(last, end):
        pairs.clear()
        fields_pair(order[i], order[i - period], pairs)
        for ca, cb in pairs:
            ia = index[id(ca)]
            if ia == index[id(cb)]:
                invariants.add(ia)
            elif ia < last:
                carried.add(last - ia)
    if any(ia >= start for ia in invariants):
        return None     # an array of the run read as the same by all blocks
    # inputs inside the run (a data wrapper made per step) and named
    # arrays (whose container is no node of the order) are left alone
    if any(isinstance(node, (InputArgumentBase, NamedArray))
           for node in order[start:]):
        return None
    return StepRun(start, end, period, blocks, tuple(sorted(carried)),
                   tuple(sorted(invariants)))


def _suffix_reads_last_blocks(order: list[Array], index: dict[int, int],
                              run: StepRun, outputs: Sequence[Array]) -> bool:
    """Whether the outputs are in the run's last :data:`MAX_LAG` blocks
    or after the run, and the nodes after it read the run only in those
    blocks (which the body's last repetition computes)."""
    lowest = run.end - MAX_LAG * run.period
    for node in outputs:
        if index[id(node)] < lowest:
            return False
    for node in order[run.end:]:
        for child in children_of(node):
            i = index[id(child)]
            if run.start <= i < lowest:
                return False
    return True


def find_step_run(order: list[Array], outputs: Sequence[Array],
                  min_blocks: int) -> StepRun | None:
    """The run of at least *min_blocks* alike blocks that ends at most
    :data:`MAX_SUFFIX` nodes before the end of the topological *order* of
    a DAG, whose suffix and *outputs* read only its last :data:`MAX_LAG`
    blocks; None if there is none (the latest end, then the shortest
    period, is taken). Linear in the DAG (at most a few node comparisons
    per node: then it gives up); no recursion. Runs of fewer than
    ``2 * MAX_LAG`` blocks are not looked for (the body repeats at least
    twice)."""
    n = len(order)
    min_blocks = max(min_blocks, 2 * MAX_LAG)
    if n < 2 * min_blocks:
        return None
    index = {id(node): i for i, node in enumerate(order)}
    budget = _Budget(n)
    for end in range(n, max(n - MAX_SUFFIX, 2 * min_blocks) - 1, -1):
        last = order[end - 1]
        tried = 0
        for j in range(end - 2, max(end - 2 - end // min_blocks, -1), -1):
            budget.left -= 1
            if budget.left < 0:
                return None
            if not fields_pair(last, order[j], []):
                continue
            run = _run_of_period(order, index, end - 1 - j, end, min_blocks,
                                 budget)
            if run is not None and _suffix_reads_last_blocks(
                    order, index, run, outputs):
                return run
            tried += 1
            if tried >= _MAX_CANDIDATES:
                break
    return None


@dataclasses.dataclass(frozen=True)
class StepPrograms:
    """The programs of a run (see :func:`split_step_run`).

    ``head``: output name -> array (empty when every value the body
    starts from is an input); ``body``: output name -> array of the body
    program; ``start``: carried distance -> the head output or the input
    (an array) the first repetition reads; ``copies``: repetitions of the
    body; ``results``: the program's output name -> the body output
    holding it (after the last repetition); ``tail``: the program's
    other outputs, computed after the last repetition from its
    placeholders, each the body output (``tail_from_body``) or head
    output (``tail_from_head``) of that name. Their own inputs and outputs
    are named :meth:`name` (a prefix no placeholder name of the program
    starts with, then their kind)."""

    head: dict[str, Array]
    body: dict[str, Array]
    start: dict[int, str | Array]
    copies: int
    results: dict[str, str]
    tail: dict[str, Array]
    tail_from_body: dict[str, str]
    tail_from_head: dict[str, str]
    #: what every name of these programs' own inputs and outputs starts with
    prefix: str

    def name(self, kind: str, key: object) -> str:
        """The name of the input or output of *kind* for *key*."""
        return _named(self.prefix, kind, key)


def split_step_run(run: StepRun, order: list[Array],
                   outputs: dict[str, Array],
                   input_names: Collection[str]) -> StepPrograms:
    """The head, body and tail programs of *run* (in the topological
    *order* of the DAG computing *outputs*, whose placeholders are named
    *input_names*: the placeholders made here are named otherwise). The
    body has
    :data:`BODY_BLOCKS` blocks, or more to make :data:`BODY_NODES` nodes,
    but at most a quarter of the run."""
    period, end = run.period, run.end
    prefix = _unused_prefix(input_names)
    name_of = functools.partial(_named, prefix)

    blocks_in_body = max(MAX_LAG, min(max(BODY_BLOCKS, BODY_NODES // period),
                                      run.blocks // 4))
    rest = run.blocks % blocks_in_body
    copies = (run.blocks - rest) // blocks_in_body
    # the first block of the body's first repetition
    begin = run.start + rest * period
    # what the body reads from before it: a block reads d nodes before
    # its start, so the body's block j reads d - j * period before the body
    carried = sorted({d - j * period for d in run.carried
                      for j in range(MAX_LAG + 1) if d - j * period > 0})
    head: dict[str, Array] = {}
    start: dict[int, str | Array] = {}
    for d in carried:
        node = order[begin - d]
        if isinstance(node, InputArgumentBase):
            start[d] = node
        else:
            start[d] = name = name_of(CARRY_OUT, d)
            head[name] = node
    # the body: the run's last blocks, rebuilt on placeholders
    first = end - blocks_in_body * period
    new: dict[int, Array] = {}
    for d in carried:
        node = order[first - d]
        new[id(node)] = Placeholder(name_of(CARRY_IN, d), node.shape, node.dtype,
                                    axes=node.axes)
    for k, i in enumerate(run.invariants):
        node = order[i]
        if not isinstance(node, InputArgumentBase):
            head[name_of(INVARIANT, k)] = node
            new[id(node)] = Placeholder(name_of(INVARIANT, k), node.shape,
                                        node.dtype, axes=node.axes)
    for node in order[first:end]:
        new[id(node)] = rebuild_with(node, lambda c: new.get(id(c), c))
    body = {name_of(CARRY_OUT, d): new[id(order[end - d])] for d in carried}
    # a value of the run read after it: a carried one is that body output
    # (the last repetition writes it where the reader wants it); any other
    # is a body output of its own
    exported = {id(order[end - d]): name_of(CARRY_OUT, d) for d in carried}

    def export(node: Array) -> str:
        """The body output holding *node* (made if need be)."""
        name = exported.get(id(node))
        if name is None:
            name = exported[id(node)] = name_of(RESULT, len(exported))
            body[name] = new[id(node)]
        return name

    in_body = {id(node) for node in order[first:end]}
    results: dict[str, str] = {}
    claimed: set[str] = set()
    for name, node in outputs.items():
        if id(node) in in_body:
            body_name = export(node)
            if body_name in claimed:     # (an output twice: a copy of its own)
                body_name = name_of(RESULT, f"{len(exported)}_{name}")
                body[body_name] = new[id(node)]
            claimed.add(body_name)
            results[name] = body_name
    # the tail: the nodes after the run, rebuilt on placeholders of what
    # they read of the run (body outputs) and before it (head outputs)
    tail_new: dict[int, Array] = {}
    tail_from_body: dict[str, str] = {}
    tail_from_head: dict[str, str] = {}

    def tail_input(node: Array) -> Array:
        known = tail_new.get(id(node))
        if known is not None:
            return known
        if id(node) in in_body:
            name = name_of(TAIL_IN, len(tail_from_body))
            tail_from_body[name] = export(node)
        elif isinstance(node, InputArgumentBase):
            return node
        else:
            name = name_of(TAIL_IN, f"head{len(tail_from_head)}")
            tail_from_head[name] = name
            head[name] = node
        tail_new[id(node)] = ph = Placeholder(name, node.shape, node.dtype,
                                              axes=node.axes)
        return ph

    for node in order[end:]:
        tail_new[id(node)] = rebuild_with(node, tail_input)
    tail = {name: tail_new[id(node)] for name, node in outputs.items()
            if name not in results}
    return StepPrograms(head, body, start, copies, results, tail,
                        tail_from_body, tail_from_head, prefix)


@dataclasses.dataclass(frozen=True)
class SubPlan:
    """A plan built for :func:`splice_plans` and its data wrappers, in
    the order of its ``data_wrapper_buffers``."""

    plan: ProgramPlan
    data_wrappers: tuple[DataWrapper, ...]


class _Names:
    """The buffers of the program's plan: one namespace for the head's,
    each repetition's and the program's own."""

    def __init__(self, placeholders: Mapping[str, Placeholder],
                 data_wrappers: Sequence[DataWrapper]) -> None:
        self.buffers: dict[str, BufferSpec] = {}
        #: constant sizes passed to kernels (each sub-plan's renamed)
        self.sizes: dict[str, Expression] = {}
        self.placeholder = {name: f"_pt_in_{name}" for name in placeholders}
        self.data = {id(dw): f"_pt_dw{k}" for k, dw in enumerate(data_wrappers)}
        # (every input has its buffer, also one only a repetition reads)
        for name, ph in placeholders.items():
            buf = self.placeholder[name]
            self.buffers[buf] = BufferSpec(buf, ph.shape, ph.dtype, "placeholder")
        for dw in data_wrappers:
            buf = self.data[id(dw)]
            self.buffers[buf] = BufferSpec(buf, dw.shape, dw.dtype, "data")

    def add(self, spec: BufferSpec, name: str, kind: str) -> str:
        if name not in self.buffers:
            self.buffers[name] = dataclasses.replace(spec, name=name, kind=kind)
        return name

    def of_sub_plan(self, sub: SubPlan, prefix: str, size_prefix: str,
                    inputs: dict[str, str], outputs: dict[str, tuple[str, str]]
                    ) -> dict[str, str]:
        """Sub-plan buffer or size name -> the program's: the sub-plan's
        placeholders named in *inputs* read those buffers, its other
        placeholders the program's inputs; its outputs named in *outputs*
        go to ``(buffer, kind)``; everything else is a temporary of its
        own (*prefix*); its constant sizes are prefixed *size_prefix*."""
        plan = sub.plan
        renamed: dict[str, str] = {}
        for name, value in plan.derived_sizes.items():
            renamed[name] = size_prefix + name
            self.sizes[renamed[name]] = value
        for name, buf in plan.placeholder_buffers.items():
            spec = plan.buffers[buf]
            if name in inputs:
                renamed[buf] = inputs[name]
            else:
                renamed[buf] = self.add(spec, self.placeholder[name], "placeholder")
        for buf, dw in zip(plan.data_wrapper_buffers, sub.data_wrappers,
                           strict=True):
            renamed[buf] = self.add(plan.buffers[buf], self.data[id(dw)], "data")
        for name, buf in plan.outputs.items():
            target, kind = outputs.get(name, (prefix + buf, "temporary"))
            renamed[buf] = self.add(plan.buffers[buf], target, kind)
        for buf, spec in plan.buffers.items():
            if buf not in renamed:
                renamed[buf] = self.add(spec, prefix + buf, "temporary")
        return renamed


def _launches(plan: ProgramPlan, renamed: dict[str, str],
              kernel_of: list[int]) -> list[Launch]:
    return [Launch(kernel_of[launch.kernel],
                   {arg: renamed[name] for arg, name in launch.bindings.items()})
            for launch in plan.launches]


def _kernel_name(source: KernelSource) -> str:
    return source.host_function.removeprefix("_lpy_host_")


def _merged_kernels(subs: Sequence[SubPlan]
                    ) -> tuple[list[KernelSource], list[list[int]]] | None:
    """The distinct kernels of *subs* (one program text for all) and, per
    sub-plan, its kernels' positions among them; None when two kernels
    share a name but not their code."""
    kernels: list[KernelSource] = []
    position: dict[str, int] = {}
    names_seen: dict[str, str] = {}
    kernel_maps = []
    for sub in subs:
        kernel_of = []
        for source in sub.plan.kernels:
            if source.key not in position:
                name = _kernel_name(source)
                if names_seen.setdefault(name, source.key) != source.key:
                    return None
                position[source.key] = len(kernels)
                kernels.append(source)
            kernel_of.append(position[source.key])
        kernel_maps.append(kernel_of)
    code = merge_device_code([k.device_code for k in kernels])
    return [dataclasses.replace(k, program_code=code) for k in kernels], kernel_maps


def splice_plans(programs: StepPrograms, head: SubPlan | None, body: SubPlan,
                 tail: SubPlan | None, placeholders: Mapping[str, Placeholder],
                 data_wrappers: Sequence[DataWrapper]) -> ProgramPlan | None:
    """The plan of the whole program: *head*'s launches, *body*'s
    ``programs.copies`` times, then *tail*'s (see the module's
    description); *placeholders* and *data_wrappers* are the whole
    program's inputs (its placeholders by name, its data wrappers in the
    order the program binds them). None when two kernels of the plans
    share a name or a plan has sizes that are not constants."""
    subs = {"head": head, "body": body, "tail": tail}
    present = [sub for sub in subs.values() if sub is not None]
    for sub in present:
        if sub.plan.size_params or not all(
                isinstance(v, int) for v in sub.plan.derived_sizes.values()):
            return None
    merged = _merged_kernels(present)
    if merged is None:
        return None
    kernels, maps = merged
    kernel_map = {label: maps[present.index(sub)]
                  for label, sub in subs.items() if sub is not None}

    names = _Names(placeholders, data_wrappers)
    launches: list[Launch] = []
    head_out: dict[str, str] = {}
    if head is not None:
        renamed = names.of_sub_plan(head, "_pt_head_", "_pt_hsize_",
                                    {}, {})
        launches += _launches(head.plan, renamed, kernel_map["head"])
        head_out = {name: renamed[buf] for name, buf in head.plan.outputs.items()}
    # the buffer each carried value (by distance) is in, before the next
    # repetition
    current: dict[int, str] = {}
    for d, value in programs.start.items():
        if isinstance(value, str):
            current[d] = head_out[value]
        elif isinstance(value, DataWrapper):
            current[d] = names.data[id(value)]
        else:
            current[d] = names.placeholder[value.name]  # type: ignore[attr-defined]
    invariants = {name: buf for name, buf in head_out.items()
                  if name.startswith(programs.name(INVARIANT, ""))}
    plan = body.plan
    results = {body_name: user for user, body_name in programs.results.items()}
    outputs: dict[str, str] = {}
    renamed = {}
    for c in range(programs.copies):
        last = c == programs.copies - 1
        inputs = {programs.name(CARRY_IN, d): buf for d, buf in current.items()}
        inputs.update(invariants)
        targets: dict[str, tuple[str, str]] = {
            programs.name(CARRY_OUT, d): (f"_pt_carry{c % 2}_{d}", "temporary")
            for d in current}
        if last:
            for body_name, user in results.items():
                targets[body_name] = (f"_pt_out_{user}", "output")
        renamed = names.of_sub_plan(body, f"_pt_r{c}_", "_pt_bsize_",
                                    inputs, targets)
        launches += _launches(plan, renamed, kernel_map["body"])
        current = {d: renamed[plan.outputs[programs.name(CARRY_OUT, d)]]
                   for d in current}
    for body_name, user in results.items():
        outputs[user] = renamed[plan.outputs[body_name]]
    if tail is not None:
        inputs = {ph: renamed[plan.outputs[body_name]]
                  for ph, body_name in programs.tail_from_body.items()}
        inputs.update({ph: head_out[name]
                       for ph, name in programs.tail_from_head.items()})
        targets = {user: (f"_pt_out_{user}", "output") for user in programs.tail}
        tail_renamed = names.of_sub_plan(tail, "_pt_tail_", "_pt_tsize_",
                                         inputs, targets)
        launches += _launches(tail.plan, tail_renamed, kernel_map["tail"])
        for user in programs.tail:
            outputs[user] = tail_renamed[tail.plan.outputs[user]]
    phase_times: dict[str, float] = {}
    for sub in present:
        for phase, t in sub.plan.phase_times.items():
            phase_times[phase] = phase_times.get(phase, 0.0) + t
    once = [sub.plan for sub in (head, tail) if sub is not None]
    return ProgramPlan(
        kernels=kernels, launches=launches, buffers=names.buffers,
        derived_sizes=dict(names.sizes), size_params=(), outputs=outputs,
        data_wrapper_buffers=tuple(names.data[id(dw)] for dw in data_wrappers),
        placeholder_buffers={name: names.placeholder[name]
                             for name in placeholders},
        phase_times=phase_times,
        n_stored=sum(p.n_stored for p in once) + programs.copies * plan.n_stored,
        n_instructions=(sum(p.n_instructions for p in once)
                        + programs.copies * plan.n_instructions),
        materialization_table=plan.materialization_table,
        pass_report=plan.pass_report)
