"""The first call of a program not in the cache, run on the host while its
kernels compile (:mod:`pytato_like.target.loopy.host_first_call`): what
it returns, when it is not used, and what the calls after it run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy import host_first_call

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

#: the option that turns the host call on (the suite's default is off)
ON = {"host_first_call": True}


def heat(u, steps: int, c: float, m=pt):
    for _ in range(steps):
        u = u + c * (m.roll(u, 1, axis=0) + m.roll(u, -1, axis=0)
                     + m.roll(u, 1, axis=1) + m.roll(u, -1, axis=1) - 4 * u)
    return u


def test_first_call_on_host_then_compiled(queue, rng):
    u0 = rng.standard_normal((64, 48))
    expected = heat(u0, 5, 0.11, np)
    prg = pt.generate_loopy(heat(pt.make_placeholder("u", u0.shape, u0.dtype),
                                 5, 0.11), options=ON)
    assert not prg.compiled()
    _, (first,) = prg(queue, u=u0)
    assert isinstance(first, np.ndarray)
    np.testing.assert_allclose(first, expected, rtol=1e-13, atol=1e-13)
    assert prg.replay_counts()["host"] == 1
    # the second call runs the kernels the thread generated and built
    _, (second,) = prg(queue, u=u0)
    assert prg.compiled()
    np.testing.assert_allclose(second, expected, rtol=1e-13, atol=1e-13)
    counts = prg.replay_counts()
    assert counts["host"] == 1 and counts["full"] == 1
    assert prg.stats.n_kernels >= 1 and prg.stats.cache == "miss"
    assert "opencl_build" in prg.stats.phases and "lower" in prg.stats.phases


def test_device_inputs_give_device_outputs(queue, rng):
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.integers(-5, 5, (33, 17)).astype(np.int32)
    x = pt.make_placeholder("x", a.shape, a.dtype)
    y = pt.make_placeholder("y", b.shape, b.dtype)
    result = {"scaled": 2 * x + y, "positive": x > 0, "total": pt.sum(y),
              "transposed": x.T}
    prg = pt.generate_loopy(result, options=ON)
    _, out = prg(queue, x=cla.to_device(queue, a), y=cla.to_device(queue, b))
    assert prg.replay_counts()["host"] == 1
    expected = {"scaled": 2 * a + b, "positive": a > 0, "total": b.sum(),
                "transposed": a.T}
    for name, value in expected.items():
        got = out[name]
        # where the compiled program puts them: on the device, with the
        # dtype and shape of the array (a 0-d sum stays 0-d)
        assert isinstance(got, cla.Array), name
        assert got.dtype == result[name].dtype and got.shape == value.shape
        assert got.flags.c_contiguous
        np.testing.assert_allclose(got.get(), value, rtol=1e-6)
    # out_host=True brings the compiled call's outputs to the host
    _, again = prg(queue, x=cla.to_device(queue, a), y=cla.to_device(queue, b),
                   out_host=True)
    assert prg.replay_counts()["full"] == 1
    for name, value in expected.items():
        assert isinstance(again[name], np.ndarray)
        np.testing.assert_allclose(again[name], value, rtol=1e-6)


def test_out_host_true_on_the_host_call(queue, rng):
    a = rng.standard_normal(1000)
    x = pt.make_placeholder("x", a.shape, a.dtype)
    prg = pt.generate_loopy(pt.exp(x) - 0.25, options=ON)
    _, (out,) = prg(queue, x=cla.to_device(queue, a), out_host=True)
    assert prg.replay_counts()["host"] == 1
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, np.exp(a) - 0.25, rtol=1e-14)
    prg.plan  # noqa: B018 - the compile ends inside this test


def _outputs_of_a_plain_program(shape, offset):
    x = pt.make_placeholder("x", shape, np.float64)
    return 3 * x + offset


@pytest.mark.parametrize("why", ["option off", "environment", "over budget",
                                 "program read first", "device data",
                                 "symbolic shape", "run-time checks"])
def test_when_the_first_call_compiles(queue, rng, monkeypatch, why):
    a = rng.standard_normal((20, 5))
    options = dict(ON)
    inputs = {"x": a}
    # (a DAG of its own per case: each misses the cache)
    result = _outputs_of_a_plain_program(a.shape, 1.5 + len(why))
    expected = 3 * a + 1.5 + len(why)
    if why == "option off":
        options["host_first_call"] = False
    elif why == "environment":
        options = {}
        monkeypatch.setenv("PYTATO_LIKE_HOST_FIRST_CALL", "off")
    elif why == "over budget":
        monkeypatch.setattr(host_first_call, "HOST_BUDGET_S", 0.0)
    elif why == "device data":
        data = pt.make_data_wrapper(cla.to_device(queue, a))
        result = 3 * data + 1.5 + len(why)
        inputs = {}
    elif why == "symbolic shape":
        n = pt.make_size_param("n")
        x = pt.make_placeholder("x", (n, 5), np.float64)
        result = 3 * x + 1.5 + len(why)
    elif why == "run-time checks":
        idx = pt.make_placeholder("idx", (4,), np.int64)
        x = pt.make_placeholder("x", a.shape, np.float64)
        result = 3 * x[idx] + 1.5 + len(why)
        inputs = {"x": a, "idx": np.array([0, 3, 19, 2])}
        expected = 3 * a[[0, 3, 19, 2]] + 1.5 + len(why)
    prg = pt.generate_loopy(result, options=options)
    if why == "program read first":
        prg.program  # noqa: B018 - arraycontext reads it to transform it
    _, (out,) = prg(queue, **inputs)
    counts = prg.replay_counts()
    assert counts["host"] == 0 and counts["full"] == 1, why
    np.testing.assert_allclose(out.get() if hasattr(out, "get") else out,
                               expected, rtol=1e-14)


def test_environment_variable_is_checked():
    from pytato_like.diagnostic import ConfigurationError
    from pytato_like.target.loopy.options import CodegenOptions
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_HOST_FIRST_CALL"):
        CodegenOptions.from_environment({"PYTATO_LIKE_HOST_FIRST_CALL": "maybe"})
    # it changes no code: not in the cache key
    assert (CodegenOptions(host_first_call=False).cache_key()
            == CodegenOptions().cache_key())


def test_estimate_grows_with_nodes_and_elements():
    x = pt.make_placeholder("x", (100, 100), np.float64)
    small = host_first_call.estimated_host_seconds([x, x + 1])
    wide = host_first_call.estimated_host_seconds(
        [pt.make_placeholder("y", (1000, 1000), np.float64)])
    assert small is not None and wide is not None and wide > small
    n = pt.make_size_param("n")
    assert host_first_call.estimated_host_seconds(
        [pt.make_placeholder("z", (n,), np.float64)]) is None


def test_estimate_counts_an_einsums_contraction(queue, monkeypatch):
    # a matmul's value has n^2 elements and costs n^3 multiply-adds: with
    # a budget its elements fit but its products do not, it compiles first
    from pytato_like._traversal import topological_order
    n = 64
    a = pt.make_placeholder("a", (n, n), np.float64)
    b = pt.make_placeholder("b", (n, n), np.float64)
    order = topological_order([a @ b])
    elements_only = (3 * host_first_call.SECONDS_PER_NODE
                     + 3 * n * n * host_first_call.SECONDS_PER_ELEMENT)
    products = n ** 3 * host_first_call.SECONDS_PER_PRODUCT
    assert host_first_call.estimated_host_seconds(order) == pytest.approx(
        elements_only + products, rel=1e-12)
    monkeypatch.setattr(host_first_call, "HOST_BUDGET_S",
                        elements_only + products / 2)
    product = pt.generate_loopy(a @ b, options=ON)
    # the elementwise sum of the same inputs has as many elements: host
    total = pt.generate_loopy(a + b, options=ON)
    assert not total.compiled() and product.compiled()
    av = np.linspace(-1, 1, n * n).reshape(n, n)
    bv = np.cos(av)
    _, (s_out,) = total(queue, a=av, b=bv)
    _, (p_out,) = product(queue, a=av, b=bv)
    assert total.replay_counts()["host"] == 1
    assert product.replay_counts()["host"] == 0
    np.testing.assert_allclose(s_out, av + bv, rtol=1e-15)
    np.testing.assert_allclose(p_out, av @ bv, rtol=1e-12, atol=1e-12)
    total.plan  # noqa: B018 - the compile ends inside this test


def test_the_budget_covers_every_host_call_to_come(queue, monkeypatch):
    # two programs generated before either is called: the host work of
    # both would exceed the budget, so the second compiles at its call;
    # once the first has run, its share is free again
    from pytato_like._traversal import topological_order
    x = pt.make_placeholder("x", (40, 40), np.float64)
    first_dag, second_dag, third_dag = x * 1.25 - 3, x / 7 + 2, x * x - 0.5
    each = host_first_call.estimated_host_seconds(topological_order([first_dag]))
    monkeypatch.setattr(host_first_call, "HOST_BUDGET_S", 1.5 * each)
    first = pt.generate_loopy(first_dag, options=ON)
    second = pt.generate_loopy(second_dag, options=ON)
    assert not first.compiled() and second.compiled()
    a = np.linspace(-1, 1, 1600).reshape(40, 40)
    _, (one,) = first(queue, x=a)
    third = pt.generate_loopy(third_dag, options=ON)
    assert not third.compiled()
    _, (two,) = second(queue, x=a)
    _, (three,) = third(queue, x=a)
    assert [p.replay_counts()["host"] for p in (first, second, third)] == [1, 0, 1]
    np.testing.assert_allclose(one, a * 1.25 - 3, rtol=1e-14)
    np.testing.assert_allclose(two, a / 7 + 2, rtol=1e-14)
    np.testing.assert_allclose(three, a * a - 0.5, rtol=1e-14)
    first.plan, third.plan  # noqa: B018 - the compiles end inside this test


def test_a_program_dropped_uncalled_gives_its_share_back(queue, monkeypatch):
    import gc

    from pytato_like._traversal import topological_order
    x = pt.make_placeholder("x", (30, 30), np.float64)
    dropped_dag, kept_dag = x * 0.75 + 4, x / 3 - 1
    each = host_first_call.estimated_host_seconds(topological_order([kept_dag]))
    monkeypatch.setattr(host_first_call, "HOST_BUDGET_S", 1.5 * each)
    dropped = pt.generate_loopy(dropped_dag, options=ON)
    assert not dropped.compiled()
    # while it may still be called, its share is taken
    assert pt.generate_loopy(x * x + 2, options=ON).compiled()
    del dropped
    gc.collect()
    kept = pt.generate_loopy(kept_dag, options=ON)
    assert not kept.compiled()
    a = np.linspace(-2, 2, 900).reshape(30, 30)
    _, (out,) = kept(queue, x=a)
    assert kept.replay_counts()["host"] == 1
    np.testing.assert_allclose(out, a / 3 - 1, rtol=1e-14)
    kept.plan  # noqa: B018 - the compile ends inside this test


def test_a_failed_compile_is_raised_by_the_next_call(queue, monkeypatch,
                                                     caplog):
    from pytato_like.target.loopy import codegen

    class Broken(RuntimeError):
        pass

    def build_plan(*args, **kwargs):
        raise Broken("planted failure")
    monkeypatch.setattr(codegen, "build_plan", build_plan)
    x = pt.make_placeholder("x", (7,), np.float64)
    prg = pt.generate_loopy(x * 41.5, options=ON)
    a = np.arange(7.0)
    with caplog.at_level(logging.WARNING, logger="pytato_like.codegen"):
        _, (out,) = prg(queue, x=a)
        np.testing.assert_array_equal(out, a * 41.5)
        with pytest.raises(Broken, match="planted failure"):
            prg(queue, x=a)
    assert "planted failure" in caplog.text
    with pytest.raises(Broken):
        prg.plan  # noqa: B018 - the stored failure, again


def test_the_same_dag_generated_twice_shares_one_plan(queue, rng):
    a = rng.standard_normal(300)
    x = pt.make_placeholder("x", a.shape, a.dtype)
    y = pt.sin(x) * 2.75
    first = pt.generate_loopy(y, options=ON)
    _, (one,) = first(queue, x=a)
    second = pt.generate_loopy(y, options=ON)
    # the second waited for the plan the first call's thread made
    assert second.compiled() and second.plan is first.plan
    _, (two,) = second(queue, x=a)
    np.testing.assert_allclose(one, np.sin(a) * 2.75, rtol=1e-14)
    np.testing.assert_allclose(two, np.sin(a) * 2.75, rtol=1e-14)
    assert second.replay_counts()["host"] == 0


def test_programs_with_calls_kept_outlined(queue, rng):
    # the definitions' programs are generated like any program: their
    # first calls (inside the caller's first call) run on the host too
    from pytato_like.function import trace_call

    def smooth(w, *, xp):
        return 0.25 * xp.roll(w, 1) + 0.5 * w + 0.25 * xp.roll(w, -1)
    u = pt.make_placeholder("u", (24,), np.float64)
    y = u
    for _ in range(30):
        y = trace_call(lambda w: smooth(w, xp=pt), y)
    prg = pt.generate_loopy(y, options=ON)
    a = rng.standard_normal(24)
    expected = a
    for _ in range(30):
        expected = smooth(expected, xp=np)
    for _ in range(3):
        _, (got,) = prg(queue, u=a)
        np.testing.assert_allclose(got, expected, rtol=1e-13)
    (definition,) = prg.definition_programs.values()
    counts = definition.replay_counts()
    # the body's program: called 30 times, the first on the host
    assert counts["host"] == 1 and counts["full"] + counts["replayed"] \
        + counts["frozen"] == 3 * 30 - 1
    assert definition.compiled()


_ONE_CALL = r"""
import json, sys
import numpy as np
import pyopencl as cl
import pytato_like as pt
queue = cl.CommandQueue(cl.create_some_context(interactive=False))
x = pt.make_placeholder("x", (50, 50), np.float64)
prg = pt.generate_loopy(pt.cos(x) + x @ x)
a = np.linspace(0, 1, 2500).reshape(50, 50)
_, (out,) = prg(queue, x=a)
err = float(np.max(np.abs(out - (np.cos(a) + a @ a))))
print(json.dumps({"counts": prg.replay_counts(), "err": err,
                  "compiled": prg.compiled()}))
"""


def test_a_process_ending_after_one_call_stores_the_compile(tmp_path):
    # the compile started after the host call ends before the process
    # does: the next process starts warm
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "cache"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("PYTATO_LIKE_HOST_FIRST_CALL")   # the default: on
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", _ONE_CALL], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["counts"]["host"] == 1 and not cold["compiled"]
    assert warm["counts"]["host"] == 0 and warm["counts"]["full"] == 1
    assert cold["err"] < 1e-12 and warm["err"] < 1e-12


def test_deep_dag_estimate_and_host_evaluation(queue):
    # depth 100 000 at the default recursion limit: the estimate and the
    # host evaluation walk the DAG without recursion
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for i in range(100_000):
        y = y * 1.0000001 + (1e-7 if i % 2 else -1e-7)
    from pytato_like._traversal import topological_order
    order = topological_order([y])
    seconds = host_first_call.estimated_host_seconds(order)
    assert seconds is not None and seconds > host_first_call.HOST_BUDGET_S

    from pytato_like.target.loopy.report import ProgramStats

    class Program:
        single_output = True
        stats = ProgramStats()
    a = np.array([1.0, -2.0, 0.5])
    _, (out,) = host_first_call.run_on_host(
        Program(), queue, {"_pt_out": y}, None, None, True, {"x": a})
    expected = a.copy()
    for i in range(100_000):
        expected = expected * 1.0000001 + (1e-7 if i % 2 else -1e-7)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_hypothesis_host_call_and_compiled_call_agree(queue):
    from hypothesis import HealthCheck, given, settings

    from pytato_like.testing import random_dags

    @settings(max_examples=6, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(random_dags(max_ops=8))
    def check(dag):
        with np.errstate(all="ignore"):
            prg = pt.generate_loopy(dag.result, options=ON)
            _, first = prg(queue, **dag.inputs)
            dag.check(first)
            _, second = prg(queue, **dag.inputs)
            dag.check(second)

    check()


HOST_FIRST_SCRIPT = (os.path.join(os.path.dirname(__file__), "mpi",
                                  "host_first_execution.py"))


def _rank_counts(n: int, *args: str) -> list[dict]:
    from pathlib import Path

    from _mpiexec import run_ranks
    proc = run_ranks(n, Path(HOST_FIRST_SCRIPT), *args, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(n):
        assert f"OK host-first rank {rank}" in proc.stdout, proc.stdout
    line = next(ln for ln in proc.stdout.splitlines()
                if ln.startswith("COUNTS"))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_distributed_first_execution_on_the_host(n, tmp_path, monkeypatch):
    # every rank's parts miss the (empty) cache: their first calls run on
    # the host, the rank compiles them after that execution, the second
    # execution runs the kernels; every execution equals serial NumPy
    # (checked by the script); a warm start compiles first
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTATO_LIKE_HOST_FIRST_CALL", "1")
    for report in _rank_counts(n):
        assert report["host_first"] == report["parts"] >= 2, report
        assert report["full_first"] == 0 and report["host_later"] == 0
        assert report["compiled_second"] == report["parts"]
        assert report["compiled"]
    for report in _rank_counts(n):
        assert report["host_first"] == 0 and report["full_first"] >= 2


@pytest.mark.mpi
def test_distributed_parts_over_budget_compile_first(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTATO_LIKE_HOST_FIRST_CALL", "1")
    for report in _rank_counts(2, "--budget", "0"):
        assert report["host_first"] == 0
        assert report["full_first"] == report["parts"]
