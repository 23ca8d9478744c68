"""Every Python block of README.md and doc/*.rst runs.

What counts as a Python block: a ```` ```python ```` fence in README.md and
a ``.. code-block:: python`` directive in ``doc/*.rst``. Blocks that must
not run (sample output, shell sessions, generated code shown for reading)
are written as literal blocks (``::``) or ``.. code-block:: text`` /
``console``, which this test does not collect; the one exception is a
listing of generated source, which is marked by a ``:caption:`` starting
with "Generated" and is compiled (so it is valid Python) but not run.

The blocks of one page run in order in one namespace, in a fresh
interpreter (so that a page's settings, e.g. JAX's x64 mode, do not leak
into the test session), from a temporary directory (files a block writes
land there). A page that imports jax or scipy needs them installed; a
page that uses OpenCL needs a device, which the project's set-up provides
(PoCL), so it is not skipped. ``PYTATO_LIKE_DOC_PYTHON`` names a second
interpreter to run the pages with as well (the lowest Python
``requires-python`` admits; see doc/install.rst).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.rst"))]


def rst_python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """``(line, code, run)`` of each ``.. code-block:: python``; *run* is
    false for a listing captioned "Generated ..."."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)\.\. code-block:: python\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        j = i + 1
        run = True
        while j < len(lines) and lines[j].strip().startswith(":"):
            if re.match(r"\s*:caption:\s*Generated", lines[j]):
                run = False
            j += 1
        body = []
        while j < len(lines) and (not lines[j].strip() or
                                  len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j])
            j += 1
        blocks.append((i + 1, textwrap.dedent("\n".join(body)).strip("\n"), run))
        i = j
    return blocks


def markdown_python_blocks(text: str) -> list[tuple[int, str, bool]]:
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        blocks.append((text[:m.start()].count("\n") + 1, m.group(1), True))
    return blocks


def python_blocks(page: Path) -> list[tuple[int, str, bool]]:
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".md":
        return markdown_python_blocks(text)
    return rst_python_blocks(text)


PAGES_WITH_BLOCKS = [page for page in PAGES if python_blocks(page)]

# runs the blocks of one page; a failure names the block's line
_RUNNER = r"""
import json, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__doc_page__"}
for path, line, code, run in blocks:
    try:
        compiled = compile(code, f"{path}:{line}", "exec")
        if run:
            exec(compiled, namespace)
    except BaseException:
        print(f"block at {path}:{line} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print("ok", len(blocks))
"""


def _has_module(python: str, name: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(not importlib.util.find_spec({name!r}))"
    return subprocess.run([python, "-c", probe], timeout=120).returncode == 0


def run_page(page: Path, python: str, tmp_path: Path) -> None:
    blocks = python_blocks(page)
    text = "\n".join(code for _, code, _ in blocks)
    # optional extras ([jax], [test]'s scipy): a page needing one runs
    # where the interpreter has it
    for module, pattern in (("jax", r"^\s*(import|from) jax"),
                            ("scipy", r"^\s*(import|from) scipy")):
        if re.search(pattern, text, re.M) and not _has_module(python, module):
            pytest.skip(f"{module} is not installed for {python}")
    rel = str(page.relative_to(ROOT))
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    proc = subprocess.run(
        [python, "-c", _RUNNER],
        input=json.dumps([(rel, line, code, run) for line, code, run in blocks]),
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().endswith(f"ok {len(blocks)}")


def test_pages_have_python_blocks():
    # the collection itself: README's example and the pages' examples
    assert ROOT / "README.md" in PAGES_WITH_BLOCKS
    assert len(PAGES_WITH_BLOCKS) >= 10


@pytest.mark.parametrize("page", PAGES_WITH_BLOCKS,
                         ids=[p.name for p in PAGES_WITH_BLOCKS])
def test_page_blocks_run_in_order(page, tmp_path):
    run_page(page, sys.executable, tmp_path)


@pytest.mark.skipif(not os.environ.get("PYTATO_LIKE_DOC_PYTHON"),
                    reason="PYTATO_LIKE_DOC_PYTHON names no second interpreter "
                           "(scripts/test_lowest_python.sh sets one up)")
@pytest.mark.parametrize("page", PAGES_WITH_BLOCKS,
                         ids=[p.name for p in PAGES_WITH_BLOCKS])
def test_page_blocks_run_on_the_lowest_python(page, tmp_path):
    run_page(page, os.environ["PYTATO_LIKE_DOC_PYTHON"], tmp_path)


def test_collector_sees_fences_and_directives_only():
    rst = textwrap.dedent("""\
        .. code-block:: python

            a = 1
            b = a + 1

        Text::

            not = python

        .. code-block:: python
           :caption: Generated code

            def f(): pass

        .. code-block:: text

            1 2 3
        """)
    assert rst_python_blocks(rst) == [(1, "a = 1\nb = a + 1", True),
                                      (10, "def f(): pass", False)]
    md = "x\n```python\nprint(1)\n```\n```\nshell\n```\n"
    assert markdown_python_blocks(md) == [(2, "print(1)\n", True)]
