"""The package's version: the one place it is written (pyproject.toml reads
``__version__`` through ``[tool.setuptools.dynamic]``, statically, so it stays
a plain string literal; doc/conf.py and ``pytato_like.__version__`` import
it)."""

__version__: str = "0.1.0"
VERSION_TEXT: str = __version__
VERSION: tuple[int, ...] = tuple(int(i) for i in __version__.split("."))
