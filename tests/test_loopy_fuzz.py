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


def test_fuzz_runs_resume_from_recorded_chunks(tmp_path):
    # a long run is chunked by seed ranges: recorded batches are skipped
    # on a rerun, and the summary adds up what was recorded
    import json
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from bench.fuzz import fuzz, summarize
    out = str(tmp_path / "run")
    first = fuzz(4, seed=30_000, batch=2, verbose=False, out_dir=out)
    assert first["checked"] == 4 and first["skipped"] == 0
    assert sorted(os.listdir(out)) == ["seeds_30000_30001.json",
                                       "seeds_30002_30003.json"]
    os.remove(os.path.join(out, "seeds_30002_30003.json"))
    again = fuzz(4, seed=30_000, batch=2, verbose=False, out_dir=out)
    assert again["checked"] == 2 and again["skipped"] == 2
    total = summarize(out)
    assert total["checked"] == 4
    assert total["seed_ranges"] == [(30_000, 30_001), (30_002, 30_003)]
    with open(os.path.join(out, "seeds_30000_30001.json")) as f:
        assert json.load(f)["failures"] == {}
