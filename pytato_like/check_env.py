"""``pytato-like-check-env``: what this environment can run, and how to get
what is missing.

Each check runs its probe in a fresh interpreter (a broken OpenCL driver or
MPI library can crash the process that loads it) and reports one line:
``ok``, or ``MISSING`` with the command that installs the piece on Debian,
with conda, or with pip. What is checked:

============  ==========================================  ================
component     probe                                       needed for
============  ==========================================  ================
core          ``import pytato_like`` and a NumPy run      everything
opencl        pyopencl lists a device                     ``generate_loopy``
loopy         a loopy kernel runs on that device          ``generate_loopy``
mpi           mpi4py imports, ``mpiexec -n 2`` runs it    distributed runs
graphviz      ``dot -V``                                  drawings
jax           ``import jax``                              ``generate_jax``
============  ==========================================  ================

The exit status is 0 when the core works and every component named with
``--require`` (comma-separated, or ``all``) works too. The project's own
set-up (``scripts/bootstrap.sh``) requires all of them, and also that
``POCL_DEVICES="pthread pthread"`` gives two devices and ``mpiexec -genv``
passes an environment variable (``--project``), which its tests use.

Run: ``pytato-like-check-env [--require opencl,mpi] [--project] [--quiet]``
(or ``python -m pytato_like.check_env``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

COMPONENTS = ("core", "opencl", "loopy", "mpi", "graphviz", "jax")

#: how to get each component: Debian (root), conda-forge, pip
HOW_TO_GET = {
    "core": "pip install pytato_like",
    "opencl": ("an OpenCL driver: apt-get install pocl-opencl-icd "
               "ocl-icd-libopencl1 (Debian), or conda install -c conda-forge "
               "pocl pyopencl; pip's pocl-binary-distribution does not run "
               "on every CPU"),
    "loopy": "pip install loopy (and an OpenCL driver, see opencl)",
    "mpi": ("on a cluster: load its MPI module, then pip install mpi4py "
            "(pytato_like[mpi]) builds against it; with conda: conda install "
            "-c conda-forge mpi4py mpich; on a laptop: pip install "
            "pytato_like[mpich] (MPICH from PyPI)"),
    "graphviz": ("the 'dot' program: apt-get install graphviz (Debian), or "
                 "conda install -c conda-forge graphviz"),
    "jax": "pip install pytato_like[jax]",
}


@dataclasses.dataclass
class Result:
    component: str
    ok: bool
    detail: str
    seconds: float


def _run(cmd: list[str], env_extra: dict[str, str] | None = None,
         timeout: float = 300) -> tuple[bool, str]:
    env = dict(os.environ)
    env.update(env_extra or {})
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"{type(err).__name__}: {err}"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, lines[-1] if lines else f"exit code {proc.returncode}"
    return True, proc.stdout.strip()


def _python(code: str, **kwargs) -> tuple[bool, str]:
    return _run([sys.executable, "-c", code], **kwargs)


_CORE = """
import numpy as np
import pytato_like as pt
x = pt.make_placeholder("x", (4,), np.float64)
out = pt.generate_numpy(2 * x + 1)(x=np.arange(4.0))
assert np.array_equal(out, 2 * np.arange(4.0) + 1), out
print(pt.__version__)
"""

_LIST_DEVICES = """
import pyopencl as cl
devs = [d for p in cl.get_platforms() for d in p.get_devices()]
print(len(devs), "|", "; ".join(f"{d.platform.name}: {d.name}" for d in devs))
"""

_LOOPY = """
import numpy as np
import pyopencl as cl
import loopy as lp
ctx = cl.create_some_context(interactive=False)
queue = cl.CommandQueue(ctx)
knl = lp.make_kernel("{[i]: 0<=i<n}", "out[i] = 2*a[i]")
a = np.arange(1000, dtype=np.float64)
evt, (out,) = knl.executor(ctx)(queue, a=a)
assert np.array_equal(out, 2 * a), out
print("a kernel ran on", queue.device.name)
"""

# rank 0 gathers (lines forwarded by mpiexec from several ranks interleave)
_MPI_HELLO = """
import os
from mpi4py import MPI
c = MPI.COMM_WORLD
mine = (c.rank, c.size, os.environ.get("PYTATO_LIKE_CHECK", "-"))
allr = c.gather(mine, root=0)
if c.rank == 0:
    print(sorted(allr), MPI.Get_library_version().split()[0])
"""


def find_mpiexec() -> str | None:
    """The ``mpiexec`` beside this Python (a venv's MPICH from PyPI), else
    the one on PATH, else ``None`` (also used by the tests and benchmarks
    that launch ranks)."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec")


def check_core(project: bool) -> tuple[bool, str]:
    ok, out = _python(_CORE)
    return ok, f"pytato_like {out}" if ok else out


def check_opencl(project: bool) -> tuple[bool, str]:
    ok, out = _python(_LIST_DEVICES)
    if not ok:
        return False, out
    count, _, names = out.partition(" | ")
    if int(count) < 1:
        return False, "pyopencl found no OpenCL device"
    if project:
        ok2, out2 = _python(_LIST_DEVICES,
                            env_extra={"POCL_DEVICES": "pthread pthread"})
        if not ok2 or not out2.startswith("2 "):
            return False, f"POCL_DEVICES='pthread pthread' gave {out2!r}"
        names += "; POCL_DEVICES='pthread pthread' gives 2"
    return True, names


def check_loopy(project: bool) -> tuple[bool, str]:
    return _python(_LOOPY)


def check_mpi(project: bool) -> tuple[bool, str]:
    ok, out = _python("import mpi4py; print(mpi4py.__version__)")
    if not ok:
        return False, f"mpi4py: {out}"
    mpiexec = find_mpiexec()
    if mpiexec is None:
        return False, f"mpi4py {out}, but no mpiexec beside Python or on PATH"
    ok, hello = _run([mpiexec, "-n", "2", "-genv", "PYTATO_LIKE_CHECK", "yes",
                      sys.executable, "-c", _MPI_HELLO], timeout=120)
    if not ok:
        return False, f"{mpiexec} -n 2: {hello}"
    want = "[(0, 2, 'yes'), (1, 2, 'yes')]"
    if project and not hello.startswith(want):
        return False, f"{mpiexec} -n 2 -genv: {hello}"
    return True, f"mpi4py {out}, {mpiexec} -n 2 runs ({hello.split()[-1]})"


def check_graphviz(project: bool) -> tuple[bool, str]:
    dot = shutil.which("dot")
    if dot is None:
        return False, "no 'dot' on PATH"
    # dot -V writes its version to stderr
    proc = subprocess.run([dot, "-V"], capture_output=True, text=True,
                          check=False)
    return proc.returncode == 0, proc.stderr.strip() or proc.stdout.strip()


def check_jax(project: bool) -> tuple[bool, str]:
    ok, out = _python("import jax; print(jax.__version__)", timeout=120)
    return ok, f"jax {out}" if ok else out


_CHECKS: dict[str, Callable[[bool], tuple[bool, str]]] = {
    "core": check_core, "opencl": check_opencl, "loopy": check_loopy,
    "mpi": check_mpi, "graphviz": check_graphviz, "jax": check_jax,
}


def run_checks(components=COMPONENTS, project: bool = False) -> list[Result]:
    results = []
    for name in components:
        t0 = time.perf_counter()
        ok, detail = _CHECKS[name](project)
        results.append(Result(name, ok, detail, time.perf_counter() - t0))
    return results


def _parse_required(text: str) -> set[str]:
    if text in ("", "none"):
        return set()
    if text == "all":
        return set(COMPONENTS)
    names = {name.strip() for name in text.split(",")}
    unknown = names - set(COMPONENTS)
    if unknown:
        raise SystemExit(f"pytato-like-check-env: unknown component(s) "
                         f"{sorted(unknown)}; known: {', '.join(COMPONENTS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pytato-like-check-env",
        description="What this environment can run, and how to get what "
                    "is missing.")
    parser.add_argument("--require", default="",
                        help="components that must work (comma-separated, "
                             f"or 'all'): {', '.join(COMPONENTS)}")
    parser.add_argument("--project", action="store_true",
                        help="also the project's test set-up: two PoCL "
                             "devices, mpiexec -genv (implies --require all)")
    parser.add_argument("--quiet", action="store_true",
                        help="print only what is missing")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    required = {"core"} | _parse_required(args.require)
    if args.project:
        required = set(COMPONENTS)

    failed_required = []
    for result in run_checks(project=args.project):
        needed = result.component in required
        if result.ok:
            if not args.quiet:
                print(f"ok       {result.component:9s} {result.detail} "
                      f"[{result.seconds:.1f} s]", flush=True)
            continue
        print(f"MISSING  {result.component:9s} {result.detail}\n"
              f"         how to get it: {HOW_TO_GET[result.component]}",
              flush=True)
        if needed:
            failed_required.append(result.component)
    if failed_required:
        print(f"pytato-like-check-env: required but missing: "
              f"{', '.join(failed_required)}", flush=True)
        return 1
    if not args.quiet:
        print("pytato-like-check-env: everything required works", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
