"""CodegenOptions (target/loopy/options.py): one frozen value for every
code-generation knob. Environment variables supply its defaults when
generate_loopy builds it (never at import); an explicit option wins over
the environment; options that change code change the compile cache key;
the dict form of generate_loopy's options keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import ConfigurationError
from pytato_like.target.loopy.options import CodegenOptions

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


@pytest.fixture(autouse=True)
def _no_codegen_variables(monkeypatch):
    """Each test starts without any code-generation variable set (but
    the first call compiled, as the suite has it: see conftest.py)."""
    for variable in CodegenOptions.environment_variables().values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PYTATO_LIKE_HOST_FIRST_CALL", "0")


def _stencil():
    """A program whose code depends on the schedule's sizes: a shifted
    difference (elementwise, contiguous) of 5000 elements."""
    x = pt.make_placeholder("x", (5000,), np.float64)
    return 2 * x[1:] - x[:-1]


def _stencil_numpy(xv):
    return 2 * xv[1:] - xv[:-1]


def _run(queue, prg, xv):
    _, (out,) = prg(queue, x=xv)
    return out.get() if hasattr(out, "get") else out


# {{{ building options

def test_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_TIME_TILE", " 96 ")
    monkeypatch.setenv("PYTATO_LIKE_WORK_GROUP_SIZE", "32")
    options = CodegenOptions.from_environment()
    assert options.time_tile == 96
    assert options.work_group_size == 32
    # a field without its variable set keeps its default
    assert options.pieces_max == CodegenOptions().pieces_max


def test_explicit_option_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("PYTATO_LIKE_TIME_TILE", "96")
    assert CodegenOptions.from_environment(time_tile=0).time_tile == 0
    assert CodegenOptions.from_user({"time_tile": 7}).time_tile == 7
    # None in the dict form: not given (the environment's value)
    assert CodegenOptions.from_user({"time_tile": None}).time_tile == 96


def test_bad_environment_value_names_variable_and_value(monkeypatch, queue):
    monkeypatch.setenv("PYTATO_LIKE_WORK_GROUP_SIZE", "many")
    with pytest.raises(ConfigurationError) as info:
        pt.generate_loopy(_stencil())
    assert "PYTATO_LIKE_WORK_GROUP_SIZE" in str(info.value)
    assert "'many'" in str(info.value)
    monkeypatch.setenv("PYTATO_LIKE_WORK_GROUP_SIZE", "0")
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_WORK_GROUP_SIZE='0'"):
        CodegenOptions.from_environment()


def test_bad_option_value_names_the_option():
    with pytest.raises(ConfigurationError, match="pieces_max=0"):
        CodegenOptions.from_user({"pieces_max": 0})
    with pytest.raises(ConfigurationError, match="unknown option"):
        CodegenOptions.from_environment(no_such_field=1)


def test_options_are_frozen():
    import dataclasses
    options = CodegenOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.time_tile = 3  # type: ignore[misc]

# }}}


# {{{ the cache key

def test_two_option_values_two_keys_same_values(queue):
    xv = np.random.default_rng(0).random(5000)
    runs = pt.generate_loopy(_stencil())
    per_item = pt.generate_loopy(_stencil(), options={"contiguous_run": 0})
    # two schedules: two plans (the cache key changed), two sources
    assert runs.key != per_item.key
    assert runs.source != per_item.source
    for prg in (runs, per_item):
        np.testing.assert_allclose(_run(queue, prg, xv), _stencil_numpy(xv),
                                   rtol=1e-15)
    # the report changes no code: same key
    assert pt.generate_loopy(_stencil(), options={"report": False}).key \
        == runs.key


def test_cache_key_follows_every_code_field():
    base = CodegenOptions()
    for name, value in [("work_group_size", 16), ("tile_rows", 2),
                        ("pieces_min_size", 8), ("time_tile_stages", 3),
                        ("sizes_as_arguments", False),
                        ("function_name", "other")]:
        import dataclasses
        changed = dataclasses.replace(base, **{name: value})
        assert changed.cache_key() != base.cache_key(), name
    assert CodegenOptions(report=True).cache_key() == base.cache_key()
    # equal options, equal keys (a new object each time)
    assert CodegenOptions().cache_key() == base.cache_key()

# }}}


# {{{ no read at import

def test_variable_set_after_import_takes_effect(monkeypatch, queue):
    # pytato_like and its code generator are imported by now: a module
    # constant read at import would ignore the variable set here
    import pytato_like.target.loopy.schedule  # noqa: F401
    xv = np.random.default_rng(1).random(5000)
    default = pt.generate_loopy(_stencil())
    monkeypatch.setenv("PYTATO_LIKE_CONTIGUOUS_RUN", "0")
    per_item = pt.generate_loopy(_stencil())
    assert per_item.key != default.key
    assert per_item.source == pt.generate_loopy(
        _stencil(), options={"contiguous_run": 0}).source
    np.testing.assert_allclose(_run(queue, per_item, xv), _stencil_numpy(xv),
                               rtol=1e-15)


# Imports every module of the package with os.environ replaced by a
# mapping that records each read made by a frame of the package itself
# (not by a library it imports), and prints them as JSON.
_IMPORT_PROBE = textwrap.dedent(r"""
    import importlib, json, os, pkgutil, sys
    from collections.abc import MutableMapping

    package_dir = os.path.dirname(importlib.util.find_spec(
        "pytato_like").origin)
    reads = []

    class Recording(MutableMapping):
        def __init__(self, env):
            self._env = env

        def _note(self, key):
            caller = sys._getframe(2)
            if caller.f_code.co_filename.startswith(package_dir):
                reads.append([key, caller.f_code.co_filename,
                              caller.f_code.co_name])

        def __getitem__(self, key):
            self._note(key)
            return self._env[key]

        def __contains__(self, key):
            self._note(key)
            return key in self._env

        def get(self, key, default=None):
            self._note(key)
            return self._env.get(key, default)

        def __setitem__(self, key, value):
            self._env[key] = value

        def __delitem__(self, key):
            del self._env[key]

        def __iter__(self):
            return iter(self._env)

        def __len__(self):
            return len(self._env)

        def copy(self):
            return dict(self._env)

    os.environ = Recording(os.environ)
    import pytato_like
    failed = []
    for module in pkgutil.walk_packages(pytato_like.__path__, "pytato_like."):
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # reported, and the test fails
            failed.append([module.name, repr(exc)])
    print(json.dumps({"reads": reads, "failed": failed}))
""")

#: functions that set up PoCL's environment when the package is imported:
#: PoCL reads its cache folder and thread count when the first OpenCL
#: context is made, which the user does, before any call of ours
_POCL_SETUP = {("_pocl_cache.py", "use_private_pocl_cache"),
               ("_pocl_cache.py", "pocl_cache_dir"),
               ("threads.py", "configure_device_threads"),
               ("threads.py", "default_device_threads"),
               ("_env.py", "ranks_on_node")}

#: the table of dataclasses' compiled functions is read before the package
#: declares its classes (pytato_like.dataclass_code): its switches and the
#: cache folder
_DATACLASS_CODE_SETUP = {("dataclass_code.py", "install"),
                         ("cache_files.py", "cache_base_dir"),
                         ("cache_files.py", "_user_named_folder")}


def test_no_environment_read_at_import():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTATO_LIKE_")}
    proc = subprocess.run([sys.executable, "-c", _IMPORT_PROBE],
                          capture_output=True, text=True, env=env,
                          timeout=300, check=True)
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["failed"] == []
    reads = [(key, os.path.basename(path), function)
             for key, path, function in result["reads"]]
    # the probe sees reads: the PoCL set-up's, at least
    assert any(function == "use_private_pocl_cache"
               for _, _, function in reads)
    settings = [r for r in reads
                if (r[1], r[2]) not in _POCL_SETUP | _DATACLASS_CODE_SETUP]
    assert settings == []

# }}}


# {{{ the forms generate_loopy accepts

def test_dict_form_still_works(queue):
    xv = np.random.default_rng(2).random(5000)
    prg = pt.generate_loopy(_stencil(), options={
        "time_tile": 0, "small_chunk_elements": 0, "report": False,
        "max_instructions_per_kernel": 64, "sizes_as_arguments": False,
        "runtime_checks": True})
    np.testing.assert_allclose(_run(queue, prg, xv), _stencil_numpy(xv),
                               rtol=1e-15)
    with pytest.raises(ConfigurationError, match="unknown option 'tile_time'"):
        pt.generate_loopy(_stencil(), options={"tile_time": 0})


def test_loopy_option_names_in_the_dict(queue):
    xv = np.random.default_rng(3).random(5000)
    prg = pt.generate_loopy(_stencil(), options={"return_dict": False,
                                                 "time_tile": 0})
    np.testing.assert_allclose(_run(queue, prg, xv), _stencil_numpy(xv),
                               rtol=1e-15)
    with pytest.raises(ValueError, match="return_dict"):
        pt.generate_loopy(_stencil(), options={"return_dict": True})


def test_options_object_and_loopy_options(queue):
    import loopy as lp
    xv = np.random.default_rng(4).random(5000)
    given = CodegenOptions.from_environment(contiguous_run=0)
    prg = pt.generate_loopy(_stencil(), options=given)
    assert prg.key == pt.generate_loopy(
        _stencil(), options={"contiguous_run": 0}).key
    np.testing.assert_allclose(_run(queue, prg, xv), _stencil_numpy(xv),
                               rtol=1e-15)
    prg = pt.generate_loopy(_stencil(), options=lp.Options(return_dict=False))
    np.testing.assert_allclose(_run(queue, prg, xv), _stencil_numpy(xv),
                               rtol=1e-15)

# }}}
