"""Kernels compiled ahead once across the ranks of a node: ``mpiexec -n N
python shared_precompile.py`` (see tests/test_kernel_precompile.py).

Every rank builds the demo's periodic heat DAG on an equal share of the
domain (examples/distributed_heat.py): the ranks' parts are alike, so they
build one OpenCL program text. The ranks run the first execution with one
empty disk cache (the test's ``PYTATO_LIKE_CACHE_DIR``, which holds PoCL's
folder): each kernel's work-group function is compiled ahead by one rank
and loaded from PoCL's folder by the others. Rank 0 prints ``OK precompile
rank <r>`` for each rank whose results equal serial NumPy (a rank whose do
not fails the run) and ``KERNELS <json>``: the kernels of the program and
the ones each rank compiled ahead.
"""

from __future__ import annotations

import json

from mpi4py import MPI

from _alike_heat import first_execution
from pytato_like import kernel_precompile
from pytato_like.distributed import abort_on_error

N_LOCAL, N_FIELDS, N_STEPS, HALO = 600, 2, 12, 6


def main() -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    first_execution(comm, N_LOCAL, N_FIELDS, N_STEPS, HALO)
    assert kernel_precompile.wait_for_precompiles(120)
    names = sorted({launch.name
                    for _, launches in kernel_precompile._STARTED.values()
                    for launch in launches})
    # rank 0 prints every line: lines of two ranks printed at once can
    # reach mpiexec's output glued together
    everyone = comm.gather((rank, names, kernel_precompile.DRY_LAUNCHED),
                           root=0)
    if rank == 0:
        for r, _, _ in everyone:
            print(f"OK precompile rank {r}")
        all_names = sorted({n for _, ns, _ in everyone for n in ns})
        print("KERNELS " + json.dumps({
            "names": all_names,
            "compiled": [compiled for _, _, compiled in everyone]}),
            flush=True)


if __name__ == "__main__":
    with abort_on_error(MPI.COMM_WORLD):
        main()
