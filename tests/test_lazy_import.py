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


#: what a warm start of an ordinary DAG never imports: the code
#: generator, loopy, and the translation-unit builder with the outlined
#: nodes' runners and kinds (~8 ms of importing the loopy target)
NOT_FOR_A_WARM_START = (
    "pytato_like.target.loopy.codegen", "loopy",
    "pytato_like.transform.materialize_cost",
    "pytato_like.target.loopy.unit", "pytato_like.target.loopy.outlined",
    "pytato_like.target.loopy.external", "pytato_like.target.loopy.sparse",
    "pytato_like.target.loopy.function_calls",
    "pytato_like.target.loopy.cut_results")


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
        f"loaded = [m for m in {NOT_FOR_A_WARM_START!r} if m in sys.modules]\n"
        # the translation unit pytato hands out is still there on demand
        "knl = prg.program.default_entrypoint\n"
        "print(json.dumps({'cache': prg.stats.cache,"
        " 'error': float(np.max(np.abs(out - ref))), 'loaded': loaded,"
        " 'entrypoint': knl.name, 'args': [a.name for a in knl.args]}))")
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
    for run_ in (cold, warm):
        assert run_["entrypoint"] == "_pt_kernel"
        assert run_["args"] == ["u", "_pt_out"]


def test_outlined_nodes_in_a_fresh_process_register_their_kinds():
    # function calls and sparse products are outlined by kinds their
    # modules register when a DAG first holds such a node (no module of
    # the outlined path is imported before)
    code = (
        "import json, sys\n"
        "import numpy as np, pyopencl as cl\n"
        "import pytato_like as pt\n"
        "from pytato_like.sparse import make_csr_matrix\n"
        "queue = cl.CommandQueue(cl.create_some_context(interactive=False))\n"
        "before = [m for m in ('pytato_like.target.loopy.outlined',"
        " 'pytato_like.target.loopy.function_calls',"
        " 'pytato_like.target.loopy.sparse') if m in sys.modules]\n"
        "rng = np.random.default_rng(3)\n"
        "dense = rng.standard_normal((5, 4)) * (rng.random((5, 4)) < 0.5)\n"
        "rows, cols = np.nonzero(dense)\n"
        "starts = np.searchsorted(rows, np.arange(6)).astype(np.int32)\n"
        "mat = make_csr_matrix((5, 4), pt.make_data_wrapper(dense[rows, cols]),"
        " pt.make_data_wrapper(cols.astype(np.int32)),"
        " pt.make_data_wrapper(starts))\n"
        "x = pt.make_placeholder('x', (4,), np.float64)\n"
        "twice = pt.trace_call(lambda v: 2 * v + 1, x, identifier='affine')\n"
        "prg = pt.generate_loopy(mat @ twice)\n"
        "a = np.linspace(-1, 1, 4)\n"
        "_, (out,) = prg(queue, x=a)\n"
        "ref = dense @ (2 * a + 1)\n"
        "print(json.dumps({'before': before,"
        " 'error': float(np.max(np.abs(out - ref))),"
        " 'programs': type(prg).__name__}))")
    result = _run(code)
    assert result["before"] == []
    assert result["programs"] == "OutlinedProgram"
    assert result["error"] < 1e-12


def test_builtin_owners_are_the_kinds_the_package_registers():
    # the registry answers "outlined?" for the package's own classes
    # before their kinds are registered: the two lists must agree
    import pytato_like.target.loopy.outlined  # noqa: F401 (registers them)
    from pytato_like.target.loopy.outlined_kinds import BUILTIN_OWNERS, OWNERS
    assert BUILTIN_OWNERS <= set(OWNERS)
    package_owned = {cls for cls in OWNERS
                     if cls.__module__.startswith("pytato_like.")}
    assert package_owned == BUILTIN_OWNERS


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
