"""trial37 T1's class: one estimand in both modes at the extremes, for every metric run here.

A Bayesian slice estimate must estimate the frequentist quantity: no unit (a query, a task, a
conversation, a session) is shrunk by a prior before the slice aggregates it. On data whose
frequentist value is an extreme (every query's answers in one cluster, every trial of every task
successful, every turn adherent, every judge score the same, no toxic answer, every frame its
reference, no personal data) over many units, each
slice's Bayesian interval holds the frequentist value or its mean is near it (a rate pooled over
many observations: Beta(1, 1)'s mean 1/(n + 2) next to 0). PromptEvaluator's csr read 0.8000
[0.8000, 0.8000] against 1.0 and Agentic's pass^3 0.5714 [0.53, 0.61] against 1.0 (each unit's
posterior mean averaged). Judge metrics talk to a scripted server on 127.0.0.1 that answers every
request with an instance of its JSON schema (true, the first enum value, 0.8 of a score's range).
"""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.reports.estimates import estimate_info, iter_estimates
from fair_forge_beam.schemas.metric_info import EstimateInfo
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
from pipelines import audit

pytestmark = pytest.mark.slow

#: BestOf is not here: its block needs several contestants; its strengths are one joint Bradley–Terry
#: fit and its leader's win rate a rate pooled over matches (no unit shrunk before an aggregate)
METRICS = ("humanity", "toxicity", "context", "conversational", "role_adherence", "agentic", "prompt_evaluator",
           "regulatory", "bias", "vision", "privacy")


NOT_HEADLINE = EstimateInfo("-", "-")


def _instance(schema, defs):
    if not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return _instance(defs.get(schema["$ref"].split("/")[-1], {}), defs)
    for k in ("anyOf", "oneOf", "allOf"):
        if k in schema:
            return _instance(([o for o in schema[k] if o.get("type") != "null"] or schema[k])[0], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    t = [x for x in t if x != "null"][0] if isinstance(t, list) else t
    if t == "object" or "properties" in schema:
        return {k: _instance(v, defs) for k, v in schema.get("properties", {}).items()}
    if t == "array":
        return [_instance(schema.get("items", {}), defs) for _ in range(max(1, schema.get("minItems", 1)))]
    if t == "boolean":
        return True
    if t in ("number", "integer"):
        lo = schema.get("minimum", 0)
        v = lo + 0.8 * (schema.get("maximum", lo + 1) - lo)
        return int(round(v)) if t == "integer" else round(v, 3)
    return "ok"


def _answer(req):
    if req.json_schema:
        return json.dumps(_instance(req.json_schema, req.json_schema.get("$defs", {})))
    if "unsafe" in req.prompt.lower():
        return "safe"
    return "I will add your number to our do-not-call list."


def _data(path):
    sessions = []
    for s in range(24):
        answer = "I am sorry for the calls. I will add your number to our do-not-call list today."
        turns = [{"qa_id": f"s{s}-q{t}", "query": f"Stop calling me at midnight, please (request {t}).", "assistant": answer,
                  "ground_truth_assistant": answer, "agentic": {"reward": 1, "task_id": f"T{s % 8}"}}
                 for t in range(2)]
        sessions.append({"session_id": f"s{s}", "assistant_id": f"bot{s % 2}", "language": "english",
                         "context": "Call-center customer service.", "chatbot_role": "the call center's polite assistant",
                         "conversation": turns})
    path.write_text(json.dumps(sessions), encoding="utf-8")
    return path


def test_every_bayesian_slice_estimate_holds_an_extreme_frequentist_value(tmp_path):
    data = _data(tmp_path / "data.json")
    docs = {}
    with ScriptedOpenAIServer(_answer) as srv:
        for mode in ("frequentist", "bayesian"):
            out = tmp_path / mode
            rc = audit.main([
                "--input", str(data), "--metrics", ",".join(METRICS), "--mode", mode, *(["--mc-samples", "400"] if mode == "bayesian" else []),
                "--judge-base-url", srv.base_url, "--judge-model", "m", "--guardian-base-url", srv.base_url,
                "--guardian-model", "g", "--guardian-kind", "llama_guard", "--regulatory-corpus", "callcenter",
                "--seed-prompt", "You are the bakery's assistant.", "--prompt-k", "3", "--similarity-embedder", "hashing",
                "--agentic-correctness", "label", "--agentic-k", "3", "--no-report", "--quiet", "--output", str(out)])
            assert rc == 0, mode
            docs[mode] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    checked, far = dict.fromkeys(METRICS, 0), []
    for metric in METRICS:
        f_slices = {r["slice"]: r for r in docs["frequentist"]["metrics"][metric]["slices"]}
        for b_rec in docs["bayesian"]["metrics"][metric]["slices"]:
            f_est = dict(iter_estimates(metric, f_slices[b_rec["slice"]]))
            for path, b in iter_estimates(metric, b_rec):
                if not (estimate_info(metric, path)[0] or NOT_HEADLINE).headline or path not in f_est or f_est[path]["mean"] is None or b["mean"] is None:
                    continue
                f = f_est[path]["mean"]
                checked[metric] += 1
                lo, hi = b["ci_low"], b["ci_high"]
                inside = lo is not None and lo - 1e-9 <= f <= hi + 1e-9
                near = abs(f - b["mean"]) <= max(0.05, (hi - lo) if lo is not None else 0.0)
                if not (inside or near):
                    far.append(f"{metric} {b_rec['slice']} {path}: frequentist {f:.4f}, Bayesian {b['mean']:.4f} [{lo}, {hi}]")
    assert all(checked.values()), checked  # every metric has a headline value in both modes
    assert not far, "\n".join(far)
