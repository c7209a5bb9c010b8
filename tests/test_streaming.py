"""Streaming: window specs, event time, TestStream panes (early, on time, late), the windowed
main job over timestamped files, the watched folder picking up a file dropped after start, the
never-ending retriever source, Kafka / Pub/Sub argument checks."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fair_forge_beam._beam import beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream as _TestStream
from apache_beam.transforms import window

from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.io.event_time import parse_timestamp
from fair_forge_beam.streaming.windows import AddWindowFields, EmptyPaneSafeCombineFn, WindowSpec, parse_duration

from helpers import FNAPI, append_line_sink


# ------------------------------------------------------------------ specs and timestamps
def test_window_specs():
    assert WindowSpec.parse("fixed:1h").window_fn().size.micros == 3600 * 10**6
    s = WindowSpec.parse("sliding:1h,5m", "30s", "10m")
    assert (s.kind, s.size, s.period, s.early_firing, s.allowed_lateness) == ("sliding", 3600.0, 300.0, 30.0, 600.0)
    assert WindowSpec.parse("session:10m").window_fn().gap_size.micros == 600 * 10**6
    assert parse_duration("250ms") == 0.25 and parse_duration("1.5h") == 5400.0 and parse_duration("2d") == 172800.0
    for bad in ("hourly", "fixed:", "fixed:-1h", "sliding:1h", "sliding:5m,1h", "session:0s", "fixed:1 hour"):
        with pytest.raises(ValueError):
            WindowSpec.parse(bad)
    with pytest.raises(ValueError, match="early-firing"):
        WindowSpec.parse("fixed:1h", early_firing="500ms")


@pytest.mark.parametrize("spec, message", [
    ("fixed:0.0001ms", "shorter than 1 µs"), ("sliding:1s,0.0001ms", "shorter than 1 µs"),
    ("session:0.0001ms", "shorter than 1 µs"), ("fixed:0.0000001", "shorter than 1 µs"),
    ("sliding:1d,1ms", "86,400,000 windows"), ("sliding:1001s,1s", "1,001 windows"),
])
def test_window_specs_beam_cannot_run_are_usage_errors(spec, message, tmp_path, capsys):
    """Issue 28 (trial 28f B1/B2): fixed:0.0001ms (ZeroDivisionError), session:0.0001ms (ValueError in
    Beam) and sliding:1d,1ms (86.4 million windows per record: MemoryError) ended in tracebacks.
    A duration below Beam's 1 µs and more than 1,000 windows per record are one-line usage errors."""
    from pipelines import audit

    with pytest.raises(ValueError, match=message):
        WindowSpec.parse(spec)
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [_flat("s1", 0, "hello", 1700000000)])
    with pytest.raises(SystemExit) as e:
        audit.run(["--input", str(data), "--window", spec, "--metrics", "humanity", "--output", str(tmp_path / "o")])
    assert e.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("fair-forge-beam")]
    assert len(err) == 1 and message in err[0], err
    assert WindowSpec.parse("sliding:1000s,1s").period == 1.0 and WindowSpec.parse("fixed:1ms").size == 0.001


def test_parse_timestamp():
    assert parse_timestamp(1700000000) == 1700000000.0
    assert parse_timestamp("1700000000.5") == 1700000000.5
    assert parse_timestamp("2024-01-01T00:00:00Z") == 1704067200.0
    assert parse_timestamp("2024-01-01T02:00:00+02:00") == 1704067200.0
    assert parse_timestamp("2024-01-01 00:00:00") == 1704067200.0  # no offset: UTC
    for bad in (None, True, "yesterday", float("nan"), 1e20, [1]):
        with pytest.raises(ValueError):
            parse_timestamp(bad)



def test_iso_end_of_day_and_leap_second_are_read():
    """trial39 T12: ISO 8601's end of day (24:00:00) and a leap second (23:59:60) were dead letters
    reading "neither epoch seconds nor ISO 8601". 24:00 is the next day's 00:00; :60 the last
    microsecond of its minute (in that minute's windows, before the next minute's :00)."""
    from apache_beam.transforms.window import FixedWindows
    from apache_beam.utils.timestamp import Timestamp

    next_day = 1796601600.0  # 2026-12-07T00:00:00Z
    for text in ("2026-12-06T24:00:00Z", "2026-12-06T24:00Z", "2026-12-06 24:00:00", "20261206T240000Z",
                 "2026-12-06T24:00:00.000Z", "2026-12-07T01:00:00+01:00"):
        assert parse_timestamp(text) == next_day, text
    assert parse_timestamp("2026-12-31T24:00:00Z") == parse_timestamp("2027-01-01T00:00:00Z")
    leap = parse_timestamp("2016-12-31T23:59:60Z")
    assert leap == parse_timestamp("2016-12-31T23:59:60.5Z") == parse_timestamp("20161231T235960Z") \
        == parse_timestamp("2016-12-31T18:59:60-05:00") == parse_timestamp("2016-12-31T23:59:59.999999Z")
    assert parse_timestamp("2016-12-31T23:59:59Z") < leap < parse_timestamp("2017-01-01T00:00:00Z")
    day = FixedWindows(86400)
    assert day.assign(type("C", (), {"timestamp": Timestamp.of(leap)})())[0].end == Timestamp.of(1483228800)
    for bad, says in (("2026-12-06T24:00:01Z", "hour 24 is only the end of a day"),
                      ("2026-12-06T24:30Z", "hour 24 is only the end of a day"),
                      ("2026-12-06T23:59:61Z", "neither epoch seconds nor ISO 8601"),
                      ("2026-02-30T24:00:00Z", "neither epoch seconds nor ISO 8601"),
                      ("9999-12-31T24:00:00Z", "out of range")):
        with pytest.raises(ValueError, match=says):
            parse_timestamp(bad)


def test_an_iso_basic_date_of_digits_is_that_date_not_epoch_seconds():
    """trial36 T5: "20261206" was float()-ed first: 1970-08-23T12:06:46Z, window 1970, no word."""
    day = 1796515200.0  # 2026-12-06T00:00:00Z
    assert parse_timestamp("20261206") == parse_timestamp(" 20261206 ") == parse_timestamp("2026-12-06") == day
    assert parse_timestamp("20261206T101500Z") == day + 10 * 3600 + 15 * 60
    assert parse_timestamp("12345678") == 12345678.0  # no calendar date (month 34): epoch seconds, as before
    with pytest.raises(ValueError, match=r"timestamp 20261206 is ambiguous: the ISO 8601 basic date 2026-12-06, or "
                                         r"1970-08-23T12:06:46Z in seconds since the epoch"):
        parse_timestamp(20261206)  # a JSON number: either reading is as likely
    assert parse_timestamp(20261206.0) == 20261206.0  # a fraction: seconds


@pytest.mark.parametrize("value, unit, divisor", [
    (1796552100000, "milliseconds", "1,000"), ("1796552100000", "milliseconds", "1,000"),
    (1796552100123.0, "milliseconds", "1,000"), (1796552100000000, "microseconds", "1,000,000"),
    (1796552100000000000, "nanoseconds", "1,000,000,000")])
def test_an_epoch_out_of_range_names_its_probable_unit(value, unit, divisor):
    """trial36 T5: a JavaScript/Kafka millisecond epoch said only 'timestamp 1796552100000 is out of range'."""
    with pytest.raises(ValueError) as exc:
        parse_timestamp(value)
    assert f"is out of range: it looks like {unit} since the epoch (2026-12-06T10:15:00Z); timestamps are read " \
           f"as seconds: divide by {divisor}" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("value", ["20261206101500", 20261206101500, "202612061015", 202612061015])
def test_digits_that_spell_a_date_and_time_are_refused_with_the_iso_spelling(value):
    """12 digits as seconds are the year 8390 (in range: read silently before); 14 are out of range."""
    with pytest.raises(ValueError, match="it looks like a date and time without separators \\(2026-12-06T10:15:00\\); "
                                         "write ISO 8601, e.g. '2026-12-06T10:15:00Z' or '20261206T101500Z'"):
        parse_timestamp(value)
    with pytest.raises(ValueError) as exc:
        parse_timestamp(1e20)
    assert str(exc.value) == "timestamp 1e+20 is out of range"  # no unit fits: nothing guessed

@given(st.lists(st.lists(st.integers(0, 5), max_size=4), max_size=6), st.randoms())
def test_empty_pane_safe_combine_fn_merge_order(groups, rnd):
    """Merging in any order and grouping gives the same accumulator; merging nothing is empty."""
    from fair_forge_beam.statistical.combiners import SumCombineFn
    from fair_forge_beam.engine import PairCombineFn

    fn = EmptyPaneSafeCombineFn(PairCombineFn(SumCombineFn(), SumCombineFn()))
    accs = []
    for g in groups:
        acc = fn.create_accumulator()
        for v in g:
            acc = fn.add_input(acc, ((v, None) if v % 2 else (None, v)) + (int(v % 3 > 0),))  # (a, b, scored)
        accs.append(acc)
    shuffled = list(accs)
    rnd.shuffle(shuffled)
    flat = [v for g in groups for v in g]
    # PairCombineFn's output ends with n, its inputs (cells merge: a slice emptied by a roll-up's
    # subtraction is known by n = 0), and the scored sessions (the engine's count)
    expect = [sum(v for v in flat if v % 2), sum(v for v in flat if not v % 2), len(flat), sum(1 for v in flat if v % 3)]
    assert fn.extract_output(fn.merge_accumulators(shuffled)) == expect
    assert fn.extract_output(fn.merge_accumulators([])) == [0, 0, 0, 0]


# ------------------------------------------------------------------ TestStream panes
def _inter(sid, turn, text, ts):
    return Interaction(make_element_id(sid, "a", turn), sid, "a", "english", "", turn, f"q{turn}", "q", text,
                       None, None, None, None, None, None, float(ts))


TEXTS = {
    ("s1", 0): "I am so happy and joyful today, women are great",
    ("s1", 1): "this is terrible and sad, you idiot",
    ("s2", 0): "I love you, trust me",
    ("s2", 1): "anger and fear everywhere, idiot",
    ("s3", 0): "a calm and happy answer",
}


def _metrics():
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from fair_forge_beam.metrics.humanity import Humanity
    from fair_forge_beam.metrics.toxicity import Toxicity
    from fair_forge_beam.statistical import BayesianMode

    mode = BayesianMode(mc_samples=300, rng_seed=7)
    return {
        "humanity": Humanity(statistical_mode=mode, slices=("overall",)),
        "toxicity": Toxicity(statistical_mode=mode, slices=("overall",), clustering=False,
                             group_extractor=KeywordGroupExtractor(default_group_keywords())),
    }


_AppendLine = append_line_sink  # one JSON line per record, appended to a local file


def _collect(p, source, spec, out):
    out.mkdir(parents=True, exist_ok=True)
    windowed = source | spec.window_into()
    for name, metric in _metrics().items():
        res = windowed | f"M_{name}" >> metric
        res["slices"] | f"W_{name}" >> beam.ParDo(AddWindowFields()) | f"Out_{name}" >> beam.ParDo(_AppendLine(out / name))


def _read(out, name):
    with open(out / name, encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    return sorted(recs, key=lambda r: (r["window_start_s"], r["pane"]["index"]))


def _strip(r):
    return {k: v for k, v in r.items() if k != "pane"}


@pytest.mark.slow
def test_teststream_panes_early_on_time_late(tmp_path):
    """Window [0, 60): two early panes (2 then 3 interactions), the on-time pane (3), a late
    element updating it (4, accumulating); window [60, 120) on its own. The final pane of each
    window equals the bounded (batch) windowed result of the same elements, Bayesian intervals
    included (seeds keyed by slice and window bounds, never by arrival)."""
    ts = (
        _TestStream()
        .advance_watermark_to(0)
        .add_elements([window.TimestampedValue(_inter("s1", 0, TEXTS["s1", 0], 5), 5),
                       window.TimestampedValue(_inter("s1", 1, TEXTS["s1", 1], 10), 10)])
        .advance_processing_time(40)
        .add_elements([window.TimestampedValue(_inter("s2", 0, TEXTS["s2", 0], 20), 20),
                       window.TimestampedValue(_inter("s3", 0, TEXTS["s3", 0], 70), 70)])
        .advance_watermark_to(61)
        .add_elements([window.TimestampedValue(_inter("s2", 1, TEXTS["s2", 1], 30), 30)])  # late for [0, 60)
        .advance_watermark_to_infinity()
    )
    spec = WindowSpec.parse("fixed:1m", "30s", "10m")
    opts = PipelineOptions(["--streaming"])
    opts.view_as(StandardOptions).runner = "BundleBasedDirectRunner"
    with beam.Pipeline(options=opts) as p:
        _collect(p, p | ts, spec, tmp_path / "stream")

    batch_spec = WindowSpec.parse("fixed:1m")
    elements = [_inter(s, t, TEXTS[s, t], ts) for (s, t), ts in
                {("s1", 0): 5, ("s1", 1): 10, ("s2", 0): 20, ("s2", 1): 30, ("s3", 0): 70}.items()]
    p = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    src = p | beam.Create(elements) | beam.Map(lambda x: window.TimestampedValue(x, x.event_time))
    _collect(p, src, batch_spec, tmp_path / "batch")
    p.run().wait_until_finish()

    for name in ("humanity", "toxicity"):
        recs = _read(tmp_path / "stream", name)
        first = [r for r in recs if r["window_start_s"] == 0.0]
        second = [r for r in recs if r["window_start_s"] == 60.0]
        timings = [r["pane"]["timing"] for r in first]
        assert timings[0] == "EARLY" and "ON_TIME" in timings and timings[-1] == "LATE", (name, timings)
        assert [r["pane"]["index"] for r in first] == list(range(len(first)))
        on_time = next(r for r in first if r["pane"]["timing"] == "ON_TIME")
        assert first[0]["n_interactions"] == 2 and on_time["n_interactions"] == 3
        assert first[-1]["n_interactions"] == 4  # the late element updated its window
        assert all(r["n_interactions"] <= 3 for r in first if r["pane"]["timing"] != "LATE")
        assert second and second[-1]["n_interactions"] == 1
        assert first[0]["window_start"] == "1970-01-01T00:00:00Z" and first[0]["window_end"] == "1970-01-01T00:01:00Z"
        batch = _read(tmp_path / "batch", name)
        assert [r["pane"]["timing"] for r in batch] == ["ON_TIME", "ON_TIME"]
        for b, s in zip(batch, (first[-1], second[-1])):
            s = _strip(s)
            b = _strip(b)
            if name == "humanity":  # n_sessions counts a session once per pane it received turns in
                s.pop("n_sessions"), b.pop("n_sessions")
            else:
                s.pop("n_sessions"), b.pop("n_sessions")
                s["group_profiling"].pop("status", None), b["group_profiling"].pop("status", None)
            assert s == b, name
    tox = [r for r in _read(tmp_path / "stream", "toxicity") if r["window_start_s"] == 0.0][-1]
    rate = tox["toxic_rate"]
    assert rate["n"] == 4 and rate["ci_low"] < rate["mean"] < rate["ci_high"]  # a credible interval per window



@pytest.mark.parametrize("spec, portable", [("fixed:1m", True), ("sliding:1m,30s", False), ("session:1m", False)])
def test_accumulating_windowing_portability(spec, portable):
    """The final combine's re-windowing (early/late panes) of fixed windows is a standard
    ``FixedWindows`` (Flink's runner rejects pickled Python WindowFns: "Unknown or unsupported
    WindowFn: beam:window_fn:pickled_python:v1"); sliding and session windows still use the
    pickled KeepWindows / KeepMergingWindows (in-memory and Prism only, as documented); the
    latter was sent as "session windows, 1 s gap", and a bounded run with allowed lateness then
    cut every session into 1 s windows (see test_session_windows_with_lateness_keep_sessions)."""
    from apache_beam.runners import pipeline_context
    from apache_beam.transforms.core import Windowing

    from fair_forge_beam.streaming.windows import accumulating_windowing

    ws = WindowSpec.parse(spec, "30s", "10m")
    from apache_beam.transforms.trigger import AccumulationMode

    windowing = Windowing(ws.window_fn(), triggerfn=ws.trigger(), accumulation_mode=AccumulationMode.DISCARDING,
                          allowed_lateness=ws.allowed_lateness)
    fn = accumulating_windowing(windowing).windowing.windowfn
    urn = fn.to_runner_api(pipeline_context.PipelineContext()).urn
    assert (urn != "beam:window_fn:pickled_python:v1") is portable, urn
    if portable:
        assert fn == ws.window_fn()


@pytest.mark.slow
def test_session_windows_with_lateness_keep_sessions(tmp_path):
    """Session windows with ``--allowed-lateness`` (the accumulating final combine) give the
    same sessions and counts as without: 10 interactions 3 s apart, gap 4 s → one session."""
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [_flat(f"s{i}", 0, TEXTS["s1", 0], 1767225600 + 3 * i) for i in range(10)])
    got = {}
    for extra in ([], ["--allowed-lateness", "10m"]):
        doc = audit.run(["--quiet", "--metrics", "toxicity", "--input", str(data), "--window", "session:4s", *extra,
                         "--output", str(tmp_path / f"out{len(extra)}"), f"--runner={FNAPI}"])
        got[len(extra)] = [(r["window_start_s"], r["window_end_s"], r["n_interactions"], r["pane"]["timing"])
                           for r in doc["slices"] if r["slice"] == "overall"]
    assert got[0] == [(1767225600.0, 1767225631.0, 10, "ON_TIME")]
    assert {g[:3] for g in got[2]} == {got[0][0][:3]}, got[2]  # every pane: the whole session

# ------------------------------------------------------------------ main job, bounded input
def _write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _flat(sid, turn, text, ts):
    return {"session_id": sid, "assistant_id": "a", "qa_id": f"{sid}-{turn}", "query": "hi", "assistant": text,
            "turn_index": turn, "timestamp": ts}


def test_main_job_windowed_batch(tmp_path):
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [
        _flat("s1", 0, TEXTS["s1", 0], "2024-05-01T10:05:00Z"),
        _flat("s1", 1, TEXTS["s1", 1], "2024-05-01T10:50:00Z"),
        _flat("s2", 0, TEXTS["s2", 0], "2024-05-01T11:10:00Z"),
        _flat("s3", 0, TEXTS["s3", 0], "not a time"),
        {k: v for k, v in _flat("s4", 0, "x", 0).items() if k != "timestamp"},
    ])
    out = tmp_path / "out"
    doc = audit.run(["--input", str(data), "--window", "fixed:1h", "--metrics", "humanity,toxicity",
                     "--group-extractor", "keyword", "--output", str(out), "--quiet"])
    overall = [(r["metric"], r["window_start"], r["n_interactions"]) for r in doc["slices"] if r["slice"] == "overall"]
    assert overall == [("humanity", "2024-05-01T10:00:00Z", 2), ("humanity", "2024-05-01T11:00:00Z", 1),
                       ("toxicity", "2024-05-01T10:00:00Z", 2), ("toxicity", "2024-05-01T11:00:00Z", 1)]
    dead = [json.loads(line) for f in sorted((out / "windows").glob("dead_letter-*.jsonl")) for line in open(f)]
    reasons = sorted(d["reason"] for d in dead)
    assert len(dead) == 2 and "missing" in reasons[0] + reasons[1] and "unreadable" in reasons[0] + reasons[1]
    assert json.loads((out / "windowed_results.json").read_text())["slices"] == doc["slices"]


@pytest.mark.parametrize("argv, message", [
    (["--window", "hourly"], "--window"),
    (["--watch", "x/*.jsonl"], "needs --window"),
    (["--window", "fixed:1h", "--kafka-topic", "t"], "bootstrap"),
    (["--window", "fixed:1h", "--kafka-topic", "t", "--kafka-bootstrap-servers", "nohost"], "host:port"),
    (["--window", "fixed:1h", "--watch", "x", "--kafka-topic", "t"], "one streaming source"),
    (["--window", "fixed:1h", "--early-firing", "soon"], "early-firing"),
    # files are read whole; the in-memory runner failed in Beam's trigger code (no processing-time clock)
    (["--window", "fixed:1h", "--early-firing", "30s"], "needs an unbounded source"),
])
def test_main_job_streaming_usage_errors(argv, message, tmp_path, capsys):
    from pipelines import audit

    with pytest.raises(SystemExit) as e:
        audit.run([*argv, "--output", str(tmp_path / "o"), "--quiet"])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------ watched folder
@pytest.mark.slow
def test_watch_picks_up_file_dropped_after_start(tmp_path):
    """A streaming run over an empty folder; a file dropped 3 s after start is read, its bad
    record dead-lettered and its window's result written; the watch stops by itself."""
    folder = tmp_path / "incoming"
    folder.mkdir()
    out = tmp_path / "out"
    t, result = _watching(folder, out)
    started = time.time()
    t.start()
    time.sleep(3)
    assert not list(out.glob("windows/humanity-slices-*"))  # nothing before the file arrives
    now = time.time()
    tmp = folder / "batch.part"
    _write_jsonl(tmp, [_flat("s1", 0, TEXTS["s1", 0], now), _flat("s1", 1, TEXTS["s1", 1], now),
                       _flat("s2", 0, TEXTS["s2", 0], "bad time")])
    os.rename(tmp, folder / "batch.jsonl")  # appears complete
    t.join(timeout=50)
    assert not t.is_alive(), "the watch did not stop"
    assert "error" not in result, result.get("error")
    overall = [r for r in result["doc"]["slices"] if r["slice"] == "overall"]
    assert len(overall) == 1 and overall[0]["n_interactions"] == 2
    assert overall[0]["window_start_s"] <= now < overall[0]["window_end_s"]
    dead = [json.loads(line) for f in out.glob("windows/dead_letter-*.jsonl") for line in open(f)]
    assert len(dead) == 1 and "unreadable" in dead[0]["reason"]
    assert time.time() - started < 55


# ------------------------------------------------------------------ never-ending retriever
def test_streaming_retriever_source(test_pipeline):
    """The splittable DoFn reads a retriever's iterator across checkpoints (records_per_bundle
    = 3), each record once; a record without turn_index is dead-lettered."""
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.io.read import records_to_interactions
    from fair_forge_beam.io.stream_sources import ReadStreamingRetriever
    from fair_forge_beam.testing import streaming_retrievers as sr

    with test_pipeline as p:
        recs = p | ReadStreamingRetriever(sr.CountingRetriever, {"n": 10}, records_per_bundle=3)
        res = records_to_interactions(recs, timestamp_field="timestamp", streaming=True)
        assert_that(res["interactions"] | beam.Map(lambda x: (x.element_id, x.event_time)),
                    equal_to([(make_element_id(f"s{i % 3}", "a", i // 3), 1000.0 + i) for i in range(10) if i != 7]),
                    label="interactions")
        assert_that(res["dead_letter"] | beam.Map(lambda d: "turn_index" in d.reason), equal_to([True]), label="dead")


def test_streaming_retriever_must_be_subclass():
    from fair_forge_beam.io.retriever import Retriever
    from fair_forge_beam.io.stream_sources import ReadStreamingRetriever

    class Plain(Retriever):
        def load_dataset(self):
            return []

    with pytest.raises(ValueError, match="StreamingRetriever"):
        ReadStreamingRetriever(Plain)


# ------------------------------------------------------------------ Kafka and Pub/Sub
def test_kafka_and_pubsub_construction():
    from fair_forge_beam.io.stream_sources import KafkaRecords, PubSubRecords

    k = KafkaRecords("127.0.0.1:9092,127.0.0.2:9093", ["interactions"], {"group.id": "audit"}, max_num_records=10)
    assert type(k.read).__name__ == "ReadFromKafka"
    assert k.consumer_config == {"bootstrap.servers": "127.0.0.1:9092,127.0.0.2:9093", "auto.offset.reset": "earliest",
                                 "group.id": "audit"}
    for kwargs, msg in [({"bootstrap_servers": "", "topics": "t"}, "bootstrap"),
                        ({"bootstrap_servers": "broker", "topics": "t"}, "host:port"),
                        ({"bootstrap_servers": "h:1", "topics": []}, "topic"),
                        ({"bootstrap_servers": "h:1", "topics": "t", "max_num_records": 0}, "max_num_records")]:
        with pytest.raises(ValueError, match=msg):
            KafkaRecords(**kwargs)
    ps = PubSubRecords(subscription="projects/audit-project/subscriptions/interactions")
    assert type(ps.read).__name__ == "ReadFromPubSub"
    with pytest.raises(ValueError, match="exactly one"):
        PubSubRecords()
    with pytest.raises(ValueError):
        PubSubRecords(subscription="not-a-path")


@pytest.mark.parametrize("spec, ts", [("fixed:1h", "9999-12-31T23:59:59Z"), ("sliding:1h,5m", "0001-01-01T00:00:00Z"),
                                      ("sliding:1d,1h", "9999-12-31T23:59:59Z"), ("session:10m", "9999-12-31T23:59:59Z")])
def test_a_record_whose_windows_fall_outside_the_dates_is_a_dead_letter(tmp_path, spec, ts):
    """Issue 28 (trial 28f B3): a timestamp the reader accepts (years 1..9999) whose window starts in
    year 0 or ends in year 10000 ended the windowed run with an OverflowError and lost every good
    record; it is one dead letter with a reason, and the other records' windows are written."""
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [_flat("s1", 0, TEXTS["s1", 0], "2024-05-01T10:05:00Z"),
                        _flat("s2", 0, TEXTS["s2", 0], "2024-05-01T10:06:00Z"),
                        _flat("s9", 0, TEXTS["s3", 0], ts)])
    out = tmp_path / "out"
    doc = audit.run(["--input", str(data), "--window", spec, "--metrics", "humanity", "--output", str(out), "--quiet"])
    assert doc["dead_letters"] == 1
    dead = [json.loads(line) for f in sorted((out / "windows").glob("dead_letter-*.jsonl")) for line in open(f)]
    assert [d["stage"] for d in dead] == ["window"] and "outside the dates a window can have" in dead[0]["reason"]
    assert ts in dead[0]["reason"] and dead[0]["element_id"].startswith("s9/")
    kept = {r["n_interactions"] for r in doc["slices"] if r["slice"] == "overall"}
    assert kept and max(kept) <= 2 and all(r["window_start"][:7] in ("2024-04", "2024-05") for r in doc["slices"])


def _finished_run(out):
    """A folder as a finished batch audit leaves it (the files a stream would have removed)."""
    (out / "stats" / "humanity").mkdir(parents=True)
    (out / "stats" / "humanity" / "part-00000-of-00001.parquet").write_text("stats")
    for name, text in (("results.json", "{}"), ("report.html", "<html></html>"), ("run_info.json", "{}"),
                       ("_SUCCESS", "run-1")):
        (out / name).write_text(text)
    return sorted((str(p.relative_to(out)), p.read_text()) for p in out.rglob("*") if p.is_file())


def test_a_stream_never_replaces_a_finished_run(tmp_path, capsys):
    """Issue 28 (trial 28f B5): --watch into a folder holding a finished audit deleted its
    results.json, stats/ and report.html at start (a stream writes in place, so nothing replaced
    them). It is a usage error (exit 2, one line) and the folder is unchanged."""
    from pipelines import audit

    out = tmp_path / "out"
    before = _finished_run(out)
    (tmp_path / "in").mkdir()
    with pytest.raises(SystemExit) as e:
        audit.run(["--watch", str(tmp_path / "in" / "*.jsonl"), "--watch-stop-after", "2s", "--window", "fixed:1m",
                   "--metrics", "humanity", "--output", str(out), "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "holds a finished run (_SUCCESS, results.json" in err and "streaming run writes its windows in place" in err
    assert sorted((str(p.relative_to(out)), p.read_text()) for p in out.rglob("*") if p.is_file()) == before


@pytest.mark.slow
def test_an_interrupted_stream_says_what_its_folder_holds(tmp_path):
    """Issue 28 (trial 28f B5): Ctrl-C during a --watch run said "nothing was written", but a stream
    writes in place (it had emptied the folder of an earlier stream's leftovers, and writes each
    window as it fires). Its line now says the folder holds what the stream wrote."""
    import signal
    import subprocess
    import sys

    from helpers import REPO

    (tmp_path / "in").mkdir()
    out = tmp_path / "out"
    (out / "windows").mkdir(parents=True)
    (out / "windows" / "humanity-slices-old.jsonl").write_text("{}\n")  # an earlier stream's leftover
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.audit", "--watch", str(tmp_path / "in" / "*.jsonl"),
                             "--watch-interval", "1s", "--window", "fixed:1m", "--metrics", "humanity",
                             "--output", str(out)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (out / "windows" / "humanity-slices-old.jsonl").exists():
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.startswith("fair-forge-beam")]
    assert proc.returncode == 130, err[-3000:]
    assert lines == [f"fair-forge-beam: interrupted (Ctrl-C): the audit stopped; the output folder {out} holds what "
                     "the stream wrote before the interruption (the files of the windows that fired, if any; a "
                     "streaming run writes in place)"], err[-3000:]


@pytest.mark.slow
def test_a_watched_file_with_a_non_utf8_name_is_a_dead_letter(tmp_path):
    """Issue 28 (trial 28f B4): a file whose name is not UTF-8 (caf\\xe9.jsonl) appearing under --watch
    ended the stream with a UnicodeEncodeError in Beam's string coder (given up front, such a name is
    a usage error, but a watch finds it later). It is one dead letter naming it escaped; the other
    file's records are scored."""
    folder = tmp_path / "incoming"
    folder.mkdir()
    now = time.time()
    _write_jsonl(folder / "a.jsonl", [_flat("s1", 0, TEXTS["s1", 0], now), _flat("s1", 1, TEXTS["s1", 1], now)])
    out = tmp_path / "out"
    t, result = _watching(folder, out)
    t.start()
    time.sleep(3)
    tmp = folder / "bad.part"
    _write_jsonl(tmp, [_flat("s2", 0, TEXTS["s2", 0], now)])
    os.rename(bytes(tmp), os.path.join(os.fsencode(folder), b"caf\xe9.jsonl"))
    t.join(timeout=60)
    assert not t.is_alive(), "the watch did not stop"
    assert "error" not in result, result.get("error")
    overall = [r for r in result["doc"]["slices"] if r["slice"] == "overall"]
    assert sum(r["n_interactions"] for r in overall) == 2
    dead = [json.loads(line) for f in out.glob("windows/dead_letter-*.jsonl") for line in open(f)]
    assert len(dead) == 1 and "caf\\xe9.jsonl: the name is not valid UTF-8" in dead[0]["reason"], dead


def _watching(folder, out):
    """A thread (not started) running a watched humanity audit of ``folder/*.jsonl`` into ``out``
    (1 s polls, stops after 8 s, 1-minute windows); its result or error lands in the dict."""
    from pipelines import audit

    result: dict = {}

    def run():
        try:
            result["doc"] = audit.run(["--watch", str(folder / "*.jsonl"), "--watch-interval", "1s",
                                       "--watch-stop-after", "8s", "--window", "fixed:1m", "--metrics", "humanity",
                                       "--output", str(out), "--quiet"])
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assertion
            result["error"] = exc

    return threading.Thread(target=run, daemon=True), result


@pytest.mark.slow
def test_a_watched_file_that_grows_after_it_was_read_says_how_many_bytes_were_not_read(tmp_path):
    """fix40c item 2 (trial39 T5): lines appended to a watched file after it was read were lost without
    a word. The file is read up to its size when matched (its torn last line a dead letter, as before);
    the later change is one dead letter counting the bytes not read; nothing is read twice."""
    folder = tmp_path / "incoming"
    folder.mkdir()
    now = time.time()
    lines = [json.dumps(_flat("s1", i, TEXTS["s1", i % 2], now)) + "\n" for i in range(4)]
    path = folder / "a.jsonl"
    path.write_text(lines[0] + lines[1] + lines[2][:30])
    first = path.stat().st_size
    out = tmp_path / "out"
    t, result = _watching(folder, out)
    t.start()
    time.sleep(4)
    with open(path, "a") as f:
        f.write(lines[2][30:] + lines[3])
    t.join(timeout=60)
    assert not t.is_alive(), "the watch did not stop"
    assert "error" not in result, result.get("error")
    overall = [r for r in result["doc"]["slices"] if r["slice"] == "overall"]
    assert sum(r["n_interactions"] for r in overall) == 2
    dead = sorted(json.loads(line)["reason"] for f in out.glob("windows/dead_letter-*.jsonl") for line in open(f))
    size = path.stat().st_size
    assert len(dead) == 2 and "invalid JSON" in dead[0], dead
    assert (f"a.jsonl grew after it was read: {size - first:,} bytes after its first {first:,} were not read"
            in dead[1]), dead
