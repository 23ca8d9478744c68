"""Traces: when each message and each part ran, viewable in Perfetto.

A :class:`TraceRecorder` is what an executor calls as work happens. Each
message, part execution or wait gets a :class:`TraceRecord` with three
timestamps:

``posted``
    the work was handed over: a send/receive was posted (``Isend`` /
    ``Irecv``), a part became runnable, a thread was submitted;
``started``
    it began: a part started computing, a thread started running (for an
    MPI message the transfer's start is not observable, so it defaults to
    ``posted``);
``completed``
    its completion was observed.

and what it moved: ``peer`` rank, ``tag``, ``nbytes``, ``part_id``. The
recorder's ``rank`` says where it ran. ``posted <= started <= completed``
always holds (the record enforces it).

A :class:`Trace` (from :meth:`TraceRecorder.trace`) exports Chrome/Perfetto
trace JSON (``{"traceEvents": [...]}``, one complete ``"X"`` event per
record spanning *started* to *completed*, ``pid`` = rank, one ``tid`` per
kind of work: compute, send, recv, wait, other) -- load it at
https://ui.perfetto.dev or ``chrome://tracing``. :func:`gather_traces`
collects every rank's trace on one rank (``comm.gather``) and merges them
into one timeline, with every rank's clock aligned to the root's by a few
timed round trips. :meth:`Trace.summary` tabulates
messages, bytes, and time in compute versus waiting.

Typical use in an executor::

    tracer = TraceRecorder(rank=comm.rank)
    rec = tracer.message("send", peer=1, tag=7, nbytes=buf.nbytes)  # posted
    req = comm.Isend(buf, dest=1, tag=7)
    with tracer.part(part_id):                 # started .. completed
        run_part()
    with tracer.wait("sends"):
        req.Wait()
    rec.complete()
    merged = gather_traces(comm, tracer.trace())   # Trace on rank 0
    if merged is not None:
        merged.write_json("trace.json")
        print(merged.format_summary())

.. autoclass:: TraceRecord
    :members: start, complete, duration_ns
.. autoclass:: TraceRecorder
    :members:
.. autoclass:: Trace
    :members:
.. autofunction:: merge_traces
.. autofunction:: gather_traces

Profiles of partitioned DAGs
----------------------------

:func:`load_trace` reads a trace back (a :class:`Trace`, a list of records
from ``DistributedExecution.fetch_trace()``, a Chrome/Perfetto JSON object
or file), and :func:`profile_partition` condenses it into what the
partition drawing shows
(:func:`~pytato_like.visualization.dot.get_dot_graph_from_partition` with
``trace=``): per rank and part, the mean and maximum time over the traced
executions and its share of the execution time; per message, its bytes
and its time in flight (the send's start on one rank to the receive's
completion on the other, on the merged clock of :func:`gather_traces`).
Records of one execution carry its number in ``args["execution"]`` (the
executor stamps them), which is how executions are told apart.

.. autofunction:: load_trace
.. autofunction:: profile_partition
.. autoclass:: PartitionProfile
    :members:
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, cast

from pytato_like.diagnostic import VisualizationError

if TYPE_CHECKING:
    import os
    from typing import TypeAlias

    from mpi4py import MPI

    #: what :func:`load_trace` reads: a trace, a recorder, records, a Chrome
    #: trace object (parsed JSON) or its file
    TraceSource: TypeAlias = (
        "Trace | TraceRecorder | Iterable[TraceRecord] | dict[str, Any]"
        " | str | os.PathLike[str]")

#: Kinds of records and the track (Chrome ``tid``) each is drawn on.
TRACKS = {"part": 0, "send": 1, "recv": 2, "wait": 3, "task": 4}
TRACK_NAMES = {0: "compute", 1: "send", 2: "recv", 3: "wait", 4: "tasks",
               5: "other"}


def now_ns() -> int:
    """The clock of every trace: a monotonic, system-wide nanosecond clock
    (same rate on every process; offsets are aligned at merge time)."""
    return time.perf_counter_ns()


_perf_counter_ns = time.perf_counter_ns


# slots: an executor makes several records per part, each execution
@dataclasses.dataclass(slots=True)
class TraceRecord:
    """One message, part execution, wait or task. Times in nanoseconds of
    :func:`now_ns`; ``None`` until they happen."""

    kind: str
    name: str
    rank: int
    posted_ns: int
    started_ns: int | None = None
    completed_ns: int | None = None
    peer: int | None = None
    tag: int | None = None
    nbytes: int | None = None
    part_id: Hashable | None = None
    # (what the recording code stamps on: any value; exported as text
    # unless JSON has it)
    args: dict[str, object] = dataclasses.field(default_factory=dict)

    def start(self, t_ns: int | None = None) -> TraceRecord:
        """Mark the start (now, or at *t_ns*; never before posted)."""
        t = _perf_counter_ns() if t_ns is None else t_ns
        posted = self.posted_ns
        self.started_ns = t if t > posted else posted
        return self

    def complete(self, t_ns: int | None = None) -> TraceRecord:
        """Mark completion (now, or at *t_ns*). A record never started is
        taken to have started when it was posted."""
        started = self.started_ns
        if started is None:
            started = self.started_ns = self.posted_ns
        if self.completed_ns is None:
            t = _perf_counter_ns() if t_ns is None else t_ns
            self.completed_ns = t if t > started else started
        return self

    @property
    def done(self) -> bool:
        return self.completed_ns is not None

    @property
    def duration_ns(self) -> int:
        """``completed - started`` (0 if not completed)."""
        if self.completed_ns is None or self.started_ns is None:
            return 0
        return self.completed_ns - self.started_ns

    def __enter__(self) -> TraceRecord:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.complete()

    def to_dict(self) -> dict[str, object]:
        d = dataclasses.asdict(self)
        d["part_id"] = None if self.part_id is None else str(self.part_id)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceRecord:
        return cls(**d)


class TraceRecorder:
    """Collects :class:`TraceRecord` objects for one rank (thread-safe).

    :arg rank: the rank this recorder runs on (``pid`` in the export).
    :arg enabled: if false, the recording methods still return records
        (so calling code needs no branches) but keep none.
    :arg execution: if given, the number of the one execution whose
        records this recorder collects: stamped on each as
        ``args["execution"]`` (unless the record names another).
    """

    def __init__(self, rank: int = 0, enabled: bool = True,
                 execution: int | None = None) -> None:
        self.rank = int(rank)
        self.enabled = enabled
        self.execution = execution
        self._records: list[TraceRecord] = []
        self._lock = threading.Lock()

    def record(self, kind: str, name: str | None = None, *,
               peer: int | None = None, tag: int | None = None,
               nbytes: int | None = None, part_id: Hashable | None = None,
               **args: object) -> TraceRecord:
        """A new record of *kind*, posted now."""
        return self.new(kind, name or kind, peer, tag, nbytes, part_id, args)

    def new(self, kind: str, name: str, peer: int | None, tag: int | None,
            nbytes: int | None, part_id: Hashable | None,
            args: dict[str, object]) -> TraceRecord:
        """:meth:`record` with every field given, in order (*args* is the
        record's own dict): the executor's form, which makes several
        records per part -- keyword arguments passed on cost more than
        the record itself."""
        if self.execution is not None:
            args.setdefault("execution", self.execution)
        rec = TraceRecord(kind, name, self.rank, _perf_counter_ns(),
                          None, None, peer, tag,
                          None if nbytes is None else int(nbytes), part_id,
                          args)
        if self.enabled:
            # one append is atomic (the GIL); the lock orders bulk changes
            self._records.append(rec)
        return rec

    def message(self, direction: str, peer: int, tag: int | None = None,
                nbytes: int | None = None, part_id: Hashable | None = None,
                name: str | None = None, **args: object) -> TraceRecord:
        """A message to (``direction="send"``) or from (``"recv"``) *peer*,
        posted now. (Other directions are recorded as their own kind and
        drawn on the "other" track.)"""
        return self.new(direction, name or f"{direction} {peer}", peer, tag,
                        nbytes, part_id, args)

    def part(self, part_id: Hashable, name: str | None = None, **args: object
             ) -> TraceRecord:
        """A part execution, posted (runnable) now; use it as a context
        manager around the execution, or call ``start``/``complete``."""
        return self.new("part", name or f"part {part_id}", None, None, None,
                        part_id, args)

    def wait(self, name: str = "wait", **args: Any) -> TraceRecord:
        """Time spent blocked (a ``with`` block around ``Wait``/``Barrier``).
        (Any: :meth:`record`'s keywords, or anything to stamp on.)"""
        return self.record("wait", name, **args)

    def extend(self, records: Iterable[TraceRecord]) -> None:
        """Keep *records* (made elsewhere, e.g. by one execution) too."""
        if self.enabled:
            with self._lock:
                self._records.extend(records)

    @property
    def records(self) -> list[TraceRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def trace(self, origin_ns: int | None = None) -> Trace:
        """A :class:`Trace` of the records so far, times relative to
        *origin_ns* (default: the earliest posted time)."""
        records = self.records
        if origin_ns is None:
            origin_ns = min((r.posted_ns for r in records), default=0)
        return Trace([dataclasses.replace(r, args=dict(r.args))
                      for r in records], origin_ns)


class Trace:
    """Records of one or more ranks, exportable and summarizable.

    :arg records: the records.
    :arg origin_ns: the time shown as 0.
    """

    def __init__(self, records: Iterable[TraceRecord], origin_ns: int = 0
                 ) -> None:
        self.records = list(records)
        self.origin_ns = int(origin_ns)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def ranks(self) -> list[int]:
        return sorted({r.rank for r in self.records})

    # {{{ Chrome / Perfetto export

    def to_chrome(self) -> dict[str, object]:
        """Chrome trace-event JSON object: one ``"X"`` event per completed
        record (microseconds), plus ``"M"`` metadata naming each rank's
        process and tracks."""
        events: list[dict[str, object]] = []
        used_tracks: set[tuple[int, int]] = set()
        for rec in sorted(self.records, key=lambda r: (r.rank, r.posted_ns)):
            if not rec.done:
                continue
            tid = TRACKS.get(rec.kind, 5)
            used_tracks.add((rec.rank, tid))
            args: dict[str, object] = {"posted_us": self._us(rec.posted_ns)}
            for key in ("peer", "tag", "nbytes"):
                if getattr(rec, key) is not None:
                    args[key] = getattr(rec, key)
            if rec.part_id is not None:
                args["part_id"] = str(rec.part_id)
            args.update({k: _jsonable(v) for k, v in rec.args.items()})
            events.append({
                "name": rec.name, "cat": rec.kind, "ph": "X",
                "ts": self._us(cast(int, rec.started_ns)),  # done: started
                "dur": rec.duration_ns / 1e3,
                "pid": rec.rank, "tid": tid, "args": args})
        meta = []
        for rank in sorted({rank for rank, _ in used_tracks}):
            meta.append({"name": "process_name", "ph": "M", "pid": rank,
                         "tid": 0, "args": {"name": f"rank {rank}"}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": rank,
                         "tid": 0, "args": {"sort_index": rank}})
        for rank, tid in sorted(used_tracks):
            meta.append({"name": "thread_name", "ph": "M", "pid": rank,
                         "tid": tid, "args": {"name": TRACK_NAMES[tid]}})
        return {"traceEvents": meta + events, "displayTimeUnit": "ms"}

    def to_json(self) -> str:
        return json.dumps(self.to_chrome())

    @classmethod
    def from_chrome(cls, doc: dict[str, Any]) -> Trace:
        """The trace :meth:`to_chrome` exported (times in nanoseconds from
        the exported origin; records posted at their ``posted_us``)."""
        known = {"posted_us", "peer", "tag", "nbytes", "part_id"}
        records = []
        for ev in doc.get("traceEvents", ()):
            if ev.get("ph") != "X":
                continue
            args = dict(ev.get("args", {}))
            start = round(float(ev["ts"]) * 1e3)
            posted = round(float(args.get("posted_us", ev["ts"])) * 1e3)
            records.append(TraceRecord(
                kind=ev.get("cat", "other"), name=ev.get("name", ""),
                rank=int(ev.get("pid", 0)), posted_ns=min(posted, start),
                started_ns=start,
                completed_ns=start + round(float(ev.get("dur", 0)) * 1e3),
                peer=args.get("peer"), tag=args.get("tag"),
                nbytes=args.get("nbytes"), part_id=args.get("part_id"),
                args={k: v for k, v in args.items() if k not in known}))
        return cls(records, 0)

    def write_json(self, path: str) -> None:
        """Write :meth:`to_chrome` to *path* (open it in ui.perfetto.dev)."""
        with open(path, "w") as f:
            json.dump(self.to_chrome(), f)

    def _us(self, t_ns: int) -> float:
        return (t_ns - self.origin_ns) / 1e3

    # }}}

    # {{{ summary

    def summary(self) -> dict[int, dict[str, float]]:
        """Per rank: ``n_parts``, ``compute_s`` (time in parts), ``wait_s``
        (time in wait records), ``n_sent``/``bytes_sent``,
        ``n_received``/``bytes_received``, ``span_s`` (first posted to last
        completed)."""
        table: dict[int, dict[str, float]] = {}
        for rank in self.ranks:
            recs = [r for r in self.records if r.rank == rank and r.done]
            row: dict[str, float] = dict.fromkeys(("n_parts", "compute_s", "wait_s", "n_sent",
                                 "bytes_sent", "n_received", "bytes_received",
                                 "span_s"), 0)
            for r in recs:
                if r.kind == "part":
                    row["n_parts"] += 1
                    row["compute_s"] += r.duration_ns / 1e9
                elif r.kind == "wait":
                    row["wait_s"] += r.duration_ns / 1e9
                elif r.kind == "send":
                    row["n_sent"] += 1
                    row["bytes_sent"] += r.nbytes or 0
                elif r.kind == "recv":
                    row["n_received"] += 1
                    row["bytes_received"] += r.nbytes or 0
            if recs:
                row["span_s"] = (max(cast(int, r.completed_ns) for r in recs)
                                 - min(r.posted_ns for r in recs)) / 1e9
            table[rank] = row
        return table

    def format_summary(self) -> str:
        """:meth:`summary` as a text table."""
        head = (f"{'rank':>4} {'parts':>5} {'compute ms':>10} {'wait ms':>8} "
                f"{'sent':>5} {'bytes sent':>11} {'recv':>5} {'bytes recv':>11} "
                f"{'span ms':>8}")
        lines = [head, "-" * len(head)]
        for rank, row in self.summary().items():
            lines.append(
                f"{rank:>4} {row['n_parts']:>5} {row['compute_s'] * 1e3:>10.3f} "
                f"{row['wait_s'] * 1e3:>8.3f} {row['n_sent']:>5} "
                f"{row['bytes_sent']:>11} {row['n_received']:>5} "
                f"{row['bytes_received']:>11} {row['span_s'] * 1e3:>8.3f}")
        return "\n".join(lines)

    # }}}


def merge_traces(traces: Iterable[Trace]) -> Trace:
    """One :class:`Trace` holding every record of *traces*, each trace's
    times shifted so that their origins coincide, then all shifted so the
    earliest record starts at 0."""
    shifted: list[TraceRecord] = []
    for tr in traces:
        for r in tr.records:
            shift = -tr.origin_ns
            shifted.append(dataclasses.replace(
                r, args=dict(r.args), posted_ns=r.posted_ns + shift,
                started_ns=None if r.started_ns is None else r.started_ns + shift,
                completed_ns=(None if r.completed_ns is None
                              else r.completed_ns + shift)))
    origin = min((r.posted_ns for r in shifted), default=0)
    return Trace(shifted, origin)


def gather_traces(comm: MPI.Comm, recorder_or_trace: TraceRecorder | Trace,
                  root: int = 0, clock: Callable[[], int] = now_ns,
                  rounds: int = 32) -> Trace | None:
    """Collective: gather every rank's records on *root* and merge them
    (``None`` on the other ranks). Clocks are aligned to *root*'s: for
    each other rank, *root* sends its clock reading and gets the rank's
    back, *rounds* times, and keeps the round trip that was shortest -- the
    rank's clock then read at the midpoint, within half that round trip
    (microseconds), however late each rank reached this call."""
    trace = (recorder_or_trace.trace() if isinstance(recorder_or_trace,
                                                     TraceRecorder)
             else recorder_or_trace)
    rank, size = comm.Get_rank(), comm.Get_size()
    offsets = {root: 0}     # each rank's clock minus root's (on root)
    for other in range(size):
        if other == root:
            continue
        if rank == root:
            best = None
            for _ in range(rounds):
                t0 = clock()
                comm.send(t0, dest=other, tag=0)
                remote = comm.recv(source=other, tag=0)
                t1 = clock()
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, remote - (t0 + t1) // 2)
            offsets[other] = cast("tuple[int, int]", best)[1]  # rounds >= 1
        elif rank == other:
            for _ in range(rounds):
                comm.recv(source=root, tag=0)
                comm.send(clock(), dest=root, tag=0)
    gathered = comm.gather([r.to_dict() for r in trace.records], root=root)
    if gathered is None:
        return None
    return merge_traces(
        Trace([TraceRecord.from_dict(d) for d in recs], offsets[r])
        for r, recs in enumerate(gathered))


# {{{ profiles of partitioned DAGs

def load_trace(source: TraceSource) -> Trace:
    """*source* as a :class:`Trace`: a :class:`Trace`, a
    :class:`TraceRecorder`, an iterable of :class:`TraceRecord`, a Chrome
    trace object (``{"traceEvents": ...}``) or the path of a Chrome/Perfetto
    JSON file; anything else raises."""
    import os
    if isinstance(source, Trace):
        return source
    if isinstance(source, TraceRecorder):
        return source.trace()
    if isinstance(source, (str, os.PathLike)):
        with open(source) as f:
            source = json.load(f)
    if isinstance(source, dict):
        return Trace.from_chrome(source)
    # (what is left must be records: checked next)
    records = list(cast("Iterable[TraceRecord]", source))
    bad = [r for r in records if not isinstance(r, TraceRecord)]
    if bad:
        raise VisualizationError(
            "a trace must be a Trace, a TraceRecorder, TraceRecords, a Chrome "
            f"trace object or its file; got a {type(bad[0]).__name__} among "
            f"the records of a {type(source).__name__}")
    return Trace(records, min((r.posted_ns for r in records), default=0))


@dataclasses.dataclass
class PartitionProfile:
    """What :func:`profile_partition` measured.

    .. attribute:: parts

        ``{(rank, part id as str): {"n", "mean_s", "max_s", "share"}}``:
        executions of the part, mean and maximum duration, and the mean
        duration over the mean execution time of its rank.

    .. attribute:: messages

        ``{(source rank, destination rank, tag): {"n", "nbytes",
        "in_flight_s", "max_in_flight_s", "sender_part"}}``: the packed
        message's bytes and its time from the send's start to the
        receive's completion (mean and maximum over matched pairs; ``None``
        if the trace holds only one side).

    .. attribute:: executions

        ``{rank: mean execution time in seconds}`` (first posted to last
        completed record of an execution).
    """

    parts: dict[tuple[int, str], dict[str, float]]
    messages: dict[tuple[int, int, int | None], dict[str, float | str | None]]
    executions: dict[int, float]

    def part(self, rank: int, part_id: Hashable) -> dict[str, float] | None:
        return self.parts.get((rank, str(part_id)))


def profile_partition(trace: TraceSource) -> PartitionProfile:
    """Per part and per message figures of *trace* (anything
    :func:`load_trace` accepts), over all executions it holds."""
    trace = load_trace(trace)
    done = [r for r in trace.records if r.done]
    spans: dict[tuple[int, object], list[int]] = {}
    for r in done:
        key = (r.rank, r.args.get("execution"))
        lo, hi = spans.get(key, (r.posted_ns, r.completed_ns))
        # (done: completed_ns is set)
        spans[key] = [min(lo, r.posted_ns),
                      max(hi, r.completed_ns)]  # type: ignore[type-var, list-item]
    per_rank: dict[int, list[float]] = {}
    for (rank, _), (lo, hi) in spans.items():
        per_rank.setdefault(rank, []).append((hi - lo) / 1e9)
    executions = {rank: sum(v) / len(v) for rank, v in per_rank.items()}

    durations: dict[tuple[int, str], list[float]] = {}
    for r in done:
        if r.kind == "part" and r.part_id is not None:
            durations.setdefault((r.rank, str(r.part_id)), []).append(
                r.duration_ns / 1e9)
    parts = {key: {"n": len(v), "mean_s": sum(v) / len(v), "max_s": max(v),
                   "share": (sum(v) / len(v)) / executions[key[0]]
                   if executions.get(key[0]) else 0.0}
             for key, v in durations.items()}

    # the k-th send from s to d with tag t matches the k-th receive
    sends: dict[tuple[int, int, int | None], list[TraceRecord]] = {}
    recvs: dict[tuple[int, int, int | None], list[TraceRecord]] = {}
    for r in sorted(done, key=lambda r: r.posted_ns):
        if r.kind == "send" and r.peer is not None:
            sends.setdefault((r.rank, r.peer, r.tag), []).append(r)
        elif r.kind == "recv" and r.peer is not None:
            recvs.setdefault((r.peer, r.rank, r.tag), []).append(r)
    messages: dict[tuple[int, int, int | None],
                   dict[str, float | str | None]] = {}
    for mkey in sorted(sends.keys() | recvs.keys(), key=str):
        out, into = sends.get(mkey, []), recvs.get(mkey, [])
        # (done records: both times are set)
        flights = [(cast(int, b.completed_ns) - cast(int, a.started_ns)) / 1e9
                   for a, b in zip(out, into, strict=False)]
        either = out or into
        messages[mkey] = {
            "n": len(either),
            "nbytes": either[0].nbytes,
            "in_flight_s": sum(flights) / len(flights) if flights else None,
            "max_in_flight_s": max(flights) if flights else None,
            "sender_part": None if not out or out[0].part_id is None
            else str(out[0].part_id)}
    return PartitionProfile(parts, messages, executions)

# }}}


def _jsonable(value: object) -> str | int | float | bool | None:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)

# vim: foldmethod=marker
