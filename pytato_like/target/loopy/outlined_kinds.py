"""The registry of outlined node kinds (see
:mod:`~pytato_like.target.loopy.outlined`): how the loopy target runs each
node class computed by a program of its own. A leaf of the target's
modules: the kinds register here at import
(:mod:`~pytato_like.target.loopy.function_calls`,
:mod:`~pytato_like.target.loopy.external` and
:mod:`~pytato_like.target.loopy.sparse` the package's own), and the modules
that run outlined nodes import those three.

The registry is light on purpose: :func:`has_outlined_nodes` answers for
every DAG code generation sees, and the registering modules (with the
copy mappers, the runners and the translation-unit builder behind them)
are imported only for a DAG that holds an outlined node -- a warm start of
an ordinary program runs without them (importing the loopy target took
~24 ms instead of ~32 in fresh processes).

.. autofunction:: register_outlined
.. autoclass:: OutlinedKind
.. autodata:: BUILTIN_OWNERS
.. autofunction:: has_outlined_nodes
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pytato_like.array import Array
from pytato_like.function import Call
from pytato_like.loopy import LoopyCall
from pytato_like.sparse import CSRMatmul

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

__all__ = ["BUILTIN_OWNERS", "OWNERS", "RESULTS", "CompileDag", "OutlinedKind",
           "OutlinedRunner", "StageRunner", "has_outlined_nodes",
           "register_outlined"]


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
#: the owner classes of the package's own kinds (function calls, calls of
#: loopy kernels, sparse products): outlined whether or not their kinds
#: are registered yet
BUILTIN_OWNERS: frozenset[type] = frozenset({Call, LoopyCall, CSRMatmul})


def register_outlined(owner_cls: type[OwnerT], kind: OutlinedKind[OwnerT],
                      results: Mapping[type[Array],
                                       Callable[[Any], tuple[Array, str]]]
                      ) -> None:
    """Register *owner_cls* as run by a program of its own (see
    :class:`OutlinedKind`), and the classes of its results."""
    OWNERS[owner_cls] = kind
    RESULTS.update(results)


def has_outlined_nodes(order: list[Array]) -> bool:
    """Whether a topologically ordered DAG holds a node the loopy target
    runs as a program of its own: of a registered kind or of the
    package's own (:data:`BUILTIN_OWNERS`, whose kinds register when
    :mod:`~pytato_like.target.loopy.outlined` is imported)."""
    # (set.isdisjoint over map: the classes tested in C, ~20x faster
    # than a generator on a DAG of 10^5 nodes)
    types = set(map(type, order))
    return not (BUILTIN_OWNERS.isdisjoint(types)
                and OWNERS.keys().isdisjoint(types))


# vim: foldmethod=marker
