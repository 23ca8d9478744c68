"""Reading generated OpenCL source in tests."""

from __future__ import annotations

import re

# a sequential loop's header: its bound may be a min() written as a select
_LOOP_HEADER = re.compile(r"for \([^;]*;[^;]*;[^)]*\)")
# the condition of a ``(cond) ? a : b`` select
_SELECT_CONDITION = re.compile(r"\(([^()?]*)\) \?")


# the dry-run argument and return every generated kernel has
# (tests/test_kernel_precompile.py checks them)
_DRY_RUN = re.compile(r", int const _pt_dry(?=\))|\n  if \(_pt_dry\)\n    return;")


def kernels(source: str) -> list[str]:
    """Each ``__kernel`` function of *source*, from its keyword on, without
    the dry-run argument and return (see
    :mod:`pytato_like.kernel_precompile`)."""
    return [_DRY_RUN.sub("", "__kernel" + k)
            for k in source.split("__kernel")[1:]]


def select_conditions(source: str) -> list[str]:
    """The conditions of the ``?:`` selects of *source* that compute
    values (loop headers, whose bounds are ``min`` written as a select, do
    not count)."""
    return _SELECT_CONDITION.findall(_LOOP_HEADER.sub("for (...)", source))


def has_select(source: str) -> bool:
    """Whether *source* computes any value through a ``?:`` select (loop
    headers do not count)."""
    return "?" in _LOOP_HEADER.sub("for (...)", source)
