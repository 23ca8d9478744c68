"""Observability: compile phase times, launch times, progress, all through
:mod:`logging`.

**Loggers.** Everything is logged under ``pytato_like``: compile phases
and progress on ``pytato_like.codegen``, per-call launch lines on
``pytato_like.run``, cache decisions on ``pytato_like.cache``. An
application configures them like any other logger (pyopencl and loopy log
the same way).

**The switch** ``PYTATO_LIKE_REPORT`` (read at each compile):

==========================  ==============================================
value                       effect
==========================  ==============================================
unset                       nothing on stderr: a library leaves output to
                            the application. Compiles slower than
                            :data:`PROGRESS_AFTER` log their phases (level
                            INFO) to the application's handlers if it
                            configured logging at that level
``progress``                those progress lines on stderr, unless the
                            application configured logging itself (then
                            they go to its handlers)
``0``, ``off``              nothing is reported
``1``, ``on``, ``info``     also the phase table of every compile and one
                            line per call, on stderr (level INFO)
``debug``                   as ``info``, plus the loopy kernels (DEBUG)
==========================  ==============================================

Any other value raises :class:`~pytato_like.diagnostic.ConfigurationError`.

**Under MPI** only rank 0 writes to stderr through our handler, so that
``mpiexec -n 64`` prints one copy of each line, not 64.
``PYTATO_LIKE_REPORT_RANKS`` asks for more: ``all``, or a comma-separated
list of ranks (``0,3``). The rank comes from mpi4py when the application
has already imported it and initialised MPI, otherwise from the launcher's
environment (``PMI_RANK`` for MPICH and Intel MPI, ``OMPI_COMM_WORLD_RANK``
for Open MPI, ``PMIX_RANK``, ``MV2_COMM_WORLD_RANK``): the package never
imports mpi4py to find it. Handlers the application attached itself see
every rank's records; that is its configuration to make.
``generate_loopy(..., options={"report": True})`` turns the full report on
for one program. Every bound program keeps its figures in ``prg.stats``
(a :class:`ProgramStats`), reported or not.

**Phases** do not nest: cache lookup, materialisation, lowering, loopy
kernel building, code generation, assembly of the plan (what is left of
code generation), OpenCL build; their sum is the compile time (the table
prints it). Under MPI, lines carry the rank (and the part, inside
:func:`compile_context`).

.. autoclass:: ProgramStats
.. autofunction:: report_enabled
.. autofunction:: mpi_rank
.. autofunction:: reporting_ranks
.. autofunction:: configure_logging
.. autofunction:: compile_context
.. autodata:: PROGRESS_AFTER
.. autodata:: CALLS_KEPT
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import sys
import threading
import time
from pytato_like.diagnostic import ConfigurationError

logger = logging.getLogger("pytato_like.codegen")
run_logger = logging.getLogger("pytato_like.run")

#: seconds after which a running compile reports its phases as they finish
PROGRESS_AFTER = 1.0

_LEVELS = {"progress": "progress", "": "quiet",
           "0": None, "off": None, "no": None, "false": None,
           "1": logging.INFO, "on": logging.INFO, "yes": logging.INFO,
           "true": logging.INFO, "info": logging.INFO,
           "debug": logging.DEBUG}


def _setting():
    """The parsed ``PYTATO_LIKE_REPORT``: ``None`` (off), ``"quiet"``
    (unset), ``"progress"`` or a logging level."""
    raw = os.environ.get("PYTATO_LIKE_REPORT", "")
    value = raw.strip().lower()
    if value not in _LEVELS:
        raise ConfigurationError(
            f"PYTATO_LIKE_REPORT={raw!r} is not one of "
            "'0', 'off', 'progress', '1', 'on', 'info', 'debug'")
    return _LEVELS[value]


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (which notebooks and test
    runners replace)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


class _ProgressOnly(logging.Filter):
    def filter(self, record):
        return getattr(record, "progress", False)


# {{{ which MPI rank reports

# what MPI launchers put in each process's environment: (rank, size)
_LAUNCHER_VARIABLES = (
    ("PMI_RANK", "PMI_SIZE"),                               # MPICH, Intel MPI
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),       # Open MPI
    ("PMIX_RANK", "PMIX_SIZE"),                             # PMIx launchers
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),         # MVAPICH
)


def mpi_rank() -> tuple[int, int] | None:
    """``(rank, size)`` of this process in ``MPI.COMM_WORLD``, or ``None``
    outside MPI. Asks mpi4py only if the application imported it and
    initialised MPI; otherwise reads the launcher's environment, so that
    importing or compiling never imports mpi4py."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            if mpi.Is_initialized() and not mpi.Is_finalized():
                return mpi.COMM_WORLD.rank, mpi.COMM_WORLD.size
        except Exception:  # noqa: BLE001 - a broken MPI: try the environment
            pass
    for rank_variable, size_variable in _LAUNCHER_VARIABLES:
        rank = os.environ.get(rank_variable, "")
        if rank.isdigit():
            size = os.environ.get(size_variable, "")
            return int(rank), int(size) if size.isdigit() else int(rank) + 1
    return None


def reporting_ranks() -> frozenset[int] | None:
    """The ranks whose records our stderr handler writes, from
    ``PYTATO_LIKE_REPORT_RANKS`` (default ``0``); ``None`` for all."""
    raw = os.environ.get("PYTATO_LIKE_REPORT_RANKS", "0")
    value = raw.strip().lower()
    if value == "all":
        return None
    parts = [part.strip() for part in value.split(",")]
    if not parts or not all(part.isdigit() for part in parts):
        raise ConfigurationError(
            f"PYTATO_LIKE_REPORT_RANKS={raw!r} is neither 'all' nor a "
            "comma-separated list of ranks such as '0' or '0,3'")
    return frozenset(int(part) for part in parts)


class _ReportingRanksOnly(logging.Filter):
    """Passes records only on the ranks chosen to report (every record
    outside MPI)."""

    def __init__(self, ranks: frozenset[int] | None) -> None:
        super().__init__()
        self.ranks = ranks

    def filter(self, record):
        if self.ranks is None:
            return True
        where = mpi_rank()
        return where is None or where[0] in self.ranks

# }}}


_HANDLER: list[logging.Handler] = []
# the level configure_logging last gave the pytato_like logger
_LEVEL_SET = [None]


def configure_logging(level=None) -> None:
    """Attach (once) a stderr handler to the ``pytato_like`` logger.
    *level* ``None`` follows ``PYTATO_LIKE_REPORT``; ``"quiet"`` (the
    default) attaches nothing, and the application's logging configuration
    decides; ``"progress"`` passes only progress lines of slow compiles,
    and only when the application has not configured logging itself; a
    logging level passes everything from that level on."""
    if level is None:
        level = _setting()
    root = logging.getLogger("pytato_like")
    if _HANDLER:
        handler = _HANDLER[0]
    else:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _HANDLER.append(handler)
    for f in list(handler.filters):
        handler.removeFilter(f)
    handler.addFilter(_ReportingRanksOnly(reporting_ranks()))
    # the logger's level is ours to set unless the application set it
    ours = root.level == logging.NOTSET or root.level == _LEVEL_SET[0]
    if level is None or level == "quiet":
        if handler in root.handlers:
            root.removeHandler(handler)
        if ours:
            root.setLevel(logging.NOTSET)
            _LEVEL_SET[0] = None
        return
    if level == "progress":
        others = [h for h in root.handlers if h is not handler
                  and not isinstance(h, logging.NullHandler)]
        if logging.getLogger().handlers or others:
            if handler in root.handlers:
                root.removeHandler(handler)
            if ours:  # the application's configuration decides
                root.setLevel(logging.NOTSET)
                _LEVEL_SET[0] = None
            return
        handler.addFilter(_ProgressOnly())
        level = logging.INFO
    handler.setLevel(level)
    if ours:
        root.setLevel(level)
        _LEVEL_SET[0] = level
    if handler not in root.handlers:
        root.addHandler(handler)


def report_enabled(report: bool | None) -> bool:
    """Whether the full report (phase table, call lines) is on for a
    program: its *report* option
    (:attr:`~pytato_like.target.loopy.options.CodegenOptions.report`)
    unless None, else ``PYTATO_LIKE_REPORT`` (read now). Also configures
    the stderr handler accordingly."""
    setting = _setting()
    if report is not None:
        enabled = bool(report)
        configure_logging(logging.INFO if enabled else setting)
        return enabled
    configure_logging(setting)
    return setting not in (None, "progress", "quiet")


# {{{ where: MPI rank and part

_PART: list = []


@contextlib.contextmanager
def compile_context(**labels):
    """Label the report lines of compiles inside the block (e.g.
    ``part=3``)."""
    _PART.append(labels)
    try:
        yield
    finally:
        _PART.pop()


def _where() -> str:
    labels = {}
    rank_and_size = mpi_rank()
    if rank_and_size is not None and rank_and_size[1] > 1:
        labels["rank"] = rank_and_size[0]
    for d in _PART:
        labels.update(d)
    if not labels:
        return ""
    return "[" + " ".join(f"{k} {v}" for k, v in labels.items()) + "] "

# }}}


#: how many calls :attr:`ProgramStats.calls` keeps
CALLS_KEPT = 8

_PHASE_ORDER = ("cache_lookup", "materialize", "lower", "loopy", "codegen",
                "assemble", "opencl_build")


@dataclasses.dataclass
class ProgramStats:
    """Figures of one bound program."""

    #: compile phase -> seconds (empty phases of a cache hit are absent);
    #: phases do not overlap, their sum is the compile time
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    #: "memory", "disk" or "miss"
    cache: str = "miss"
    n_nodes: int = 0
    n_stored: int = 0
    n_kernels: int = 0
    n_launches: int = 0
    #: the last :data:`CALLS_KEPT` calls: (total seconds, [seconds per
    #: launch]) each. Few, so that programs called every step do not keep
    #: thousands of small objects alive for the garbage collector to scan
    #: (65 part programs kept up to 130 000 with a history of 1000)
    calls: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=CALLS_KEPT))
    #: calls since the program was bound
    n_calls: int = 0
    enabled: bool = False
    #: the rank/part label of the compile, under MPI
    where: str = ""
    #: device bytes held at once during the last call: inputs, outputs,
    #: bound data and the temporaries alive together (kernel-internal
    #: scratch excluded)
    peak_device_bytes: int = 0

    def __post_init__(self) -> None:
        self.where = self.where or _where()

    def record_phase(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds
        current = _current()
        if current and current[-1][0] is self:
            current[-1][1].phase_done(name, seconds)

    def record_call(self, total: float, launches: list[float]) -> None:
        self.calls.append((total, launches))
        self.n_calls += 1
        if self.enabled:
            run_logger.info("%scall %d: %.3f ms (%d launches, enqueue %.3f ms, "
                            "peak device memory %.1f MB)",
                            self.where, self.n_calls, total * 1e3,
                            len(launches), sum(launches) * 1e3,
                            self.peak_device_bytes / 2**20)

    @property
    def compile_seconds(self) -> float:
        return sum(self.phases.values())

    def table(self) -> str:
        lines = [f"{'phase':<16}{'seconds':>10}"]
        names = [p for p in _PHASE_ORDER if p in self.phases]
        names += [p for p in self.phases if p not in _PHASE_ORDER]
        for name in names:
            lines.append(f"{name:<16}{self.phases[name]:>10.4f}")
        lines.append(f"{'total':<16}{self.compile_seconds:>10.4f}")
        lines.append(f"cache {self.cache}; {self.n_nodes} nodes, {self.n_stored} "
                     f"stored arrays, {self.n_kernels} distinct kernels, "
                     f"{self.n_launches} launches per call")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


# (stats, progress reporter) of the compiles running, per thread (a
# program's first call on the host compiles it in a thread of its own)
_COMPILES = threading.local()


def _current() -> list:
    stack = getattr(_COMPILES, "stack", None)
    if stack is None:
        stack = _COMPILES.stack = []
    return stack


class compiling:  # noqa: N801 (used as a context manager)
    """Context manager around a compile step (code generation, OpenCL
    build): once it has run for :data:`PROGRESS_AFTER` seconds it logs
    that it is still working, then every phase as it finishes, then the
    total."""

    def __init__(self, stats: ProgramStats, what: str) -> None:
        self.stats = stats
        self.what = what
        self.slow = False
        stats.where = stats.where or _where()

    def _log(self, msg, *args) -> None:
        logger.info("%s" + msg, self.stats.where, *args,
                    extra={"progress": True})

    def _progress(self) -> None:
        self.slow = True
        self._log("compiling %s: still working after %.1f s (%s)", self.what,
                  PROGRESS_AFTER, ", ".join(
                      f"{k} {v:.2f} s" for k, v in self.stats.phases.items())
                  or "starting")

    def phase_done(self, name: str, seconds: float) -> None:
        if self.slow:
            self._log("compiling %s: %s took %.2f s", self.what, name, seconds)

    def __enter__(self):
        _current().append((self.stats, self))
        self.t0 = time.perf_counter()
        self.timer = threading.Timer(PROGRESS_AFTER, self._progress)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        _current().pop()
        elapsed = time.perf_counter() - self.t0
        if self.slow or elapsed > PROGRESS_AFTER:
            self._log("compiled %s in %.2f s", self.what, elapsed)
        return False


def progress(phase: str, seconds: float) -> None:
    """A step of the running compile finished: logged when that compile is
    slow (the caller records the phase time in the stats itself)."""
    current = _current()
    if current:
        current[-1][1].phase_done(phase, seconds)
