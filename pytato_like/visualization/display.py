"""Showing a dot graph: inline SVG in Jupyter, an SVG file elsewhere.

.. autofunction:: show_dot_graph
.. autofunction:: render_svg

Rendering runs graphviz's ``dot`` program. Outside a notebook nothing is
opened unless asked for (``output_to="browser"``), and nothing blocks, so
the functions are safe on headless machines and in batch jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytato_like.diagnostic import GraphvizNotFoundError, VisualizationError
from pytato_like.visualization.dot import (
    get_dot_graph,
    get_dot_graph_from_partition,
)

if TYPE_CHECKING:
    from pytato_like.partition import GraphPartition
    from pytato_like.visualization._describe import Drawable

# Seconds allowed to ``dot``; a graph it cannot lay out in this time is too
# big to look at anyway.
DOT_TIMEOUT = 120


def dot_executable() -> str:
    """The path of Graphviz's ``dot``."""
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizNotFoundError(
            "graphviz's 'dot' program was not found on PATH; install graphviz "
            "(e.g. 'apt-get install graphviz') to render graphs")
    return dot


def render_svg(dot_source: str) -> str:
    """The SVG text graphviz ``dot`` renders from *dot_source*.

    Raises :class:`~pytato_like.diagnostic.GraphvizNotFoundError` without
    ``dot`` and :class:`~pytato_like.diagnostic.VisualizationError` when
    ``dot`` rejects the source."""
    try:
        proc = subprocess.run([dot_executable(), "-Tsvg"], input=dot_source,
                              capture_output=True, text=True,
                              timeout=DOT_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as err:
        raise VisualizationError(
            f"graphviz 'dot' did not finish within {DOT_TIMEOUT} s on a graph "
            f"of {dot_source.count(chr(10))} lines") from err
    if proc.returncode != 0:
        raise VisualizationError(
            f"graphviz 'dot' failed (exit code {proc.returncode}): "
            f"{proc.stderr.strip()[:500]}")
    return proc.stdout


def _to_dot_source(result: str | Drawable | GraphPartition,
                   **partition_options: Any) -> str:
    if isinstance(result, str):
        return result
    if hasattr(result, "parts") and hasattr(result, "var_name_to_result"):
        return get_dot_graph_from_partition(cast("GraphPartition", result),
                                            **partition_options)
    return get_dot_graph(result)


def in_notebook() -> bool:
    """Whether we run inside a Jupyter kernel (where SVG shows inline)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


_HTML_TEMPLATE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title></head>
<body>
{svg}
</body></html>
"""


def _write_files(svg: str, dot_source: str, target: Path | None) -> Path:
    """Write the SVG (or HTML page, by suffix) to *target*, or to a fresh
    temporary directory together with the dot source."""
    if target is None:
        directory = Path(tempfile.mkdtemp(prefix="pytato_like_graph_"))
        (directory / "graph.dot").write_text(dot_source, encoding="utf-8")
        target = directory / "graph.svg"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix.lower() in (".html", ".htm"):
        target.write_text(_HTML_TEMPLATE.format(title=target.stem, svg=svg),
                          encoding="utf-8")
    elif target.suffix.lower() == ".dot":
        target.write_text(dot_source, encoding="utf-8")
    else:
        target.write_text(svg, encoding="utf-8")
    return target


def _open_in_browser(path: Path) -> bool:
    """Open *path* in a web browser if one is available; never raise."""
    import webbrowser
    if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False  # headless: only console browsers, which would block
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    if type(browser) is webbrowser.GenericBrowser:
        return False  # a console browser takes over the terminal until quit
    try:
        return bool(browser.open(path.resolve().as_uri()))
    except Exception:  # a broken browser must not break the caller
        return False


def show_dot_graph(result: str | Drawable | GraphPartition, output_to: str | os.PathLike | None = None,
                   **kwargs: Any) -> Path | None:
    """Show *result*: dot source, an :class:`~pytato_like.Array`, a
    :class:`~pytato_like.DictOfNamedArrays`, a dict of arrays or a graph
    partition.

    :arg output_to: where the picture goes:

        - ``None`` (default): inline SVG when running in a Jupyter kernel,
          otherwise an SVG file in a new temporary directory;
        - ``"svg"``: an SVG file in a new temporary directory;
        - ``"browser"`` (or ``"xwindow"``, pytools' name): an HTML page in a
          new temporary directory, opened in a web browser if one is
          available (a headless machine just keeps the file);
        - ``"inline"``: inline SVG in the notebook (needs IPython);
        - a path: the file to write, SVG unless it ends in ``.html`` (an HTML
          page) or ``.dot`` (the dot source).

        ``filename=`` is accepted as an alias for a path.

        For a partition, ``trace=`` (and ``rank=``) draw it as the profile
        of that trace, and ``view=`` chooses between every part's DAG and
        one box per part (see
        :func:`~pytato_like.visualization.dot.get_dot_graph_from_partition`).
    :returns: the path of the file written, or ``None`` when shown inline.
        The path is also printed outside notebooks.
    """
    filename = kwargs.pop("filename", None)
    # a partition drawn as the profile of a trace (see get_dot_graph_from_partition)
    partition_options = {k: kwargs.pop(k) for k in ("trace", "rank", "view")
                         if k in kwargs}
    if kwargs:
        raise TypeError(
            f"show_dot_graph got unexpected keyword arguments {sorted(kwargs)}")
    if filename is not None:
        if output_to is not None:
            raise TypeError("show_dot_graph: pass either output_to or filename")
        output_to = filename

    dot_source = _to_dot_source(result, **partition_options)
    svg = render_svg(dot_source)

    if output_to == "inline" or (output_to is None and in_notebook()):
        try:
            from IPython.display import SVG, display
        except ImportError as err:
            raise VisualizationError(
                "show_dot_graph(output_to='inline') needs IPython") from err
        display(SVG(svg))
        return None

    if output_to in (None, "svg"):
        path = _write_files(svg, dot_source, None)
    elif output_to in ("browser", "xwindow"):
        path = _write_files(svg, dot_source, None).with_suffix(".html")
        _write_files(svg, dot_source, path)
        if not _open_in_browser(path):
            print(f"show_dot_graph: no web browser available; open {path}")
    elif isinstance(output_to, (str, os.PathLike)):
        path = _write_files(svg, dot_source, Path(output_to))
    else:
        raise VisualizationError(
            f"show_dot_graph: unknown output_to {output_to!r}; use None, "
            "'svg', 'browser', 'inline' or a file path")
    print(f"show_dot_graph: graph written to {path}")
    return path
