"""Runs examples/solver_graph.ipynb in a real Jupyter kernel.

The notebook builds a few heat-equation steps, shows the graph with
``pt.show_dot_graph`` (which must display inline SVG inside a kernel),
prints the ascii drawing, and checks the NumPy-executor result against
plain NumPy with ``assert``; any failing cell fails this test.
"""

from __future__ import annotations

import re
import shutil

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from _notebooks import execute_notebook, outputs_of  # noqa: E402


pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="graphviz 'dot' is not installed")


@pytest.fixture(scope="module")
def executed_notebook():
    return execute_notebook("solver_graph.ipynb", timeout=180)


def test_notebook_runs_without_errors(executed_notebook):
    assert not [out for out in outputs_of(executed_notebook)
                if out.output_type == "error"]
    # the last cell's assertions ran and it reported the difference
    text = "".join(out.get("text", "") for out in outputs_of(executed_notebook)
                   if out.output_type == "stream")
    match = re.search(r"max \|u - u_numpy\| = (\S+)", text)
    assert match is not None
    assert float(match[1]) < 1e-12


def test_notebook_shows_the_graph_as_inline_svg(executed_notebook):
    svgs = [out["data"]["image/svg+xml"] for out in outputs_of(executed_notebook)
            if "image/svg+xml" in out.get("data", {})]
    assert len(svgs) == 1
    svg = svgs[0]
    assert "<svg" in svg
    # the drawn graph is the solver's: its input, rolls and outputs
    assert "u0" in svg and "Roll" in svg and "energy" in svg


def test_notebook_prints_the_ascii_graph(executed_notebook):
    text = "".join(out.get("text", "") for out in outputs_of(executed_notebook)
                   if out.output_type == "stream")
    assert "Placeholder u0 (16,) float64" in text
    assert "⇒ u" in text and "⇒ energy" in text


def test_arrays_display_as_html_in_a_kernel(tmp_path):
    """A cell ending in an array shows its _repr_html_ in a real kernel:
    a drawing for a small DAG, the summary for a large one."""
    from pathlib import Path

    import nbclient
    import nbformat
    root = Path(__file__).resolve().parent.parent
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            f"import sys; sys.path.insert(0, {str(root)!r})\n"
            "import numpy as np\n"
            "import pytato_like as pt\n"
            "u = pt.make_placeholder('u', (100,), np.float64)\n"
            "pt.sin(u) + 1"),
        nbformat.v4.new_code_cell(
            "for _ in range(100):\n"
            "    u = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))\n"
            "u"),
    ])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    small, large = (cell.outputs[-1]["data"] for cell in nb.cells)
    assert "<svg" in small["text/html"]
    assert "a DAG of 3 nodes" in small["text/html"]
    assert "<svg" not in large["text/html"]
    # 7 nodes a step (two rolls, 2*u, -, +, 0.1*, u+) and the placeholder
    assert "a DAG of 701 nodes" in large["text/html"]
    assert large["text/plain"].startswith(
        "IndexLambda(shape=(100,), dtype=float64): a DAG of 701 nodes")
