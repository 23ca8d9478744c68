"""The outlined kind of function calls (see
:mod:`~pytato_like.target.loopy.outlined`): a
:class:`~pytato_like.function.Call` runs its definition's body, compiled
once per definition however often it is called. Registered in
:mod:`~pytato_like.target.loopy.outlined_kinds` at import, as
:mod:`~pytato_like.target.loopy.external` and
:mod:`~pytato_like.target.loopy.sparse` register theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytato_like.function import Call, NamedCallResult
from pytato_like.target.loopy.outlined_kinds import OutlinedKind, register_outlined

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.target.loopy.bound import BoundPyOpenCLProgram


class _DefinitionRunner:
    """Runs the compiled body of one function definition."""

    def __init__(self, program: BoundPyOpenCLProgram) -> None:
        self.program = program

    def result_names(self, call: Call) -> list[str]:
        return list(call.function.returns)

    def __call__(self, queue: cl.CommandQueue, **kwargs: Any
                 ) -> tuple[cl.Event | None, Mapping[str, object]]:
        return self.program(queue, **kwargs)

    def __getattr__(self, name: str) -> object:
        # source, inputs, _outputs_on_host, ... of the compiled body
        if name == "program":
            raise AttributeError(name)
        return getattr(self.program, name)


def _register_function_calls() -> None:
    register_outlined(Call, OutlinedKind(
        arguments=lambda call: {param: call.bindings[param]
                                for param in call.function._placeholders},
        runner=lambda call, compile_dag: _DefinitionRunner(
            compile_dag(dict(call.function.returns))),
        runner_key=lambda call: call.function),
        {NamedCallResult: lambda node: (node._container, node.name)})


_register_function_calls()
