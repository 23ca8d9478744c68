"""Distributed checks run under ``mpiexec -n N``: ``python checks.py CASE...``.

Each case builds one global computation on every rank, runs it distributed
(partition, number tags, verify, generate code, execute) and compares every
rank's results with a serial NumPy evaluation of the same global
computation. A rank prints ``OK <case> rank <r>`` per passing case; any
failure aborts the whole job (non-zero exit). Options:
``--target numpy|loopy`` picks the part programs, ``--messages
packed|per_array`` and ``--pack-on device|host`` the message mode.

The ``forwarding`` case checks that a part passing a received value on
calls no program; ``overlap`` that the partitioner splits the heat steps'
boundaries from their interiors. The ``packed``, ``persistent`` and
``trace`` cases check the communication runtime: messages counted from
the execution trace against a hand count of (part, neighbour) pairs,
receive buffers reused across executions, the asynchronous handle, and
the gathered Chrome trace.

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
    execute_distributed_partition_async,
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
MODE = {"messages": "packed", "pack_on": "device"}
_QUEUE = []


def get_queue():
    if TARGET != "loopy":
        return None
    if not _QUEUE:
        import pyopencl as cl
        _QUEUE.append(cl.CommandQueue(cl.create_some_context(interactive=False)))
    return _QUEUE[0]


def to_numpy(result):
    return {k: v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray)
            else np.asarray(v) for k, v in result.items()}


def prepare(outputs, prg_wrapper=None):
    partition = find_distributed_partition(comm, outputs)
    partition, _ = number_distributed_tags(comm, partition, base_tag=1000)
    verify_distributed_partition(comm, partition)
    prgs = generate_code_for_partition(partition, target=TARGET)
    if prg_wrapper is not None:
        prgs = {pid: prg_wrapper(prg) for pid, prg in prgs.items()}
    return partition, prgs


def run(outputs, inputs, prg_wrapper=None):
    partition, prgs = prepare(outputs, prg_wrapper)
    result = execute_distributed_partition(partition, prgs, get_queue(), comm,
                                           input_args=inputs, **MODE)
    return to_numpy(result), partition


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


def heat_dag(n, n_fields, n_steps, c=0.2):
    """Periodic 1-D heat steps on F fields, halos exchanged every step."""
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n,))
        for step in range(n_steps):
            u = staple_distributed_send(u[:1], left, ("l", f, step), u)
            u = staple_distributed_send(u[-1:], right, ("r", f, step), u)
            gl = make_distributed_recv(left, ("r", f, step), (1,))
            gr = make_distributed_recv(right, ("l", f, step), (1,))
            ext = pt.concatenate([gl, u, gr])
            u = u + c * (ext[:-2] - 2 * u + ext[2:])
        outputs[f"u{f}"] = u
    return outputs


def heat_reference(n, n_fields, n_steps, seed, c=0.2):
    rng = np.random.default_rng(seed)
    whole = [rng.standard_normal(n * size) for _ in range(n_fields)]
    mine = slice(rank * n, (rank + 1) * n)
    inputs = {f"u{f}": w[mine].copy() for f, w in enumerate(whole)}
    for _ in range(n_steps):
        whole = [w + c * (np.roll(w, 1) - 2 * w + np.roll(w, -1))
                 for w in whole]
    return inputs, {f"u{f}": w[mine] for f, w in enumerate(whole)}


def expected_messages(n_fields, n_steps):
    """Hand count for the heat DAG: every step's sends leave one part, to
    one neighbour per side (the same rank on both sides with 2 ranks)."""
    neighbours = {(rank - 1) % size, (rank + 1) % size} - {rank}
    per_array = 2 * n_fields * n_steps if neighbours else 0
    arrays_per_message = 2 * n_fields // len(neighbours) if neighbours else 0
    return n_steps * len(neighbours), arrays_per_message, per_array


def case_packed():
    """One message per (part, neighbour), counted from the trace of an
    asynchronous execution; per-array mode sends one per array; results
    equal serial NumPy in both modes."""
    n, n_fields, n_steps = 7, 3, 4
    partition, prgs = prepare(heat_dag(n, n_fields, n_steps))
    inputs, expected = heat_reference(n, n_fields, n_steps, seed=5)
    n_messages, arrays_per_message, n_per_array = expected_messages(
        n_fields, n_steps)

    handle = execute_distributed_partition_async(
        partition, prgs, get_queue(), comm, input_args=inputs,
        pack_on=MODE["pack_on"])
    got = to_numpy(handle.wait())
    assert handle.done()
    records = handle.fetch_trace()
    sends = [r for r in records if r.kind == "send"]
    recvs = [r for r in records if r.kind == "recv"]
    assert len(sends) == n_messages, (len(sends), n_messages)
    assert len(recvs) == n_messages, (len(recvs), n_messages)
    assert all(r.args["n_arrays"] == arrays_per_message for r in sends)
    assert all(r.nbytes == 8 * arrays_per_message for r in sends + recvs)
    assert all(r.done and r.posted_ns <= r.started_ns <= r.completed_ns
               for r in records)
    # (part, neighbour) pairs with data, from the sends' records
    assert len({(r.part_id, r.peer) for r in sends}) == n_messages
    assert sum(r.kind == "part" for r in records) == len(partition.parts)
    assert handle.stats["n_messages_sent"] == n_messages
    check("packed", got, expected)

    stats = {}
    old = execute_distributed_partition(partition, prgs, get_queue(), comm,
                                        input_args=inputs, messages="per_array",
                                        stats=stats)
    assert stats["n_messages_sent"] == n_per_array, stats
    check("per_array", to_numpy(old), expected)


def case_persistent():
    """Two executions share the receive buffers (same objects) and the
    persistent requests; both give the right (different) results."""
    n, n_fields, n_steps = 5, 2, 3
    partition, prgs = prepare(heat_dag(n, n_fields, n_steps))
    buffer_ids = []
    plans = []
    for seed in (1, 2):
        inputs, expected = heat_reference(n, n_fields, n_steps, seed)
        handle = execute_distributed_partition(
            partition, prgs, get_queue(), comm, input_args=inputs, wait=False,
            **MODE)
        check(f"persistent{seed}", to_numpy(handle.wait()), expected)
        plans.append(handle.plan)
        registry = handle.plan.receive_buffers
        buffer_ids.append(sorted(id(registry.get(*key)) for key in registry))
        requests = [id(m.request) for m in handle.plan.incoming]
    assert plans[0] is plans[1]
    assert plans[0].n_executions == 2
    n_messages = expected_messages(n_fields, n_steps)[0]
    assert len(buffer_ids[0]) == n_messages == plans[0].n_incoming
    assert buffer_ids[0] == buffer_ids[1]
    assert len(set(requests)) == n_messages
    # executions started back to back run in that order on every rank
    handles = []
    for seed in (7, 8, 9):
        inputs, expected = heat_reference(n, n_fields, n_steps, seed)
        handles.append((execute_distributed_partition_async(
            partition, prgs, get_queue(), comm, input_args=inputs, **MODE),
            expected))
    for handle, expected in reversed(handles):
        got = to_numpy(handle.wait())
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-12)
    assert plans[0].n_executions == 5
    print(f"OK persistent rank {rank}", flush=True)


def case_trace():
    """The gathered trace exports Chrome JSON with one process per rank and
    one event per message and part."""
    import json

    from pytato_like.runtime.trace import gather_traces
    n, n_fields, n_steps = 4, 2, 3
    partition, prgs = prepare(heat_dag(n, n_fields, n_steps))
    inputs, expected = heat_reference(n, n_fields, n_steps, seed=3)
    handle = execute_distributed_partition(
        partition, prgs, get_queue(), comm, input_args=inputs, wait=False,
        **MODE)
    check("trace_results", to_numpy(handle.wait()), expected)
    merged = gather_traces(comm, handle.trace())
    n_messages = expected_messages(n_fields, n_steps)[0]
    n_parts = comm.gather(len(partition.parts))
    if rank == 0:
        doc = json.loads(merged.to_json())
        events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
        assert names == {r: f"rank {r}" for r in range(size)}, names
        for r in range(size):
            mine = [e for e in events if e["pid"] == r]
            count = {cat: sum(e["cat"] == cat for e in mine)
                     for cat in ("send", "recv", "part")}
            assert count == {"send": n_messages, "recv": n_messages,
                             "part": n_parts[r]}, (r, count)
            assert all(e["dur"] >= 0 and e["args"]["posted_us"] <= e["ts"]
                       for e in mine)
        summary = merged.summary()
        assert all(summary[r]["n_sent"] == n_messages for r in range(size))
        assert "compute ms" in merged.format_summary()
    print(f"OK trace rank {rank}", flush=True)


def case_mixed():
    """Arrays of several dtypes and shapes to one rank travel in one
    message (a byte buffer with aligned segments) and arrive intact."""
    x = pt.make_placeholder("x", (6,))
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    sent = {"f32": pt.sin(x[:3]).astype(np.float32),
            "i64": (x.reshape(2, 3)[:, :2] * 10).astype(np.int64),
            "b": x[1:] > 2.5,
            "c": (x[:1] + 1j * x[1:2]).astype(np.complex128)}
    held = x
    for name, value in sent.items():
        held = staple_distributed_send(value, nxt, ("mixed", name), held)
    got_from = {name: make_distributed_recv(prv, ("mixed", name), v.shape,
                                            v.dtype)
                for name, v in sent.items()}
    partition, prgs = prepare({"h": held * 1.0, **got_from})
    out = [m for m in partition.messages if m.src_rank == rank]
    assert len(out) == (1 if size > 1 else 0) and out[0].n_arrays == 4, out
    inputs = {"x": np.arange(6.0) + rank}
    got = to_numpy(execute_distributed_partition(
        partition, prgs, get_queue(), comm, input_args=inputs, **MODE))
    xp = np.arange(6.0) + prv
    check("mixed", got, {
        "h": inputs["x"], "f32": np.sin(xp[:3]).astype(np.float32),
        "i64": (xp.reshape(2, 3)[:, :2] * 10).astype(np.int64),
        "b": xp[1:] > 2.5, "c": (xp[:1] + 1j * xp[1:2]).astype(np.complex128)})
    assert got["i64"].dtype == np.int64 and got["b"].dtype == np.bool_


def case_forwarding():
    """A part that only passes a received value on runs without calling
    its program (no kernel launch); the value still arrives intact, in
    both of two executions (received buffers are reused)."""
    x = pt.make_placeholder("x", (4,))
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    held = staple_distributed_send(x * 2, nxt, "fwd", x)
    r = make_distributed_recv(prv, "fwd", (4,))
    calls = {}

    def counting(pid, prg):
        def call(queue, **inputs):
            calls[pid] = calls.get(pid, 0) + 1
            return prg(queue, **inputs)     # the executor's options pass through
        return call

    partition = find_distributed_partition(comm, {"y": held + 1, "r": r})
    partition, _ = number_distributed_tags(comm, partition, base_tag=1000)
    prgs = generate_code_for_partition(partition, target=TARGET)
    prgs = {pid: counting(pid, prg) for pid, prg in prgs.items()}
    forwarding = [pid for pid, part in partition.parts.items()
                  if set(part.output_names) == {"r"}]
    assert len(forwarding) == 1, partition.parts
    results = []
    for seed in (1, 2):
        inputs = [np.arange(4.0) * seed + 10 * k for k in range(size)]
        # (kept as returned: the forwarded receive's buffer is the same in
        # every execution, so a result must not be it)
        results.append((inputs, execute_distributed_partition(
            partition, prgs, get_queue(), comm,
            input_args={"x": inputs[rank]}, **MODE)))
    for inputs, got in results:
        check("forwarding", to_numpy(got),
              {"y": inputs[rank] + 1, "r": 2 * inputs[prv]})
    assert forwarding[0] not in calls, calls
    assert all(calls[pid] == 2 for pid in partition.parts
               if pid != forwarding[0]), calls


def case_overlap():
    """The heat steps as written (each step one stencil over the
    halo-extended field), large enough for the partitioner to split each
    step's boundary from its interior: the same results as serial NumPy
    and as the partition without the split, and every part that sends
    computes strips of boundary cells only, at most 2 * steps - 1 wide
    (without the split: whole fields)."""
    n, n_fields, n_steps = 40_000, 2, 3
    dag = heat_dag(n, n_fields, n_steps)
    inputs, expected = heat_reference(n, n_fields, n_steps, seed=11)
    results = {}
    for split in (True, False):
        partition = find_distributed_partition(comm, dag,
                                               split_interior=split)
        senders = [partition.name_to_output[name].size
                   for part in partition.parts.values()
                   if part.name_to_send_nodes for name in part.output_names]
        assert max(senders) == (2 * n_steps - 1 if split else n), \
            (split, senders)
        partition, _ = number_distributed_tags(comm, partition, base_tag=1000)
        verify_distributed_partition(comm, partition)
        prgs = generate_code_for_partition(partition, target=TARGET)
        results[split] = to_numpy(execute_distributed_partition(
            partition, prgs, get_queue(), comm, input_args=inputs, **MODE))
        check(f"overlap_split{int(split)}", results[split], expected)
    for name in expected:
        np.testing.assert_array_equal(results[True][name], results[False][name])
    print(f"OK overlap rank {rank}", flush=True)


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
        return prg(queue, **inputs)     # the executor's options pass through
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
    parser.add_argument("--messages", default="packed")
    parser.add_argument("--pack-on", default="device")
    args = parser.parse_args(argv)
    TARGET = args.target
    MODE.update(messages=args.messages, pack_on=args.pack_on)
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
