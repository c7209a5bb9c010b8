"""Issue 28 G1: whatever goes wrong with ONE judge reply (a body nested past the JSON decoder's
depth, an error body of that kind, a parser or validator that raises) is that reply's dead letter
(reason and original kept); the other replies of its batch are scored, and the batch never fails
as a whole."""
from __future__ import annotations

import json

import pytest

from helpers import handler_for, run_metric
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.metrics.context import Context
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer
import helpers

OWN = {"score": 0.3, "insight": "fine"}
DEEP = b'{"a":' * 3000 + b"1" + b"}" * 3000
N = 6


def _replies(bad: Reply):
    """The judge: ``bad`` for the question holding QUESTION-1, a valid verdict for the others."""
    return lambda req: bad if "QUESTION-1" in req.prompt else json.dumps(OWN)


def _ask(srv, tmp_path, n=N, **kw):
    reqs = [judge_request(f"k{i}", context_messages("ctx", f"QUESTION-{i}?", "an answer", None), schema=ContextJudgeOutput)
            for i in range(n)]
    return helpers.judged_through(srv, tmp_path, reqs, **kw)


@pytest.mark.parametrize("bad", [
    Reply(body=DEEP),  # the whole body nested 3,000 levels deep
    Reply(body=b'{"choices": [{"message": {"role": "assistant", "content": "x", "extra": ' + DEEP + b'}}]}'),
    Reply(status=400, body=DEEP),  # an error body the client decodes itself
    Reply(status=422, body=DEEP),
], ids=["deep-body", "deep-inside-completion", "deep-400", "deep-422"])
def test_one_deep_reply_is_one_dead_letter_the_rest_scored(tmp_path, bad):
    with ScriptedOpenAIServer(_replies(bad)) as srv:
        out = _ask(srv, tmp_path)
    assert [r.parsed for i, r in enumerate(out) if i != 1] == [OWN] * (N - 1)
    assert out[1].parsed is None and out[1].error
    assert "RecursionError" not in out[1].error  # words, not a class name
    assert bad.status != 200 or "nested deeper than the JSON decoder goes" in out[1].error, out[1].error
    assert out[1].raw.startswith('{"a":{"a":') or out[1].raw.startswith('{"choices"')  # the original kept


def test_any_exception_while_reading_one_reply_is_its_dead_letter(tmp_path, monkeypatch):
    """A parser that raises something unforeseen on one answer (here: RecursionError, ValueError,
    UnicodeError, a pydantic error, a RuntimeError) fails that request only, with its original."""
    import pydantic

    from fair_forge_beam.components.judge import handler as handler_mod

    real = handler_mod.parse_verdict
    boom = iter([RecursionError("maximum recursion depth exceeded while decoding a JSON object"), ValueError("bad value"),
                 UnicodeError("bad text"), RuntimeError("unexpected")])

    def parse(answer, *a, **kw):
        if "BOOM" in answer:
            raise next(boom)
        return real(answer, *a, **kw)

    monkeypatch.setattr(handler_mod, "parse_verdict", parse)
    for k in range(4):
        with ScriptedOpenAIServer(_replies(Reply(content='{"score": 0.5, "insight": "BOOM"}'))) as srv:
            out = _ask(srv, tmp_path / str(k))
        assert [r.parsed for i, r in enumerate(out) if i != 1] == [OWN] * (N - 1)
        assert out[1].parsed is None and out[1].error.startswith("unreadable reply: ")
        assert "BOOM" in out[1].raw  # the original kept
        assert "Error" not in out[1].error
    try:
        ContextJudgeOutput.model_validate({"score": "x"})
    except pydantic.ValidationError as exc:
        err = exc

    def bad_validation(answer, *a, **kw):
        if "BOOM" in answer:
            raise err
        return real(answer, *a, **kw)

    monkeypatch.setattr(handler_mod, "parse_verdict", bad_validation)
    with ScriptedOpenAIServer(_replies(Reply(content='{"score": 0.5, "insight": "BOOM"}'))) as srv:
        out = _ask(srv, tmp_path / "v")
    assert [r.parsed is not None for r in out] == [i != 1 for i in range(N)]


def test_a_deep_reply_in_a_pipeline_dead_letters_one_interaction(tmp_path):
    """The trial's case end to end: one of N judge replies nested 3,000 levels deep → 1 dead letter
    with its reason and original, N-1 interactions scored (main dead-lettered the whole batch)."""
    data = [helpers.ix("S", "bot", i, "an answer", context="ctx", qa_id_format="q{turn}", query=f"QUESTION-{i}?", gt="x")
            for i in range(N)]
    with ScriptedOpenAIServer(_replies(Reply(body=DEEP))) as srv:
        res = run_metric(Context(judge=handler_for(srv, tmp_path, invalid_answer_retries=0)), data, tmp_path / "run")
    assert len(res["interactions"]) == N - 1
    assert len(res["dead_letter"]) == 1
    dl = res["dead_letter"][0]
    assert "batch failed" not in dl["reason"] and "not JSON" in dl["reason"], dl["reason"]
    assert dl["raw"].startswith('{"a":{"a":') if "raw" in dl else True


# ---- trial40 J6: reasons that name the wrong cause ----

def test_a_verdict_holding_a_value_nested_too_deep_is_said_to_be_too_deep(tmp_path):
    """A verdict with a 5,000-deep array inside gave "no JSON object found in the answer": there is an
    object, too deep for the decoder. The reason says so (as the body-level case does)."""
    deep = json.dumps(OWN)[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}"
    with ScriptedOpenAIServer(_replies(Reply(content=deep))) as srv:
        out = _ask(srv, tmp_path, n=2)
    assert out[0].parsed == OWN and out[1].parsed is None
    assert "nested deeper than the JSON decoder goes" in out[1].error, out[1].error
    assert "no JSON object found" not in out[1].error, out[1].error


def _sse(content: str) -> bytes:
    chunk = {"id": "x", "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_a_streamed_reply_nobody_asked_for_is_named_a_streamed_reply(tmp_path, content_type):
    """An SSE body (``data: {...}`` events) when ``stream`` was not requested gave "the body is not JSON
    (Expecting value: line 1 column 1 (char 0))": it is a streamed reply the request did not ask for
    (by its content type, or by its ``data:`` lines whatever type it declares)."""
    bad = Reply(body=_sse(json.dumps(OWN)), headers={"Content-Type": content_type})
    with ScriptedOpenAIServer(_replies(bad)) as srv:
        out = _ask(srv, tmp_path, n=2)
    assert out[0].parsed == OWN and out[1].parsed is None
    assert "streamed reply" in out[1].error and "did not ask for" in out[1].error, out[1].error
    assert "Expecting value" not in out[1].error, out[1].error
