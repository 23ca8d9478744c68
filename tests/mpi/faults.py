"""Fault cases run under ``mpiexec -n 2``: ``python faults.py CASE``.

Each case is a user mistake or an early exit, made *without*
:func:`~pytato_like.verify_distributed_partition`; the tests in
``tests/test_distributed_mpi.py`` check that every rank ends within a bound
with a typed error naming the ranks involved, instead of hanging or
delivering garbage. A rank prints ``rank R <ErrorClass>: <message>`` when
it catches the expected error and exits with status 3.

Cases:

``shape_mismatch``
    rank 1 receives ``(3,)`` where rank 0 sends ``(1,)``.
``dtype_mismatch``
    rank 0 sends int64, rank 1 receives float64 of the same shape.
``duplicate_tag``
    rank 0 sends twice to rank 1 with the same tag.
``negative_tag``
    ``number_distributed_tags(..., base_tag=-5)``.
``exit_early`` / ``exit_early_abort`` / ``raise_early`` / ``end_early``
    rank 1 leaves (``sys.exit(0)`` outside / inside ``abort_on_error``,
    an uncaught exception, the end of its program) after partitioning
    while rank 0 executes (and waits for it in the first execution's
    header exchange).
``exit_late``
    both ranks execute once (checked against NumPy); then rank 1 leaves
    while rank 0 executes again and waits for its data.
``dropped_handle``
    rank 0 starts an execution, drops the handle and leaves; rank 1 waits
    for its own and checks the results (which need rank 0's data)
    against NumPy, printing ``OK dropped_handle rank 1``.
``dropped_handles``
    every rank drops its handle and leaves: the executions still complete
    (the job ends with status 0).
``dropped_handle_orphan``
    rank 0 drops its handle, rank 1 leaves without executing: rank 0's
    execution cannot complete and must end with an error.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.distributed import (
    abort_on_error,
    execute_distributed_partition,
    execute_distributed_partition_async,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
other = 1 - rank


def report(exc):
    # one write per line: the ranks share stdout
    sys.stdout.write(f"rank {rank} {type(exc).__name__}: {exc}\n")
    sys.stdout.flush()
    sys.exit(3)


def prepare(outputs, base_tag=100):
    parts = find_distributed_partition(comm, outputs)
    parts, _ = number_distributed_tags(comm, parts, base_tag=base_tag)
    return parts, generate_code_for_partition(parts, target="numpy")


def run(outputs, inputs):
    parts, prgs = prepare(outputs)
    return execute_distributed_partition(parts, prgs, None, comm,
                                         input_args=inputs)


def case_shape_mismatch():
    x = pt.make_placeholder("x", (4,))
    if rank == 0:
        out = {"y": staple_distributed_send(x[:1], 1, "t", x) * 2}
    else:
        out = {"y": x[:3] + make_distributed_recv(0, "t", (3,))}
    run(out, {"x": np.arange(4.0)})


def case_dtype_mismatch():
    x = pt.make_placeholder("x", (4,), np.int64)
    if rank == 0:
        out = {"y": staple_distributed_send(x * 3, 1, "t", x) * 2}
    else:
        out = {"y": make_distributed_recv(0, "t", (4,), np.float64) + 1}
    run(out, {"x": np.arange(4)})


def case_duplicate_tag():
    x = pt.make_placeholder("x", (4,))
    if rank == 0:
        held = staple_distributed_send(x * 2, 1, "t", x)
        held = staple_distributed_send(x * 3, 1, "t", held)
        out = {"y": held + 1}
    else:
        out = {"y": make_distributed_recv(0, "t", (4,)) + 1}
    run(out, {"x": np.arange(4.0)})


def case_negative_tag():
    x = pt.make_placeholder("x", (4,))
    held = staple_distributed_send(x, other, "t", x)
    out = {"y": held + make_distributed_recv(other, "t", (4,))}
    parts = find_distributed_partition(comm, out)
    number_distributed_tags(comm, parts, base_tag=-5)


def _exchange_dag():
    x = pt.make_placeholder("x", (4,))
    held = staple_distributed_send(x * 2, other, "t", x)
    return {"y": held + make_distributed_recv(other, "t", (4,))}


def case_exit_early(how="exit"):
    parts, prgs = prepare(_exchange_dag())
    if rank == 1:
        if how == "raise":
            raise RuntimeError("rank 1 gives up")
        if how == "end":
            return
        sys.exit(0)
    execute_distributed_partition(parts, prgs, None, comm,
                                  input_args={"x": np.arange(4.0)})


def _exchange_inputs(seed):
    xs = [np.random.default_rng(seed + r).standard_normal(4)
          for r in range(size)]
    return {"x": xs[rank]}, xs[rank] + 2 * xs[other]


def case_exit_late():
    parts, prgs = prepare(_exchange_dag())
    inputs, expected = _exchange_inputs(0)
    got = execute_distributed_partition(parts, prgs, None, comm,
                                        input_args=inputs)
    np.testing.assert_allclose(got["y"], expected)
    print(f"OK first execution rank {rank}", flush=True)
    if rank == 1:
        sys.exit(0)
    execute_distributed_partition(parts, prgs, None, comm, input_args=inputs)


def case_dropped_handle(everyone=False):
    parts, prgs = prepare(_exchange_dag())
    inputs, expected = _exchange_inputs(1)
    handle = execute_distributed_partition_async(parts, prgs, None, comm,
                                                 input_args=inputs)
    if rank == 0 or everyone:
        del handle
        print(f"rank {rank} dropped its handle", flush=True)
        return
    np.testing.assert_allclose(handle.wait()["y"], expected)
    print(f"OK dropped_handle rank {rank}", flush=True)


def case_dropped_handle_orphan():
    parts, prgs = prepare(_exchange_dag())
    if rank == 0:
        execute_distributed_partition_async(parts, prgs, None, comm,
                                            input_args={"x": np.ones(4)})
        print(f"rank {rank} dropped its handle", flush=True)


CASES = {
    "shape_mismatch": case_shape_mismatch,
    "dtype_mismatch": case_dtype_mismatch,
    "duplicate_tag": case_duplicate_tag,
    "negative_tag": case_negative_tag,
    "exit_early": case_exit_early,
    "exit_early_abort": case_exit_early,
    "raise_early": lambda: case_exit_early("raise"),
    "end_early": lambda: case_exit_early("end"),
    "exit_late": case_exit_late,
    "dropped_handle": case_dropped_handle,
    "dropped_handle_orphan": case_dropped_handle_orphan,
    "dropped_handles": lambda: case_dropped_handle(everyone=True),
}


def main(case):
    try:
        CASES[case]()
    except diagnostic.PytatoLikeError as exc:
        report(exc)


if __name__ == "__main__":
    name = sys.argv[1]
    if name == "exit_early_abort":
        with abort_on_error(comm):
            main(name)
    else:
        main(name)
