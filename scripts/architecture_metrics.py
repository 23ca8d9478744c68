"""Architecture metrics of the ``pytato_like`` package, read from its source
with :mod:`ast` (nothing is imported, so a broken or slow module cannot
change the figures).

What it counts (issue 36 names the limits):

1. *private cross-module imports*: a name ``_x`` taken from another module
   of the package (``from pytato_like.m import _x``, relative forms too, at
   any depth), and ``m._x`` attribute reads where ``m`` is a package module
   bound by an import. Private *modules* (``pytato_like._env``) are
   package-internal by design and do not count; dunders do not count.
2. *import cycles*: strongly connected components with more than one
   module in the graph "module A imports module B", once with the imports
   that run when the module is imported (module level and class bodies,
   ``if TYPE_CHECKING:`` blocks excluded) and once with imports inside
   functions added.
3. *package imports inside functions*: import statements naming a package
   module that sit in a function body.
4. ``Any``: every read of the name ``Any`` or ``typing.Any`` (annotations,
   aliases, casts; string annotations are parsed too).
5. *environment reads at import*: ``os.environ`` / ``os.getenv`` reads, or
   calls of a package function that reads them directly (``env_int``) or
   of a function of the module's own top level that calls one, in code
   that runs at import: module and class bodies, decorators, default
   argument values.
6. *call entry points*: public methods named ``__call__`` or ``call*`` of
   the ``Bound*`` classes in ``target/loopy/bound.py`` (the one with the
   most), plus one if ``FrozenCall`` still exists.
7. *runtime imports target*: imports from ``pytato_like.runtime`` modules
   of ``pytato_like.target`` modules, in function bodies too; an
   ``if TYPE_CHECKING:`` import (an annotation naming the program
   contract) loads nothing and does not count.

Usage: ``python scripts/architecture_metrics.py [ROOT] [--json]`` where
ROOT is the repository (default: the one holding this script).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

PACKAGE = "pytato_like"


@dataclass
class ImportSite:
    """One package import: who imports what, where."""
    importer: str
    target: str
    line: int
    in_function: bool
    type_checking_only: bool
    names: tuple[str, ...] = ()


@dataclass
class Metrics:
    """The figures and the evidence behind each one."""
    private_imports: list[str] = field(default_factory=list)
    cycles_module_level: list[list[str]] = field(default_factory=list)
    cycles_with_functions: list[list[str]] = field(default_factory=list)
    function_imports: list[str] = field(default_factory=list)
    any_count: int = 0
    any_by_module: dict[str, int] = field(default_factory=dict)
    env_reads_at_import: list[str] = field(default_factory=list)
    call_entry_points: list[str] = field(default_factory=list)
    runtime_imports_target: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {
            "private_cross_module_imports": len(self.private_imports),
            "import_cycles_module_level": len(self.cycles_module_level),
            "import_cycles_with_function_imports":
                len(self.cycles_with_functions),
            "package_imports_inside_functions": len(self.function_imports),
            "any": self.any_count,
            "environment_reads_at_import": len(self.env_reads_at_import),
            "call_entry_points": len(self.call_entry_points),
            "runtime_imports_target": len(self.runtime_imports_target),
        }


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute)
                and test.attr == "TYPE_CHECKING"))


def _walk_with_context(tree: ast.Module) -> Iterator[
        tuple[ast.AST, bool, bool]]:
    """Every node with (inside a function body, inside ``if TYPE_CHECKING``).
    An explicit stack: no recursion."""
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while stack:
        node, in_fn, in_tc = stack.pop()
        yield node, in_fn, in_tc
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.Lambda)):
            body = node.body if isinstance(node.body, list) else [node.body]
            for child in ast.iter_child_nodes(node):
                stack.append((child, in_fn or child in body, in_tc))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                stack.append((child, in_fn, True))
            for child in node.orelse:
                stack.append((child, in_fn, in_tc))
        else:
            for child in ast.iter_child_nodes(node):
                stack.append((child, in_fn, in_tc))


class Package:
    """The package's modules, parsed once."""

    def __init__(self, root: Path):
        self.root = root
        self.trees: dict[str, ast.Module] = {}
        self.is_package: dict[str, bool] = {}
        for path in sorted((root / PACKAGE).rglob("*.py")):
            name = module_name(root, path)
            self.trees[name] = ast.parse(path.read_text(), str(path))
            self.is_package[name] = path.name == "__init__.py"

    def absolute(self, importer: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = importer.split(".")
        if not self.is_package[importer]:
            base = base[:-1]
        base = base[:len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def imports(self) -> Iterator[ImportSite]:
        for importer, tree in self.trees.items():
            for node, in_fn, in_tc in _walk_with_context(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        target = self._nearest_module(alias.name)
                        if target:
                            yield ImportSite(importer, target, node.lineno,
                                             in_fn, in_tc)
                elif isinstance(node, ast.ImportFrom):
                    source = self.absolute(importer, node)
                    if not source.split(".")[0] == PACKAGE:
                        continue
                    plain: list[str] = []
                    for alias in node.names:
                        sub = f"{source}.{alias.name}"
                        if sub in self.trees:
                            yield ImportSite(importer, sub, node.lineno,
                                             in_fn, in_tc)
                        else:
                            plain.append(alias.name)
                    if plain or not node.names:
                        target = self._nearest_module(source)
                        if target:
                            yield ImportSite(importer, target, node.lineno,
                                             in_fn, in_tc, tuple(plain))

    def _nearest_module(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        if parts[0] != PACKAGE:
            return None
        while parts:
            if ".".join(parts) in self.trees:
                return ".".join(parts)
            parts.pop()
        return None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    graph = nx.DiGraph()
    graph.add_edges_from((a, b) for a, b in edges if a != b)
    return sorted((sorted(c) for c in nx.strongly_connected_components(graph)
                   if len(c) > 1), key=lambda c: (-len(c), c))


def _any_reads(tree: ast.Module) -> int:
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Any":
            count += 1
        elif (isinstance(node, ast.Attribute) and node.attr == "Any"
              and isinstance(node.value, ast.Name)
              and node.value.id in ("typing", "t")):
            count += 1
        elif (isinstance(node, (ast.arg, ast.AnnAssign, ast.FunctionDef,
                                ast.AsyncFunctionDef))):
            annotation = (node.returns if isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else node.annotation)
            if (isinstance(annotation, ast.Constant)
                    and isinstance(annotation.value, str)):
                try:
                    count += _any_reads(ast.parse(annotation.value))
                except SyntaxError:
                    pass
    return count


def _reads_environ(node: ast.AST) -> bool:
    """``os.environ`` or ``os.getenv``/``getenv`` appears in *node*."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("environ",
                                                           "getenv"):
            return True
        if isinstance(sub, ast.Name) and sub.id in ("environ", "getenv"):
            if not isinstance(sub.ctx, ast.Store):
                return True
    return False


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``"""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__")


def _import_time_nodes(tree: ast.Module) -> Iterator[ast.AST]:
    """Nodes whose code runs when the module is imported: module and class
    bodies, decorators and default values, not function bodies."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if _is_main_guard(node):
            continue  # runs when executed as a script, not when imported
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(node.decorator_list)
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _env_reader_functions(pkg: Package) -> set[str]:
    readers: set[str] = set()
    for tree in pkg.trees.values():
        for node in ast.walk(tree):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and any(_reads_environ(stmt) for stmt in node.body)):
                readers.add(node.name)
    return readers


def _call_name(call: ast.Call) -> str | None:
    """The name a call calls (``f()``, ``m.f()``), if it names one."""
    func = call.func
    return (func.id if isinstance(func, ast.Name)
            else func.attr if isinstance(func, ast.Attribute) else None)


def _env_reads_at_import(pkg: Package) -> list[str]:
    readers = _env_reader_functions(pkg)
    found: list[str] = []
    for name, tree in pkg.trees.items():
        # ``from m import reader as _r`` then ``_r()``: the call reads too
        renamed = {alias.asname: alias.name for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom)
                   for alias in node.names if alias.asname}
        # a function of the module's own top level that calls a reader
        # reads too (``def _setup(): _r()`` then ``_setup()``)
        module_readers = readers | {
            node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(isinstance(sub, ast.Call) and renamed.get(
                _call_name(sub), _call_name(sub)) in readers
                for sub in ast.walk(node))}
        for node in _import_time_nodes(tree):
            direct = (isinstance(node, ast.Attribute)
                      and node.attr in ("environ", "getenv")
                      and isinstance(node.value, ast.Name)
                      and node.value.id == "os")
            called = None
            if isinstance(node, ast.Call):
                called = _call_name(node)
                called = renamed.get(called, called) if called else None
            if direct or (called in module_readers):
                found.append(f"{name}:{node.lineno}"
                             + (f" {called}()" if called else " os."
                                + node.attr))  # type: ignore[attr-defined]
    return found


def _call_entry_points(pkg: Package) -> list[str]:
    best: list[str] = []
    bound = pkg.trees.get(f"{PACKAGE}.target.loopy.bound")
    for node in (bound.body if bound else []):
        if isinstance(node, ast.ClassDef) and node.name.startswith("Bound"):
            entries = [f"{node.name}.{item.name}" for item in node.body
                       if isinstance(item, ast.FunctionDef)
                       and (item.name == "__call__"
                            or item.name.startswith("call"))]
            if len(entries) > len(best):
                best = entries
    for name, tree in pkg.trees.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "FrozenCall":
                best = [*best, f"{name}.FrozenCall"]
    return best


def _module_aliases(pkg: Package, importer: str,
                    tree: ast.Module) -> set[str]:
    """Local names bound to a package module by an import in *tree*."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in pkg.trees:
                    aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            source = pkg.absolute(importer, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in pkg.trees:
                    aliases.add(alias.asname or alias.name)
    return aliases


def measure(root: Path) -> Metrics:
    pkg = Package(root)
    metrics = Metrics()
    module_edges: set[tuple[str, str]] = set()
    all_edges: set[tuple[str, str]] = set()
    for site in pkg.imports():
        where = f"{site.importer}:{site.line} -> {site.target}"
        if site.target != site.importer:
            for name in site.names:
                if _is_private(name):
                    metrics.private_imports.append(f"{where}.{name}")
        if site.in_function:
            metrics.function_imports.append(where)
        if not site.type_checking_only:
            all_edges.add((site.importer, site.target))
            if not site.in_function:
                module_edges.add((site.importer, site.target))
        # runtime may name the program contract (target.BoundProgram) in
        # annotations; what it must not do is load code generation
        if (site.importer.startswith(f"{PACKAGE}.runtime")
                and site.target.startswith(f"{PACKAGE}.target")
                and not site.type_checking_only):
            metrics.runtime_imports_target.append(where)
    # ``m._x`` through a module bound by an import
    for name, tree in pkg.trees.items():
        aliases = _module_aliases(pkg, name, tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                metrics.private_imports.append(
                    f"{name}:{node.lineno} -> {node.value.id}.{node.attr}")
    # a statement counts once even if it names several modules
    by_statement = {site.split(" -> ")[0]: site
                    for site in metrics.function_imports}
    metrics.function_imports = sorted(by_statement.values())
    metrics.cycles_module_level = _cycles(module_edges)
    metrics.cycles_with_functions = _cycles(all_edges)
    for name, tree in pkg.trees.items():
        count = _any_reads(tree)
        if count:
            metrics.any_by_module[name] = count
            metrics.any_count += count
    metrics.env_reads_at_import = _env_reads_at_import(pkg)
    metrics.call_entry_points = _call_entry_points(pkg)
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?",
                        default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--details", action="store_true",
                        help="list the evidence behind each figure")
    args = parser.parse_args(argv)
    metrics = measure(Path(args.root))
    if args.json:
        out = {"summary": metrics.summary()}
        if args.details:
            out["details"] = {
                "private_imports": metrics.private_imports,
                "cycles_module_level": metrics.cycles_module_level,
                "cycles_with_functions": metrics.cycles_with_functions,
                "function_imports": metrics.function_imports,
                "any_by_module": metrics.any_by_module,
                "env_reads_at_import": metrics.env_reads_at_import,
                "call_entry_points": metrics.call_entry_points,
                "runtime_imports_target": metrics.runtime_imports_target,
            }
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    width = max(len(k) for k in metrics.summary())
    for key, value in metrics.summary().items():
        print(f"{key:<{width}}  {value:>6}")
    if args.details:
        print("\nprivate cross-module imports:")
        for item in metrics.private_imports:
            print("  ", item)
        for title, cycles in (
                ("cycles (module level)", metrics.cycles_module_level),
                ("cycles (with function imports)",
                 metrics.cycles_with_functions)):
            print(f"\n{title}:")
            for cycle in cycles:
                print(f"   {len(cycle)}: {', '.join(cycle)}")
        print("\nenvironment reads at import:")
        for item in metrics.env_reads_at_import:
            print("  ", item)
        print("\ncall entry points:")
        for item in metrics.call_entry_points:
            print("  ", item)
        print("\nruntime -> target imports:")
        for item in metrics.runtime_imports_target:
            print("  ", item)
        print("\nAny by module (top 15):")
        for name, count in sorted(metrics.any_by_module.items(),
                                  key=lambda kv: -kv[1])[:15]:
            print(f"   {count:>5}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
