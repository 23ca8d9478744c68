"""Issue 9, fact 5 (visualization part): ``show_fancy_placeholder_data_flow``
draws the flow from the placeholders into the outputs.

The drawing's dot source is parsed back into a graph and checked against
what each output depends on, worked out by hand for each program.
"""

import re

import numpy as np

import pytato_like as pt
from pytato_like.visualization.fancy_placeholder_data_flow import (
    get_fancy_placeholder_data_flow_dot,
)

_NODE = re.compile(r'^\s*(\w+) \[(.*)\];$')
_EDGE = re.compile(r'^\s*(\w+) -> (\w+);$')


def parse(dot):
    """``(nodes, edges)``: node id -> ``(shape, label)``, and a set of
    ``(src, dst)``."""
    nodes, edges = {}, set()
    for line in dot.splitlines():
        if m := _EDGE.match(line):
            assert m[1] in nodes and m[2] in nodes, line
            edges.add((m[1], m[2]))
        elif m := _NODE.match(line):
            if m[1] in ("node", "edge"):
                continue
            shape = re.search(r"shape=(\w+)", m[2])[1]
            label = re.search(r'label="((?:[^"\\]|\\.)*)"', m[2])
            nodes[m[1]] = (shape, label[1] if label else None)
    return nodes, edges


def reaching_placeholders(nodes, edges):
    """Output label -> set of placeholder labels with a path to it."""
    preds = {}
    for src, dst in edges:
        preds.setdefault(dst, set()).add(src)
    result = {}
    for node_id, (shape, label) in nodes.items():
        if shape != "doublecircle":
            continue
        seen, stack = set(), [node_id]
        while stack:
            n = stack.pop()
            for p in preds.get(n, ()):
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        result[label] = {nodes[n][1] for n in seen
                         if nodes[n][0] == "ellipse"}
    return result


def _program():
    x = pt.make_placeholder("x", (4, 4), np.float64)
    y = pt.make_placeholder("y", (4, 4), np.float64)
    z = pt.make_placeholder("z", (4,), np.int64)
    w = pt.make_data_wrapper(np.ones((4, 4)))
    const = pt.zeros((4, 4)) + 3
    return x, y, z, w, const, pt.make_dict_of_named_arrays({
        "mm": pt.einsum("ij,jk->ik", x, y) + const,
        "colsum": pt.sum(x, axis=0),
        "gathered": y[z],
        "stacked": pt.stack([x.T, w]),
        "wy": w * y,
        "only_constants": const * w,
    })


def test_outputs_are_fed_by_the_placeholders_they_depend_on():
    *_, dag = _program()
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot(dag))
    assert reaching_placeholders(nodes, edges) == {
        "mm": {"x", "y"},
        "colsum": {"x"},
        "gathered": {"y", "z"},
        "stacked": {"x"},
        "wy": {"y"},
    }  # "only_constants" reads no placeholder: not drawn


def test_only_placeholders_are_drawn_as_inputs():
    *_, dag = _program()
    nodes, _ = parse(get_fancy_placeholder_data_flow_dot(dag))
    inputs = sorted(label for shape, label in nodes.values()
                    if shape == "ellipse")
    assert inputs == ["x", "y", "z"]


def test_node_symbols_say_what_kind_of_work():
    *_, dag = _program()
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot(dag))
    by_shape = {}
    for node_id, (shape, label) in nodes.items():
        by_shape.setdefault(shape, []).append((node_id, label))
    # one einsum, labelled with subscripts of two operands and one result
    [(einsum_id, spec)] = by_shape["box3d"]
    assert re.fullmatch(r"[a-z]{2},[a-z]{2}->[a-z]{2}", spec)
    assert {nodes[s][1] for s, d in edges if d == einsum_id} == {"x", "y"}
    # the sum is the one reduction, fed by x alone
    [(red_id, _)] = by_shape["invtriangle"]
    assert {nodes[s][1] for s, d in edges if d == red_id} == {"x"}
    assert len(by_shape["hexagon"]) == 1       # y[z]
    assert len(by_shape["folder"]) == 1        # stack
    assert len(by_shape["doublecircle"]) == 5


def test_single_array_is_one_output():
    x = pt.make_placeholder("x", (3,), np.float64)
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot(pt.sin(x) * 2))
    assert reaching_placeholders(nodes, edges) == {"_pt_out": {"x"}}
    assert sum(shape == "diamond" for shape, _ in nodes.values()) == 2


def test_names_needing_quotes_survive():
    x = pt.make_placeholder("x", (3,), np.float64)
    dag = pt.make_dict_of_named_arrays({'say "hi"': x + 1})
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot(dag))
    assert reaching_placeholders(nodes, edges) == {'say \\"hi\\"': {"x"}}


def test_show_writes_the_drawing(tmp_path):
    *_, dag = _program()
    path = pt.show_fancy_placeholder_data_flow(dag,
                                               output_to=tmp_path / "flow.svg")
    svg = path.read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg"))
    for text in (">x<", ">y<", ">z<", ">colsum<", ">gathered<"):
        assert text in svg
    assert ">only_constants<" not in svg
    # the same function is importable where pytato has it
    assert (pt.visualization.show_fancy_placeholder_data_flow
            is pt.show_fancy_placeholder_data_flow)


def test_deep_chain(deep_chain):
    x, y = deep_chain
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot({"y": y}))
    # 100 000 steps of 0.5*y + 1.0: two elementwise nodes each
    assert sum(shape == "diamond" for shape, _ in nodes.values()) == 200_000
    assert len(edges) == 200_001
    assert reaching_placeholders(nodes, edges) == {"y": {"x"}}


def test_sends_and_receives_in_the_dag():
    x = pt.make_placeholder("x", (3,), np.float64)
    halo = pt.make_distributed_recv(src_rank=1, comm_tag="h", shape=(3,),
                                    dtype=np.float64)
    held = pt.staple_distributed_send(x * 2, dest_rank=1, comm_tag="h",
                                      stapled_to=x + 1)
    dag = pt.make_dict_of_named_arrays({"out": held - 1, "from_halo": halo * 3})
    nodes, edges = parse(get_fancy_placeholder_data_flow_dot(dag))
    # a received array is no placeholder: what only it feeds is not drawn;
    # the send holder stands for the array it holds the send on
    assert reaching_placeholders(nodes, edges) == {"out": {"x"}}
    assert sum(shape == "diamond" for shape, _ in nodes.values()) == 2
