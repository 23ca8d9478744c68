"""Trace recording and Chrome/Perfetto export (pytato_like.runtime.trace)."""

from __future__ import annotations

import json

import pytest

from pytato_like.runtime.trace import (
    Trace,
    TraceRecord,
    TraceRecorder,
    gather_traces,
    load_trace,
    merge_traces,
    now_ns,
    profile_partition,
)


def x_events(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_record_timestamps_are_ordered():
    tracer = TraceRecorder(rank=3)
    rec = tracer.message("send", peer=1, tag=5, nbytes=80)
    assert rec.started_ns is None and not rec.done
    rec.start()
    rec.complete()
    assert rec.posted_ns <= rec.started_ns <= rec.completed_ns
    assert rec.rank == 3 and rec.peer == 1 and rec.tag == 5 and rec.nbytes == 80


def test_never_started_record_starts_when_posted():
    rec = TraceRecorder().message("recv", peer=0)
    rec.complete()
    assert rec.started_ns == rec.posted_ns


def test_times_before_posted_are_clamped():
    rec = TraceRecorder().part("p")
    rec.start(rec.posted_ns - 1000)
    rec.complete(rec.posted_ns - 2000)
    assert rec.posted_ns == rec.started_ns == rec.completed_ns


def test_part_as_context_manager_spans_the_block():
    tracer = TraceRecorder()
    with tracer.part("p0") as rec:
        inside = rec.started_ns
        assert not rec.done
    assert rec.started_ns == inside and rec.done
    assert tracer.records == [rec]
    assert rec.kind == "part" and rec.part_id == "p0"


def test_complete_is_idempotent():
    rec = TraceRecorder().wait()
    rec.complete(rec.posted_ns + 10)
    rec.complete(rec.posted_ns + 99)
    assert rec.completed_ns == rec.posted_ns + 10


def test_disabled_recorder_keeps_nothing():
    tracer = TraceRecorder(enabled=False)
    with tracer.part(1):
        pass
    assert tracer.records == []


def test_recorder_of_one_execution_stamps_its_number_on_each_record():
    tracer = TraceRecorder(rank=2, execution=7)
    made = [tracer.part("a", n_inputs=3),
            tracer.message("send", 1, tag=4, nbytes=8, part_id="a"),
            tracer.record("pack", "pack 1", peer=1),
            tracer.wait("wait for messages"),
            tracer.record("unpack", execution=5),     # its own number wins
            tracer.new("pack", "pack 1", 1, 4, 8, "a", {})]
    assert [rec.args.get("execution") for rec in made] == [7, 7, 7, 7, 5, 7]
    assert (made[5].kind, made[5].name, made[5].peer, made[5].tag,
            made[5].nbytes, made[5].part_id) == ("pack", "pack 1", 1, 4, 8, "a")
    assert made[0].args["n_inputs"] == 3
    assert (made[1].name, made[1].peer, made[1].tag, made[1].nbytes,
            made[1].part_id, made[1].rank) == ("send 1", 1, 4, 8, "a", 2)
    assert made[0].name == "part a" and made[0].part_id == "a"
    assert tracer.records == made
    assert TraceRecorder().part("a").args == {}     # no number: no stamp


def fixed_trace(rank=0, base=1_000_000):
    """Records with hand-chosen timestamps (ns)."""
    def rec(kind, posted, started, completed, **kw):
        return TraceRecord(kind, f"{kind}", rank, base + posted,
                           base + started, base + completed, **kw)
    return Trace([
        rec("part", 0, 1_000, 5_000, part_id="a"),
        rec("send", 2_000, 2_000, 9_000, peer=1, tag=3, nbytes=800),
        rec("recv", 500, 500, 7_000, peer=1, tag=4, nbytes=1600),
        rec("wait", 5_000, 5_000, 7_000),
        rec("part", 7_000, 7_500, 10_000, part_id="b"),
    ], origin_ns=base)


def test_chrome_json_has_one_event_per_record_with_consistent_times():
    trace = fixed_trace()
    doc = json.loads(trace.to_json())
    events = x_events(doc)
    assert len(events) == len(trace.records)
    by_cat = {}
    for e in events:
        by_cat.setdefault(e["cat"], []).append(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert e["args"]["posted_us"] <= e["ts"]
        assert e["pid"] == 0
    assert {k: len(v) for k, v in by_cat.items()} == {
        "part": 2, "send": 1, "recv": 1, "wait": 1}
    part_a = next(e for e in by_cat["part"] if e["args"]["part_id"] == "a")
    assert part_a["ts"] == 1.0 and part_a["dur"] == 4.0     # microseconds
    send = by_cat["send"][0]
    assert send["args"]["peer"] == 1 and send["args"]["nbytes"] == 800
    # every kind is on its own track of the rank's process
    assert len({e["tid"] for e in events}) == 4
    names = {(m["name"], m["tid"]): m["args"]
             for m in doc["traceEvents"] if m["ph"] == "M"}
    assert names[("process_name", 0)] == {"name": "rank 0"}
    assert names[("thread_name", 0)] == {"name": "compute"}


def test_incomplete_records_are_not_exported():
    tracer = TraceRecorder()
    tracer.message("send", peer=1)
    with tracer.part(0):
        pass
    assert len(x_events(tracer.trace().to_chrome())) == 1


def test_summary_by_hand():
    row = fixed_trace().summary()[0]
    assert row["n_parts"] == 2
    assert row["compute_s"] == pytest.approx((4_000 + 2_500) / 1e9)
    assert row["wait_s"] == pytest.approx(2_000 / 1e9)
    assert (row["n_sent"], row["bytes_sent"]) == (1, 800)
    assert (row["n_received"], row["bytes_received"]) == (1, 1600)
    assert row["span_s"] == pytest.approx(10_000 / 1e9)
    table = fixed_trace().format_summary()
    assert "bytes sent" in table and "1600" in table


def test_merge_aligns_origins_and_keeps_one_track_per_rank(tmp_path):
    # rank 1's clock runs 5 ms ahead; its origin (barrier reading) says so
    t0 = fixed_trace(rank=0, base=1_000_000)
    t1 = fixed_trace(rank=1, base=6_000_000)
    merged = merge_traces([t0, t1])
    assert len(merged) == 10 and merged.ranks == [0, 1]
    path = tmp_path / "trace.json"
    merged.write_json(str(path))
    events = x_events(json.loads(path.read_text()))
    assert len(events) == 10
    assert {e["pid"] for e in events} == {0, 1}
    # aligned: the same record of each rank lands at the same time
    for cat in ("send", "recv", "wait"):
        ts = {e["pid"]: e["ts"] for e in events if e["cat"] == cat}
        assert ts[0] == ts[1]
    assert min(e["args"]["posted_us"] for e in events) == 0.0


class OneRankComm:
    """What gather_traces uses of a communicator, for a single process."""
    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def gather(self, obj, root=0):
        return [obj]


class ThreadComm:
    """Two 'ranks' as threads joined by queues (send/recv/gather)."""

    def __init__(self, rank, boxes, gathered):
        self.rank, self.boxes, self.gathered = rank, boxes, gathered

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 2

    def send(self, obj, dest, tag=0):
        self.boxes[dest].put(obj)

    def recv(self, source, tag=0):
        return self.boxes[self.rank].get(timeout=10)

    def gather(self, obj, root=0):
        self.gathered[self.rank] = obj
        if self.rank != root:
            self.boxes[root].put("gathered")
            return None
        self.boxes[root].get(timeout=10)
        return [self.gathered[0], self.gathered[1]]


def test_gather_traces_aligns_clocks_that_differ_by_seconds():
    """Rank 1's clock runs 5 s ahead; a record made at the same moment on
    both ranks lands within a millisecond after merging."""
    import queue
    import threading
    boxes = [queue.Queue(), queue.Queue()]
    gathered = [None, None]
    shift = 5 * 10**9
    moment = now_ns()
    results = {}

    def rank_main(rank):
        offset = shift if rank else 0
        rec = TraceRecord("part", "p", rank, moment + offset,
                          moment + offset, moment + offset + 1000)
        results[rank] = gather_traces(
            ThreadComm(rank, boxes, gathered), Trace([rec], 0),
            clock=lambda: now_ns() + offset)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results[1] is None
    merged = results[0]
    times = {r.rank: r.started_ns for r in merged.records}
    assert abs(times[0] - times[1]) < 1_000_000, times


def test_gather_traces_on_one_rank_round_trips_records():
    tracer = TraceRecorder()
    with tracer.part(("part", 1)):
        pass
    tracer.message("recv", peer=0, nbytes=8).complete()
    merged = gather_traces(OneRankComm(), tracer)
    assert len(merged) == 2
    events = x_events(merged.to_chrome())
    assert sorted(e["cat"] for e in events) == ["part", "recv"]
    part = next(e for e in events if e["cat"] == "part")
    assert part["args"]["part_id"] == "('part', 1)"


# {{{ profiles of partitioned DAGs (profile_partition, load_trace)

def _rec(kind, rank, start_us, end_us, **kw):
    return TraceRecord(kind=kind, name=kind, rank=rank,
                       posted_ns=int(start_us * 1e3),
                       started_ns=int(start_us * 1e3),
                       completed_ns=int(end_us * 1e3), **kw)


def two_rank_records():
    """Two executions on ranks 0 and 1 with hand-chosen times (us): part
    'a' on rank 0 lasts 100 then 300, one 64-byte message 0 -> 1 with tag
    7 per execution, in flight 50 then 150."""
    recs = []
    for ex, (t0, dur, flight) in enumerate([(0, 100, 50), (1000, 300, 150)]):
        args = {"execution": ex}
        recs += [
            _rec("part", 0, t0, t0 + dur, part_id="a", args=dict(args)),
            _rec("send", 0, t0 + dur, t0 + dur + 10, peer=1, tag=7, nbytes=64,
                 part_id="a", args=dict(args)),
            _rec("recv", 1, t0, t0 + dur + flight, peer=0, tag=7, nbytes=64,
                 args=dict(args)),
            _rec("part", 1, t0 + dur + flight, t0 + dur + flight + 40,
                 part_id="b", args=dict(args)),
        ]
    return recs


def test_profile_partition_matches_hand_computation():
    profile = profile_partition(two_rank_records())
    a = profile.part(0, "a")
    assert a["n"] == 2
    assert a["mean_s"] == pytest.approx(200e-6)
    assert a["max_s"] == pytest.approx(300e-6)
    # rank 0's executions span 110 and 310 us
    assert profile.executions[0] == pytest.approx(210e-6)
    assert a["share"] == pytest.approx(200 / 210)
    b = profile.part(1, "b")
    assert b["mean_s"] == pytest.approx(40e-6) and b["max_s"] == pytest.approx(40e-6)
    assert profile.part(1, "a") is None
    msg = profile.messages[(0, 1, 7)]
    assert msg["n"] == 2 and msg["nbytes"] == 64 and msg["sender_part"] == "a"
    assert msg["in_flight_s"] == pytest.approx(100e-6)
    assert msg["max_in_flight_s"] == pytest.approx(150e-6)


def test_profile_from_a_saved_chrome_trace_equals_profile_from_records(tmp_path):
    recs = two_rank_records()
    path = tmp_path / "trace.json"
    Trace(recs, 0).write_json(str(path))
    loaded = load_trace(str(path))
    assert len(loaded) == len(recs)
    assert {(r.kind, r.rank, r.tag, r.nbytes) for r in loaded.records} == \
        {(r.kind, r.rank, r.tag, r.nbytes) for r in recs}
    direct, saved = profile_partition(recs), profile_partition(str(path))
    assert saved.parts.keys() == direct.parts.keys()
    for key, value in direct.parts.items():
        for field in ("n", "mean_s", "max_s", "share"):
            assert saved.parts[key][field] == pytest.approx(value[field])
    assert saved.messages[(0, 1, 7)]["in_flight_s"] == pytest.approx(100e-6)


def test_load_trace_rejects_what_is_not_a_trace():
    from pytato_like.diagnostic import VisualizationError
    with pytest.raises(VisualizationError, match="int"):
        load_trace([1, 2])

# }}}


def test_profile_drawing_of_a_deep_partition(deep_chain):
    """The partition drawing with a trace handles a 100 000-deep chain at
    the default recursion limit and labels its part with the trace's
    figures (mean 2 ms and max 3 ms over two executions)."""
    import re

    import pytato_like as pt
    from pytato_like.visualization.dot import get_dot_graph_from_partition
    _, y = deep_chain
    parts = pt.find_distributed_partition(None, {"y": y})
    (pid,) = parts.toposorted_part_ids
    records = [_rec("part", 0, t0, t0 + dur, part_id=pid,
                    args={"execution": ex})
               for ex, (t0, dur) in enumerate([(0, 1000), (5000, 3000)])]
    src = get_dot_graph_from_partition(parts, trace=records, view="full")
    label = re.search(rf"label=<part {pid}<br/>rank 0: ([\d.]+) ms mean, "
                      r"([\d.]+) ms max, (\d+)% of execution>", src)
    assert label, src[:500]
    assert (float(label[1]), float(label[2]), int(label[3])) == (2.0, 3.0, 100)
