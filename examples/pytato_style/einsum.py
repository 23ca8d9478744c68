#!/usr/bin/env python
"""Einstein summation in pytato's idiom: matrix products, a batched
product, a trace, an outer product and a full contraction, each compiled
with loopy and checked against ``numpy.einsum``. Exits non-zero on a
mismatch."""

import sys

import numpy as np

import pyopencl as cl

import pytato_like as pt


def main():
    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx)
    rng = np.random.default_rng(seed=1)

    a_in = rng.standard_normal((4, 5))
    b_in = rng.standard_normal((5, 3))
    batch_in = rng.standard_normal((2, 4, 4))
    u_in = rng.standard_normal(4)

    a = pt.make_placeholder(name="a", shape=a_in.shape, dtype=a_in.dtype)
    b = pt.make_placeholder(name="b", shape=b_in.shape, dtype=b_in.dtype)
    batch = pt.make_placeholder(name="batch", shape=batch_in.shape,
                                dtype=batch_in.dtype)
    u = pt.make_data_wrapper(u_in)

    # name: (lazy expression, program inputs, NumPy reference)
    cases = {
        "matmul": (pt.einsum("ij,jk->ik", a, b), {"a": a_in, "b": b_in},
                   np.einsum("ij,jk->ik", a_in, b_in)),
        "matmul_operator": (a @ b, {"a": a_in, "b": b_in}, a_in @ b_in),
        "batched": (pt.einsum("bij,bjk->bik", batch, batch),
                    {"batch": batch_in},
                    np.einsum("bij,bjk->bik", batch_in, batch_in)),
        "trace": (pt.einsum("bii->b", batch), {"batch": batch_in},
                  np.einsum("bii->b", batch_in)),
        "outer": (pt.einsum("i,j->ij", u, u), {},
                  np.einsum("i,j->ij", u_in, u_in)),
        "contract_all": (pt.einsum("ij,ij->", a, a), {"a": a_in},
                         np.einsum("ij,ij->", a_in, a_in)),
    }

    failed = []
    for name, (expr, inputs, expected) in cases.items():
        prg = pt.generate_loopy(expr)
        evt, (out,) = prg(queue, **inputs)
        if out.shape != expected.shape or not np.allclose(out, expected):
            print(f"MISMATCH in {name}: got\n{out}\nexpected\n{expected}")
            failed.append(name)

    if failed:
        return 1
    print(f"einsum: {len(cases)} contractions match numpy.einsum")
    return 0


if __name__ == "__main__":
    sys.exit(main())
