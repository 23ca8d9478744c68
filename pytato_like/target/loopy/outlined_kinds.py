"""The registry of outlined node kinds (see
:mod:`~pytato_like.target.loopy.outlined`): how the loopy target runs each
node class computed by a program of its own, and the mapper cutting a DAG
at the results of such nodes. A leaf of the target's modules: the kinds
register here at import (function calls below,
:mod:`~pytato_like.target.loopy.external` and
:mod:`~pytato_like.target.loopy.sparse` theirs), and the modules reading the
registry import those two.

.. autofunction:: register_outlined
.. autoclass:: OutlinedKind
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, overload

from pytato_like.array import AbstractResultWithNamedArrays, Array, Placeholder
from pytato_like.function import Call, NamedCallResult
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.mapper import ArrayOrNames

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

__all__ = ["OWNERS", "RESULTS", "CompileDag", "OutlinedKind", "OutlinedRunner",
           "ResultsAsPlaceholders", "StageRunner", "register_outlined"]


OwnerT = TypeVar("OwnerT", bound=Array)
OwnerT_contra = TypeVar("OwnerT_contra", bound=Array, contravariant=True)

#: compiles an ordinary DAG (outputs by name) with the caller's options
CompileDag = Callable[[dict[str, Array]], "BoundPyOpenCLProgram"]


class StageRunner(Protocol):
    """Called like a bound program; the keywords are the runner's
    arguments and options."""

    def __call__(self, queue: cl.CommandQueue, /, *args: Any, **kwargs: Any
                 ) -> tuple[cl.Event | None, Mapping[str, object]]: ...


class OutlinedRunner(StageRunner, Protocol[OwnerT_contra]):
    """What runs owners of one kind (see :class:`OutlinedKind`)."""

    def result_names(self, owner: OwnerT_contra, /) -> list[str]: ...


@dataclasses.dataclass(frozen=True)
class OutlinedKind(Generic[OwnerT]):
    """How the loopy target runs one owner node class.

    * ``arguments(owner) -> {argument name: array}``: what the runner reads;
    * ``runner(owner, compile_dag) -> program``: an object called like a
      bound program, ``program(queue, *, allocator, wait_for, out_host=False,
      **arguments) -> (event, {result name: array})``; *compile_dag(dict of
      arrays)* compiles an ordinary DAG with the caller's options;
    * ``runner_key(owner)``: owners with equal keys share one runner;
    * ``result_of(node) -> (owner, result name) | None``: for the result
      node classes (an owner may be its own result).
    """

    arguments: Callable[[OwnerT], Mapping[str, Array]]
    runner: Callable[[OwnerT, CompileDag], OutlinedRunner[OwnerT]]
    runner_key: Callable[[OwnerT], Hashable]


#: owner class -> its kind (each kind is of its own owner class)
OWNERS: dict[type[Array], OutlinedKind[Any]] = {}
#: result node class -> function giving ``(owner, result name)``
RESULTS: dict[type[Array], Callable[[Any], tuple[Array, str]]] = {}


def register_outlined(owner_cls: type[OwnerT], kind: OutlinedKind[OwnerT],
                      results: Mapping[type[Array],
                                       Callable[[Any], tuple[Array, str]]]
                      ) -> None:
    """Register *owner_cls* as run by a program of its own (see
    :class:`OutlinedKind`), and the classes of its results."""
    OWNERS[owner_cls] = kind
    RESULTS.update(results)


class ResultsAsPlaceholders(CopyMapper):
    """Copies the DAG with each owner result replaced by the placeholder
    named in *names* (by result identity)."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names
        self.placeholders: dict[int, Placeholder] = {}

    @overload
    def rec(self, expr: Array) -> Array: ...
    @overload
    def rec(self, expr: AbstractResultWithNamedArrays
            ) -> AbstractResultWithNamedArrays: ...
    @overload
    def rec(self, expr: ArrayOrNames) -> ArrayOrNames: ...

    def rec(self, expr: ArrayOrNames) -> ArrayOrNames:
        name = self.names.get(id(expr))
        if name is not None:
            expr = cast(Array, expr)    # owner results are arrays
            # one placeholder object per result: code generation names
            # arrays by identity
            ph = self.placeholders.get(id(expr))
            if ph is None:
                ph = self.placeholders[id(expr)] = Placeholder(
                    name, expr.shape, expr.dtype, axes=expr.axes,
                    tags=expr.tags)
            return ph
        return super().rec(expr)

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        # below a result is the owner, which is cut out
        if id(expr) in self.names:
            return ()
        return super()._descendants_to_premap(expr)


# {{{ function calls

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

# }}}

# vim: foldmethod=marker
