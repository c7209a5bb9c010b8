"""Slices by a session metadata field the user names (issue 14: "slicing (overall, assistant,
language, any metadata field the user names)"): ``--slices overall,assistant_id,language,region``.

Over 60 sessions of the shipped hh-rlhf slice with a ``region`` header field (eu, us, absent):
the ``region=eu`` slice of the whole run equals the ``overall`` slice of an audit of the eu
sessions alone, and the built-in slices are the same bits as in a run without the metadata
dimension (Bayesian intervals included), although the interaction-side statistics then go
through the session stage. Plus the reader's values (session, StreamedBatch and flat records;
non-string and long values), a session whose records disagree, a windowed run, and the
option's validation."""
from __future__ import annotations

import importlib.resources
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import FNAPI

N_SESSIONS = 60
REGIONS = ("eu", "us", None)  # by pair of sessions (chosen, rejected): the pair shares its region
BASE = ["--quiet", f"--runner={FNAPI}", "--metrics", "humanity,toxicity", "--group-extractor", "keyword"]


def _sessions():
    path = importlib.resources.files("fair_forge_beam").joinpath("data/examples/hh_rlhf_harmless_test_slice.jsonl")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:N_SESSIONS]):
        rec = json.loads(line)
        region = REGIONS[(i // 2) % 3]
        if region is not None:
            rec["region"] = region
        out.append(rec)
    return out


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from pipelines import audit

    tmp = tmp_path_factory.mktemp("metadata_slices")
    sessions = _sessions()
    every = _write(tmp / "all.jsonl", sessions)
    eu = _write(tmp / "eu.jsonl", [s for s in sessions if s.get("region") == "eu"])
    region = ["--slices", "overall,assistant_id,language,region"]

    def run(name, inp, *extra):
        return audit.run([*BASE, "--input", inp, "--output", str(tmp / name), *extra])

    return {
        "freq_region": run("freq_region", every, *region),
        "freq_eu": run("freq_eu", eu),
        "bayes_region": run("bayes_region", every, "--mode", "bayesian", *region),
        "bayes_plain": run("bayes_plain", every, "--mode", "bayesian"),
    }


def _slices(doc, metric):
    return {s["slice"]: s for s in doc["metrics"][metric]["slices"]}


@pytest.mark.parametrize("metric", ["humanity", "toxicity"])
@pytest.mark.slow
def test_metadata_slice_equals_the_audit_of_that_value_alone(runs, metric):
    got = _slices(runs["freq_region"], metric)
    assert sorted(got) == sorted(["overall", "assistant_id=hh-chosen", "assistant_id=hh-rejected", "language=english",
                                  "region=eu", "region=us", "region=(missing)"])
    assert runs["freq_region"]["config"]["slices"] == ["overall", "assistant_id", "language", "region"]
    assert "slices" not in runs["freq_eu"]["config"]  # the default dimensions: results.json keeps its bytes
    alone = _slices(runs["freq_eu"], metric)["overall"]
    assert {**got["region=eu"], "slice": "overall"} == alone
    n = {k: got[k]["n_interactions"] for k in ("region=eu", "region=us", "region=(missing)")}
    assert sum(n.values()) == got["overall"]["n_interactions"] and min(n.values()) > 0


@pytest.mark.parametrize("metric", ["humanity", "toxicity"])
@pytest.mark.slow
def test_builtin_slices_are_the_same_bits_with_a_metadata_dimension(runs, metric):
    with_region, plain = _slices(runs["bayes_region"], metric), _slices(runs["bayes_plain"], metric)
    assert sorted(with_region) == sorted([*plain, "region=eu", "region=us", "region=(missing)"])
    for key, rec in plain.items():
        assert with_region[key] == rec, key
    assert runs["bayes_region"]["summary"] == runs["bayes_plain"]["summary"]


def test_reader_keeps_the_named_fields_of_every_record_shape(tmp_path, test_pipeline):
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.io.read import MAX_SLICE_VALUE, ReadInteractions, slice_value

    long_value = "x" * (MAX_SLICE_VALUE + 50)
    records = [
        {"session_id": "s1", "assistant_id": "a", "region": "eu", "tier": 2, "conversation": [
            {"qa_id": "q1", "query": "hi", "assistant": "hello"}, {"qa_id": "q2", "query": "?", "assistant": "!"}]},
        {"metadata": {"session_id": "s2", "assistant_id": "a", "region": {"b": 1, "a": [True]}},
         "batch": {"qa_id": "q1", "query": "hi", "assistant": "yo"}, "region": "ignored: the header wins"},
        {"session_id": "s3", "assistant_id": "a", "qa_id": "q1", "query": "hi", "assistant": "yo", "region": long_value,
         "tier": None},
        # a null in the header does not hide the record's own value
        {"metadata": {"session_id": "s4", "assistant_id": "a", "region": None},
         "batch": {"qa_id": "q1", "query": "hi", "assistant": "yo"}, "region": "eu", "tier": 1.0},
    ]
    path = _write(tmp_path / "in.jsonl", records)
    with test_pipeline as p:
        read = p | ReadInteractions(path, slice_fields=("region", "tier"))
        values = read["interactions"] | "Values" >> __import__("apache_beam").Map(
            lambda x: (x.session_id, x.turn_index, tuple(v for _, v in x.slice_values)))
        assert_that(values, equal_to([
            ("s1", 0, ("eu", "2")), ("s1", 1, ("eu", "2")),
            ("s2", 0, ('{"a":[true],"b":1}', None)),
            ("s3", 0, (slice_value(long_value), None)),
            ("s4", 0, ("eu", "1")),
        ]))
    cut = slice_value(long_value)
    assert len(cut) == MAX_SLICE_VALUE and cut.startswith("x" * (MAX_SLICE_VALUE - 9) + "…")
    assert slice_value(long_value + "y") != cut  # two long values sharing their start stay two slices


def test_slice_value_text_of_every_json_value():
    from fair_forge_beam.io.read import slice_value

    assert [slice_value(v) for v in ("eu", "", 3, 3.0, -0.0, 2.5, float("inf"), True, None, float("nan"),
                                     {"b": 1, "a": [None]})] == [
        "eu", "", "3", "3", "0", "2.5", "Infinity", "true", None, None, '{"a":[null],"b":1}']


def test_distinct_values_are_distinct_slices_with_unambiguous_labels():
    """Trial 28e B5: the string "(missing)" was one slice with null and absent (n 3, no warning),
    true with "true" and ["eu"] with '["eu"]'. A string that would read as another value's label is
    shown as its JSON string (docs/data.md)."""
    from fair_forge_beam.io.read import slice_value
    from fair_forge_beam.slices import MISSING_VALUE

    values = ["(missing)", None, True, "true", ["eu"], '["eu"]', 3, "3", "null", "-1.5", '"eu"', "eu", {"a": 1},
              '{"a":1}', "Infinity", "NaN", " 3", False, "false"]
    labels = [MISSING_VALUE if slice_value(v) is None else slice_value(v) for v in values]
    assert len(set(labels)) == len(values), labels  # only null is "(missing)"
    assert labels[:6] == ['"(missing)"', "(missing)", "true", '"true"', '["eu"]', '"[\\"eu\\"]"'], labels
    assert slice_value("eu") == "eu" and slice_value("(missing") == "(missing" and slice_value("nope") == "nope"
    assert slice_value("true story") == "true story" and slice_value("3 bots") == "3 bots"


def _console_rows(labels) -> list:
    """The console table's rows of a Toxicity run whose slices are ``labels`` (each n 10, 5 sessions)."""
    from fair_forge_beam.reports.summary import console_summary

    est = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}
    rows = [{"slice": s, "n_interactions": 10, "n_sessions": 5, "toxic_rate": est} for s in labels]
    doc = {"config": {"mode": "frequentist"},
           "summary": {"interactions_read": 10, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"toxicity": {"scored": 10, "interactions_scored": 10, "dead_letters": 0}}},
           "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": rows}}}
    return [ln for ln in console_summary(doc, "out", []).splitlines() if ln.startswith("  ") and "0.5" in ln]


def test_console_tables_measure_the_width_of_what_they_print():
    """Trial 28e B5: 'region=eu\u200b' is printed escaped (6 columns more) but was measured before
    escaping, and its row's columns were shifted; a wide character counts two columns."""
    from fair_forge_beam.reports.summary import display_width

    lines = _console_rows(("overall", "region=eu\u200b", "region=日本", "region=e\u0301u", "region=plain"))
    assert len(lines) == 5, lines
    starts = {display_width(ln[:ln.index(" 10 ")]) for ln in lines}  # where the n column begins, on screen
    assert len(starts) == 1, lines
    assert display_width("日本") == 4 and display_width("e\u0301") == 1


def test_a_float_slice_value_is_its_shortest_json_at_any_magnitude():
    """trial36 T11: ``tier = 1e300`` became a 301-digit label (float noise digits, then cut): every
    integral float was turned into an int. An integral float stays an integer's label up to 2**53
    (every integer there is a float: 3.0 and 3 one slice); beyond, its shortest JSON."""
    from fair_forge_beam.io.read import slice_value

    assert [slice_value(v) for v in (1e300, -1e300, 1e16, 2.0 ** 53, -(2.0 ** 53), 2.0 ** 53 * 2, 1.7976931348623157e308,
                                     5e-324, 12345678901234567890)] == [
        "1e+300", "-1e+300", "1e+16", "9007199254740992", "-9007199254740992", "1.8014398509481984e+16",
        "1.7976931348623157e+308", "5e-324", "12345678901234567890"]


def test_console_slice_column_is_bounded_whatever_the_labels_length():
    """trial36 T11: a 200-character value (cut with its hash, as documented) set the console table's
    slice column, so every row, ``overall`` included, was ~300 columns wide. A label over 40 columns
    is elided in its middle, its start and end (the hash) kept; the files keep the full label."""
    from fair_forge_beam.io.read import slice_value
    from fair_forge_beam.reports.summary import CONSOLE_LABEL_WIDTH, display_width

    long_a, long_b = "tier=" + slice_value("x" * 500), "tier=" + slice_value("x" * 500 + "y")
    wide = "tier=" + "ゴールド" * 30
    lines = _console_rows(("overall", long_a, long_b, wide, "tier=gold"))
    assert len(lines) == 5, lines
    starts = {display_width(ln[:ln.index(" 10 ")]) for ln in lines}
    assert starts == {2 + CONSOLE_LABEL_WIDTH + 2 + 7 - 3}, lines  # the label column as wide as the cap, no wider
    assert all(display_width(ln.rstrip()) <= 2 + CONSOLE_LABEL_WIDTH + 2 + 7 + 2 + 8 + 2 + 34 for ln in lines), lines
    labels = [ln[2:ln.index(" 10 ")].rstrip() for ln in lines]
    assert labels[0] == "overall" and labels[4] == "tier=gold"
    assert labels[1].endswith(long_a[-9:]) and labels[2].endswith(long_b[-9:]) and labels[1] != labels[2], labels
    assert labels[1].startswith("tier=xxx") and "…" in labels[3] and labels[3].startswith("tier=ゴールド"), labels


@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from(["eu", "us", "apac"])), min_size=2, max_size=2),
                max_size=12), st.data())
def test_metadata_dims_combine_any_merge_order(parts, data):
    """A value beats None per field, the smaller of two values wins, disagreement is flagged:
    the same for any split and merge order of a session's records."""
    from fair_forge_beam.engine import MetadataDimsCombineFn

    fn = MetadataDimsCombineFn()

    def fold(items):
        acc = fn.create_accumulator()
        for v in items:
            acc = fn.add_input(acc, v)
        return acc

    ref = fold(parts)
    order = data.draw(st.permutations(parts))
    cut = data.draw(st.integers(0, len(order)))
    accs = [fold(order[:cut]), fold(order[cut:])]
    got = fn.extract_output(fn.merge_accumulators(data.draw(st.permutations(accs))))
    assert got == ref
    if parts:
        for i in range(2):
            present = sorted({p[i] for p in parts if p[i] is not None})
            assert ref[0][i] == (present[0] if present else None)
        assert ref[1] == any(len({p[i] for p in parts if p[i] is not None}) > 1 for i in range(2))


@pytest.mark.slow
def test_a_session_whose_records_disagree_is_reported_and_sliced_once(tmp_path):
    from pipelines import audit

    rows = [{"session_id": "s1", "assistant_id": "a", "qa_id": f"q{t}", "query": "hi", "assistant": "a kind answer",
             "turn_index": t, "region": r} for t, r in ((0, "us"), (1, "eu"))]
    doc = audit.run([*BASE, "--input", _write(tmp_path / "in.jsonl", rows), "--output", str(tmp_path / "out"),
                     "--slices", "region"])
    got = _slices(doc, "humanity")
    assert sorted(got) == ["overall", "region=eu"] and got["region=eu"]["n_interactions"] == 2
    warnings = [json.loads(line) for f in sorted((tmp_path / "out" / "data_quality").glob("*.jsonl")) for line in open(f)]
    assert [w["kind"] for w in warnings if w["kind"] == "slice_metadata_differs"] == ["slice_metadata_differs"]


@pytest.mark.slow
def test_windowed_run_slices_by_metadata(tmp_path):
    from pipelines import audit

    rows = [{"session_id": s, "assistant_id": "a", "qa_id": f"{s}-{t}", "query": "hi", "assistant": "thank you, lovely",
             "turn_index": t, "timestamp": ts, "region": r}
            for s, t, ts, r in (("s1", 0, "2024-05-01T10:05:00Z", "eu"), ("s1", 1, "2024-05-01T10:50:00Z", "eu"),
                                ("s2", 0, "2024-05-01T10:20:00Z", "us"), ("s3", 0, "2024-05-01T11:10:00Z", "us"),
                                # records of s4 disagree: sliced once, by the smaller value, with a warning
                                ("s4", 0, "2024-05-01T10:30:00Z", "us"), ("s4", 1, "2024-05-01T10:40:00Z", "eu"))]
    doc = audit.run([*BASE, "--input", _write(tmp_path / "in.jsonl", rows), "--output", str(tmp_path / "out"),
                     "--window", "fixed:1h", "--slices", "region"])
    got = sorted((r["metric"], r["window_start"], r["slice"], r["n_interactions"]) for r in doc["slices"])
    assert [g for g in got if g[0] == "humanity"] == [
        ("humanity", "2024-05-01T10:00:00Z", "overall", 5), ("humanity", "2024-05-01T10:00:00Z", "region=eu", 4),
        ("humanity", "2024-05-01T10:00:00Z", "region=us", 1), ("humanity", "2024-05-01T11:00:00Z", "overall", 1),
        ("humanity", "2024-05-01T11:00:00Z", "region=us", 1)]
    # a windowed run writes its data-quality warnings too (it wrote none before), and counts them
    warnings = [json.loads(line) for f in sorted((tmp_path / "out" / "windows").glob("data_quality-*.jsonl"))
                for line in open(f)]
    assert [w["kind"] for w in warnings] == ["slice_metadata_differs"] and "region=eu" in warnings[0]["message"]
    assert (doc["dead_letters"], doc["data_quality_warnings"]) == (0, 1)


def test_python_api_run_with_a_retriever_slices_by_a_dataset_field():
    """``Metric.run(MyRetriever, slices=(..., "region"))``: the retriever's session records carry
    the field (as dicts: the ``Dataset`` model ignores unknown fields, as upstream), the reader
    takes the named ones, and the metric's slices include them; a name that cannot be a field is
    a ``ValueError`` before any pipeline."""
    from fair_forge_beam.io.retriever import Retriever
    from fair_forge_beam.metrics.humanity import Humanity

    class Regions(Retriever):
        def load_dataset(self):
            return [dict(session_id=f"s{i}", assistant_id="a", region=r, conversation=[
                dict(qa_id="q", query="hi", assistant=text)])
                for i, (r, text) in enumerate((("eu", "I am so happy and grateful"), ("us", "this is sad"),
                                               ("eu", "what a joyful day")))]

    res = Humanity.run(Regions, slices=("overall", "region"))
    assert [(s.slice, s.n_interactions) for s in res.slices] == [("overall", 3), ("region=eu", 2), ("region=us", 1)]
    with pytest.raises(ValueError, match="misspelt"):
        Humanity(slices=("overall", "langauge"))


@pytest.mark.slow
def test_stream_panes_early_on_time_late_with_a_metadata_dimension(tmp_path):
    """The panes of tests/test_streaming.py (two early, on time, one late element) with a
    ``region`` dimension: each pane's ``region=eu`` slice counts what its ``overall`` slice
    counts (every element of the first window is eu), and the late element updates both."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms import window

    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from fair_forge_beam.metrics.humanity import Humanity
    from fair_forge_beam.metrics.toxicity import Toxicity
    from fair_forge_beam.statistical import BayesianMode
    from fair_forge_beam.streaming.windows import AddWindowFields, WindowSpec
    from helpers import append_line_sink as _AppendLine
    from test_streaming import TEXTS, _inter, _read

    def el(sid, turn, ts, region):
        return window.TimestampedValue(_inter(sid, turn, TEXTS[sid, turn], ts)._replace(slice_values=(("region", region),)), ts)

    stream = (
        TestStream()
        .advance_watermark_to(0)
        .add_elements([el("s1", 0, 5, "eu"), el("s1", 1, 10, "eu")])
        .advance_processing_time(40)
        .add_elements([el("s2", 0, 20, "eu"), el("s3", 0, 70, "us")])
        .advance_watermark_to(61)
        .add_elements([el("s2", 1, 30, "eu")])  # late for [0, 60)
        .advance_watermark_to_infinity()
    )
    mode = BayesianMode(mc_samples=300, rng_seed=7)
    slices = ("overall", "region")
    metrics = {"humanity": Humanity(statistical_mode=mode, slices=slices),
               "toxicity": Toxicity(statistical_mode=mode, slices=slices, clustering=False,
                                    group_extractor=KeywordGroupExtractor(default_group_keywords()))}
    opts = PipelineOptions(["--streaming"])
    opts.view_as(StandardOptions).runner = "BundleBasedDirectRunner"
    with beam.Pipeline(options=opts) as p:
        windowed = p | stream | WindowSpec.parse("fixed:1m", "30s", "10m").window_into()
        for name, metric in metrics.items():
            (windowed | f"M_{name}" >> metric)["slices"] | f"W_{name}" >> beam.ParDo(AddWindowFields()) | (
                f"Out_{name}" >> beam.ParDo(_AppendLine(tmp_path / name)))
    for name in metrics:
        recs = _read(tmp_path, name)
        first = [r for r in recs if r["window_start_s"] == 0.0]
        by_pane: dict = {}
        for r in first:
            by_pane.setdefault(r["pane"]["index"], {})[r["slice"]] = r["n_interactions"]
        panes = [by_pane[i] for i in sorted(by_pane)]
        assert all(p.get("region=eu") == p["overall"] for p in panes), (name, panes)
        assert panes[0]["overall"] == 2 and panes[-1]["overall"] == 4 and "region=us" not in str(panes)
        second = {r["slice"]: r["n_interactions"] for r in recs if r["window_start_s"] == 60.0}
        assert second == {"overall": 1, "region=us": 1}, (name, second)


class _CountSlices:
    """Estimator of the test metrics below: the slice key and its interaction count."""

    def setup(self):
        pass

    def estimate(self, key, accs, window, aux):
        return [(key, accs[0])]


def test_a_ptransform_scorer_gets_its_metadata_from_the_input_and_panes_are_refused(test_pipeline):
    """A scorer given as a PTransform (a judge's shape) does not see its interactions when it
    routes, so the sessions' metadata values come from the input: exact in batch and in windows
    that fire once; with early or late panes the engine refuses the combination at graph
    construction (a pane could hold a session's scores without its values)."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to
    from apache_beam.transforms import trigger, window

    from fair_forge_beam.engine import Engine, MetricSpec, SessionReducer
    from fair_forge_beam.statistical.combiners import SumCombineFn
    from test_engine import INPUT, _ScoreTransform

    class Sessions(SessionReducer):
        def reduce(self, key, values):
            return {"key": key}, None, []

    spec = MetricSpec(name="t", scorer=_ScoreTransform(), interaction_record=None, session_value=lambda x: 1,
                      session_reducer=Sessions(), estimator=_CountSlices(), cell_value=lambda x: 1,
                      interaction_slice_combine=SumCombineFn(), slices=("overall", "region"))
    rows = [x._replace(slice_values=(("region", r),)) for x, r in zip(INPUT, ("eu", "eu", "us"))]
    with test_pipeline as p:
        res = p | beam.Create(rows) | Engine([spec])
        assert_that(res["t"]["slices"], equal_to([("overall", 3), ("region=eu", 2), ("region=us", 1)]))
    with pytest.raises(ValueError, match="early or late panes"):
        with beam.Pipeline() as p2:
            _ = (p2 | beam.Create(rows) | beam.WindowInto(
                window.FixedWindows(60), trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING) | Engine([spec]))


def test_main_job_refuses_metadata_slices_of_a_judged_metric_with_panes_as_a_usage_error(tmp_path, capsys, monkeypatch):
    from pipelines import audit

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    rows = [{"session_id": "s1", "assistant_id": "a", "qa_id": "q", "query": "hi", "assistant": "ok",
             "ground_truth_assistant": "ok", "timestamp": "2024-05-01T10:05:00Z", "region": "eu"}]
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--input", _write(tmp_path / "in.jsonl", rows), "--output", str(tmp_path / "out"),
                   "--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
                   "--window", "fixed:1h", "--allowed-lateness", "10m", "--slices", "region"])
    assert exc.value.code == 2 and "early or late panes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_first_record_only_absent_field_and_gates_on_metadata(tmp_path, capsys):
    """Metadata on the first record of a session only is the session's metadata (a value beats
    absent, no warning); a named field no session carries gets one warning and fails a gate
    'in every <field>' instead of passing on the one '(missing)' slice."""
    from fair_forge_beam.reports.gates import GatesFailed
    from pipelines import audit

    rows = [{"session_id": s, "assistant_id": "a", "qa_id": f"q{t}", "query": "hi", "assistant": "a kind happy answer",
             "turn_index": t, **({"region": r} if t == 0 or s == "s2" else {})}
            for s, r in (("s1", "eu"), ("s2", "us")) for t in range(3)]
    out = tmp_path / "out"
    with pytest.raises(GatesFailed):
        audit.run([*BASE, "--input", _write(tmp_path / "in.jsonl", rows), "--output", str(out),
                   "--slices", "region,tier", "--gate", "humanity mean_entropy mean >= 0 in every region",
                   "--gate", "humanity mean_entropy mean >= 0 in every tier"])
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    got = {k: v["n_interactions"] for k, v in _slices(doc, "humanity").items()}
    assert got == {"overall": 6, "region=eu": 3, "region=us": 3, "tier=(missing)": 6}
    warnings = [json.loads(line) for f in sorted((out / "data_quality").glob("*.jsonl")) for line in open(f)]
    kinds = sorted(w["kind"] for w in warnings)
    assert kinds == ["slice_field_absent"] and [w["key"] for w in warnings] == ["tier"]
    checks = json.loads((out / "gates.json").read_text(encoding="utf-8"))
    flat = [c for g in checks["gates"] for c in g["checks"]]
    assert [(c["slice"], c["status"]) for c in flat] == [("region=eu", "pass"), ("region=us", "pass"), ("tier=*", "fail")]
    assert "no session carries the metadata field 'tier'" in flat[-1]["reason"]


def test_gate_grammar_and_messages_with_metadata_dimensions():
    from fair_forge_beam.reports.gates import GateCheck, GateConfigError, parse_gate, validate_gates

    assert parse_gate("humanity mean_entropy mean >= 0 in every geo.region").slices == "every geo.region"
    assert parse_gate("humanity mean_entropy mean >= 0 in every x-region").slices == "every x-region"
    validate_gates([parse_gate("humanity mean_entropy mean >= 0 in every geo.region")], ["humanity"], False,
                   ("overall", "geo.region"))
    # BestOf ranks assistants: no per-assistant or metadata slices, so such a gate is a usage error up front
    with pytest.raises(GateConfigError, match="not computed by this audit for bestof"):
        validate_gates([parse_gate("bestof leader_win_rate mean >= 0 in every region")], ["bestof"], False,
                       ("overall", "language", "region"))
    with pytest.raises(GateConfigError, match="write 'in every region'"):
        validate_gates([parse_gate("toxicity toxic_rate mean <= 0.5 for every region")], ["toxicity"], False,
                       ("overall", "region"))
    # a value from the data cannot split or disguise a GATE FAILED line
    check = GateCheck(gate="g", gate_index=0, metric="m", field="f", stat="mean", op="<=", threshold=0.1,
                      slice="region=e\u200bu\nGATE FAILED forged", value=0.5, mean=0.5, n=3, status="fail")
    msg = check.message()
    assert "\n" not in msg and "\u200b" not in msg and "e\\u200bu\\nGATE FAILED forged" in msg


def test_python_api_fields_are_matched_by_name_not_position(tmp_path, test_pipeline):
    """The reader's ``slice_fields`` and a metric's ``slices`` may name the fields in another
    order, or the metric more fields than the reader kept: values are found by name (a field the
    reader did not keep is ``(missing)``, with its warning), never by position."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.metrics.humanity import Humanity

    rows = [{"session_id": f"s{i}", "assistant_id": "a", "region": r, "tier": t,
             "conversation": [{"qa_id": "q", "query": "hi", "assistant": "so happy"}]}
            for i, (r, t) in enumerate((("eu", 1), ("us", 2), ("eu", 2)))]
    path = _write(tmp_path / "in.jsonl", rows)
    with test_pipeline as p:
        read = p | ReadInteractions(path, slice_fields=("region",))
        res = read["interactions"] | Humanity(slices=("overall", "tier", "region"))
        got = res["slices"] | beam.Map(lambda r: (r["slice"], r["n_interactions"]))
        assert_that(got, equal_to([("overall", 3), ("region=eu", 2), ("region=us", 1), ("tier=(missing)", 3)]),
                    label="slices")
        assert_that(res["quality"] | beam.Map(lambda w: (w.kind, w.key)), equal_to([("slice_field_absent", "tier")]),
                    label="quality")
    with pytest.raises(ValueError, match="'slices' expects a sequence or a set of strings"):  # the constructors' check (fix39a)
        Humanity(slices="region")


@pytest.mark.slow
def test_a_slice_field_no_session_carries_is_one_warning_line(tmp_path, caplog):
    """trial38 T11: ``--slices nonexistent_field`` exited 0 with a ``nonexistent_field=(missing)`` row
    and the reason only in data_quality/. The run now also says it in one warning line on stderr (as
    the "replaced the earlier run" line), naming the field, unless --quiet; a field present says nothing."""
    import logging

    from pipelines import audit

    rows = [{"session_id": f"s{i}", "assistant_id": "a", "region": "eu",
             "conversation": [{"qa_id": "q", "query": "hi", "assistant": "happy to help"}]} for i in range(2)]
    data = tmp_path / "in.jsonl"
    _write(data, rows)
    common = ["--input", str(data), "--metrics", "humanity", "--no-report", f"--runner={FNAPI}"]

    def said(*flags):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            audit.run([*common, *flags, "--output", str(tmp_path / f"out{len(flags)}")])
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("--slices ")]

    [line] = said("--slices", "overall,regoin")
    assert line.startswith("--slices regoin: no session carries the metadata field 'regoin'") and "\n" not in line, line
    assert said("--slices", "overall,regoin", "--quiet") == []
    assert said("--slices", "overall,region") == []


@pytest.mark.parametrize("shape", ["session", "streamed", "flat", "object"])
def test_a_slice_value_with_no_json_form_is_a_dead_letter_and_nan_itself_missing(shape):
    """trial47 B7: ``"meta": -Infinity`` (Python's json reads it) was the slice ``meta=-Infinity``,
    ``[NaN]`` the slice ``[NaN]``, while ``Infinity`` in ``weight`` is a dead letter: a value with no
    JSON form is a dead letter (docs/reliability.md) — ±Infinity, and a non-finite number at any depth
    of a nested value — naming the field and where; ``NaN`` itself is no value, ``(missing)``, as
    documented. Session, StreamedBatch and flat records of a JSON text, and a Parquet row's or a
    retriever's object (``float('-inf')``), alike."""
    from fair_forge_beam.io.elements import DeadLetter, Interaction
    from fair_forge_beam.io.read import _ParseRecord

    turn = {"qa_id": "q1", "query": "hi", "assistant": "hello"}
    ids = {"session_id": "s", "assistant_id": "bot", "language": "english"}

    def record(meta):
        if shape in ("session", "object"):
            return {**ids, "meta": meta, "conversation": [turn]}
        if shape == "streamed":
            return {"metadata": {**ids, "meta": meta}, "batch": turn}
        return {**ids, **turn, "meta": meta}

    def read(meta_text, meta_value):
        fn = _ParseRecord(slice_fields=("meta",))
        fn.setup()
        payload = record(meta_value) if shape == "object" else json.dumps(record(None)).replace('"meta": null', f'"meta": {meta_text}')
        out = [getattr(o, "value", o) for o in fn.process(("in.jsonl", 7, payload))]
        dead = [o for o in out if isinstance(o, DeadLetter)]
        # an interaction, or (session key, (order, turn_index, interaction as a tuple, n, whole)) to its session's ordering
        found = [o if isinstance(o, Interaction) else Interaction(*o[1][2]) for o in out
                 if isinstance(o, Interaction) or (isinstance(o, tuple) and len(o) == 2 and len(o[1]) == 5)]
        return dead, [x.slice_values for x in found]

    inf, nan = float("inf"), float("nan")
    for text, value, said in (("-Infinity", -inf, "is -Infinity"), ("Infinity", inf, "is Infinity"),
                              ('{"a": [1, NaN]}', {"a": [1, nan]}, "holds NaN at a[1]"),
                              ('[{"b": -Infinity}]', [{"b": -inf}], "holds -Infinity at [0].b")):
        dead, values = read(text, value)
        assert len(dead) == 1 and not values, (text, dead, values)
        assert f"slice field 'meta' {said}, a number with no JSON form" in dead[0].reason, dead[0].reason
        assert dead[0].source == "in.jsonl:7" and '"s"' in dead[0].raw
    for text, value, label in (("NaN", nan, None), ("2.5", 2.5, "2.5"), ('{"a": [1e300]}', {"a": [1e300]}, '{"a":[1e+300]}')):
        dead, values = read(text, value)
        assert not dead and values == [(("meta", label),)], (text, dead, values)
