"""Graphviz dot source for array DAGs and their partitions.

.. autofunction:: get_dot_graph
.. autofunction:: get_dot_graph_from_partition

Large partitions are drawn one box per part, repeated steps collapsed
(:mod:`pytato_like.visualization.partition_summary`).

The drawing has one node per DAG node (shared nodes drawn once), labelled
with its type, shape, dtype, input name, scalar expression or einsum
subscripts, and tags. Edges run from an operand to the node that reads it
and carry the slot the operand fills (binding name, argument position,
``index[i]``); arrays that only give a shape are joined by dashed edges.
Outputs of a :class:`~pytato_like.DictOfNamedArrays` are drawn as separate
boxes named after the output. Node ids are ``n<k>`` where *k* is the node's
position in :func:`pytato_like._traversal.topological_order` of the result's
arrays (``p<i>_n<k>`` inside part *i* of a partition).

With ``trace=`` (the records of ``DistributedExecution.fetch_trace()``, a
merged :class:`~pytato_like.runtime.trace.Trace` from
:func:`~pytato_like.runtime.trace.gather_traces`, or a saved
Chrome/Perfetto trace file), the partition drawing becomes a profile:
each part's label adds, per rank in the trace, the part's mean and maximum
time over the traced executions and its share of the execution time
(``rank 0: 1.250 ms mean, 1.900 ms max, 31% of execution``); parts are
filled from white to red by that share (the largest over the ranks); each
send and receive box adds its packed message's size and time in flight
(``message tag 100: 64 bytes``, ``in flight 0.210 ms mean, 0.400 ms
max``), which also label the message's edge. Figures come from
:func:`~pytato_like.runtime.trace.profile_partition`.

Labels are graphviz HTML-like labels with every text escaped, so names and
tags may contain any characters. Everything is built over one topological
order, without recursion, in time linear in the size of the DAG.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DataWrapper,
    DictOfNamedArrays,
    Einsum,
    IndexLambda,
    NamedArray,
    Placeholder,
    SizeParam,
)
from pytato_like.diagnostic import VisualizationError
from pytato_like.function import Call
from pytato_like.runtime.trace import profile_partition
from pytato_like.visualization import partition_summary as summary
from pytato_like.visualization._describe import (
    describe_node,
    normalize_result,
    operand_edges,
    shape_text,
)
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
    from typing_extensions import TypeIs

    from pytato_like.function import FunctionDefinition
    from pytato_like.partition import GraphPartition
    from pytato_like.runtime.trace import TraceSource

# Header colours by node family, so inputs and data movement stand out.
_INPUT_COLORS = {Placeholder: "#cfe2ff", DataWrapper: "#d1e7dd",
                 SizeParam: "#fff3cd"}
_COMPUTE_COLORS = {IndexLambda: "#e9ecef", Einsum: "#e2d9f3"}
_NAMED_COLOR = "#dee2e6"
_REMAP_COLOR = "#f8d7da"
_OUTPUT_COLOR = "#ffe5d0"


def _header_color(node: Array) -> str:
    for table in (_INPUT_COLORS, _COMPUTE_COLORS):
        for cls, color in table.items():
            if isinstance(node, cls):
                return color
    if isinstance(node, NamedArray):
        return _NAMED_COLOR
    return _REMAP_COLOR


def _emit_dag(writer: DotWriter, roots: list[Array], prefix: str = "",
              indent: str = "  ") -> tuple[list[Array], dict[int, str]]:
    """Write the nodes and edges of the DAG under *roots*; return the
    topological order and ``id(node) -> dot id``."""
    order = topological_order(roots)
    ids = {id(node): f"{prefix}n{k}" for k, node in enumerate(order)}
    for node in order:
        title, rows = describe_node(node)
        node_id = ids[id(node)]
        writer.node(node_id, html_table_label(title, rows, _header_color(node)),
                    indent=indent)
        for child, label, is_shape in operand_edges(node):
            if is_shape:
                writer.edge(ids[id(child)], node_id, label, indent=indent,
                            style="dashed")
            else:
                writer.edge(ids[id(child)], node_id, label, indent=indent)
    return order, ids


def _output_box(writer: DotWriter, box_id: str, name: str,
                indent: str = "  ", title: str = "output") -> None:
    writer.node(box_id, f"<<b>{title}</b> {escape_html(name)}>", indent=indent,
                shape="box", style='"rounded,filled"',
                fillcolor=quote(_OUTPUT_COLOR))


def _is_partition(value: object) -> TypeIs[GraphPartition]:
    return all(hasattr(value, name) for name in
               ("parts", "toposorted_part_ids", "var_name_to_result"))


def get_dot_graph(result: Array | DictOfNamedArrays | Mapping[str, Array]
                  | GraphPartition, trace: TraceSource | None = None,
                  rank: int | None = None, view: str = "auto") -> str:
    """Dot source drawing the computation of *result* (an
    :class:`~pytato_like.Array`, a :class:`~pytato_like.DictOfNamedArrays` or a
    dict of arrays), or of a partition: then as
    :func:`get_dot_graph_from_partition` with *trace*, *rank* and *view*
    (which only a partition takes)."""
    if _is_partition(result):
        return get_dot_graph_from_partition(result, trace=trace, rank=rank,
                                            view=view)
    if trace is not None or rank is not None:
        raise VisualizationError(
            "trace= and rank= draw the profile of a partition; got a "
            f"{type(result).__name__} (draw its partition, e.g. from "
            "find_distributed_partition)")
    roots, output_names = normalize_result(result)
    writer = DotWriter()
    order, ids = _emit_dag(writer, roots)
    k = 0
    for root in roots:
        for name in output_names.get(id(root), ()):
            _output_box(writer, f"out{k}", name)
            writer.edge(ids[id(root)], f"out{k}")
            k += 1
    _emit_function_clusters(writer, order, ids)
    return writer.source()


def _emit_function_clusters(writer: DotWriter, order: list[Array],
                            ids: dict[int, str]) -> None:
    """Draw each function definition called in the DAG once, as a cluster
    holding its body and its returns, with a dotted edge from every call of
    it (calls inside bodies are followed the same way, without recursion)."""
    clusters: dict[FunctionDefinition, str] = {}
    pending = [(node, ids[id(node)]) for node in order if type(node) is Call]
    while pending:
        call, call_id = pending.pop(0)
        function = call.function
        cluster = clusters.get(function)
        if cluster is None:
            cluster = clusters[function] = f"f{len(clusters)}"
            name = function.identifier or "anonymous"
            writer.lines.append(f"  subgraph cluster_{cluster} {{")
            writer.lines.append(f"    label={quote(f'function {name}')};")
            writer.lines.append('    style="rounded,dashed";')
            returns = list(function.returns.values())
            body_order, body_ids = _emit_dag(writer, returns,
                                             prefix=f"{cluster}_",
                                             indent="    ")
            for j, (ret_name, ret) in enumerate(function.returns.items()):
                box = f"{cluster}_ret{j}"
                _output_box(writer, box, ret_name, indent="    ",
                            title="return")
                writer.edge(body_ids[id(ret)], box, indent="    ")
            writer.lines.append("  }")
            pending.extend((node, body_ids[id(node)]) for node in body_order
                           if type(node) is Call)
        if function.returns:
            writer.edge(call_id, f"{cluster}_ret0", "calls", style="dotted",
                        constraint="false")


# {{{ partitions

def _comm_box(writer: DotWriter, box_id: str, title: str,
              rows: list[tuple[str, str]], indent: str) -> None:
    writer.node(box_id, html_table_label(title, rows, COMM_COLOR),
                indent=indent)


def _array_rows(ary: object) -> list[tuple[str, str]]:
    rows = []
    if hasattr(ary, "shape"):
        rows.append(("shape", shape_text(tuple(ary.shape))))
    if hasattr(ary, "dtype"):
        rows.append(("dtype", str(ary.dtype)))
    return rows


def _message_rows(profile: Any, key: tuple) -> tuple[list[tuple[str, str]], str]:
    """Rows for a send/receive box and the label of its message edge."""
    # (profile: a PartitionProfile or None; Any because the annotation of
    # PartitionProfile.messages is a union of its entries' value types)
    if profile is None:
        return [], ""
    msg = profile.messages.get(key)
    if msg is None:
        return [("message", f"tag {key[2]}: not in the trace")], ""
    rows = [("message", f"tag {key[2]}: {msg['nbytes']} bytes"),
            ("in flight", f"{format_ms(msg['in_flight_s'])} mean, "
                          f"{format_ms(msg['max_in_flight_s'])} max")]
    return rows, f"{msg['nbytes']} B, {format_ms(msg['in_flight_s'])}"


def get_dot_graph_from_partition(partition: GraphPartition,
                                 trace: TraceSource | None = None,
                                 rank: int | None = None,
                                 view: str = "auto") -> str:
    """Dot source drawing *partition* (a ``GraphPartition`` or
    ``DistributedGraphPartition``, e.g. from
    :func:`pytato_like.partition.find_partition`): one cluster per part,
    labelled with its id and the parts it needs, holding the DAG of the
    part's outputs and a box per output name (``part output`` for names
    that only other parts read, when the partition records its
    ``overall_output_names``). A dashed edge runs from each
    output box to the placeholder of the same name in every part that reads
    it. In a distributed partition, receives (source rank, tag) feed the
    placeholders they fill and sends (destination rank, tag) hang off the
    array they send.

    :arg trace: draw the profile of this trace (see the module docs):
        anything :func:`~pytato_like.runtime.trace.load_trace` accepts.
    :arg rank: the rank *partition* belongs to (for its messages in the
        trace); by default the one rank all its messages involve.
    :arg view: ``"full"`` draws every part's DAG as described above;
        ``"parts"`` one box per part with consecutive alike parts (the steps
        of a time loop) collapsed into one
        (:mod:`~pytato_like.visualization.partition_summary`); ``"auto"``
        (the default) the full view up to
        :data:`~pytato_like.visualization.partition_summary.PARTITION_FULL_MAX_NODES`
        nodes in all, the parts view beyond.
    """
    try:
        parts = partition.parts
        part_ids = list(partition.toposorted_part_ids)
        var_name_to_result = partition.var_name_to_result
    except AttributeError as err:
        raise VisualizationError(
            f"a {type(partition).__name__} is not a graph partition (needs "
            "parts, toposorted_part_ids, var_name_to_result)") from err

    if view not in ("auto", "full", "parts"):
        raise VisualizationError(
            f"view={view!r}: expected 'auto', 'full' or 'parts'")
    profile = None
    if trace is not None:
        profile = profile_partition(trace)
        if rank is None:
            rank = partition_rank(partition, profile)
    if view != "full":
        if (view == "parts" or summary.partition_node_count(partition)
                > summary.PARTITION_FULL_MAX_NODES):
            return summary.get_partition_summary_dot(partition, profile, rank)
    trace_ranks = sorted({r for r, _ in profile.parts}) if profile else []

    result_names = getattr(partition, "overall_output_names", None) or None
    writer = DotWriter()
    producer_box: dict[str, str] = {}     # part output name -> output box id
    # (consumer dot id, name) for every partition input to join afterwards
    partition_inputs: list[tuple[str, str]] = []

    for ipart, pid in enumerate(part_ids):
        part = parts[pid]
        prefix = f"p{ipart}_"
        indent = "    "
        output_names = sorted(part.output_names, key=str)
        sends = sends_of(part)
        roots = [var_name_to_result[name] for name in output_names
                 if name in var_name_to_result]
        roots += [send.data for _, send in sends
                  if isinstance(getattr(send, "data", None), Array)]

        needed = ", ".join(sorted(map(str, part.needed_pids)))
        title = f"part {pid}" + (f" (needs {needed})" if needed else "")
        writer.lines.append(f"  subgraph cluster_{ipart} {{")
        if profile is None:
            writer.lines.append(f"    label={quote(title)};")
            writer.lines.append('    style="rounded"; color="#6c757d";')
        else:
            lines = [escape_html(title)]
            share = 0.0
            for r in trace_ranks:
                got = profile.part(r, pid)
                if got is None:
                    continue
                share = max(share, got["share"])
                lines.append(escape_html(
                    f"rank {r}: {format_ms(got['mean_s'])} mean, "
                    f"{format_ms(got['max_s'])} max, "
                    f"{100 * got['share']:.0f}% of execution"))
            writer.lines.append(f"    label=<{'<br/>'.join(lines)}>;")
            writer.lines.append('    style="rounded,filled"; color="#6c757d"; '
                                f"fillcolor={quote(share_color(share))};")
        order, ids = _emit_dag(writer, roots, prefix, indent)

        placeholder_ids = {node.name: ids[id(node)] for node in order
                           if isinstance(node, Placeholder)}

        for k, name in enumerate(output_names):
            if name not in var_name_to_result:
                continue
            box = f"{prefix}out{k}"
            # names only other parts read are "part outputs"
            is_result = result_names is None or name in result_names
            _output_box(writer, box, str(name), indent,
                        "output" if is_result else "part output")
            writer.edge(ids[id(var_name_to_result[name])], box, indent=indent)
            producer_box[name] = box

        for k, name in enumerate(sorted(part.partition_input_names, key=str)):
            target = placeholder_ids.get(name)
            if target is None:  # the part's DAG has no placeholder for it
                target = f"{prefix}in{k}"
                writer.node(target, f"<<b>input</b> {escape_html(name)}>",
                            indent=indent, shape="box", style="rounded")
            partition_inputs.append((target, name))

        recvs = getattr(part, "input_name_to_recv_node", {}) or {}
        for k, (name, recv) in enumerate(sorted(recvs.items(),
                                                key=lambda i: str(i[0]))):
            if id(recv) in ids:
                continue  # the receive is itself a node of the part's DAG
            box = f"{prefix}recv{k}"
            msg_rows, msg_label = _message_rows(profile, (
                recv.src_rank, rank,
                message_tag(partition, recv.src_rank, rank, recv.comm_tag)))
            _comm_box(writer, box, f"receive from rank {recv.src_rank}",
                      [("tag", repr(recv.comm_tag)), ("name", str(name)),
                       *_array_rows(recv), *msg_rows], indent)
            if name in placeholder_ids:
                writer.edge(box, placeholder_ids[name], msg_label,
                            indent=indent, style="bold")

        for k, (send_name, send) in enumerate(sends):
            box = f"{prefix}send{k}"
            rows = [("tag", repr(send.comm_tag))]
            if send_name is not None:
                rows.append(("name", str(send_name)))
            msg_rows, msg_label = _message_rows(profile, (
                rank, send.dest_rank,
                message_tag(partition, rank, send.dest_rank, send.comm_tag)))
            _comm_box(writer, box, f"send to rank {send.dest_rank}",
                      rows + _array_rows(send.data) + msg_rows, indent)
            if id(send.data) in ids:
                writer.edge(ids[id(send.data)], box, msg_label, indent=indent,
                            style="bold")
        writer.lines.append("  }")

    for target, name in partition_inputs:
        if name in producer_box:
            writer.edge(producer_box[name], target, style="dashed",
                        color=quote("#0d6efd"))
    return writer.source("partition")

# }}}

# vim: foldmethod=marker
