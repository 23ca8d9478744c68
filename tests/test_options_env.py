"""Malformed settings raise typed errors naming the setting and the value:
unknown keys in generate_loopy's options dict, malformed integer
PYTATO_LIKE_* environment variables read by the loopy schedule, and on/off
switches (PYTATO_LIKE_CACHE) that are neither on nor off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError


def _program():
    x = pt.make_placeholder("x", (4,), np.float64)
    return 2 * x


# {{{ options dicts

def test_unknown_option_key_names_the_key():
    with pytest.raises(ConfigurationError, match="'no_such_option'"):
        pt.generate_loopy(_program(), options={"no_such_option": 1})


def test_unknown_option_is_a_value_error_too():
    # ConfigurationError is a ValueError, so callers catching pytato's
    # ValueError keep working
    with pytest.raises(ValueError, match="unknown option 'reprot'"):
        pt.generate_loopy(_program(), options={"reprot": True})


def test_options_of_the_wrong_type():
    with pytest.raises(TypeError, match="list"):
        pt.generate_loopy(_program(), options=["report"])

# }}}


# {{{ environment variables of the schedule and the time tiles (read once,
# at import)

# variable -> (module constant, smallest accepted value)
SCHEDULE_SETTINGS = {
    "PYTATO_LIKE_WORK_GROUP_SIZE": ("WORK_GROUP_SIZE", 1),
    "PYTATO_LIKE_CONTIGUOUS_RUN": ("CONTIGUOUS_RUN", 0),
    "PYTATO_LIKE_REDUCTION_ILP": ("REDUCTION_ILP", 1),
    "PYTATO_LIKE_TILE_ROWS": ("TILE_ROWS", 1),
    "PYTATO_LIKE_TILE_COLS": ("TILE_COLS", 1),
    "PYTATO_LIKE_TILE_LOCAL": ("TILE_LOCAL", 1),
    "PYTATO_LIKE_SMALL_OPERATOR_OUTPUTS": ("SMALL_OPERATOR_OUTPUTS", 0),
    "PYTATO_LIKE_SMALL_OPERATOR_STAGED": ("SMALL_OPERATOR_STAGED", 0),
    "PYTATO_LIKE_SMALL_OPERATOR_LOCAL": ("SMALL_OPERATOR_LOCAL", 1),
    "PYTATO_LIKE_SMALL_OPERATOR_MIN_BATCH": ("SMALL_OPERATOR_MIN_BATCH", 0),
    # read by the time tiles (fused stencil steps)
    "PYTATO_LIKE_TIME_TILE": ("time_tiles.TIME_TILE", 0),
    "PYTATO_LIKE_TIME_TILE_STAGES": ("time_tiles.TIME_TILE_STAGES", 1),
}

# Reloads the schedule module once per (variable, value) in one process
# and reports, per case, the constant's value or the error raised.
_PROBE = r"""
import importlib, json, os, sys
import pytato_like.target.loopy.schedule as schedule
import pytato_like.target.loopy.time_tiles as time_tiles
from pytato_like.diagnostic import ConfigurationError
cases = json.loads(sys.argv[1])
out = []
for name, attr, value in cases:
    module = time_tiles if attr.startswith("time_tiles.") else schedule
    attr = attr.rpartition(".")[2]
    os.environ[name] = value
    try:
        importlib.reload(module)
        out.append(["ok", getattr(module, attr)])
    except ConfigurationError as exc:
        out.append(["error", str(exc)])
    del os.environ[name]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe():
    def run(cases):
        env = {k: v for k, v in os.environ.items()
               if k not in SCHEDULE_SETTINGS}
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(cases)],
            capture_output=True, text=True, env=env, check=True)
        return json.loads(proc.stdout.splitlines()[-1])
    return run


def test_malformed_schedule_variables_raise(probe):
    cases = []
    for name, (attr, minimum) in SCHEDULE_SETTINGS.items():
        cases += [(name, attr, "four"), (name, attr, "2.5"),
                  (name, attr, str(minimum - 1))]
    results = probe(cases)
    for (name, _, value), (status, text) in zip(cases, results, strict=True):
        assert status == "error", (name, value, text)
        # the message names the variable and the bad value
        assert name in text and repr(value) in text, text


def test_well_formed_schedule_variables_are_used(probe):
    cases = [(name, attr, f" {minimum + 3} ")
             for name, (attr, minimum) in SCHEDULE_SETTINGS.items()]
    results = probe(cases)
    for (name, _, value), (status, got) in zip(cases, results, strict=True):
        assert status == "ok", (name, got)
        assert got == int(value), (name, got)

# }}}


# {{{ on/off switches

@pytest.mark.parametrize(("raw", "expected"), [
    ("1", True), ("on", True), (" Yes ", True), ("TRUE", True),
    ("0", False), ("off", False), ("No", False), ("false", False),
    ("", None), (None, None)])
def test_env_flag_values(raw, expected):
    from pytato_like._env import env_flag
    environ = {} if raw is None else {"PYTATO_LIKE_X": raw}
    for default in (True, False):
        want = default if expected is None else expected
        assert env_flag("PYTATO_LIKE_X", default, environ=environ) is want


@pytest.mark.parametrize("raw", ["2", "maybe", "enabled", "-1"])
def test_env_flag_malformed(raw):
    from pytato_like._env import env_flag
    with pytest.raises(ConfigurationError) as info:
        env_flag("PYTATO_LIKE_X", True, environ={"PYTATO_LIKE_X": raw})
    assert "PYTATO_LIKE_X" in str(info.value)
    assert repr(raw) in str(info.value)


def test_disk_cache_switch(monkeypatch):
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "off")
    assert cache._disk_enabled() is False   # was read as "on" before
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "0")
    assert cache._disk_enabled() is False
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "1")
    assert cache._disk_enabled() is True
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "sometimes")
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_CACHE='sometimes'"):
        cache._disk_enabled()

# }}}
