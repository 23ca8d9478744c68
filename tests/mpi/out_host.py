"""Where distributed results live (issue 34, item 6), under ``mpiexec -n N
python out_host.py``.

Every rank holds a block of a global vector (a NumPy input argument) and a
block of weights (a data wrapper); blocks travel twice around the ring
through sends and receives in the DAG. The results are compared with a
serial NumPy evaluation of the global computation, and their kind checked
against loopy's ``out_host`` rule as pytato's bound programs apply it:

* ``host``: NumPy inputs and NumPy data -> NumPy results (three executions,
  the later ones through the steady loop; earlier results stay intact),
  and the asynchronous handle gives the same;
* ``device``: device inputs and device data -> device results;
* ``mixed``: NumPy inputs, device data -> device results;
* ``forced``: ``out_host=False`` / ``True`` override the rule;
* ``numpy_parts``: NumPy part programs (no queue) -> NumPy results.

A rank prints ``OK <case> rank <r>`` per passing case; a failure aborts
the whole job.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like.distributed import abort_on_error

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = 6


def global_x(k: int = 0) -> np.ndarray:
    return np.arange(size * N, dtype=np.float64) * 0.5 + k


def global_w() -> np.ndarray:
    return np.linspace(1.0, 2.0, size * N)


def block(a: np.ndarray, r: int) -> np.ndarray:
    return a[r * N:(r + 1) * N]


def reference(k: int = 0) -> dict[str, np.ndarray]:
    """Every rank's results, computed serially."""
    x, w = global_x(k), global_w()
    y = [block(x, r) * block(w, r) for r in range(size)]
    z = [2 * y[r] + y[(r + 1) % size] for r in range(size)]
    out = [z[r] - z[(r + 1) % size][::-1] for r in range(size)]
    return {"out": out[rank], "y": y[rank], "flag": out[rank] > 0}


def dag(weights: object) -> pt.DictOfNamedArrays:
    x = pt.make_placeholder("x", (N,), np.float64)
    w = pt.make_data_wrapper(weights)
    y = x * w
    y_next = pt.staple_distributed_send(
        y, dest_rank=(rank - 1) % size, comm_tag="y",
        stapled_to=pt.make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag="y", shape=(N,),
            dtype=np.float64))
    z = 2 * y + y_next
    z_next = pt.staple_distributed_send(
        z, dest_rank=(rank - 1) % size, comm_tag="z",
        stapled_to=pt.make_distributed_recv(
            src_rank=(rank + 1) % size, comm_tag="z", shape=(N,),
            dtype=np.float64))
    out = z - z_next[::-1]
    return pt.make_dict_of_named_arrays({"out": out, "y": y, "flag": out > 0})


def prepare(weights: object, target: str = "loopy"):
    partition = pt.find_distributed_partition(comm, dag(weights))
    partition, _ = pt.number_distributed_tags(comm, partition, base_tag=300)
    pt.verify_distributed_partition(comm, partition)
    return partition, pt.generate_code_for_partition(partition, target=target)


def check(case: str, got: dict, on_host: bool, k: int = 0) -> None:
    import pyopencl.array as cla
    ref = reference(k)
    assert set(got) == set(ref), (case, sorted(got))
    for name, want in ref.items():
        value = got[name]
        if on_host:
            assert isinstance(value, np.ndarray), (case, name, type(value))
        else:
            assert isinstance(value, cla.Array), (case, name, type(value))
            value = value.get()
        assert value.dtype == want.dtype, (case, name, value.dtype)
        np.testing.assert_allclose(value, want, rtol=1e-14,
                                   err_msg=f"{case} {name} rank {rank}")


def main() -> None:
    import pyopencl as cl
    import pyopencl.array as cla
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    w_host = block(global_w(), rank)
    cases = sys.argv[1:] or ["host", "device", "mixed", "forced",
                             "numpy_parts"]

    if "host" in cases:
        partition, prgs = prepare(w_host)
        runs = []
        for k in range(3):
            got = pt.execute_distributed_partition(
                partition, prgs, queue, comm,
                input_args={"x": block(global_x(k), rank)})
            check("host", got, on_host=True, k=k)
            runs.append(got)
        # results of earlier executions are not overwritten by later ones
        for k, got in enumerate(runs):
            check("host", got, on_host=True, k=k)
        handle = pt.execute_distributed_partition_async(
            partition, prgs, queue, comm,
            input_args={"x": block(global_x(5), rank)})
        check("host", handle.wait(), on_host=True, k=5)
        print(f"OK host rank {rank}", flush=True)

    if "device" in cases:
        partition, prgs = prepare(cla.to_device(queue, w_host))
        got = pt.execute_distributed_partition(
            partition, prgs, queue, comm,
            input_args={"x": cla.to_device(queue, block(global_x(), rank))})
        check("device", got, on_host=False)
        print(f"OK device rank {rank}", flush=True)

    if "mixed" in cases:
        partition, prgs = prepare(cla.to_device(queue, w_host))
        got = pt.execute_distributed_partition(
            partition, prgs, queue, comm,
            input_args={"x": block(global_x(), rank)})
        check("mixed", got, on_host=False)
        print(f"OK mixed rank {rank}", flush=True)

    if "forced" in cases:
        partition, prgs = prepare(w_host)
        got = pt.execute_distributed_partition(
            partition, prgs, queue, comm, out_host=False,
            input_args={"x": block(global_x(), rank)})
        check("forced", got, on_host=False)
        got = pt.execute_distributed_partition(
            partition, prgs, queue, comm, out_host=True,
            input_args={"x": cla.to_device(queue, block(global_x(), rank))})
        check("forced", got, on_host=True)
        print(f"OK forced rank {rank}", flush=True)

    if "numpy_parts" in cases:
        partition, prgs = prepare(w_host, target="numpy")
        got = pt.execute_distributed_partition(
            partition, prgs, None, comm,
            input_args={"x": block(global_x(), rank)})
        check("numpy_parts", got, on_host=True)
        print(f"OK numpy_parts rank {rank}", flush=True)


if __name__ == "__main__":
    with abort_on_error(comm):
        main()
