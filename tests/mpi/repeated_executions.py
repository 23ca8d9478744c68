"""Repeated distributed executions through the one call path and the
scheduler's prepared mode, under ``mpiexec -n N python
repeated_executions.py`` (run by tests/test_repeated_executions_mpi.py).

Every rank holds a block of a global vector; blocks travel twice around
the ring. The partition is executed four times with new inputs (NumPy,
then device arrays): every execution equals a serial NumPy evaluation,
results of earlier executions stay intact, the first execution runs the
general hooks and the later ones the steady hooks, and the part programs'
later calls are replays or frozen calls (``replay_counts``). Prints
``OK repeated rank R``."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like.distributed import abort_on_error
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = 1000


def global_x(k: int) -> np.ndarray:
    return np.sin(np.arange(size * N, dtype=np.float64) * 0.01 * (k + 1)) + k


def block(a: np.ndarray, r: int) -> np.ndarray:
    return a[r * N:(r + 1) * N]


def reference(k: int) -> dict[str, np.ndarray]:
    """This rank's results, computed serially for every rank."""
    x = global_x(k)
    y = [2 * block(x, r) + 1 for r in range(size)]
    z = [y[r] * y[(r + 1) % size] for r in range(size)]
    out = [z[r] - z[(r + 1) % size][::-1] for r in range(size)]
    return {"out": out[rank], "s": np.array(z[rank].sum())}


def dag() -> pt.DictOfNamedArrays:
    x = pt.make_placeholder("x", (N,), np.float64)
    y = 2 * x + 1
    y_next = pt.staple_distributed_send(
        y, dest_rank=(rank - 1) % size, comm_tag="y",
        stapled_to=pt.make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag="y", shape=(N,),
            dtype=np.float64))
    z = y * y_next
    z_next = pt.staple_distributed_send(
        z, dest_rank=(rank - 1) % size, comm_tag="z",
        stapled_to=pt.make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag="z", shape=(N,),
            dtype=np.float64))
    out = z - z_next[::-1]
    return pt.make_dict_of_named_arrays({"out": out, "s": pt.sum(z)})


def main() -> None:
    import pyopencl as cl
    import pyopencl.array as cla
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    partition = pt.find_distributed_partition(comm, dag())
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=500)
    prgs = pt.generate_code_for_partition(partition)
    runs = []
    schedulers = []
    for k in range(4):
        x = block(global_x(k), rank)
        if k >= 2:
            x = cla.to_device(queue, x)
        stats: dict = {}
        got = pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args={"x": x}, stats=stats,
            out_host=True)
        schedulers.append(stats["scheduler"])
        assert stats["n_parts_run"] == len(partition.parts), stats
        runs.append(got)
    for k, got in enumerate(runs):
        ref = reference(k)
        assert set(got) == set(ref), sorted(got)
        for name, want in ref.items():
            np.testing.assert_allclose(got[name], want, rtol=1e-12,
                                       err_msg=f"{name} run {k} rank {rank}")
    assert schedulers == ["general", "steady", "steady", "steady"], schedulers
    counts = [p.replay_counts() for p in prgs.values()
              if isinstance(p, BoundPyOpenCLProgram)
              and p.replay_counts()["full"]]
    assert counts, "no loopy part program ran"
    # four executions: every program called four times, the later calls
    # mostly replays or frozen calls
    assert all(sum(c.values()) == 4 for c in counts), counts
    assert sum(c["replayed"] + c["frozen"] for c in counts) >= 2 * len(counts), \
        counts
    print(f"OK repeated rank {rank}", flush=True)


if __name__ == "__main__":
    with abort_on_error():
        main()
