"""Randomized differential tests: random DAGs from
:mod:`pytato_like.testing`, evaluated by the loopy target and by NumPy.
(The long run is ``python -m bench.fuzz --count N``.)"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt

cl = pytest.importorskip("pyopencl")


pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def test_fifty_seeded_random_dags_match_numpy():
    # both targets: NumPy's values, or (programs NumPy raises on: a
    # negative integer power, an out-of-range gather) the typed error
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from bench.fuzz import fuzz
    result = fuzz(50, seed=20_000, batch=50, verbose=False, error_percent=8)
    assert result["checked"] == 50
    assert result["raising"] >= 2      # the seeds do draw raising programs
    assert not result["failing_seeds"], "\n\n".join(result["details"].values())


def test_hypothesis_random_dags_match_numpy(queue):
    from hypothesis import HealthCheck, given, settings

    from pytato_like.testing import random_dags

    @settings(max_examples=8, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(random_dags(max_ops=8))
    def check(dag):
        with np.errstate(all="ignore"):
            prg = pt.generate_loopy(dag.result)
            _, out = prg(queue, **dag.inputs)
            dag.check(out)  # NumPy inputs: NumPy outputs

    check()
