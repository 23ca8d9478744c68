"""Observability of the loopy target: compile phase report, launch times,
progress lines for slow compiles, and the generated code."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import pytato_like as pt

cl = pytest.importorskip("pyopencl")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    from pytato_like.target.loopy import cache
    cache.clear_memory_cache()


def test_report_option_prints_phases_and_launches(queue, capsys):
    x = pt.make_placeholder("x", (100,), np.float64)
    prg = pt.generate_loopy(pt.sum(x * 2.5), options={"report": True})
    prg(queue, x=np.ones(100))
    err = capsys.readouterr().err
    for phase in ("materialize", "lower", "loopy", "codegen"):
        assert phase in err
    assert "call 1:" in err and "launches" in err
    assert "pytato_like.codegen" in err and "pytato_like.run" in err
    assert prg.stats.phases["opencl_build"] > 0
    assert len(prg.stats.calls) == 1


def test_report_environment_variable(queue, capsys, monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_REPORT", "1")
    x = pt.make_placeholder("x", (10,), np.float64)
    pt.generate_loopy(x - 1.5)
    assert "cache miss" in capsys.readouterr().err


def test_stats_are_kept_without_report(queue, capsys):
    x = pt.make_placeholder("x", (10,), np.float64)
    prg = pt.generate_loopy(x * 7)
    prg(queue, x=np.zeros(10))
    prg(queue, x=np.zeros(10))
    assert capsys.readouterr().err == ""
    assert len(prg.stats.calls) == 2
    assert prg.stats.n_kernels == 1 and prg.stats.cache == "miss"


def test_call_history_is_bounded_and_counted(queue):
    """A program called every step keeps only its last few calls (a long
    history of small objects would make the garbage collector's full
    passes frequent), and counts them all."""
    import gc

    from pytato_like.target.loopy.report import CALLS_KEPT
    x = pt.make_placeholder("x", (10,), np.float64)
    prg = pt.generate_loopy(x * 3)
    data = np.arange(10.0)
    n = 3 * CALLS_KEPT
    for _ in range(n):
        _, (out,) = prg(queue, x=data)
    np.testing.assert_array_equal(out, data * 3)
    assert prg.stats.n_calls == n
    assert len(prg.stats.calls) == CALLS_KEPT
    # steady calls keep no more objects alive
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(200):
        prg(queue, x=data)
    gc.collect()
    assert len(gc.get_objects()) - before < 50


def test_slow_compile_reports_phases_as_they_go(monkeypatch, caplog):
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 0.0)
    x = pt.make_placeholder("x", (10,), np.float64)
    with caplog.at_level(logging.INFO, logger="pytato_like"):
        with report.compile_context(part="p7"):
            pt.generate_loopy(pt.sin(x) + 3)
    records = [r for r in caplog.records if r.name == "pytato_like.codegen"]
    messages = [r.getMessage() for r in records]
    # the phases in the order they finished, then the total, all labelled
    assert any("materialize took" in m for m in messages)
    assert any("lower took" in m for m in messages)
    assert "compiled" in messages[-1]
    assert [i for i, m in enumerate(messages) if "materialize took" in m][0] \
        < [i for i, m in enumerate(messages) if "lower took" in m][0]
    assert all(m.startswith("[part p7] ") for m in messages)
    assert all(getattr(r, "progress", False) for r in records)


_SLOW_COMPILE_SCRIPT = """
import numpy as np
import pytato_like as pt
from pytato_like.target.loopy import report
report.PROGRESS_AFTER = 0.0
x = pt.make_placeholder("x", (10,), np.float64)
pt.generate_loopy(pt.sinh(x) + 7)
"""


@pytest.mark.parametrize("setting", [None, "progress"])
def test_slow_compile_prints_only_when_asked(setting, tmp_path):
    # a library prints nothing unless asked: by default the progress lines
    # go only to an application's own logging (the test above)
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTATO_LIKE_REPORT"}
    env["PYTATO_LIKE_CACHE_DIR"] = str(tmp_path)
    if setting is not None:
        env["PYTATO_LIKE_REPORT"] = setting
    res = subprocess.run([sys.executable, "-c", _SLOW_COMPILE_SCRIPT], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines()
             if line.startswith("pytato_like.")]
    if setting is None:
        assert lines == []
    else:
        assert lines and "compiled" in lines[-1]


def test_fast_compile_reports_nothing(monkeypatch, caplog):
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 600.0)
    x = pt.make_placeholder("x", (10,), np.float64)
    with caplog.at_level(logging.INFO, logger="pytato_like"):
        pt.generate_loopy(pt.cos(x) * 3)
    assert not [r for r in caplog.records if r.name == "pytato_like.codegen"]


@pytest.mark.parametrize("value", ["2", "verbose", "yes please"])
def test_malformed_report_switch_is_a_typed_error(monkeypatch, value):
    from pytato_like.diagnostic import ConfigurationError
    monkeypatch.setenv("PYTATO_LIKE_REPORT", value)
    x = pt.make_placeholder("x", (10,), np.float64)
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_REPORT"):
        pt.generate_loopy(x + 1)


def test_report_off_is_silent(queue, capsys, monkeypatch):
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 0.0)
    monkeypatch.setenv("PYTATO_LIKE_REPORT", "off")
    x = pt.make_placeholder("x", (10,), np.float64)
    prg = pt.generate_loopy(pt.tan(x) - 2)
    prg(queue, x=np.zeros(10))
    assert capsys.readouterr().err == ""


def test_phase_table_adds_up(queue):
    import time
    x = pt.make_placeholder("x", (64, 32), np.float64)
    y = pt.sum(pt.roll(pt.exp(x), 1, axis=0) * 2, axis=1)
    t0 = time.perf_counter()
    prg = pt.generate_loopy(y)
    prg(queue, x=np.ones((64, 32)))
    wall = time.perf_counter() - t0
    phases = prg.stats.phases
    assert set(phases) >= {"cache_lookup", "materialize", "lower", "loopy",
                           "codegen", "assemble", "opencl_build"}
    assert all(t >= 0 for t in phases.values())
    # no phase is counted inside another: together they fit in the wall
    # time of compiling and the first call
    assert sum(phases.values()) <= wall
    total = [line for line in prg.stats.table().splitlines()
             if line.startswith("total")][0]
    assert float(total.split()[1]) == pytest.approx(sum(phases.values()),
                                                    abs=1e-4)


def test_generated_code_and_translation_unit_are_inspectable():
    x = pt.make_placeholder("x", (16, 8), np.float32)
    prg = pt.generate_loopy(pt.exp(x).T + 1, function_name="my_kernel")
    assert "__kernel" in prg.source and "my_kernel" in prg.source
    assert prg.get_source() == prg.source
    import loopy as lp
    assert isinstance(prg.program, lp.TranslationUnit)
    assert "my_kernel" in prg.program.entrypoints


def test_debug_report_logs_the_loopy_kernels(monkeypatch, capsys):
    monkeypatch.setenv("PYTATO_LIKE_REPORT", "debug")
    x = pt.make_placeholder("x", (12,), np.float64)
    prg = pt.generate_loopy(pt.arctan(x) * 5, function_name="dbg_kernel")
    err = capsys.readouterr().err
    assert "loopy kernel dbg_kernel" in err
    assert "KERNEL: dbg_kernel" in err  # loopy's own rendering of it
    assert prg.stats.n_kernels == 1


def test_debug_report_does_not_outlive_the_switch(monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_REPORT", "debug")
    x = pt.make_placeholder("x", (12,), np.float64)
    pt.generate_loopy(pt.arcsin(x) * 5)
    monkeypatch.setenv("PYTATO_LIKE_REPORT", "progress")
    pt.generate_loopy(pt.arccos(x) * 5)
    # kernels are no longer rendered for a handler that would drop them
    assert not logging.getLogger("pytato_like.codegen").isEnabledFor(logging.DEBUG)


def test_partition_compiles_report_their_part(monkeypatch, caplog):
    # each part's compile is labelled with its part id (and, under MPI, the
    # rank): a slow distributed compile says which part it is working on
    from pytato_like.distributed import (
        find_distributed_partition,
        number_distributed_tags,
    )
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 0.0)
    x = pt.make_placeholder("x", (6,), np.float64)
    parts = find_distributed_partition(
        None, pt.make_dict_of_named_arrays({"y": pt.cos(x) * 3.25}))
    parts, _ = number_distributed_tags(None, parts, 0)
    with caplog.at_level(logging.INFO, logger="pytato_like"):
        pt.generate_code_for_partition(parts, lazy=False)
    lines = [r.getMessage() for r in caplog.records
             if r.name == "pytato_like.codegen"]
    assert lines
    for pid in parts.parts:
        assert any(f"[part {pid}]" in line for line in lines), lines
