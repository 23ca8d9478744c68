"""Reading generated OpenCL source in tests."""

from __future__ import annotations

import re

# a sequential loop's header: its bound may be a min() written as a select
_LOOP_HEADER = re.compile(r"for \([^;]*;[^;]*;[^)]*\)")


def has_select(source: str) -> bool:
    """Whether *source* computes any value through a ``?:`` select (loop
    headers, whose bounds are ``min`` written as a select, do not count)."""
    return "?" in _LOOP_HEADER.sub("for (...)", source)
