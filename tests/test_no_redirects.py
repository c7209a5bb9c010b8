"""No HTTP client of the package follows a redirect (trial 28c, B8): a judge or an assistant
endpoint answering 307 to another host got the full prompt (the users' conversations) sent there.
The reply is a failure whose reason names the redirect and where it pointed."""
from __future__ import annotations

import json

import pytest

from helpers import handler_for
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer


def _moved_to(target):
    return Reply(content="moved", status=307, headers={"Location": target.base_url.replace("127.0.0.1", "localhost")
                                                        + "/chat/completions"})


def test_the_judge_never_follows_a_redirect(tmp_path):
    with ScriptedOpenAIServer('{"score": 1, "insight": "x"}') as target:
        with ScriptedOpenAIServer(_moved_to(target)) as srv:
            handler = handler_for(srv, tmp_path)
            client = handler.create_client()
            try:
                out = handler.request([judge_request("k", context_messages("ctx", "secret q", "a", None),
                                                     schema=ContextJudgeOutput)], client)
            finally:
                client.close()
            assert target.count() == 0  # the prompt never reached the other host
            assert srv.count() == 1
            port = target.port
    assert out[0].parsed is None
    assert out[0].error.startswith(f"HTTP 307 redirect (to localhost:{port}) not followed"), out[0].error


def test_the_assistant_runner_never_follows_a_redirect(tmp_path):
    from pipelines import run_assistant

    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": "q1", "query": "private words", "assistant": ""}]}) + "\n", encoding="utf-8")
    http = ["--assistant-kind", "http", "--request-template", '{"messages": {{ messages | tojson }}}',
            "--response-path", "choices.0.message.content"]
    for name, kind_args, url in (("http", http, "/chat/completions"),
                                 ("openai", ["--assistant-kind", "openai", "--assistant-model", "bot"], "")):
        from fair_forge_beam.loop_jobs import EmptyStage

        with ScriptedOpenAIServer("answer") as target:
            with ScriptedOpenAIServer(_moved_to(target)) as srv, pytest.raises(EmptyStage) as empty:  # no turn answered
                run_assistant.run(["--input", str(data), *kind_args, "--assistant-url", srv.base_url + url,
                                   "--assistant-retries", "0", "--output", str(tmp_path / name)])
            assert target.count() == 0, name
            port = target.port
        # an empty run: nothing published, its outputs read in the stage it keeps (trial48 B1)
        turn = json.loads(open(f"{empty.value.kept_stage}/dataset.jsonl").read())["conversation"][0]
        assert turn["assistant"].startswith(f"[ERROR] HTTP 307 redirect (to localhost:{port}) not followed"), \
            (name, turn["assistant"])
