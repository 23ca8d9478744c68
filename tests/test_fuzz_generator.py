"""The random-DAG generator's hostile features (:mod:`pytato_like.testing`):
complex and unsigned types, wrapping casts, negative powers, and programs
NumPy raises on, which the NumPy target must refuse with the typed error.
(The loopy target runs these in ``tests/test_loopy_fuzz.py`` and in the
long run ``python -m bench.fuzz``.)"""

from __future__ import annotations

import collections
import re

import numpy as np

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.testing import make_random_dag


def _dags(n: int, **kwargs):
    with np.errstate(all="ignore"):
        return [make_random_dag(seed, **kwargs) for seed in range(n)]


def test_programs_numpy_raises_on_raise_the_typed_error_on_the_numpy_target():
    dags = _dags(150, error_percent=30)
    kinds = collections.Counter()
    for dag in dags:
        prg = pt.generate_numpy(dag.result)
        if dag.expected_error is None:
            dag.check(prg(**dag.inputs))
            continue
        kinds[dag.expected_error] += 1
        assert "fails" in dag.outputs
        assert "# NumPy raises" in dag.program_text()
        dag.check_raises(lambda prg=prg, dag=dag: prg(**dag.inputs))
    assert kinds[diagnostic.NegativeIntegerPowerError] >= 5
    assert kinds[diagnostic.IndexOutOfBoundsError] >= 5
    # without error_percent no program has to raise
    assert all(d.expected_error is None for d in _dags(40))


def test_check_raises_rejects_a_program_that_runs():
    dag = next(d for d in _dags(60, error_percent=50) if d.expected_error)
    try:
        dag.check_raises(lambda: None)
    except AssertionError as err:
        assert "the program ran" in str(err)
    else:
        raise AssertionError("check_raises accepted a program that ran")


def test_generator_covers_the_hostile_features():
    dags = _dags(300)
    text = "\n".join(d.program_text() for d in dags)
    input_dtypes = collections.Counter(
        str(a.dtype) for d in dags for a in d.inputs.values())
    for dtype in ("complex64", "complex128", "uint8", "uint16", "uint64"):
        assert input_dtypes[dtype] > 10, (dtype, input_dtypes)
    # complex math (arguments of complex dtype): look at the results
    complex_math = sum(
        1 for d in dags for line in d.lines
        if re.search(r"= (exp|sqrt|log|sin|cos|tanh|arctan)\(", line))
    assert complex_math > 20
    assert re.search(r"\*\* -[12]\b", text)            # negative powers
    assert re.search(r"\} \*\* \{|v\d+ \*\* v\d+|x\d+ \*\* ", text)  # array ** array
    # casts whose values wrap (e.g. -1.0 to uint8), values checked
    wraps = [line for line in text.splitlines() if line.endswith("# wraps")]
    assert len(wraps) > 5
    assert any("uint" in line for line in wraps)


def test_hypothesis_strategy_draws_raising_programs():
    from hypothesis import HealthCheck, given, settings

    from pytato_like.testing import random_dags
    seen = collections.Counter()

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(random_dags(max_ops=6, error_percent=50))
    def check(dag):
        prg = pt.generate_numpy(dag.result)
        with np.errstate(all="ignore"):
            if dag.expected_error is None:
                dag.check(prg(**dag.inputs))
            else:
                seen[dag.expected_error] += 1
                dag.check_raises(lambda: prg(**dag.inputs))

    check()
    assert sum(seen.values()) > 0
