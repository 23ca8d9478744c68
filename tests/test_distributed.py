"""Distributed nodes, partitioner, tag numbering and verifier, without MPI.

Several ranks are simulated by threads sharing a tiny in-process
communicator (allgather/gather/bcast), so the collective logic runs exactly
as under MPI; real multi-process runs are in test_distributed_mpi.py."""

import pickle
import threading

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.array import children_of
from pytato_like.distributed import (
    DistributedRecv,
    DistributedSend,
    DistributedSendRefHolder,
    execute_distributed_partition,
    find_distributed_partition,
    generate_code_for_partition,
    make_distributed_recv,
    make_distributed_send,
    make_distributed_send_ref_holder,
    number_distributed_tags,
    staple_distributed_send,
    verify_distributed_partition,
)

# {{{ a communicator of N ranks run as threads


class _World:
    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=20)
        self.slots = [None] * size


class ThreadComm:
    def __init__(self, world, rank):
        self.world = world
        self.rank = rank

    def Get_rank(self):  # noqa: N802
        return self.rank

    def Get_size(self):  # noqa: N802
        return self.world.size

    def allgather(self, obj):
        w = self.world
        w.slots[self.rank] = pickle.loads(pickle.dumps(obj))
        w.barrier.wait()
        result = list(w.slots)
        w.barrier.wait()
        return result

    def gather(self, obj, root=0):
        result = self.allgather(obj)
        return result if self.rank == root else None

    def bcast(self, obj, root=0):
        return self.allgather(obj)[root]


def run_ranks(size, fn):
    """``fn(comm)`` on *size* simulated ranks; per rank the result or the
    exception raised."""
    world = _World(size)
    results = [None] * size

    def target(rank):
        try:
            results[rank] = fn(ThreadComm(world, rank))
        except BaseException as exc:  # noqa: BLE001
            results[rank] = exc

    threads = [threading.Thread(target=target, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results

# }}}


# {{{ nodes

def test_recv_is_an_array_with_its_fields():
    n = make_distributed_recv(1, ("halo", 3), (4, 2), np.float32)
    assert isinstance(n, DistributedRecv) and isinstance(n, pt.Array)
    assert (n.src_rank, n.comm_tag, n.shape, n.dtype) == (
        1, ("halo", 3), (4, 2), np.dtype(np.float32))
    assert n._mapper_method == "map_distributed_recv"
    assert n == make_distributed_recv(1, ("halo", 3), (4, 2), np.float32)
    assert hash(n) == hash(make_distributed_recv(1, ("halo", 3), (4, 2),
                                                 np.float32))
    assert n != make_distributed_recv(1, ("halo", 4), (4, 2), np.float32)
    assert pickle.loads(pickle.dumps(n)) == n


def test_send_holder_exposes_send_data_to_generic_walks():
    x = pt.make_placeholder("x", (4,))
    data = x[:2] * 2
    holder = staple_distributed_send(data, 3, "t", x)
    assert isinstance(holder, DistributedSendRefHolder)
    assert holder.shape == x.shape and holder.dtype == x.dtype
    assert holder._mapper_method == "map_distributed_send_ref_holder"
    # the sent data is a child: walkers see it
    assert children_of(holder) == (data, x)
    send = holder.send
    assert isinstance(send, DistributedSend)
    assert (send.data, send.dest_rank, send.comm_tag) == (data, 3, "t")
    # both constructor forms give the same node
    again = DistributedSendRefHolder(make_distributed_send(data, 3, "t"), x)
    assert again == holder
    assert holder.copy() == holder and holder.copy().send == send
    assert make_distributed_send_ref_holder(send, x) == holder
    clone = pickle.loads(pickle.dumps(holder))
    assert clone == holder and clone.send == send


def test_numpy_target_passes_holder_value_through():
    x = pt.make_placeholder("x", (3,))
    holder = staple_distributed_send(x * 10, 0, "t", x + 1)
    xv = np.arange(3.0)
    np.testing.assert_array_equal(pt.generate_numpy(holder)(x=xv), xv + 1)


def test_bad_node_arguments_raise_typed_errors():
    x = pt.make_placeholder("x", (3,))
    with pytest.raises(diagnostic.DistributedPartitionError, match="-1"):
        make_distributed_send(x, -1, "t")
    with pytest.raises(diagnostic.DistributedPartitionError, match="not hashable"):
        make_distributed_recv(0, ["list"], (3,))
    with pytest.raises(diagnostic.NotAnArrayError, match="ndarray"):
        make_distributed_send(np.zeros(3), 0, "t")

# }}}


# {{{ partition structure (one rank)

def _partition(outputs, comm=None):
    return find_distributed_partition(comm, pt.make_dict_of_named_arrays(outputs))


def _run_single(partition, inputs):
    partition, _ = number_distributed_tags(None, partition, 0)
    verify_distributed_partition(None, partition)
    prgs = generate_code_for_partition(partition, target="numpy")
    return execute_distributed_partition(partition, prgs, None, None,
                                         input_args=inputs)


def test_independent_sends_do_not_add_parts():
    x = pt.make_placeholder("x", (10,))
    acc = x
    recvs = []
    for k in range(10):
        acc = staple_distributed_send(x[k:k + 1] * (k + 1), 0, ("t", k), acc)
        recvs.append(make_distributed_recv(0, ("t", k), (1,)))
    total = pt.concatenate(recvs) + acc
    partition = _partition({"total": total})
    assert len(partition.parts) <= 2
    n_sends = sum(len(p.output_name_to_send_node) for p in partition.parts.values())
    assert n_sends == 10
    xv = np.arange(10.0)
    result = _run_single(partition, {"x": xv})
    np.testing.assert_allclose(result["total"], xv * np.arange(1, 11) + xv)


def test_send_depending_on_recv_goes_after_it_and_others_before():
    # rank-local chain: recv r0 -> send s1(r0); an independent send s0
    x = pt.make_placeholder("x", (3,))
    r0 = make_distributed_recv(0, "a", (3,))
    r1 = make_distributed_recv(0, "b", (3,))
    out = staple_distributed_send(x + 1, 0, "a", x)       # s0: no recv needed
    out = staple_distributed_send(r0 * 2, 0, "b", out)    # s1 needs r0
    partition = _partition({"out": out + r1})
    send_part = {s.comm_tag: pid for pid, p in partition.parts.items()
                 for s in p.output_name_to_send_node.values()}
    recv_parts = {r.comm_tag: [pid for pid, p in partition.parts.items()
                               if r in p.input_name_to_recv_node.values()]
                  for r in (r0, r1)}
    assert send_part["a"] < min(recv_parts["a"])
    assert min(recv_parts["a"]) <= send_part["b"] < min(recv_parts["b"])
    xv = np.array([1.0, 2.0, 3.0])
    result = _run_single(partition, {"x": xv})
    np.testing.assert_allclose(result["out"], xv + 2 * (xv + 1))


def test_every_array_is_computed_in_one_part():
    x = pt.make_placeholder("x", (4,))
    shared = pt.exp(x).tagged(pt.tags.ImplStored())
    r = make_distributed_recv(0, "r", (4,))
    held = staple_distributed_send(shared * 2, 0, "r", shared)
    outputs = {"a": held + r, "b": shared - 1, "c": pt.sin(held) * r}
    partition = _partition(outputs)
    from pytato_like._traversal import topological_order
    seen = {}
    for pid, part in partition.parts.items():
        results = [partition.var_name_to_result[n] for n in part.output_names]
        for node in topological_order(results):
            if isinstance(node, (pt.Placeholder, pt.DataWrapper, pt.SizeParam)):
                continue
            assert seen.setdefault(id(node), pid) == pid
    # the stored exp is computed in the first part; later parts read it
    assert seen[id(shared)] == min(partition.parts)
    assert len(partition.parts) >= 2
    xv = np.linspace(0, 1, 4)
    result = _run_single(partition, {"x": xv})
    recv = 2 * np.exp(xv)
    np.testing.assert_allclose(result["a"], np.exp(xv) + recv)
    np.testing.assert_allclose(result["b"], np.exp(xv) - 1)
    np.testing.assert_allclose(result["c"], np.sin(np.exp(xv)) * recv)


def test_sent_array_read_by_a_later_part_is_output_once(queue):
    """An array that is sent and also read by a later part of its rank is
    one output of its part, under one name, used by both; a second send of
    it (to another neighbour) gets its own output, so that each message can
    have it computed into its own buffer."""
    x = pt.make_placeholder("x", (6,))
    edge = (x[:2] * 3).tagged(pt.tags.ImplStored())
    held = staple_distributed_send(edge, 0, "a", edge)
    held = staple_distributed_send(edge, 0, "b", held)
    ra = make_distributed_recv(0, "a", (2,))
    rb = make_distributed_recv(0, "b", (2,))
    # read by the part that waits for the receives
    outputs = {"y": held * ra + rb}
    partition = _partition(outputs)
    results = partition.var_name_to_result
    first = partition.parts[partition.toposorted_part_ids[0]]
    sent = sorted(first.name_to_send_nodes)
    assert len(sent) == 2
    # one of the two sent names is what the later part reads
    later_inputs = set().union(*(
        partition.parts[p].partition_input_names
        for p in partition.toposorted_part_ids[1:]))
    shared = [n for n in sent if n in later_inputs]
    assert len(shared) == 1
    # no output of the first part is the same array under another name,
    # except the second send's own copy
    same = [n for n in first.output_names if results[n] is results[shared[0]]]
    assert sorted(same) == sent
    xv = np.arange(6.0)
    expect = xv[:2] * 3 * xv[:2] * 3 + xv[:2] * 3
    np.testing.assert_allclose(_run_single(partition, {"x": xv})["y"], expect)
    # the loopy target, computing the sent outputs into the messages'
    # buffers from the second execution on
    p2, _ = number_distributed_tags(None, partition, 0)
    prgs = generate_code_for_partition(p2)
    for k in range(3):
        xk = xv + k
        got = execute_distributed_partition(p2, prgs, queue, None,
                                            input_args={"x": xk})["y"]
        e = xk[:2] * 3
        np.testing.assert_allclose(got.get() if hasattr(got, "get") else got,
                                   e * e + e)


def test_self_send_of_input_and_forwarding_a_receive():
    x = pt.make_placeholder("x", (2,))
    r1 = make_distributed_recv(0, 1, (2,))
    r2 = make_distributed_recv(0, 2, (2,))
    out = staple_distributed_send(x, 0, 1, x)      # send an input as is
    out = staple_distributed_send(r1, 0, 2, out)   # forward what arrived
    partition = _partition({"x": out, "r2": r2, "r1": r1})
    xv = np.array([5.0, 7.0])
    result = _run_single(partition, {"x": xv})
    np.testing.assert_array_equal(result["x"], xv)
    np.testing.assert_array_equal(result["r1"], xv)
    np.testing.assert_array_equal(result["r2"], xv)


def test_one_argument_form_is_accepted():
    x = pt.make_placeholder("x", (2,))
    partition = find_distributed_partition(pt.make_dict_of_named_arrays({"y": x * 2}))
    assert partition.overall_output_names == ("y",)


def test_deep_chain_with_communication_partitions(deep_chain):
    x, y = deep_chain
    held = staple_distributed_send(y, 0, "deep", y)
    r = make_distributed_recv(0, "deep", (3,))
    z = held
    for _ in range(1000):
        z = 0.5 * z + r
    partition = _partition({"z": z, "y": y})
    assert len(partition.parts) == 2
    result = _run_single(partition, {"x": np.zeros(3)})
    np.testing.assert_allclose(result["y"], 2.0)
    np.testing.assert_allclose(result["z"], 4.0)

# }}}


# {{{ several simulated ranks: tags, verification, failures

def _ring_outputs(comm, tag=("ring",), shape=(3,), recv_shape=None,
                  recv_dtype=np.float64, send_to=None, recv_from=None):
    rank, size = comm.Get_rank(), comm.Get_size()
    x = pt.make_placeholder("x", shape)
    dest = (rank + 1) % size if send_to is None else send_to
    src = (rank - 1) % size if recv_from is None else recv_from
    held = staple_distributed_send(x * (rank + 1), dest, tag, x)
    r = make_distributed_recv(src, tag, recv_shape or shape, recv_dtype)
    return pt.make_dict_of_named_arrays({"y": held, "r": r})


def test_tags_numbered_consistently_across_ranks():
    tags_of_rank = [["b", ("a", 1)], [("a", 1), 17], ["b", frozenset({"p", "q"})]]

    def work(comm):
        x = pt.make_placeholder("x", (1,))
        out = x
        for tag in tags_of_rank[comm.Get_rank()]:
            out = staple_distributed_send(x, 0, tag, out)
        partition = find_distributed_partition(
            comm, pt.make_dict_of_named_arrays({"o": out}))
        numbered, next_tag = number_distributed_tags(comm, partition, 100)
        return ({s.comm_tag: numbered_send.comm_tag
                 for p, np_ in zip(partition.parts.values(),
                                   numbered.parts.values())
                 for s, numbered_send in zip(p.distributed_sends,
                                             np_.distributed_sends)},
                next_tag)

    results = run_ranks(3, work)
    assert not any(isinstance(r, BaseException) for r in results), results
    mapping = {}
    for tag_map, next_tag in results:
        assert next_tag == 104
        for tag, number in tag_map.items():
            assert mapping.setdefault(tag, number) == number
    assert sorted(mapping.values()) == [100, 101, 102, 103]


def _verify_all(size, make_outputs):
    def work(comm):
        partition = find_distributed_partition(comm, make_outputs(comm))
        verify_distributed_partition(comm, partition)
        return partition
    return run_ranks(size, work)


def test_consistent_ring_verifies():
    results = _verify_all(3, _ring_outputs)
    assert all(not isinstance(r, BaseException) for r in results), results


@pytest.mark.parametrize(("make_outputs", "error", "words"), [
    (lambda comm: _ring_outputs(comm, recv_from=(comm.Get_rank() + 1) % 3),
     diagnostic.UnmatchedSendError, ["rank", "tag ('ring',)"]),
    (lambda comm: _ring_outputs(comm, recv_shape=(4,)),
     diagnostic.SendRecvMismatchError, ["shape (3,)", "shape (4,)"]),
    (lambda comm: _ring_outputs(comm, recv_dtype=np.float32),
     diagnostic.SendRecvMismatchError, ["float64", "float32"]),
])
def test_verification_errors_raised_on_every_rank(make_outputs, error, words):
    results = _verify_all(3, make_outputs)
    for r in results:
        assert isinstance(r, error), r
        for word in words:
            assert word in str(r)


def test_unmatched_recv():
    def outputs(comm):
        x = pt.make_placeholder("x", (2,))
        r = make_distributed_recv(1 - comm.Get_rank(), "lonely", (2,))
        return pt.make_dict_of_named_arrays({"y": x + r})
    for r in _verify_all(2, outputs):
        assert isinstance(r, diagnostic.UnmatchedRecvError), r
        assert "'lonely'" in str(r) and "rank" in str(r)


def test_duplicate_send():
    def outputs(comm):
        other = 1 - comm.Get_rank()
        x = pt.make_placeholder("x", (2,))
        held = staple_distributed_send(x, other, "dup", x)
        held = staple_distributed_send(x * 2, other, "dup", held)
        r = make_distributed_recv(other, "dup", (2,))
        return pt.make_dict_of_named_arrays({"y": held + r})
    for r in _verify_all(2, outputs):
        assert isinstance(r, diagnostic.DuplicateSendError), r
        assert "'dup'" in str(r)


def test_duplicate_recv():
    def outputs(comm):
        other = 1 - comm.Get_rank()
        x = pt.make_placeholder("x", (2,))
        held = staple_distributed_send(x, other, "d", x)
        r1 = make_distributed_recv(other, "d", (2,))
        r2 = make_distributed_recv(other, "d", (2,), np.float32)
        return pt.make_dict_of_named_arrays({"y": held + r1 + r2})
    for r in _verify_all(2, outputs):
        assert isinstance(r, diagnostic.DuplicateRecvError), r


def test_cycle_across_ranks_found_by_partitioner_and_verifier():
    # each rank sends what it receives: a send waits for a recv which waits
    # for the other rank's send
    def outputs(comm):
        other = 1 - comm.Get_rank()
        r = make_distributed_recv(other, "c", (2,))
        held = staple_distributed_send(r + 1, other, "c", r)
        return pt.make_dict_of_named_arrays({"y": held})
    for r in _verify_all(2, outputs):
        assert isinstance(r, diagnostic.CycleAcrossRanksError), r
        assert "'c'" in str(r)


def test_batches_from_summaries_by_hand():
    from pytato_like.distributed.partition import CommID, _comm_batches
    # rank 0 sends "a" (needs nothing) and "c" (needs its receive "b" and
    # "d"); rank 1 sends "b" (needs "a") and "d" (needs nothing)
    summaries = [
        ([(1, "a", 0), (1, "c", 0b11)], [(1, "b"), (1, "d")]),
        ([(0, "b", 0b1), (0, "d", 0)], [(0, "a"), (0, "c")]),
    ]
    assert _comm_batches(summaries) == {
        CommID(0, 1, "a"): 0, CommID(1, 0, "d"): 0,
        CommID(1, 0, "b"): 1, CommID(0, 1, "c"): 2}
    # rank 1's "d" now needs "c": a cycle c -> d -> c
    summaries[1][0][1] = (0, "d", 0b10)
    with pytest.raises(diagnostic.CycleAcrossRanksError,
                       match=r"0 -> 1, tag 'c'"):
        _comm_batches(summaries)


def _batches_by_expansion(summaries):
    # the definition: a send's batch is one more than the largest batch
    # of the sends of the receives its mask holds (0 when none)
    from pytato_like.distributed.partition import CommID
    needs = {}
    for rank, (sends, recvs) in enumerate(summaries):
        for dest, tag, mask in sends:
            needs[CommID(rank, dest, tag)] = [
                CommID(src, rank, rtag) for i, (src, rtag) in enumerate(recvs)
                if mask >> i & 1]
    for rank, (_, recvs) in enumerate(summaries):
        for src, tag in recvs:
            needs.setdefault(CommID(src, rank, tag), [])
    batch = {}
    for _ in range(len(needs) + 1):      # (acyclic: settles)
        for c, needed in needs.items():
            batch[c] = max((batch.get(n, 0) + 1 for n in needed), default=0)
    return batch


@pytest.mark.parametrize("seed", range(20))
def test_batches_of_nested_and_random_masks_by_definition(seed):
    # sends whose masks nest (a time loop: each step's sends need every
    # earlier receive) and masks drawn at random, on 2-4 ranks
    from pytato_like.distributed.partition import _comm_batches
    rng = np.random.default_rng(seed)
    n_ranks, steps = int(rng.integers(2, 5)), int(rng.integers(1, 30))
    summaries = []
    for rank in range(n_ranks):
        left, right = (rank - 1) % n_ranks, (rank + 1) % n_ranks
        recvs = []
        sends = []
        for k in range(steps):
            # step k's sends need the receives of steps < k (all of them,
            # or a random part: not nested then)
            mask = (1 << len(recvs)) - 1
            if rng.random() < 0.3:
                mask &= int(rng.integers(0, 1 << 62)) | (1 << len(recvs)) >> 1
            sends += [(left, ("l", k), mask), (right, ("r", k), mask)]
            recvs += [(right, ("l", k)), (left, ("r", k))]
        rng.shuffle(sends)
        summaries.append((sends, recvs))
    assert _comm_batches(summaries) == _batches_by_expansion(summaries)


def test_batches_of_a_20000_step_loop():
    # every step's sends need the receives of all earlier steps: masks of
    # up to 40 000 receives (each a long integer); the batches are the
    # steps (expanding every mask would take minutes)
    from pytato_like.distributed.partition import CommID, _comm_batches
    steps = 20_000
    summaries = []
    for rank in range(2):
        other = 1 - rank
        sends = [(other, (side, k), (1 << 2 * k) - 1)
                 for k in range(steps) for side in "lr"]
        recvs = [(other, (side, k)) for k in range(steps) for side in "lr"]
        summaries.append((sends, recvs))
    batches = _comm_batches(summaries)
    assert batches == {CommID(rank, 1 - rank, (side, k)): k
                       for rank in range(2) for k in range(steps)
                       for side in "lr"}


def test_verifier_finds_cycle_in_hand_made_partition():
    # partitions that would deadlock: each rank's only part both receives and
    # sends (find_partition would never build this; verification must see it)
    from pytato_like.distributed import DistributedGraphPart, DistributedGraphPartition

    def work(comm):
        rank = comm.Get_rank()
        other = 1 - rank
        x = pt.make_placeholder("_pt_recv", (2,))
        recv = make_distributed_recv(other, 5, (2,))
        send = make_distributed_send(x, other, 5)
        part = DistributedGraphPart(
            pid=0, needed_pids=frozenset(), user_input_names=frozenset(),
            partition_input_names=frozenset({"_pt_recv"}),
            output_names=frozenset({"s"}),
            input_name_to_recv_node={"_pt_recv": recv},
            output_name_to_send_node={"s": send}, distributed_sends=[send])
        partition = DistributedGraphPartition(
            parts={0: part}, var_name_to_result={"s": x * 2},
            toposorted_part_ids=[0], overall_output_names=())
        verify_distributed_partition(comm, partition)

    for r in run_ranks(2, work):
        assert isinstance(r, diagnostic.CycleAcrossRanksError), r
        assert "rank 0 part 0" in str(r) and "rank 1 part 0" in str(r)


def test_failure_on_one_rank_during_partitioning_reaches_all_ranks():
    def work(comm):
        if comm.Get_rank() == 1:
            outputs = {"y": np.zeros(3)}    # not an array: fails on rank 1 only
        else:
            outputs = {"y": pt.make_placeholder("x", (3,)) * 2}
        return find_distributed_partition(comm, outputs)

    results = run_ranks(3, work)
    assert isinstance(results[1], diagnostic.NotAnArrayError)
    for rank in (0, 2):
        assert isinstance(results[rank], diagnostic.RemoteRankError)
        assert "rank 1" in str(results[rank])
        assert "NotAnArrayError" in str(results[rank])


def test_failure_on_one_rank_during_verification_reaches_all_ranks():
    def work(comm):
        partition = find_distributed_partition(comm, _ring_outputs(comm))
        if comm.Get_rank() == 2:
            partition = None     # breaks the local summary on rank 2
        verify_distributed_partition(comm, partition)

    results = run_ranks(3, work)
    assert isinstance(results[2], AttributeError)
    for rank in (0, 1):
        assert isinstance(results[rank], diagnostic.RemoteRankError)
        assert "rank 2" in str(results[rank])

# }}}

# vim: foldmethod=marker


# {{{ packed messages and the executor without MPI

def _heat_outputs(comm, n_fields, n_steps, n=4):
    rank, size = comm.Get_rank(), comm.Get_size()
    left, right = (rank - 1) % size, (rank + 1) % size
    outputs = {}
    for f in range(n_fields):
        u = pt.make_placeholder(f"u{f}", (n,))
        for step in range(n_steps):
            u = staple_distributed_send(u[:1], left, ("l", f, step), u)
            u = staple_distributed_send(u[-1:], right, ("r", f, step), u)
            gl = make_distributed_recv(left, ("r", f, step), (1,))
            gr = make_distributed_recv(right, ("l", f, step), (1,))
            u = u + 0.1 * (pt.concatenate([gl, u[:-1]])
                           + pt.concatenate([u[1:], gr]) - 2 * u)
        outputs[f"u{f}"] = u
    return pt.make_dict_of_named_arrays(outputs)


def test_numbering_records_one_message_per_part_and_neighbour():
    n_fields, n_steps = 2, 3

    def work(comm):
        partition = find_distributed_partition(
            comm, _heat_outputs(comm, n_fields, n_steps))
        numbered, _ = number_distributed_tags(comm, partition, 10)
        assert partition.messages is None
        return numbered

    parts = run_ranks(3, work)
    assert not any(isinstance(p, BaseException) for p in parts), parts
    for rank, partition in enumerate(parts):
        out = [m for m in partition.messages if m.src_rank == rank]
        inc = [m for m in partition.messages if m.dest_rank == rank]
        # every step's halos leave one part, to each of two neighbours
        assert len(out) == len(inc) == 2 * n_steps
        assert {m.dest_rank for m in out} == {(rank - 1) % 3, (rank + 1) % 3}
        sends = {(s.dest_rank, s.comm_tag): pid
                 for pid, part in partition.parts.items()
                 for s in part.distributed_sends}
        for m in out:
            assert m.n_arrays == n_fields
            assert list(m.comm_tags) == sorted(m.comm_tags)
            assert m.tag == m.comm_tags[0]
            assert {sends[(m.dest_rank, t)] for t in m.comm_tags} == {
                m.sender_part}
        # what a rank receives is exactly what its neighbours send it
        for m in inc:
            assert m in parts[m.src_rank].messages
        recv_tags = sorted((r.src_rank, r.comm_tag)
                           for r in partition.recv_name_to_node().values())
        assert sorted((m.src_rank, t) for m in inc
                      for t in m.comm_tags) == recv_tags


def test_one_rank_execution_handle_trace_and_reused_plan():
    from pytato_like.distributed import execute_distributed_partition_async
    x = pt.make_placeholder("x", (3,))
    held = staple_distributed_send(2 * x, 0, "self", x)
    r = make_distributed_recv(0, "self", (3,))
    outputs = pt.make_dict_of_named_arrays({"y": held - r, "r": r})
    partition = find_distributed_partition(None, outputs)
    partition, _ = number_distributed_tags(None, partition, 5)
    prgs = generate_code_for_partition(partition, target="numpy")
    plans = []
    for execution, scale in enumerate((1.0, 3.0)):
        xv = scale * np.arange(3.0)
        handle = execute_distributed_partition_async(
            partition, prgs, None, None, input_args={"x": xv})
        got = handle.wait()
        assert handle.done()
        np.testing.assert_array_equal(got["y"], -xv)
        np.testing.assert_array_equal(got["r"], 2 * xv)
        records = handle.fetch_trace()
        assert sum(rec.kind == "part" for rec in records) == len(partition.parts)
        # numbered by the plan, in the order the executions started
        assert {rec.args["execution"] for rec in records} == {execution}
        assert not any(rec.kind in ("send", "recv") for rec in records)
        assert handle.summary()[0]["n_parts"] == len(partition.parts)
        plans.append(handle.plan)
    assert plans[0] is plans[1] and plans[0].n_executions == 2


def test_bad_message_mode_is_a_typed_error():
    x = pt.make_placeholder("x", (2,))
    partition = find_distributed_partition(None, {"y": x + 1})
    partition, _ = number_distributed_tags(None, partition, 5)
    prgs = generate_code_for_partition(partition, target="numpy")
    for bad in ({"messages": "batched"}, {"pack_on": "gpu"}):
        with pytest.raises(diagnostic.DistributedExecutionError,
                           match=repr(next(iter(bad.values())))):
            execute_distributed_partition(partition, prgs, None, None,
                                          input_args={"x": np.ones(2)}, **bad)


def test_messages_that_do_not_match_the_partition_are_rejected():
    import dataclasses

    from pytato_like.distributed import Message, message_plan
    x = pt.make_placeholder("x", (2,))
    partition = find_distributed_partition(None, {"y": x + 1})
    partition, _ = number_distributed_tags(None, partition, 5)
    tampered = dataclasses.replace(
        partition, messages=(Message(1, 0, 7, (7, 8), 0),))
    with pytest.raises(diagnostic.DistributedPartitionError,
                       match=r"message from rank 1 \(tag 7\) carries tags "
                             r"\[7, 8\] that no receive"):
        message_plan(tampered, None)
    # without the grouping (not numbered by us), one message per array
    assert not message_plan(dataclasses.replace(partition, messages=None),
                            None).packed

# }}}


def test_device_part_programs_get_the_pool_allocator():
    cl = pytest.importorskip("pyopencl")
    from pytato_like.runtime.pool import get_buffer_pool
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    x = pt.make_placeholder("x", (5,))
    held = staple_distributed_send(pt.sin(x), 0, "s", x)
    r = make_distributed_recv(0, "s", (5,))
    partition = find_distributed_partition(None, {"y": held * r})
    partition, _ = number_distributed_tags(None, partition, 5)
    seen = []

    class Recording:
        def __init__(self, prg):
            self.prg = prg

        def __call__(self, queue, /, *, allocator=None, **kwargs):
            seen.append(allocator)
            return self.prg(queue, allocator=allocator, **kwargs)

    prgs = {pid: Recording(p) for pid, p in
            generate_code_for_partition(partition, target="loopy").items()}
    xv = np.linspace(0, 1, 5)
    got = execute_distributed_partition(partition, prgs, queue, None,
                                        input_args={"x": xv})
    # NumPy input, no device data: NumPy results (the out_host rule)
    assert isinstance(got["y"], np.ndarray)
    np.testing.assert_allclose(got["y"], xv * np.sin(xv), rtol=1e-14)
    assert seen and all(a is get_buffer_pool(queue).memory_pool for a in seen)


def test_waiting_for_an_unsent_self_message_is_an_error_not_a_hang():
    x = pt.make_placeholder("x", (2,))
    r = make_distributed_recv(0, "never", (2,))
    partition = find_distributed_partition(None, {"y": x + r})
    partition, _ = number_distributed_tags(None, partition, 5)
    prgs = generate_code_for_partition(partition, target="numpy")
    with pytest.raises(diagnostic.DistributedPartitionError,
                       match=r"rank 0 waits for values it sends to itself"):
        execute_distributed_partition(partition, prgs, None, None,
                                      input_args={"x": np.ones(2)})
