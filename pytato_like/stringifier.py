"""Readable text for array DAGs: the full text and the ``repr``.

:func:`stringify_dag` (also ``pytato_like.stringify``) writes the whole
DAG. A node with one user is printed inline inside that user; a node with
several users, or one nested too deeply, is printed once as a numbered
definition ``%k = ...`` and referred to by ``%k`` elsewhere. The text is
therefore linear in the size of the DAG, and it is produced bottom-up over a
topological order, without recursion.

``repr`` and ``str`` of an array (:func:`dag_repr`) give that full text for
DAGs of at most :data:`REPR_MAX_NODES` nodes whose text fits in
:data:`REPR_MAX_CHARS` characters, which is where it reads well (pytato
prints its arrays' structure a few levels deep). A larger DAG prints as a
summary (:func:`summarize_dag`): the root's kind, shape and dtype, the node
count by kind, and the inputs. The README's 100-step stencil, 58 KB as
full text, prints in four lines::

    IndexLambda(shape=(1000,), dtype=float64): a DAG of 701 nodes
      500 IndexLambda, 200 Roll, 1 Placeholder
      inputs: Placeholder(name='u', shape=(1000,), dtype=float64)
      (full text: pytato_like.stringify(...); drawing: pytato_like.show_dot_graph(...))

.. autofunction:: stringify_dag
.. autofunction:: stringify
.. autofunction:: dag_repr
.. autofunction:: summarize_dag
.. autoclass:: DagSummary
.. autodata:: REPR_MAX_NODES
.. autodata:: REPR_MAX_CHARS
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np

from pytato_like._traversal import topological_order
from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    FieldKind,
    InputArgumentBase,
    NamedArray,
    NormalizedSlice,
    children_of,
    output_arrays,
)
from pytato_like.scalar_expr import stringify as stringify_expression

if TYPE_CHECKING:
    from pytato_like.scalar_expr import ScalarExpression

#: Inline nesting deeper than this starts a new numbered definition.
MAX_INLINE_DEPTH = 6

#: ``repr`` prints DAGs up to this many nodes in full, larger ones summarised
REPR_MAX_NODES = 40
#: ... and summarises a small DAG whose full text is longer than this
REPR_MAX_CHARS = 3000
#: kinds and inputs a summary lists before "..."
_SUMMARY_MAX_ENTRIES = 6


def _format_value(name: str, value: object) -> str:
    if name == "expr":
        return stringify_expression(cast("ScalarExpression", value))
    if isinstance(value, np.dtype):
        return str(value)
    if name == "data":
        return f"<{type(value).__name__} {getattr(value, 'shape', '')}>"
    return repr(value)


class _Text(str):
    """The text of an array, standing in for it inside a field value."""

    __slots__ = ()


def _format_entry(entry: object) -> str:
    """Text of a field value whose arrays are :class:`_Text` (containers
    are at most two levels deep: no recursion on the DAG)."""
    if isinstance(entry, _Text):
        return entry
    if isinstance(entry, Mapping):
        return "{" + ", ".join(f"{k}: {_format_entry(v)}"
                               for k, v in entry.items()) + "}"
    if isinstance(entry, tuple):
        entries = [_format_entry(v) for v in entry]
        return "(" + ", ".join(entries) + ("," if len(entries) == 1 else "") + ")"
    if isinstance(entry, NormalizedSlice):
        return f"{entry.start}:{entry.stop}:{entry.step}"
    return repr(entry)


def _format_field(value: object, kind: FieldKind, text_of) -> str:
    return _format_entry(kind.map(value, lambda a: _Text(text_of(a))))


def _format_node(node: Array, text_of) -> str:
    cls = type(node).__name__
    if type(node) is NamedArray:
        parts = [f"name={node.name!r}", f"expr={text_of(node.expr)}"]
    else:
        parts = []
        for name, kind in node._fields:
            value = getattr(node, name)
            if not kind.holds_arrays:
                if name == "var_to_reduction_descr" and not value:
                    continue
                if name == "redn_axis_to_redn_descr":
                    continue
                parts.append(f"{name}={_format_value(name, value)}")
            else:
                parts.append(f"{name}={_format_field(value, kind, text_of)}")
        if not any(name in ("shape", "newshape") for name, _ in node._fields):
            parts.append(f"shape={node.shape}")
        if not any(name == "dtype" for name, _ in node._fields):
            parts.append(f"dtype={node.dtype}")
    if node.tags:
        parts.append(f"tags={set(node.tags)}")
    if any(axis.tags for axis in node.axes):
        parts.append(f"axes={node.axes}")
    return f"{cls}({', '.join(parts)})"


def stringify_dag(result: Array | AbstractResultWithNamedArrays) -> str:
    """The text of *result* with shared nodes defined once."""
    roots = output_arrays(result, "stringify")
    order = topological_order(roots)
    nusers: dict[int, int] = {}
    for node in order:
        # every reference counts: a node read twice by one user is defined
        # once, or the text would grow exponentially with the depth
        for child in map(id, children_of(node)):
            nusers[child] = nusers.get(child, 0) + 1
    for root in roots:
        nusers[id(root)] = nusers.get(id(root), 0) + 2  # roots print alone

    text: dict[int, str] = {}
    depth: dict[int, int] = {}
    definitions: list[str] = []
    for node in order:
        child_depth = max((depth[id(c)] for c in children_of(node)), default=0)

        def text_of(child: Array) -> str:
            return text[id(child)]

        rendered = _format_node(node, text_of)
        if nusers.get(id(node), 0) > 1 or child_depth >= MAX_INLINE_DEPTH:
            label = f"%{len(definitions)}"
            definitions.append(f"{label} = {rendered}")
            text[id(node)] = label
            depth[id(node)] = 0
        else:
            text[id(node)] = rendered
            depth[id(node)] = child_depth + 1

    if isinstance(result, DictOfNamedArrays):
        body = "DictOfNamedArrays({" + ", ".join(
            f"{name!r}: {text[id(ary)]}" for name, ary in result._data.items()) + "})"
    else:
        body = text[id(result)]
    if len(definitions) == 1 and body == "%0":
        return definitions[0].split(" = ", 1)[1]
    return "\n".join([*definitions, body])


def stringify(result: Array | AbstractResultWithNamedArrays) -> str:
    """The full text of *result* (:func:`stringify_dag`), whatever its
    size; ``repr`` summarises large DAGs."""
    return stringify_dag(result)


# {{{ summaries

@dataclasses.dataclass(frozen=True)
class DagSummary:
    """What ``repr`` says about a DAG too large to print whole."""

    #: the root's kind, shape and dtype (``IndexLambda(shape=(1000,),
    #: dtype=float64)``), or the outputs of a :class:`DictOfNamedArrays`
    #: (``DictOfNamedArrays('a': IndexLambda (1000,) float64, ...)``)
    head: str
    #: distinct nodes (structurally equal nodes counted once)
    n_nodes: int
    #: ``(kind, count)``, most frequent first
    kind_counts: tuple[tuple[str, int], ...]
    #: the text of each input node (placeholders, data wrappers, size
    #: parameters), in topological order
    inputs: tuple[str, ...]

    def text(self) -> str:
        kinds = self.kind_counts[:_SUMMARY_MAX_ENTRIES]
        kinds_text = ", ".join(f"{n} {kind}" for kind, n in kinds)
        if len(self.kind_counts) > len(kinds):
            kinds_text += ", ..."
        inputs = self.inputs[:_SUMMARY_MAX_ENTRIES]
        inputs_text = ", ".join(inputs) or "none"
        if len(self.inputs) > len(inputs):
            inputs_text += f", ... ({len(self.inputs)} inputs)"
        return "\n".join([
            f"{self.head}: a DAG of {self.n_nodes} nodes",
            f"  {kinds_text}",
            f"  inputs: {inputs_text}",
            "  (full text: pytato_like.stringify(...); drawing: "
            "pytato_like.show_dot_graph(...))"])


def _short_head(ary: Array) -> str:
    return f"{type(ary).__name__} {ary.shape} {ary.dtype}"


def summarize_dag(result: Array | AbstractResultWithNamedArrays,
                  order: list[Array] | None = None) -> DagSummary:
    """The :class:`DagSummary` of *result*, in one walk over the DAG
    (*order*, its topological order, if the caller has it)."""
    if order is None:
        order = topological_order(output_arrays(result, "summarize"))
    counts: dict[str, int] = {}
    inputs: list[str] = []
    for node in order:
        kind = type(node).__name__
        counts[kind] = counts.get(kind, 0) + 1
        if isinstance(node, InputArgumentBase):
            inputs.append(_format_node(node, lambda child: type(child).__name__))
    if isinstance(result, DictOfNamedArrays):
        entries = [f"{name!r}: {_short_head(ary)}"
                   for name, ary in list(result._data.items())[
                       :_SUMMARY_MAX_ENTRIES]]
        if len(result._data) > len(entries):
            entries.append(f"... ({len(result._data)} outputs)")
        head = f"DictOfNamedArrays({', '.join(entries)})"
    elif isinstance(result, Array):
        head = (f"{type(result).__name__}(shape={result.shape}, "
                f"dtype={result.dtype})")
    else:  # another result kind: its outputs
        head = type(result).__name__
    kind_counts = tuple(sorted(counts.items(), key=lambda kc: (-kc[1], kc[0])))
    return DagSummary(head=head, n_nodes=len(order), kind_counts=kind_counts,
                      inputs=tuple(inputs))


def dag_repr(result: Array | AbstractResultWithNamedArrays) -> str:
    """``repr`` of an array or a :class:`DictOfNamedArrays`: the full text
    of a small DAG, the summary of a large one (see the module docs)."""
    order = topological_order(output_arrays(result, "print"))
    if len(order) <= REPR_MAX_NODES:
        text = stringify_dag(result)
        if len(text) <= REPR_MAX_CHARS:
            return text
    return summarize_dag(result, order).text()

# }}}
