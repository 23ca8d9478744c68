"""Writes the intersphinx inventories of NumPy and loopy into
``doc/_inventories/`` (the doc build reads them offline: this machine
reaches package registries, not documentation sites).

* loopy: built by Sphinx from the documentation sources in loopy's sdist
  (``pip download --no-binary :all: loopy==<installed>``), against the
  installed loopy, with a minimal configuration (autodoc only), so that
  every anchor is one loopy's own site has.
* NumPy: NumPy's sdist carries no built docs and its doc build needs much
  more than we install, so the inventory is written from the installed
  package by NumPy's documented URL scheme: ``reference/generated/numpy.X``
  pages for functions, classes and ndarray methods, the scalar-types page
  for scalar types.

Run: ``.venv/bin/python scripts/make_inventories.py`` (needs the network
to PyPI for loopy's sdist); commit the two ``.inv`` files it writes.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tarfile
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "doc", "_inventories")


def write_inventory(path: str, project: str, version: str,
                    entries: list[tuple[str, str, str]]) -> None:
    """Sphinx inventory format 2: (name, domain:role, uri) per entry."""
    header = ("# Sphinx inventory version 2\n"
              f"# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n")
    # (Sphinx expands a "$" only at the end of a uri: spell them out)
    body = "".join(f"{name} {role} 1 {uri.replace('$', name)} -\n"
                   for name, role, uri in sorted(set(entries)))
    with open(path, "wb") as f:
        f.write(header.encode())
        f.write(zlib.compress(body.encode()))


def numpy_entries() -> list[tuple[str, str, str]]:
    import numpy as np
    entries = [("numpy", "py:module", "reference/index.html#module-$")]
    for name in dir(np):
        if name.startswith("_"):
            continue
        obj = getattr(np, name)
        full = f"numpy.{name}"
        if isinstance(obj, type) and issubclass(obj, np.generic):
            entries.append((full, "py:class",
                            "reference/arrays.scalars.html#$"))
        elif isinstance(obj, type):
            entries.append((full, "py:class", "reference/generated/$.html#$"))
        elif callable(obj) and not inspect.ismodule(obj):
            entries.append((full, "py:function",
                            "reference/generated/$.html#$"))
    for name in dir(np.ndarray):
        if not name.startswith("_"):
            role = ("py:method" if callable(getattr(np.ndarray, name))
                    else "py:attribute")
            entries.append((f"numpy.ndarray.{name}", role,
                            "reference/generated/$.html#$"))
    return entries


def loopy_inventory(path: str) -> None:
    import loopy
    version = loopy.version.VERSION_TEXT
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--no-binary", ":all:", f"loopy=={version}", "-d", tmp,
                        "-q"], check=True)
        (sdist,) = [f for f in os.listdir(tmp) if f.endswith(".tar.gz")]
        with tarfile.open(os.path.join(tmp, sdist)) as tar:
            tar.extractall(tmp, filter="data")
        doc = os.path.join(tmp, sdist[:-len(".tar.gz")], "doc")
        with open(os.path.join(doc, "conf.py"), "w") as f:
            # loopy's own conf.py fetches its settings over the network
            f.write('project = "loopy"\nextensions = ["sphinx.ext.autodoc"]\n'
                    'exclude_patterns = ["_build"]\n'
                    'autodoc_typehints = "none"\n')
        out = os.path.join(tmp, "html")
        subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q",
                        doc, out], check=True, stderr=subprocess.DEVNULL)
        with open(os.path.join(out, "objects.inv"), "rb") as src, \
                open(path, "wb") as dst:
            dst.write(src.read())


def main() -> None:
    import numpy as np
    os.makedirs(OUT, exist_ok=True)
    write_inventory(os.path.join(OUT, "numpy.inv"), "NumPy", np.__version__,
                    numpy_entries())
    loopy_inventory(os.path.join(OUT, "loopy.inv"))


if __name__ == "__main__":
    main()
