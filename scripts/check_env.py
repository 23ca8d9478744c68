"""The project's environment check: ``pytato-like-check-env --project``
(:mod:`pytato_like.check_env`), i.e. every component plus the test set-up
(two PoCL devices, ``mpiexec -genv``). Used by ``scripts/bootstrap.sh`` and
``make check-env``; extra arguments (``--quiet``) are passed on."""

from __future__ import annotations

import sys
from pathlib import Path

# run from a checkout whether or not the package is installed
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytato_like.check_env import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--project", *sys.argv[1:]]))
