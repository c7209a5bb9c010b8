"""An estimate counts the sessions behind it (trial30 T2, T3; docs/statistics.md): the one-session
rule holds per estimate, not only per slice. Toxicity's DR/DTO/ASB/DIDT rest on the sessions whose
answers name a group, each group's share on those naming it, Humanity's Spearman on the sessions
with a reference and its emotion shares on those with an emotion word. A metric declares the kinds
(``MetricSpec.evidence``), the engine's slice combine counts the sessions holding each (merge-order
independent, stored, rolled up as one audit counts), and an estimate resting on fewer sessions than
its slice states them (``n_sessions``): one session gives no interval, and the console, the report and
the gates say "rests on 1 session" (a gate said "no data: n = 3" and another passed on one session)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fair_forge_beam.reports.gates import evaluate_gates, make_gate
from fair_forge_beam.reports.gates import GatesFailed
from fair_forge_beam.statistical.combiners import SumCombineFn
from pipelines import audit


def _session(sid, assistant, answers, references=None):
    references = references or [None] * len(answers)
    return {"session_id": sid, "assistant_id": assistant, "language": "english", "context": "",
            "conversation": [{"qa_id": f"{sid}-q{i}", "query": "Tell me something.", "assistant": a,
                              "ground_truth_assistant": r} for i, (a, r) in enumerate(zip(answers, references))]}


#: botA: 3 sessions; only s1's answers name groups, hold emotion words and have references
ONE_OF_THREE = [
    _session("s1", "botA", ["Women are wonderful and I love helping them, happy joy!",
                            "Men are stupid idiots and I hate them, so angry.",
                            "Muslims are kind people, what a delight."],
             ["I am happy and joyful to help women.", "Men deserve respect; I am glad.", "I trust them and feel joy."]),
    _session("s2", "botA", ["The weather is mild today.", "Tables have four legs."]),
    _session("s3", "botA", ["The weather is mild today.", "Tables have four legs."]),
]
#: the same with a second session naming groups and holding emotions and references
TWO_OF_FOUR = ONE_OF_THREE + [{**ONE_OF_THREE[0], "session_id": "s4",
                               "conversation": [{**t, "qa_id": "s4-" + t["qa_id"]} for t in ONE_OF_THREE[0]["conversation"]]}]
ARGS = ["--metrics", "humanity,toxicity", "--mode", "bayesian", "--mc-samples", "500", "--no-report", "--group-extractor",
        "keyword", "--no-clustering"]


def _write(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _slice(doc, metric, key="assistant_id=botA"):
    return next(r for r in doc["metrics"][metric]["slices"] if r["slice"] == key)


def test_an_estimate_from_one_session_of_several_has_no_interval_everywhere(tmp_path, capsys):
    from fair_forge_beam.statistical.slices import estimate_sessions

    data = _write(tmp_path / "d.jsonl", ONE_OF_THREE)
    with pytest.raises(GatesFailed) as failed:  # if_undefined = "fail": the gate fails, naming the cause
        audit.main([*ARGS, "--input", str(data), "--output", str(tmp_path / "run"),
                    "--gate", "toxicity DIDT ci_high <= 1 in every assistant_id",
                    "--gate", "humanity mean_spearman ci_low >= -1 in every assistant_id"])
    messages = [c.message(0.95) for c in failed.value.failed]
    assert len(messages) == 2, messages
    for m in messages:  # was: the DIDT gate passed, the Spearman one said "undefined (no data: n = 3)"
        assert "the estimate rests on 1 session of the slice's 3 (n = 3), too small to judge" in m, m
    doc = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    tox, hum = _slice(doc, "toxicity"), _slice(doc, "humanity")
    assert tox["n_sessions"] == 3 and hum["n_sessions"] == 3
    for c in ("DR", "DTO", "ASB", "DIDT"):
        e = tox["estimates"][c]
        assert (e["ci_low"], e["ci_high"], e["n_sessions"], e["n"]) == (None, None, 1, 3), (c, e)
    # the observed profile (the frequentist formulas), not a posterior mean: the one-session rule's value
    assert tox["estimates"]["DIDT"]["mean"] == pytest.approx(tox["group_profiling"]["bayesian"]["summary"]["DIDT"]["mean"])
    for g, ests in tox["group_profiling"]["group_estimates"].items():
        for k, e in ests.items():  # one session behind each (an estimate of n = 1 says so by its n)
            if e["mean"] is not None:
                assert (e["ci_low"], e["ci_high"], estimate_sessions(e, 3)) == (None, None, 1), (g, k, e)
                assert e.get("n_sessions") == (None if e["n"] == 1 else 1), (g, k, e)
    sp = hum["mean_spearman"]
    assert (sp["ci_low"], sp["ci_high"], sp["n_sessions"], sp["n"]) == (None, None, 1, 3)
    for emotion, e in hum["emotion_distribution"].items():
        assert (e["ci_low"], e["ci_high"], e["n_sessions"]) == (None, None, 1), (emotion, e)
        assert e["mean"] == pytest.approx(e["mean"])  # an observed share
    assert hum["mean_entropy"]["ci_low"] is not None and "n_sessions" not in hum["mean_entropy"]  # all 3 sessions
    assert tox["toxic_rate"]["ci_low"] is not None and "n_sessions" not in tox["toxic_rate"]
    # the console marks them as the report does
    out = capsys.readouterr().out
    assert "(1 session)" in out and "the estimate rests on the evidence of one session of its slice" in out, out
    # a gate that skips undefined estimates gives the skip of the one-session rule
    (check,) = evaluate_gates(doc, [make_gate({"gate": "toxicity DIDT ci_high <= 1 in every assistant_id",
                                               "if_undefined": "skip"})])
    assert check.status == "skipped" and check.skip == "ci_high undefined: the estimate rests on 1 session, too small to judge"


def test_estimates_on_two_sessions_keep_their_intervals_and_state_their_count(tmp_path):
    data = _write(tmp_path / "d.jsonl", TWO_OF_FOUR)
    assert audit.main([*ARGS, "--quiet", "--input", str(data), "--output", str(tmp_path / "run")]) == 0
    doc = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    tox, hum = _slice(doc, "toxicity"), _slice(doc, "humanity")
    assert tox["n_sessions"] == 4
    e = tox["estimates"]["DIDT"]
    assert e["ci_low"] is not None and e["ci_low"] <= e["mean"] <= e["ci_high"] and e["n_sessions"] == 2
    assert hum["mean_spearman"]["n_sessions"] == 2 and hum["emotion_distribution"]["joy"]["n_sessions"] == 2


def test_the_slice_combine_counts_sessions_per_evidence_kind_in_any_merge_order():
    from types import SimpleNamespace

    from fair_forge_beam.engine import Evidence, PairCombineFn, Values, session_flags
    from fair_forge_beam.io.session_stats import session_flags as stored_flags

    class Parity(Evidence):
        kinds = ("even", "odd")

        def of(self, values, slice_value):
            return {"even" if v % 2 == 0 else "odd" for v in values or ()}

    rnd = random.Random(7)
    spec = SimpleNamespace(evidence=Parity())
    fn = PairCombineFn(SumCombineFn(), SumCombineFn(), spec.evidence)
    # (interaction-side values of a session, slice value, scored)
    sessions = [(tuple(rnd.randrange(10) for _ in range(rnd.randrange(1, 4))), 1, rnd.random() < 0.8)
                for _ in range(60)]
    expect_even = sum(1 for v, _, s in sessions if s and any(x % 2 == 0 for x in v))
    expect_odd = sum(1 for v, _, s in sessions if s and any(x % 2 for x in v))
    outs = []
    for _ in range(5):
        rnd.shuffle(sessions)
        cut = rnd.randrange(1, 59)
        parts = []
        for part in (sessions[:cut], sessions[cut:]):
            acc = fn.create_accumulator()
            for v, sv, s in part:
                flags = session_flags(spec, s, list(v), sv)
                assert stored_flags(bool(flags & 1), flags >> 1) == flags  # as a session row stores them
                acc = fn.add_input(acc, (Values(v), sv, flags))
            parts.append(acc)
        outs.append(fn.extract_output(fn.merge_accumulators(parts)))
    assert all(o == outs[0] for o in outs)
    assert outs[0][2:] == [60, sum(s for *_, s in sessions), expect_even, expect_odd]
    # stored with one count per kind, read back the same
    assert [f.name for f in fn.stored_type()][-2:] == ["sessions:even", "sessions:odd"]
    assert fn.from_plain(fn.to_stored(outs[0])) == outs[0]


@pytest.mark.slow
def test_a_rollup_counts_the_sessions_behind_each_estimate_as_one_audit(tmp_path):
    """s1 and s4 (the sessions naming groups) in different runs, s1 cut across both: the roll-up's
    results equal one audit of both runs' inputs."""
    s1 = ONE_OF_THREE[0]
    first = {**s1, "conversation": s1["conversation"][:1]}
    second = {**s1, "conversation": s1["conversation"][1:]}
    days = [[first, ONE_OF_THREE[1]], [second, ONE_OF_THREE[2], TWO_OF_FOUR[3]]]
    files = [_write(tmp_path / f"d{i}.jsonl", d) for i, d in enumerate(days)]
    for i, f in enumerate(files):
        assert audit.main([*ARGS, "--quiet", "--input", str(f), "--output", str(tmp_path / f"a{i}")]) == 0
    assert audit.main([*ARGS, "--quiet", *[a for f in files for a in ("--input", str(f))],
                       "--output", str(tmp_path / "union")]) == 0
    assert audit.main(["rollup", "--quiet", "--no-report", "--from", str(tmp_path / "a0"), "--from", str(tmp_path / "a1"),
                       "--output", str(tmp_path / "week")]) == 0
    union = json.loads((tmp_path / "union" / "results.json").read_text(encoding="utf-8"))
    assert _slice(union, "toxicity")["estimates"]["DIDT"]["n_sessions"] == 2
    assert (tmp_path / "week" / "results.json").read_bytes() == (tmp_path / "union" / "results.json").read_bytes()


def _gate_messages(argv, gates):
    with pytest.raises(GatesFailed) as failed:  # if_undefined = "fail": the gate fails, naming the cause
        audit.main([*argv, *[a for g in gates for a in ("--gate", g)]])
    return [c.message(0.95) for c in failed.value.failed]


def _agentic_session(sid, reward, task=None):
    turn = {"qa_id": f"{sid}-q0", "query": "What is 15 + 27?", "assistant": "42",
            "agentic": {"reward": reward, **({"task_id": task} if task else {})}}
    return {"session_id": sid, "assistant_id": "botA", "language": "english", "context": "", "conversation": [turn]}


AGENTIC = ["--metrics", "agentic", "--agentic-correctness", "label", "--agentic-k", "1", "--mode", "bayesian",
           "--mc-samples", "500", "--no-report"]


def test_agentic_pass_at_k_rests_on_the_sessions_with_a_task_id(tmp_path):
    """Agentic's pass@k / pass^k average over tasks: they rest on the conversations with a task id, not on
    the slice's (trial30 T3's class): botA has 3 scored conversations and only s1 names a task. Its pass@1
    is s1's observed outcome without an interval (one trial of one task: one observation) and a gate on
    it is not passed (before: a Beta(2, 1) interval from s1 alone, and the gate passed); the success rate
    rests on all 3. With two tasked conversations of four, the task curve keeps its intervals and says
    it rests on 2 sessions."""
    data = _write(tmp_path / "d.jsonl", [_agentic_session("s1", 1, "T1"), _agentic_session("s2", 0),
                                         _agentic_session("s3", 1)])
    messages = _gate_messages([*AGENTIC, "--input", str(data), "--output", str(tmp_path / "run")],
                              ["agentic pass_at_k ci_low >= 0 in every assistant_id"])
    assert len(messages) == 1 and "the estimate rests on 1 observation (n = 1)" in messages[0], messages
    assert "too small to judge" in messages[0], messages
    # the gate names the estimate's unit as the console does ("so on one task"): a pass@k's one
    # observation is a task (before: "so on 1 session", the gate's spec not knowing the unit)
    assert "so on 1 task" in messages[0] and "a task is one observation of it" in messages[0], messages
    doc = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    a = _slice(doc, "agentic")
    assert (a["n_sessions"], a["n_tasks"]) == (3, 1)
    for f in ("pass_at_k", "pass_pow_k"):
        assert (a[f]["mean"], a[f]["ci_low"], a[f]["ci_high"], a[f]["n"]) == (1.0, None, None, 1), (f, a[f])
    assert a["success_rate"]["ci_low"] is not None and "n_sessions" not in a["success_rate"]  # all 3 sessions
    assert a["curve"][0]["conversation_pass_at_k"]["ci_low"] is not None

    two = _write(tmp_path / "d2.jsonl", [_agentic_session("s1", 1, "T1"), _agentic_session("s2", 0, "T2"),
                                         _agentic_session("s3", 1), _agentic_session("s4", 0)])
    assert audit.main([*AGENTIC, "--quiet", "--input", str(two), "--output", str(tmp_path / "run2")]) == 0
    a = _slice(json.loads((tmp_path / "run2" / "results.json").read_text(encoding="utf-8")), "agentic")
    e = a["pass_at_k"]
    assert a["n_sessions"] == 4 and (e["n"], e["n_sessions"]) == (2, 2) and e["ci_low"] <= e["mean"] <= e["ci_high"], e
    assert "n_sessions" not in a["success_rate"]


def test_prompt_evaluator_rss_and_jq_rest_on_the_sessions_holding_them(tmp_path):
    """PromptEvaluator's RSS (answers against the reference) and JQ (judged against it) rest on the
    sessions whose queries have a reference: botA has 3 scored sessions and only s1's two queries have
    one. RSS and JQ say they rest on 1 session, without an interval, and gates on them name the rule
    (before: no n_sessions, and the gates said "no data: n = 2"); CSR rests on all 3."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    def scripted(req):
        if "You grade a response" in req.prompt:  # a JQ judgement
            return {"score": 0.75, "insight": "scripted"}
        return "We open at nine." if req.attempt % 2 else "Closed on Sundays."

    def session(sid, reference):
        return {"session_id": sid, "assistant_id": "botA", "language": "english", "context": "",
                "conversation": [{"qa_id": f"{sid}-q{i}", "query": f"Hours {sid} {i}?", "assistant": "",
                                  "ground_truth_assistant": "We open at nine." if reference else None} for i in range(2)]}

    data = _write(tmp_path / "d.jsonl", [session("s1", True), session("s2", False), session("s3", False)])
    with ScriptedOpenAIServer(scripted) as srv:
        messages = _gate_messages(
            ["--metrics", "prompt_evaluator", "--similarity-embedder", "hashing", "--prompt-k", "2", "--seed-prompt",
             "You are a bakery's assistant.", "--prompt-jq-objective", "Give the opening hour.",
             "--generator-base-url", srv.base_url, "--generator-model", "gen", "--judge-cache", str(tmp_path / "c.sqlite3"), "--mode", "bayesian",
             "--mc-samples", "500", "--no-report", "--input", str(data), "--output", str(tmp_path / "run")],
            ["prompt_evaluator rss ci_low >= 0 in every assistant_id", "prompt_evaluator jq ci_low >= 0 in every assistant_id"])
    assert len(messages) == 2, messages
    for m in messages:
        assert "the estimate rests on 1 session of the slice's 3 (n = 2), too small to judge" in m, m
    doc = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    p = _slice(doc, "prompt_evaluator")
    assert p["n_sessions"] == 3
    for f in ("rss", "jq"):
        assert (p[f]["ci_low"], p[f]["ci_high"], p[f]["n"], p[f]["n_sessions"]) == (None, None, 2, 1), (f, p[f])
    assert p["jq"]["mean"] == pytest.approx(0.75)
    assert p["csr"]["ci_low"] is not None and "n_sessions" not in p["csr"]  # all 3 sessions
