"""Issue 9, fact 5 (distributed part): the partition objects, the
communication identifier and the verifier's errors under pytato's names,
used as a pytato user uses them.

One rank (communicator ``None``) is enough here: a receive from or a send
to rank 1 is partitioned like any other, and the verifier sees what is
unmatched. Real multi-rank runs are in tests/test_distributed_mpi.py and
examples/pytato_style/distributed.py.
"""

import dataclasses

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.distributed import verify as pt_verify
from pytato_like.distributed.nodes import DistributedRecv, DistributedSend
from pytato_like.distributed.partition import CommunicationOpIdentifier


def _halo_program():
    """Rank 0's half of a halo exchange: send ``2 x`` to rank 1, receive
    ``h`` from rank 1, result ``out = h + x``."""
    x = pt.make_placeholder("x", (4,), np.float64)
    h = pt.make_distributed_recv(src_rank=1, comm_tag="halo", shape=(4,),
                                 dtype=np.float64)
    held = pt.staple_distributed_send(2 * x, dest_rank=1, comm_tag="halo",
                                      stapled_to=h)
    return pt.make_dict_of_named_arrays({"out": held + x})


def _run_parts_by_hand(partition, received, inputs):
    """What a pytato user's own executor does: run the parts in an order
    that respects ``needed_pids``, feeding every part ``all_input_names()``
    from a context of inputs, received values and earlier part outputs."""
    prgs = pt.generate_code_for_partition(partition, target="numpy")
    context = dict(inputs)
    done: set = set()
    while len(done) < len(partition.parts):
        for pid, part in partition.parts.items():
            if pid in done or not part.needed_pids <= done:
                continue
            for name, recv in part.name_to_recv_node.items():
                context[name] = received[recv.src_rank, recv.comm_tag]
            _evt, outputs = prgs[pid](None, **{
                name: context[name] for name in part.all_input_names()})
            context.update(outputs)
            done.add(pid)
    return context


def test_distributed_part_has_pytatos_attributes():
    partition = pt.find_distributed_partition(None, _halo_program())
    assert isinstance(partition, pt.DistributedGraphPartition)
    assert tuple(partition.overall_output_names) == ("out",)
    assert "out" in partition.name_to_output

    recvs, sends = [], []
    for pid, part in partition.parts.items():
        assert isinstance(part, pt.DistributedGraphPart)
        assert part.pid == pid
        assert part.needed_pids <= set(partition.parts) - {pid}
        assert part.all_input_names() == (part.user_input_names
                                           | part.partition_input_names)
        for name, recv in part.name_to_recv_node.items():
            assert isinstance(recv, DistributedRecv)
            assert name in part.partition_input_names
            assert name not in part.output_names
            recvs.append(recv)
        for name, name_sends in part.name_to_send_nodes.items():
            assert name in part.output_names
            for send in name_sends:
                assert isinstance(send, DistributedSend)
                # the named output is what the send carries
                assert partition.name_to_output[name].shape == send.data.shape
                sends.append(send)
        for name in part.output_names:
            assert name in partition.name_to_output
    assert [(r.src_rank, r.comm_tag) for r in recvs] == [(1, "halo")]
    assert [(s.dest_rank, s.comm_tag) for s in sends] == [(1, "halo")]


def test_part_loop_over_pytato_names_computes_numpy_result():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(4)
    h = rng.standard_normal(4)
    partition = pt.find_distributed_partition(None, _halo_program())
    context = _run_parts_by_hand(partition, {(1, "halo"): h}, {"x": x})

    np.testing.assert_allclose(context["out"], h + x)
    sent = [(send.dest_rank, context[name])
            for part in partition.parts.values()
            for name, name_sends in part.name_to_send_nodes.items()
            for send in name_sends]
    assert len(sent) == 1
    assert sent[0][0] == 1
    np.testing.assert_allclose(sent[0][1], 2 * x)


def test_earlier_part_attribute_names_agree_with_pytatos():
    partition = pt.find_distributed_partition(None, _halo_program())
    assert partition.var_name_to_result is partition.name_to_output
    for part in partition.parts.values():
        assert part.input_name_to_recv_node == part.name_to_recv_node
        assert part.output_name_to_send_node == {
            name: sends[0] for name, sends in part.name_to_send_nodes.items()}
        assert part.distributed_sends == [
            s for sends in part.name_to_send_nodes.values() for s in sends]
        # replacing through the earlier keyword rebuilds pytato's attribute
        numbered = {name: send.copy(comm_tag=7)
                    for name, send in part.output_name_to_send_node.items()}
        new = dataclasses.replace(part, output_name_to_send_node=numbered)
        assert {name: [s.comm_tag for s in sends]
                for name, sends in new.name_to_send_nodes.items()} == {
            name: [7] for name in part.name_to_send_nodes}


def test_partition_constructed_as_pytato_does_orders_its_parts():
    x = pt.make_placeholder("x", (3,), np.float64)
    parts = {
        "late": pt.DistributedGraphPart(
            pid="late", needed_pids=frozenset({"early"}),
            user_input_names=frozenset(),
            partition_input_names=frozenset({"t"}),
            output_names=frozenset({"out"}),
            name_to_recv_node={}, name_to_send_nodes={}),
        "early": pt.DistributedGraphPart(
            pid="early", needed_pids=frozenset(),
            user_input_names=frozenset({"x"}),
            partition_input_names=frozenset(),
            output_names=frozenset({"t"}),
            name_to_recv_node={}, name_to_send_nodes={}),
    }
    t = pt.make_placeholder("t", (3,), np.float64)
    partition = pt.DistributedGraphPartition(
        parts=parts, name_to_output={"t": x + 1, "out": 3 * t},
        overall_output_names=["out"])
    assert list(partition.toposorted_part_ids) == ["early", "late"]
    context = _run_parts_by_hand(partition, {}, {"x": np.arange(3.0)})
    np.testing.assert_allclose(context["out"], 3 * (np.arange(3.0) + 1))


def test_sent_name_must_be_a_part_output():
    x = pt.make_placeholder("x", (3,), np.float64)
    send = pt.make_distributed_send(x, dest_rank=1, comm_tag=0)
    with pytest.raises(ValueError, match="'s'"):
        pt.DistributedGraphPart(
            pid=0, needed_pids=frozenset(), user_input_names=frozenset({"x"}),
            partition_input_names=frozenset(), output_names=frozenset(),
            name_to_recv_node={}, name_to_send_nodes={"s": [send]})


def test_communication_op_identifier():
    a = CommunicationOpIdentifier(src_rank=0, dest_rank=1, comm_tag="halo")
    assert (a.src_rank, a.dest_rank, a.comm_tag) == (0, 1, "halo")
    assert a == CommunicationOpIdentifier(0, 1, "halo")
    assert a != CommunicationOpIdentifier(1, 0, "halo")
    assert len({a, CommunicationOpIdentifier(0, 1, "halo")}) == 1
    with pytest.raises(AttributeError):
        a.src_rank = 3


def test_generic_partition_has_pytatos_names():
    x = pt.make_placeholder("x", (5,), np.float64)
    t = x * 2
    out = t + 1
    partition = pt.partition.find_partition(
        {"out": out}, lambda node: "p" if node is t else "q")
    assert tuple(partition.overall_output_names) == ("out",)
    assert partition.name_to_output is partition.var_name_to_result
    assert partition.toposorted_part_ids == ["p", "q"]
    for pid, part in partition.parts.items():
        assert isinstance(part, pt.partition.GraphPart)
        assert part.all_input_names() == (part.user_input_names
                                          | part.partition_input_names)
    xv = np.arange(5.0)
    result = pt.partition.execute_partition(
        partition, pt.generate_code_for_partition(partition, target="numpy"),
        None, {"x": xv})
    np.testing.assert_allclose(result["out"], 2 * xv + 1)


# {{{ verification errors under pytato's names

def _verify(outputs):
    partition = pt.find_distributed_partition(None, outputs)
    pt.verify_distributed_partition(None, partition)


def test_missing_recv_error_is_unmatched_send():
    x = pt.make_placeholder("x", (3,), np.float64)
    held = pt.staple_distributed_send(x, dest_rank=1, comm_tag=4, stapled_to=x)
    with pytest.raises(pt_verify.MissingRecvError, match="tag 4") as info:
        _verify({"y": held + 1})
    assert isinstance(info.value, diagnostic.UnmatchedSendError)
    assert isinstance(info.value,
                      pt_verify.DistributedPartitionVerificationError)


def test_missing_send_error_is_unmatched_recv():
    h = pt.make_distributed_recv(1, comm_tag="h", shape=(3,), dtype=np.float64)
    with pytest.raises(pt_verify.MissingSendError, match="'h'") as info:
        _verify({"y": h * 2})
    assert isinstance(info.value, diagnostic.UnmatchedRecvError)


def test_duplicate_send_error():
    x = pt.make_placeholder("x", (3,), np.float64)
    a = pt.staple_distributed_send(x, dest_rank=1, comm_tag=9, stapled_to=x)
    b = pt.staple_distributed_send(2 * x, dest_rank=1, comm_tag=9,
                                   stapled_to=x + 1)
    with pytest.raises(pt_verify.DuplicateSendError, match="tag 9") as info:
        _verify({"a": a, "b": b})
    assert isinstance(info.value, diagnostic.DuplicateSendError)


def test_duplicate_recv_error():
    a = pt.make_distributed_recv(1, comm_tag=3, shape=(3,), dtype=np.float64)
    b = pt.make_distributed_recv(1, comm_tag=3, shape=(4,), dtype=np.float64)
    with pytest.raises(pt_verify.DuplicateRecvError, match="tag 3"):
        _verify({"a": a * 1, "b": b * 1})


def test_partition_induced_cycle_error_catches_a_deadlock():
    # one part that waits for a message it only sends itself afterwards
    x = pt.make_placeholder("_pt_in", (2,), np.float64)
    recv = pt.make_distributed_recv(0, comm_tag=5, shape=(2,))
    send = pt.make_distributed_send(x, dest_rank=0, comm_tag=5)
    part = pt.DistributedGraphPart(
        pid=0, needed_pids=frozenset(), user_input_names=frozenset(),
        partition_input_names=frozenset({"_pt_in"}),
        output_names=frozenset({"s"}),
        name_to_recv_node={"_pt_in": recv}, name_to_send_nodes={"s": [send]})
    partition = pt.DistributedGraphPartition(
        parts={0: part}, name_to_output={"s": x * 2}, overall_output_names=())
    with pytest.raises(pt_verify.PartitionInducedCycleError,
                       match="rank 0 part 0") as info:
        pt.verify_distributed_partition(None, partition)
    assert isinstance(info.value, diagnostic.CycleAcrossRanksError)


def test_generic_partition_cycle_is_the_same_error():
    x = pt.make_placeholder("x", (3,), np.float64)
    a = x + 1
    b = a * 2
    c = b - 3
    with pytest.raises(pt_verify.PartitionInducedCycleError):
        pt.partition.find_partition(
            {"c": c}, lambda node: "B" if node is b else "AC")

# }}}


def test_partition_module_type_aliases():
    from collections.abc import Hashable

    from pytato_like.distributed.partition import CommunicationDepGraph, PartId
    assert PartId is Hashable
    a = CommunicationOpIdentifier(0, 1, "t")
    graph: CommunicationDepGraph = {a: frozenset()}   # usable as pytato's
    assert graph[CommunicationOpIdentifier(0, 1, "t")] == frozenset()
