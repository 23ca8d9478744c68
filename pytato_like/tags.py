"""Tags that steer how arrays are named, stored and generated.

Tags are :class:`pytools.tag.Tag` instances attached to arrays with
:meth:`~pytato_like.array.Array.tagged`. The ones defined here are understood
by the library itself:

.. autoclass:: ImplementationStrategy
.. autoclass:: ImplStored
.. autoclass:: ImplInlined
.. autoclass:: CountNamed
.. autoclass:: Named
.. autoclass:: PrefixNamed
.. autoclass:: AssumeNonNegative
"""

from __future__ import annotations

from pytools.tag import Tag, UniqueTag, tag_dataclass

__all__ = [
    "AssumeNonNegative",
    "CountNamed",
    "ImplInlined",
    "ImplStored",
    "ImplementationStrategy",
    "Named",
    "PrefixNamed",
    "Tag",
    "UniqueTag",
]


@tag_dataclass
class ImplementationStrategy(UniqueTag):
    """How an array is realised in generated code (at most one per array)."""


@tag_dataclass
class ImplStored(ImplementationStrategy):
    """The array is computed once into memory and read back by its users."""


@tag_dataclass
class ImplInlined(ImplementationStrategy):
    """The array's expression is substituted into each of its users."""


@tag_dataclass
class CountNamed(UniqueTag):
    """Name the stored array ``prefix`` followed by a counter."""

    prefix: str


@tag_dataclass
class _BaseNameTag(UniqueTag):
    pass


@tag_dataclass
class Named(_BaseNameTag):
    """Give the stored array exactly this variable name in generated code."""

    name: str


@tag_dataclass
class PrefixNamed(_BaseNameTag):
    """Give the stored array a generated name starting with ``prefix``."""

    prefix: str


@tag_dataclass
class AssumeNonNegative(Tag):
    """The array's values are known to be non-negative (lets code generation
    drop sign checks, e.g. in integer division of indices)."""
