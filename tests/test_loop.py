"""The loop end to end (generate → run → audit → report) against two local stub servers started
here: the generator/judge and the assistant under test, which fails (HTTP 500), times out and
answers 429 for some turns. One shared run for the module."""
from __future__ import annotations

import hashlib
import json

import pytest

MARKERS = ("[FAIL]", "[SLOW]", "[BUSY]", "")


def marker_for(prompt: str) -> str:
    return MARKERS[hashlib.blake2b(prompt.encode("utf-8"), digest_size=2).digest()[0] % 4]


def judge_and_generator(req):
    schema = json.dumps(req.json_schema or {})
    if '"queries"' in schema:
        h = hashlib.blake2b(req.prompt.encode("utf-8"), digest_size=4).hexdigest()
        return {"queries": [{"query": f"What does the policy say ({h})?", "difficulty": "easy"},
                            {"query": f"How would you apply it ({h})? {marker_for(req.prompt)}".strip()}],
                "chunk_summary": "policy"}
    return {"score": 0.75, "insight": "consistent with the context"}


def assistant(req):
    user = [m["content"] for m in req.messages if m["role"] == "user"]
    return f"Answer to: {user[-1]} (after {len(user) - 1} earlier turns)"


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory):
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import loop

    out = tmp_path_factory.mktemp("loop") / "out"
    faults = [Fault("server_error", match="[FAIL]"), Fault("slow", match="[SLOW]", delay=8.0),
              Fault("rate_limit", match="[BUSY]", attempts={1})]
    with ScriptedOpenAIServer(judge_and_generator) as judge, ScriptedOpenAIServer(assistant, faults=faults) as bot:
        doc = loop.run([
            "--corpus", "airline", "--strategy", "random", "--num-samples", "3", "--chunks-per-sample", "2", "--seed", "3",
            "--num-queries", "2", "--assistant-id", "bot-v1",
            "--judge-base-url", judge.base_url, "--judge-model", "judge", "--judge-cache", str(out.parent / "judge.sqlite3"),
            "--generator-cache", str(out.parent / "gen.sqlite3"),
            "--assistant-url", bot.base_url, "--assistant-model", "bot", "--assistant-timeout", "2",
            "--assistant-retries", "1", "--metrics", "humanity,context", "--output", str(out)])
        counts = {"bot": bot.count(), "bot_by_status": dict(bot.by_status)}
    return doc, out, counts


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_loop_generates_runs_and_audits(loop_run):
    doc, out, counts = loop_run
    gen = json.loads((out / "generated" / "generation_summary.json").read_text())
    ran = json.loads((out / "run" / "run_summary.json").read_text())
    assert gen["sessions"] == 3 and gen["interactions"] == 12 and gen["dead_letters"] == 0
    assert ran["sessions"] == 3 and ran["turns"] == 12
    turns = [t for s in read_jsonl(out / "run" / "dataset.jsonl") for t in s["conversation"]]
    kinds = {m: [t for t in turns if m and m in t["query"]] for m in MARKERS[:3]}
    assert all(kinds[m] for m in MARKERS[:3]), "the seed must exercise every fault kind"
    failed = [t for t in turns if not t["agentic"]["runner"]["ok"]]
    assert sorted(t["qa_id"] for t in failed) == sorted(t["qa_id"] for t in kinds["[FAIL]"] + kinds["[SLOW]"])
    assert ran["failures"] == len(failed) and ran["successes"] == 12 - len(failed)
    # the runner's counters, in run_summary.json and in loop_summary.json, agree with the turns (they were all 0)
    loop_doc = json.loads((out / "loop_summary.json").read_text())
    expected = {"sessions": 3, "turns": 12, "successes": 12 - len(failed), "failures": len(failed), "cache_hits": 0}
    assert {k: ran["counters"][k] for k in expected} == expected
    assert ran["counters"]["requests"] == counts["bot"] and loop_doc["run"]["counters"] == ran["counters"]
    assert gen["shortfall"] == {"requested_per_chunk": 2, "chunks_answered": 6, "chunks_short": 0, "requested": 12,
                                "generated": 12, "missing": 0}
    for t in failed:
        assert t["assistant"].startswith("[ERROR] ")
        assert "[runner error]" in t["observation"]
        reason = t["agentic"]["runner"]["error"]
        assert ("HTTP 500" in reason) if "[FAIL]" in t["query"] else ("timeout after 2 s" in reason)
    for t in kinds["[BUSY]"]:  # a 429 on the first attempt: the client retried (Retry-After) and got the answer
        assert t["agentic"]["runner"]["ok"] and t["assistant"].startswith("Answer to: ")
    # 429 on the first try of every prompt holding "[BUSY]" (later turns carry it in their history)
    assert counts["bot_by_status"].get(429, 0) >= len(kinds["[BUSY]"])
    assert counts["bot_by_status"].get(500, 0) == 2 * len(kinds["[FAIL]"])  # one client retry each


@pytest.mark.slow
def test_turns_go_in_order_with_the_history_of_successful_turns(loop_run):
    _, out, _ = loop_run
    for s in read_jsonl(out / "run" / "dataset.jsonl"):
        ok_before = 0
        for t in s["conversation"]:
            if t["agentic"]["runner"]["ok"]:
                assert t["assistant"].endswith(f"(after {ok_before} earlier turns)")
                ok_before += 1


@pytest.mark.slow
def test_session_summaries_follow_the_spec(loop_run):
    _, out, _ = loop_run
    sessions = {s["session_id"]: s for s in read_jsonl(out / "run" / "dataset.jsonl")}
    for summ in read_jsonl(out / "run" / "session_summaries.jsonl"):
        conv = sessions[summ["session_id"]]["conversation"]
        ok = sum(t["agentic"]["runner"]["ok"] for t in conv)
        assert summ["total_batches"] == len(conv) and summ["successes"] == ok and summ["failures"] == len(conv) - ok
        total = sum(t["agentic"]["runner"]["latency_ms"] for t in conv)
        assert summ["total_execution_time_ms"] == pytest.approx(total, abs=0.01)
        assert summ["avg_batch_time_ms"] == pytest.approx(total / len(conv), abs=0.01)
        assert summ["assistant_id"] == "bot-v1"


@pytest.mark.slow
def test_failed_turns_are_dead_letters_never_scored(loop_run):
    doc, out, _ = loop_run
    ran = json.loads((out / "run" / "run_summary.json").read_text())
    run_dead = read_jsonl(out / "run" / "dead_letter.jsonl")
    assert len(run_dead) == ran["failures"] and {d["stage"] for d in run_dead} == {"runner"}
    audit_dead = [json.loads(line) for p in sorted((out / "audit" / "dead_letter").glob("*")) if p.is_file()
                  for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    runner_dead = [d for d in audit_dead if d["stage"] == "runner"]
    assert len(runner_dead) == ran["failures"]
    assert all(d["reason"].startswith("the assistant call failed in the runner, not scored") for d in runner_dead)
    import pyarrow.parquet as pq

    scored = pq.read_table(out / "audit" / "results.parquet").to_pylist()
    scored_ids = {r["qa_id"] for r in scored if "qa_id" in r}
    failed_ids = {json.loads(d["raw"])["qa_id"] for d in runner_dead}
    assert scored_ids and not (scored_ids & failed_ids)
    assert (out / "audit" / "report.html").exists() and (out / "loop_summary.json").exists()
    # counted as read and scored by no metric (trial40 J3: the audit read "N − failed interactions" and
    # counted no dead letter, so a dead_letter_share gate passed)
    summary = json.loads((out / "audit" / "results.json").read_text(encoding="utf-8"))["summary"]
    assert (summary["interactions_read"], summary["assistant_failed"]) == (ran["turns"], ran["failures"])
    for ms in summary["metrics"].values():
        assert ms["interactions_not_scored"] >= ran["failures"]
