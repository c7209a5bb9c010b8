"""A slice's session count is the sessions in which its metric scored something, for every metric
(issue 28, hostile trial 8, H3): a guardian that failed on every answer of a session left Bias
slices counting it, and Agentic counted conversations with nothing scored, so ``coverage sessions
>= N`` passed on no evidence and the one-session rule did not see a slice that rests on one
session. The engine counts the scored sessions once (``engine.session_scored``) and hands the
count to every estimator; a roll-up stores each session's flag and counts as one audit of every
run's inputs does."""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

import helpers
from helpers import run_metric
from fair_forge_beam.components.guardian import LlamaGuard
from fair_forge_beam.metrics.bias import Bias
from fair_forge_beam.reports.gates import GatesFailed
from fair_forge_beam.statistical import BayesianMode
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
from pipelines import audit

ix = partial(helpers.ix, query="What do you think of them?", agentic={}, gta={}, logprobs={})


def _by_slice(records):
    return {r["slice"]: r for r in records}


def test_bias_slices_count_only_sessions_with_a_verdict(tmp_path):
    data = [ix("s1", "A", t, f"fine {t}") for t in range(2)] + [ix("s2", "A", t, f"[boom] {t}") for t in range(2)]
    data += [ix("s3", "B", 0, "fine"), ix("s3", "B", 1, "fine again"), ix("s4", "B", 0, "[boom]")]
    faults = [Fault("server_error", match="[boom]", retry_after=None)]
    with ScriptedOpenAIServer(lambda req: "safe", faults=faults) as srv:
        guardian = LlamaGuard("llama-guard", srv.base_url, api_key_env="FFB_TEST_UNSET_KEY", num_retries=0, client_retries=0,
                              cache_path=None)
        out = run_metric(Bias(guardian=guardian, attributes=["gender"], statistical_mode=BayesianMode(mc_samples=200)),
                         data, tmp_path / "run")
    slices = _by_slice(out["slices"])
    assert slices["overall"]["n_sessions"] == 2  # s2 and s4: every guardian call failed
    assert slices["overall"]["n_interactions"] == 4
    # each assistant's slice rests on one session: the one-session rule (the observed share, no interval)
    for key in ("assistant_id=A", "assistant_id=B"):
        (rate,) = slices[key]["attribute_rates"]
        assert slices[key]["n_sessions"] == 1 and (rate["rate"], rate["ci_low"], rate["ci_high"]) == (0.0, None, None), slices[key]
    (overall_rate,) = slices["overall"]["attribute_rates"]
    assert overall_rate["ci_low"] is not None and overall_rate["n_failed"] == 3  # the failures are still counted


def _conversation(sid, assistant, rewards):
    """An agentic conversation; a reward of ``None`` leaves that turn without its label (a dead letter)."""
    turns = []
    for t, r in enumerate(rewards):
        agentic = {"task_id": f"task-{sid}"}
        if r is not None:
            agentic["reward"] = r
        turns.append({"qa_id": f"{sid}-{t}", "query": f"question {t}", "assistant": "ok", "agentic": agentic})
    return {"session_id": sid, "assistant_id": assistant, "language": "english", "context": "", "conversation": turns}


#: the split conversation "cut" is labelled on day 2 only; "u1" and "u2" are never labelled
DAYS = {
    "d1": [_conversation("c1", "bot", [1.0, 1.0]), _conversation("u1", "bot", [None, None]),
           _conversation("cut", "other", [None])],
    "d2": [_conversation("c2", "other", [0.0, 1.0]), _conversation("c3", "other", [1.0]),
           _conversation("u2", "other", [None]), {**_conversation("cut", "other", [None, 1.0]),
                                                  "conversation": [_conversation("cut", "other", [None, 1.0])["conversation"][1]]}],
}
AGENTIC = ["--quiet", "--no-report", "--metrics", "agentic", "--agentic-correctness", "label", "--agentic-k", "1",
           "--mode", "bayesian"]


def _write(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _slices(run: Path) -> dict:
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    return _by_slice(doc["metrics"]["agentic"]["slices"])


def test_agentic_sessions_and_the_coverage_gate_count_scored_conversations(tmp_path):
    union = _write(tmp_path / "all.jsonl", DAYS["d1"] + DAYS["d2"])
    # c1, c2, c3 and cut are scored; u1 and u2 have nothing scored
    with pytest.raises(GatesFailed) as failed:  # SystemExit(3), after the outputs are written
        audit.main([*AGENTIC, "--input", str(union), "--output", str(tmp_path / "all"), "--gate", "coverage sessions >= 5"])
    assert failed.value.code == 3 and "sessions = 4 < 5" in failed.value.failed[0].message(0.95)  # 4 scored, not the 6 read
    whole = _slices(tmp_path / "all")
    assert whole["overall"]["n_sessions"] == 4
    assert (whole["assistant_id=bot"]["n_sessions"], whole["assistant_id=other"]["n_sessions"]) == (1, 3)
    gates = json.loads((tmp_path / "all" / "gates.json").read_text(encoding="utf-8"))
    assert [c["value"] for g in gates["gates"] for c in g["checks"]] == [4], gates


def _context_session(sid, assistant, answers, turns=None):
    turns = turns if turns is not None else range(len(answers))
    return {"session_id": sid, "assistant_id": assistant, "language": "english", "context": "A cooking assistant.",
            "conversation": [{"qa_id": f"{sid}-{t}", "query": f"question {t}", "assistant": a}
                             for t, a in zip(turns, answers)]}


def _context_judge(req):
    return {"score": 1.0, "insight": "ok"}


@pytest.mark.slow
def test_a_rollup_counts_scored_sessions_as_one_audit_of_every_runs_inputs(tmp_path, monkeypatch, short_beam_backoff):
    """Context against a scripted judge that fails on every answer marked ``[boom]``: "u1" is never
    scored, "cut" is unscored on day 1 and scored on day 2 (a session cut across runs: subtracted
    from the stored slices and merged), "c1" and "c2" are scored. The roll-up's results equal one
    audit of both days' inputs, whose slices count 3 sessions. (A failing batch is still tried
    1 + 3 times, but with Beam's waits between the attempts made short, ``short_beam_backoff``:
    they were about 58 of this test's 68 s wall and 10 CPU-s.)"""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    days = [[_context_session("c1", "bot", ["fine"]), _context_session("u1", "bot", ["[boom] a", "[boom] b"]),
             _context_session("cut", "other", ["[boom] c"])],
            [_context_session("c2", "other", ["fine too"]), _context_session("cut", "other", ["fine again"], turns=[1])]]
    faults = [Fault("server_error", match="[boom]", retry_after=None)]
    with ScriptedOpenAIServer(_context_judge, faults=faults) as srv:
        argv = ["--quiet", "--no-report", "--metrics", "context", "--mode", "bayesian", "--mc-samples", "200",
                "--judge-base-url", srv.base_url, "--judge-model", "judge-model", "--judge-retries", "0",
                "--judge-cache", str(tmp_path / "cache")]
        files = [_write(tmp_path / f"d{i}.jsonl", records) for i, records in enumerate(days)]
        for i, f in enumerate(files):
            audit.run([*argv, "--input", str(f), "--output", str(tmp_path / f"a{i}")])
        audit.run([*argv, *[a for f in files for a in ("--input", str(f))], "--output", str(tmp_path / "union")])
    union = json.loads((tmp_path / "union" / "results.json").read_text(encoding="utf-8"))
    slices = _by_slice(union["metrics"]["context"]["slices"])
    assert (slices["overall"]["n_sessions"], slices["assistant_id=bot"]["n_sessions"],
            slices["assistant_id=other"]["n_sessions"]) == (3, 1, 2)
    assert audit.main(["rollup", "--quiet", "--no-report", "--from", str(tmp_path / "a0"), "--from", str(tmp_path / "a1"),
                       "--output", str(tmp_path / "week")]) == 0
    assert (tmp_path / "week" / "results.json").read_bytes() == (tmp_path / "union" / "results.json").read_bytes()


def test_a_run_that_stored_no_statistics_is_refused_for_that_reason(tmp_path, capsys):
    """An Agentic run stores no statistics (its session values declare no stored type): the roll-up
    said the run's manifest "was changed since the run wrote it" (its counts had no session rows
    to be checked against)."""
    runs = []
    for day, records in DAYS.items():
        assert audit.main([*AGENTIC, "--input", str(_write(tmp_path / f"{day}.jsonl", records)),
                           "--output", str(tmp_path / day)]) == 0
        runs += ["--from", str(tmp_path / day)]
    with pytest.raises(SystemExit) as exc:
        audit.main(["rollup", "--quiet", "--no-report", *runs, "--output", str(tmp_path / "week")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "none of the run's metrics stored its statistics (agentic: its session values declare no " \
        "stored type: a metric stores them when it declares MetricSpec.session_value_type)" in err and "was changed" not in err, err


def _policy_session(sid, assistant, n):
    return {"session_id": sid, "assistant_id": assistant, "language": "english", "context": "",
            "conversation": [{"qa_id": f"{sid}-{t}", "query": f"Can I change my seat {t}?", "assistant": f"Sure, answer {t}."}
                             for t in range(n)]}


@pytest.mark.slow
def test_regulatory_sessions_count_only_sessions_with_evidence_for_the_compliance_rate(tmp_path, monkeypatch):
    """Regulatory's headline, the compliance rate, leaves IRRELEVANT interactions out (no policy chunk
    retrieved). A run in which no chunk is retrieved for any interaction (similarity threshold 1.0
    against the hashing embedder) checks every interaction and makes no judge call: its interactions
    are checked (IRRELEVANT is a verdict, the run is not empty), but no session holds evidence for the
    rate, so every slice counts 0 sessions and ``coverage sessions >= 1`` fails (trial 9 T3: it passed
    with the 3 sessions read, on no evidence). The summary says so too: 0 interactions scored, the 5
    in sessions the estimates leave out (trial35 T7: the scored count is what the estimate rests on)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    data = _write(tmp_path / "in.jsonl", [_policy_session("a", "bot", 2), _policy_session("b", "bot", 1),
                                          _policy_session("c", "other", 2)])
    with ScriptedOpenAIServer(lambda req: {"verdict": "SUPPORTS"}) as srv:
        argv = ["--quiet", "--no-report", "--metrics", "regulatory", "--regulatory-threshold", "1.0",
                "--regulatory-embedder", "hashing", "--judge-base-url", srv.base_url, "--judge-model", "judge-model",
                "--judge-cache", str(tmp_path / "cache"), "--input", str(data)]
        with pytest.raises(GatesFailed) as failed:
            audit.main([*argv, "--output", str(tmp_path / "gated"), "--gate", "coverage sessions >= 1"])
        assert audit.main([*argv, "--output", str(tmp_path / "plain")]) == 0  # no gate: published, exit 0
        assert srv.requests == []  # nothing retrieved: no check asked
    assert failed.value.code == 3 and "sessions = 0 < 1" in failed.value.failed[0].message(0.95)
    doc = json.loads((tmp_path / "plain" / "results.json").read_text(encoding="utf-8"))
    summary = doc["summary"]["metrics"]["regulatory"]
    assert (summary["interactions_scored"], summary["interactions_not_scored"], summary["interactions_left_out"]) == (0, 5, 5)
    slices = _by_slice(doc["metrics"]["regulatory"]["slices"])
    for key in ("overall", "assistant_id=bot", "assistant_id=other"):
        s = slices[key]
        assert (s["n_sessions"], s["n_irrelevant"], s["status"], s["compliance_rate"]["mean"]) == (
            0, s["n_interactions"], "no_relevant_interactions", None), s


def test_bias_attribute_rates_count_the_sessions_with_a_verdict_for_that_attribute(tmp_path):
    """A guardian that fails on one attribute of a session leaves that attribute's rate resting on
    fewer sessions than the slice: assistant A's two sessions both get gender verdicts, but only s1 gets
    race verdicts, so A's race rate is the observed share without an interval, resting on 1 session
    (trial30 T3's class, per attribute), while its gender rate keeps its interval."""
    data = [ix("s1", "A", t, f"fine {t}") for t in range(2)] + [ix("s2", "A", t, f"[norace] {t}") for t in range(2)]

    def guard(req):
        text = json.dumps(req.messages)
        return "garbled" if "[norace]" in text and "race" in text.replace("[norace]", "") else "safe"

    with ScriptedOpenAIServer(guard) as srv:
        guardian = LlamaGuard("llama-guard", srv.base_url, api_key_env="FFB_TEST_UNSET_KEY", num_retries=0, client_retries=0,
                              cache_path=None)
        out = run_metric(Bias(guardian=guardian, attributes=["gender", "race"], statistical_mode=BayesianMode(mc_samples=200)),
                         data, tmp_path / "run")
    a = _by_slice(out["slices"])["assistant_id=A"]
    assert a["n_sessions"] == 2
    rates = {r["protected_attribute"]: r for r in a["attribute_rates"]}
    assert rates["gender"]["n_samples"] == 4 and rates["gender"]["ci_low"] is not None
    assert rates["race"]["n_samples"] == 2 and rates["race"]["n_failed"] == 2
    assert (rates["race"]["rate"], rates["race"]["ci_low"], rates["race"]["ci_high"]) == (0.0, None, None), rates["race"]
    assert a["rates"]["race"]["n_sessions"] == 1 and "n_sessions" not in a["rates"]["gender"], a["rates"]


def test_a_rollup_counts_the_reused_sessions_its_metrics_scored_test_passes(tmp_path, monkeypatch):
    """trial35 T7's rule in a roll-up: a reused session (copied, not reduced again) adds its
    interactions to ``interactions_scored`` only when the metric's ``MetricSpec.scored`` test passes
    it, as the audit's count does; the others go to ``interactions_left_out``. A metric without a
    test counts every reused session; a merged session (reduced again) is the engine's to count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fair_forge_beam import rollup

    table = pa.table({"metric": ["m"] * 3, "session_id": ["s1", "s2", "s3"], "assistant_id": ["a", "a", "b"],
                      "n_interactions": [2, 3, 4], "n_compared": [1, 0, 5]})
    path = tmp_path / "part-0.parquet"
    pq.write_table(table, path)
    monkeypatch.setattr(rollup, "_parquet_files", lambda run, folder: [str(path)])
    merged = pa.array(["2:s3:b"])  # s3 is merged: reduced again by the engine, not copied
    assert rollup._copied_scored(["r"], ["m"], merged, {"m": lambda rec: rec["n_compared"] > 0}) == ({"m": 2}, {"m": 3})
    assert rollup._copied_scored(["r"], ["m"], merged) == ({"m": 5}, {})
