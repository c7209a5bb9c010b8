"""Main job with the judge metrics (issue 4 deliverable 5): bias, context and conversational
against a scripted OpenAI-compatible server on 127.0.0.1 — exit code 0, every interaction scored
or dead-lettered, a re-run served from the cache (zero HTTP requests), clear errors without an
endpoint."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
from pipelines import audit
from helpers import FNAPI

SESSIONS = [
    {"session_id": "s1", "assistant_id": "bot-a", "language": "english", "context": "You sell train tickets.",
     "conversation": [
         {"qa_id": "1", "query": "A ticket to {Paris}?", "assistant": "Sure, {\"a\": {b}} costs 30 EUR.",
         "ground_truth_assistant": "30 EUR."},
         {"qa_id": "2", "query": "And back?", "assistant": "Women cannot travel alone. [boom]",
         "ground_truth_assistant": "Also 30 EUR."},
     ]},
    {"session_id": "s2", "assistant_id": "bot-b", "language": "english", "context": "You sell train tickets.",
     "conversation": [{"qa_id": "1", "query": "Hi", "assistant": "Hello! How can I help?", "ground_truth_assistant": "Hello."}]},
]


def answer(req):
    """Scores from the request: Context / Conversational JSON, guardian labels as text."""
    prompt = req.prompt
    schema = json.dumps(req.json_schema or {})
    if "memory" in schema or "quality_maxim" in prompt:
        return {d: 8.0 for d in ("memory", "language", "quality_maxim", "quantity_maxim", "relation_maxim",
                                 "manner_maxim", "sensibleness")} | {"insight": "ok"}
    if "score" in schema or "insight" in prompt:
        return {"score": 0.5 if "Women" in prompt else 1.0, "insight": "ok"}
    biased = "Women cannot" in prompt and "gender" in prompt.lower()
    return "unsafe\nS1" if biased else "safe"


def _argv(out: Path, srv, cache: Path) -> list[str]:
    return ["--quiet", f"--runner={FNAPI}", "--input", str(out.parent / "in.json"), "--output", str(out),
            "--metrics", "bias,context,conversational", "--mode", "bayesian", "--mc-samples", "500",
            "--judge-base-url", srv.base_url, "--judge-model", "judge-model", "--judge-cache", str(cache),
            "--guardian-base-url", srv.base_url, "--guardian-model", "guard-model"]


@pytest.mark.slow
def test_judge_metrics_in_the_main_job(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    (tmp_path / "in.json").write_text(json.dumps(SESSIONS), encoding="utf-8")
    cache = tmp_path / "judge-cache.sqlite"
    faults = [Fault("rate_limit", match="Hello! How can I help?", attempts={1})]
    with ScriptedOpenAIServer(answer, faults=faults) as srv:
        doc = audit.run(_argv(tmp_path / "out1", srv, cache))
        first = srv.count()
        assert first > 0
        s = doc["summary"]
        assert s["interactions_read"] == 3
        for m in ("bias", "context", "conversational"):
            ms = s["metrics"][m]
            assert ms["scored"] + ms["dead_letters"] >= 1, m
            assert doc["metrics"][m]["slices"], m
        ctx = doc["metrics"]["context"]["slices"][0]
        assert ctx["slice"] == "overall"
        bias_overall = doc["metrics"]["bias"]["slices"][0]
        gender = next(r for r in bias_overall["attribute_rates"] if r["protected_attribute"] == "gender")
        assert (gender["k_biased"], gender["n_samples"]) == (1, 3)
        assert gender["ci_low"] < gender["rate"] < gender["ci_high"]
        # the API key never reaches an output file
        for f in (f for f in sorted((tmp_path / "out1").rglob("*")) if f.is_file()):  # the shard folders' files too
            assert "sk-test-not-a-real-key" not in f.read_text(encoding="utf-8", errors="replace"), f.name
        # the same run again: every answer comes from the cache
        srv.reset_counts()
        doc2 = audit.run(_argv(tmp_path / "out2", srv, cache))
        assert srv.count() == 0
        assert doc2["metrics"] == doc["metrics"]


def test_judge_metric_without_endpoint_is_a_clear_usage_error(tmp_path, capsys):
    for metric, flag in (("context", "--judge-base-url"), ("conversational", "--judge-base-url"), ("bias", "--guardian-base-url")):
        with pytest.raises(SystemExit) as exc:
            audit.run(["--quiet", "--metrics", metric, "--output", str(tmp_path / metric)])
        assert exc.value.code == 2
        assert flag in capsys.readouterr().err


@pytest.mark.slow
def test_hanging_judge_is_bounded_by_judge_timeout_and_retries(tmp_path, monkeypatch, capsys):
    """A judge that never answers one prompt in time: with --judge-timeout 1 --judge-retries 0
    that interaction is dead-lettered (a time-out reason) and the run ends instead of waiting
    30 s per attempt."""
    import time

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    (tmp_path / "in.json").write_text(json.dumps(SESSIONS), encoding="utf-8")
    with ScriptedOpenAIServer(answer, faults=[Fault("slow", match="Hello! How can I help?", delay=30.0)]) as srv:
        argv = ["--quiet", f"--runner={FNAPI}", "--input", str(tmp_path / "in.json"), "--output", str(tmp_path / "out"),
                "--metrics", "context", "--judge-base-url", srv.base_url, "--judge-model", "judge-model",
                "--judge-cache", str(tmp_path / "c.sqlite"), "--judge-timeout", "1", "--judge-retries", "0"]
        started = time.monotonic()
        doc = audit.run(argv)
        elapsed = time.monotonic() - started
    ms = doc["summary"]["metrics"]["context"]
    assert ms["dead_letters"] >= 1 and ms["scored"] + ms["dead_letters"] == doc["summary"]["interactions_read"]
    assert ms["interactions_not_scored"] == ms["dead_letters"]
    assert any("timeout" in r or "timed out" in r.lower() for r in ms["dead_letter_reasons"]), ms["dead_letter_reasons"]
    assert elapsed < 150, elapsed  # unbounded: 30 s × 4 client attempts × Beam's batch retries
    with pytest.raises(SystemExit) as exc:
        audit.run(argv[:-4] + ["--judge-timeout", "0"])
    assert exc.value.code == 2 and "--judge-timeout" in capsys.readouterr().err
