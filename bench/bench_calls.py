"""Compile time of outlined function calls against the same DAG inlined.

The function: a 28-node update (plus its 3 parameters) of three fields
(``u, v, w`` of 4 096 float64 each), elementwise with
``sin``/``exp``/``sqrt``, as a flux or source term is. The DAG applies it
``N`` times in a row (a time loop, ``N`` = 1 000 by default) through
:func:`pytato_like.trace_call`; the inlined DAG is
``inline_calls(tag_all_calls_to_be_inlined(...))`` of it.

For each, in a fresh process with empty caches (a private
``PYTATO_LIKE_CACHE_DIR``, PoCL's kernel cache off): the time from
:func:`~pytato_like.generate_loopy` to the result on the host, then the
time of a later run. The ratio of the two compile times is the figure of
merit (target: calls at least 5x faster to compile); both results are
checked against the NumPy target on the outlined DAG.

Run: ``.venv/bin/python -m bench.bench_calls [--calls 1000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_SCRIPT = r"""
import json, sys, time
import numpy as np
import pyopencl as cl
import pytato_like as pt
from bench.bench_calls import build
n_calls, inline = int(sys.argv[1]), sys.argv[2] == "1"
out, inputs = build(n_calls, inline)
queue = cl.CommandQueue(cl.create_some_context(interactive=False))
t0 = time.perf_counter()
prg = pt.generate_loopy(out)
t1 = time.perf_counter()
_, result = prg(queue, **inputs)
t2 = time.perf_counter()
_, result = prg(queue, **inputs)
queue.finish()
t3 = time.perf_counter()
np.savez(sys.argv[3], **result)
print(json.dumps({"generate_s": t1 - t0, "first_result_s": t2 - t0,
                  "later_run_s": t3 - t2}))
"""


def body(u, v, w):
    """28 array nodes: one update of three fields, contractive (so
    1 000 steps amplify no rounding difference between targets)."""
    import pytato_like as pt
    a = u * v - 0.5 * w
    b = pt.sin(a) + 0.1 * u
    c = pt.exp(-b * b) * v
    d = pt.sqrt(1.0 + c * c)
    u2 = 0.9 * u + 0.05 * (b - d)
    v2 = 0.9 * v + 0.05 * pt.sin(c * a - w)
    w2 = 0.9 * w + 0.05 * pt.sin(d - u)
    return u2, v2, w2


def build(n_calls: int, inline: bool):
    import numpy as np

    import pytato_like as pt
    n = 4096
    fields = [pt.make_placeholder(name, (n,), np.float64) for name in "uvw"]
    for _ in range(n_calls):
        fields = list(pt.trace_call(body, *fields))
    out = pt.make_dict_of_named_arrays(dict(zip("uvw", fields, strict=True)))
    if inline:
        out = pt.inline_calls(pt.tag_all_calls_to_be_inlined(out))
    rng = np.random.default_rng(0)
    inputs = {name: rng.uniform(0.5, 1.0, n) for name in "uvw"}
    return out, inputs


def _run(n_calls: int, inline: bool, workdir: str) -> dict:
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=os.path.join(
        workdir, "inline" if inline else "calls"), POCL_KERNEL_CACHE="0")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    npz = os.path.join(workdir, f"result_{int(inline)}.npz")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(n_calls), "1" if inline else "0",
         npz], env=env, cwd=here, capture_output=True, text=True,
        timeout=3600, check=False)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["npz"] = npz
    return figures


def main(argv=None) -> dict:
    import numpy as np
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args(argv)

    import pytato_like as pt
    out, inputs = build(args.calls, inline=False)
    ref = pt.generate_numpy(out)(**inputs)
    with tempfile.TemporaryDirectory() as workdir:
        calls = _run(args.calls, False, workdir)
        inlined = _run(args.calls, True, workdir)
        for figures in (calls, inlined):
            got = np.load(figures.pop("npz"))
            for name in "uvw":
                np.testing.assert_allclose(got[name], ref[name], rtol=1e-10)
    ratio = inlined["first_result_s"] / calls["first_result_s"]
    print(f"{args.calls} calls of a 28-node function (fields of 4096 float64),"
          " cold caches")
    print(f"{'':<10}{'generate s':>12}{'first result s':>16}{'later run ms':>14}")
    for name, f in (("calls", calls), ("inlined", inlined)):
        print(f"{name:<10}{f['generate_s']:12.2f}{f['first_result_s']:16.2f}"
              f"{f['later_run_s'] * 1e3:14.1f}")
    print(f"compile-time ratio inlined / calls: {ratio:.1f}x (target >= 5x); "
          "results match the NumPy target")
    return {"calls": calls, "inlined": inlined, "ratio": ratio}


if __name__ == "__main__":
    main()
