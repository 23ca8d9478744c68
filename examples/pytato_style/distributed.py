#!/usr/bin/env python
"""A distributed-memory pytato program: every rank passes its block to the
rank before it, twice around the ring, through sends and receives in the
lazy DAG. Partitioned, tag-numbered, verified, compiled and executed the
way pytato does it; checked against the same exchange done directly with
mpi4py. Run with ``mpiexec -n 2 python distributed.py`` (any number of
ranks from 2). Exits non-zero on a mismatch."""

import sys

from mpi4py import MPI

import numpy as np

import pyopencl as cl
import pyopencl.array as cl_array

import pytato_like as pt
from pytato_like import (
    execute_distributed_partition,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
)


comm = MPI.COMM_WORLD


def main():
    ctx = cl.create_some_context()
    queue = cl.CommandQueue(ctx)

    rank = comm.Get_rank()
    size = comm.Get_size()
    if size < 2:
        raise RuntimeError("run this example on at least 2 ranks")

    rng = np.random.default_rng(seed=rank)
    x_in = rng.integers(100, size=(4, 4))
    x = pt.make_data_wrapper(cl_array.to_device(queue, x_in))

    tag_x = (main, "x")
    x_next = staple_distributed_send(
        x, dest_rank=(rank - 1) % size, comm_tag=tag_x,
        stapled_to=make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag=tag_x, shape=(4, 4),
            dtype=x_in.dtype))
    y = x + x_next

    tag_y = (main, "y")
    y_next = staple_distributed_send(
        y, dest_rank=(rank - 1) % size, comm_tag=tag_y,
        stapled_to=make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag=tag_y, shape=(4, 4),
            dtype=x_in.dtype))
    z = 2 * y + y_next

    outputs = pt.make_dict_of_named_arrays({"out": z, "y": y})
    distributed_parts = find_distributed_partition(comm, outputs)
    distributed_parts, _ = number_distributed_tags(
        comm, distributed_parts, base_tag=42)
    pt.verify_distributed_partition(comm, distributed_parts)
    prg_per_partition = generate_code_for_partition(distributed_parts)

    context = execute_distributed_partition(
        distributed_parts, prg_per_partition, queue, comm)
    final_out = context["out"].get(queue)
    final_y = context["y"].get(queue)

    # the same exchange, directly with mpi4py
    req = comm.isend(x_in, dest=(rank - 1) % size, tag=7)
    ref_x_next = comm.recv(source=(rank + 1) % size, tag=7)
    req.wait()
    ref_y = x_in + ref_x_next
    req = comm.isend(ref_y, dest=(rank - 1) % size, tag=8)
    ref_y_next = comm.recv(source=(rank + 1) % size, tag=8)
    req.wait()
    ref_out = 2 * ref_y + ref_y_next

    ok = (np.array_equal(final_out, ref_out) and np.array_equal(final_y, ref_y))
    if not ok:
        print(f"rank {rank}: MISMATCH\n{final_out}\nexpected\n{ref_out}")
    all_ok = comm.allreduce(ok, op=MPI.LAND)
    if rank == 0 and all_ok:
        print(f"distributed: results on all {size} ranks match mpi4py")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
