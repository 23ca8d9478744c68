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
.. autoclass:: ExpandedDimsReshape
.. autoclass:: ForceValueArgTag

Informational tags (kept in :attr:`~pytato_like.array.Array.non_equality_tags`,
ignored by hashing and equality):

.. autoclass:: InfoTag
.. autoclass:: CreatedAt
.. autoclass:: CreationStack
.. autoclass:: CreationFrame

Tags of function definitions and calls (accepted for pytato programs that
attach them; pytato_like has no separate function-call nodes, so they carry
no meaning to code generation here):

.. autoclass:: FunctionIdentifier
.. autoclass:: CallImplementationTag
.. autoclass:: InlineCallTag
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from collections.abc import Hashable

from pytools.tag import Tag, UniqueTag, tag_dataclass

__all__ = [
    "AssumeNonNegative",
    "CallImplementationTag",
    "CountNamed",
    "CreatedAt",
    "CreationFrame",
    "CreationStack",
    "ExpandedDimsReshape",
    "ForceValueArgTag",
    "FunctionIdentifier",
    "ImplInlined",
    "ImplStored",
    "ImplementationStrategy",
    "InfoTag",
    "InlineCallTag",
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


@tag_dataclass
class ExpandedDimsReshape(UniqueTag):
    """Put by :func:`~pytato_like.expand_dims` on the
    :class:`~pytato_like.array.Reshape` it returns: :attr:`new_dims` are the
    positions of the inserted unit axes in the result."""

    new_dims: tuple[int, ...]


@tag_dataclass
class ForceValueArgTag(UniqueTag):
    """Marks a 0-dimensional input that generated code should take as a
    scalar passed by value rather than as a one-element array."""


@tag_dataclass
class FunctionIdentifier(UniqueTag):
    """The name (:attr:`identifier`) of a traced function definition."""

    identifier: Hashable


@tag_dataclass
class CallImplementationTag(UniqueTag):
    """Base class of tags saying how a function call is realised."""


@tag_dataclass
class InlineCallTag(CallImplementationTag):
    """The call's body is substituted at the call site."""


# {{{ creation tracebacks

class InfoTag(Tag):
    """A tag that only informs (e.g. about where an array came from); it is
    kept out of equality and hashing."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class CreationFrame:
    """One frame of a :class:`CreationStack` (picklable, unlike
    :class:`traceback.FrameSummary`)."""

    filename: str
    lineno: int | None
    name: str
    line: str | None

    def short_str(self, maxlen: int = 100) -> str:
        text = f"{self.filename}:{self.lineno}, in {self.name}: {self.line}"
        return text if len(text) <= maxlen else text[:maxlen - 3] + "..."

    def __str__(self) -> str:
        return (f"{self.filename}:{self.lineno}, in {self.name}\n"
                f"    {self.line}")


@dataclasses.dataclass(frozen=True)
class CreationStack:
    """The user frames (outermost first) active when an array was built;
    frames inside pytato_like itself are left out."""

    frames: tuple[CreationFrame, ...]

    @classmethod
    def from_current_stack(cls) -> CreationStack:
        frames = tuple(
            CreationFrame(f.filename, f.lineno, f.name, f.line)
            for f in traceback.extract_stack()
            if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR))
        return cls(frames)

    def to_stacksummary(self) -> traceback.StackSummary:
        return traceback.StackSummary.from_list(
            [traceback.FrameSummary(f.filename, f.lineno, f.name, line=f.line)
             for f in self.frames])

    def short_str(self, maxlen: int = 100) -> str:
        """The innermost user frame, in one line."""
        if not self.frames:
            return "<no user frame>"
        return self.frames[-1].short_str(maxlen)

    def __str__(self) -> str:
        return "\n".join(str(f) for f in self.frames)


@dataclasses.dataclass(frozen=True)
class CreatedAt(UniqueTag, InfoTag):
    """Where an array was created (recorded while
    :func:`~pytato_like.set_traceback_tag_enabled` is on).

    .. attribute:: traceback

        A :class:`CreationStack`.
    """

    traceback: CreationStack

    def __repr__(self) -> str:
        return f"CreatedAt({self.traceback.short_str()})"

# }}}
