"""The 1-D heat program on one rank of a periodic domain, sending its
boundary cells to itself (it is both its neighbours), as the overlap tests
build it; its NumPy reference; and its run through the numpy target on the
one-rank stand-in communicator."""

from __future__ import annotations

import numpy as np

import pytato_like as pt
from pytato_like.distributed import (
    execute_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
)

#: the Courant number of the steps
C = 0.25


def periodic_heat(n: int, steps: int, fields: int = 1):
    """*steps* heat steps of *fields* fields ``u0``, ``u1``, ... of *n*
    cells, written as a user writes them: each step sends its first and
    last cell and receives the ghost cells."""
    outputs = {}
    for f in range(fields):
        u = pt.make_placeholder(f"u{f}", (n,))
        for k in range(steps):
            u = staple_distributed_send(u[:1], 0, ("left", f, k), u)
            u = staple_distributed_send(u[-1:], 0, ("right", f, k), u)
            ghost_l = make_distributed_recv(0, ("right", f, k), (1,))
            ghost_r = make_distributed_recv(0, ("left", f, k), (1,))
            ext = pt.concatenate([ghost_l, u, ghost_r])
            u = u + C * (ext[:-2] - 2 * u + ext[2:])
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def placeholder_heat(n: int, steps: int, send_first_cell: bool = False):
    """Heat steps on *n* cells whose halos are placeholders ``gl<k>`` /
    ``gr<k>`` of time ``k + 1`` (standing for the receives of step *k*),
    each step sending its first cell (to rank 0) if *send_first_cell*:
    ``({"u": result}, {placeholder name: time})``."""
    u = pt.make_placeholder("u", (n,))
    times = {}
    for k in range(steps):
        gl = pt.make_placeholder(f"gl{k}", (1,))
        gr = pt.make_placeholder(f"gr{k}", (1,))
        times[gl.name] = times[gr.name] = k + 1
        ext = pt.concatenate([gl, u, gr])
        u = u + C * (ext[:-2] - 2 * u + ext[2:])
        if send_first_cell:
            u = staple_distributed_send(u[:1], 0, ("first", k), u)
    return {"u": u}, times


def numpy_heat(u: np.ndarray, steps: int) -> np.ndarray:
    """The same steps in NumPy (periodic through ``np.roll``)."""
    for _ in range(steps):
        u = u + C * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def run_on_one_rank(partition, inputs):
    """*partition* run by the numpy target on the one-rank stand-in."""
    partition, _ = number_distributed_tags(None, partition, 7)
    prgs = generate_code_for_partition(partition, target="numpy")
    return execute_distributed_partition(partition, prgs, None, None,
                                         input_args=inputs)
