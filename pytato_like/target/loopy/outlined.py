"""Nodes the loopy target runs as programs of their own ("outlined"):
function calls, sparse products and calls of hand-written loopy kernels.

Most nodes are fused into generated kernels. A few are computed by a
program of their own: a :class:`~pytato_like.function.Call` by its
definition's compiled body (compiled once however often it is called), a
:class:`~pytato_like.sparse.CSRMatmul` by a row-parallel kernel with
data-dependent loop bounds, a :class:`~pytato_like.loopy.LoopyCall` by the
user's translation unit. Each such *owner* node kind registers (with
:func:`~pytato_like.target.loopy.outlined_kinds.register_outlined`, in
:mod:`~pytato_like.target.loopy.outlined_kinds`) how to find its arguments,
its results and its runner; :func:`generate_outlined_program` then cuts the
DAG at those nodes
into *stages*:

* every result of an owner is replaced by a placeholder, so the rest of the
  DAG is ordinary and compiles as usual;
* an owner's *level* is the number of owners on the longest path below it;
  at stage ``L`` one generated program computes the arguments of the
  level-``L`` owners that are not plain inputs or results, then each of
  those owners runs;
* a last stage computes the outputs.

So the caller's DAG is compiled in (nesting depth + 1) programs however many
owners it holds. Values stay on the device between stages.

.. autofunction:: generate_outlined_program
.. autoclass:: OutlinedProgram
    :members: __call__, program, with_transformed_program, bind_to_context
.. autoclass:: ContextBoundProgram
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

# the package's own kinds register on their modules' import
import pytato_like.target.loopy.external
import pytato_like.target.loopy.function_calls
import pytato_like.target.loopy.sparse  # noqa: F401
from pytato_like.array import Array, Placeholder, SizeParam, children_of
from pytato_like.diagnostic import NameClashError, PytatoLikeError
from pytato_like.function import FunctionDefinition
from pytato_like.target import BoundProgram
from pytato_like.target.loopy.bound import inputs_named_like_options, queue_argument
from pytato_like.target.loopy.cut_results import ResultsAsPlaceholders
from pytato_like.target.loopy.outlined_kinds import (
    OWNERS,
    RESULTS,
    CompileDag,
    OutlinedKind,
    OutlinedRunner,
    StageRunner,
    has_outlined_nodes,
    register_outlined,
)
from pytato_like.target.loopy.unit import same_code

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl
    import pyopencl.array as cla
    from pyopencl.typing import Allocator, WaitList

    from pytato_like.target import ProgramInputs
    from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

__all__ = ["ContextBoundProgram", "OutlinedKind", "OutlinedProgram",
           "generate_outlined_program", "has_outlined_nodes",
           "register_outlined"]


class _Site:
    """One owner node: its runner, where its arguments come from and where
    its results go (names in the execution's value table)."""

    __slots__ = ("arguments", "program", "results")

    def __init__(self, program: StageRunner, arguments: dict[str, str],
                 results: dict[str, str]) -> None:
        self.program = program
        self.arguments = arguments      # runner argument -> value name
        self.results = results          # runner result -> value name


class _Stage:
    __slots__ = ("program", "sites")

    def __init__(self) -> None:
        # computes arguments (or outputs)
        self.program: BoundPyOpenCLProgram | None = None
        self.sites: list[_Site] = []


def _input_names(program: BoundPyOpenCLProgram) -> list[str]:
    inputs = program.inputs
    return [*inputs.placeholders, *inputs.size_params]


class OutlinedProgram(BoundProgram):
    """A program whose DAG holds outlined nodes (made by
    :func:`~pytato_like.generate_loopy`), called like every bound program:
    ``prg(queue, *, allocator=None, wait_for=None, out_host=None,
    **inputs)`` returns ``(event, (out,))`` or ``(event, {name: out})``,
    with the same ``out_host`` rule as
    :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`.

    .. attribute:: stages

        The stages in execution order.

    .. attribute:: runners

        Runner key -> runner: one per function definition, sparse product
        signature or loopy kernel (``len(prg.runners)`` compiled runners).
    """

    def __init__(self, stages: list[_Stage], output_names: dict[str, str],
                 single_output: bool, inputs: ProgramInputs,
                 runners: Mapping[Hashable, StageRunner],
                 target: object) -> None:
        self.stages = stages
        self.output_names = output_names
        self.single_output = single_output
        self.inputs = inputs
        self.runners = runners
        self.target = target

    @property
    def definition_programs(self) -> dict[FunctionDefinition, StageRunner]:
        """The runners of function definitions, by definition."""
        return {k: v for k, v in self.runners.items()
                if isinstance(k, FunctionDefinition)}

    @property
    def programs(self) -> list[BoundPyOpenCLProgram | StageRunner]:
        """Every generated program (stages first, then runners)."""
        progs: list[BoundPyOpenCLProgram | StageRunner] = [
            s.program for s in self.stages if s.program is not None]
        return progs + list(self.runners.values())

    @property
    def source(self) -> str:
        return "\n\n".join(dict.fromkeys(
            p.source for p in self.programs if hasattr(p, "source")))

    def _outputs_on_host(self, kwargs: dict[str, object]) -> bool:
        return all(p._outputs_on_host(kwargs) for p in self.programs
                   if hasattr(p, "_outputs_on_host"))

    #: set by generate_loopy: the program (with no plan of its own) of
    #: the DAG with its calls inlined, whose unit stands for this one
    _make_unit_program: Callable[[], BoundPyOpenCLProgram] | None = None
    _unit_program_obj: BoundPyOpenCLProgram | None = None
    _program: lp.TranslationUnit | None = None

    def _unit_program(self) -> BoundPyOpenCLProgram:
        if self._unit_program_obj is None:
            if self._make_unit_program is None:
                raise PytatoLikeError("this outlined program was not made by "
                                      "generate_loopy: it has no translation unit")
            self._unit_program_obj = self._make_unit_program()
        return self._unit_program_obj

    @property
    def program(self) -> lp.TranslationUnit:
        """The loopy translation unit of the program, as pytato hands it
        out: that of the DAG with its calls inlined, sparse products
        included (one entrypoint)."""
        if self._program is None:
            self._program = self._unit_program().program
        return self._program

    def with_transformed_program(
            self, f: Callable[[lp.TranslationUnit], lp.TranslationUnit]
            ) -> OutlinedProgram | BoundPyOpenCLProgram:
        """The program running ``f(self.program)``: this one (its calls
        compiled once each) while the code is unchanged, a program running
        the transformed unit otherwise."""
        import copy as _copy

        unit_program = self._unit_program()
        t_unit = f(self.program)
        if same_code(unit_program.program, t_unit):
            new = _copy.copy(self)
            new._program = t_unit
            return new
        return unit_program.with_transformed_program(lambda _: t_unit)

    def bind_to_context(self, context: cl.Context,
                        allocator: Allocator | None = None
                        ) -> ContextBoundProgram:
        """An executable of this program for *context* (see
        :class:`ContextBoundProgram`)."""
        return ContextBoundProgram(self, context, allocator)

    def __call__(self, queue: cl.CommandQueue | None = None, /, *,
                 allocator: Allocator | None = None,
                 wait_for: WaitList = None, out_host: bool | None = None,
                 **kwargs: object
                 ) -> tuple[cl.Event | None,
                            tuple[object, ...] | dict[str, object]]:
        import pyopencl.array as cla

        queue = queue_argument(self.inputs, queue, kwargs)
        allocator, wait_for, out_host = inputs_named_like_options(
            self.inputs, kwargs, allocator=allocator, wait_for=wait_for,
            out_host=out_host)
        if out_host is None:
            out_host = self._outputs_on_host(kwargs)
        checked = self.inputs.check_and_convert(kwargs, lambda value, ph: value)
        # host inputs go to the device once, not once per stage; the
        # values are the callers' (and are passed on as they are)
        values: dict[str, Any] = {
            name: (cla.to_device(queue, value, allocator=allocator)
                   if isinstance(value, np.ndarray) else value)
            for name, value in kwargs.items()}
        # size parameters inferred from input shapes: a stage may read them
        # without the placeholders they were inferred from
        for name in self.inputs.size_params:
            values.setdefault(name, checked[name])
        evt = None
        for stage in self.stages:
            if stage.program is not None:
                evt, outs = stage.program(
                    queue, allocator=allocator, wait_for=wait_for,
                    out_host=False,
                    **{n: values[n] for n in _input_names(stage.program)})
                wait_for = None
                values.update(outs)
            for site in stage.sites:
                args = {arg: values[src] for arg, src in site.arguments.items()}
                evt, outs = site.program(queue, allocator=allocator,
                                         wait_for=wait_for, out_host=False,
                                         **args)
                wait_for = None
                values.update({dst: outs[res]
                               for res, dst in site.results.items()})
        results = {}
        for name, src in self.output_names.items():
            value = values[src]
            if out_host and isinstance(value, cla.Array):
                value = value.get(queue=queue)
            results[name] = value
        if self.single_output:
            return evt, (results["_pt_out"],)
        return evt, results


class ContextBoundProgram(BoundProgram):
    """An :class:`OutlinedProgram` bound to one :class:`pyopencl.Context`,
    handed out like pytato's executables: ``.program`` is a loopy executor
    of the translation unit (``.t_unit``, ``.entrypoint``), and
    :meth:`with_transformed_translation_unit` returns another executable.
    Outputs stay on the device unless ``out_host=True``."""

    def __init__(self, program: OutlinedProgram, cl_context: cl.Context,
                 allocator: Allocator | None = None) -> None:
        self.bound_program = program
        self.cl_context = cl_context
        self.allocator = allocator
        self.target = program.target
        self.bound_arguments: dict[str, object] = {}

    @property
    def program(self) -> lp.ExecutorBase:
        return self.bound_program.program.executor(self.cl_context)

    def with_transformed_translation_unit(
            self, f: Callable[[lp.TranslationUnit], lp.TranslationUnit]
            ) -> BoundProgram:
        return self.bound_program.with_transformed_program(f).bind_to_context(
            self.cl_context, self.allocator)

    def __call__(self, queue: cl.CommandQueue | None = None, /, *,
                 allocator: Allocator | None = None,
                 wait_for: WaitList = None, out_host: bool | None = None,
                 **kwargs: object
                 ) -> tuple[cl.Event | None,
                            tuple[object, ...] | dict[str, object]]:
        return self.bound_program(
            queue, allocator=allocator if allocator is not None else self.allocator,
            wait_for=wait_for, out_host=bool(out_host), **kwargs)


def generate_outlined_program(outputs: dict[str, Array], order: list[Array],
                              single_output: bool, inputs: ProgramInputs,
                              compile_dag: CompileDag,
                              target: object) -> OutlinedProgram:
    """The :class:`OutlinedProgram` of *outputs* (name -> array, in
    topological *order*); *compile_dag(dict of arrays)* compiles an ordinary
    DAG (or a function body) with the caller's options."""
    taken = {n.name for n in order if isinstance(n, (Placeholder, SizeParam))}

    # {{{ owners, their levels, and value names of their results

    level: dict[int, int] = {}
    owners: list[Array] = []
    owner_index: dict[int, int] = {}
    owner_level: dict[int, int] = {}
    result_names: dict[int, str] = {}
    for node in order:
        below = max((level[id(c)] for c in children_of(node)), default=0)
        if type(node) in OWNERS:
            owner_index[id(node)] = len(owners)
            owners.append(node)
            owner_level[id(node)] = below
        result_of = RESULTS.get(type(node))
        if result_of is not None:
            owner, name = result_of(node)
            below = owner_level[id(owner)] + 1
            result_names[id(node)] = f"_pt_res{owner_index[id(owner)]}_{name}"
        level[id(node)] = below
    clash = taken & set(result_names.values())
    if clash:
        raise NameClashError(f"input name {sorted(clash)[0]!r} is reserved for "
                             "results of outlined nodes")

    # }}}

    cutter = ResultsAsPlaceholders(result_names)
    n_levels = max(owner_level.values(), default=0) + 1
    stages = [_Stage() for _ in range(n_levels + 1)]
    stage_outputs: list[dict[str, Array]] = [{} for _ in stages]
    # a kind's runner is given owners of that kind only
    runners: dict[Hashable, OutlinedRunner[Array]] = {}

    for iowner, owner in enumerate(owners):
        kind = OWNERS[type(owner)]
        key = kind.runner_key(owner)
        program = runners.get(key)
        if program is None:
            program = runners[key] = kind.runner(owner, compile_dag)
        arguments: dict[str, str] = {}
        lv = owner_level[id(owner)]
        for arg_name, arg in kind.arguments(owner).items():
            cut = cutter(arg)
            if isinstance(cut, Placeholder):
                arguments[arg_name] = cut.name
            else:
                name = f"_pt_arg{iowner}_{arg_name}"
                stage_outputs[lv][name] = cut
                arguments[arg_name] = name
        results = {name: f"_pt_res{iowner}_{name}"
                   for name in program.result_names(owner)}
        stages[lv].sites.append(_Site(program, arguments, results))

    output_names: dict[str, str] = {}
    result_values = set(result_names.values())
    for name, out in outputs.items():
        cut = cutter(out)
        if isinstance(cut, Placeholder) and cut.name in result_values:
            output_names[name] = cut.name
        else:
            stage_outputs[-1][f"_pt_out_{name}"] = cut
            output_names[name] = f"_pt_out_{name}"

    for stage, arrays in zip(stages, stage_outputs, strict=True):
        if arrays:
            stage.program = compile_dag(arrays)

    return OutlinedProgram(
        [s for s in stages if s.program is not None or s.sites],
        output_names, single_output, inputs, runners, target)


# vim: foldmethod=marker
