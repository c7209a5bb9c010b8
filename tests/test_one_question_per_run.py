"""One question, one outcome per run (issue 28, trial 30 T11's side finding).

Identical requests (the same answer-cache key) in flight at the same time shared one failure, but
once the first asker's failure was over, a later identical request asked again with all its
attempts: a guardian whose reply was always cut got 106-114 requests for 15 distinct prompts x 2
attempts (30), and with a flaky server which elements failed depended on arrival order and bundle
timing. A question that failed after its attempts is now not asked again in the run (with or
without a cache); a later run in the same process asks again. Against the real scripted server on
127.0.0.1, counting what it receives."""
from __future__ import annotations

import json

import pytest

from helpers import handler_for, run_judge
from fair_forge_beam.components.judge import COUNTER_NAMES, judge_request
from fair_forge_beam.testing.openai_server import Fault, Reply, ScriptedOpenAIServer

DISTINCT, COPIES, ATTEMPTS = 5, 8, 2  # 40 requests of 5 questions; 1 + invalid_answer_retries asks each


def _cut(req):
    """Every reply cut by the token limit: never an answer."""
    return Reply(content="unsafe", finish_reason="length")


def _requests():
    # the copies of each question spread over the run: p0 p1 ... p4 p0 p1 ... (each batch of 2 meets new copies)
    return [judge_request(f"k{i}", [("user", f"is this biased? prompt {i % DISTINCT}")], element_id=f"e{i}")
            for i in range(DISTINCT * COPIES)]


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_identical_failing_prompts_over_many_batches_are_asked_attempts_times_questions(tmp_path, cache):
    with ScriptedOpenAIServer(_cut) as srv:
        handler = handler_for(srv, tmp_path, invalid_answer_retries=ATTEMPTS - 1, max_concurrency=2, min_batch_size=2,
                              max_batch_size=2, **({} if cache else {"cache_path": None}))
        results, dead, c = run_judge(handler, _requests(), tmp_path / "run")
        sent = srv.count()
    assert sent == ATTEMPTS * DISTINCT, f"{sent} requests for {DISTINCT} questions x {ATTEMPTS} attempts"
    assert not results and len(dead) == DISTINCT * COPIES
    assert sorted(d["element_id"] for d in dead) == sorted(f"e{i}" for i in range(DISTINCT * COPIES))
    assert {d["reason"] for d in dead} == {dead[0]["reason"]} and "cut" in dead[0]["reason"]  # one outcome per question
    # COUNTER_NAMES' equations: every element a call, a cache hit or a shared failure; requests = calls + retries
    assert c["calls"] == DISTINCT and c["shared_failures"] == DISTINCT * (COPIES - 1) and c["cache_hits"] == 0
    assert c["calls"] + c["cache_hits"] + c["shared_failures"] == c["failures"] == DISTINCT * COPIES
    assert c["requests"] == sent == c["calls"] + c["retries"]


def test_a_later_run_in_the_same_process_asks_again(tmp_path):
    """The memory is the run's (the client of one pipeline's RunInference step): a second audit in
    the same process (tests, notebooks) asks its failed questions again — the server may be fixed."""
    with ScriptedOpenAIServer(_cut) as srv:
        handler = handler_for(srv, tmp_path, invalid_answer_retries=ATTEMPTS - 1, max_concurrency=2, min_batch_size=2,
                              max_batch_size=2)
        run_judge(handler, _requests(), tmp_path / "first")
        first = srv.count()
        _, dead, c = run_judge(handler, _requests(), tmp_path / "second")
        second = srv.count() - first
    assert first == second == ATTEMPTS * DISTINCT
    assert len(dead) == DISTINCT * COPIES and c["calls"] == DISTINCT


def test_sequential_batches_of_one_client_share_every_kind_of_final_failure(tmp_path):
    """Each kind of failure after its attempts, then the same question in a later batch of the same
    client: nothing sent, the same reason, its own ids, zero tokens. A transient failure is final
    only when its batch has no retry left (Beam's retry asks it again before that)."""
    def answer(req):
        if "[4xx]" in req.prompt:
            return Reply(content="no such model", status=404)
        if "[5xx]" in req.prompt:
            return Reply(content="down", status=503)
        return Reply(content="not json at all")

    with ScriptedOpenAIServer(answer) as srv:
        handler = handler_for(srv, tmp_path, output_schema="fair_forge_beam.schemas.context:ContextJudgeOutput",
                              invalid_answer_retries=1, num_retries=1)
        client = handler.create_client()
        try:
            def batch(tag):
                return [judge_request(f"{tag}{n}", [("user", f"judge {n}")], element_id=f"{tag}-{n}") for n in ("[4xx]", "[bad]", "[5xx]")]

            first = batch("a")
            with pytest.raises(Exception, match="failed transiently"):  # attempt 1 of 2: the 503 is not final yet
                handler.request(first, client)
            sent_1 = srv.count()
            out_a = handler.request(first, client)  # Beam's retry of the same batch: its last attempt
            sent_a = srv.count()
            out_b = handler.request(batch("b"), client)  # the same questions later in the run
            sent_b = srv.count()
        finally:
            client.close()
    assert sent_1 == 1 + 2 + 1 and sent_a == sent_1 + 1, (sent_1, sent_a)  # 404 once, invalid answer twice, 503 per attempt
    assert sent_b == sent_a, f"{sent_b - sent_a} requests for questions that already failed in this run"
    assert all(not r.ok for r in out_a + out_b)
    assert [r.error for r in out_b] == [r.error for r in out_a]
    assert "HTTP 404" in out_a[0].error and "invalid answer after 2" in out_a[1].error and "still failing after 2" in out_a[2].error
    assert [(r.key, r.element_id) for r in out_b] == [(f"b{n}", f"b-{n}") for n in ("[4xx]", "[bad]", "[5xx]")]
    assert all(r.prompt_tokens == r.completion_tokens == 0 for r in out_b)


def test_a_question_failing_transiently_gets_one_batchs_attempts_whichever_batches_ask_it(tmp_path):
    """With Beam's retries (``num_retries`` = 1: two attempts), a question that keeps failing
    transiently is asked twice in the run, whether by one batch or by two batches in turn; before,
    each batch holding it asked it twice, so the requests depended on how the run was batched."""
    with ScriptedOpenAIServer("ok", faults=[Fault("unavailable", retry_after=None)]) as srv:
        handler = handler_for(srv, tmp_path, num_retries=1)
        client = handler.create_client()
        try:
            a, b = [judge_request("a", [("user", "q")], element_id="ea")], [judge_request("b", [("user", "q")], element_id="eb")]
            with pytest.raises(Exception, match="failed transiently"):
                handler.request(a, client)  # batch a, attempt 1 of 2
            (out_b,) = handler.request(b, client)  # batch b: the question's second ask, its last
            (out_a,) = handler.request(a, client)  # batch a's retry: nothing sent
        finally:
            client.close()
        assert srv.count() == 2
    assert "HTTP 503" in out_b.error and "still failing after 2 batch attempt(s)" in out_b.error
    assert out_a.error == out_b.error and (out_a.key, out_a.element_id) == ("a", "ea")


def test_never_sent_and_too_large_failures_are_not_kept(tmp_path):
    """A prompt over the limit was never asked and a reply over the size limit says nothing of the
    question: each identical request meets them itself, as before (never cached, never kept)."""
    def answer(req):
        return Reply(content=json.dumps({"score": 1, "insight": "x"}), pad_to=4096)

    with ScriptedOpenAIServer(answer) as srv:
        handler = handler_for(srv, tmp_path, max_reply_bytes=1024, max_prompt_chars=20)
        client = handler.create_client()
        try:
            for _ in range(2):
                big, over = handler.request([judge_request("b", [("user", "short")]),
                                             judge_request("o", [("user", "x" * 50)])], client)
                assert "over the limit of 1,024 bytes" in big.error and "not sent" in over.error
        finally:
            client.close()
        assert srv.count() == 2
    assert len(client.failed_questions) == 0


def test_the_assistant_runner_does_not_ask_a_failed_turn_again(tmp_path):
    """The runner's client is an EndpointClient too: a batch's retry runs its sessions again, and a
    turn that failed (after the client's retries) is not asked again — the same reason, no request."""
    from fair_forge_beam.assistants.assistant import AssistantHandler

    with ScriptedOpenAIServer("hello", faults=[Fault("bad_request", match="broken")]) as srv:
        handler = AssistantHandler("openai", model="m", base_url=srv.base_url, api_key_env="FFB_TEST_UNSET_KEY",
                                   client_retries=0, num_retries=0)
        client = handler.create_client()
        session = json.dumps({"session_id": "s1", "assistant_id": "a", "language": "english", "context": "",
                              "conversation": [{"qa_id": "q0", "query": "broken question"}, {"qa_id": "q1", "query": "fine"}]})
        try:
            first = client.run_session(session)
            sent = srv.count()
            again = client.run_session(session)  # what Beam's retry of its batch does
        finally:
            client.close()
        resent = srv.count() - sent
    assert sent == 2 and resent == 1, (sent, resent)  # the failed turn: not asked again; the answered one (no cache): again
    assert [d["reason"] for d in again["dead_letters"]] == [d["reason"] for d in first["dead_letters"]]
    assert again["counts"]["requests"] == 1 and again["counts"]["failures"] == 1


def test_a_direct_guardian_call_asks_again_after_an_earlier_calls_failure(tmp_path):
    """Direct use (``is_biased``) keeps its client until ``close()``: each call is its own question."""
    from fair_forge_beam.components.guardian import GuardianError, LlamaGuard

    with ScriptedOpenAIServer(_cut) as srv:
        g = LlamaGuard("lg", srv.base_url, cache_path=None, api_key_env="FFB_TEST_UNSET_KEY", client_retries=0, num_retries=0)
        try:
            for _ in range(2):
                with pytest.raises(GuardianError, match="cut"):
                    g.is_biased("q", "a", "gender")
        finally:
            g.close()
        assert srv.count() == 2 * 2  # 1 + invalid_answer_retries asks per call


def test_the_memory_is_bounded_least_recently_used_first():
    from fair_forge_beam.components.replies import FailedQuestions

    m = FailedQuestions(max_entries=3, max_chars=100)
    for k in "abc":
        m.put(k, k.upper(), 10)
    assert m.get("a") == "A"  # a used: b is now the oldest
    m.put("d", "D", 10)
    assert [m.get(k) for k in "abcd"] == ["A", None, "C", "D"] and len(m) == 3
    m.put("e", "E", 95)  # the characters' bound: the oldest go until it fits
    assert [m.get(k) for k in "acde"] == [None, None, None, "E"]
    m.put("f", "F", 101)  # larger than the bound on its own: never kept
    assert m.get("f") is None and m.get("e") == "E"
    m.put("e", "other", 1)  # the first outcome of a question stays
    assert m.get("e") == "E"
    # transient asks of a question: counted until it is answered (no cache: asked again later) or final
    assert [m.failed_once_more("t") for _ in range(2)] == [1, 2]
    m.answered("t")
    assert m.failed_once_more("t") == 1
    m.put("t", "T", 1)
    assert m.failed_once_more("t") == 1 and m.get("t") == "T"


def test_counter_names_hold_shared_failures():
    assert "shared_failures" in COUNTER_NAMES
