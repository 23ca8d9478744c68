"""Runs examples/distributed_profile.ipynb in a real Jupyter kernel.

The notebook runs the heat solver on 2 MPI ranks with a saved trace and
partition, then draws the partition as a profile inline
(``pt.show_dot_graph(partition, trace=...)``) and checks the profile's
figures with ``assert``; any failing cell fails this test.
"""

from __future__ import annotations

import re
import shutil

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from _notebooks import execute_notebook, outputs_of  # noqa: E402


pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(shutil.which("dot") is None,
                       reason="graphviz 'dot' is not installed"),
]


@pytest.fixture(scope="module")
def executed_notebook():
    return execute_notebook("distributed_profile.ipynb", timeout=300)


def test_notebook_runs_without_errors(executed_notebook):
    assert not [out for out in outputs_of(executed_notebook)
                if out.output_type == "error"]
    text = "".join(out.get("text", "") for out in outputs_of(executed_notebook)
                   if out.output_type == "stream")
    assert "heat equation on 2 ranks" in text and "-> OK" in text


def test_notebook_shows_the_profile_as_inline_svg(executed_notebook):
    svgs = [out["data"]["image/svg+xml"] for out in outputs_of(executed_notebook)
            if "image/svg+xml" in out.get("data", {})]
    assert len(svgs) == 1
    svg = svgs[0]
    assert "<svg" in svg
    # every part's times for both ranks and the messages' sizes are drawn
    assert len(re.findall(r"rank 0: [\d.]+ ms mean, [\d.]+ ms max", svg)) >= 2
    assert len(re.findall(r"rank 1: [\d.]+ ms mean, [\d.]+ ms max", svg)) >= 2
    assert re.search(r"tag \d+: \d+ bytes", svg)
    assert "in flight" in svg
