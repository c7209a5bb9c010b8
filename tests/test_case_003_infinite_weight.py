"""case-003: non-finite and negative weights.

``Infinity``, ``-Infinity``, ``NaN`` (the JSON extensions Python's json module writes) and
``-0.5`` are rejected at read time into the dead letter with a reason naming ``weight``;
``1e308`` is accepted; no aggregate becomes NaN or inf."""
from __future__ import annotations

import json
import math

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from fair_forge_beam.reports.load import iter_dead_letters, iter_jsonl_lines, iter_quality_warnings, read_sessions

from fair_forge_beam.io.read import ReadInteractions
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from helpers import for_its_mode
from fair_forge_beam.statistical.combiners import WeightedMeanStats, resolve_weights, session_mean_estimates, weighted_mean_from_stats

BAD = {"inf": float("inf"), "neginf": float("-inf"), "nan": float("nan"), "neg": -0.5}
HIGH_ENTROPY = "I am happy, angry, full of trust and fear."  # 4 NRC emotions -> entropy > 2 bits
LOW_ENTROPY = "I am happy to help."  # entropy log2(3) < 1.8 bits


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name!r}")


def strict_json(text: str):
    """``json.loads`` that refuses ``NaN`` / ``Infinity`` / ``-Infinity``."""
    return json.loads(text, parse_constant=_reject_constant)


def all_numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from all_numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from all_numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def session(sid, weights, answer=LOW_ENTROPY):
    return {
        "session_id": sid,
        "assistant_id": "bot",
        "language": "en",
        "context": "",
        "conversation": [
            {"qa_id": f"q{i}", "query": "How do you feel?", "assistant": answer, "ground_truth_assistant": "I trust you.",
             **({} if w is None else {"weight": w})}
            for i, w in enumerate(weights)
        ],
    }


def streamed(sid, weight, answer=LOW_ENTROPY):
    return {"metadata": {"session_id": sid, "assistant_id": "bot"},
            "batch": {"qa_id": "q0", "query": "How do you feel?", "assistant": answer, "weight": weight}}


def test_python_json_writes_the_extensions():
    text = json.dumps(streamed("x", float("inf")))
    assert "Infinity" in text
    assert "NaN" in json.dumps(streamed("x", float("nan")))


def test_read_rejects_non_finite_and_negative_weights(test_pipeline, tmp_path):
    lines = []
    for name, w in BAD.items():
        lines.append(json.dumps(session(f"sess-{name}", [w])))
        lines.append(json.dumps(streamed(f"sb-{name}", w)))
    lines.append(json.dumps(session("sess-big", [1e308])))
    lines.append(json.dumps(streamed("sb-big", 1e308)))
    lines.append(json.dumps(session("sess-mixed", [0.25, float("nan"), None])))  # turn 1 rejected, 0 and 2 read
    path = tmp_path / "weights.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert "Infinity" in path.read_text() and "NaN" in path.read_text()

    def check(tagged):
        inter = sorted((x for t, x in tagged if t == "i"), key=lambda x: x.element_id)
        dead = [x for t, x in tagged if t == "d"]
        assert [(x.element_id, x.weight) for x in inter] == [
            ("sb-big/bot/0", 1e308), ("sess-big/bot/0", 1e308), ("sess-mixed/bot/0", 0.25), ("sess-mixed/bot/2", None),
        ]
        assert len(dead) == 2 * len(BAD) + 1, dead
        for d in dead:
            assert d.stage == "read"
            assert "weight" in d.reason, d.reason
        # the raw original record is kept (Python json reads its own extensions back)
        raws = [json.loads(d.raw) for d in dead]
        ids = sorted(r.get("session_id") or r["metadata"]["session_id"] for r in raws)
        assert ids == sorted([f"sess-{n}" for n in BAD] + [f"sb-{n}" for n in BAD] + ["sess-mixed"])
        for r in raws:
            w = r["conversation"][0]["weight"] if "conversation" in r else r["batch"]["weight"]
            assert not (math.isfinite(w) and w >= 0), r
        assert sorted(d.element_id for d in dead if d.element_id) == sorted(
            [f"sess-{n}/bot/0" for n in BAD] + ["sess-mixed/bot/1"]
        )

    with test_pipeline as p:
        out = p | ReadInteractions(str(path))
        assert_that(
            (out["interactions"] | "TagI" >> beam.Map(lambda x: ("i", x)), out["dead_letter"] | "TagD" >> beam.Map(lambda x: ("d", x)))
            | beam.Flatten(),
            check,
        )


def _check_outputs_are_finite(out_dir, doc):
    pq = pytest.importorskip("pyarrow.parquet")
    text = (out_dir / "results.json").read_text(encoding="utf-8")
    parsed = strict_json(text)  # raises on NaN / Infinity
    assert parsed == json.loads(json.dumps(doc))
    assert all(math.isfinite(v) for v in all_numbers(parsed))
    for line in iter_jsonl_lines(str(out_dir), "dead_letter"):
        strict_json(line)
    from fair_forge_beam.reports.results import session_records

    for name in doc["metrics"]:  # the session aggregates (typed Parquet shards): every number finite
        recs = session_records(pq.read_table(out_dir / "sessions" / name))
        assert recs and all(math.isfinite(v) for v in all_numbers(recs))
    for row in pq.read_table(out_dir / "results.parquet").to_pylist():
        for k, v in row.items():
            if isinstance(v, float):
                assert math.isfinite(v), (k, row)


@pytest.mark.parametrize("mode", ["frequentist", "bayesian"])
@pytest.mark.slow
def test_main_job_rejects_bad_weights_and_writes_only_finite_numbers(tmp_path, mode):
    from pipelines.audit import run

    lines = [json.dumps(session(f"bad-{n}", [w])) for n, w in BAD.items()]
    lines += [json.dumps(streamed(f"sb-{n}", w)) for n, w in BAD.items()]
    lines += [
        json.dumps(session("big-alone", [1e308], answer="I trust you.")),
        json.dumps(session("big-mixed", [1e308, None])),
        json.dumps(session("fine", [0.5, 0.5], answer=HIGH_ENTROPY)),
        json.dumps(session("plain", [None, None])),
    ]
    path = tmp_path / "weights.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    doc = run(for_its_mode(["--input", str(path), "--output", str(out), "--quiet", "--mode", mode, "--mc-samples", "300"]))

    s = doc["summary"]
    assert s["rejected_at_read"] == 2 * len(BAD)
    assert all("weight" in reason for reason in s["rejected_at_read_reasons"])
    assert s["interactions_read"] == 1 + 2 + 2 + 2
    assert s["metrics"]["humanity"]["scored"] == 7
    sessions = {r["session_id"]: r for r in read_sessions(str(out), "humanity")}
    assert sorted(sessions) == ["big-alone", "big-mixed", "fine", "plain"]
    assert sessions["big-alone"]["mean_entropy"]["mean"] == 0.0
    _check_outputs_are_finite(out, doc)


# ------------------------------------------------------------------ 1e308 accepted all the way (library bugs)
def test_weight_1e308_with_a_score_above_1_8_gives_a_finite_session_mean():
    """w·s overflows float64 when w = 1e308 and s > 1.797 (entropy goes up to 3 bits)."""
    st = WeightedMeanStats()
    st.add(2.5, 1e308)  # raises "cannot accumulate a non-finite value: inf" today
    assert weighted_mean_from_stats(st) == 2.5  # weights sum to 1e308, not 1 -> equal weights
    for mode in (FrequentistMode(), BayesianMode(mc_samples=200, rng_seed=1)):
        est, warning = session_mean_estimates(np.array([[2.5, 0.5], [1.0, 0.5]]), [1e308, None], [0, 1], mode)
        assert warning and "equal weights" in warning
        assert est[0].mean == pytest.approx(1.75) and math.isfinite(est[0].mean)


def test_two_weights_of_1e308_in_one_session_give_equal_weights():
    """Σw overflows (math.fsum raises OverflowError) for two weights of 1e308."""
    resolved, warning = resolve_weights([1e308, 1e308])
    assert resolved == [0.5, 0.5]
    assert warning and "equal weights" in warning
    for mode in (FrequentistMode(), BayesianMode(mc_samples=200, rng_seed=1)):
        est, _ = session_mean_estimates(np.array([[1.0], [0.0]]), [1e308, 1e308], [0, 1], mode)
        assert est[0].mean == pytest.approx(0.5) and math.isfinite(est[0].mean)


def test_main_job_with_1e308_weights_on_high_scores_completes_with_finite_output(tmp_path):
    from pipelines.audit import run

    lines = [
        json.dumps(session("big-high", [1e308], answer=HIGH_ENTROPY)),
        json.dumps(session("big-twice", [1e308, 1e308])),
        json.dumps(session("plain", [None])),
    ]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    doc = run(["--input", str(path), "--output", str(out), "--quiet"])
    assert doc["summary"]["rejected_at_read"] == 0
    assert doc["summary"]["metrics"]["humanity"]["scored"] == 4
    sessions = {r["session_id"]: r for r in read_sessions(str(out), "humanity")}
    assert sessions["big-high"]["mean_entropy"]["mean"] > 1.8
    _check_outputs_are_finite(out, doc)
