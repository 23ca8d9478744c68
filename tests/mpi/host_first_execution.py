"""The first execution of part programs not compiled before, on the host
while they compile: ``mpiexec -n N python host_first_execution.py
[--budget SECONDS]`` (see tests/test_host_first_call.py).

Every rank builds the demo's periodic heat DAG (examples/distributed_heat.py)
on its share of the domain (``_alike_heat.alike_parts``), with device inputs, and runs three executions
with the test's empty disk cache. Each rank checks every execution's
results against serial NumPy, and reports how its part programs' calls
ran (``replay_counts``) after the first and after the second execution;
rank 0 prints ``COUNTS <json>`` (per rank: the parts' host calls after the
first execution, their compiled calls after the second, whether every
part program was compiled then) and ``OK host-first rank <r>`` per rank.
``--budget`` replaces the host evaluation's budget
(:data:`~pytato_like.target.loopy.host_first_call.HOST_BUDGET_S`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import pytato_like as pt  # noqa: E402
from _alike_heat import alike_parts  # noqa: E402
from distributed_heat import initial_field, serial_heat  # noqa: E402
from pytato_like.distributed import abort_on_error  # noqa: E402
from pytato_like.target.loopy import host_first_call  # noqa: E402

N_LOCAL, N_FIELDS, N_STEPS, HALO = 500, 2, 12, 4


def _counts(prgs) -> dict:
    total = {"host": 0, "full": 0, "replayed": 0, "frozen": 0}
    for prg in prgs.values():
        for kind, n in prg.replay_counts().items():
            total[kind] += n
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=None)
    args = parser.parse_args()
    if args.budget is not None:
        host_first_call.HOST_BUDGET_S = args.budget
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    partition, prgs, mine, n_total = alike_parts(comm, N_LOCAL, N_FIELDS,
                                                 N_STEPS, HALO)
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    inputs = {f"u{f}": cla.to_device(queue, initial_field(n_total, f)[mine])
              for f in range(N_FIELDS)}
    expected = {f"u{f}": serial_heat(initial_field(n_total, f), N_STEPS)[mine]
                for f in range(N_FIELDS)}
    seen = []
    for _ in range(3):
        result = pt.execute_distributed_partition(partition, prgs, queue, comm,
                                                  input_args=inputs)
        for name, want in expected.items():
            got = result[name]
            # device inputs: device results, whichever way the parts ran
            assert isinstance(got, cla.Array), (rank, name, type(got))
            np.testing.assert_allclose(got.get(), want, rtol=1e-13,
                                       atol=1e-13, err_msg=f"rank {rank}")
        seen.append(_counts(prgs))
    report = {"host_first": seen[0]["host"],
              "full_first": seen[0]["full"],
              "host_later": seen[2]["host"] - seen[0]["host"],
              "compiled_second": seen[1]["full"] + seen[1]["replayed"]
              + seen[1]["frozen"] - seen[0]["full"],
              "compiled": all(prg.compiled() for prg in prgs.values()),
              "parts": len(partition.parts)}
    everyone = comm.gather(report, root=0)
    if rank == 0:
        print("COUNTS " + json.dumps(everyone), flush=True)
        for r in range(size):
            print(f"OK host-first rank {r}", flush=True)


if __name__ == "__main__":
    with abort_on_error(MPI.COMM_WORLD):
        main()
