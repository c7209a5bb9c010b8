"""Issue 29 (trial29 T4-T7): one reader of a chat reply, ``replies.read_chat_reply``, for every
caller — the judge handler (judge, guardian, generator, optimizer, BestOf) and the assistant under
test — with the same reason for the same reply. Before, the judge read ``refusal`` only when the
content was empty (a verdict beside a refusal was scored, and so was a content list holding a
refusal part), a ``finish_reason`` list raised "unhashable type: 'list'" (the assistant's whole
batch failed), a usage count of 10**30 overflowed the judge's counter and dead-lettered every
verdict of the batch, and the assistant said "answer content is not text" where the audit said
"model refused: …"."""
from __future__ import annotations

import json

import pytest

from helpers import judged_through, run_judge
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.components.replies import NotAnAnswer, read_chat_reply, usage_count
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

OWN = {"score": 0.7, "insight": "fine"}
V = json.dumps(OWN)


def _body(content=V, finish="stop", msg=None, usage=None, choice=None, **top) -> bytes:
    message = {"role": "assistant", "content": content, **(msg or {})}
    doc = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
           "choices": [choice if choice is not None else {"index": 0, "message": message, "finish_reason": finish}], **top}
    if usage is not None:
        doc["usage"] = usage
    return json.dumps(doc).encode()


#: hostile replies that are no whole answer, and the reason every caller gives
NOT_ANSWERS = {
    "REFUSED-BESIDE-VERDICT": (_body(msg={"refusal": "I can't help with that"}), "model refused: I can't help with that"),
    "REFUSED-NULL-CONTENT": (_body(None, msg={"refusal": "I can't help"}), "model refused: I can't help"),
    "REFUSAL-PART": (_body([{"type": "refusal", "refusal": "no"}, {"type": "text", "text": V}]), "model refused: no"),
    "FINISH-LIST": (_body(finish=["stop"]), "finish_reason is not text: ['stop']"),
    "FINISH-OBJECT": (_body(finish={"why": "stop"}), "finish_reason is not text: {'why': 'stop'}"),
    "FINISH-NUMBER": (_body(finish=1e300), "finish_reason is not text: 1e+300"),
    "CHOICES-TEXT": (json.dumps({"id": "c", "choices": "stop"}).encode(), "response's choices is text, not a list"),
    "CHOICE-NUMBER": (_body(choice=5), "response's choice is a number, not an object"),
    "MESSAGE-LIST": (_body(choice={"index": 0, "message": [V], "finish_reason": "stop"}), "response's message is a list, not an object"),
    "IMAGE-PART": (_body([{"type": "image_url", "image_url": {"url": "http://x"}}, {"type": "text", "text": V}]),
                   "answer content part 1 is of type image_url, not text"),
    "CONTENT-OBJECT": (_body({"type": "text", "text": V}), "answer content is an object, not text"),
    "CONTENT-NUMBER": (_body(0.7), "answer content is a number, not text"),
    "TOOL-CALL": (_body(msg={"tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": V}}]}),
                  "the reply calls a tool (tool_calls), and none is offered: not an answer"),
    "ERROR-BESIDE": (_body(error={"message": "partial failure"}), "the reply is an error: partial failure"),
    "ROLE-USER": (_body(msg={"role": "user"}), "the reply's message is from role 'user', not the assistant's"),
    "CONTENT-FILTERED": (_body(choice={"index": 0, "message": {"role": "assistant", "content": V}, "finish_reason": "stop",
                                       "content_filter_results": {"hate": {"filtered": True, "severity": "high"},
                                                                  "violence": {"filtered": False}}}),
                         "content filtered by the provider (hate)"),
    "PROMPT-FILTERED": (_body(prompt_filter_results=[{"prompt_index": 0, "content_filter_results": {
                            "jailbreak": {"filtered": True, "detected": True}}}]), "prompt filtered by the provider (jailbreak)"),
}
#: usage counts that are no counts: the reply is read, the count is 0
BAD_USAGE = {
    "USAGE-HUGE": {"prompt_tokens": 10 ** 30, "completion_tokens": 5, "total_tokens": 10 ** 30},
    "USAGE-FLOAT": {"prompt_tokens": 1e300, "completion_tokens": 5, "total_tokens": 5},
    "USAGE-NEGATIVE": {"prompt_tokens": 10, "completion_tokens": -5, "total_tokens": 5},
    "USAGE-TEXT": {"prompt_tokens": "10", "completion_tokens": True, "total_tokens": "x"},
    "USAGE-LIST": [10, 5],
}


def _script(req):
    last = [m.get("content") for m in req.messages if m.get("role") == "user"][-1]
    for marker, (body, _why) in NOT_ANSWERS.items():
        if marker in last:
            return Reply(body=body)
    for marker, usage in BAD_USAGE.items():
        if marker in last:
            return Reply(body=_body(usage=usage))
    return Reply(body=_body(usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}))


def test_the_reader_never_raises_anything_but_not_an_answer():
    for body, why in NOT_ANSWERS.values():
        with pytest.raises(NotAnAnswer) as caught:
            read_chat_reply(json.loads(body))
        assert caught.value.reason == why
    for usage in BAD_USAGE.values():
        reply = read_chat_reply(json.loads(_body(usage=usage)))
        assert reply.content == V and reply.prompt_tokens in (0, 10) and reply.completion_tokens in (0, 5)
    assert [usage_count(x) for x in (7, 7.0, 10 ** 9, 10 ** 9 + 1, -1, 0.5, "7", True, None, float("nan"), [7])] == \
        [7, 7, 10 ** 9, 0, 0, 0, 0, 0, 0, 0, 0]


def test_the_judge_and_the_assistant_give_the_same_reason_for_each_reply_that_is_no_answer(tmp_path):
    from pipelines import run_assistant

    markers = list(NOT_ANSWERS) + ["WHOLE"]
    reqs = [judge_request(f"k{i}", context_messages("ctx", f"{m}?", "an answer", None), schema=ContextJudgeOutput)
            for i, m in enumerate(markers)]
    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": f"q{i}", "query": m, "assistant": ""} for i, m in enumerate(markers)]}) + "\n")
    with ScriptedOpenAIServer(_script) as srv:
        judged = judged_through(srv, tmp_path, reqs)
        summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                     "--assistant-url", srv.base_url, "--output", str(tmp_path / "out")])
    assert judged[-1].parsed == OWN and judged[-1].error is None
    for res, (marker, (_body_, why)) in zip(judged, NOT_ANSWERS.items()):
        assert res.parsed is None and res.error == f"invalid answer after 1 attempt(s): {why}", (marker, res.error)
    assert (summary["successes"], summary["failures"]) == (1, len(NOT_ANSWERS))
    assert summary["counters"]["requests"] == len(markers)
    dead = [json.loads(x) for x in (tmp_path / "out" / "dead_letter.jsonl").read_text().splitlines()]
    by_turn = {d["element_id"].rsplit("/", 1)[1]: d["reason"] for d in dead}
    assert by_turn == {str(i): f"assistant call failed: {why}" for i, (_b, why) in enumerate(NOT_ANSWERS.values())}
    answered = [json.loads(x) for x in (tmp_path / "out" / "dataset.jsonl").read_text().splitlines()][0]["conversation"]
    assert answered[-1]["assistant"] == V and all(t["assistant"].startswith("[ERROR] ") for t in answered[:-1])


def test_usage_counts_that_are_no_counts_never_fail_a_verdict_or_an_answer(tmp_path):
    """T5: ``usage.prompt_tokens`` 10**30 overflowed the judge's Beam counter: every verdict of the
    batch was dead-lettered "batch failed: Python int too large to convert to C long"."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler
    from pipelines import run_assistant

    markers = list(BAD_USAGE) + ["WHOLE"]
    reqs = [judge_request(f"k{i}", context_messages("ctx", f"{m}?", "an answer", None), schema=ContextJudgeOutput,
                          element_id=f"s/a/{i}") for i, m in enumerate(markers)]
    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": f"q{i}", "query": m, "assistant": ""} for i, m in enumerate(markers)]}) + "\n")
    with ScriptedOpenAIServer(_script) as srv:
        handler = OpenAIJudgeHandler("judge-model", srv.base_url, cache_path=str(tmp_path / "c.sqlite3"), num_retries=0,
                                     client_retries=0, api_key_env="FFB_TEST_UNSET_KEY")
        results, dead, counters = run_judge(handler, reqs, tmp_path)
        summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                     "--assistant-url", srv.base_url, "--output", str(tmp_path / "out")])
    assert dead == [] and sorted(r["parsed"]["score"] for r in results) == [0.7] * len(markers)
    assert (counters["prompt_tokens"], counters["completion_tokens"]) == (10 + 7, 5 + 5 + 3)  # the counts that are counts
    assert (summary["successes"], summary["failures"]) == (len(markers), 0)


def test_run_summary_counts_the_requests_of_a_batch_that_failed(tmp_path, monkeypatch, short_beam_backoff):
    """T6: a session that raised failed its batch on each of Beam's 3 attempts; the server got every
    request, yet ``run_summary.json`` said ``requests: 0`` (only a finished session's count was kept).
    Now each attempt's requests are kept: the dead letters' batch counts them, and a later attempt
    that succeeds adds its earlier attempts' requests."""
    from fair_forge_beam.assistants.assistant import _Client
    from pipelines import run_assistant

    asked = _Client._call_openai
    fails = {"n": 0}

    def answer_then_fail(self, messages):
        text = asked(self, messages)  # sent and answered, then the session fails (a bug, say): the batch fails
        if "FAIL" in messages[-1]["content"] or ("ONCE" in messages[-1]["content"] and not fails["n"]):
            fails["n"] += "ONCE" in messages[-1]["content"]
            raise RuntimeError("the session broke")
        return text

    monkeypatch.setattr(_Client, "_call_openai", answer_then_fail)
    for query, sent, dead in (("FAIL", 3, 1), ("ONCE", 2, 0)):  # 3 attempts fail; 1 fails, the 2nd succeeds
        data = tmp_path / f"{query}.jsonl"
        data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
            {"qa_id": "q1", "query": query, "assistant": ""}]}) + "\n")
        from fair_forge_beam.loop_jobs import EmptyStage

        with ScriptedOpenAIServer(V) as srv:
            try:
                summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                             "--assistant-url", srv.base_url, "--output", str(tmp_path / f"out-{query}")])
            except EmptyStage as empty:  # no turn answered: an empty run, its summary carried (trial48 B1)
                summary = empty.doc
            asked_n = srv.count()
        assert asked_n == sent and summary["counters"]["requests"] == sent, (query, asked_n, summary["counters"])
        assert summary["dead_letters"] == dead and summary["successes"] == 1 - dead
