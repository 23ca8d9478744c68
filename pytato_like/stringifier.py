"""Readable text for array DAGs (used by ``repr`` and ``str``).

A node with one user is printed inline inside that user; a node with
several users, or one nested too deeply, is printed once as a numbered
definition ``%k = ...`` and referred to by ``%k`` elsewhere. The text is
therefore linear in the size of the DAG, and it is produced bottom-up over a
topological order, without recursion.

.. autofunction:: stringify_dag
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytato_like.array import (
    AbstractResultWithNamedArrays,
    Array,
    DictOfNamedArrays,
    FieldKind,
    NamedArray,
    NormalizedSlice,
    output_arrays,
)

#: Inline nesting deeper than this starts a new numbered definition.
MAX_INLINE_DEPTH = 6


def _format_value(name: str, value: Any) -> str:
    from pytato_like.scalar_expr import stringify
    if name == "expr":
        return stringify(value)
    if isinstance(value, np.dtype):
        return str(value)
    if name == "data":
        return f"<{type(value).__name__} {getattr(value, 'shape', '')}>"
    return repr(value)


class _Text(str):
    """The text of an array, standing in for it inside a field value."""

    __slots__ = ()


def _format_entry(entry: Any) -> str:
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


def _format_field(value: Any, kind: FieldKind, text_of) -> str:
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
    from pytato_like._traversal import topological_order
    from pytato_like.array import children_of

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
