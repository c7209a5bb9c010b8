"""Issue 28: a chat completion holding more than one choice answers a request that asked for one
(``n`` is never sent). Which choice is the answer cannot be told, so the reply is refused as
unreadable: one judge request's dead letter (the others scored), one assistant turn failed. Before,
the first choice was taken silently, whatever the others said."""
from __future__ import annotations

import json

from helpers import judged_through
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

OWN = {"score": 0.3, "insight": "fine"}


def _two_choices(first: str, second: str) -> bytes:
    return json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": first}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": second}, "finish_reason": "stop"}]}).encode()


def test_a_judge_reply_with_two_choices_is_that_requests_dead_letter(tmp_path):
    bad = Reply(body=_two_choices(json.dumps({"score": 1.0, "insight": "a"}), json.dumps({"score": 0.0, "insight": "b"})))
    reqs = [judge_request(f"k{i}", context_messages("ctx", f"QUESTION-{i}?", "an answer", None), schema=ContextJudgeOutput)
            for i in range(4)]
    with ScriptedOpenAIServer(lambda req: bad if "QUESTION-1" in req.prompt else json.dumps(OWN)) as srv:
        out = judged_through(srv, tmp_path, reqs)
    assert [r.parsed for i, r in enumerate(out) if i != 1] == [OWN] * 3
    assert out[1].parsed is None and "2 choices where one was asked for" in out[1].error, out[1].error
    assert '"index": 1' in out[1].raw  # the original kept


def test_an_assistant_reply_with_two_choices_fails_its_turn(tmp_path):
    from pipelines import run_assistant

    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": "q1", "query": "TWO", "assistant": ""}, {"qa_id": "q2", "query": "one", "assistant": ""}]}) + "\n")
    with ScriptedOpenAIServer(lambda req: Reply(body=_two_choices("yes", "no")) if "TWO" in req.prompt else "fine") as srv:
        summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                     "--assistant-url", srv.base_url, "--output", str(tmp_path / "out")])
    assert (summary["successes"], summary["failures"]) == (1, 1)
    dead = [json.loads(x) for x in (tmp_path / "out" / "dead_letter.jsonl").read_text().splitlines()]
    assert len(dead) == 1 and "2 choices where one was asked for" in dead[0]["reason"], dead
