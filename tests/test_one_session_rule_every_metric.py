"""Issue 28, hostile trial 2: the one-session rule holds for every estimate of every metric.

Bayesian Humanity gave a one-session slice a prior-smoothed ``emotion_distribution`` with
credible intervals (0.1111 for seven emotions, 0.2222 for sadness) where frequentist mode gives
the observed shares: its estimator called the distribution estimate directly, outside the rule's
helpers (Privacy's rates, RoleAdherence's slice means and Toxicity's DR/ASB/DTO/DIDT escaped the
same way). The engine now estimates every one-session slice of a distribution-mode run with its
modes observed (statistical/slices.py ``ObservedMode``): for every metric here, each estimate of
such a slice has no interval and equals the frequentist run's value."""
from __future__ import annotations

import json
import math

import pytest

from helpers import FNAPI, for_its_mode
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer


def _instance(schema, root=None):
    """Some valid instance of a JSON schema (a judge that answers every question in range)."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return _instance((root.get("$defs") or root.get("definitions"))[name], root)
    for k in ("anyOf", "oneOf"):
        if k in schema:
            return _instance(next(s for s in schema[k] if s.get("type") != "null"), root)
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    if t == "object":
        return {k: _instance(v, root) for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return [_instance(schema.get("items", {"type": "string"}), root) for _ in range(max(schema.get("minItems", 1), 1))]
    if t in ("number", "integer"):
        v = (schema.get("minimum", 0) + schema.get("maximum", 1)) * 0.7
        return int(v) if t == "integer" else v
    return True if t == "boolean" else "ok"


def _answer(req):
    if req.json_schema:
        return _instance(req.json_schema.get("schema", req.json_schema))
    return "unsafe\nS10" if "stupid" in req.prompt else "safe"


def _leaves(v, path=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _leaves(x, f"{path}[{i}]")
    else:
        yield path, v


SESSIONS = [
    {"session_id": "s1", "assistant_id": "solo", "language": "english", "context": "Tickets cost 30 EUR. Refunds within 14 days.",
     "chatbot_role": "a ticket desk", "conversation": [
         {"qa_id": "q1", "query": "How much is a ticket? mail me at ann@example.com",
          "assistant": "I am happy to help: 30 EUR, thank you for asking. Women are stupid though.",
          "ground_truth_assistant": "30 EUR, glad to help."},
         {"qa_id": "q2", "query": "Can I get a refund?", "assistant": "Sadly no, I fear it is too late and I am sorry.",
          "ground_truth_assistant": "Within 14 days, yes."},
         {"qa_id": "q3", "query": "Thanks!", "assistant": "You are welcome, what a joy. Call 555-123-4567.",
          "ground_truth_assistant": "You are welcome."}]},
] + [
    {"session_id": f"s{i}", "assistant_id": "pair", "language": "english", "context": "Tickets cost 30 EUR.",
     "chatbot_role": "a ticket desk", "conversation": [
         {"qa_id": "q1", "query": "A ticket?", "assistant": "Glad to help, it costs 30 EUR, men and women alike." if i == 2 else
          "Angry customers are stupid; it is 30 EUR.", "ground_truth_assistant": "30 EUR."},
         {"qa_id": "q2", "query": "Thanks", "assistant": "Happy to help, thank you." if i == 2 else "Fine.",
          "ground_truth_assistant": "You are welcome."}]} for i in (2, 3)
]

METRICS = "humanity,toxicity,privacy,context,conversational,bias"


def _run(tmp_path, mode, srv) -> dict:
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS), encoding="utf-8")
    doc = audit.run(for_its_mode(["--quiet", "--no-report", "--input", str(data), "--output", str(tmp_path / mode), "--metrics", METRICS,
                     "--mode", mode, "--mc-samples", "300", "--toxicity-scorer", "hurtlex", "--group-extractor", "keyword",
                     "--judge-base-url", srv.base_url, "--judge-model", "jm", "--judge-retries", "0",
                     "--guardian-base-url", srv.base_url, "--guardian-model", "gm", f"--runner={FNAPI}"]))
    return {m: {s["slice"]: s for s in doc["metrics"][m]["slices"]} for m in doc["metrics"]}


@pytest.mark.slow
def test_every_estimate_of_a_one_session_slice_is_observed_in_both_modes(tmp_path):
    with ScriptedOpenAIServer(_answer) as srv:
        bayes, freq = _run(tmp_path, "bayesian", srv), _run(tmp_path, "frequentist", srv)
    assert sorted(bayes) == sorted(METRICS.split(","))
    for metric in sorted(bayes):
        solo, pair = bayes[metric]["assistant_id=solo"], bayes[metric]["assistant_id=pair"]
        assert solo["n_sessions"] == 1 and pair["n_sessions"] == 2 and solo["mode"] == "distribution", metric
        observed = dict(_leaves(freq[metric]["assistant_id=solo"]))
        compared = 0
        for path, value in _leaves(solo):
            if path.endswith((".ci_low", ".ci_high")):
                assert value is None, (metric, path, value)
            if isinstance(value, float) and isinstance(observed.get(path), (int, float)) and not isinstance(observed[path], bool):
                assert math.isclose(value, observed[path], rel_tol=1e-9, abs_tol=1e-12), (metric, path, value, observed[path])
                compared += 1
        assert compared, metric
        if "resampling" in solo:  # the metrics that resample say why this slice does not
            assert solo["resampling"] is not None and "single session" in solo["resampling"], metric
        # the frequentist one-session slice: no interval either
        assert all(v is None for p, v in _leaves(freq[metric]["assistant_id=solo"]) if p.endswith((".ci_low", ".ci_high"))), metric
        # two sessions: the distribution with its intervals
        assert any(v is not None for p, v in _leaves(pair) if p.endswith(".ci_low")), metric
    # the hostile case: Humanity's emotion shares are the session's observed ones, not the prior's
    dist = bayes["humanity"]["assistant_id=solo"]["emotion_distribution"]
    assert dist == freq["humanity"]["assistant_id=solo"]["emotion_distribution"]
    assert any(e["mean"] == 0 for e in dist.values())  # an emotion it never showed has share 0, not a prior's 1/11
