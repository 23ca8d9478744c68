"""Drawing array DAGs: graphviz dot, SVG in notebooks or files, and text.

.. automodule:: pytato_like.visualization.dot
.. automodule:: pytato_like.visualization.partition_summary
.. automodule:: pytato_like.visualization.display
.. automodule:: pytato_like.visualization.notebook
.. automodule:: pytato_like.visualization.ascii
.. automodule:: pytato_like.visualization.fancy_placeholder_data_flow
"""

from __future__ import annotations

from pytato_like.visualization.ascii import get_ascii_graph, show_ascii_graph
from pytato_like.visualization.display import render_svg, show_dot_graph
from pytato_like.visualization.dot import (
    get_dot_graph,
    get_dot_graph_from_partition,
)
from pytato_like.visualization.fancy_placeholder_data_flow import (
    get_fancy_placeholder_data_flow_dot,
    show_fancy_placeholder_data_flow,
)

__all__ = [
    "get_ascii_graph",
    "get_dot_graph",
    "get_dot_graph_from_partition",
    "get_fancy_placeholder_data_flow_dot",
    "render_svg",
    "show_ascii_graph",
    "show_dot_graph",
    "show_fancy_placeholder_data_flow",
]
