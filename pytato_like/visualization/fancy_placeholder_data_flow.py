"""A compact picture of how the placeholders' data flows into the outputs.

.. autofunction:: show_fancy_placeholder_data_flow
.. autofunction:: get_fancy_placeholder_data_flow_dot

Unlike :func:`~pytato_like.get_dot_graph`, which draws every node with
all it knows, this drawing keeps only the nodes that some placeholder's
data reaches, each as a small unlabelled symbol by the kind of work it does:

=========================  ===============  ==============================
kind                       shape            label
=========================  ===============  ==============================
placeholder                ellipse          its name
elementwise                diamond
reduction                  invtriangle
einsum                     box3d            its subscripts
stack, concatenate         folder
reshape, roll, transpose,  diamond (grey)
basic indexing
advanced indexing          hexagon
output                     doublecircle     its name
=========================  ===============  ==============================

Data wrappers, size parameters, received arrays and everything computed
from them alone (constants, ``zeros``) are left out, as are the arrays
that only give a shape and what is sent to other ranks. A named output is drawn when a placeholder reaches
it; a single :class:`~pytato_like.Array` counts as one output named
``_pt_out``. Built over one topological order, without recursion.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytato_like._traversal import topological_order
from pytato_like.array import (
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    Concatenate,
    Einsum,
    IndexLambda,
    IndexRemappingBase,
    InputArgumentBase,
    NamedArray,
    Placeholder,
    Stack,
    children_of,
)
from pytato_like.visualization._describe import (
    einsum_subscripts,
    normalize_result,
    operand_edges,
)
from pytato_like.visualization.display import show_dot_graph
from pytato_like.visualization.dot import quote

if TYPE_CHECKING:
    from pytato_like.distributed.nodes import DistributedSendRefHolder
    from pytato_like.visualization._describe import Drawable

# kind -> (dot node id prefix, node attributes)
_STYLES: dict[str, tuple[str, str]] = {
    "placeholder": ("ph", 'shape=ellipse, fillcolor="#cfe2ff"'),
    "elementwise": ("ew", 'shape=diamond, fillcolor="#ffb4a2", label=""'),
    "reduction": ("red", 'shape=invtriangle, fillcolor="#ffd6a5", label=""'),
    "einsum": ("ein", 'shape=box3d, fillcolor="#e2d9f3"'),
    "stack": ("stk", 'shape=folder, fillcolor="#a0c4ff", label=""'),
    "remap": ("idx", 'shape=diamond, fillcolor="#dee2e6", label=""'),
    "indirection": ("adv", 'shape=hexagon, fillcolor="#9bb1ff", label=""'),
    "output": ("out", 'shape=doublecircle, fillcolor="#b9fbc0"'),
}


def _kind(node: Array) -> str:
    if isinstance(node, Einsum):
        return "einsum"
    if isinstance(node, IndexLambda):
        return "reduction" if node.var_to_reduction_descr else "elementwise"
    if isinstance(node, (Stack, Concatenate)):
        return "stack"
    if isinstance(node, (AdvancedIndexInContiguousAxes,
                         AdvancedIndexInNoncontiguousAxes)):
        return "indirection"
    if isinstance(node, IndexRemappingBase):
        return "remap"
    # anything else that computes (e.g. a device transfer) moves values
    # elementwise as far as data flow goes
    return "elementwise"


_SEND_HOLDER = "map_distributed_send_ref_holder"


def _data_flow_children(node: Array):
    # what is sent leaves this rank's data flow: follow only the array a
    # send holder passes through
    if node._mapper_method == _SEND_HOLDER:
        holder = cast("DistributedSendRefHolder", node)
        return (holder.passthrough_data,)
    return children_of(node)


def get_fancy_placeholder_data_flow_dot(dag: Drawable) -> str:
    """Dot source of the drawing :func:`show_fancy_placeholder_data_flow`
    shows for *dag* (an :class:`~pytato_like.Array`, a
    :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays)."""
    if isinstance(dag, Array):
        dag = {"_pt_out": dag}
    roots, output_names = normalize_result(dag)

    lines: list[str] = []
    counts: dict[str, int] = {}
    shown: dict[int, str] = {}   # id(node) -> dot id, for drawn nodes only

    def declare(kind: str, label: str | None = None) -> str:
        prefix, attrs = _STYLES[kind]
        k = counts.get(kind, 0)
        counts[kind] = k + 1
        node_id = f"{prefix}{k}"
        label_attr = f", label={quote(label)}" if label is not None else ""
        lines.append(f"  {node_id} [{attrs}{label_attr}];")
        return node_id

    for node in topological_order(roots, _data_flow_children):
        if isinstance(node, Placeholder):
            shown[id(node)] = declare("placeholder", node.name)
            continue
        if isinstance(node, InputArgumentBase):
            continue
        if node._mapper_method == _SEND_HOLDER:
            # stands for the array it holds the send on
            src = shown.get(id(cast("DistributedSendRefHolder", node).passthrough_data))
            if src is not None:
                shown[id(node)] = src
            continue
        sources = []
        for child, _label, only_shape in operand_edges(node):
            src = shown.get(id(child))
            if src is not None and not only_shape and src not in sources:
                sources.append(src)
        if not sources:
            continue
        if isinstance(node, NamedArray):
            # an alias of what it names: no symbol of its own
            shown[id(node)] = sources[0]
            continue
        kind = _kind(node)
        node_id = declare(kind, einsum_subscripts(cast(Einsum, node))
                          if kind == "einsum" else None)
        shown[id(node)] = node_id
        lines.extend(f"  {src} -> {node_id};" for src in sources)

    for root in roots:
        src = shown.get(id(root))
        if src is None:
            continue
        for name in output_names.get(id(root), ()):
            out_id = declare("output", name)
            lines.append(f"  {src} -> {out_id};")

    header = ["digraph placeholder_data_flow {",
              "  rankdir=TB;",
              '  node [style=filled, fontname="Helvetica", fontsize=16];',
              "  edge [arrowhead=vee];"]
    return "\n".join([*header, *lines, "}"]) + "\n"


def show_fancy_placeholder_data_flow(dag: Drawable, **kwargs: Any) -> Path | None:
    """Draw how the data of *dag*'s placeholders flows into its outputs
    (see the module documentation for what is drawn).

    :arg dag: an :class:`~pytato_like.Array`, a
        :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays.
    :arg kwargs: where the drawing goes, as for
        :func:`~pytato_like.show_dot_graph` (``output_to="svg"``,
        ``"browser"``, ``"xwindow"``, a file path, ...).
    :returns: the path of the file written, or ``None`` when shown inline
        in a notebook.
    """
    output_to: str | os.PathLike | None = kwargs.pop("output_to", None)
    return show_dot_graph(get_fancy_placeholder_data_flow_dot(dag),
                          output_to=output_to, **kwargs)
