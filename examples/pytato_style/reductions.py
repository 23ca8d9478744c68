#!/usr/bin/env python
"""Reductions in pytato's idiom: sums, products, extrema and means over
all axes or chosen ones, compiled with loopy and checked against NumPy.
Exits non-zero on a mismatch."""

import sys

import numpy as np

import pyopencl as cl

import pytato_like as pt


def main():
    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx)
    rng = np.random.default_rng(seed=2)

    x_in = rng.uniform(0.5, 1.5, size=(3, 4, 5))
    x = pt.make_placeholder(name="x", shape=x_in.shape, dtype=x_in.dtype)

    results = pt.make_dict_of_named_arrays({
        "sum_all": pt.sum(x),
        "sum_axis1": pt.sum(x, axis=1),
        "prod_axes02": pt.prod(x, axis=(0, 2)),
        "amax_last": pt.amax(x, axis=-1),
        "amin_first": pt.amin(x, axis=0),
        "mean_axis2": pt.mean(x, axis=2),
        # a reduction feeding elementwise work feeding a reduction
        "norm_rows": pt.sqrt(pt.sum(x * x, axis=2)) / pt.amax(x),
    })
    expected = {
        "sum_all": np.sum(x_in),
        "sum_axis1": np.sum(x_in, axis=1),
        "prod_axes02": np.prod(x_in, axis=(0, 2)),
        "amax_last": np.amax(x_in, axis=-1),
        "amin_first": np.amin(x_in, axis=0),
        "mean_axis2": np.mean(x_in, axis=2),
        "norm_rows": np.sqrt(np.sum(x_in * x_in, axis=2)) / np.amax(x_in),
    }

    prg = pt.generate_loopy(results)
    evt, out = prg(queue, x=x_in)

    failed = [name for name, ref in expected.items()
              if np.shape(out[name]) != np.shape(ref)
              or not np.allclose(out[name], ref)]
    for name in failed:
        print(f"MISMATCH in {name}: got\n{out[name]}\nexpected\n{expected[name]}")

    # the same with one program per reduction, as (out,) tuples
    for name in ("sum_all", "amax_last"):
        evt, (single,) = pt.generate_loopy(results[name].expr)(queue, x=x_in)
        if not np.allclose(single, expected[name]):
            print(f"MISMATCH in single-result {name}: {single}")
            failed.append(name)

    if failed:
        return 1
    print(f"reductions: {len(expected)} reductions match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
