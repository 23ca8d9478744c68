#!/usr/bin/env python
"""A first pytato program, written as a pytato user writes it: build a lazy
expression from placeholders, generate an OpenCL program with loopy, run it
on a queue and compare with NumPy. Exits non-zero on a mismatch."""

import sys

import numpy as np

import pyopencl as cl

import pytato_like as pt


def main():
    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx)
    rng = np.random.default_rng(seed=0)

    n = 6
    a = pt.make_placeholder(name="a", shape=(n, n), dtype=np.float64)
    b = pt.make_placeholder(name="b", shape=(n, n), dtype=np.float64)
    v = pt.make_data_wrapper(np.linspace(0, 1, n))

    # lazy: nothing runs until the generated program is called
    result = pt.sin(a) * 2 + b.T - v
    result = pt.where(result > 0, result, 0.5 * result)

    a_in = rng.standard_normal((n, n))
    b_in = rng.standard_normal((n, n))

    prg = pt.generate_loopy(result)
    evt, (out,) = prg(queue, a=a_in, b=b_in)
    evt.wait()

    expected = np.sin(a_in) * 2 + b_in.T - np.linspace(0, 1, n)
    expected = np.where(expected > 0, expected, 0.5 * expected)

    # several results at once: a dict of named arrays gives a dict back
    prg_many = pt.generate_loopy(pt.make_dict_of_named_arrays({
        "scaled": 3 * a,
        "shifted": a[1:, :2] + 1,
    }))
    evt, outputs = prg_many(queue, a=a_in)

    ok = True
    for name, got, ref in [("result", out, expected),
                           ("scaled", outputs["scaled"], 3 * a_in),
                           ("shifted", outputs["shifted"], a_in[1:, :2] + 1)]:
        if not np.allclose(got, ref):
            print(f"MISMATCH in {name}:\n{got}\nexpected\n{ref}")
            ok = False
    if not ok:
        return 1
    print("demo: all results match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
