#!/usr/bin/env bash
# arraycontext's own test suite, its pytato array contexts running on
# pytato_like (`make test-downstream`; part of `make test`).
#
# Unpacks arraycontext at a fixed commit (../shared/downstream/, MIT; not
# part of this project), installs it into the venv without its `pytato`
# extra, and runs test_arraycontext.py (array contexts restricted to the two
# pytato ones), test_pytato_arraycontext.py and test_utils.py through
# `python -m pytato_like.run -m pytest`: `import pytato` loads pytato_like.
# Tests listed in scripts/downstream_known_failures.txt (each with its
# reason) are deselected; every other test must pass.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
TARBALL="${ARRAYCONTEXT_TARBALL:-$ROOT/../shared/downstream/arraycontext-d74503b.tar.gz}"
WORK="$ROOT/build/downstream"

if [[ ! -f "$TARBALL" ]]; then
    echo "[downstream] $TARBALL not found: arraycontext's suite not run" >&2
    exit 0
fi
rm -rf "$WORK"
mkdir -p "$WORK"
tar xzf "$TARBALL" -C "$WORK"
# (its build backend, hatchling, comes from PyPI in pip's isolated build)
"$PY" -m pip install --no-deps -q "$WORK/arraycontext"

deselect=()
while IFS= read -r line; do
    line="${line%%#*}"
    line="$(echo "$line" | xargs)"
    [[ -n "$line" ]] && deselect+=(--deselect "$line")
done < "$ROOT/scripts/downstream_known_failures.txt"

cd "$WORK/arraycontext/test"
export PYOPENCL_TEST="${PYOPENCL_TEST:-portable}"
exec "$PY" -m pytato_like.run -m pytest -q -n 2 -p no:cacheprovider \
    --timeout 900 -W ignore::DeprecationWarning -rfE \
    -k "Pytato or not test_arraycontext" \
    test_arraycontext.py test_pytato_arraycontext.py test_utils.py \
    ${deselect[@]+"${deselect[@]}"} "$@"
