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
