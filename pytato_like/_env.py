"""Reading ``PYTATO_LIKE_*`` environment settings (integers and on/off
switches): a malformed value raises
:class:`~pytato_like.diagnostic.ConfigurationError` naming the variable and
the value, instead of a bare :class:`ValueError` from ``int()`` or a value
silently read as "on"."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pytato_like.diagnostic import ConfigurationError


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
        bound = "" if minimum is None else f" >= {minimum}"
        raise ConfigurationError(
            f"{name}={raw!r} is not an integer{bound}")
    return value


#: the texts (stripped, lower case) of an on/off switch
SWITCH_ON = frozenset({"1", "on", "yes", "true"})
SWITCH_OFF = frozenset({"0", "off", "no", "false"})


def env_flag(name: str, default: bool, *,
             environ: Mapping[str, str] | None = None) -> bool:
    """The switch in environment variable *name* (``1``/``on``/``yes``/
    ``true`` or ``0``/``off``/``no``/``false``, any case), or *default* when
    unset or empty.

    :raises ~pytato_like.diagnostic.ConfigurationError: for any other value.
    """
    env = os.environ if environ is None else environ
    raw = env.get(name)
    value = "" if raw is None else raw.strip().lower()
    if not value:
        return default
    if value in SWITCH_ON:
        return True
    if value in SWITCH_OFF:
        return False
    raise ConfigurationError(
        f"{name}={raw!r} is not a switch (expected one of "
        f"{sorted(SWITCH_ON)} or {sorted(SWITCH_OFF)})")


# the variables MPI launchers set to the number of ranks on this node, and
# to this rank's index among them (MPICH's Hydra, Open MPI)
_LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")
_LOCAL_RANK_VARIABLES = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")


def ranks_on_node(environ: Mapping[str, str] | None = None) -> int | None:
    """The number of MPI ranks on this node as the launcher announces it,
    or ``None`` when not launched by a known MPI launcher."""
    env = os.environ if environ is None else environ
    for name in _LOCAL_SIZE_VARIABLES:
        value = env.get(name)
        if value and value.isdigit() and int(value) > 0:
            return int(value)
    return None


def rank_on_node(environ: Mapping[str, str] | None = None) -> int | None:
    """This rank's index among the ranks of its node as the launcher
    announces it, or ``None`` when not launched by a known MPI launcher."""
    env = os.environ if environ is None else environ
    for name in _LOCAL_RANK_VARIABLES:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None
