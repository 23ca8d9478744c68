"""The decision of :func:`~pytato_like.find_distributed_partition` whether
to split boundary and interior (``split_interior="auto"``, the cost model
of :mod:`pytato_like.distributed.overlap_cost`): the stencil of
``bench_distributed`` at 10^5 cells per rank is split, a 10-cell one is
not, the index-gathered mesh of ``bench_distributed_mesh`` has nothing to
split; results equal NumPy's either way (on 2 ranks, and on the one-rank
stand-in ``None``); True and False still force; a bad value is refused."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.array import Placeholder
from pytato_like.diagnostic import DistributedPartitionError
from pytato_like.distributed import (
    find_distributed_partition,
    make_distributed_recv,
    number_distributed_tags,
    staple_distributed_send,
)
from pytato_like.distributed.overlap import split_interior_from_boundary
from pytato_like.distributed.overlap_cost import (
    MIN_OVERLAP_ELEMENTS,
    decide_split,
    send_path_work,
    split_cannot_pay,
)
from tests._mpiexec import run_ranks
from tests._periodic_heat import (
    C,
    numpy_heat,
    periodic_heat,
    placeholder_heat,
    run_on_one_rank,
)

SCRIPT = Path(__file__).parent / "mpi" / "overlap_decision.py"


# {{{ on 2 ranks

def _decisions(stdout: str) -> dict[str, list[tuple[int, str]]]:
    found: dict[str, list[tuple[int, str]]] = {}
    for line in stdout.splitlines():
        m = re.match(r"DECISION (\w+) (\d) ([01]) (.*)$", line)
        if m:
            found.setdefault(m[1], []).append((int(m[3]), m[4]))
    return found


def test_decisions_on_two_ranks_and_results_equal_numpy():
    # (the script checks every result against serial NumPy on the whole
    # domain and aborts the job otherwise)
    proc = run_ranks(2, SCRIPT, "stencil", "tiny", "mesh", "mesh_bf",
                     timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = _decisions(proc.stdout)
    assert sorted(found) == ["mesh", "mesh_bf", "stencil", "tiny"], \
        proc.stdout
    for case, ranks in found.items():
        assert len(ranks) == 2, (case, ranks)
    # the stencil at 10^5 cells: split, 4 exchanges (one per step)
    for split, reason in found["stencil"]:
        assert split == 1, reason
        assert reason.startswith("split: ") and "4 exchanges" in reason
    # 10 cells: the interior per exchange is below the threshold
    for split, reason in found["tiny"]:
        assert split == 0, reason
        assert f"< {MIN_OVERLAP_ELEMENTS}" in reason
    # faces gathered by index arrays: every element depends on the ghosts
    # (and written boundary first by hand, nothing is left to split
    # either); at 10^4 elements a rank the work on the path of the sends
    # is below the threshold already, so the split is not even tried
    for split, reason in found["mesh"] + found["mesh_bf"]:
        assert split == 0, reason
        assert re.search(r"nothing to split|interior per exchange at most "
                         rf"\d+ elements < {MIN_OVERLAP_ELEMENTS}", reason), \
            reason

# }}}


# {{{ on the one-rank stand-in

def test_auto_splits_a_large_stencil_as_forcing_does():
    n, steps = 40_000, 4
    dag = periodic_heat(n, steps, fields=2)
    auto = find_distributed_partition(None, dag)
    forced = find_distributed_partition(None, dag, split_interior=True)
    never = find_distributed_partition(None, dag, split_interior=False)
    assert auto.overlap_decision.split and auto.overlap_decision.mode == "auto"
    assert forced.overlap_decision.split
    assert not never.overlap_decision.split
    assert str(never.overlap_decision) == "not split: split_interior=False"
    assert auto.overlap_decision.saved_elements > \
        auto.overlap_decision.cost_elements
    # the same parts as forcing: a part per step and the last one, and
    # more than without the split... (without: one part per step as well,
    # but its senders compute whole fields)
    assert len(auto.parts) == len(forced.parts) == steps + 1
    rng = np.random.default_rng(4)
    inputs = {f"u{f}": rng.standard_normal(n) for f in range(2)}
    got = {kind: run_on_one_rank(p, inputs) for kind, p in
           (("auto", auto), ("never", never))}
    for name, u in inputs.items():
        np.testing.assert_allclose(got["auto"][name], numpy_heat(u, steps),
                                   rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(got["auto"][name], got["never"][name])
    # the decision survives tag numbering, and the parts view says it
    numbered, _ = number_distributed_tags(None, auto, 3)
    assert numbered.overlap_decision == auto.overlap_decision
    dot = pt.get_dot_graph(numbered, view="parts")
    assert "interior/boundary split: " in dot
    assert f"{steps} exchanges" in dot


def test_auto_leaves_a_tiny_stencil_whole():
    n, steps = 10, 4
    dag = periodic_heat(n, steps)
    auto = find_distributed_partition(None, dag)
    decision = auto.overlap_decision
    assert not decision.split
    assert f"< {MIN_OVERLAP_ELEMENTS}" in decision.reason
    # left whole: the sending parts compute the whole field
    never = find_distributed_partition(None, dag, split_interior=False)
    assert len(auto.parts) == len(never.parts)
    u = np.random.default_rng(1).standard_normal(n)
    np.testing.assert_allclose(run_on_one_rank(auto, {"u0": u})["u0"],
                               numpy_heat(u, steps), rtol=1e-13, atol=1e-13)


def test_the_mesh_has_nothing_to_split():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import bench_distributed_mesh as mesh_bench
    e = 2_000
    nb = mesh_bench.global_mesh(e, 1)
    mesh = mesh_bench.rank_mesh(nb, 0, 1, e)
    # one rank: no neighbours; give it one, itself, by hand
    u = pt.make_placeholder("u", (e, mesh_bench.NODES))
    flat = u.reshape(-1)
    idx = np.arange(0, e * mesh_bench.NODES, 7)
    u = staple_distributed_send(flat[idx], 0, "faces", u)
    ghosts = make_distributed_recv(0, "faces", (idx.size,))
    extended = pt.concatenate([u.reshape(-1), ghosts])
    nb_local = np.random.default_rng(2).integers(
        0, extended.shape[0], (e, mesh_bench.NODES))
    out = u - extended[nb_local]
    partition = find_distributed_partition(None, {"out": out})
    assert not partition.overlap_decision.split
    assert "nothing to split" in partition.overlap_decision.reason
    x = np.random.default_rng(3).standard_normal((e, mesh_bench.NODES))
    want = x - np.concatenate([x.reshape(-1), x.reshape(-1)[idx]])[nb_local]
    np.testing.assert_array_equal(run_on_one_rank(partition, {"u": x})["out"], want)


def _ghosted_steps(n: int, steps: int):
    """*steps* stencil steps on *n* cells, each sending its first cell,
    whose ghosts are placeholders of times 1, 2, ...: the outputs and
    their *source_time*."""
    outputs, times = placeholder_heat(n, steps, send_first_cell=True)
    outputs["s"] = outputs["u"][:1]

    def source_time(ary):
        return times.get(ary.name) if isinstance(ary, Placeholder) else None

    return outputs, source_time


@pytest.mark.parametrize("steps", [1, 3])
def test_no_split_tried_only_where_none_could_be_kept(steps):
    # the bound (the work on the path of the sends) against the decision
    # on the split actually made, from tiny fields to large ones
    verdicts = []
    for n in (8, 1_000, 12_000, 40_000, 100_000):
        outputs, source_time = _ghosted_steps(n, steps)
        hopeless = split_cannot_pay(outputs, source_time)
        split, n_split = split_interior_from_boundary(outputs, source_time)
        made = decide_split(outputs, split, n_split, source_time)
        if hopeless is not None:
            assert not made.split, (n, made.reason)
            assert not hopeless.split and hopeless.mode == "auto"
            assert hopeless.exchanges == steps
            work = send_path_work(outputs, source_time)
            assert f"at most {work.on_send_path // steps} elements < " \
                   f"{MIN_OVERLAP_ELEMENTS}" in hopeless.reason
        verdicts.append((hopeless is None, made.split))
    # both sides seen: small fields skip the pass, large ones are split
    assert (False, False) in verdicts and (True, True) in verdicts


def test_auto_skips_the_split_pass_of_a_small_field(monkeypatch):
    import pytato_like.distributed.partition as partition_module
    calls = []
    real = partition_module.split_interior_from_boundary

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(partition_module, "split_interior_from_boundary",
                        counted)
    n, steps = 10, 3
    dag = periodic_heat(n, steps)
    auto = find_distributed_partition(None, dag)
    assert not calls
    assert not auto.overlap_decision.split
    assert "interior per exchange at most" in auto.overlap_decision.reason
    forced = find_distributed_partition(None, dag, split_interior=True)
    assert len(calls) == 1 and forced.overlap_decision.mode is True
    u = np.random.default_rng(4).standard_normal(n)
    for partition in (auto, forced):
        np.testing.assert_allclose(
            run_on_one_rank(partition, {"u0": u})["u0"],
            numpy_heat(u, steps), rtol=1e-13, atol=1e-13)


def test_forcing_true_keeps_a_split_the_model_rejects():
    # a split made below the size threshold: the model says no, True keeps it
    u = pt.make_placeholder("u", (64,))
    times = {}
    for k in range(2):
        gl = pt.make_placeholder(f"gl{k}", (1,))
        gr = pt.make_placeholder(f"gr{k}", (1,))
        times[gl.name] = times[gr.name] = k + 1
        ext = pt.concatenate([gl, u, gr])
        u = u + C * (ext[:-2] - 2 * u + ext[2:])
    outputs = {"u": u, "s": u[:1]}

    def source_time(ary):
        return times.get(ary.name) if isinstance(ary, Placeholder) else None

    split, n_split = split_interior_from_boundary(
        outputs, source_time, min_interior_elements=8)
    assert n_split
    auto = decide_split(outputs, split, n_split, source_time)
    forced = decide_split(outputs, split, n_split, source_time, mode=True)
    assert not auto.split and auto.reason.startswith("not split: ")
    assert forced.split and forced.reason.startswith("split (forced): ")
    assert auto.saved_elements == forced.saved_elements


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_split_interior_must_be_auto_true_or_false(value):
    with pytest.raises(DistributedPartitionError,
                       match=r"split_interior must be 'auto', True or "
                             rf"False, not {re.escape(repr(value))} "
                             r"\(on rank 0\)"):
        find_distributed_partition(None, periodic_heat(10, 2),
                                   split_interior=value)


def test_send_path_work_on_a_deep_chain():
    depth = 100_000
    assert sys.getrecursionlimit() <= 10_000
    n = 40
    u = pt.make_placeholder("u", (n,))
    g = pt.make_placeholder("g", (1,))
    x = pt.concatenate([g, u[1:]])
    for _ in range(depth):
        x = 0.5 * x + u
    x = staple_distributed_send(x[:1], 0, "t", x)
    outputs = {"x": x}

    def source_time(ary):
        return 1 if isinstance(ary, Placeholder) and ary.name == "g" else None

    work = send_path_work(outputs, source_time)
    # every step reads g (time 1), and the send needs them all: the whole
    # chain, 2 elementwise arrays of n elements per step, is on its path
    assert work.exchanges == 1
    assert work.on_send_path == work.total == 2 * depth * n
    # (the split pass on a deep chain is tested in test_distributed_overlap;
    # here the decision's walks, on a "split" that changed nothing)
    decision = decide_split(outputs, outputs, 1, source_time)
    assert not decision.split
    assert decision.saved_elements == 0 and decision.exchanges == 1
    assert f"interior per exchange 0 elements < {MIN_OVERLAP_ELEMENTS}" \
        in decision.reason
    # the bound is the whole chain (80 elements a step): no pass skipped
    assert split_cannot_pay(outputs, source_time) is None

# }}}

# vim: foldmethod=marker
