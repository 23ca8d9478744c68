"""What the tests of replayed programs look at: the replays a bound loopy
program recorded and how often they ran."""

from __future__ import annotations


def recorded_replays(prg):
    """The recorded replays of *prg* (those that exist)."""
    return [r for r in prg.__dict__.get("_replays", {}).values() if r]


def n_replayed(prg):
    """How many calls of *prg* its replays ran."""
    return sum(r.n_runs for r in recorded_replays(prg))
