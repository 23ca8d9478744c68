"""Tests of pytato_like.visualization: dot source, SVG display, ascii drawing.

References are independent of the renderers: edge sets are brute-forced from
``children_of``, labels are compared with Python's own ``str``/``repr`` of
shapes, dtypes and tags, graphviz itself checks the dot syntax, and the
ascii drawing is read back by a small lane-tracking parser.
"""

from __future__ import annotations

import html
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pytools.tag import Tag, tag_dataclass

import pytato_like as pt
from pytato_like.array import Array, children_of
from pytato_like.diagnostic import GraphvizNotFoundError, VisualizationError
from pytato_like.distributed import (
    find_distributed_partition,
    make_distributed_recv,
    staple_distributed_send,
)
from pytato_like.partition import find_partition
from pytato_like.visualization import (
    get_ascii_graph,
    get_dot_graph,
    get_dot_graph_from_partition,
    show_ascii_graph,
    show_dot_graph,
)

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="graphviz 'dot' is not installed")


@tag_dataclass
class AwkwardTag(Tag):
    text: str


AWKWARD = "<b>&amp;\"quoted\" 'single' \\back{brace}[x]|y\nnew\ttab é🙂"
AWKWARD_OUTPUT = "out <&> \"q\" \\ é🙂"


# {{{ helpers

def all_nodes(roots):
    """Brute force: every array reachable from *roots* (by identity)."""
    seen: dict[int, Array] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(children_of(node))
    return seen


def brute_force_edges(roots):
    """``{(id(operand), id(user))}`` from ``children_of``."""
    return {(id(child), id(node))
            for node in all_nodes(roots).values()
            for child in children_of(node)}


def roots_of(result):
    if isinstance(result, pt.DictOfNamedArrays):
        return list(result._data.values())
    if isinstance(result, dict):
        return list(result.values())
    return [result]


def dot_node_ids(roots):
    """The documented node ids: ``n<k>`` by topological position."""
    from pytato_like._traversal import topological_order
    return {id(node): f"n{k}" for k, node in enumerate(topological_order(roots))}


NODE_RE = re.compile(r"^\s*(\w+) \[label=(<.*>)(?:, .*)?\];$")
EDGE_RE = re.compile(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?;$")


def parse_dot(source):
    """``(node id -> label text, [(src, dst, attrs)])`` of our dot output."""
    labels, edges = {}, []
    for line in source.splitlines():
        m = EDGE_RE.match(line)
        if m:
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
            continue
        m = NODE_RE.match(line)
        if m:
            # HTML-like label -> plain text, cells separated by " | "
            text = re.sub(r"</td>", " | ", m.group(2)[1:-1])
            text = re.sub(r"<[^>]*>", "", text)
            labels[m.group(1)] = html.unescape(text)
    return labels, edges


def run_dot(source):
    proc = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True,
                          text=True, timeout=60, check=False)
    return proc


def every_node_type_dag():
    """A DictOfNamedArrays containing every node class, symbolic shapes,
    tags and axis tags with awkward characters, and an awkward output name."""
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 4), tags=AwkwardTag(AWKWARD))
    y = pt.make_placeholder("y", (3, 4)).with_tagged_axis(1, AwkwardTag("ax<1>"))
    w = pt.make_data_wrapper(np.arange(4.0), name="w_data")
    anon = pt.make_data_wrapper(np.ones((4, 4)))
    ein = pt.einsum("ij,jk->ik", x, anon)
    red = pt.sum(ein, axis=1)
    idx = pt.make_placeholder("idx", (2,), dtype=np.int64)
    y3 = pt.make_placeholder("y3", (3, 4, 5), dtype=np.float32)
    rolled = pt.roll(y, 1, axis=1)
    inner = pt.make_dict_of_named_arrays({"a": red, "b": rolled})
    halo = make_distributed_recv(1, ("halo<&>", 3), (3, 4), np.float64)
    sent = staple_distributed_send(2 * y, dest_rank=1, comm_tag=("halo<&>", 3),
                                   stapled_to=y + halo)
    return pt.make_dict_of_named_arrays({
        "red": red,
        "cat": pt.concatenate([y, rolled], axis=0),
        "st": pt.stack([y, y * w], axis=0),
        "resh": pt.reshape(y, (4, 3)),
        "perm": pt.transpose(y),
        "bidx": y[1:, 2],
        "adv_c": y[:, idx],
        "adv_nc": y3[idx, :, idx],
        "named": inner["a"] + 1,
        "sent": sent,
        AWKWARD_OUTPUT: (2 * y).tagged(AwkwardTag("tag]>")),
    })


def chain(depth):
    x = pt.make_placeholder("x", (4,))
    y = x
    for _ in range(depth):
        y = 0.5 * y + 1.0
    return y


@pytest.fixture
def default_recursion_limit():
    """Python's default limit, even if something raised it earlier."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


@pytest.fixture(scope="module")
def deep_dag():
    """100 000 levels, 200 001 nodes, built once for the module."""
    return chain(100_000)


def random_dag(seed, n_inputs=5, n_ops=60):
    """A random DAG of binary/unary operations over a few placeholders, with
    several outputs (some also used inside the graph)."""
    rng = random.Random(seed)
    pool = [pt.make_placeholder(f"in{i}", (3,)) for i in range(n_inputs)]
    for _ in range(n_ops):
        kind = rng.random()
        a = rng.choice(pool)
        if kind < 0.6:
            b = rng.choice(pool)
            pool.append(a + b if rng.random() < 0.5 else a * b)
        elif kind < 0.8:
            pool.append(pt.sin(a))
        else:
            pool.append(pt.stack([a, rng.choice(pool), rng.choice(pool)])[1])
    outputs = {f"o{i}": ary for i, ary in enumerate(rng.sample(pool[n_inputs:], 4))}
    return pt.make_dict_of_named_arrays(outputs)

# }}}


# {{{ get_dot_graph

def test_dot_has_one_statement_per_dag_node():
    result = every_node_type_dag()
    labels, _ = parse_dot(get_dot_graph(result))
    dag_nodes = all_nodes(roots_of(result))
    node_labels = {k: v for k, v in labels.items() if k.startswith("n")}
    assert len(node_labels) == len(dag_nodes)
    assert set(node_labels) == set(dot_node_ids(roots_of(result)).values())


def test_dot_edges_are_exactly_the_dag_edges():
    for result in (every_node_type_dag(), random_dag(0), random_dag(1)):
        roots = roots_of(result)
        ids = dot_node_ids(roots)
        _, edges = parse_dot(get_dot_graph(result))
        drawn = {(src, dst) for src, dst, _ in edges if dst.startswith("n")}
        expected = {(ids[c], ids[u]) for c, u in brute_force_edges(roots)}
        assert drawn == expected
        # no operand->user pair drawn twice (x*x binds x twice: one edge)
        assert len([e for e in edges if e[1].startswith("n")]) == len(expected)


def test_dot_labels_show_type_shape_dtype_names_and_tags():
    result = every_node_type_dag()
    roots = roots_of(result)
    ids = dot_node_ids(roots)
    labels, _ = parse_dot(get_dot_graph(result))
    for node in all_nodes(roots).values():
        label = labels[ids[id(node)]]
        assert label.startswith(type(node).__name__), label
        assert str(node.dtype) in label
        if all(isinstance(d, int) for d in node.shape):
            assert str(tuple(node.shape)) in label
        for tag in node.tags:
            assert repr(tag)[:40] in label
        if isinstance(node, (pt.Placeholder, pt.SizeParam)) or (
                isinstance(node, pt.DataWrapper) and node.name is not None):
            assert f"name | {node.name} |" in label
    x, = (node for node in all_nodes(roots).values()
          if isinstance(node, pt.Placeholder) and node.name == "x")
    # symbolic shape written with the size parameter's name
    assert "shape | (n, 4) |" in labels[ids[id(x)]]
    y, = (node for node in all_nodes(roots).values()
          if isinstance(node, pt.Placeholder) and node.name == "y")
    assert "axis 1 | AwkwardTag(text='ax<1>')" in labels[ids[id(y)]]


def test_symbolic_shapes_are_written_as_correct_expressions():
    n = pt.make_size_param("n")
    m = pt.make_size_param("m")
    shapes = [(3 * (n + 1),), ((n + 1) * (m - 2), n // 2), ((n + m) * (n - m), 4)]
    result = {f"a{i}": pt.make_placeholder(f"a{i}", shape)
              for i, shape in enumerate(shapes)}
    labels, _ = parse_dot(get_dot_graph(result))
    texts = {re.search(r"name \| (a\d) \|", v)[1]:
             re.search(r"shape \| (.*?) \| dtype", v)[1]
             for v in labels.values() if v.startswith("Placeholder")}
    for nv, mv in [(7, 5), (2, 11)]:
        expected = [(3 * (nv + 1),), ((nv + 1) * (mv - 2), nv // 2),
                    ((nv + mv) * (nv - mv), 4)]
        for i, shape in enumerate(expected):
            assert eval(texts[f"a{i}"], {"n": nv, "m": mv}) == shape


def test_dot_labels_show_expressions_and_einsum_subscripts():
    a = pt.make_placeholder("a", (3, 4))
    b = pt.make_placeholder("b", (4, 5))
    result = {"e": pt.einsum("ij,jk->ik", a, b), "s": pt.sin(a) + 2.0}
    labels, _ = parse_dot(get_dot_graph(result))
    text = "\n".join(labels.values())
    # letters are canonical: output axes i, j, ..., then reduction axes
    assert "subscripts | ik,kj->ij |" in text
    assert "expr | sin(_in0[_0, _1]) |" in text
    assert "expr | _in0[_0, _1] + 2.0 |" in text


def test_dot_edge_labels_name_bindings_arguments_and_shapes():
    n = pt.make_size_param("n")
    a = pt.make_placeholder("a", (n,))
    b = pt.make_placeholder("b", (n,))
    result = pt.concatenate([a * b, a], axis=0)
    ids = dot_node_ids([result])
    _, edges = parse_dot(get_dot_graph(result))
    attrs = {(s, d): at for s, d, at in edges}
    prod = result.arrays[0]
    assert attrs[(ids[id(a)], ids[id(prod)])] == 'label="_in0"'
    assert attrs[(ids[id(b)], ids[id(prod)])] == 'label="_in1"'
    assert attrs[(ids[id(prod)], ids[id(result)])] == 'label="0"'
    assert attrs[(ids[id(a)], ids[id(result)])] == 'label="1"'
    # the size parameter only gives shapes: dashed edge labelled shape[0]
    assert attrs[(ids[id(n)], ids[id(a)])] == 'label="shape[0]", style=dashed'


def test_dot_outputs_are_named_boxes_fed_by_their_arrays():
    result = every_node_type_dag()
    ids = dot_node_ids(roots_of(result))
    labels, edges = parse_dot(get_dot_graph(result))
    box_of_name = {labels[k].replace("output ", "", 1): k
                   for k in labels if k.startswith("out")}
    assert set(box_of_name) == set(result)
    for name, ary in result._data.items():
        assert (ids[id(ary)], box_of_name[name], "") in edges


def test_one_array_under_two_output_names_gets_both_boxes():
    x = pt.make_placeholder("x", (3,))
    y = 2 * x
    result = {"first": y, "second": y}
    ids = dot_node_ids([y])
    labels, edges = parse_dot(get_dot_graph(result))
    boxes = {labels[k]: k for k in labels if k.startswith("out")}
    assert set(boxes) == {"output first", "output second"}
    assert {(s, d) for s, d, _ in edges if d.startswith("out")} == {
        (ids[id(y)], boxes["output first"]), (ids[id(y)], boxes["output second"])}
    last = get_ascii_graph(result, use_color=False).splitlines()[-1]
    assert last.endswith("⇒ first, second")


def test_dot_shared_node_is_drawn_once():
    x = pt.make_placeholder("x", (3,))
    shared = pt.exp(x)
    result = {"p": shared * shared, "q": shared + x}
    labels, edges = parse_dot(get_dot_graph(result))
    assert sum("expr | exp(" in v for v in labels.values()) == 1
    assert sum(v.startswith("Placeholder") for v in labels.values()) == 1


@needs_dot
def test_graphviz_accepts_every_node_type_and_awkward_text():
    proc = run_dot(get_dot_graph(every_node_type_dag()))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    svg = proc.stdout
    assert "<svg" in svg
    # the awkward output name reaches the picture as text, escaped for XML
    assert html.escape(AWKWARD_OUTPUT) in svg


@needs_dot
def test_graphviz_accepts_random_dags():
    for seed in range(3):
        proc = run_dot(get_dot_graph(random_dag(seed)))
        assert proc.returncode == 0, proc.stderr


def test_dot_of_single_array_and_plain_dict():
    x = pt.make_placeholder("x", (2,))
    labels, edges = parse_dot(get_dot_graph(x + 1))
    assert len(labels) == 2 and len(edges) == 1  # no output box for an Array
    labels, _ = parse_dot(get_dot_graph({"r": x + 1}))
    assert "output r" in labels.values()


def test_dot_rejects_what_is_not_a_dag():
    with pytest.raises(VisualizationError, match="int"):
        get_dot_graph(3)
    with pytest.raises(pt.diagnostic.NotAnArrayError, match="'r'"):
        get_dot_graph({"r": np.ones(3)})


def test_dot_deep_dag_at_default_recursion_limit(deep_dag,
                                                 default_recursion_limit):
    source = get_dot_graph(deep_dag)
    lines = source.splitlines()
    assert sum(" -> " not in line and " [label=" in line
               for line in lines) == 200_001
    assert sum(" -> " in line for line in lines) == 200_000

# }}}


# {{{ get_ascii_graph

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MARKERS = "●◉○"


def edges_from_ascii(text):
    """Read the drawing back: ``{(operand index, user index)}`` plus checks
    that every live lane is drawn on every line until it ends."""
    lanes: dict[int, int] = {}
    edges = set()
    indices = []
    for line in text.splitlines():
        cut = line.index("%")
        glyphs = line[:cut].rstrip()[0::2]
        index = int(line[cut + 1:].split(" ", 1)[0])
        indices.append(index)
        marks = [k for k, g in enumerate(glyphs) if g in MARKERS]
        assert len(marks) == 1, line
        col = marks[0]
        for k in lanes:  # a live lane never vanishes silently
            assert k < len(glyphs) and glyphs[k] in "│┼├┤└┘" + MARKERS, line
        for k, g in enumerate(glyphs):
            if g in "│┼":
                assert k in lanes, line
        if col in lanes:
            edges.add((lanes.pop(col), index))
        for k, g in enumerate(glyphs):
            if g in "├┤":
                edges.add((lanes[k], index))
            elif g in "└┘":
                edges.add((lanes.pop(k), index))
        listed = re.search(r"  ← ((?:%\d+, )*%\d+)", line)
        if listed:
            edges |= {(int(m), index) for m in re.findall(r"%(\d+)", listed[1])}
        if glyphs[col] == "●":
            lanes[col] = index
    assert not lanes, "lanes left open at the end"
    assert indices == list(range(len(indices)))
    return edges


def expected_ascii_edges(result):
    from pytato_like._traversal import topological_order
    roots = roots_of(result)
    pos = {id(node): k for k, node in enumerate(topological_order(roots))}
    return {(pos[c], pos[u]) for c, u in brute_force_edges(roots)}


@pytest.mark.parametrize("max_lanes", [24, 3, 1])
def test_ascii_edges_are_exactly_the_dag_edges(max_lanes):
    for result in (every_node_type_dag(), random_dag(2), random_dag(3)):
        text = get_ascii_graph(result, use_color=False, max_lanes=max_lanes)
        assert edges_from_ascii(text) == expected_ascii_edges(result)


def test_ascii_wide_dag_lists_operands_beyond_max_lanes():
    xs = [pt.make_placeholder(f"x{i}", (2,)) for i in range(40)]
    result = {"cat": pt.concatenate(xs), "sum": pt.stack(xs).sum(axis=0)}
    text = get_ascii_graph(result, use_color=False)
    assert "← %" in text
    assert max(len(line.split("%", 1)[0]) for line in text.splitlines()) \
        <= 2 * (24 + 1) + 2
    assert edges_from_ascii(text) == expected_ascii_edges(result)


def test_ascii_labels_show_names_shapes_dtypes_tags_and_outputs():
    result = every_node_type_dag()
    lines = get_ascii_graph(result, use_color=False).splitlines()
    from pytato_like._traversal import topological_order
    order = topological_order(roots_of(result))
    assert len(lines) == len(order)
    for node, line in zip(order, lines, strict=True):
        label = line[line.index("%"):]
        assert f" {type(node).__name__} " in label
        assert str(node.dtype) in label
        if all(isinstance(d, int) for d in node.shape):
            assert str(tuple(node.shape)) in label
        for tag in node.tags:
            assert repr(tag)[:40] in label
    text = "\n".join(lines)
    assert "Placeholder x (n, 4) float64" in text
    for name in result:
        assert re.search(r"⇒ (.*, )?" + re.escape(name), text), name


def test_ascii_color_only_adds_ansi_codes():
    result = random_dag(4)
    plain = get_ascii_graph(result, use_color=False)
    colored = get_ascii_graph(result, use_color=True)
    assert "\x1b[" not in plain
    assert "\x1b[" in colored
    assert ANSI.sub("", colored) == plain


def test_show_ascii_graph_prints_the_drawing(capsys):
    x = pt.make_placeholder("x", (3,))
    show_ascii_graph({"y": 2 * x})
    assert capsys.readouterr().out == get_ascii_graph({"y": 2 * x},
                                                      use_color=False)


def test_ascii_deep_dag_at_default_recursion_limit(deep_dag,
                                                   default_recursion_limit):
    text = get_ascii_graph(deep_dag, use_color=False)
    lines = text.splitlines()
    assert len(lines) == 200_001
    # a chain stays in one lane: marker straight below marker
    assert all(line.startswith("● ") for line in lines[:-1])
    assert lines[-1].startswith("◉ ")

# }}}


# {{{ show_dot_graph / render_svg

@needs_dot
def test_show_dot_graph_writes_svg_outside_notebooks(tmp_path, capsys):
    x = pt.make_placeholder("x", (3,))
    path = show_dot_graph({"y": x + 1}, output_to=tmp_path / "g.svg")
    assert path == tmp_path / "g.svg"
    svg = path.read_text(encoding="utf-8")
    assert "<svg" in svg and "Placeholder" in svg
    assert str(path) in capsys.readouterr().out


@needs_dot
def test_show_dot_graph_default_goes_to_a_temporary_file(capsys):
    x = pt.make_placeholder("x", (3,))
    path = show_dot_graph(pt.sin(x))
    try:
        assert path.suffix == ".svg" and "<svg" in path.read_text(encoding="utf-8")
        assert (path.parent / "graph.dot").read_text(encoding="utf-8") \
            == get_dot_graph(pt.sin(x))
        assert str(path) in capsys.readouterr().out
    finally:
        shutil.rmtree(path.parent)


@needs_dot
def test_show_dot_graph_html_and_dot_files_and_dot_source(tmp_path):
    source = get_dot_graph({"z": pt.make_placeholder("z", (2,)) * 3})
    page = show_dot_graph(source, filename=tmp_path / "g.html")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    dot_file = show_dot_graph(source, output_to=str(tmp_path / "g.dot"))
    assert dot_file.read_text(encoding="utf-8") == source


@needs_dot
def test_show_dot_graph_browser_on_headless_machine_keeps_the_file(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    import webbrowser

    def fail(*args, **kwargs):
        raise AssertionError("no browser may be started without a display")

    monkeypatch.setattr(webbrowser, "get", fail)
    path = show_dot_graph(pt.make_placeholder("x", (1,)), output_to="browser")
    try:
        assert path.suffix == ".html" and "<svg" in path.read_text(encoding="utf-8")
    finally:
        shutil.rmtree(path.parent)


def test_show_dot_graph_without_graphviz_raises_typed_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no 'dot'
    with pytest.raises(GraphvizNotFoundError, match="dot"):
        show_dot_graph(pt.make_placeholder("x", (1,)), output_to=tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


@needs_dot
def test_render_svg_reports_graphviz_syntax_errors():
    from pytato_like.visualization import render_svg
    with pytest.raises(VisualizationError, match="syntax error"):
        render_svg("digraph { a -> }")


def test_show_dot_graph_rejects_unknown_arguments():
    with pytest.raises(TypeError, match="colour"):
        show_dot_graph("digraph {}", colour="red")

# }}}


# {{{ partitions

def make_partition():
    """A hand-made partition of ``{"out": sin(x) + u}`` into two parts:
    part "A" computes ``t = sin(x)``, part "B" reads it back as a
    placeholder."""
    x = pt.make_placeholder("x", (3,))
    u = pt.make_placeholder("u", (3,))
    t = pt.sin(x)
    t_in = pt.make_placeholder("_pt_part_t", (3,))
    out = t_in + u
    from pytato_like.partition import GraphPart, GraphPartition
    parts = {
        "A": GraphPart(pid="A", needed_pids=frozenset(),
                       user_input_names=frozenset({"x"}),
                       partition_input_names=frozenset(),
                       output_names=frozenset({"_pt_part_t"})),
        "B": GraphPart(pid="B", needed_pids=frozenset({"A"}),
                       user_input_names=frozenset({"u"}),
                       partition_input_names=frozenset({"_pt_part_t"}),
                       output_names=frozenset({"out"}))}
    return GraphPartition(parts=parts,
                          var_name_to_result={"_pt_part_t": t, "out": out},
                          toposorted_part_ids=["A", "B"])


def clusters_of(source):
    """``cluster label -> set of node ids inside``."""
    clusters, current = {}, None
    for line in source.splitlines():
        m = re.match(r"\s*subgraph (cluster_\d+) \{", line)
        if m:
            current = m.group(1)
            clusters[current] = {"ids": set()}
            continue
        if current and line.strip() == "}":
            current = None
            continue
        if current:
            m = re.match(r'\s*label="(.*)";', line)
            if m:
                clusters[current]["label"] = m.group(1)
            m = NODE_RE.match(line)
            if m:
                clusters[current]["ids"].add(m.group(1))
    return {c["label"]: c["ids"] for c in clusters.values()}


def test_partition_graph_has_a_cluster_per_part_and_joins_parts():
    partition = make_partition()
    source = get_dot_graph_from_partition(partition)
    labels, edges = parse_dot(source)
    clusters = clusters_of(source)
    assert set(clusters) == {"part A", "part B (needs A)"}
    in_a = {labels[k] for k in clusters["part A"]}
    in_b = {labels[k] for k in clusters["part B (needs A)"]}
    assert any("name | x |" in text for text in in_a)
    assert any("expr | sin(" in text for text in in_a)
    assert "output _pt_part_t" in in_a and "output out" in in_b
    assert any("name | u |" in text for text in in_b)
    # each part's DAG edges, within the part
    for pid, cluster in (("A", "part A"), ("B", "part B (needs A)")):
        part = partition.parts[pid]
        roots = [partition.var_name_to_result[n] for n in sorted(part.output_names)]
        ids = {i: f"p{'AB'.index(pid)}_{v}" for i, v in dot_node_ids(roots).items()}
        drawn = {(s, d) for s, d, _ in edges
                 if s in clusters[cluster] and "_n" in d and d in clusters[cluster]}
        assert drawn == {(ids[c], ids[u]) for c, u in brute_force_edges(roots)}
    # the cross-part edge: A's output box -> B's placeholder of that name
    out_box, = (k for k in clusters["part A"] if labels[k] == "output _pt_part_t")
    ph, = (k for k in clusters["part B (needs A)"]
           if "name | _pt_part_t |" in labels[k])
    assert any(s == out_box and d == ph and "dashed" in at for s, d, at in edges)


@needs_dot
def test_graphviz_accepts_partition_graph():
    proc = run_dot(get_dot_graph_from_partition(make_partition()))
    assert proc.returncode == 0, proc.stderr


def test_partition_graph_shows_sends_and_receives_with_ranks_and_tags():
    from types import SimpleNamespace
    halo = pt.make_placeholder("halo_in", (2,))
    x = pt.make_placeholder("x", (2,))
    out = halo + x
    to_send = 3 * x
    recv = SimpleNamespace(src_rank=1, comm_tag=("halo", 7), shape=(2,),
                           dtype=np.dtype(np.float64))
    send = SimpleNamespace(data=to_send, dest_rank=2, comm_tag=42)
    part = SimpleNamespace(pid=0, needed_pids=frozenset(),
                           user_input_names=frozenset({"x"}),
                           partition_input_names=frozenset({"halo_in"}),
                           output_names=frozenset({"out"}),
                           input_name_to_recv_node={"halo_in": recv},
                           output_name_to_send_node={"sent": send})
    partition = SimpleNamespace(parts={0: part}, toposorted_part_ids=[0],
                                var_name_to_result={"out": out})
    source = get_dot_graph_from_partition(partition)
    labels, edges = parse_dot(source)
    recv_box, = (k for k, v in labels.items() if v.startswith("receive"))
    send_box, = (k for k, v in labels.items() if v.startswith("send"))
    assert labels[recv_box].startswith("receive from rank 1")
    assert "tag | ('halo', 7) |" in labels[recv_box]
    assert labels[send_box].startswith("send to rank 2")
    assert "tag | 42 |" in labels[send_box]
    ph, = (k for k, v in labels.items() if "name | halo_in |" in v
           and v.startswith("Placeholder"))
    sent, = (k for k, v in labels.items() if "expr | 3.0*_in0[_0]" in v)
    assert (recv_box, ph) in {(s, d) for s, d, _ in edges}
    assert (sent, send_box) in {(s, d) for s, d, _ in edges}
    if shutil.which("dot"):
        assert run_dot(source).returncode == 0


def part_clusters(source, partition):
    """``pid -> node ids`` of the clusters, by the ``part <pid>`` label."""
    clusters = clusters_of(source)
    result = {}
    for pid in partition.toposorted_part_ids:
        label, = (lb for lb in clusters if re.fullmatch(rf"part {pid}( \(.*\))?", lb))
        result[pid] = clusters[label]
    return result


def test_graph_of_find_partition():
    x = pt.make_placeholder("x", (3,))
    u = pt.make_placeholder("u", (3,))
    t = pt.sin(x)
    result = {"out": t + u, "t2": 2 * t}
    partition = find_partition(
        result, lambda node: "A" if node is t else "B")
    assert len(partition.parts) == 2
    source = get_dot_graph_from_partition(partition)
    labels, edges = parse_dot(source)
    clusters = part_clusters(source, partition)
    for ipart, pid in enumerate(partition.toposorted_part_ids):
        part = partition.parts[pid]
        roots = [partition.var_name_to_result[n] for n in sorted(part.output_names)]
        # every node and edge of the part's DAG, inside the part's cluster
        ids = {i: f"p{ipart}_{v}" for i, v in dot_node_ids(roots).items()}
        assert set(ids.values()) <= clusters[pid]
        drawn = {(s, d) for s, d, _ in edges if s in ids.values()
                 and d in ids.values()}
        assert drawn == {(ids[c], ids[u]) for c, u in brute_force_edges(roots)}
        # each output name boxed in its part; "part output" when only
        # other parts read it
        for name in part.output_names:
            kind = ("output" if name in partition.overall_output_names
                    else "part output")
            box, = (k for k in clusters[pid] if labels[k] == f"{kind} {name}")
            assert (ids[id(partition.var_name_to_result[name])], box, "") in edges
    # every partition input joined to the part producing it
    for pid, part in partition.parts.items():
        for name in part.partition_input_names:
            producer, = (p for p, q in partition.parts.items()
                         if name in q.output_names)
            src, = (k for k in clusters[producer] if labels[k].endswith(f" {name}")
                    and "output" in labels[k])
            dst, = (k for k in clusters[pid] if labels[k].startswith("Placeholder")
                    and f"name | {name} |" in labels[k])
            assert any(s == src and d == dst for s, d, _ in edges)
    if shutil.which("dot"):
        assert run_dot(source).returncode == 0


def test_graph_of_find_distributed_partition_shows_sends_and_receives():
    x = pt.make_placeholder("x", (4,))
    halo = make_distributed_recv(1, ("halo", 3), (4,), np.float64)
    y = staple_distributed_send(2 * x, dest_rank=1, comm_tag=("halo", 3),
                                stapled_to=x + halo)
    partition = find_distributed_partition(None, {"y": y})
    source = get_dot_graph_from_partition(partition)
    labels, edges = parse_dot(source)
    clusters = part_clusters(source, partition)
    nsends = nrecvs = 0
    for ipart, pid in enumerate(partition.toposorted_part_ids):
        part = partition.parts[pid]
        roots = [partition.var_name_to_result[n] for n in sorted(part.output_names)]
        roots += [send.data for send in part.output_name_to_send_node.values()]
        ids = {i: f"p{ipart}_{v}" for i, v in dot_node_ids(roots).items()}
        for send in part.output_name_to_send_node.values():
            box, = (k for k in clusters[pid]
                    if labels[k].startswith(f"send to rank {send.dest_rank}"))
            assert f"tag | {send.comm_tag!r} |" in labels[box]
            assert any(s == ids[id(send.data)] and d == box for s, d, _ in edges)
            nsends += 1
        for name, recv in part.input_name_to_recv_node.items():
            box, = (k for k in clusters[pid]
                    if labels[k].startswith(f"receive from rank {recv.src_rank}"))
            assert f"tag | {recv.comm_tag!r} |" in labels[box]
            dst, = (k for k in clusters[pid] if labels[k].startswith("Placeholder")
                    and f"name | {name} |" in labels[k])
            assert any(s == box and d == dst for s, d, _ in edges)
            nrecvs += 1
    assert (nsends, nrecvs) == (1, 1)
    if shutil.which("dot"):
        assert run_dot(source).returncode == 0


def test_partition_graph_rejects_non_partitions():
    with pytest.raises(VisualizationError, match="not a graph partition"):
        get_dot_graph_from_partition(object())


@needs_dot
def test_show_dot_graph_accepts_a_partition(tmp_path):
    path = show_dot_graph(make_partition(), output_to=Path(tmp_path) / "p.svg")
    assert "cluster" in path.read_text(encoding="utf-8")

# }}}

# vim: foldmethod=marker


# {{{ repr, _repr_html_ and large partitions (issue 35)

def node_kind_counts(roots):
    counts = {}
    for node in all_nodes(roots).values():
        counts[type(node).__name__] = counts.get(type(node).__name__, 0) + 1
    return counts


def stencil(steps, n=1000):
    u = pt.make_placeholder("u", (n,), np.float64)
    for _ in range(steps):
        u = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
    return u


def test_small_dag_repr_is_its_full_text():
    from pytato_like.stringifier import stringify_dag
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.sum(pt.sin(x) * 2 + pt.roll(x, 1))
    assert repr(y) == str(y) == stringify_dag(y) == pt.stringify(y)
    assert "Placeholder(name='x', shape=(3,), dtype=float64)" in repr(y)
    assert "Roll(" in repr(y) and "sin(" in repr(y)


def test_large_dag_repr_is_a_summary_of_counted_nodes():
    u = stencil(100)
    text = repr(u)
    counts = node_kind_counts([u])
    assert len(text) < 500 < len(pt.stringify(u))
    assert text.splitlines()[0] == (
        f"IndexLambda(shape=(1000,), dtype=float64): a DAG of "
        f"{sum(counts.values())} nodes")
    for kind, n in counts.items():
        assert f"{n} {kind}" in text
    assert "inputs: Placeholder(name='u', shape=(1000,), dtype=float64)" in text
    assert "pytato_like.stringify" in text


def test_dict_of_named_arrays_repr_summary_names_outputs():
    u = stencil(60)
    d = pt.make_dict_of_named_arrays({"a": u, "b": 2 * u})
    text = repr(d)
    assert text.startswith("DictOfNamedArrays('a': IndexLambda (1000,) float64, "
                           "'b': IndexLambda (1000,) float64)")
    assert f"a DAG of {len(all_nodes([u, d['b'].expr]))} nodes" in text


def test_repr_of_deep_dag_counts_its_nodes(deep_dag, default_recursion_limit):
    text = repr(deep_dag)
    assert "a DAG of 200001 nodes" in text
    assert "200000 IndexLambda, 1 Placeholder" in text  # 0.5*y, +1.0
    html_text = deep_dag._repr_html_()
    assert "a DAG of 200001 nodes" in html_text and "<svg" not in html_text


@needs_dot
def test_repr_html_of_small_dag_draws_it():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.sin(x) + 1
    html_text = y._repr_html_()
    assert f"a DAG of {len(all_nodes([y]))} nodes" in html_text
    assert "<svg" in html_text and "<?xml" not in html_text
    assert "Placeholder" in html_text and "IndexLambda" in html_text


def test_repr_html_without_graphviz_shows_the_summary(monkeypatch):
    monkeypatch.setenv("PATH", "")
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.sin(x) + 1
    html_text = y._repr_html_()
    assert "<svg" not in html_text and "install graphviz" in html_text
    assert f"a DAG of {len(all_nodes([y]))} nodes" in html_text


def test_repr_html_escapes_names():
    result = pt.make_dict_of_named_arrays({"a<b>": stencil(20)})
    html_text = result._repr_html_()
    assert "a<b>" not in html_text and "a&lt;b&gt;" in html_text


def test_get_dot_graph_takes_a_partition_and_a_trace():
    from pytato_like.runtime.trace import TraceRecord
    partition = make_partition()
    records = [TraceRecord(kind="part", name="part", rank=0, posted_ns=0,
                           started_ns=0, completed_ns=2_000_000, part_id=pid,
                           args={"execution": 0}) for pid in "AB"]
    assert (get_dot_graph(partition, trace=records)
            == get_dot_graph_from_partition(partition, trace=records))
    assert "rank 0: 2.000 ms mean" in get_dot_graph(partition, trace=records)
    assert get_dot_graph(partition) == get_dot_graph_from_partition(partition)


def test_get_dot_graph_trace_of_an_array_is_a_typed_error():
    x = pt.make_placeholder("x", (3,))
    with pytest.raises(VisualizationError, match="Placeholder"):
        get_dot_graph(x, trace=[])


def test_partition_view_must_be_known():
    with pytest.raises(VisualizationError, match="'tiny'"):
        get_dot_graph_from_partition(make_partition(), view="tiny")


def stepped_partition(steps, n=400):
    """A stencil of *steps* steps, each step's nodes one part."""
    u = pt.make_placeholder("u", (n,), np.float64)
    step_of = {}
    for k in range(steps):
        new = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
        for node in all_nodes([new]).values():
            step_of.setdefault(node, k)
        u = new
    return find_partition({"u": u}, lambda node: step_of[node])


def test_parts_view_collapses_alike_steps():
    partition = stepped_partition(32)
    assert len(partition.parts) == 32
    source = get_dot_graph_from_partition(partition)  # auto: > 150 nodes
    titles = re.findall(r"<b>(parts? [^<]*)</b>", source)
    assert titles == ["parts 0 ... 31 (32 alike)"]
    # the node count of one step's part, counted here
    first = partition.parts[partition.toposorted_part_ids[1]]
    roots = [partition.var_name_to_result[n] for n in first.output_names]
    assert f"<td align=\"left\">{len(all_nodes(roots))} per part</td>" in source
    assert "subgraph cluster" not in source
    full = get_dot_graph_from_partition(partition, view="full")
    assert full.count("subgraph cluster") == 32


def test_parts_view_keeps_different_parts_apart_and_joined():
    partition = make_partition()
    source = get_dot_graph_from_partition(partition, view="parts")
    titles = re.findall(r"<b>(part [^<]*)</b>", source)
    assert titles == ["part A", "part B"]
    assert "run0 -> run1;" in source


def test_parts_view_of_distributed_partition_with_trace():
    from pytato_like.runtime.trace import TraceRecord
    x = pt.make_placeholder("x", (4,))
    halo = make_distributed_recv(1, ("halo", 3), (4,), np.float64)
    y = staple_distributed_send(2 * x, dest_rank=1, comm_tag=("halo", 3),
                                stapled_to=x + halo)
    partition = find_distributed_partition(None, {"y": y})
    records = []
    for ex in range(2):
        t0 = ex * 10_000_000
        records.append(TraceRecord(kind="send", name="send", rank=0,
                                   posted_ns=t0, started_ns=t0,
                                   completed_ns=t0 + 1_000_000, peer=1,
                                   tag=("halo", 3), nbytes=32,
                                   args={"execution": ex}))
        records.append(TraceRecord(kind="recv", name="recv", rank=1,
                                   posted_ns=t0, started_ns=t0,
                                   completed_ns=t0 + 3_000_000, peer=0,
                                   tag=("halo", 3), nbytes=32,
                                   args={"execution": ex}))
        for pid in partition.toposorted_part_ids:
            records.append(TraceRecord(kind="part", name="part", rank=0,
                                       posted_ns=t0, started_ns=t0,
                                       completed_ns=t0 + 4_000_000,
                                       part_id=pid, args={"execution": ex}))
    source = get_dot_graph_from_partition(partition, trace=records,
                                          rank=0, view="parts")
    assert "sends to rank 1" in source and "receives from rank 1" in source
    # sent at t0, received 3 ms later, in both executions
    assert "32 bytes, in flight 3.000 ms mean" in source
    assert "rank 0: 4.000 ms mean, 4.000 ms max" in source
    if shutil.which("dot"):
        assert run_dot(source).returncode == 0


@needs_dot
def test_parts_view_of_32_steps_fits_a_screen():
    proc = run_dot(get_dot_graph_from_partition(stepped_partition(32)))
    assert proc.returncode == 0
    width, height = map(float, re.search(
        r'width="([\d.]+)pt" height="([\d.]+)pt"', proc.stdout).groups())
    assert width < 1400 and height < 900


def test_parts_view_of_deep_partition(deep_dag, default_recursion_limit):
    partition = find_partition({"y": deep_dag}, lambda node: 0)
    source = get_dot_graph_from_partition(partition)
    assert "200001" in source and "subgraph cluster" not in source

# }}}
