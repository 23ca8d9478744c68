#!/usr/bin/env bash
# Idempotent set-up of everything pytato_like needs, from a fresh Debian
# machine with only python3, gcc and make:
#   * Debian packages (as root only, when missing): PoCL OpenCL ICD, the ICD
#     loader, graphviz (dot)
#   * a virtualenv at .venv (override with VENV=...), with the package installed
#     editable with the extras test, docs, notebook, mpich (MPICH + mpi4py from
#     PyPI: the tests launch the venv's mpiexec), jax (CPU jaxlib)
#   * a Jupyter kernel spec "python3" inside the venv (for nbclient)
# A stamp file (.venv/.bootstrap-stamp) holding the hash of pyproject.toml and
# of this script makes a second run take well under a second.
# Set BOOTSTRAP_FORCE=1 to redo the pip step regardless of the stamp;
# BOOTSTRAP_PYTHON=... picks the interpreter the venv is made from (python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="${VENV:-$ROOT/.venv}"
PYTHON="${BOOTSTRAP_PYTHON:-python3}"
STAMP="$VENV/.bootstrap-stamp"
# python-*-doc: the objects.inv inventories doc/conf.py's intersphinx reads
# offline (this machine reaches package registries only)
APT_PACKAGES=(pocl-opencl-icd ocl-icd-libopencl1 graphviz
              python-pyopencl-doc python-mpi4py-doc)

log() { printf '[bootstrap] %s\n' "$*"; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- apt packages
deb_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null \
    || die "$PYTHON is older than 3.10"

# Debian's own python3 needs python3-venv (ensurepip) to create a venv.
if [[ ! -x "$VENV/bin/python" ]] && ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    APT_PACKAGES+=("python3-venv")
fi

if command -v dpkg-query >/dev/null 2>&1; then
    missing=()
    for pkg in "${APT_PACKAGES[@]}"; do
        deb_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
            log "apt: installing ${missing[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq </dev/null >/dev/null
            apt-get install -y -qq --no-install-recommends "${missing[@]}" \
                </dev/null >/dev/null
        else
            log "WARNING: missing Debian packages (${missing[*]}) and not root;" \
                "install them by hand: apt-get install ${missing[*]}"
        fi
    else
        log "apt: ${APT_PACKAGES[*]} present"
    fi
else
    log "WARNING: not a Debian system; make sure an OpenCL ICD (PoCL) and graphviz are installed"
fi

# ---------------------------------------------------------------------- venv
if [[ ! -x "$VENV/bin/python" ]]; then
    log "venv: creating $VENV"
    "$PYTHON" -m venv "$VENV"
else
    log "venv: reusing $VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' \
    || die "$VENV has Python < 3.10; remove it and rerun"

# ----------------------------------------------------------------- pip step
want_stamp="$(cat pyproject.toml "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
have_stamp="$(cat "$STAMP" 2>/dev/null || true)"

quick_ok() {
    [[ -x "$VENV/bin/mpiexec" ]] \
        && [[ -f "$VENV/share/jupyter/kernels/python3/kernel.json" ]] \
        && "$VPY" -c 'import numpy, pymbolic, pytools, loopy, pyopencl, islpy, mpi4py, networkx, pytest, sphinx, importlib.util as u; assert u.find_spec("jax")' \
            >/dev/null 2>&1
}

if [[ "${BOOTSTRAP_FORCE:-0}" != 1 && "$want_stamp" == "$have_stamp" ]] && quick_ok; then
    log "pip: up to date (stamp matches)"
    log "done"
    exit 0
fi

rm -f "$STAMP"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1

# pip, quiet, without the noise about unreadable local index locations that
# some machines' pip.conf produces; keeps pip's exit status.
pip_q() {
    "$VPY" -m pip "$@" -q </dev/null 2>&1 \
        | { grep -v -e "is neither a file nor a directory" \
                    || true; }
}

log "pip: upgrading pip/setuptools/wheel"
pip_q install --upgrade pip "setuptools>=77" wheel

# mpich first, so that mpi4py (installed next) finds its libmpi.
log "pip: installing mpich"
pip_q install mpich

log "pip: installing pytato_like editable with extras [test,docs,notebook,mpich,jax] (slow the first time)"
pip_q install -e ".[test,docs,notebook,mpich,jax]"

# pyopencl[pocl] would pull this in; it does not work on this CPU and would
# shadow Debian's PoCL.
if "$VPY" -m pip show -q pocl-binary-distribution >/dev/null 2>&1; then
    log "pip: removing pocl-binary-distribution (broken here; Debian's PoCL is used)"
    pip_q uninstall -y pocl-binary-distribution
fi

# ------------------------------------------------------------- jupyter kernel
if [[ ! -f "$VENV/share/jupyter/kernels/python3/kernel.json" ]]; then
    log "jupyter: registering kernel 'python3' in the venv"
    "$VPY" -m ipykernel install --sys-prefix --name python3 >/dev/null
fi

# ------------------------------------------------------------------- checks
log "check: OpenCL (PoCL), loopy, MPI (2 ranks), graphviz"
"$VPY" "$ROOT/scripts/check_env.py" --quiet \
    || die "environment check failed (run: $VPY scripts/check_env.py)"

echo "$want_stamp" >"$STAMP"
log "done"
