"""The compiled functions of dataclasses kept on disk
(:mod:`pytato_like.dataclass_code`): a class declared from the table is
the class ``exec`` makes, the table survives the process, and a table not
signed with the user's secret is never run."""

from __future__ import annotations

import dataclasses
import glob
import inspect
import json
import marshal
import os
import subprocess
import sys
import types

import pytest

from pytato_like import cache_files, dataclass_code

# A module body declaring frozen dataclasses with every kind of field the
# generated functions handle. No __future__ import: the annotations of the
# generated __init__ must be the objects themselves, as exec makes them.
_DECLARATIONS = '''
import dataclasses
from typing import ClassVar

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: float = 2.5
    tags: tuple = dataclasses.field(default_factory=tuple)
    shared: ClassVar[int] = 7

@dataclasses.dataclass(frozen=True, kw_only=True)
class Named(Point):
    name: str = "n"
    derived: int = dataclasses.field(init=False, default=0)
    scale: dataclasses.InitVar[int] = 1

    def __post_init__(self, scale):
        object.__setattr__(self, "derived", self.x * scale)

@dataclasses.dataclass(order=True)
class Mutable:
    a: list = dataclasses.field(default_factory=list)
    b: int = dataclasses.field(default=3, compare=False, repr=False)
'''


def _declare(module_name: str, text: str = _DECLARATIONS) -> types.ModuleType:
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module
    try:
        exec(compile(text, f"<{module_name}>", "exec",
                     dont_inherit=True), module.__dict__)
    finally:
        del sys.modules[module_name]
    return module


def _behaviour(module: types.ModuleType) -> dict:
    """What a user sees of the declared classes."""
    point, named, mutable = module.Point, module.Named, module.Mutable
    p = point(1)
    n = named(x=2, y=1.0, name="a", scale=3)
    m1, m2 = mutable([1], 5), mutable([2], 5)
    frozen = []
    for obj, action in ((p, lambda o: setattr(o, "x", 3)),
                        (p, lambda o: delattr(o, "y"))):
        try:
            action(obj)
        except dataclasses.FrozenInstanceError as e:
            frozen.append(type(e).__name__)
    return {
        "repr": [repr(p), repr(n), repr(m1)],
        "eq": [p == point(1), p == point(2), n == named(x=2, y=1.0, name="a",
                                                        scale=3),
               m1 == mutable([1], 9), m1 < m2],
        "hash": [hash(p) == hash(point(1)), hash(n) == hash(
            named(x=2, y=1.0, name="a", scale=3))],
        "fields": [f.name for f in dataclasses.fields(n)],
        "derived": n.derived,
        "defaults": [p.y, p.tags, n.name],
        "frozen": frozen,
        "signatures": [str(inspect.signature(cls.__init__))
                       for cls in (point, named, mutable)],
        # (by repr: each declaration makes its own InitVar object)
        "annotations": [{k: repr(v) for k, v in cls.__init__.__annotations__
                         .items()} for cls in (point, named, mutable)],
        "replace": repr(dataclasses.replace(p, x=5)),
        "qualname": point.__init__.__qualname__,
    }


def test_a_class_declared_from_the_table_is_the_class_exec_makes():
    """Declared in a package module, the functions come from the table (a
    second declaration compiles nothing); declared elsewhere, exec makes
    them. Everything a user sees agrees, including the annotations of the
    generated __init__ (objects, not the strings a __future__ flag would
    give)."""
    assert dataclass_code.stats()["installed"]
    before = dataclass_code.stats()
    plain = _behaviour(_declare("elsewhere_probe"))
    after_plain = dataclass_code.stats()
    assert (after_plain["hits"], after_plain["compiled"]) == (
        before["hits"], before["compiled"])

    first = _behaviour(_declare("pytato_like._dataclass_code_probe"))
    after_first = dataclass_code.stats()
    assert (after_first["hits"] + after_first["compiled"]
            > before["hits"] + before["compiled"])
    second = _behaviour(_declare("pytato_like._dataclass_code_probe"))
    after_second = dataclass_code.stats()
    assert after_second["compiled"] == after_first["compiled"]
    assert after_second["hits"] > after_first["hits"]

    assert first == plain and second == plain
    assert plain["frozen"] == ["FrozenInstanceError"] * 2
    assert plain["annotations"][0]["x"] == repr(int)
    assert plain["annotations"][0]["return"] == repr(None)


def test_other_calls_of_exec_are_the_builtin():
    namespace: dict = {"__name__": "pytato_like._probe"}
    dataclass_code.cached_exec("z = 6 * 7", namespace)
    assert namespace["z"] == 42
    code = compile("w = 1", "<probe>", "exec")
    dataclass_code.cached_exec(code, namespace)
    assert namespace["w"] == 1
    with pytest.raises(SyntaxError):
        dataclass_code.cached_exec("def (", {"__name__": "elsewhere"})


_REPORT = ("import json, pytato_like.dataclass_code as d; "
           "print(json.dumps(dict(d.stats(), tables=sorted(d._tables))))")


def _fresh_process(folder, script: str = _REPORT, **env) -> dict:
    """The JSON *script* prints last, run in a new interpreter with the
    cache folder *folder*."""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(folder), **env),
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _table_files(folder) -> list[str]:
    return glob.glob(os.path.join(str(folder), "pytato_like-code-*",
                                  "classes", "*.pkl"))


def test_the_table_is_read_by_the_next_process(tmp_path):
    """One table per package whose classes were declared, stored at exit
    and read by the next process, which compiles nothing; a package whose
    classes are not declared (loopy, not imported) has no table read."""
    first = _fresh_process(tmp_path)
    assert first["installed"] and first["loaded"] == 0
    assert first["compiled"] > 40  # the package's classes and pymbolic's
    assert {"pytato_like", "pymbolic"} <= set(first["tables"])
    assert "loopy" not in first["tables"]
    assert len(_table_files(tmp_path)) == len(first["tables"])
    second = _fresh_process(tmp_path)
    assert second["tables"] == first["tables"]
    assert second["loaded"] >= first["compiled"]
    assert second["compiled"] == 0
    assert second["hits"] == first["hits"] + first["compiled"]


def test_loopys_classes_come_from_its_own_table(tmp_path):
    """A process importing loopy compiles its classes' functions once;
    the next one takes them from loopy's table."""
    script = ("import json, pytato_like.dataclass_code as d; import loopy;"
              " print(json.dumps(dict(d.stats(), tables=sorted(d._tables),"
              " loopy=len(d._used.get('loopy', ())))))")
    first, second = (_fresh_process(tmp_path, script) for _ in range(2))
    assert "loopy" in first["tables"] and first["loopy"] > 100
    assert second["loopy"] == first["loopy"]
    assert second["compiled"] == 0
    assert second["loaded"] >= first["compiled"]


def test_a_planted_table_is_never_run(tmp_path):
    """A table signed with another secret (or none) is a miss: its code
    does not run, and the import compiles the functions itself."""
    _fresh_process(tmp_path)
    marker = tmp_path / "ran"
    payload_code = compile(f"open({str(marker)!r}, 'w').close()", "<x>",
                           "exec")
    for path in _table_files(tmp_path):
        stored = marshal.loads(open(path, "rb").read()[
            len(cache_files.MAGIC) + 32:])
        planted = marshal.dumps(dict.fromkeys(stored, payload_code))
        with open(path, "wb") as f:  # right format, another key's signature
            f.write(cache_files.MAGIC + os.urandom(32) + planted)
    report = _fresh_process(tmp_path)
    assert report["loaded"] == 0 and report["compiled"] > 40
    assert not marker.exists()


def test_switches_leave_dataclasses_alone(tmp_path):
    # (a malformed PYTATO_LIKE_CACHE leaves it alone too, and the import
    # works: the compile cache raises for it)
    for env in ({"PYTATO_LIKE_DATACLASS_CODE": "0"},
                {"PYTATO_LIKE_CACHE": "0"},
                {"PYTATO_LIKE_CACHE": "maybe"}):
        report = _fresh_process(tmp_path, **env)
        assert not report["installed"] and not report["compile_bound"]
        assert report["hits"] == report["compiled"] == 0
    assert not _table_files(tmp_path)


def test_a_malformed_switch_is_a_typed_error_naming_it(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _REPORT],
        env=dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path),
                 PYTATO_LIKE_DATACLASS_CODE="maybe"),
        capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert ("ConfigurationError: PYTATO_LIKE_DATACLASS_CODE='maybe' is not "
            "a switch") in proc.stderr
    assert not _table_files(tmp_path)


def test_the_stored_table_merges_and_is_bounded(tmp_path, monkeypatch):
    """The table written at exit: the texts used here with those already
    stored; only those used here once the union exceeds MAX_ENTRIES."""
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache_files, "_SECRETS", {})
    monkeypatch.setattr(cache_files, "_PRIVATE", set())
    old = {f"x{k} = {k}": compile(f"x{k} = {k}", "<string>", "exec")
           for k in range(3)}
    cache_files.store(dataclass_code._versions(), dataclass_code._KIND,
                      f"{dataclass_code._KEY}-pymbolic", marshal.dumps(old))
    used = dict(list(dataclass_code._tables["pymbolic"].items())[:2])
    monkeypatch.setattr(dataclass_code, "_used", {"pymbolic": set(used)})
    monkeypatch.setattr(dataclass_code, "_grown", {"pymbolic"})
    dataclass_code._save()
    stored = dataclass_code._read_table("pymbolic")
    assert set(stored) == set(old) | set(used)
    namespace: dict = {}
    exec(stored["x2 = 2"], namespace)
    assert namespace["x2"] == 2
    # only the tables that grew are written
    assert dataclass_code._read_table("pytato_like") == {}

    monkeypatch.setattr(dataclass_code, "MAX_ENTRIES", 4)
    dataclass_code._save()
    assert set(dataclass_code._read_table("pymbolic")) == set(used)


def test_texts_compile_with_the_future_flags_of_dataclasses():
    """exec of a string takes the __future__ flags of the module calling
    it: the table compiles with dataclasses' (none), not with those of the
    module it lives in."""
    import __future__
    assert dataclass_code._future_flags(dataclass_code) == (
        __future__.annotations.compiler_flag)
    assert dataclass_code._DATACLASSES_FLAGS == dataclass_code._future_flags(
        dataclasses)
    code = dataclass_code._compile("def f(x: int) -> None: pass")
    namespace: dict = {}
    exec(code, namespace)
    assert namespace["f"].__annotations__ == {"x": int, "return": None}


# pymbolic's expression classes: a module declaring one, as a package
# module or a user's would
_EXPRESSION_DECLARATIONS = '''
from pymbolic.primitives import ExpressionNode, expr_dataclass

@expr_dataclass()
class Scaled(ExpressionNode):
    factor: int
    child: object
'''


def _declare_expression(module_name: str) -> type:
    return _declare(module_name, _EXPRESSION_DECLARATIONS).Scaled


def _expression_behaviour(cls: type) -> dict:
    from pymbolic.primitives import Variable
    a, b = cls(2, Variable("x")), cls(2, Variable("x"))
    return {
        "eq": [a == b, a == cls(3, Variable("x")), a != b],
        "hash": hash(a) == hash(b),
        "state": a.__getstate__(),
        "mapper_method": cls.mapper_method,
        "filename": type(a).__eq__.__code__.co_filename.replace(
            cls.__module__, "<module>"),
    }


def test_an_expression_class_declared_from_the_table_is_pymbolics():
    """pymbolic.primitives compiles the functions it adds to an expression
    class through cached_compile: for a class of the package they come from
    the table (the second declaration compiles nothing), for another they
    are compiled as before; the classes behave alike."""
    import pymbolic.primitives
    assert pymbolic.primitives.compile is dataclass_code.cached_compile
    assert dataclass_code.stats()["compile_bound"]
    before = dataclass_code.stats()
    plain = _expression_behaviour(_declare_expression("elsewhere_expr"))
    after_plain = dataclass_code.stats()
    first = _expression_behaviour(
        _declare_expression("pytato_like._expr_probe"))
    after_first = dataclass_code.stats()
    second = _expression_behaviour(
        _declare_expression("pytato_like._expr_probe"))
    after_second = dataclass_code.stats()
    assert first == plain == second
    assert plain["eq"] == [True, False, False] and plain["hash"]
    assert plain["mapper_method"] == "map_scaled"
    # the dataclass functions of the plain class were exec'd (not counted);
    # pymbolic's of the package's class: from the table (compiled when an
    # earlier run did not store them), then hits
    assert (after_plain["hits"], after_plain["compiled"]) == (
        before["hits"], before["compiled"])
    assert (after_first["hits"] + after_first["compiled"]
            > after_plain["hits"] + after_plain["compiled"])
    assert after_second["compiled"] == after_first["compiled"]
    assert after_second["hits"] > after_first["hits"]
    # pymbolic's functions for the package's class are in the table under
    # their file name; none for the other class
    keys = [key for key in dataclass_code._tables["pytato_like"]
            if key.startswith("\0")]
    assert any("'pytato_like._expr_probe.Scaled'" in key for key in keys)
    assert not any("elsewhere_expr" in key for key in keys)


def test_other_calls_of_compile_are_the_builtin_with_the_callers_flags():
    """This module imports annotations from __future__: the builtin called
    here makes string annotations, and so does cached_compile called here
    (not those of the module it lives in, nor none); dont_inherit, flags
    and modes other than exec pass through."""
    import ast
    text = "def f(a: int) -> None: pass"
    for compiled in (compile(text, "<p>", "exec"),
                     dataclass_code.cached_compile(text, "<p>", "exec")):
        namespace: dict = {}
        exec(compiled, namespace)
        assert namespace["f"].__annotations__ == {"a": "int",
                                                  "return": "None"}
    namespace = {}
    exec(dataclass_code.cached_compile(text, "<p>", "exec",
                                       dont_inherit=True), namespace)
    assert namespace["f"].__annotations__ == {"a": int, "return": None}
    tree = dataclass_code.cached_compile("x = 1", "<p>", "exec",
                                         ast.PyCF_ONLY_AST)
    assert isinstance(tree, ast.Module)
    assert eval(dataclass_code.cached_compile("6 * 7", "<p>", "eval")) == 42
    with pytest.raises(SyntaxError):
        dataclass_code.cached_compile("def (", "<dataclass augmentation "
                                      "code for <class 'pytato_like.X'>>",
                                      "exec")


def test_pymbolic_keeps_its_own_loader_and_source():
    """The module loaded with compile bound is still read from its source
    file: inspect finds its source, and its loader is a source loader."""
    import importlib.machinery
    import pymbolic.primitives
    assert isinstance(pymbolic.primitives.__spec__.loader,
                      importlib.machinery.SourceFileLoader)
    assert "class Variable" in inspect.getsource(pymbolic.primitives.Variable)
    assert pymbolic.primitives.Variable("x") == pymbolic.primitives.Variable(
        "x")


def test_pymbolic_imported_first_serves_later_classes(tmp_path):
    """With pymbolic imported before the package, its classes are compiled
    as before; compile is bound afterwards, for the classes declared
    later (the package's own expression classes): the next process takes
    those from the table."""
    script = ("import pymbolic.primitives as p, json; import pytato_like;"
              " from pytato_like import dataclass_code as d;"
              " print(json.dumps(dict(d.stats(),"
              " bound=p.compile is d.cached_compile,"
              " served=sum(k.startswith(chr(0))"
              " for k in d._used['pytato_like']))))")
    reports = [_fresh_process(tmp_path, script) for _ in range(2)]
    for report in reports:
        assert report["bound"] and report["compile_bound"]
        assert report["served"] > 0
    assert reports[1]["compiled"] == 0


def test_a_nested_caller_passes_on_only_its_future_flags():
    """A nested function's code carries CO_NESTED beside its __future__
    flags; compile inherits only the latter, and so does cached_compile
    (the same code as the builtin called from the same place)."""
    def nested():
        return (compile("def f(a: int): pass", "<p>", "exec"),
                dataclass_code.cached_compile("def f(a: int): pass", "<p>",
                                              "exec"))
    builtin, cached = nested()
    assert builtin.co_flags == cached.co_flags
    assert builtin.co_code == cached.co_code
    assert dataclass_code._FUTURE_MASK & 0x10 == 0
