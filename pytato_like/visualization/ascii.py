"""Text drawings of array DAGs for terminals and logs.

.. autofunction:: get_ascii_graph
.. autofunction:: show_ascii_graph

One line per node, inputs first, every node after the nodes it reads.
Each line starts with the node's marker in a *lane* (a column of the
drawing) and ends with its label ``%k Type name shape dtype ...``. A lane
runs down from a node to the last node that reads it; a reader's line joins
the lanes of its operands with horizontal strokes::

    ●      %0 Placeholder x (4,) float64
    │ ●    %1 Placeholder y (4,) float64
    ●─┘    %2 IndexLambda (4,) float64 _in0[_0] + _in1[_0]
    ◉      %3 IndexLambda (4,) float64 0.5*_in0[_0]  ⇒ out

Glyphs:

* ``●`` a node whose lane continues down, ``◉`` a node nobody reads (a
  result), ``○`` a node whose readers refer to it by number because the
  drawing already has ``max_lanes`` lanes;
* a marker directly under a live lane reads that lane, which ends there;
* ``├`` / ``┤`` a lane read by the node on its line and continuing down,
  ``└`` / ``┘`` a lane read for the last time;
* ``┼`` a lane crossing a horizontal stroke without joining it;
* ``← %k`` after a label: operands drawn without a lane.

Output names follow ``⇒``. The pytato package draws with ``asciidag``,
which recurses along the DAG and revisits shared nodes; this renderer is
iterative and each line is at most ``2 * (max_lanes + 1)`` glyphs wide, so
the text is linear in the DAG size.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

from pytato_like._traversal import topological_order
from pytato_like.visualization._describe import (
    describe_node,
    normalize_result,
    operand_edges,
)

if TYPE_CHECKING:
    from pytato_like.array import Array
    from pytato_like.visualization._describe import Drawable

#: Lanes drawn side by side at most; further operands are listed by number.
MAX_LANES = 24

_COLORS = ("\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[34m", "\x1b[35m",
           "\x1b[36m")
_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"

_MARK_CONTINUES = "●"
_MARK_RESULT = "◉"
_MARK_UNLANED = "○"


def _label(node: Array, index: int, bold: str, reset: str) -> str:
    title, rows = describe_node(node)
    parts = [f"%{index}", f"{bold}{title}{reset}"]
    for name, text in rows:
        if name in ("name", "shape", "dtype", "expr", "subscripts"):
            parts.append(text)
        else:
            parts.append(f"{name}={text}")
    return " ".join(parts)


def get_ascii_graph(result: Drawable, use_color: bool = True, *,
                    max_lanes: int = MAX_LANES) -> str:
    """A text drawing of the computation of *result* (an
    :class:`~pytato_like.Array`, a :class:`~pytato_like.DictOfNamedArrays` or
    a dict of arrays); ANSI colours when *use_color*."""
    roots, output_names = normalize_result(result)
    order = topological_order(roots)
    position = {id(node): i for i, node in enumerate(order)}
    operands = [[position[id(child)] for child, _, _ in operand_edges(node)]
                for node in order]
    last_reader = [-1] * len(order)
    for i, ins in enumerate(operands):
        for c in ins:
            last_reader[c] = i

    def paint(text: str, source: int) -> str:
        if not use_color:
            return text
        return _COLORS[source % len(_COLORS)] + text + _RESET

    lanes: list[int | None] = []       # column -> node whose value it carries
    column_of: dict[int, int] = {}     # node -> its lane's column
    rows: list[tuple[str, int, str]] = []  # (drawing, visible width, label)
    for i, node in enumerate(order):
        drawn = [c for c in operands[i] if c in column_of]
        listed = [c for c in operands[i] if c not in column_of]
        reading = {column_of[c]: c for c in drawn}
        ending = [column_of[c] for c in drawn if last_reader[c] == i]

        if ending:
            col = min(ending)
        else:
            col = next((k for k, s in enumerate(lanes) if s is None), len(lanes))
        has_readers = last_reader[i] >= 0
        gets_lane = has_readers and col < max_lanes
        mark = (_MARK_CONTINUES if gets_lane
                else _MARK_UNLANED if has_readers else _MARK_RESULT)

        lo = min([col, *reading])
        hi = max([col, *reading])
        width = max(len(lanes), col + 1)
        glyphs: list[str] = []
        for k in range(width):
            if k == col:
                glyphs.append(paint(mark, i))
            elif k in reading:
                source = reading[k]
                ends = last_reader[source] == i
                if k < col:
                    glyph = "└" if ends else "├"
                else:
                    glyph = "┘" if ends else "┤"
                glyphs.append(paint(glyph, source))
            elif k < len(lanes) and lanes[k] is not None:
                glyphs.append(paint("┼" if lo < k < hi else "│",
                                    cast(int, lanes[k])))
            else:
                glyphs.append(paint("─", i) if lo < k < hi else " ")
            if k < width - 1:
                glyphs.append(paint("─", i) if lo <= k < hi else " ")

        label = _label(node, i, _BOLD if use_color else "",
                       _RESET if use_color else "")
        if listed:
            label += "  ← " + ", ".join(f"%{c}" for c in listed)
        names = output_names.get(id(node))
        if names:
            label += "  ⇒ " + ", ".join(names)
        rows.append(("".join(glyphs), 2 * width - 1, label))

        for k in ending:
            column_of.pop(cast(int, lanes[k]))  # an ending lane is in use
            lanes[k] = None
        if gets_lane:
            if col == len(lanes):
                lanes.append(i)
            else:
                lanes[col] = i
            column_of[i] = col
        while lanes and lanes[-1] is None:
            lanes.pop()

    pad_to = max((w for _, w, _ in rows), default=0) + 2
    return "\n".join(drawing + " " * (pad_to - w) + label
                     for drawing, w, label in rows) + "\n"


def show_ascii_graph(result: Drawable, use_color: bool | None = None) -> None:
    """Print :func:`get_ascii_graph` of *result* to stdout (coloured when
    stdout is a terminal, unless *use_color* says otherwise)."""
    if use_color is None:
        use_color = sys.stdout.isatty()
    sys.stdout.write(get_ascii_graph(result, use_color=use_color))
