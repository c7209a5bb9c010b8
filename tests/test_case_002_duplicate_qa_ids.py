"""case-002: three interactions of one session all carry ``qa_id: "q1"``.

Nothing collapses because ids repeat: elements are identified by ``element_id`` (session +
assistant + turn index); the duplicate is reported once as a data-quality warning."""
from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from fair_forge_beam.reports.load import iter_dead_letters, iter_jsonl_lines, iter_quality_warnings, read_sessions

from fair_forge_beam.io.read import ReadInteractions
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.combiners import session_mean_estimates

ANSWERS = ["I am so happy and full of joy!", "I am angry and I fear the worst.", "I trust you."]


def dup_session(sid="dup-session", aid="bot"):
    return {
        "session_id": sid,
        "assistant_id": aid,
        "language": "english",
        "context": "",
        "conversation": [
            {"qa_id": "q1", "query": f"question {i}", "assistant": ANSWERS[i], "ground_truth_assistant": "I am happy to help."}
            for i in range(3)
        ],
    }


def test_read_keeps_three_interactions_and_warns_once(test_pipeline, tmp_path):
    session_path = tmp_path / "dup.json"
    session_path.write_text(json.dumps([dup_session(), {**dup_session("other"), "conversation": dup_session()["conversation"][:1]}]))
    streamed_path = tmp_path / "dup_streamed.jsonl"
    with open(streamed_path, "w") as f:
        for i, b in enumerate(dup_session("streamed")["conversation"]):
            f.write(json.dumps({"metadata": {"session_id": "streamed", "assistant_id": "bot"}, "batch": b}) + "\n")

    def check(tagged):
        by = {}
        for tag, x in tagged:
            by.setdefault(tag, []).append(x)
        for src, sid in (("session", "dup-session"), ("streamed", "streamed")):
            inter = sorted((x for x in by.get(f"{src}.interactions", []) if x.session_id == sid), key=lambda x: x.turn_index)
            assert [(x.element_id, x.turn_index, x.qa_id) for x in inter] == [
                (f"{sid}/bot/{i}", i, "q1") for i in range(3)
            ], inter
            assert [x.assistant for x in inter] == ANSWERS
            quality = by.get(f"{src}.quality", [])
            assert len(quality) == 1, quality
            assert quality[0].kind == "duplicate_qa_id"
            assert sid in quality[0].key and "bot" in quality[0].key
            assert "q1" in quality[0].message and "3" in quality[0].message
            assert by.get(f"{src}.dead", []) == []
        # the session without duplicates is read and raises no warning
        assert [x.element_id for x in by["session.interactions"] if x.session_id == "other"] == ["other/bot/0"]

    with test_pipeline as p:
        parts = []
        for src, path in (("session", session_path), ("streamed", streamed_path)):
            out = p | f"Read_{src}" >> ReadInteractions(str(path))
            for name, pc in (("interactions", out["interactions"]), ("quality", out["quality"]), ("dead", out["dead_letter"])):
                parts.append(pc | f"Tag_{src}_{name}" >> beam.Map(lambda x, t=f"{src}.{name}": (t, x)))
        assert_that(tuple(parts) | beam.Flatten(), check)


def test_session_mean_of_duplicates_is_over_all_three():
    scores = np.array([[0.9], [0.5], [0.1]])
    est, warning = session_mean_estimates(scores, [None, None, None], [0, 1, 2], FrequentistMode())
    assert warning is None
    assert est[0].mean == pytest.approx(0.5, abs=1e-12)
    assert est[0].n == 3


def test_weights_of_duplicate_qa_ids_are_kept_by_position():
    # upstream keys weights by qa_id, so three "q1" would collapse to one weight
    scores = np.array([[0.9], [0.5], [0.1]])
    est, warning = session_mean_estimates(scores, [0.5, 0.25, 0.25], [0, 1, 2], FrequentistMode())
    assert warning is None
    assert est[0].mean == pytest.approx(0.9 * 0.5 + 0.5 * 0.25 + 0.1 * 0.25, abs=1e-12)


def test_bayesian_session_mean_of_duplicates():
    scores = np.array([[0.9], [0.5], [0.1]])
    mode = BayesianMode(mc_samples=4000, rng_seed=7)
    est, _ = session_mean_estimates(scores, [None, None, None], [0, 1, 2], mode)
    assert est[0].n == 3
    assert est[0].mean == pytest.approx(0.5, abs=0.02)
    assert 0.1 <= est[0].ci_low < 0.5 < est[0].ci_high <= 0.9
    again, _ = session_mean_estimates(scores, [None, None, None], [0, 1, 2], BayesianMode(mc_samples=4000, rng_seed=7))
    assert again[0] == est[0]


def test_main_job_reports_the_duplicate_once_and_scores_three(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from pipelines.audit import run

    path = tmp_path / "dup.json"
    path.write_text(json.dumps([dup_session()]))
    out = tmp_path / "out"
    doc = run(["--input", str(path), "--output", str(out), "--quiet"])

    s = doc["summary"]
    assert s["interactions_read"] == 3
    assert s["rejected_at_read"] == 0
    assert s["data_quality_by_kind"].get("duplicate_qa_id") == 1
    assert s["data_quality_warnings"] == sum(s["data_quality_by_kind"].values())
    assert s["metrics"]["humanity"]["scored"] == 3
    quality = list(iter_quality_warnings(str(out)))
    assert [q["kind"] for q in quality].count("duplicate_qa_id") == 1

    sessions = read_sessions(str(out), "humanity")
    assert len(sessions) == 1
    sess = sessions[0]
    assert (sess["session_id"], sess["assistant_id"], sess["n_interactions"]) == ("dup-session", "bot", 3)

    table = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted((r["element_id"], r["turn_index"], r["qa_id"]) for r in table) == [(f"dup-session/bot/{i}", i, "q1") for i in range(3)]
    # the session aggregate is the mean over all three interactions, not the last one only
    entropies = [r["humanity_assistant_emotional_entropy"] for r in sorted(table, key=lambda r: r["turn_index"])]
    assert len(set(entropies)) > 1
    assert sess["mean_entropy"]["mean"] == pytest.approx(sum(entropies) / 3)
    assert sess["mean_entropy"]["n"] == 3
    overall = [r for r in doc["metrics"]["humanity"]["slices"] if r["slice"] == "overall"]
    assert overall and overall[0]["n_interactions"] == 3 and overall[0]["n_sessions"] == 1
