"""Running the example notebooks in a real Jupyter kernel, for the tests
that check them (tests/test_notebook.py, tests/test_profile_notebook.py)."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def execute_notebook(name: str, timeout: int):
    """The notebook ``examples/<name>`` after running every cell in the
    examples folder; raises ``CellExecutionError`` if a cell fails."""
    path = EXAMPLES / name
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def outputs_of(nb):
    """Every output of every code cell of *nb*."""
    return [out for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs]
