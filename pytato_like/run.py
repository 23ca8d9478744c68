"""``python -m pytato_like.run``: run a pytato program unchanged on
pytato_like.

Usage::

    python -m pytato_like.run script.py [args ...]
    python -m pytato_like.run -m module [args ...]   # e.g. -m pytest test/
    mpiexec -n 4 python -m pytato_like.run solver.py

installs the import alias (:func:`pytato_like.compat.install_pytato_alias`:
``import pytato`` loads pytato_like), then runs *script.py* (or
*module*) as ``__main__`` with ``sys.argv`` as the program expects it.
"""

from __future__ import annotations

import runpy
import sys

from pytato_like.compat import alias_path, install_pytato_alias

USAGE = ("usage: python -m pytato_like.run script.py [args ...]\n"
         "       python -m pytato_like.run -m module [args ...]")


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        raise SystemExit(0 if args else 2)
    import os

    install_pytato_alias()
    # child processes (test workers, subprocesses) import pytato too
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (alias_path(), os.environ.get("PYTHONPATH")) if p)
    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        sys.argv = args[1:]
        if args[1] == "pytest":
            # pytest-xdist workers ignore PYTHONPATH: the plugin form
            sys.argv[1:1] = ["-p", "pytato_like.compat"]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        # the script's folder first on the path, as `python script.py` does
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
