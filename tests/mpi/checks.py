"""Distributed checks run under ``mpiexec -n N``: ``python checks.py CASE...``.

Each case builds one global computation on every rank, runs it distributed
(partition, number tags, verify, generate code, execute) and compares every
rank's results with a serial NumPy evaluation of the same global
computation. A rank prints ``OK <case> rank <r>`` per passing case; any
failure aborts the whole job (non-zero exit). Options:
``--target numpy|loopy`` picks the part programs.

Failure-injection cases (``fail_execute``, ``fail_execute_no_abort``,
``fail_partition``) are used by the failure tests and are expected to end
the job with an error.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.distributed import (
    abort_on_error,
    execute_distributed_partition,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
    verify_distributed_partition,
)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
TARGET = "numpy"


def run(outputs, inputs, prg_wrapper=None):
    partition = find_distributed_partition(comm, outputs)
    partition, _ = number_distributed_tags(comm, partition, base_tag=1000)
    verify_distributed_partition(comm, partition)
    prgs = generate_code_for_partition(partition, target=TARGET)
    if prg_wrapper is not None:
        prgs = {pid: prg_wrapper(prg) for pid, prg in prgs.items()}
    queue = None
    if TARGET == "loopy":
        import pyopencl as cl
        queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    result = execute_distributed_partition(partition, prgs, queue, comm,
                                           input_args=inputs)
    return {k: v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray)
            else np.asarray(v) for k, v in result.items()}, partition


def check(name, got, expected):
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name}: output {key} on rank {rank}")
    print(f"OK {name} rank {rank}", flush=True)


# {{{ cases

def case_ring():
    x = pt.make_placeholder("x", (5,))
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    held = staple_distributed_send(x * (rank + 1), nxt, "ring", x)
    r = make_distributed_recv(prv, "ring", (5,))
    xs = [np.arange(5.0) + 10 * k for k in range(size)]
    got, _ = run({"y": held + r}, {"x": xs[rank]})
    check("ring", got, {"y": xs[rank] + xs[prv] * (prv + 1)})


def case_halo():
    # 1-D periodic heat equation, 3 steps, one-cell halos each step
    n, steps, c = 6, 3, 0.2
    rng = np.random.default_rng(0)
    whole = rng.standard_normal(n * size)
    u = pt.make_placeholder("u", (n,))
    left, right = (rank - 1) % size, (rank + 1) % size
    for step in range(steps):
        u = staple_distributed_send(u[:1], left, ("toleft", step), u)
        u = staple_distributed_send(u[-1:], right, ("toright", step), u)
        from_left = make_distributed_recv(left, ("toright", step), (1,))
        from_right = make_distributed_recv(right, ("toleft", step), (1,))
        ext = pt.concatenate([from_left, u, from_right])
        u = u + c * (ext[:-2] - 2 * u + ext[2:])
    for _ in range(steps):
        whole = whole + c * (np.roll(whole, 1) - 2 * whole + np.roll(whole, -1))
    got, _ = run({"u": u}, {"u": rng_whole_slice(n)})
    check("halo", got, {"u": whole[rank * n:(rank + 1) * n]})


def rng_whole_slice(n):
    whole = np.random.default_rng(0).standard_normal(n * size)
    return whole[rank * n:(rank + 1) * n]


def case_self_send():
    x = pt.make_placeholder("x", (3,))
    held = staple_distributed_send(2 * x, rank, "self", x)
    r = make_distributed_recv(rank, "self", (3,))
    xv = np.arange(3.0) + rank
    got, _ = run({"y": held - r, "r": r}, {"x": xv})
    check("self_send", got, {"y": -xv, "r": 2 * xv})


def case_random(seed):
    """Random global DAG: local ops, DataWrapper and placeholder inputs,
    random sends (including to self), several outputs."""
    rng = np.random.default_rng(seed)
    n = 4
    lazy = [[] for _ in range(size)]     # per rank: arrays of the DAG
    ref = [[] for _ in range(size)]      # per rank: NumPy values
    inputs = {}
    for r in range(size):
        xv = rng.standard_normal(n)
        wv = rng.standard_normal(n)
        if r == rank:
            inputs["x"] = xv
        lazy[r] += [pt.make_placeholder("x", (n,)), pt.make_data_wrapper(wv)]
        ref[r] += [xv, wv]

    ops = [
        (lambda a, b: a + b, lambda a, b: a + b),
        (lambda a, b: a * 0.5 - b, lambda a, b: a * 0.5 - b),
        (lambda a, b: pt.sin(a) * b, lambda a, b: np.sin(a) * b),
        (lambda a, b: pt.roll(a, 1) + b[::-1], lambda a, b: np.roll(a, 1) + b[::-1]),
    ]
    for step in range(40):
        if rng.random() < 0.35:
            src, dest = rng.integers(0, size, 2)
            i = rng.integers(0, len(lazy[src]))
            tag = ("msg", step)
            lazy[src][i] = staple_distributed_send(lazy[src][i], dest, tag,
                                                   lazy[src][i])
            lazy[dest].append(make_distributed_recv(src, tag, (n,)))
            ref[dest].append(ref[src][i].copy())
        else:
            r = rng.integers(0, size)
            i, j = rng.integers(0, len(lazy[r]), 2)
            k = rng.integers(0, len(ops))
            lazy[r].append(ops[k][0](lazy[r][i], lazy[r][j]))
            ref[r].append(ops[k][1](ref[r][i], ref[r][j]))
    outputs = {f"a{i}": a for i, a in enumerate(lazy[rank])}
    got, partition = run(outputs, inputs)
    check(f"random{seed}", got,
          {f"a{i}": v for i, v in enumerate(ref[rank])})


def case_unmatched():
    x = pt.make_placeholder("x", (2,))
    out = staple_distributed_send(x, (rank + 1) % size, "sent", x)
    r = make_distributed_recv((rank - 1) % size, "other", (2,))
    partition = find_distributed_partition(comm, {"y": out + r})
    try:
        verify_distributed_partition(comm, partition)
    except diagnostic.UnmatchedSendError as exc:
        assert "'sent'" in str(exc), exc
        print(f"OK unmatched rank {rank}", flush=True)
    else:
        raise AssertionError("verification accepted an unmatched send")


def _failing_on_rank1(prg):
    def call(queue, **inputs):
        if rank == 1:
            raise RuntimeError("injected failure in a part on rank 1")
        return prg(queue, **inputs)
    return call


def _failure_dag():
    x = pt.make_placeholder("x", (3,))
    # rank 1 fails before sending: everyone else waits for its data
    held = staple_distributed_send(x + 1, (rank + 1) % size, "f", x)
    r = make_distributed_recv((rank - 1) % size, "f", (3,))
    return {"y": held * r}, {"x": np.ones(3)}


def case_fail_execute():
    outputs, inputs = _failure_dag()
    run(outputs, inputs, prg_wrapper=_failing_on_rank1)


def case_fail_execute_no_abort():
    """Without the abort wrapper: ranks waiting for rank 1 are told."""
    outputs, inputs = _failure_dag()
    try:
        run(outputs, inputs, prg_wrapper=_failing_on_rank1)
    except diagnostic.RemoteRankError as exc:
        print(f"rank {rank} RemoteRankError: {exc}", flush=True)
        sys.exit(3)
    except RuntimeError as exc:
        print(f"rank {rank} RuntimeError: {exc}", flush=True)
        sys.exit(4)


def case_fail_partition():
    x = pt.make_placeholder("x", (3,))
    outputs = {"y": x * 2}
    if rank == size - 1:
        outputs = {"y": "not an array"}
    find_distributed_partition(comm, outputs)

# }}}


def main(argv=None):
    global TARGET
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--target", default="numpy")
    args = parser.parse_args(argv)
    TARGET = args.target
    for case in args.cases:
        if case.startswith("random"):
            case_random(int(case[len("random"):] or 0))
        else:
            globals()[f"case_{case}"]()


if __name__ == "__main__":
    if "fail_execute_no_abort" in sys.argv:
        main()
    else:
        with abort_on_error(comm):
            main()
