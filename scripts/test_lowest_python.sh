#!/usr/bin/env bash
# Runs the documentation's Python blocks (tests/test_doc_blocks.py) on the
# lowest Python that pyproject.toml's requires-python admits (3.10), in a
# venv of its own (build/venv-py310, ignored by git) with the package's dependencies from PyPI.
# The interpreter: $PYTHON310, else python3.10 on PATH (pyenv's shim on
# this machine kind). The main suite runs on .venv's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
is_310() { [[ -n "$1" ]] && "$1" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; }
PY310="${PYTHON310:-$(command -v python3.10 || true)}"
if ! is_310 "$PY310"; then
    # pyenv's interpreters directly: its shims may be off PATH, or select
    # another version (PYENV_VERSION) and refuse python3.10
    for candidate in "${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/3.10*/bin/python3.10; do
        is_310 "$candidate" && PY310="$candidate"
    done
fi
if ! is_310 "$PY310"; then
    echo "no Python 3.10 interpreter (set PYTHON310=/path/to/python3.10)" >&2
    exit 1
fi
VENV310=build/venv-py310
if [[ ! -x "$VENV310/bin/python" ]]; then
    "$PY310" -m venv "$VENV310"
fi
# the runtime dependencies only (the package itself is put on PYTHONPATH by
# the test); scipy for doc/sparse.rst
"$VENV310/bin/python" -m pip install -q --disable-pip-version-check \
    "numpy>=2" "pymbolic>=2024.2" "pytools>=2024.1" networkx \
    "loopy>=2025.1" pyopencl "islpy<2026.2" scipy
PYTATO_LIKE_DOC_PYTHON="$PWD/$VENV310/bin/python" \
    .venv/bin/python -m pytest -q tests/test_doc_blocks.py -k lowest_python
