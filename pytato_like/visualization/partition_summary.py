"""A partition drawn one box per part, with repeated steps collapsed.

.. autofunction:: get_partition_summary_dot
.. autodata:: PARTITION_FULL_MAX_NODES

Drawing every part's DAG (:func:`~pytato_like.visualization.dot.
get_dot_graph_from_partition` with ``view="full"``) stops being readable
beyond a few hundred nodes: the 3-step heat run of
``examples/distributed_profile.ipynb`` drew 11 380 x 6 756 pixels. This
view draws what the partition *does* instead:

1. For each part, in the partition's topological order, a signature: the
   node count by kind of the part's DAG, its outputs' shapes and dtypes,
   the ranks it receives from and sends to. One walk per part; linear in
   the partition's size.
2. Consecutive parts with equal signatures form a run: the steps of a time
   loop, each cut at its halo receive, are alike, so 32 steps become one
   box "parts 1 ... 32 (32 alike)".
3. One box per run: its node kinds, outputs, messages and, with a trace,
   per rank the parts' mean and maximum time and their total share of the
   execution (the box filled from white to red by that share, as in the
   full view). One box per peer rank, joined to the runs that receive from
   and send to it, labelled with the messages' sizes and times in flight
   when the trace has them. Edges between runs follow ``needed_pids``.
   A note gives the partitioner's interior/boundary split decision and
   its reason (``partition.overlap_decision``), if any.

The full view stays the default for partitions of at most
:data:`PARTITION_FULL_MAX_NODES` nodes in all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from pytato_like._traversal import topological_order
from pytato_like.array import Array
from pytato_like.visualization._dot_writer import (
    COMM_COLOR,
    DotWriter,
    escape_html,
    format_ms,
    html_table_label,
    message_tag,
    partition_rank,
    quote,
    sends_of,
    share_color,
)

if TYPE_CHECKING:
    from pytato_like.distributed.nodes import DistributedRecv, DistributedSend
    from pytato_like.partition import GraphPartition
    from pytato_like.runtime.trace import PartitionProfile

#: ``view="auto"`` draws every part's DAG up to this many nodes in all, and
#: the per-part summary beyond
PARTITION_FULL_MAX_NODES = 150
#: names and kinds listed in a box before "..."
_MAX_LISTED = 4


@dataclasses.dataclass
class _Run:
    """Consecutive parts with one signature."""

    signature: tuple
    pids: list[Hashable]
    n_nodes: int
    kinds: tuple[tuple[str, int], ...]
    outputs: list[str]
    recv_from: dict[int, list[DistributedRecv]]   # src rank -> receives of the run
    send_to: dict[int, list[DistributedSend]]     # dest rank -> sends of the run


def partition_node_count(partition: GraphPartition) -> int:
    """Nodes of all parts' DAGs together (a node shared by two parts'
    outputs counts in each)."""
    total = 0
    for pid in partition.toposorted_part_ids:
        total += len(topological_order(_part_roots(partition, pid)))
    return total


def _part_roots(partition: GraphPartition, pid: Hashable) -> list[Array]:
    part = partition.parts[pid]
    roots = [partition.var_name_to_result[name]
             for name in sorted(part.output_names, key=str)
             if name in partition.var_name_to_result]
    roots += [send.data for _, send in sends_of(part)
              if isinstance(getattr(send, "data", None), Array)]
    return roots


def _listed(items: list[str]) -> str:
    text = ", ".join(items[:_MAX_LISTED])
    return text + (f", ... ({len(items)})" if len(items) > _MAX_LISTED else "")


def _runs(partition: GraphPartition) -> list[_Run]:
    runs: list[_Run] = []
    for pid in partition.toposorted_part_ids:
        part = partition.parts[pid]
        order = topological_order(_part_roots(partition, pid))
        counts: dict[str, int] = {}
        for node in order:
            counts[type(node).__name__] = counts.get(type(node).__name__, 0) + 1
        kinds = tuple(sorted(counts.items(), key=lambda kc: (-kc[1], kc[0])))
        outputs = sorted(map(str, part.output_names))
        results = [partition.var_name_to_result[name]
                   for name in sorted(part.output_names, key=str)
                   if name in partition.var_name_to_result]
        recvs = list((getattr(part, "input_name_to_recv_node", None)
                      or {}).values())
        sends = [send for _, send in sends_of(part)]
        signature = (
            kinds,
            tuple((tuple(map(str, r.shape)), str(r.dtype)) for r in results),
            tuple(sorted((r.src_rank, tuple(map(str, r.shape))) for r in recvs)),
            tuple(sorted((s.dest_rank, tuple(map(str, s.data.shape)))
                         for s in sends)))
        if runs and runs[-1].signature == signature:
            run = runs[-1]
            run.pids.append(pid)
            run.outputs.extend(outputs)
        else:
            run = _Run(signature, [pid], len(order), kinds, outputs, {}, {})
            runs.append(run)
        for recv in recvs:
            run.recv_from.setdefault(recv.src_rank, []).append(recv)
        for send in sends:
            run.send_to.setdefault(send.dest_rank, []).append(send)
    return runs


def _run_title(run: _Run) -> str:
    if len(run.pids) == 1:
        return f"part {run.pids[0]}"
    return f"parts {run.pids[0]} ... {run.pids[-1]} ({len(run.pids)} alike)"


def _message_figures(profile: Any, partition: GraphPartition,
                     keys: list[tuple]) -> str:
    """``"tags 100, 101: 64 bytes each, in flight 0.210 ms mean"`` for the
    messages *keys* (src, dest, comm tag), as far as the trace has them."""
    # (profile: a PartitionProfile or None; Any because the annotation of
    # PartitionProfile.messages is a union of its entries' value types)
    if profile is None:
        tags = [repr(comm_tag) for _, _, comm_tag in keys]
        return (f"{len(keys)} message{'s' if len(keys) != 1 else ''}: "
                f"{_listed(tags)}")
    found = []
    for src, dest, comm_tag in keys:
        tag = message_tag(partition, src, dest, comm_tag)
        msg = profile.messages.get((src, dest, tag))
        if msg is not None:
            found.append((tag, msg))
    if not found:
        return f"{len(keys)} messages, not in the trace"
    tags = sorted({str(tag) for tag, _ in found}, key=lambda t: (len(t), t))
    nbytes = sorted({m["nbytes"] for _, m in found})
    flights = [m["in_flight_s"] for _, m in found
               if m["in_flight_s"] is not None]
    size = (f"{nbytes[0]} bytes" if len(nbytes) == 1
            else f"{nbytes[0]} to {nbytes[-1]} bytes")
    text = (f"tag {tags[0]}: {size}" if len(tags) == 1
            else f"tags {_listed(tags)}: {size} each")
    if flights:
        text += f", in flight {format_ms(sum(flights) / len(flights))} mean"
    return text


def get_partition_summary_dot(partition: GraphPartition,
                              profile: PartitionProfile | None = None,
                              rank: int | None = None) -> str:
    """Dot source of the per-part summary of *partition* (see the module
    docs); *profile* is a :class:`~pytato_like.runtime.trace.
    PartitionProfile` (or ``None``), *rank* the rank the partition
    belongs to."""
    if profile is not None and rank is None:
        rank = partition_rank(partition, profile)
    trace_ranks = sorted({r for r, _ in profile.parts}) if profile else []
    runs = _runs(partition)
    writer = DotWriter()
    run_of_pid = {pid: i for i, run in enumerate(runs) for pid in run.pids}
    peers: set[int] = set()

    for i, run in enumerate(runs):
        rows = [("nodes", f"{run.n_nodes}"
                 + (" per part" if len(run.pids) > 1 else "")),
                ("kinds", _listed([f"{n} {k}" for k, n in run.kinds])),
                ("outputs", _listed(run.outputs) or "none")]
        for src, recvs in sorted(run.recv_from.items()):
            rows.append((f"receives from rank {src}", _message_figures(
                profile, partition,
                [(src, rank, r.comm_tag) for r in recvs])))
            peers.add(src)
        for dest, sends in sorted(run.send_to.items()):
            rows.append((f"sends to rank {dest}", _message_figures(
                profile, partition,
                [(rank, dest, s.comm_tag) for s in sends])))
            peers.add(dest)
        share = 0.0
        for r in trace_ranks:
            assert profile is not None  # (no trace ranks without a profile)
            got = [p for p in (profile.part(r, pid) for pid in run.pids)
                   if p is not None]
            if not got:
                continue
            total_share = sum(p["share"] for p in got)
            share = max(share, total_share)
            rows.append(("time",
                         f"rank {r}: "
                         f"{format_ms(sum(p['mean_s'] for p in got) / len(got))} mean, "
                         f"{format_ms(max(p['max_s'] for p in got))} max, "
                         f"{100 * total_share:.0f}% of execution"))
        color = share_color(share) if profile is not None else "#e9ecef"
        writer.node(f"run{i}", html_table_label(_run_title(run), rows, color))

    edges: set[tuple[int, int]] = set()
    for pid in partition.toposorted_part_ids:
        for needed in partition.parts[pid].needed_pids:
            a, b = run_of_pid.get(needed), run_of_pid[pid]
            if a is not None and a != b:
                edges.add((a, b))
    for a, b in sorted(edges):
        writer.edge(f"run{a}", f"run{b}")

    for peer in sorted(peers):
        writer.node(f"rank{peer}", f"<<b>rank {peer}</b>>", shape="box",
                    style='"rounded,filled"', fillcolor=quote(COMM_COLOR))
    for i, run in enumerate(runs):
        for src in sorted(run.recv_from):
            writer.edge(f"rank{src}", f"run{i}", style="bold",
                        constraint="false")
        for dest in sorted(run.send_to):
            writer.edge(f"run{i}", f"rank{dest}", style="bold",
                        constraint="false")
    if not runs:
        writer.node("empty", f"<{escape_html('an empty partition')}>")
    decision = getattr(partition, "overlap_decision", None)
    if decision is not None:
        # why the partitioner did (not) split interior and boundary
        writer.node("overlap", "<" + escape_html(
            f"interior/boundary {decision.reason}") + ">", shape="note")
    return writer.source("partition")
