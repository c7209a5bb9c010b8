"""Issue 28 (trial 28h, H1): a chat reply that did not end as a whole answer is never scored or
used. ``finish_reason`` ``"length"`` was the only such end rejected; ``"content_filter"`` (the
provider withheld or cut the reply) was scored — a judge's verdict, a guardian's "safe", an
assistant's answer. One rule, ``replies.unfinished_reply``, read by every reader of a chat reply:
the judge handler (judge, guardian, generator, optimizer, BestOf) and the assistant."""
from __future__ import annotations

import json

import pytest

from helpers import handler_for, judged_through
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.components.replies import unfinished_reply
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

OWN = {"score": 0.9, "insight": "fine"}


@pytest.mark.parametrize("finish", [None, "", "stop", "eos", "eos_token", "stop_sequence", "end_turn"])
def test_a_reply_that_stopped_by_itself_is_whole(finish):
    assert unfinished_reply(finish) is None


@pytest.mark.parametrize("finish, says", [
    ("length", "cut by the token limit (finish_reason=length)"),
    ("content_filter", "content filter (finish_reason=content_filter)"),
    ("tool_calls", "did not end as a whole answer (finish_reason=tool_calls)"),
    ("abort", "did not end as a whole answer (finish_reason=abort)"),
    (5, "did not end as a whole answer (finish_reason=5)"),
    ("a b\n", "(finish_reason='a b\\n')"),
])
def test_every_other_end_is_not_a_whole_answer(finish, says):
    why = unfinished_reply(finish, "scored")
    assert why is not None and says in why and ("never scored" in why or "is scored" in why), why


@pytest.mark.parametrize("finish", ["content_filter", "abort"])
def test_a_judge_reply_withheld_by_a_filter_is_that_requests_dead_letter(tmp_path, finish):
    reqs = [judge_request(f"k{i}", context_messages("ctx", f"QUESTION-{i}?", "an answer", None), schema=ContextJudgeOutput)
            for i in range(3)]
    cut = Reply(content=json.dumps(OWN), finish_reason=finish)
    with ScriptedOpenAIServer(lambda req: cut if "QUESTION-1" in req.prompt else json.dumps(OWN)) as srv:
        out = judged_through(srv, tmp_path, reqs)
    assert [out[0].parsed, out[2].parsed] == [OWN, OWN]
    assert out[1].parsed is None and f"finish_reason={finish}" in out[1].error, out[1].error
    assert out[1].raw == json.dumps(OWN)  # the original kept


def test_a_guardian_label_withheld_by_a_filter_is_never_used(tmp_path):
    def answer(req):
        return Reply(content="safe", finish_reason="content_filter") if "[filtered]" in req.prompt else "safe"

    with ScriptedOpenAIServer(answer) as srv:
        handler = handler_for(srv, tmp_path, invalid_answer_retries=1)  # output_schema None: free text
        client = handler.create_client()
        try:
            cut, whole = handler.request([judge_request("cut", [("user", "x [filtered]")]), judge_request("whole", [("user", "y")])], client)
        finally:
            client.close()
        sent = srv.count()
    assert whole.error is None and whole.answer == "safe"
    assert cut.error == ("invalid answer after 2 attempt(s): the reply was withheld or cut by the provider's content filter "
                         "(finish_reason=content_filter); filtered replies are never used")
    assert cut.raw == "safe" and sent == 3


@pytest.mark.parametrize("finish", ["content_filter", "length"])
def test_an_assistant_reply_cut_or_withheld_fails_its_turn(tmp_path, finish):
    from pipelines import run_assistant

    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": "q1", "query": "CUT", "assistant": ""}, {"qa_id": "q2", "query": "one", "assistant": ""}]}) + "\n")
    with ScriptedOpenAIServer(lambda req: Reply(content="half an ans", finish_reason=finish) if "CUT" in req.prompt else "fine") as srv:
        summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                     "--assistant-url", srv.base_url, "--output", str(tmp_path / "out")])
    assert (summary["successes"], summary["failures"]) == (1, 1)
    dead = [json.loads(x) for x in (tmp_path / "out" / "dead_letter.jsonl").read_text().splitlines()]
    assert len(dead) == 1 and f"finish_reason={finish}" in dead[0]["reason"], dead
