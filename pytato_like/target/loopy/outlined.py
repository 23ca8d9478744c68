"""Outlined function calls on the loopy target: each function definition is
compiled once, and each call site launches that compiled program.

:func:`generate_calling_program` is what
:func:`~pytato_like.generate_loopy` uses for a DAG holding
:class:`~pytato_like.function.Call` nodes. The caller's DAG is cut at the
calls into *stages*:

* every call result is replaced by a placeholder, so the caller's DAG
  becomes call-free;
* a call's *level* is the number of calls on the longest path below it; at
  stage ``L`` one program computes the arguments of the level-``L`` calls
  that are not plain inputs or call results, then each of those calls
  launches its definition's program;
* a last stage computes the outputs.

So the caller's DAG is compiled in (call nesting depth + 1) programs however
many calls it holds, and a definition called 1 000 times is compiled once
(its program comes from :func:`~pytato_like.generate_loopy` on the body,
which handles calls nested in the body the same way). Values stay on the
device between stages.

.. autofunction:: generate_calling_program
.. autoclass:: BoundCallingProgram
    :members: __call__
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytato_like.array import Array, Placeholder, SizeParam, children_of
from pytato_like.diagnostic import NameClashError
from pytato_like.function import Call, FunctionDefinition, NamedCallResult
from pytato_like.target import BoundProgram
from pytato_like.transform.copy import CopyMapper

__all__ = ["BoundCallingProgram", "generate_calling_program", "has_calls"]


def has_calls(order: list[Array]) -> bool:
    """Whether a topologically ordered DAG holds a call."""
    return any(type(node) is Call for node in order)


class _CallResultsAsPlaceholders(CopyMapper):
    """Copies the caller's DAG with each call result replaced by the
    placeholder named in *names* (by result identity)."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names

    def map_named_call_result(self, expr: NamedCallResult) -> Array:
        return Placeholder(self.names[id(expr)], expr.shape, expr.dtype,
                           axes=expr.axes, tags=expr.tags)

    def map_call(self, expr: Call) -> Any:  # pragma: no cover - unreachable
        raise AssertionError("calls are cut out of the caller's DAG")


class _CallSite:
    """One call: which program runs it, where its arguments come from and
    where its results go (names in the execution's value table)."""

    __slots__ = ("arguments", "function", "program", "results")

    def __init__(self, function: FunctionDefinition,
                 arguments: dict[str, str], results: dict[str, str]) -> None:
        self.function = function
        self.program: Any = None
        self.arguments = arguments      # parameter -> value name
        self.results = results          # return name -> value name


class _Stage:
    __slots__ = ("calls", "program")

    def __init__(self) -> None:
        self.program: Any = None        # computes arguments (or outputs)
        self.calls: list[_CallSite] = []


def _input_names(program: Any) -> list[str]:
    inputs = program.inputs
    return [*inputs.placeholders, *inputs.size_params]


class BoundCallingProgram(BoundProgram):
    """A program whose DAG holds outlined calls (made by
    :func:`~pytato_like.generate_loopy`), called like every bound program:
    ``prg(queue, *, allocator=None, wait_for=None, out_host=None,
    **inputs)`` returns ``(event, (out,))`` or ``(event, {name: out})``,
    with the same ``out_host`` rule as
    :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`.

    .. attribute:: stages

        The stages in execution order; ``len(prg.definition_programs)`` is
        the number of distinct definitions compiled.

    .. attribute:: definition_programs

        Function definition -> its bound program.
    """

    def __init__(self, stages: list[_Stage], output_names: dict[str, str],
                 single_output: bool, inputs: Any,
                 definition_programs: dict[FunctionDefinition, Any],
                 target: Any) -> None:
        self.stages = stages
        self.output_names = output_names
        self.single_output = single_output
        self.inputs = inputs
        self.definition_programs = definition_programs
        self.target = target

    @property
    def programs(self) -> list[Any]:
        """Every compiled program (stages first, then definitions)."""
        progs = [s.program for s in self.stages if s.program is not None]
        return progs + list(self.definition_programs.values())

    @property
    def source(self) -> str:
        return "\n\n".join(dict.fromkeys(p.source for p in self.programs))

    def _outputs_on_host(self, kwargs: Mapping[str, Any]) -> bool:
        return all(p._outputs_on_host(kwargs) for p in self.programs)

    def __call__(self, queue: Any, *, allocator: Any = None,
                 wait_for: Any = None, out_host: bool | None = None,
                 **kwargs: Any) -> tuple[Any, Any]:
        import pyopencl.array as cla
        if out_host is None:
            out_host = self._outputs_on_host(kwargs)
        self.inputs.check_and_convert(kwargs, lambda value, ph: value)
        # host inputs go to the device once, not once per stage
        values: dict[str, Any] = {
            name: (cla.to_device(queue, value, allocator=allocator)
                   if isinstance(value, np.ndarray) else value)
            for name, value in kwargs.items()}
        evt = None
        for stage in self.stages:
            if stage.program is not None:
                evt, outs = stage.program(
                    queue, allocator=allocator, wait_for=wait_for,
                    out_host=False,
                    **{n: values[n] for n in _input_names(stage.program)})
                wait_for = None
                values.update(outs)
            for site in stage.calls:
                args = {param: values[src]
                        for param, src in site.arguments.items()}
                evt, outs = site.program(queue, allocator=allocator,
                                         wait_for=wait_for, out_host=False,
                                         **args)
                wait_for = None
                values.update({dst: outs[ret]
                               for ret, dst in site.results.items()})
        results = {}
        for name, src in self.output_names.items():
            value = values[src]
            if out_host and isinstance(value, cla.Array):
                value = value.get(queue=queue)
            results[name] = value
        if self.single_output:
            return evt, (results["_pt_out"],)
        return evt, results


def generate_calling_program(outputs: dict[str, Array], order: list[Array],
                             single_output: bool, inputs: Any,
                             compile_dag: Any, target: Any
                             ) -> BoundCallingProgram:
    """The :class:`BoundCallingProgram` of *outputs* (name -> array, in
    topological *order*); *compile_dag(dict of arrays)* compiles a
    call-free DAG or a function body (with the caller's options)."""
    taken = {n.name for n in order
             if isinstance(n, (Placeholder, SizeParam))}

    # {{{ levels and value names of the call results

    level: dict[int, int] = {}
    calls: list[Call] = []
    call_index: dict[int, int] = {}
    result_names: dict[int, str] = {}
    for node in order:
        if type(node) is Call:
            call_index[id(node)] = len(calls)
            calls.append(node)
        lv = max((level[id(c)] for c in children_of(node)), default=0)
        if isinstance(node, NamedCallResult):
            lv += 1
            result_names[id(node)] = (f"_pt_call{call_index[id(node._container)]}"
                                      f"_{node.name}")
        level[id(node)] = lv
    clash = taken & set(result_names.values())
    if clash:
        raise NameClashError(f"input name {sorted(clash)[0]!r} is reserved for "
                             "call results")

    # }}}

    cutter = _CallResultsAsPlaceholders(result_names)
    n_stages = max((level[id(c)] for c in calls), default=0) + 1
    stages = [_Stage() for _ in range(n_stages + 1)]
    stage_outputs: list[dict[str, Array]] = [{} for _ in stages]
    definition_programs: dict[FunctionDefinition, Any] = {}
    sites: dict[int, _CallSite] = {}

    for icall, call in enumerate(calls):
        arguments: dict[str, str] = {}
        lv = level[id(call)]
        for param in call.function._placeholders:
            arg = cutter(call.bindings[param])
            if isinstance(arg, Placeholder):
                arguments[param] = arg.name
            else:
                name = f"_pt_arg{icall}_{param}"
                stage_outputs[lv][name] = arg
                arguments[param] = name
        results = {name: f"_pt_call{icall}_{name}"
                   for name in call.function.returns}
        site = _CallSite(call.function, arguments, results)
        sites[id(call)] = site
        stages[lv].calls.append(site)

    output_names: dict[str, str] = {}
    for name, out in outputs.items():
        cut = cutter(out)
        if isinstance(cut, Placeholder) and cut.name in result_names.values():
            output_names[name] = cut.name
        else:
            stage_outputs[-1][f"_pt_out_{name}"] = cut
            output_names[name] = f"_pt_out_{name}"

    for stage, arrays in zip(stages, stage_outputs, strict=True):
        if arrays:
            stage.program = compile_dag(arrays)
        for site in stage.calls:
            program = definition_programs.get(site.function)
            if program is None:
                program = compile_dag(dict(site.function.returns))
                definition_programs[site.function] = program
            site.program = program

    return BoundCallingProgram(
        [s for s in stages if s.program is not None or s.calls],
        output_names, single_output, inputs, definition_programs, target)
