"""Lazy part programs (:mod:`pytato_like.target.loopy.lazy`): code
generation of a partition's parts when first needed, overlapping with the
first communication under the distributed executor, with one OpenCL build
for the kernels of the parts generated together."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import opencl_build
from pytato_like import diagnostic
from pytato_like.partition import (
    NumpyPartProgram,
    execute_partition,
    find_partition,
    generate_code_for_partition,
)
from pytato_like.target.loopy.bound import BoundPyOpenCLProgram
from pytato_like.target.loopy.lazy import LazyPartProgram, codegen_while_waiting

pytest.importorskip("pyopencl")
# a private code cache: generation really happens (and logs)
pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

N = 12
XV = np.linspace(-1.0, 2.0, N)


def three_parts(scale: float = 1.0):
    """``a -> b -> c`` in three parts (each a different computation), the
    NumPy values of their results, and the partition."""
    x = pt.make_placeholder("x", (N,), np.float64)
    s = pt.sin(x)
    s0 = s * scale
    a = s0 * 2.0
    b1 = pt.cos(a)
    b = b1 + a
    b4 = b * 0.25
    c1 = pt.exp(b4)
    c = c1 - x
    where = {id(s): 0, id(s0): 0, id(a): 0, id(b1): 1, id(b): 1, id(b4): 2,
             id(c1): 2, id(c): 2}
    partition = find_partition(pt.make_dict_of_named_arrays({"a": a, "c": c}),
                               lambda node: where[id(node)])
    av = np.sin(XV) * scale * 2.0
    bv = np.cos(av) + av
    return partition, {"a": av, "c": np.exp(bv * 0.25) - XV}


def test_parts_generated_together_go_largest_first():
    # ranks with alike parts then share the generation evenly (one takes
    # the largest part, another the next ones; see test_plan_claims.py)
    from pytato_like.analysis import get_num_nodes
    from pytato_like.target.loopy.lazy import largest_first
    partition, _ = three_parts()
    prgs = generate_code_for_partition(partition, lazy=True)
    order = list(partition.toposorted_part_ids)
    sizes = {pid: get_num_nodes(prgs[pid]._lazy_outputs) for pid in order}
    assert len(set(sizes.values())) > 1
    got = largest_first(prgs, order)
    assert sorted(got) == sorted(order)
    assert [sizes[p] for p in got] == sorted(sizes.values(), reverse=True)


def test_lazy_serial_results_equal_numpy(queue):
    partition, want = three_parts(1.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    assert all(type(p) is LazyPartProgram for p in prgs.values())
    # what the executors check: a loopy program
    assert all(isinstance(p, BoundPyOpenCLProgram) for p in prgs.values())
    got = execute_partition(partition, prgs, queue, {"x": XV})
    for name, value in want.items():
        np.testing.assert_allclose(got[name].get(), value, rtol=1e-13)
    # each program became the generated one
    assert all(type(p) is BoundPyOpenCLProgram for p in prgs.values())
    # and a second execution gives the same
    again = execute_partition(partition, prgs, queue, {"x": XV})
    np.testing.assert_allclose(again["c"].get(), want["c"], rtol=1e-13)


def test_attribute_read_generates_and_labels_the_part(caplog, monkeypatch):
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 0.0)
    partition, _ = three_parts(2.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    pid = partition.toposorted_part_ids[0]    # the one scaling by 2.5
    assert "not generated" in repr(prgs[pid])
    with caplog.at_level(logging.INFO, logger="pytato_like"):
        source = prgs[pid].source
    assert "__kernel" in source
    assert type(prgs[pid]) is BoundPyOpenCLProgram
    # the others are untouched
    assert all(type(prgs[q]) is LazyPartProgram for q in prgs if q != pid)
    lines = [r.getMessage() for r in caplog.records
             if r.name == "pytato_like.codegen"]
    assert any(f"[part {pid}]" in line for line in lines), lines


def test_copy_and_bind_of_a_lazy_program(queue):
    partition, want = three_parts(7.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    pid = partition.toposorted_part_ids[0]
    copied = prgs[pid].copy()
    assert type(copied) is BoundPyOpenCLProgram
    assert type(prgs[pid]) is BoundPyOpenCLProgram
    _, out = copied(queue, x=XV, out_host=True)
    np.testing.assert_allclose(out["a"], want["a"], rtol=1e-13)
    other = partition.toposorted_part_ids[2]
    assert type(prgs[other]) is LazyPartProgram
    executable = prgs[other].bind_to_context(queue.context)
    got = execute_partition(partition, prgs, queue, {"x": XV})
    np.testing.assert_allclose(got["c"].get(), want["c"], rtol=1e-13)
    inputs = {name: got[name] for name in partition.parts[other].all_input_names()
              if name != "x"}
    _, out = executable(queue, x=XV, out_host=True, **inputs)
    np.testing.assert_allclose(out["c"], want["c"], rtol=1e-13)


def test_defaults_and_eager_mode():
    from pytato_like.distributed import (
        find_distributed_partition,
        number_distributed_tags,
    )
    partition, _ = three_parts(0.5)
    # a plain partition: generated here (as before)
    assert all(type(p) is BoundPyOpenCLProgram
               for p in generate_code_for_partition(partition).values())
    assert all(type(p) is BoundPyOpenCLProgram for p in
               generate_code_for_partition(partition, "loopy", lazy=False).values())
    # NumPy part programs cost nothing to make: never lazy
    assert all(type(p) is NumpyPartProgram for p in generate_code_for_partition(
        partition, "numpy", lazy=True).values())
    x = pt.make_placeholder("x", (N,), np.float64)
    dist = find_distributed_partition(
        None, pt.make_dict_of_named_arrays({"y": pt.cos(x) * 0.75}))
    dist, _ = number_distributed_tags(None, dist, 0)
    # a distributed partition: lazy unless asked otherwise
    assert all(type(p) is LazyPartProgram
               for p in generate_code_for_partition(dist).values())
    assert all(type(p) is BoundPyOpenCLProgram for p in
               generate_code_for_partition(dist, lazy=False).values())


def test_generation_error_is_raised_by_the_call_and_again(queue):
    partition, _ = three_parts(3.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    pid = partition.toposorted_part_ids[0]
    calls = []

    def failing(outputs):
        calls.append(outputs)
        raise diagnostic.DTypeError(f"cannot generate part {pid}")
    prgs[pid]._lazy_make = failing
    with pytest.raises(diagnostic.DTypeError, match=f"part {pid}"):
        execute_partition(partition, prgs, queue, {"x": XV})
    # still lazy: the next use tries again (and fails again)
    assert type(prgs[pid]) is LazyPartProgram
    with pytest.raises(diagnostic.DTypeError):
        prgs[pid](queue, x=XV)
    assert len(calls) == 2


def _all_awaited(partition):
    # as if every part waited for a received value
    return {pid: ("received",) for pid in partition.parts}


def test_while_waiting_generates_a_part_at_a_time_then_builds_once(queue):
    partition, want = three_parts(4.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    builds = opencl_build.OPENCL_BUILDS
    built_before = set(opencl_build._KERNEL_PROGRAMS)
    steps = codegen_while_waiting(prgs, partition, _all_awaited(partition),
                                  queue=queue)
    # nothing before the wait
    assert all(type(p) is LazyPartProgram for p in prgs.values())
    order = partition.toposorted_part_ids
    for k, pid in enumerate(steps):
        # one more part generated per step, in the order the parts run
        assert pid == order[k]
        assert [type(prgs[q]) is LazyPartProgram for q in order] == (
            [False] * (k + 1) + [True] * (len(order) - k - 1))
        assert opencl_build.OPENCL_BUILDS == builds   # built after the last
    # every kernel of every part is built: those not built before (by
    # earlier tests' programs sharing them) by one build, into one program
    assert opencl_build.OPENCL_BUILDS == builds + 1
    keys = {(queue.context, source.key)
            for prg in prgs.values() for source in prg.plan.kernels}
    assert keys <= set(opencl_build._KERNEL_PROGRAMS)
    new = keys - built_before
    assert new     # part 0 (scaling by 4.5) is new
    assert len({opencl_build._KERNEL_PROGRAMS[k] for k in new}) == 1
    got = execute_partition(partition, prgs, queue, {"x": XV})
    for name, value in want.items():
        np.testing.assert_allclose(got[name].get(), value, rtol=1e-13)
    assert opencl_build.OPENCL_BUILDS == builds + 1   # running built nothing more


def test_a_part_runnable_at_once_generates_all_at_once(queue):
    partition, want = three_parts(5.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    awaited = _all_awaited(partition)
    first = partition.toposorted_part_ids[0]
    awaited[first] = ()
    builds = opencl_build.OPENCL_BUILDS
    steps = codegen_while_waiting(prgs, partition, awaited, queue=queue)
    # generated before the first launch, so that one build has them all
    assert all(type(p) is BoundPyOpenCLProgram for p in prgs.values())
    assert list(steps) == []
    got = execute_partition(partition, prgs, queue, {"x": XV})
    for name, value in want.items():
        np.testing.assert_allclose(got[name].get(), value, rtol=1e-13)
    assert opencl_build.OPENCL_BUILDS == builds + 1


def test_skipped_parts_are_not_generated(queue):
    partition, _ = three_parts(6.5)
    prgs = generate_code_for_partition(partition, lazy=True)
    skip = {partition.toposorted_part_ids[-1]}
    list(codegen_while_waiting(prgs, partition, _all_awaited(partition),
                               skip, queue=queue))
    assert [type(prgs[q]) is LazyPartProgram
            for q in partition.toposorted_part_ids] == [False, False, True]


# {{{ under MPI

SCRIPT = Path(__file__).resolve().parent / "mpi" / "codegen_overlap.py"


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["lazy", "eager", "fail"])
def test_mpi_ping_pong(case):
    # see tests/mpi/codegen_overlap.py for what each rank checks
    from test_distributed_mpi import launch
    proc = launch(2, SCRIPT, case, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert f"OK {case} rank {rank}" in proc.stdout, proc.stdout + proc.stderr

# }}}

# vim: foldmethod=marker
