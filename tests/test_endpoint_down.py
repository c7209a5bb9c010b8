"""A dead endpoint costs a run ``--endpoint-down-after`` batches, not every batch (trial34 T2): after
that many batches in a row failed every request after all retries, the run sends it nothing more and
dead-letters the rest at once, saying the endpoint is down and why. A flaky endpoint (some requests
answered) never trips it. Real HTTP on 127.0.0.1 (the scripted server), FnApiRunner."""
from __future__ import annotations

import pytest

from helpers import run_judge
from fair_forge_beam.components.judge import OpenAIJudgeHandler, judge_request
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

N, BATCH = 40, 4


def _requests(texts):
    return [judge_request(f"k{i}", [("system", "Judge."), ("user", t)], element_id=f"s/a/{i}") for i, t in enumerate(texts)]


def _handler(srv, **kw):
    # free-text answers, no cache, batches of 4, no Beam retry (its back-off starts at about 5 s)
    return OpenAIJudgeHandler("judge-model", srv.base_url, cache_path=None, api_key_env="FFB_TEST_UNSET_KEY",
                              request_timeout=0.3, client_retries=0, num_retries=0, max_concurrency=BATCH,
                              min_batch_size=BATCH, max_batch_size=BATCH, **kw)


@pytest.mark.parametrize("fault, why", [(Fault("server_error", retry_after=None), "HTTP 500"),
                                        (Fault("slow", delay=3.0), "timeout after 0.3 s")])
def test_a_dead_endpoint_costs_at_most_threshold_batches(tmp_path, fault, why):
    with ScriptedOpenAIServer("fine", faults=[fault]) as srv:
        # the default threshold, --endpoint-down-after's: 2 batches
        results, dead, counters = run_judge(_handler(srv), _requests([f"q{i}" for i in range(N)]),
                                            tmp_path)
        sent = srv.count()
    assert results == [] and len(dead) == N  # every request is a dead letter, none lost
    assert sent <= 2 * BATCH, f"{sent} requests to a dead endpoint, threshold 2 batches of {BATCH}"  # was 40
    down = [d for d in dead if "endpoint down" in d["reason"]]
    assert len(down) >= N - 2 * BATCH
    assert all("judge endpoint down: 2 batches in a row failed every request after all retries" in d["reason"]
               and why in d["reason"] and "--endpoint-down-after 2" in d["reason"] for d in down)
    assert counters["requests"] == sent and counters["failures"] == N


def test_a_flaky_endpoint_is_not_tripped(tmp_path):
    # every other question fails (HTTP 500): every batch of 4 consecutive requests has answers
    texts = [f"q{i} {'[boom]' if i % 2 else ''}" for i in range(N)]
    with ScriptedOpenAIServer("fine", faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        results, dead, _ = run_judge(_handler(srv, endpoint_down_after=1), _requests(texts), tmp_path)
        sent = srv.count()
    assert sent == N  # every request was sent
    assert sorted(r["key"] for r in results) == sorted(f"k{i}" for i in range(0, N, 2))
    assert len(dead) == N // 2 and all("HTTP 500" in d["reason"] and "endpoint down" not in d["reason"] for d in dead)


def test_health_counts_dead_batches_in_a_row_only():
    from fair_forge_beam.components.replies import EndpointHealth

    h = EndpointHealth(2, "judge")
    h.batch_ended(True, False, "HTTP 500: boom")
    h.batch_ended(True, True, "HTTP 500: boom")  # one reply: the endpoint is up, the count starts again
    h.batch_ended(False, False, None)  # nothing sent (cache hits): no news
    h.batch_ended(True, False, "timeout after 1 s")
    assert h.reason() is None
    h.batch_ended(True, False, "timeout after 2 s")
    assert h.reason().startswith("judge endpoint down: 2 batches in a row") and "timeout after 2 s" in h.reason()
    never = EndpointHealth(0)
    for _ in range(10):
        never.batch_ended(True, False, "HTTP 500")
    assert never.reason() is None


@pytest.mark.parametrize("kind", ["openai", "http"])
def test_a_dead_assistant_endpoint_costs_at_most_threshold_batches(tmp_path, capsys, kind):
    """The assistant runner goes through the same path: 64 one-turn sessions, batches of 4 to 16
    (--assistant-concurrency 4), an endpoint answering 500: at most 2 batches of 16 are sent (was 64)."""
    import json

    from pipelines import run_assistant

    n = 64
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps({"session_id": f"s{i}", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": "q1", "query": f"question {i}", "assistant": ""}]}) + "\n" for i in range(n)), encoding="utf-8")
    with ScriptedOpenAIServer("fine", faults=[Fault("server_error", retry_after=None)]) as srv:
        how = (["--assistant-model", "bot", "--assistant-url", srv.base_url] if kind == "openai" else
               ["--request-template", '{"messages": {{ messages | tojson }}}', "--response-path", "choices.0.message.content",
                "--assistant-url", srv.base_url + "/chat/completions"])
        code = run_assistant.main(["--input", str(data), "--assistant-kind", kind, *how, "--assistant-retries", "0",
                                   "--assistant-concurrency", "4", "--output", str(tmp_path / "out")])
        sent = srv.count()
    assert code != 0 and sent <= 2 * 16, f"{sent} requests to a dead assistant endpoint"
    # the empty-run line counts the requests sent, not the turns (it said "64 turn(s) sent")
    assert f"no turn was answered ({n} turn(s), {sent} request(s) sent, {n} failed" in capsys.readouterr().err
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("out.staging-")]  # an empty run's, kept (trial48 B1)
    dead = [json.loads(line) for line in (stage / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()]
    down = [d for d in dead if "assistant endpoint down: 2 batches in a row" in d["reason"]]
    assert len(dead) == n and len(down) >= n - sent and all("HTTP 500" in d["reason"] for d in down)
