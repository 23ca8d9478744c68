"""The built wheel installs into a fresh virtual environment and runs the
README's example there, on the NumPy target and on OpenCL; the sdist holds
what it needs to build and test from itself.

The fresh venv has no access to the repository: it is made without system
site packages, the wheel is installed into it with ``--no-deps``, and the
commands run from a temporary directory. Its dependencies (numpy, loopy,
pyopencl, ...) come from the main venv through a ``.pth`` file naming the
main venv's site-packages: installing them again would download a few
hundred MB per run. Paths listed in a ``.pth`` file are added to
``sys.path`` but their own ``.pth`` files are not processed, so the main
venv's editable install of this checkout (a ``.pth`` finder) stays out; the
test checks that ``pytato_like`` is imported from the fresh venv.
"""

from __future__ import annotations

import json
import re
import site
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"^```python\n(.*?)^```", text, re.S | re.M).group(1)


def build_dists(source: Path, out: Path, sdist: bool = True) -> None:
    """The PEP 517 hooks of the project's backend (setuptools), called as a
    front end would without build isolation (the venv has setuptools and
    wheel: an isolated build would download them)."""
    code = ("import sys\n"
            "from setuptools import build_meta as backend\n"
            "out, kind = sys.argv[1:]  # (the backend rewrites sys.argv)\n"
            "backend.build_wheel(out)\n"
            "if kind == 'sdist':\n"
            "    backend.build_sdist(out)\n")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out), "sdist" if sdist else "-"],
        cwd=source, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The wheel and sdist built from this checkout."""
    out = tmp_path_factory.mktemp("dist")
    build_dists(ROOT, out)
    (wheel,) = out.glob("pytato_like-*.whl")
    (sdist,) = out.glob("pytato_like-*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def fresh_venv(dists, tmp_path_factory):
    wheel, _ = dists
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install",
         "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "_main_venv_dependencies.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n")
    return env_dir


def _run_in(env_dir: Path, code: str, cwd: Path) -> dict:
    proc = subprocess.run([str(env_dir / "bin" / "python"), "-c", code],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_wheel_is_imported_from_the_fresh_venv(fresh_venv, tmp_path):
    got = _run_in(fresh_venv, (
        "import json, os, sys, pytato_like\n"
        "print(json.dumps({'file': pytato_like.__file__,"
        f" 'repo_on_path': any(os.path.realpath(p or '.') == {str(ROOT)!r}"
        " for p in sys.path),"
        " 'editable_finder': any('editable' in m for m in sys.modules)}))"),
        tmp_path)
    assert got["file"].startswith(str(fresh_venv))
    assert not got["repo_on_path"] and not got["editable_finder"]


def test_readme_example_on_numpy_and_opencl(fresh_venv, tmp_path):
    pytest.importorskip("pyopencl")
    example = _readme_example()
    code = example + (
        "\nimport json\n"
        "import pyopencl as cl\n"
        "u0 = np.random.default_rng(0).random(1000)\n"
        "ref = u0.copy()\n"
        "for _ in range(100):\n"
        "    ref = ref + 0.1 * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))\n"
        "on_numpy = prg(u=u0)\n"
        "queue = cl.CommandQueue(cl.create_some_context(interactive=False))\n"
        "evt, (on_opencl,) = pt.generate_loopy(u)(queue, u=u0)\n"
        "print(json.dumps({'numpy': float(abs(on_numpy - ref).max()),"
        " 'opencl': float(abs(on_opencl - ref).max()),"
        " 'shape': list(out.shape), 'file': pt.__file__}))")
    got = _run_in(fresh_venv, code, tmp_path)
    assert got["file"].startswith(str(fresh_venv))
    assert got["shape"] == [1000]
    assert got["numpy"] < 1e-12 and got["opencl"] < 1e-12


def test_console_script_reports_components(fresh_venv, tmp_path):
    proc = subprocess.run(
        [str(fresh_venv / "bin" / "pytato-like-check-env"), "--require", "core"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^ok +core +pytato_like ", proc.stdout, re.M)
    # every component gets a line, working or with how to get it
    for component in ("opencl", "loopy", "mpi", "graphviz", "jax"):
        assert re.search(rf"^(ok|MISSING) +{component} ", proc.stdout, re.M)


def test_check_env_says_how_to_get_what_is_missing(tmp_path):
    # graphviz missing: PATH without dot
    proc = subprocess.run(
        [sys.executable, "-m", "pytato_like.check_env", "--require", "graphviz"],
        cwd=ROOT, env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "MISSING  graphviz" in proc.stdout
    assert "apt-get install graphviz" in proc.stdout
    assert "conda install -c conda-forge graphviz" in proc.stdout
    assert "required but missing: graphviz" in proc.stdout


def test_sdist_holds_what_the_tests_need_and_builds(dists, tmp_path):
    _, sdist = dists
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
        tar.extractall(tmp_path, filter="data")
    for needed in ("examples/demo.py", "examples/solver_graph.ipynb",
                   "doc/index.rst", "doc/conf.py", "scripts/bootstrap.sh",
                   "tests/conftest.py", "tests/test_doc_blocks.py",
                   "bench/__main__.py", "Makefile", "environment.yml",
                   "pytato_like/py.typed"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith("doc/_build")]
    (unpacked,) = tmp_path.glob("pytato_like-*")
    (tmp_path / "wheel").mkdir()
    build_dists(unpacked, tmp_path / "wheel", sdist=False)
    assert list((tmp_path / "wheel").glob("pytato_like-*.whl"))
    # a test file runs from the unpacked sdist against its own package
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_lazy_import.py"],
        cwd=unpacked, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
