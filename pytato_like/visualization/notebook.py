"""How arrays show in Jupyter: ``_repr_html_``.

.. autofunction:: dag_html
.. autodata:: HTML_DRAWING_MAX_NODES

A notebook cell ending in an array shows the summary ``repr`` gives a
large DAG (:func:`pytato_like.stringifier.summarize_dag`: root kind,
shape, dtype, node count by kind, inputs) as HTML and, for a DAG of at most
:data:`HTML_DRAWING_MAX_NODES` nodes, its drawing as inline SVG
(:func:`~pytato_like.visualization.get_dot_graph` rendered by graphviz
``dot``). Without ``dot``, or when it fails or takes more than
:data:`HTML_DRAWING_TIMEOUT` seconds, the summary shows alone with a note
saying why: displaying a value never raises. Larger DAGs are not drawn
(a drawing of hundreds of nodes cannot be read in a cell);
``pt.show_dot_graph(x)`` draws them on request.
"""

from __future__ import annotations

import html
import subprocess
from typing import TYPE_CHECKING

from pytato_like._traversal import topological_order
from pytato_like.array import output_arrays
from pytato_like.diagnostic import VisualizationError
from pytato_like.stringifier import summarize_dag
from pytato_like.visualization.display import dot_executable
from pytato_like.visualization.dot import get_dot_graph

if TYPE_CHECKING:
    from pytato_like.array import AbstractResultWithNamedArrays, Array

#: DAGs up to this many nodes are drawn inline
HTML_DRAWING_MAX_NODES = 30
#: seconds ``dot`` may take for an inline drawing
HTML_DRAWING_TIMEOUT = 10


def _drawing(result: Array | AbstractResultWithNamedArrays
             ) -> tuple[str | None, str]:
    """``(svg, "")``, or ``(None, why not)``."""
    try:
        dot = dot_executable()
    except VisualizationError:
        return None, "install graphviz ('dot') to see the drawing here"
    try:
        source = get_dot_graph(result)
    except VisualizationError as err:
        return None, f"no drawing: {err}"
    try:
        proc = subprocess.run([dot, "-Tsvg"], input=source,
                              capture_output=True, text=True,
                              timeout=HTML_DRAWING_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return None, f"graphviz 'dot' took more than {HTML_DRAWING_TIMEOUT} s"
    if proc.returncode != 0:
        return None, f"graphviz 'dot' failed: {proc.stderr.strip()[:200]}"
    svg = proc.stdout
    start = svg.find("<svg")  # drop the XML prolog and doctype
    return (svg[start:] if start >= 0 else svg), ""


def dag_html(result: Array | AbstractResultWithNamedArrays) -> str:
    """The HTML a notebook shows for an array or a
    :class:`~pytato_like.DictOfNamedArrays`: the summary, and a drawing of
    a small DAG."""
    order = topological_order(output_arrays(result, "display"))
    summary = summarize_dag(result, order)
    kinds = ", ".join(f"{n}&nbsp;{html.escape(kind)}"
                      for kind, n in summary.kind_counts)
    inputs = "<br>".join(html.escape(text) for text in summary.inputs[:20])
    if len(summary.inputs) > 20:
        inputs += f"<br>... ({len(summary.inputs)} inputs)"
    parts = [
        '<div class="pytato-like-array">',
        f"<b>{html.escape(summary.head)}</b>: a DAG of {summary.n_nodes} nodes",
        '<table style="text-align:left">',
        f"<tr><th>kinds</th><td>{kinds}</td></tr>",
        f"<tr><th>inputs</th><td>{inputs or 'none'}</td></tr>",
        "</table>",
    ]
    if summary.n_nodes <= HTML_DRAWING_MAX_NODES:
        svg, why_not = _drawing(result)
        parts.append(svg if svg is not None
                     else f"<p><i>{html.escape(why_not)}</i></p>")
    else:
        parts.append("<p><i>too large to draw inline: "
                     "<code>pytato_like.show_dot_graph(...)</code> draws it, "
                     "<code>pytato_like.stringify(...)</code> prints it"
                     "</i></p>")
    parts.append("</div>")
    return "\n".join(parts)
