"""The first execution of the demo's heat DAG on alike ranks, checked
against serial NumPy: what the scripts of alike parts across ranks
(shared_codegen.py, shared_precompile.py) run before they report.

Every rank builds the periodic heat DAG of examples/distributed_heat.py on
an equal share of the domain, so the ranks' parts are alike (the same
plans, the same kernels), and runs its first execution with the disk
cache of the environment (the test's ``PYTATO_LIKE_CACHE_DIR``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import pytato_like as pt  # noqa: E402
from distributed_heat import build_heat_dag, initial_field, serial_heat  # noqa: E402


def alike_parts(comm, n_local: int, n_fields: int, n_steps: int, halo: int):
    """``(partition, part programs, this rank's slice of the domain, the
    domain's size)``: the heat DAG of this rank, partitioned, numbered and
    verified, its part programs not generated yet."""
    rank, size = comm.Get_rank(), comm.Get_size()
    n_total = n_local * size
    mine = slice(rank * n_local, (rank + 1) * n_local)
    dag = build_heat_dag(rank, size, n_local, n_fields, n_steps, halo=halo)
    partition = pt.find_distributed_partition(comm, dag)
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=100)
    pt.verify_distributed_partition(comm, partition)
    return partition, pt.generate_code_for_partition(partition), mine, n_total


def first_execution(comm, n_local: int, n_fields: int, n_steps: int,
                    halo: int) -> dict:
    """The part programs of this rank after the first execution, whose
    results equal serial NumPy's (asserted)."""
    partition, prgs, mine, n_total = alike_parts(comm, n_local, n_fields,
                                                 n_steps, halo)
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    inputs = {f"u{f}": initial_field(n_total, f)[mine] for f in range(n_fields)}
    result = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                              input_args=inputs)
    for f in range(n_fields):
        got = result[f"u{f}"]
        got = got.get() if hasattr(got, "queue") else np.asarray(got)
        want = serial_heat(initial_field(n_total, f), n_steps)[mine]
        assert np.array_equal(got, want), (comm.Get_rank(), f,
                                           np.abs(got - want).max())
    return prgs
