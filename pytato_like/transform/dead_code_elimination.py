"""Dropping what the outputs of a DAG do not need.

A DAG only holds what its outputs refer to, but a node can refer to more
than its value needs. :func:`eliminate_dead_code` removes two such
references:

* **unused bindings**: an :class:`~pytato_like.array.IndexLambda` binding
  whose name its expression (reduction bounds included) never mentions is
  dropped, and with it the sub-DAG only that binding kept alive;
* **named-array indirections**: a :class:`~pytato_like.array.NamedArray`
  without tags or axis metadata used inside the DAG is replaced by the array
  it names. The named array also refers to its whole container, i.e. to
  the other results of that container, which are dead for this DAG.

Nothing else changes: when there is nothing to remove the very same object
is returned, and every rewritten node keeps its shape, dtype, axes and
tags, so values are unchanged.

.. autofunction:: eliminate_dead_code
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytato_like.collector import paused_collection
from pytato_like.array import Array, IndexLambda, NamedArray, default_axes
from pytato_like.scalar_expr import get_dependencies
from pytato_like.transform._graph import walk_children
from pytato_like.transform.copy import CopyMapper
from pytato_like.transform.mapper import ArrayOrNamesTc

if TYPE_CHECKING:
    from pytato_like.function import FunctionDefinition
    from pytato_like.scalar_expr import ScalarExpression
    from pytato_like.transform.mapper import ArrayOrNames


class DeadCodeEliminator(CopyMapper):
    """Copies a DAG without unused bindings and named-array indirections."""

    def __init__(self) -> None:
        super().__init__()
        # the front end shares expression objects between nodes: analyse
        # each once (keyed by id; the nodes keep the expressions alive)
        self._used_names: dict[int, frozenset[str]] = {}

    def clone_for_callee(self, function: FunctionDefinition
                         ) -> DeadCodeEliminator:
        return type(self)()

    def _names_used_by(self, scalar_expr: ScalarExpression) -> frozenset[str]:
        used = self._used_names.get(id(scalar_expr))
        if used is None:
            used = self._used_names[id(scalar_expr)] = get_dependencies(scalar_expr)
        return used

    def _descendants_to_premap(self, expr: ArrayOrNames) -> tuple:
        # only what survives: a named array's target, not its container
        return walk_children(expr)

    def map_index_lambda(self, expr: IndexLambda) -> Array:
        used = self._names_used_by(expr.expr)
        if used.issuperset(expr.bindings):
            return super().map_index_lambda(expr)
        bindings = {name: self.rec(ary) for name, ary in expr.bindings.items()
                    if name in used}
        shape = tuple(self.rec(d) if not isinstance(d, int) else d
                      for d in expr.shape)
        if len(bindings) == len(expr.bindings) and all(
                bindings[name] is ary for name, ary in expr.bindings.items()) \
                and all(a is b for a, b in zip(shape, expr.shape, strict=True)):
            return expr
        return expr.copy(bindings=bindings, shape=shape)

    def map_named_array(self, expr: NamedArray) -> Array:
        if expr.tags or expr.axes != default_axes(expr.ndim):
            return super().map_named_array(expr)
        return self.rec(expr.expr)


@paused_collection
def eliminate_dead_code(expr: ArrayOrNamesTc) -> ArrayOrNamesTc:
    """*expr* (an array or a
    :class:`~pytato_like.array.DictOfNamedArrays`) without unused bindings
    and named-array indirections (see the module documentation)."""
    return DeadCodeEliminator()(expr)
