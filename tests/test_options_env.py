"""Malformed settings raise typed errors naming the setting and the value:
unknown keys in generate_loopy's options dict, malformed integer
PYTATO_LIKE_* environment variables of code generation
(:class:`~pytato_like.target.loopy.options.CodegenOptions`), and on/off
switches (PYTATO_LIKE_CACHE) that are neither on nor off."""

from __future__ import annotations

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


# {{{ environment variables of code generation (read when generate_loopy
# builds its CodegenOptions)

def _integer_settings():
    """``(variable, field, smallest accepted value)`` of every integer
    field of CodegenOptions with an environment variable."""
    import dataclasses

    from pytato_like.target.loopy.options import CodegenOptions
    fields = {f.name: f for f in dataclasses.fields(CodegenOptions)}
    out = []
    for name, variable in CodegenOptions.environment_variables().items():
        if isinstance(fields[name].default, bool):
            continue
        # the smallest value the checker accepts (0 or 1)
        minimum = 0
        try:
            CodegenOptions.from_environment(environ={variable: "0"})
        except ConfigurationError:
            minimum = 1
        out.append((variable, name, minimum))
    return out


def test_every_integer_setting_is_covered():
    names = {v for v, _, _ in _integer_settings()}
    # the schedule's, the chunks', the pieces' and the time tiles'
    assert {"PYTATO_LIKE_WORK_GROUP_SIZE", "PYTATO_LIKE_CONTIGUOUS_RUN",
            "PYTATO_LIKE_SMALL_OPERATOR_MIN_BATCH",
            "PYTATO_LIKE_SMALL_OPERATOR_PAD_BYTES",
            "PYTATO_LIKE_SMALL_OPERATOR_PAD_MIN_OUTPUTS",
            "PYTATO_LIKE_MAX_KERNEL_READS", "PYTATO_LIKE_PIECES_MAX",
            "PYTATO_LIKE_TIME_TILE", "PYTATO_LIKE_TIME_TILE_STAGES",
            "PYTATO_LIKE_REPEATED_STEPS_MIN"} <= names
    assert len(names) == 20


def test_malformed_codegen_variables_raise():
    from pytato_like.target.loopy.options import CodegenOptions
    for variable, _name, minimum in _integer_settings():
        for value in ("four", "2.5", str(minimum - 1)):
            with pytest.raises(ConfigurationError) as info:
                CodegenOptions.from_environment(environ={variable: value})
            # the message names the variable and the bad value
            assert variable in str(info.value), info.value
            assert repr(value) in str(info.value), info.value


def test_well_formed_codegen_variables_are_used():
    from pytato_like.target.loopy.options import CodegenOptions
    for variable, name, minimum in _integer_settings():
        options = CodegenOptions.from_environment(
            environ={variable: f" {minimum + 3} "})
        assert getattr(options, name) == minimum + 3, variable

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
