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


def test_slow_compile_logs_progress(monkeypatch, caplog):
    from pytato_like.target.loopy import report
    monkeypatch.setattr(report, "PROGRESS_AFTER", 0.0)
    monkeypatch.setenv("PYTATO_LIKE_PROGRESS", "0")
    x = pt.make_placeholder("x", (10,), np.float64)
    with caplog.at_level(logging.INFO, logger="pytato_like.target.loopy"):
        pt.generate_loopy(pt.sin(x) + 3)
    assert any("compil" in r.getMessage() for r in caplog.records)


def test_generated_code_and_translation_unit_are_inspectable():
    x = pt.make_placeholder("x", (16, 8), np.float32)
    prg = pt.generate_loopy(pt.exp(x).T + 1, function_name="my_kernel")
    assert "__kernel" in prg.source and "my_kernel" in prg.source
    assert prg.get_source() == prg.source
    import loopy as lp
    assert isinstance(prg.program, lp.TranslationUnit)
    assert "my_kernel" in prg.program.entrypoints
