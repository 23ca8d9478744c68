"""Runs examples/solver_graph.ipynb in a real Jupyter kernel.

The notebook builds a few heat-equation steps, shows the graph with
``pt.show_dot_graph`` (which must display inline SVG inside a kernel),
prints the ascii drawing, and checks the NumPy-executor result against
plain NumPy with ``assert``; any failing cell fails this test.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "solver_graph.ipynb"

pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="graphviz 'dot' is not installed")


@pytest.fixture(scope="module")
def executed_notebook():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=180,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError if any cell fails
    return nb


def outputs_of(nb):
    return [out for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs]


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
