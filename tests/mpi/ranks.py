"""Distributed programs for any number of ranks: ``mpiexec -n N python
ranks.py CASE [options]`` (used by ``tests/test_ranks_mpi.py``; run it by
hand to repeat a case).

Every rank compares its results with NumPy on the whole global
computation, bit for bit, and prints ``OK <case> rank <r>``; an unexpected
error aborts the job (:func:`~pytato_like.distributed.abort_on_error`).

Cases:

``ring``
    a periodic ring of ranks; each of ``--steps`` explicit steps sends one
    cell of each of ``--fields`` fields (``--cells`` per rank) to both
    neighbours (``staple_distributed_send`` of ``u[:1]`` / ``u[n-1:]``,
    ``make_distributed_recv``, ``concatenate``), all steps in one DAG;
    partitioned, numbered, verified, compiled, executed once and then
    ``--runs`` more times. ``--stagger S``: rank *r* sleeps ``S * r``
    seconds before it leaves, so that ranks end their programs at
    different times (the departure notices of late ranks arrive after the
    early ones stopped executing); ``--exit-exchange``: an exit handler
    of the program's own (registered first, so it runs after
    pytato_like's) exchanges a message with both neighbours, as libraries
    that finalize at exit communicate: MPI then takes in the notices that
    arrive at a rank after pytato_like's hook has run, before
    ``MPI_Finalize``.
``neighbours``
    each rank sends to up to three other ranks arrays of different sizes
    gathered with index arrays (``x[idx]``), and scatters what it receives
    into a ghost array.
``same_tags``
    two partitions of the same shape (one sends ``2 x``, the other ``3 x``)
    numbered with the same ``base_tag`` and executed asynchronously, rank 0
    starting the first and then the second, the other ranks the other way
    round; each result must be its own partition's.
``zero_size``
    each rank sends its right neighbour an empty slice (and a one-cell
    one) and receives its left neighbour's.
``bad_rank``
    rank 0 sends to rank ``size + 3`` (which does not exist); every rank
    reports the error naming that rank and the communicator's size.
``fault_raise`` / ``fault_raise_no_abort``
    the ring, in which a part on rank ``--victim`` raises in the second
    execution: with :func:`abort_on_error` the job is aborted; without it
    every other rank reports the error it was told about and exits with
    status 3.
``fault_exit``
    rank ``--victim`` leaves (``sys.exit(0)``) after the first execution;
    the others report the rank that left (or the rank that failed
    because of it) and exit with status 3.
``fault_sigkill``
    rank ``--victim`` kills itself with SIGKILL in the second execution:
    the process manager ends the job.

A rank that catches an expected error prints ``rank R <ErrorClass>:
<message>`` on one line.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.distributed import abort_on_error

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
COURANT = 0.25


def say(line: str) -> None:
    # one write per line: the ranks share stdout
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def report(exc: BaseException, status: int = 3) -> None:
    say(f"rank {rank} {type(exc).__name__}: {' '.join(str(exc).split())}")
    sys.exit(status)


def queue_for(target: str):
    if target != "loopy":
        return None
    import pyopencl as cl
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def prepare(outputs, target: str, base_tag: int = 100):
    partition = pt.find_distributed_partition(comm, outputs)
    partition, _ = pt.number_distributed_tags(comm, partition,
                                              base_tag=base_tag)
    pt.verify_distributed_partition(comm, partition)
    return partition, pt.generate_code_for_partition(partition, target=target)


def host(result) -> dict[str, np.ndarray]:
    return {k: v.get() if hasattr(v, "queue") else np.asarray(v)
            for k, v in result.items()}


# {{{ the ring

def ring_dag(n_fields: int, n_cells: int, n_steps: int):
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n_cells,))
        for step in range(n_steps):
            u = pt.staple_distributed_send(u[:1], left, ("l", f, step), u)
            u = pt.staple_distributed_send(u[n_cells - 1:], right,
                                           ("r", f, step), u)
            ghost_l = pt.make_distributed_recv(left, ("r", f, step), (1,))
            ghost_r = pt.make_distributed_recv(right, ("l", f, step), (1,))
            ext = pt.concatenate([ghost_l, u, ghost_r])
            u = u + COURANT * (ext[:-2] - 2 * u + ext[2:])
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def ring_data(n_fields: int, n_cells: int, n_steps: int):
    """(this rank's inputs, its slice of NumPy's result on the whole ring)."""
    rng = np.random.default_rng(38)
    inputs, expected = {}, {}
    mine = slice(rank * n_cells, (rank + 1) * n_cells)
    for f in range(n_fields):
        u = rng.random(n_cells * size)
        inputs[f"u{f}"] = u[mine].copy()
        for _ in range(n_steps):
            u = u + COURANT * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
        expected[f"u{f}"] = u[mine]
    return inputs, expected


def check_equal(case: str, got, expected) -> None:
    for name, want in expected.items():
        if not np.array_equal(got[name], want):
            raise AssertionError(
                f"rank {rank}, {case}: {name} differs from NumPy by up to "
                f"{np.max(np.abs(got[name] - want))}")


def case_ring(args) -> None:
    dag = ring_dag(args.fields, args.cells, args.steps)
    partition, prgs = prepare(dag, args.target)
    inputs, expected = ring_data(args.fields, args.cells, args.steps)
    queue = queue_for(args.target)
    for _ in range(1 + args.runs):
        result = host(pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args=inputs))
        check_equal("ring", result, expected)
    say(f"OK ring rank {rank}")
    if args.stagger:
        time.sleep(args.stagger * rank)

# }}}


# {{{ several neighbours, index gathers

N_LOCAL = 12


def neighbour_offsets() -> range:
    """Rank r sends to r + d (mod size) for these d."""
    return range(1, min(3, size - 1) + 1)


def face_indices(src: int, d: int) -> np.ndarray:
    """Which of rank *src*'s values it sends to rank src + d: a different
    count for every (rank, neighbour) pair, 1 to 5."""
    count = 1 + (src + 2 * d) % 5
    return np.random.default_rng(100 * src + d).permutation(N_LOCAL)[:count]


def ghost_slots(src: int, d: int) -> np.ndarray:
    """Where the receiver puts what rank *src* sends it (offset d)."""
    count = len(face_indices(src, d))
    return np.random.default_rng(7 + 100 * src + d).permutation(
        N_LOCAL)[:count]


def local_values(r: int) -> np.ndarray:
    return np.random.default_rng(1000 + r).standard_normal(N_LOCAL)


def case_neighbours(args) -> None:
    x = pt.make_placeholder("x", (N_LOCAL,))
    held = x
    ghost_parts = []
    for d in neighbour_offsets():
        dest, src = (rank + d) % size, (rank - d) % size
        held = pt.staple_distributed_send(x[face_indices(rank, d)], dest,
                                          ("face", d), held)
        received = pt.make_distributed_recv(src, ("face", d),
                                            (len(face_indices(src, d)),))
        # scatter into a ghost array of the local size: a one-hot matrix
        # per neighbour (rows: ghost slots, columns: received values)
        scatter = np.zeros((N_LOCAL, len(face_indices(src, d))))
        scatter[ghost_slots(src, d), np.arange(scatter.shape[1])] = 1.0
        ghost_parts.append(pt.einsum("ij,j->i", scatter, received) * d)
    ghost = ghost_parts[0]
    for part in ghost_parts[1:]:
        ghost = ghost + part
    outputs = {"y": held * 2 + ghost}
    partition, prgs = prepare(outputs, args.target)
    result = host(pt.execute_distributed_partition(
        partition, prgs, queue_for(args.target), comm,
        input_args={"x": local_values(rank)}))

    expected_ghost = np.zeros(N_LOCAL)
    for d in neighbour_offsets():
        src = (rank - d) % size
        contribution = np.zeros(N_LOCAL)
        contribution[ghost_slots(src, d)] = local_values(src)[
            face_indices(src, d)]
        expected_ghost = expected_ghost + contribution * d
    expected = local_values(rank) * 2 + expected_ghost
    np.testing.assert_allclose(result["y"], expected, rtol=1e-14, atol=0)
    say(f"OK neighbours rank {rank}")

# }}}


# {{{ two partitions with the same tags

def _exchange_dag(factor: float):
    x = pt.make_placeholder("x", (5,))
    right, left = (rank + 1) % size, (rank - 1) % size
    held = pt.staple_distributed_send(x * factor, right, "halo", x)
    return {"y": held + pt.make_distributed_recv(left, "halo", (5,))}


def case_same_tags(args) -> None:
    values = [np.random.default_rng(r).standard_normal(5)
              for r in range(size)]
    inputs = {"x": values[rank]}
    prepared = {factor: prepare(_exchange_dag(factor), args.target,
                                base_tag=100)
                for factor in (2.0, 3.0)}
    order = [2.0, 3.0] if rank == 0 else [3.0, 2.0]
    queue = queue_for(args.target)
    handles = {factor: pt.execute_distributed_partition_async(
                   *prepared[factor], queue, comm, input_args=inputs)
               for factor in order}
    for factor, handle in handles.items():
        got = host(handle.wait())["y"]
        expected = values[rank] + factor * values[(rank - 1) % size]
        if not np.array_equal(got, expected):
            raise AssertionError(
                f"rank {rank}: the partition sending {factor} x received "
                f"{got - values[rank]}, not {expected - values[rank]}")
    say(f"OK same_tags rank {rank}")

# }}}


# {{{ zero-size messages, ranks that do not exist

def case_zero_size(args) -> None:
    x = pt.make_placeholder("x", (4,))
    right, left = (rank + 1) % size, (rank - 1) % size
    held = pt.staple_distributed_send(x[:0], right, "empty", x)
    empty = pt.make_distributed_recv(left, "empty", (0,))
    # a message of its own (to the left) holds one empty input only
    z = pt.make_placeholder("z", (3, 0))
    held = pt.staple_distributed_send(z, left, "alone", held)
    alone = pt.make_distributed_recv(right, "alone", (3, 0))
    held = pt.staple_distributed_send(x[:1] * 2, right, "one", held)
    one = pt.make_distributed_recv(left, "one", (1,))
    outputs = {"y": pt.concatenate([empty, held, one]),
               "e": empty * 3, "a": alone + 1}
    partition, prgs = prepare(outputs, args.target)
    values = [np.arange(4.0) + 10 * r for r in range(size)]
    queue = queue_for(args.target)
    host_inputs = {"x": values[rank], "z": np.zeros((3, 0))}
    input_sets = [host_inputs]
    if queue is not None:
        import pyopencl.array as cla
        input_sets.append({name: cla.to_device(queue, value)
                           for name, value in host_inputs.items()})
    modes = [{"messages": "packed", "pack_on": "device"},
             {"messages": "packed", "pack_on": "host"},
             {"messages": "per_array"}]
    for inputs, mode in [(i, m) for i in input_sets for m in modes
                         for _ in range(2)]:
        result = host(pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args=inputs, **mode))
        check_equal("zero_size", result, {
            "y": np.concatenate([values[rank], 2 * values[left][:1]]),
            "e": np.zeros(0), "a": np.zeros((3, 0))})
    say(f"OK zero_size rank {rank}")


def case_bad_rank(args) -> None:
    x = pt.make_placeholder("x", (4,))
    dest = size + 3
    outputs = {"y": x * 2}
    if rank == 0:
        outputs = {"y": pt.staple_distributed_send(x, dest, "t", x) * 2}
    try:
        prepare(outputs, args.target)
    except diagnostic.PytatoLikeError as exc:
        report(exc)

# }}}


# {{{ faults

def _raising_on(victim: int, runs: list[int]):
    def wrap(prg):
        def call(queue, **inputs):
            if rank == victim and runs[0] == 1:
                raise RuntimeError(f"injected failure on rank {rank}")
            return prg(queue, **inputs)
        return call
    return wrap


def _ring_runs(args, before_run=None, prg_wrapper=None) -> None:
    dag = ring_dag(1, args.cells, args.steps)
    partition, prgs = prepare(dag, args.target)
    if prg_wrapper is not None:
        prgs = {pid: prg_wrapper(prg) for pid, prg in prgs.items()}
    inputs, expected = ring_data(1, args.cells, args.steps)
    queue = queue_for(args.target)
    for run in range(1 + args.runs):
        if before_run is not None:
            before_run(run)
        result = host(pt.execute_distributed_partition(
            partition, prgs, queue, comm, input_args=inputs))
        check_equal("fault", result, expected)


def case_fault_raise(args) -> None:
    runs = [0]

    def count(run):
        runs[0] = run
    _ring_runs(args, count, _raising_on(args.victim, runs))


def case_fault_raise_no_abort(args) -> None:
    try:
        case_fault_raise(args)
    except diagnostic.PytatoLikeError as exc:
        report(exc)
    except RuntimeError as exc:
        report(exc, 4)


def case_fault_exit(args) -> None:
    def leave(run):
        if run == 1 and rank == args.victim:
            say(f"rank {rank} leaves")
            sys.exit(0)
    try:
        _ring_runs(args, leave)
    except diagnostic.PytatoLikeError as exc:
        report(exc)


def case_fault_sigkill(args) -> None:
    def die(run):
        if run == 1 and rank == args.victim:
            say(f"rank {rank} kills itself")
            os.kill(os.getpid(), signal.SIGKILL)
    _ring_runs(args, die)

# }}}


def exchange_with_neighbours() -> None:
    comm.sendrecv(rank, dest=(rank + 1) % size, sendtag=7,
                  source=(rank - 1) % size, recvtag=7)
    comm.sendrecv(rank, dest=(rank - 1) % size, sendtag=8,
                  source=(rank + 1) % size, recvtag=8)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("case")
    parser.add_argument("--target", default="numpy",
                        choices=["numpy", "loopy"])
    parser.add_argument("--fields", type=int, default=1)
    parser.add_argument("--cells", type=lambda s: int(float(s)), default=1000)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3,
                        help="executions after the first")
    parser.add_argument("--stagger", type=float, default=0.0)
    parser.add_argument("--victim", type=int, default=2)
    parser.add_argument("--exit-exchange", action="store_true")
    args = parser.parse_args(argv)
    if args.exit_exchange:
        import atexit
        atexit.register(exchange_with_neighbours)
    globals()[f"case_{args.case}"](args)


if __name__ == "__main__":
    if "no_abort" in " ".join(sys.argv) or "fault_exit" in sys.argv \
            or "bad_rank" in sys.argv:
        main()
    else:
        with abort_on_error(comm):
            main()

# vim: foldmethod=marker
