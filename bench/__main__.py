"""Run every benchmark module (``python -m bench [name ...]``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__)
                   if m.name.startswith("bench_"))
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    failed = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        try:
            importlib.import_module(f"bench.{name}").main([])
        except Exception as err:  # keep running the others; report at the end
            print(f"{name} failed: {type(err).__name__}: {err}", flush=True)
            failed.append(name)
    if failed:
        print(f"\nfailed benchmarks: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
