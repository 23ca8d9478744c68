"""Generic partitioning: find_partition, code generation per part, execute_partition.

References are the unpartitioned DAG evaluated by the NumPy target and
NumPy itself."""

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import PartitionInducedCycleError
from pytato_like.partition import (
    GraphPartition,
    execute_partition,
    find_partition,
    generate_code_for_partition,
)


def _run(partition, inputs):
    prgs = generate_code_for_partition(partition, target="numpy")
    return execute_partition(partition, prgs, None, inputs)


def test_two_parts_compute_what_numpy_computes():
    x = pt.make_placeholder("x", (5,))
    a = 2 * x
    b = a + 1
    c = b * a
    part = {id(a): "p", id(b): "q", id(c): "q"}
    partition = find_partition(pt.make_dict_of_named_arrays({"c": c, "b": b}),
                               lambda n: part.get(id(n), "q"))
    assert isinstance(partition, GraphPartition)
    assert set(partition.parts) == {"p", "q"}
    assert partition.parts["q"].needed_pids == {"p"}
    assert partition.toposorted_part_ids == ["p", "q"]
    # the cut edge a -> (b, c) is one placeholder, output by part p
    (cut,) = partition.parts["q"].partition_input_names
    assert partition.parts["p"].output_names == {cut}
    assert partition.var_name_to_result[cut].shape == (5,)

    xv = np.linspace(-1, 1, 5)
    result = _run(partition, {"x": xv})
    np.testing.assert_allclose(result["c"], (2 * xv + 1) * (2 * xv))
    np.testing.assert_allclose(result["b"], 2 * xv + 1)


def test_cycle_between_parts_is_reported_with_its_parts():
    # A -> B -> C with A, C in part 1 and B in part 2
    x = pt.make_placeholder("x", (3,))
    a = pt.sin(x)
    b = a * 3
    c = b + a
    part = {id(a): 1, id(b): 2, id(c): 1}
    with pytest.raises(PartitionInducedCycleError, match=r"1 -> 2 -> 1|2 -> 1 -> 2"):
        find_partition(pt.make_dict_of_named_arrays({"c": c}),
                       lambda n: part[id(n)])


def test_inputs_are_shared_not_cut():
    x = pt.make_placeholder("x", (4,))
    data = np.arange(4.0)
    w = pt.make_data_wrapper(data)
    a = x + w
    b = x * w
    part = {id(a): 0, id(b): 1}
    partition = find_partition(pt.make_dict_of_named_arrays({"a": a, "b": b}),
                               lambda n: part[id(n)])
    assert partition.parts[0].needed_pids == frozenset()
    assert partition.parts[1].needed_pids == frozenset()
    assert partition.parts[0].user_input_names == {"x"}
    assert partition.parts[1].user_input_names == {"x"}
    result = _run(partition, {"x": np.ones(4)})
    np.testing.assert_allclose(result["a"], 1 + data)
    np.testing.assert_allclose(result["b"], data)


def test_output_that_is_an_input_and_single_array_result():
    x = pt.make_placeholder("x", (2, 2))
    partition = find_partition(pt.make_dict_of_named_arrays({"x": x, "y": x.T}),
                               lambda n: 0)
    xv = np.arange(4.0).reshape(2, 2)
    result = _run(partition, {"x": xv})
    np.testing.assert_array_equal(result["x"], xv)
    np.testing.assert_array_equal(result["y"], xv.T)

    partition = find_partition(x @ x, lambda n: 7)
    assert list(partition.parts) == [7]
    np.testing.assert_allclose(_run(partition, {"x": xv})["_pt_out"], xv @ xv)


def test_random_layered_partitions_match_numpy():
    # parts = depth bands of the DAG: every edge goes to the same or a later
    # band, so there is never a cycle, and many edges are cut
    rng = np.random.default_rng(3)
    x = pt.make_placeholder("x", (6,))
    y = pt.make_placeholder("y", (6,))
    nodes = [x, y]
    depth = {id(x): 0, id(y): 0}
    for _ in range(40):
        i, j = rng.integers(0, len(nodes), 2)
        op = rng.integers(0, 4)
        a, b = nodes[i], nodes[j]
        new = [a + b, a * 0.5 - b, pt.cos(a) * b, pt.roll(a, 1) + 1][op]
        depth[id(new)] = max(depth.get(id(a), 0), depth.get(id(b), 0)) + 1
        nodes.append(new)
    outputs = {f"o{k}": nodes[-1 - 3 * k] for k in range(4)}
    result_dag = pt.make_dict_of_named_arrays(outputs)

    from pytato_like._traversal import topological_order
    band = {}
    for node in topological_order(list(outputs.values())):
        band[id(node)] = depth.get(id(node), 0) // 4 if id(node) in depth else (
            max((band[id(c)] for c in pt.array.children_of(node)), default=0))
    partition = find_partition(result_dag, lambda n: band[id(n)])
    assert len(partition.parts) > 2

    xv, yv = rng.standard_normal(6), rng.standard_normal(6)
    expected = pt.generate_numpy(result_dag)(x=xv, y=yv)
    result = _run(partition, {"x": xv, "y": yv})
    for name in outputs:
        np.testing.assert_allclose(result[name], expected[name], rtol=1e-12)


def test_deep_chain_partitions_without_recursion(deep_chain):
    x, y = deep_chain
    # two parts: the first half of the chain and the second
    from pytato_like._traversal import topological_order
    order = topological_order([y])
    half = {id(n): i * 2 // len(order) for i, n in enumerate(order)}
    partition = find_partition(pt.make_dict_of_named_arrays({"y": y}),
                               lambda n: half[id(n)])
    assert set(partition.parts) == {0, 1}
    result = _run(partition, {"x": np.zeros(3)})
    # y_{k+1} = y_k/2 + 1 from 0 converges to 2
    np.testing.assert_allclose(result["y"], 2.0)


@pytest.mark.opencl
def test_loopy_part_programs_match_numpy_part_programs():
    if getattr(pt, "generate_loopy", None) is None:
        pytest.skip("pytato_like.generate_loopy is not available yet")
    import pyopencl as cl
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    x = pt.make_placeholder("x", (7,))
    a = pt.exp(x) * 2
    b = pt.roll(a, 2) - x
    c = b * a + 1
    from pytato_like._traversal import topological_order
    part = {}
    for pid, root in enumerate([a, b, c]):   # what a needs, then b, then c
        for node in topological_order([root]):
            part.setdefault(id(node), pid)
    partition = find_partition(pt.make_dict_of_named_arrays({"c": c, "a": a}),
                               lambda n: part[id(n)])
    assert len(partition.parts) == 3
    xv = np.linspace(-1, 1, 7)
    prgs = generate_code_for_partition(partition)   # loopy is the default
    result = execute_partition(partition, prgs, queue, {"x": xv})
    assert hasattr(result["c"], "queue")            # a pyopencl array
    expected = _run(partition, {"x": xv})
    np.testing.assert_allclose(result["c"].get(), expected["c"], rtol=1e-13)
    np.testing.assert_allclose(result["a"].get(), 2 * np.exp(xv), rtol=1e-13)
