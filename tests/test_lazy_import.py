"""``import pytato_like`` is cheap: heavy dependencies load on first use.

Each behaviour is checked in a fresh interpreter (a subprocess), since the
test session itself has long imported everything. The import's duration is
measured by ``bench/bench_import.py``, not here.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytato_like

HEAVY = ("loopy", "pyopencl", "islpy", "mpi4py", "graphviz")
REPO = Path(__file__).resolve().parent.parent


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_dependency():
    result = _run(
        "import json, sys\n"
        "import pytato_like\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    assert result == []


def test_building_and_running_on_numpy_loads_no_heavy_dependency():
    # the NumPy target is the reference: it must not need OpenCL or loopy
    result = _run(
        "import json, sys\n"
        "import numpy as np\n"
        "import pytato_like as pt\n"
        "x = pt.make_placeholder('x', (4,), np.float64)\n"
        "y = pt.sum(pt.sin(x) * 2 + pt.roll(x, 1))\n"
        "a = np.arange(4.0)\n"
        "out = pt.generate_numpy(y)(x=a)\n"
        "ref = float(np.sum(np.sin(a) * 2 + np.roll(a, 1)))\n"
        "print(json.dumps({'heavy': [m for m in "
        f"{HEAVY!r} if m in sys.modules], 'out': float(out), 'ref': ref}}))")
    assert result["heavy"] == []
    assert abs(result["out"] - result["ref"]) < 1e-12


def test_loopy_names_resolve_on_first_use():
    result = _run(
        "import json, sys\n"
        "import pytato_like as pt\n"
        "before = 'loopy' in sys.modules\n"
        "from pytato_like import LoopyPyOpenCLTarget, generate_loopy\n"
        "from pytato_like.analysis import PytatoKeyBuilder\n"
        "import loopy.tools\n"
        "print(json.dumps({'before': before,"
        " 'same': generate_loopy is pt.target.loopy.generate_loopy,"
        " 'keys': issubclass(PytatoKeyBuilder, loopy.tools.LoopyKeyBuilder),"
        " 'target': LoopyPyOpenCLTarget.__name__}))")
    assert result == {"before": False, "same": True, "keys": True,
                      "target": "LoopyPyOpenCLTarget"}


def test_program_from_the_disk_cache_runs_without_the_code_generator(tmp_path):
    # a warm start (the plan on disk) imports neither the code generator's
    # modules nor loopy: ~20 ms of a 0.3 s restart (bench_cold_start)
    code = (
        "import json, sys\n"
        "import numpy as np, pyopencl as cl\n"
        "import pytato_like as pt\n"
        "queue = cl.CommandQueue(cl.create_some_context(interactive=False))\n"
        "u = pt.make_placeholder('u', (64,), np.float64)\n"
        "for _ in range(3):\n"
        "    u = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))\n"
        "prg = pt.generate_loopy(u)\n"
        "a = np.linspace(0, 1, 64)\n"
        "_, (out,) = prg(queue, u=a)\n"
        "ref = a\n"
        "for _ in range(3):\n"
        "    ref = ref + 0.1 * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))\n"
        "print(json.dumps({'cache': prg.stats.cache,"
        " 'error': float(np.max(np.abs(out - ref))), 'loaded': [m for m in"
        " ('pytato_like.target.loopy.codegen', 'loopy',"
        " 'pytato_like.transform.materialize_cost')"
        " if m in sys.modules]}))")
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(tmp_path / "cache"),
               POCL_CACHE_DIR=str(tmp_path / "pocl"), PYTATO_LIKE_CACHE="1")

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold, warm = run(), run()
    assert cold["cache"] == "miss"
    assert {"pytato_like.target.loopy.codegen",
            "pytato_like.transform.materialize_cost"} <= set(cold["loaded"])
    assert warm["cache"] == "disk"
    assert warm["loaded"] == []
    assert cold["error"] == 0.0 and warm["error"] == 0.0


def test_every_public_name_imports_by_name():
    names = list(pytato_like.__all__)
    result = _run(
        "import json\n"
        "import pytato_like\n"
        f"names = {names!r}\n"
        "missing = []\n"
        "for name in names:\n"
        "    try:\n"
        "        exec(f'from pytato_like import {name}')\n"
        "    except ImportError:\n"
        "        missing.append(name)\n"
        "print(json.dumps(missing))")
    assert result == []


def test_subpackages_bring_the_submodules_users_reach_through_them():
    result = _run(
        "import json\n"
        "import pytato_like as pt\n"
        "paths = [pt.target.loopy.BoundPyOpenCLProgram, pt.target.python,"
        " pt.transform.materialize_cost, pt.transform.deduplicate,"
        " pt.analysis.get_num_nodes, pt.partition.find_partition,"
        " pt.visualization.show_fancy_placeholder_data_flow]\n"
        "print(json.dumps(len(paths)))")
    assert result == 7


def test_unknown_attribute_raises_attribute_error_naming_it():
    result = _run(
        "import json\n"
        "import pytato_like as pt\n"
        "try:\n"
        "    pt.no_such_name\n"
        "except AttributeError as err:\n"
        "    print(json.dumps(str(err)))")
    assert "no_such_name" in result


def test_dir_lists_lazy_names():
    assert set(pytato_like.__all__) <= set(dir(pytato_like))


def test_lazy_table_matches_type_checking_imports():
    # the TYPE_CHECKING block is what mypy sees; the lazy table is what
    # runs: they must name the same things
    tree = ast.parse((REPO / "pytato_like" / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", None) == "TYPE_CHECKING")
    declared: dict[str, str] = {}
    submodules: set[str] = set()
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            if node.module == "pytato_like":
                submodules.add(alias.name)
            else:
                declared[alias.name] = node.module
    lazy = dict(pytato_like._NAME_TO_MODULE)
    assert declared == lazy
    assert submodules == set(pytato_like._LAZY_SUBMODULES)


def test_transform_names_load_their_submodule_on_first_use():
    result = _run(
        "import json, sys\n"
        "import pytato_like.transform.deduplicate\n"
        "module = sys.modules['pytato_like.transform.deduplicate']\n"
        "from pytato_like import transform\n"
        "before = 'pytato_like.transform.materialize' in sys.modules\n"
        "from pytato_like.transform import materialize_with_mpms\n"
        "from pytato_like.transform.materialize import materialize_with_mpms"
        " as defined\n"
        "print(json.dumps({'before': before,"
        " 'same': materialize_with_mpms is defined,"
        " 'deduplicate': transform.deduplicate is module.deduplicate,"
        " 'submodule': transform.lower_to_index_lambda.__name__,"
        " 'star': len(__import__('pytato_like.transform',"
        " fromlist=['*']).__all__)}))")
    assert result["before"] is False and result["same"] is True
    # the function, not its submodule of the same name, imported first
    assert result["deduplicate"] is True
    assert result["submodule"] == "pytato_like.transform.lower_to_index_lambda"


def test_transform_lazy_table_matches_type_checking_imports():
    import pytato_like.transform as transform
    tree = ast.parse((REPO / "pytato_like" / "transform" / "__init__.py")
                     .read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", None) == "TYPE_CHECKING")
    declared: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        if node.module == "pytato_like.transform":
            continue        # submodules, reached as attributes
        for alias in node.names:
            declared[alias.name] = node.module.rsplit(".", 1)[1]
    assert declared == transform._DEFINED_IN
    # every exported name resolves
    assert all(getattr(transform, name) is not None
               for name in transform.__all__)
