"""Reading ``PYTATO_LIKE_*`` environment settings: a malformed value raises
:class:`~pytato_like.diagnostic.ConfigurationError` naming the variable and
the value, instead of a bare :class:`ValueError` from ``int()``."""

from __future__ import annotations

import os
from collections.abc import Mapping


def env_int(name: str, default: int, *, minimum: int | None = 1,
            environ: Mapping[str, str] | None = None) -> int:
    """The integer in environment variable *name*, or *default* when unset.

    :raises ~pytato_like.diagnostic.ConfigurationError: if the value is not
        an integer or is below *minimum*.
    """
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or (minimum is not None and value < minimum):
        from pytato_like.diagnostic import ConfigurationError
        bound = "" if minimum is None else f" >= {minimum}"
        raise ConfigurationError(
            f"{name}={raw!r} is not an integer{bound}")
    return value
