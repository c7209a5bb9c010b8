"""Runners (spec §11): the generic HTTP JSON endpoint (request template + response path) with
urllib3's retries, the cache on re-runs, the failed-turn contract, the audit's guard, and the
handler's validation. Beam pipelines run on FnApiRunner against the scripted local server."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from apache_beam.testing.util import assert_that, equal_to

from helpers import REPO, fnapi_pipeline
from fair_forge_beam._beam import beam
from fair_forge_beam.assistants.assistant import (
    AssistantHandler,
    RunAssistant,
    assistant_counters,
    render_request,
    response_field,
)
from fair_forge_beam.io.failed_turns import SkipFailedTurns, failed_turn_reason

TEMPLATE = '{"model": "bot", "messages": {{ messages | tojson }}, "metadata": {"qa": {{ qa_id | tojson }}}}'
PATH = "choices.0.message.content"

SESSIONS = [
    {"session_id": "s1", "assistant_id": "a", "context": "ctx", "conversation": [
        {"qa_id": "q1", "query": "Hello {{ not a template }}", "assistant": ""},
        {"qa_id": "q2", "query": "BUSY once", "assistant": ""},
        {"qa_id": "q3", "query": "Thanks", "assistant": ""}]},
    {"session_id": "s2", "assistant_id": "a", "context": "", "conversation": [
        {"qa_id": "q1", "query": "FAIL always", "assistant": "", "observation": "note"},
        {"qa_id": "q2", "query": "After the failure", "assistant": ""}]},
]


def echo(req):
    users = [m["content"] for m in req.messages if m["role"] == "user"]
    return f"{users[-1]} <{len(req.messages)}>"


@pytest.fixture
def dataset(tmp_path):
    p = tmp_path / "set.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS), encoding="utf-8")
    return p


def run_http(dataset, out, srv, cache=None, path=PATH):
    from pipelines import run_assistant

    return run_assistant.run(["--input", str(dataset), "--assistant-kind", "http", "--assistant-url", srv.base_url + "/chat/completions",
                              "--request-template", TEMPLATE, "--response-path", path, "--assistant-retries", "1",
                              "--output", str(out), *(["--assistant-cache", str(cache)] if cache else [])])


@pytest.mark.slow
def test_sessions_sending_the_same_turn_are_asked_once_each(tmp_path):
    """Two sessions whose turns are identical (a common first "Hello"): each is its own call and its
    own cache entry, with the HTTP and the OpenAI kinds. With a shared key, the second one was asked
    or answered from the cache depending on which session ran first, so the number of calls varied
    and a cached re-run could give both sessions the answer one of them got."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import run_assistant

    same = [{"qa_id": "q1", "query": "Hello", "assistant": ""}, {"qa_id": "q2", "query": "Bye", "assistant": ""}]
    data = tmp_path / "twins.jsonl"
    # t0..t2 of assistant a, and t0 again for assistant b (sessions are keyed by id and assistant)
    data.write_text("".join(json.dumps({"session_id": sid, "assistant_id": aid, "context": "", "conversation": same}) + "\n"
                            for sid, aid in (("t0", "a"), ("t1", "a"), ("t2", "a"), ("t0", "b"))), encoding="utf-8")
    http = ["--assistant-kind", "http", "--request-template", '{"messages": {{ messages | tojson }}}', "--response-path", PATH]
    for kind_args, url in ((http, "/chat/completions"), (["--assistant-kind", "openai", "--assistant-model", "bot"], "")):
        with ScriptedOpenAIServer(echo) as srv:
            args = ["--input", str(data), *kind_args, "--assistant-url", srv.base_url + url, "--assistant-cache", str(tmp_path / f"{bool(url)}.sqlite3")]
            first = run_assistant.run([*args, "--output", str(tmp_path / f"a{bool(url)}")])
            n_first = srv.count()
            again = run_assistant.run([*args, "--output", str(tmp_path / f"b{bool(url)}")])
            assert (n_first, srv.count()) == (8, 8)  # 4 sessions × 2 turns, then nothing more
        assert first["counters"]["requests"] == 8 and first["counters"]["cache_hits"] == 0
        assert again["counters"]["requests"] == 0 and again["counters"]["cache_hits"] == 8


@pytest.mark.slow
def test_generic_http_endpoint_retries_fails_and_reruns_from_cache(dataset, tmp_path):
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

    faults = [Fault("server_error", match="FAIL"), Fault("rate_limit", match="BUSY", attempts={1})]
    with ScriptedOpenAIServer(echo, faults=faults) as srv:
        summary = run_http(dataset, tmp_path / "a", srv, cache=tmp_path / "c.sqlite3")
        first = dict(srv.by_status)
        srv.reset_counts()
        again = run_http(dataset, tmp_path / "b", srv, cache=tmp_path / "c.sqlite3")
        second = dict(srv.by_status)
    # urllib3's Retry: 429 then success for BUSY and for the next turn (its history holds "BUSY", so the
    # server's first-attempt fault matches it too); 500 twice (1 retry) for FAIL; 4 turns answered
    assert first == {200: 4, 429: 2, 500: 2}
    assert second == {500: 2}  # answers from the cache; the failure is never cached, so asked again
    assert (summary["successes"], summary["failures"], summary["sessions"], summary["turns"]) == (4, 1, 2, 5)
    assert (again["successes"], again["failures"], again["cached"]) == (4, 1, 4)
    # the runner's counters, in the returned summary and in run_summary.json (the http kind counts one
    # request per turn sent: urllib3's retries are not seen; the re-run sends only the failed turn)
    assert summary["counters"] == {"sessions": 2, "turns": 5, "successes": 4, "failures": 1, "cache_hits": 0, "requests": 5}
    assert again["counters"] == {"sessions": 2, "turns": 5, "successes": 4, "failures": 1, "cache_hits": 4, "requests": 1}
    for name, doc in (("a", summary), ("b", again)):
        assert json.loads((tmp_path / name / "run_summary.json").read_text())["counters"] == doc["counters"]
    out = {s["session_id"]: s for s in map(json.loads, (tmp_path / "a" / "dataset.jsonl").read_text().splitlines())}
    s1, s2 = out["s1"]["conversation"], out["s2"]["conversation"]
    # history in order: turn 3 sees 2 earlier exchanges (5 messages), braces reach the endpoint verbatim
    assert [t["assistant"] for t in s1] == ["Hello {{ not a template }} <1>", "BUSY once <3>", "Thanks <5>"]
    assert s2[0]["assistant"].startswith("[ERROR] ") and s2[0]["assistant"].startswith("[ERROR] HTTP 500: ")
    assert s2[0]["observation"].startswith("note\n[runner error] ")
    assert s2[0]["agentic"]["runner"]["ok"] is False and s2[1]["agentic"]["runner"]["ok"] is True
    assert s2[1]["assistant"] == "After the failure <1>"  # the failed turn is not in the history
    dead = [json.loads(x) for x in (tmp_path / "a" / "dead_letter.jsonl").read_text().splitlines()]
    assert [(d["stage"], d["element_id"]) for d in dead] == [("runner", "s2/a/0")]
    summaries = [json.loads(x) for x in (tmp_path / "a" / "session_summaries.jsonl").read_text().splitlines()]
    assert [(s["session_id"], s["total_batches"], s["successes"], s["failures"]) for s in summaries] == [("s1", 3, 3, 0), ("s2", 2, 1, 1)]


def test_missing_response_field_is_a_failed_turn(dataset, tmp_path):
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    from fair_forge_beam.loop_jobs import EmptyStage

    with ScriptedOpenAIServer(echo) as srv, pytest.raises(EmptyStage) as empty:  # no turn answered (trial48 B1)
        run_http(dataset, tmp_path / "a", srv, path="choices.0.message.missing")
    summary = empty.value.doc
    assert (summary["successes"], summary["failures"]) == (0, 5)
    dead = [json.loads(x) for x in open(f"{empty.value.kept_stage}/dead_letter.jsonl").read().splitlines()]
    assert all("response has no field 'choices.0.message.missing'" in d["reason"] for d in dead)


def test_run_assistant_transform_with_assert_that(dataset):
    """RunAssistant in a TestPipeline: exact summaries (times aside) and answered sessions."""

    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(echo) as srv:
        handler = AssistantHandler("openai", model="bot", base_url=srv.base_url, max_concurrency=2, send_context=True)
        with fnapi_pipeline() as p:
            read = p | "Read" >> ReadInteractions([str(dataset)])
            outs = read["interactions"] | RunAssistant(handler, assistant_id="bot-2")
            assert_that(outs["summaries"] | beam.Map(lambda s: (s["session_id"], s["assistant_id"], s["total_batches"], s["successes"], s["failures"])),
                        equal_to([("s1", "bot-2", 3, 3, 0), ("s2", "bot-2", 2, 2, 0)]), label="Summaries")
            assert_that(outs["sessions"] | beam.FlatMap(lambda s: [(s["session_id"], t["qa_id"], t["assistant"]) for t in s["conversation"]]),
                        equal_to([("s1", "q1", "Hello {{ not a template }} <2>"), ("s1", "q2", "BUSY once <4>"), ("s1", "q3", "Thanks <6>"),
                                  ("s2", "q1", "FAIL always <1>"), ("s2", "q2", "After the failure <3>")]), label="Answers")
            assert_that(outs["dead_letter"], equal_to([]), label="NoDead")
        # Beam counters are incremented in the DoFn (not in the handler's threads), so the runner sees them
        assert assistant_counters(p.result) == {"sessions": 2, "turns": 5, "successes": 5, "failures": 0, "cache_hits": 0,
                                                "requests": 5}
        # the session context went first as system message (send_context), only where it is not empty
        first = [r for r in srv.requests if r.messages[-1]["content"].startswith("Hello")][0]
        assert first.messages[0] == {"role": "system", "content": "ctx"}


def test_skip_failed_turns_in_the_audit():

    from fair_forge_beam.io.elements import Interaction

    def inter(i, runner):
        return Interaction(f"s/a/{i}", "s", "a", "english", "", i, f"q{i}", "query", "[ERROR] x" if runner is False else "ok",
                           None, None, None, {"runner": {"ok": runner, "error": "HTTP 500: boom"}} if runner is not None else {}, {}, {})

    with fnapi_pipeline() as p:
        ok, dead = p | beam.Create([inter(0, None), inter(1, True), inter(2, False)]) | SkipFailedTurns()
        assert_that(ok | beam.Map(lambda it: it.element_id), equal_to(["s/a/0", "s/a/1"]), label="Ok")
        assert_that(dead | beam.Map(lambda d: (d.stage, d.element_id, d.reason)),
                    equal_to([("runner", "s/a/2", "the assistant call failed in the runner, not scored: HTTP 500: boom")]), label="Dead")


def test_helpers_and_validation():
    assert render_request('{"q": {{ query | tojson }}}', {"query": 'a "quoted" {{x}}'}) == {"q": 'a "quoted" {{x}}'}
    with pytest.raises(ValueError, match="must end in | tojson"):  # no raw text in the body: no injection
        render_request('{"q": "{{ query }}"}', {"query": 'x", "admin": true, "y": "'})
    assert render_request('{"t": {{ turn_index }}}', {"turn_index": 2}) == {"t": 2}
    with pytest.raises(ValueError, match="did not render to JSON"):
        render_request('{"q": {{ query | tojson }}', {"query": "x"})
    with pytest.raises(ValueError, match="request template"):
        render_request('{"q": {{ nope | tojson }}}', {})
    # a misspelled name is named, with the names a template can use (hostile-tester trial, issue 28)
    with pytest.raises(ValueError, match=r"unknown variable\(s\) querry \(known: query, turn_index\)"):
        render_request('{"q": {{ querry | tojson }}}', {"query": "x", "turn_index": 0})
    with pytest.raises(ValueError, match="unknown variable"):  # refused when the handler is built
        AssistantHandler(kind="http", url="http://127.0.0.1:9/x", request_template='{"q": {{ querry | tojson }}}',
                         response_path="a")
    # values built in the template are bounded: '*' and '**' cannot hold a worker's memory or CPU
    for huge in ('{"q": {{ ("a" * 10**10) | tojson }}}', '{"q": {{ ([1] * 10**9) | tojson }}}',
                 '{"q": {{ 10 ** 100000 }}}', '{"q": {{ (10**9 * "ab") | tojson }}}'):
        with pytest.raises(ValueError, match="over the template limit"):
            render_request(huge, {})
    assert render_request('{"q": {{ ("ab" * 3) | tojson }}, "n": {{ 2 ** 10 }}, "m": {{ 6 * 7 }}}', {}) == {
        "q": "ababab", "n": 1024, "m": 42}
    assert render_request('{% set x = query|tojson %}{"q": {{ x }}}', {"query": "a"}) == {"q": "a"}
    assert response_field({"a": [{"b": "x"}]}, "a.0.b") == "x"
    with pytest.raises(ValueError):
        response_field({"a": []}, "a.0")
    assert failed_turn_reason({"runner": {"ok": False, "error": "e"}}) == "e"
    assert failed_turn_reason({"runner": {"ok": True}}) is None and failed_turn_reason(None) is None
    for kw in ({"kind": "grpc"}, {"kind": "openai"}, {"kind": "http", "url": "http://x"},
               {"kind": "http", "url": "http://x", "request_template": "{{ query }}"},
               {"kind": "http", "url": "http://x", "request_template": '{"q": "{{ query }}"}'},
               {"kind": "openai", "model": "m", "params": {"messages": []}}, {"kind": "openai", "model": "m", "request_timeout": 0}):
        with pytest.raises(ValueError):
            AssistantHandler(**kw)


HOSTILE_QUERY = 'x", "admin": true, "y": "\\'
#: every way to print something other than tojson's own output (issue 28: the guard accepted
#: | safe, | e and | forceescape as the last filter, and a query then added fields to the body)
BYPASSES = [
    '{"m": "{{ query|safe }}"}', '{"m": {{ query|tojson|safe }}}', '{"m": "{{ query|e }}"}', '{"m": "{{ query|escape }}"}',
    '{"m": "{{ query|forceescape }}"}', '{"m": {{ query|tojson|replace("\\\\", "") }}}',
    '{"m": {{ (query|tojson).replace("a", "b") }}}', '{"m": {{ query|tojson + "" }}}', '{"m": {{ (query|tojson)[0:] }}}',
    '{"m": {{ query|tojson|trim }}}', '{"m": {{ query|tojson|lower }}}', '{"m": "{{ query|urlencode }}"}',
    '{% set x = query|tojson|safe %}{"m": {{ x }}}', '{"m": {{ "%s"|format(query|tojson) }}}',
    # hostile-tester trial: a {% filter %} block's output never passes finalize
    '{% filter replace("Q", query) %}{"m": "Q"}{% endfilter %}', '{% filter format(query) %}{"m": "%s"}{% endfilter %}',
    '{% macro m() %}{"m": "Q"}{% endmacro %}{% call m() %}{% endcall %}',
]


@pytest.mark.parametrize("template", BYPASSES)
def test_request_template_prints_only_tojson_output(template):
    with pytest.raises(ValueError, match="must end in | tojson, and tojson must be its last filter"):
        render_request(template, {"query": HOSTILE_QUERY})
    with pytest.raises(ValueError, match="tojson must be its last filter"):  # refused when the handler is built
        AssistantHandler(kind="http", url="http://127.0.0.1:9/x", request_template=template, response_path="a")


@pytest.mark.parametrize("template", ['{"m": {{ history|tojson(query) }}}', '{"m": {{ history|tojson(indent=query) }}}',
                                      '{"m": {{ history|tojson(1.5) }}}', '{"m": {{ history|tojson(99) }}}'])
def test_tojsons_indent_is_a_small_whole_number_only(template):
    """Second trial of issue 28: json.dumps writes a text indent verbatim before every item, so
    ``tojson(query)`` let a query add fields to the body (``'"admin": true, '`` before each key)."""
    values = {"query": '"admin": true, ', "history": {"a": 1}}
    with pytest.raises(ValueError, match="tojson's indent must be a whole number 0-16"):
        render_request(template, values)
    assert render_request('{"m": {{ history|tojson(2) }}}', values) == {"m": {"a": 1}}


@pytest.mark.parametrize("template, error", [
    ("{% for i in range(100000000) %}{% endfor %}{}", "Range too big"),
    ('{"m": {{ query|tojson }}', "did not render to JSON"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion deeper than Python's limit"),
    ('{"m": {{ query|tojson }', "syntax error on line 1"),
])
@pytest.mark.slow
def test_request_template_runtime_errors_are_one_line_usage_errors(tmp_path, template, error):
    with pytest.raises(ValueError, match=error) as exc:
        render_request(template, {"query": "q"})
    assert "\n" not in str(exc.value)
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "conversation": [
        {"qa_id": "q", "query": "x", "assistant": ""}]}) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pipelines.run_assistant", "--input", str(data), "--assistant-kind", "http",
                           "--assistant-url", "http://127.0.0.1:9/x", "--request-template", template, "--response-path", "a",
                           "--output", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and "error: request template" in last and error in last


def test_a_run_whose_every_turn_failed_exits_as_an_empty_run(dataset, tmp_path, capsys):
    """Hostile-tester trial: run_assistant (and generate) exited 0 when every call failed, so a
    scheduled chain went on with a dataset of error turns."""
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import run_assistant

    with ScriptedOpenAIServer(echo, faults=[Fault("server_error", match="")]) as srv:
        args = ["--input", str(dataset), "--assistant-kind", "http", "--request-template",
                '{"messages": {{ messages | tojson }}}', "--response-path", PATH, "--assistant-retries", "0",
                "--assistant-url", srv.base_url + "/chat/completions", "--output", str(tmp_path / "out")]
        code = run_assistant.main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EMPTY_RUN_EXIT_CODE
    assert err[-1].startswith("run: empty run: no turn was answered (5 turn(s), 5 request(s) sent, 5 failed")
    assert not (tmp_path / "out").exists()  # nothing published (trial48 B1); the failures are read in the kept stage
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("out.staging-")]
    assert f"kept unpublished in {stage} until the next run into {tmp_path / 'out'}" in err[-1]
    assert (stage / "run_summary.json").exists() and (stage / "dead_letter.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", [".", "a..b", "a.", ".a", " "])
def test_a_response_path_with_an_empty_step_is_refused_before_any_request(tmp_path, path):
    """Trial 28f: '--response-path .' was accepted, so every turn was sent to the endpoint and
    then failed ('response has no field'); now refused when the handler is built, in one line."""
    with pytest.raises(ValueError, match="has an empty step") as exc:
        AssistantHandler(kind="http", url="http://127.0.0.1:9/x", request_template='{"q": {{ query | tojson }}}',
                         response_path=path)
    assert "\n" not in str(exc.value)
    AssistantHandler(kind="http", url="http://127.0.0.1:9/x", request_template='{"q": {{ query | tojson }}}',
                     response_path="choices.0.message.content")


def test_a_streamed_reply_of_an_http_endpoint_is_named_a_streamed_reply(dataset, tmp_path):
    """trial40 J6: an SSE body (``data: {...}`` events) was "response is not JSON": a streamed reply is
    named as one, so that the cause (an endpoint set to stream) is in the dead letter."""
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    sse = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
    from fair_forge_beam.loop_jobs import EmptyStage

    with ScriptedOpenAIServer(lambda req: Reply(body=sse, headers={"Content-Type": "text/event-stream"})) as srv, \
            pytest.raises(EmptyStage) as empty:  # no turn answered: an empty run, its stage kept (trial48 B1)
        run_http(dataset, tmp_path / "a", srv)
    summary = empty.value.doc
    assert (summary["successes"], summary["failures"]) == (0, 5)
    dead = [json.loads(x) for x in open(f"{empty.value.kept_stage}/dead_letter.jsonl").read().splitlines()]
    assert dead and all("streamed reply" in d["reason"] and "not JSON:" not in d["reason"] for d in dead), dead[0]


@pytest.mark.slow
def test_turns_the_assistant_failed_are_said_and_counted_by_the_run_and_the_audit(dataset, tmp_path, caplog, capsys):
    """trial40 J3: the assistant failed 10 of 12 turns; run_assistant and the loop said nothing, and the
    audit of its answers read "2 interactions read", counted no dead letter (results.json: dead_letters 0)
    while dead_letter/ held the 10 runner dead letters, so a dead_letter_share gate passed. Now the run
    stage says it in one line, the audit counts a failed turn as an interaction read and scored by no
    metric (summary.assistant_failed, with its reasons; each metric's not scored), prints it, and the
    gate fails."""
    import logging

    from helpers import uncounted_dead_letters
    from fair_forge_beam.reports.gates import GatesFailed
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import audit

    with ScriptedOpenAIServer(echo, faults=[Fault("server_error", match="FAIL")]) as srv:
        with caplog.at_level(logging.WARNING, logger="fair_forge_beam.loop"):
            run_http(dataset, tmp_path / "run", srv)
    said = [r.getMessage() for r in caplog.records if "the assistant failed" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("the assistant failed 1 of 5 turns (HTTP 500: "), said
    assert "scripted server error" in said[0] and said[0].endswith(
        f"): see {tmp_path / 'run' / 'dead_letter.jsonl'}; the audit scores the 4 answered, and counts the failed "
        "ones as read and scored by no metric (results.json: summary.assistant_failed)"), said
    capsys.readouterr()
    argv = ["--metrics", "humanity", "--no-report", "--input", str(tmp_path / "run" / "dataset.jsonl")]
    doc = audit.run([*argv, "--output", str(tmp_path / "audit")])
    out = capsys.readouterr().out
    s = doc["summary"]
    assert (s["interactions_read"], s["assistant_failed"]) == (5, 1)
    (reason,) = s["assistant_failed_reasons"]
    assert reason.startswith("the assistant call failed in the runner, not scored: ") and "500" in reason, reason
    assert s["metrics"]["humanity"]["interactions_not_scored"] == 1 + s["metrics"]["humanity"]["dead_letters"]
    assert uncounted_dead_letters(tmp_path / "audit") == (1 + s["metrics"]["humanity"]["dead_letters"],) * 2
    assert "records: 5 interactions read, 0 rejected at read" in out
    assert "  the assistant failed 1 of the 5 turns read: scored by no metric (the assistant call failed" in out
    with pytest.raises(GatesFailed) as failed:  # 1 of assistant a's 5 turns read was not scored
        audit.main([*argv, "--output", str(tmp_path / "gated"), "--gate", "coverage dead_letter_share <= 0.05 in every assistant_id"])
    (check,) = failed.value.failed
    assert (check.slice, check.interactions_read) == ("assistant_id=a", 5)


def test_the_answered_dataset_keeps_every_session_and_turn_field(tmp_path):
    """trial49 B1's class: the runner rebuilt each session from a list of four session and nine turn
    fields, so a dataset run through the assistant lost its ``chatbot_role`` (role adherence: every
    turn a dead letter) and its PII ``spans`` (privacy); a session without them is written as before."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    spans = [{"label": "email", "start": 0, "end": 11, "text": "a@b.example"}]
    sessions = [{**SESSIONS[0], "chatbot_role": "You answer greetings only.",
                 "conversation": [{**SESSIONS[0]["conversation"][0], "spans": spans}, SESSIONS[0]["conversation"][2]]},
                {**SESSIONS[1], "conversation": SESSIONS[1]["conversation"][1:]}]
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    with ScriptedOpenAIServer(echo) as srv:
        run_http(data, tmp_path / "a", srv)
    lines = (tmp_path / "a" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    out = {s["session_id"]: s for s in map(json.loads, lines)}
    assert out["s1"]["chatbot_role"] == "You answer greetings only."
    assert [t.get("spans") for t in out["s1"]["conversation"]] == [spans, None]
    assert "chatbot_role" not in out["s2"] and "spans" not in out["s2"]["conversation"][0]
    assert sorted(out["s2"]) == ["assistant_id", "context", "conversation", "language", "session_id"]
