"""Issue 28, "a warning about a field the run does not read": the reader's data-quality warnings about
a content field of an interaction (``io.read.FIELD_FINDINGS``: ``empty_answer`` about ``assistant``)
are given only when a metric of the run reads that field, as each metric declares
(``MetricSpec.reads``, ``engine.fields_read``). A ``--metrics prompt_evaluator`` run, which judges
its own generated answers and never the assistant's, was warned of every empty answer."""
from __future__ import annotations

import json

import pytest

from helpers import FNAPI
from test_bad_files import _read

from fair_forge_beam.engine import CONTENT_FIELDS, MetricSpec, engine_spec, fields_read
from fair_forge_beam.io.read import FIELD_FINDINGS, _ParseRecord, findings_given
from fair_forge_beam.metrics.registry import METRICS, build_metric, statistical_mode

#: a field each kind of FIELD_FINDINGS is about, and a record that gives that finding
_RECORDS = {"empty_answer": {"session_id": "s", "assistant_id": "bot", "conversation": [
    {"qa_id": "q0", "query": "hello?", "assistant": " ", "ground_truth_assistant": "hi", "agentic": {"reward": 1}},
    {"qa_id": "q1", "query": "and?", "assistant": "", "ground_truth_assistant": "so", "agentic": {"reward": 0}}]}}


def _specs(*names, extra=()):
    from pipelines.audit import build_parser

    args = build_parser().parse_args([
        "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m", "--guardian-base-url", "http://127.0.0.1:9/v1",
        "--guardian-model", "g", "--seed-prompt", "Answer kindly.", "--group-extractor", "keyword", "--no-clustering",
        *extra])
    options = {**vars(args), "clustering": False, "slices": ("overall",)}
    return [engine_spec(build_metric(n, statistical_mode(args), options)) for n in names]


def test_every_registered_metric_declares_the_content_fields_it_reads():
    specs = _specs(*METRICS)
    assert all(s.reads is not None for s in specs), [s.name for s in specs if s.reads is None]
    by_name = {s.name: s.reads for s in specs}
    assert "assistant" not in by_name["prompt_evaluator"]  # it judges its own answers
    assert by_name["prompt_evaluator"] == {"context", "query", "ground_truth_assistant"}
    assert all("assistant" in r for n, r in by_name.items() if n != "prompt_evaluator")
    assert set(FIELD_FINDINGS.values()) <= set(CONTENT_FIELDS)
    assert set(FIELD_FINDINGS) == set(_RECORDS)  # every kind is tested below
    # as configured: agentic on a label, privacy scanning the question read no answer
    assert _specs("agentic", extra=["--agentic-correctness", "label"])[0].reads == {"agentic", "ground_truth_agentic"}
    assert _specs("privacy", extra=["--privacy-text", "query"])[0].reads == {"query", "spans"}
    # a metric of one's own that declares nothing may read any field: every warning is given
    undeclared = MetricSpec(name="mine", scorer=None, interaction_record=None, session_value=None, session_reducer=None,
                            estimator=None)
    assert fields_read([undeclared, *specs]) is None and findings_given(None) == set(FIELD_FINDINGS)
    with pytest.raises(ValueError, match="reads names no interaction content field"):
        MetricSpec(name="x", scorer=None, interaction_record=None, session_value=None, session_reducer=None,
                   estimator=None, reads=frozenset({"answer"}))


@pytest.mark.parametrize("kind", sorted(FIELD_FINDINGS))
def test_a_field_warning_is_given_only_when_a_metric_of_the_run_reads_the_field(kind, tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps(_RECORDS[kind]) + "\n", encoding="utf-8")
    path = str(tmp_path / "in.jsonl")
    for names, warned in ((("prompt_evaluator",), False), (("prompt_evaluator", "toxicity"), True)):
        read = fields_read(_specs(*names))
        assert (FIELD_FINDINGS[kind] in read) is warned
        inter, dead, quality = _read(path, fields_read=read)
        assert len(inter) == 2 and dead == []
        assert [q.kind for q in quality] == ([kind] if warned else []), (names, quality)
    # a read without metrics (fields_read None) gives it, as before
    assert [q.kind for q in _read(path)[2]] == [kind]
    # a streaming read (no session grouping), a session record and a single-interaction record alike
    line = json.dumps(_RECORDS[kind])
    flat = json.dumps({"session_id": "s", "assistant_id": "bot", "turn_index": 0, **_RECORDS[kind]["conversation"][0]})
    for text in (line, flat):
        for read, n in ((frozenset({"query"}), 0), (frozenset({FIELD_FINDINGS[kind]}), 1), (None, 1)):
            out = list(_ParseRecord(streaming=True, fields_read=read).process(("in.jsonl", 0, text)))
            assert sum(getattr(o, "tag", None) == "quality" and o.value.kind == kind for o in out) == n, (text, read)


@pytest.mark.slow
def test_an_audit_that_reads_no_answer_is_not_warned_of_empty_answers(tmp_path):
    """The main job consults its metrics: agentic scoring a label in the data reads no answer (no
    ``empty_answer``); with humanity, which reads the answer, the one warning is given."""
    from pipelines import audit

    (tmp_path / "in.jsonl").write_text(json.dumps(_RECORDS["empty_answer"]) + "\n", encoding="utf-8")
    common = ["--quiet", "--input", str(tmp_path / "in.jsonl"), "--agentic-correctness", "label", f"--runner={FNAPI}"]
    doc = audit.run([*common, "--metrics", "agentic", "--output", str(tmp_path / "a")])
    assert "empty_answer" not in doc["summary"]["data_quality_by_kind"], doc["summary"]["data_quality_by_kind"]
    doc = audit.run([*common, "--metrics", "agentic,humanity", "--output", str(tmp_path / "b")])
    assert doc["summary"]["data_quality_by_kind"].get("empty_answer") == 1, doc["summary"]["data_quality_by_kind"]
