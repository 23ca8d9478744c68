"""The on-disk compile cache from the command line.

``python -m pytato_like.cache info`` shows where the cache is, its size
bound, and the entries and bytes per version directory (the one this
installation uses is marked), and the folder given to PoCL;
``python -m pytato_like.cache clear`` deletes every entry of every
installation and nothing else: other files in the folder, and PoCL's
folder, stay (:mod:`~pytato_like.cache_files`). The cache
itself (keys, verification, eviction) is
:mod:`pytato_like.target.loopy.cache`.

.. autofunction:: main
"""

from __future__ import annotations

import argparse
import os
import sys

from pytato_like import _pocl_cache as pocl_cache
from pytato_like.diagnostic import PytatoLikeError
from pytato_like.target.loopy import cache


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m pytato_like.cache",
        description="Show or empty pytato_like's on-disk compile cache.")
    parser.add_argument("command", choices=["info", "clear"])
    args = parser.parse_args(argv)
    try:
        return _command(args.command)
    except PytatoLikeError as exc:  # e.g. a malformed PYTATO_LIKE_CACHE_SIZE
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _command(command: str) -> int:
    if command == "clear":
        n = cache.clear_disk_cache()
        print(f"removed {n} entries from {cache.cache_base_dir()}")
        return 0
    info = cache.cache_info()
    print(f"directory  {info['dir']}")
    print(f"disk cache {'on' if info['enabled'] else 'off (PYTATO_LIKE_CACHE=0)'}")
    print(f"size       {_size(info['bytes'])} of {_size(info['limit'])} "
          "(PYTATO_LIKE_CACHE_SIZE)")
    pocl = os.environ.get("POCL_CACHE_DIR")
    print(f"PoCL cache {pocl or 'PoCL default'}"
          + ("  (ours, checked)" if pocl == pocl_cache.pocl_cache_dir()
             else "  (not ours)"))
    if not info["versions"]:
        print("entries    none")
    for version, kinds in sorted(info["versions"].items()):
        mark = "  (this installation)" if version == info["current"] else ""
        print(f"{version}{mark}")
        for kind, slot in sorted(kinds.items()):
            print(f"  {kind:<8} {slot['entries']:6d} entries  "
                  f"{_size(slot['bytes']):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
