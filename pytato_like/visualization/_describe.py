"""What the drawings say about one node: the text shared by the dot and ascii
renderers.

:func:`describe_node` gives a node's type and its label rows (shape, dtype,
name, scalar expression, einsum subscripts, tags, ...); :func:`operand_edges`
gives the arrays a node reads with the name of the slot each one fills
(binding name, argument position, shape or index entry). Both look only at
the node itself, so a whole drawing costs time linear in the DAG.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np

from pytato_like.array import (
    INDICES,
    SHAPE,
    Array,
    Einsum,
    EinsumElementwiseAxis,
    IndexLambda,
    NamedArray,
    NormalizedSlice,
    SizeParam,
    normalize_outputs,
)
from pytato_like.diagnostic import VisualizationError
from pytato_like.scalar_expr import stringify, substitute

if TYPE_CHECKING:
    from typing import TypeAlias

    from pymbolic.typing import Expression

    from pytato_like.array import DictOfNamedArrays

    #: What the drawing functions draw: an array, a
    #: :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays.
    Drawable: TypeAlias = "Array | DictOfNamedArrays | Mapping[str, Array]"

#: Scalar expressions and other long values are cut to this many characters.
MAX_TEXT_LENGTH = 60

# Symbolic shape components are small expressions of size parameters; this
# bounds how far their text is expanded (a constant, not the DAG depth).
_MAX_SHAPE_EXPR_DEPTH = 8


def truncate(text: str, limit: int = MAX_TEXT_LENGTH) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def normalize_result(result: Drawable) -> tuple[list[Array], dict[int, list[str]]]:
    """``(roots, id(root) -> output names)`` for an Array, a
    :class:`DictOfNamedArrays` or a plain dict of arrays."""
    outputs, single = normalize_outputs(result, "draw", VisualizationError)
    if single:
        return [cast("Array", result)], {}
    roots: list[Array] = []
    names: dict[int, list[str]] = {}
    for name, ary in outputs.items():
        if id(ary) not in names:
            roots.append(ary)
            names[id(ary)] = []
        names[id(ary)].append(name)
    return roots, names


# {{{ text of values

def shape_component_text(dim: object) -> str:
    """``3``, ``n`` or ``2*n + 1`` for one shape entry."""
    if not isinstance(dim, Array):
        return str(dim)
    return stringify(_size_expr(dim, _MAX_SHAPE_EXPR_DEPTH))


def _size_expr(dim: Array, depth: int) -> Expression:
    """*dim* as one pymbolic expression in the size parameters' names (the
    stringifier then gets the parentheses right)."""
    import pymbolic.primitives as prim
    if isinstance(dim, SizeParam):
        return prim.Variable(dim.name)
    if isinstance(dim, IndexLambda) and depth > 0:
        return substitute(dim.expr, {k: _size_expr(v, depth - 1)
                                     for k, v in dim.bindings.items()})
    return prim.Variable(f"<{type(dim).__name__}>")


def shape_text(shape: tuple) -> str:
    parts = [shape_component_text(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def tags_text(tags) -> str:
    return ", ".join(sorted(repr(t) for t in tags))


def einsum_subscripts(node: Einsum) -> str:
    """The subscript string (``"ij,jk->ik"``) that *node* computes."""
    # i, j, k, ... as in textbooks: output axes first, then reduction axes
    letters = string.ascii_lowercase[8:] + string.ascii_lowercase[:8]
    nout = node.ndim

    def letter(descr) -> str:
        if isinstance(descr, EinsumElementwiseAxis):
            return letters[descr.dim % len(letters)]
        return letters[(nout + descr.dim) % len(letters)]

    ins = ",".join("".join(letter(d) for d in acc)
                   for acc in node.access_descriptors)
    return f"{ins}->{letters[:nout]}"


def _indices_text(indices: tuple) -> str:
    entries = []
    for i, idx in enumerate(indices):
        if isinstance(idx, NormalizedSlice):
            stop = "" if idx.stop is None else idx.stop
            entries.append(f"{idx.start}:{stop}:{idx.step}")
        elif isinstance(idx, Array):
            entries.append(f"index[{i}]")
        else:
            entries.append(repr(idx))
    return "[" + ", ".join(entries) + "]"


def _value_text(value: object) -> str:
    if isinstance(value, Array) or isinstance(getattr(value, "data", None), Array):
        # e.g. a send held by a node: its repr would print a whole DAG
        return f"<{type(value).__name__}>"
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_value_text(v)}"
                               for k, v in value.items()) + "}"
    return repr(value)

# }}}


# Fields whose content the label shows in its own way (or not at all).
_SKIPPED_FIELDS = frozenset({"shape", "newshape", "dtype", "_container"})


def describe_node(node: Array) -> tuple[str, list[tuple[str, str]]]:
    """``(type name, [(row name, row text), ...])`` for the label of *node*.

    Every label has ``shape`` and ``dtype``; names of inputs, scalar
    expressions, einsum subscripts, non-array fields, tags and axis tags
    follow where present. Texts are plain (not escaped) and truncated.
    """
    rows: list[tuple[str, str]] = [("shape", shape_text(node.shape)),
                                   ("dtype", str(node.dtype))]
    if isinstance(node, NamedArray):
        rows.insert(0, ("name", node.name))
    else:
        for name, kind in node._fields:
            if name in _SKIPPED_FIELDS:
                continue
            value = getattr(node, name)
            if kind is INDICES:
                rows.append(("indices", truncate(_indices_text(value))))
            elif kind.by_identity:
                rows.append((name, type(value).__name__))
            elif kind.holds_arrays:
                continue  # arrays: drawn as edges
            elif name == "expr" and isinstance(node, IndexLambda):
                rows.append(("expr", truncate(stringify(value))))
            elif name == "access_descriptors" and isinstance(node, Einsum):
                rows.append(("subscripts", einsum_subscripts(node)))
            elif name in ("var_to_reduction_descr", "redn_axis_to_redn_descr"):
                tagged = {k: d.tags for k, d in value.items() if d.tags}
                if tagged:
                    rows.append(("reduction tags", truncate(
                        ", ".join(f"{k}: {tags_text(t)}"
                                  for k, t in tagged.items()))))
            elif name == "name":
                if value is not None:
                    rows.insert(0, ("name", str(value)))
            elif isinstance(value, frozenset) and not value:
                continue  # e.g. the empty tags of a held send: noise
            else:
                rows.append((name, truncate(_value_text(value))))
    if node.tags:
        rows.append(("tags", truncate(tags_text(node.tags))))
    for iaxis, axis in enumerate(node.axes):
        if axis.tags:
            rows.append((f"axis {iaxis}", truncate(tags_text(axis.tags))))
    return type(node).__name__, rows


def operand_edges(node: Array) -> list[tuple[Array, str, bool]]:
    """``(operand, slot label, only_gives_a_shape)`` for each distinct array
    *node* reads, in field order. An operand filling several slots (``x*x``
    binding ``x`` twice) appears once with the slot labels joined."""
    if isinstance(node, NamedArray):
        if type(node) is NamedArray:
            return [(node.expr, "", False)]
        # a call result: drawn from its call, labelled with its name
        return [(node._container, node.name, False)]
    found: dict[int, tuple[Array, list[str], bool]] = {}

    def add(child: Array, label: str, aux: bool) -> None:
        entry = found.get(id(child))
        if entry is None:
            found[id(child)] = (child, [label] if label else [], aux)
        else:
            if label:
                entry[1].append(label)
            if entry[2] and not aux:
                found[id(child)] = (child, entry[1], False)

    for name, kind in node._fields:
        for slot, child in kind.slots(getattr(node, name)):
            if slot is None:
                label = "" if name == "array" else name
            elif kind is SHAPE:
                label = f"shape[{slot}]"
            elif kind is INDICES:
                label = f"index[{slot}]"
            else:
                label = str(slot)
            add(child, label, kind is SHAPE)
    return [(child, ", ".join(labels), aux)
            for child, labels, aux in found.values()]

# vim: foldmethod=marker
