"""Observability: compile phase times, launch times, progress lines.

Opt in with ``PYTATO_LIKE_REPORT=1`` in the environment or
``generate_loopy(..., options={"report": True})``: a table of compile
phases (materialisation, lowering, loopy kernel build, code generation,
OpenCL build) is printed to stderr after compiling, and one line per call
with the launch times. Every bound program also keeps the figures in
``prg.stats`` (a :class:`ProgramStats`), reported or not.

Compiles that take longer than :data:`PROGRESS_AFTER` seconds log a
progress line (logger ``pytato_like.target.loopy``, and stderr unless
``PYTATO_LIKE_PROGRESS=0``).

.. autoclass:: ProgramStats
.. autofunction:: report_enabled
.. autodata:: PROGRESS_AFTER
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time

logger = logging.getLogger("pytato_like.target.loopy")

#: seconds after which a running compile prints a progress line
PROGRESS_AFTER = 1.5


def report_enabled(options: dict | None) -> bool:
    """Whether the compile/launch report is on (option or environment)."""
    if options and "report" in options:
        return bool(options["report"])
    return os.environ.get("PYTATO_LIKE_REPORT", "") not in ("", "0")


@dataclasses.dataclass
class ProgramStats:
    """Figures of one bound program."""

    #: compile phase -> seconds (empty phases of a cache hit are absent)
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    #: "memory", "disk" or "miss"
    cache: str = "miss"
    n_nodes: int = 0
    n_stored: int = 0
    n_kernels: int = 0
    n_launches: int = 0
    #: per call: (total seconds, [seconds per launch])
    calls: list = dataclasses.field(default_factory=list)
    enabled: bool = False

    def record_phase(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def record_call(self, total: float, launches: list[float]) -> None:
        self.calls.append((total, launches))
        if len(self.calls) > 1000:
            del self.calls[:500]
        if self.enabled:
            print(f"pytato_like: call {len(self.calls)}: {total * 1e3:.3f} ms "
                  f"({len(launches)} launches, enqueue "
                  f"{sum(launches) * 1e3:.3f} ms)", file=sys.stderr)

    def table(self) -> str:
        lines = [f"{'phase':<16}{'seconds':>10}"]
        for name, t in self.phases.items():
            lines.append(f"{name:<16}{t:>10.4f}")
        lines.append(f"cache {self.cache}; {self.n_nodes} nodes, {self.n_stored} "
                     f"stored arrays, {self.n_kernels} distinct kernels, "
                     f"{self.n_launches} launches per call")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


_CURRENT: list[ProgramStats] = []


def record_phase(name: str, seconds: float) -> None:
    """Add *seconds* to phase *name* of the program being built or run."""
    if _CURRENT:
        _CURRENT[-1].record_phase(name, seconds)


class compiling:  # noqa: N801 (used as a context manager)
    """Context manager around a compile: makes *stats* current and prints
    a progress line when the compile outlasts :data:`PROGRESS_AFTER`."""

    def __init__(self, stats: ProgramStats, what: str) -> None:
        self.stats = stats
        self.what = what

    def _progress(self) -> None:
        msg = (f"pytato_like: compiling {self.what} "
               f"(still working after {PROGRESS_AFTER:.1f} s)")
        logger.info(msg)
        if os.environ.get("PYTATO_LIKE_PROGRESS", "1") != "0":
            print(msg, file=sys.stderr)

    def __enter__(self):
        _CURRENT.append(self.stats)
        self.t0 = time.perf_counter()
        self.timer = threading.Timer(PROGRESS_AFTER, self._progress)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        _CURRENT.pop()
        elapsed = time.perf_counter() - self.t0
        if elapsed > PROGRESS_AFTER:
            logger.info("pytato_like: compiled %s in %.2f s", self.what, elapsed)
        return False
