"""Lazy part programs under ``mpiexec -n 2``: ``python codegen_overlap.py
CASE`` (see tests/test_codegen_overlap.py).

The computation is a ping-pong: rank 0 computes ``y`` from its input and
sends it; rank 1 computes ``z`` from ``y`` and sends it back; rank 0
computes ``u`` from ``z`` and sends it; rank 1's result needs ``u``. So
every part of rank 1 waits for a message, while rank 0's first part runs
at once. In the ``lazy`` case rank 0 generates its code (inside the
execution, after the first execution's header exchange) only once rank 1
has built its kernels (rank 1 tells it on a second communicator from
inside the build), so rank 1 certainly generates and builds while it
waits for ``y`` (no time is involved).

Cases (each rank prints ``OK <case> rank <r>`` when its checks pass):

``lazy``
    default code generation (lazy for a distributed partition): results
    equal NumPy; rank 1 generated the code of every part while it waited
    for ``y`` (its ``codegen`` trace records and the ``build`` record end
    before ``y`` arrived and before its first part started) and built all
    its kernels in one OpenCL build; rank 0, whose first part runs at
    once, generated every part before its first part started, also one
    build.
``eager``
    ``lazy=False``: the same results, no ``codegen`` records, one build.
``fail``
    rank 1's second part fails in code generation: rank 1 raises the
    typed error from the execution, rank 0 a RemoteRankError.
"""

from __future__ import annotations

import sys

import numpy as np
import pyopencl as cl
from mpi4py import MPI

import pytato_like as pt
from pytato_like import opencl_build
from pytato_like import diagnostic
from pytato_like.distributed import (
    execute_distributed_partition,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
    verify_distributed_partition,
)
from pytato_like.runtime.trace import TraceRecorder
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.lazy import LazyPartProgram

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
N = 16
X = np.linspace(0.0, 1.0, N)


def dag():
    if rank == 0:
        x = pt.make_placeholder("x", (N,))
        y = pt.sin(x) * 2.0
        z = make_distributed_recv(1, "z", (N,))
        u = pt.cos(z) + z * 3.0
        held = staple_distributed_send(u, 1, "u", u + 1.0)
        return {"r": staple_distributed_send(y, 1, "y", held)}
    y = make_distributed_recv(0, "y", (N,))
    z = pt.exp(y * 0.5) + y
    held = staple_distributed_send(z, 0, "z", z)
    u = make_distributed_recv(0, "u", (N,))
    return {"r": u * y - held}


def expected():
    y = np.sin(X) * 2.0
    z = np.exp(y * 0.5) + y
    u = np.cos(z) + z * 3.0
    return u + 1.0 if rank == 0 else u * y - z


def main(case: str) -> int:
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    partition = find_distributed_partition(comm, pt.make_dict_of_named_arrays(dag()))
    partition, _ = number_distributed_tags(comm, partition, base_tag=300)
    verify_distributed_partition(comm, partition)
    builds = opencl_build.OPENCL_BUILDS
    prgs = generate_code_for_partition(partition,
                                       lazy=False if case == "eager" else None)
    lazy = case != "eager"
    assert all(isinstance(p, LazyPartProgram if lazy else BoundPyOpenCLProgram)
               for p in prgs.values()), prgs
    # the executor treats a lazy program as loopy's
    assert all(isinstance(p, BoundPyOpenCLProgram) for p in prgs.values())
    if case == "fail" and rank == 1:
        second = partition.toposorted_part_ids[-1]

        def failing(outputs):
            raise diagnostic.DTypeError(f"injected failure of part {second}")
        prgs[second]._lazy_make = failing
    side = comm.Dup()
    if case == "lazy":
        if rank == 1:
            build_pending = opencl_build.build_pending

            def build_and_tell(ctx):
                build_pending(ctx)
                side.send("built", dest=0)
            opencl_build.build_pending = build_and_tell
        else:
            first = prgs[partition.toposorted_part_ids[0]]
            make = first._lazy_make

            def make_when_told(outputs):
                assert side.recv(source=1) == "built"
                return make(outputs)
            first._lazy_make = make_when_told
    recorder = TraceRecorder(rank)
    try:
        result = execute_distributed_partition(
            partition, prgs, queue, comm, input_args={"x": X} if rank == 0 else {},
            recorder=recorder)
    except (diagnostic.DTypeError, diagnostic.RemoteRankError) as exc:
        if case != "fail":
            raise
        want = diagnostic.DTypeError if rank == 1 else diagnostic.RemoteRankError
        assert isinstance(exc, want), (rank, repr(exc))
        print(f"OK fail rank {rank}: {type(exc).__name__}", flush=True)
        return 0
    assert case != "fail", "the injected failure was not raised"
    # NumPy inputs: NumPy results (the out_host rule)
    assert isinstance(result["r"], np.ndarray), type(result["r"])
    np.testing.assert_allclose(result["r"], expected(), rtol=1e-12,
                               err_msg=f"rank {rank}")
    assert opencl_build.OPENCL_BUILDS - builds == 1, (rank, opencl_build.OPENCL_BUILDS - builds)
    # every program is the generated one now
    assert all(type(p) is not LazyPartProgram for p in prgs.values())
    records = recorder.records
    codegen = [r for r in records if r.kind == "codegen"]
    parts = [r for r in records if r.kind == "part"]
    first_part = min(r.started_ns for r in parts)
    if not lazy:
        assert not codegen, codegen
    else:
        assert sorted(r.part_id for r in codegen) == sorted(prgs), codegen
        assert all(r.completed_ns <= first_part for r in codegen)
        if rank == 1:
            y_arrived = min(r.completed_ns for r in records
                            if r.kind == "recv" and r.peer == 0)
            builds_done = [r for r in records if r.kind == "build"]
            assert len(builds_done) == 1, builds_done
            for r in [*codegen, *builds_done]:
                # during the wait for y: after the rank began waiting and
                # before y was there
                assert r.completed_ns <= y_arrived, (r, y_arrived)
    print(f"OK {case} rank {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
