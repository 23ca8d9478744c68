"""Smoke-check the environment set up by scripts/bootstrap.sh.

Checks, each in a fresh subprocess where it matters:

* pyopencl sees a PoCL device (and two with ``POCL_DEVICES="pthread pthread"``)
* a trivial loopy kernel compiles and runs on PoCL with correct results
* ``mpiexec -n 2`` (MPICH from PyPI, in the venv) runs mpi4py with size 2 on
  both ranks, and passes an environment variable with ``-genv``
* graphviz ``dot -V`` works

Run: ``.venv/bin/python scripts/check_env.py [--quiet]``. Exits non-zero on
the first failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

QUIET = "--quiet" in sys.argv[1:]
BIN = os.path.dirname(sys.executable)


def say(msg: str) -> None:
    if not QUIET:
        print(msg, flush=True)


def run(cmd: list[str], env_extra: dict[str, str] | None = None,
        timeout: float = 300) -> str:
    env = dict(os.environ)
    if env_extra:
        env.update(env_extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(
            f"check_env: command failed ({proc.returncode}): {' '.join(cmd)}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc.stdout


LIST_DEVICES = """
import pyopencl as cl
devs = [d for p in cl.get_platforms() for d in p.get_devices()]
print(len(devs))
for d in devs:
    print(d.platform.name, "|", d.name)
"""

LOOPY_KERNEL = """
import numpy as np
import pyopencl as cl
import loopy as lp
ctx = cl.create_some_context(interactive=False)
queue = cl.CommandQueue(ctx)
knl = lp.make_kernel("{[i]: 0<=i<n}", "out[i] = 2*a[i]")
a = np.arange(1000, dtype=np.float64)
ex = knl.executor(ctx)
evt, (out,) = ex(queue, a=a)
assert isinstance(out, np.ndarray), type(out)
assert np.array_equal(out, 2*a), out
print("ok", out[:4])
"""

# Rank 0 gathers and prints everything: output of several ranks forwarded by
# mpiexec can interleave within a line.
MPI_HELLO = """
import os
from mpi4py import MPI
c = MPI.COMM_WORLD
mine = (c.rank, c.size, os.environ.get("PYTATO_LIKE_CHECK", "-"),
        MPI.Get_library_version().split()[0])
allr = c.gather(mine, root=0)
if c.rank == 0:
    print("\\n".join(" ".join(map(str, r)) for r in allr), flush=True)
"""


def check_opencl() -> None:
    t0 = time.perf_counter()
    out = run([sys.executable, "-c", LIST_DEVICES]).split("\n")
    ndev = int(out[0])
    if ndev < 1:
        raise SystemExit("check_env: no OpenCL device found "
                         "(is Debian's pocl-opencl-icd installed?)")
    say(f"opencl: {ndev} device(s): {out[1]}  [{time.perf_counter()-t0:.1f}s]")
    out = run([sys.executable, "-c", LIST_DEVICES],
              {"POCL_DEVICES": "pthread pthread"}).split("\n")
    if int(out[0]) != 2:
        raise SystemExit(f"check_env: POCL_DEVICES='pthread pthread' gave {out}")
    say("opencl: POCL_DEVICES='pthread pthread' -> 2 devices")


def check_loopy() -> None:
    t0 = time.perf_counter()
    out = run([sys.executable, "-c", LOOPY_KERNEL]).strip()
    say(f"loopy: {out}  [{time.perf_counter()-t0:.1f}s]")


def check_mpi() -> None:
    mpiexec = os.path.join(BIN, "mpiexec")
    if not os.path.exists(mpiexec):
        raise SystemExit(f"check_env: {mpiexec} missing (pip install mpich)")
    t0 = time.perf_counter()
    out = run([mpiexec, "-n", "2", "-genv", "PYTATO_LIKE_CHECK", "yes",
               sys.executable, "-c", MPI_HELLO], timeout=120)
    lines = sorted(line.split() for line in out.strip().splitlines())
    if [(x[0], x[1], x[2]) for x in lines] != [("0", "2", "yes"),
                                               ("1", "2", "yes")]:
        raise SystemExit(f"check_env: bad mpiexec output:\n{out}")
    say(f"mpi: {mpiexec} -n 2 -> ranks 0,1 of size 2, -genv ok, "
        f"library {lines[0][3]}  [{time.perf_counter()-t0:.1f}s]")


def check_dot() -> None:
    dot = shutil.which("dot")
    if dot is None:
        raise SystemExit("check_env: graphviz 'dot' not found "
                         "(apt-get install graphviz)")
    proc = subprocess.run([dot, "-V"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"check_env: dot -V failed: {proc.stderr}")
    say(f"graphviz: {proc.stderr.strip()}")


def main() -> None:
    check_dot()
    check_opencl()
    check_loopy()
    check_mpi()
    say("check_env: all good")


if __name__ == "__main__":
    main()
