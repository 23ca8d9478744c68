"""Import time: ``import pytato_like`` in fresh Python processes.

Each sample is a new interpreter that times ``import pytato_like`` with
``time.perf_counter`` (interpreter start-up excluded) and reports which of
the heavy dependencies the import loaded (loopy, pyopencl, islpy, mpi4py,
graphviz: all should stay out until first used). Bytecode is compiled once
into a private ``PYTHONPYCACHEPREFIX`` before the samples, as an installed
wheel has it compiled, so the figure does not depend on whether the
checkout's ``__pycache__`` is writable or ``PYTHONDONTWRITEBYTECODE`` is set.

For comparison it also times the floor: importing only the third-party
modules the front end needs (numpy, pymbolic, pytools, constantdict), and
the first use of the loopy target (``pt.generate_loopy`` attribute access
plus ``import loopy``), which is what the lazy imports defer.

Run: ``python -m bench.bench_import [--repeat 15]``; figures are medians.
The issue's target: ``import pytato_like`` <= 0.4 s on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HEAVY = ("loopy", "pyopencl", "islpy", "mpi4py", "graphviz")

_SNIPPETS = {
    "import pytato_like": "import pytato_like",
    "floor (numpy, pymbolic, pytools, constantdict)":
        "import numpy, pymbolic.primitives, pytools.tag, constantdict",
    "import pytato_like, then loopy target":
        "import pytato_like as pt; pt.generate_loopy; import loopy",
}

_TIMER = r"""
import json, sys, time
t0 = time.perf_counter()
exec(sys.argv[1])
elapsed = time.perf_counter() - t0
heavy = [m for m in sys.argv[2].split(",") if m in sys.modules]
print(json.dumps({"seconds": elapsed, "heavy": heavy}))
"""


def _sample(code: str, env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _TIMER, code, ",".join(HEAVY)],
        env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="pytato_like_import_") as pyc:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pyc
        for code in _SNIPPETS.values():  # compile bytecode, warm the disk
            _sample(code, env)
        print(f"median of {args.repeat} fresh processes "
              f"(load average {os.getloadavg()[0]:.2f})")
        for label, code in _SNIPPETS.items():
            samples = [_sample(code, env) for _ in range(args.repeat)]
            seconds = [s["seconds"] for s in samples]
            heavy = sorted({m for s in samples for m in s["heavy"]})
            print(f"  {label:50s} {statistics.median(seconds):6.3f} s "
                  f"(min {min(seconds):.3f})  heavy modules loaded: "
                  f"{', '.join(heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
