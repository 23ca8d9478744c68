# Sphinx configuration for pytato_like.
# The build must stay warning-free: `make docs` / `make test` use `sphinx -W`.
# No network access at build time: intersphinx is deliberately not enabled.
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "pytato_like"
author = "pytato_like developers"
copyright = "2026, pytato_like developers"
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

nitpicky = False
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = "pytato_like"
