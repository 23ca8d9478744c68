"""The split decision of ``find_distributed_partition`` (default
``split_interior="auto"``) on real ranks: ``mpiexec -n 2 python
overlap_decision.py CASE... [--target numpy|loopy]``.

Cases: ``stencil`` (the heat steps of ``bench_distributed``, 10^5 cells per
rank, 2 fields, 4 steps), ``tiny`` (the same with 10 cells per rank) and
``mesh`` (the DG-style mesh of ``bench_distributed_mesh``, 10^4 elements
per rank: faces gathered by index arrays; ``mesh_bf`` the same written
with its boundary elements first). Every rank partitions with the
default and checks its results against serial NumPy on the whole domain;
rank 0 prints ``DECISION <case> <rank> <0|1> <reason>`` for every rank;
any failure aborts the job.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import distributed_heat as heat  # noqa: E402

import pytato_like as pt  # noqa: E402
from pytato_like.distributed import abort_on_error  # noqa: E402
from bench import bench_distributed_mesh as mesh_bench  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def run(dag, inputs: dict, target: str) -> tuple[dict, object]:
    partition = pt.find_distributed_partition(comm, dag)
    decision = partition.overlap_decision
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=500)
    pt.verify_distributed_partition(comm, partition)
    prgs = pt.generate_code_for_partition(partition, target=target)
    if target == "loopy":
        import pyopencl as cl
        queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    else:
        queue = None
    out = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                           input_args=inputs)
    return {name: (value.get() if hasattr(value, "get") else
                   np.asarray(value)) for name, value in out.items()}, decision


def case_heat(n_local: int, target: str):
    n_fields, n_steps = 2, 4
    n_total = n_local * size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    whole = {f"u{f}": heat.initial_field(n_total, f) for f in range(n_fields)}
    dag = heat.build_heat_dag(rank, size, n_local, n_fields, n_steps)
    got, decision = run(dag, {k: v[mine] for k, v in whole.items()}, target)
    for key, value in whole.items():
        expected = heat.serial_heat(value, n_steps)[mine]
        np.testing.assert_allclose(got[key], expected, rtol=1e-13,
                                   atol=1e-13)
    return decision


def case_mesh(target: str, boundary_first: bool = False):
    e_local = 10_000
    nb = mesh_bench.global_mesh(e_local, size)
    mesh = mesh_bench.rank_mesh(nb, rank, size, e_local)
    order = np.arange(e_local)
    if boundary_first:
        mesh = mesh_bench.boundary_first(mesh, e_local)
        order = mesh["order"]
        dag = mesh_bench.mesh_dag_boundary_first(mesh, e_local,
                                                 mesh_bench.STEPS)
    else:
        dag = mesh_bench.mesh_dag(mesh, e_local, mesh_bench.STEPS)
    whole = mesh_bench.initial_state(e_local * size)
    got, decision = run(dag, {"u": whole[rank * e_local:(rank + 1)
                                         * e_local][order]}, target)
    mine = np.empty_like(got["u"])
    mine[order] = got["u"]  # (back in the mesh's own numbering)
    gathered = comm.gather(mine, root=0)
    if rank == 0:
        expected = mesh_bench.numpy_steps(whole, nb, mesh_bench.STEPS)
        error = (np.max(np.abs(np.concatenate(gathered) - expected))
                 / np.max(np.abs(expected)))
        assert error < 1e-12, error
    return decision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+",
                        choices=["stencil", "tiny", "mesh", "mesh_bf"])
    parser.add_argument("--target", default="numpy")
    args = parser.parse_args()
    with abort_on_error(comm):
        for case in args.cases:
            if case == "stencil":
                decision = case_heat(100_000, args.target)
            elif case == "tiny":
                decision = case_heat(10, args.target)
            else:
                decision = case_mesh(args.target, case == "mesh_bf")
            # rank 0 prints every rank's line: lines that two ranks write
            # at once can reach mpiexec's output interleaved
            lines = comm.gather(f"DECISION {case} {rank} "
                                f"{int(decision.split)} {decision.reason}",
                                root=0)
            if rank == 0:
                print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
