"""Data-quality findings made per answer are one warning per session and kind, with the count of
its interactions (issue 28, fix28w): Toxicity's ``answer_truncated``, Vision's
``empty_description`` and the reader's ``empty_answer`` / ``numeric_id`` of single-interaction
records wrote one warning per answer (100k answers: 100k warnings). One mechanism,
``io.elements.InteractionWarning`` findings kept per session (count and first example), as session
12 did for repeated keys."""
from __future__ import annotations

import json

from helpers import run_metric
from test_bad_files import _read
from test_vision import MarkerScorer, frame

from fair_forge_beam.metrics.vision import Vision


def test_the_readers_findings_per_record_are_one_warning_per_session(tmp_path):
    recs = [{"metadata": {"session_id": s, "assistant_id": "bot"}, "turn_index": t,
             "batch": {"qa_id": f"q{t}", "query": "x", "assistant": "  "}}
            for s, n in ((7, 5), ("b", 3)) for t in range(n)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    inter, dead, quality = _read(str(tmp_path / "in.jsonl"))
    assert len(inter) == 8 and dead == []
    got = sorted((q.kind, q.key, q.message.split(";")[0].split(":")[0]) for q in quality)
    assert got == [("empty_answer", "7/bot", "5 interactions of this session"),
                   ("empty_answer", "b/bot", "3 interactions of this session"),
                   ("numeric_id", "7/bot", "5 interactions of this session")], got
    first = next(q for q in quality if q.kind == "numeric_id").message
    assert f"session_id 7 at {tmp_path / 'in.jsonl'}:0 is a number" in first, first  # the first record, named


def test_vision_empty_descriptions_are_one_warning_per_session(tmp_path):
    data = [frame("s1", t, "") for t in range(6)] + [frame("s2", t, "" if t else "[s=1.0]") for t in range(3)]
    out = run_metric(Vision(scorer=MarkerScorer(), threshold=0.75), data, tmp_path)
    warnings = sorted((q["kind"], q["key"], q["message"]) for q in out["quality"])
    assert [(k, key) for k, key, _ in warnings] == [("empty_description", "s1/cam"), ("empty_description", "s2/cam")]
    assert warnings[0][2].startswith("6 interactions of this session; the first: frame s1/cam/0: ")
    assert warnings[1][2].startswith("2 interactions of this session; the first: frame s2/cam/1: ")


_SINK: dict = {}  # module level: FnApiRunner runs in-process


def _keep(xs, name):
    _SINK[name] = xs


def test_toxicity_and_vision_findings_share_one_combine_and_stay_apart():
    """The engine makes the per-answer findings of all its metrics one warning per session and
    kind in the session combine they all share (issue 27, roll36: the findings are per-session
    state, stored for roll-ups; no combine or shuffle of their own), each metric keeping its own
    warnings."""
    from fair_forge_beam.metrics.toxicity import MAX_ANALYSIS_CHARS, Toxicity
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from test_engine import _combines

    from fair_forge_beam._beam import beam
    from fair_forge_beam.engine import apply_metrics

    long = "word " * (MAX_ANALYSIS_CHARS // 5 + 10)
    data = [frame("s1", t, long if t < 3 else "") for t in range(5)]
    sink = _SINK
    sink.clear()
    p = beam.Pipeline(runner="apache_beam.runners.portability.fn_api_runner.FnApiRunner")
    res = apply_metrics(p | beam.Create(data), {
        "toxicity": Toxicity(clustering=False, group_extractor=KeywordGroupExtractor(default_group_keywords())),
        "vision": Vision(scorer=MarkerScorer(), threshold=0.75)})
    # the session combine (a GroupByKey of small-table pre-combines, never lifted) and the slice combines
    assert _combines(p) == ["Engine/CombineSlices/CombineCells", "Engine/CombineSlices/MergeSlices"]
    assert [t.unique_name for t in p.to_runner_api().components.transforms.values()
            if t.spec.urn == "beam:transform:group_by_key:v1" and "CombineSessions" in t.unique_name] == [
        "Engine/CombineSessions/GroupByKey"]
    for name, r in res.items():
        (r["quality"] | f"{name}/Kinds" >> beam.Map(lambda q: (q.kind, q.key, q.message.split(";")[0]))
         | f"{name}/All" >> beam.combiners.ToList() | f"{name}/Keep" >> beam.Map(_keep, name))
    p.run().wait_until_finish()
    assert sorted(sink["toxicity"]) == [("answer_truncated", "s1/cam", "3 interactions of this session")], sink
    assert sorted(sink["vision"]) == [("empty_description", "s1/cam", "2 interactions of this session")], sink
