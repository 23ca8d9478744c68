"""What the tests of replayed programs look at: the replays a bound loopy
program recorded and how often they ran."""

from __future__ import annotations


def recorded_replays(prg):
    """The recorded replays of *prg* (those that exist)."""
    return [r for r in prg.__dict__.get("_replays", {}).values() if r]


def n_replayed(prg):
    """How many calls of *prg* its replays ran."""
    return sum(r.n_runs for r in recorded_replays(prg))


def sized_sum_program():
    """``s = x + 3 y`` over inputs of a size parameter ``n``."""
    import numpy as np

    import pytato_like as pt
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    y = pt.make_placeholder("y", (n,), np.float64)
    return pt.generate_loopy({"s": x + 3 * y})
