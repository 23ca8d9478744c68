"""Architecture limits of issue 36, measured by
``scripts/architecture_metrics.py`` on this tree: each figure may only go
down. A limit above the issue's target is the figure reached so far (the
coordinator tightens it as the work lands).

The metrics are first checked on a small package written here, so a
limit cannot pass because the counter stopped counting.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_metrics():
    spec = importlib.util.spec_from_file_location(
        "architecture_metrics", ROOT / "scripts" / "architecture_metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


architecture_metrics = _load_metrics()


@pytest.fixture(scope="module")
def metrics():
    return architecture_metrics.measure(ROOT)


# {{{ the counter counts (a package written for the purpose)

def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "pytato_like" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_metrics_count_what_they_name(tmp_path):
    _write_package(tmp_path, {
        "__init__.py": "",
        "a.py": """
            import os
            from typing import Any, TYPE_CHECKING
            from pytato_like.b import _hidden, shown
            from pytato_like import b as bmod
            if TYPE_CHECKING:
                from pytato_like.c import C
            LIMIT = os.environ.get("X")
            SIZE = env_int("Y")
            def f(x: Any, y: "Any") -> None:
                from pytato_like.c import later
                return bmod._secret
            if __name__ == "__main__":
                os.environ.get("Z")
            """,
        "b.py": """
            import os
            from pytato_like.a import f
            def env_int(name):
                return int(os.environ[name])
            def env_flag(name):
                return os.getenv(name) == "1"
            def _hidden(): pass
            def shown(): pass
            """,
        "c.py": """
            from pytato_like.a import f
            from pytato_like.b import env_flag as _flag
            DEBUG = _flag("D")
            def _set_up():
                return _flag("E")
            def _unrelated():
                return 1
            _set_up()
            _unrelated()
            """,
        "runtime/__init__.py": "",
        "runtime/r.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pytato_like.target.t import T
            def g():
                from pytato_like.target import t
            """,
        "target/__init__.py": "",
        "target/t.py": "",
    })
    found = architecture_metrics.measure(tmp_path)
    summary = found.summary()
    # _hidden by name, _secret through the module alias
    assert summary["private_cross_module_imports"] == 2
    # a <-> b at module level; with the function import c joins it (the
    # TYPE_CHECKING import a -> c does not count)
    assert found.cycles_module_level == [["pytato_like.a", "pytato_like.b"]]
    assert found.cycles_with_functions == [
        ["pytato_like.a", "pytato_like.b", "pytato_like.c"]]
    assert summary["package_imports_inside_functions"] == 2
    assert summary["any"] == 2
    # os.environ.get and env_int() at module level, env_flag() under another
    # name, and a function of c's calling it; not the __main__ block
    assert summary["environment_reads_at_import"] == 4
    # g's import; not the annotation-only one
    assert summary["runtime_imports_target"] == 1
    assert summary["call_entry_points"] == 0


# }}}


# {{{ the limits on this tree

# issue 36's figures: at the session's start (36342ca), the limit asserted
# (the figure reached so far; never above the start except ``any``, which
# others' new modules raised while this work lowered it), and the issue's
# target. The coordinator lowers a limit as work lands.
START = {
    "private_cross_module_imports": 57,
    "import_cycles_module_level": 1,
    "import_cycles_with_function_imports": 8,
    "package_imports_inside_functions": 332,
    "any": 1900,
    "environment_reads_at_import": 18,
    "call_entry_points": 4,
}
LIMITS = {
    "private_cross_module_imports": 0,
    "import_cycles_module_level": 0,
    "import_cycles_with_function_imports": 0,
    # 24 reached; 27 since the code generator is imported on a plan cache
    # miss only (generate_loopy, BoundPyOpenCLProgram.programs,
    # unit._UnitBuilder.build): a warm start runs without its modules;
    # 26 since the translation-unit builder and the outlined runners are
    # imported on first use too (two imports of target.numpy and one of
    # array moved to module level)
    "package_imports_inside_functions": 26,
    "any": 112,
    "environment_reads_at_import": 1,
    "call_entry_points": 1,
}
TARGETS = {
    "private_cross_module_imports": 2,
    "import_cycles_module_level": 0,
    "import_cycles_with_function_imports": 0,
    "package_imports_inside_functions": 80,
    "any": 400,
    "environment_reads_at_import": 1,
    "call_entry_points": 1,
}


@pytest.mark.parametrize("figure", sorted(LIMITS))
def test_architecture_figure_does_not_grow(metrics, figure):
    value = metrics.summary()[figure]
    assert value <= LIMITS[figure], (
        f"{figure} is {value}, limit {LIMITS[figure]}; see "
        "`python scripts/architecture_metrics.py --details`")


def test_limits_are_between_target_and_start(metrics):
    # (a figure may pass its target: its limit is then the figure reached)
    reached = metrics.summary()
    for figure, limit in LIMITS.items():
        assert min(TARGETS[figure], reached[figure]) <= limit, figure
        assert limit <= START[figure] or figure == "any", figure


def test_runtime_does_not_import_target(metrics):
    # runtime executes programs and does not reach into code generation:
    # the OpenCL builds it shares with target.loopy (the halo copy kernels
    # join the part programs' build) are pytato_like.opencl_build's
    assert metrics.runtime_imports_target == []

# }}}
