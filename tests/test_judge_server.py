"""The scripted OpenAI-compatible server: real HTTP on 127.0.0.1, answers and faults on demand."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from fair_forge_beam.testing.openai_server import MALFORMED_BODY, Fault, Reply, ScriptedOpenAIServer


def post(srv, body, timeout=5.0):
    req = urllib.request.Request(
        srv.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer t"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def chat(text, **extra):
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def test_fixed_and_computed_answers_with_usage():
    with ScriptedOpenAIServer({"score": 1}) as srv:
        status, _, body = post(srv, chat("one two three"))
        data = json.loads(body)
        assert status == 200 and json.loads(data["choices"][0]["message"]["content"]) == {"score": 1}
        assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    with ScriptedOpenAIServer(lambda req: Reply(content=req.prompt.upper(), reasoning_content="because")) as srv:
        data = json.loads(post(srv, chat("abc"))[2])
        assert data["choices"][0]["message"] == {"role": "assistant", "content": "ABC", "reasoning_content": "because"}
        assert srv.requests[0].number == 1 and srv.requests[0].attempt == 1 and srv.authorizations["Bearer t"] == 1


def test_models_endpoint_and_unknown_route():
    with ScriptedOpenAIServer(model="judge-x") as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "judge-x"
        assert post_path(srv, "/nope") == 404
        assert srv.count() == 0


def post_path(srv, path):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}", data=b"{}")
    try:
        urllib.request.urlopen(req, timeout=5)
    except urllib.error.HTTPError as e:
        return e.code
    return 200


def test_every_fault_kind():
    faults = [
        Fault("rate_limit", match="rl", retry_after="2"),
        Fault("unavailable", match="busy", retry_after=None),
        Fault("server_error", match="boom"),
        Fault("bad_request", match="bad"),
        Fault("malformed", match="garbled"),
        Fault("invalid", match="invalid"),
        Fault("slow", match="slow", delay=0.3),
    ]
    with ScriptedOpenAIServer({"score": 1}, faults=faults) as srv:
        s, h, _ = post(srv, chat("rl"))
        assert s == 429 and h["Retry-After"] == "2"
        s, h, _ = post(srv, chat("busy"))
        assert s == 503 and "Retry-After" not in h
        assert post(srv, chat("boom"))[0] == 500
        s, _, body = post(srv, chat("bad"))
        assert s == 400 and "error" in json.loads(body)
        s, _, body = post(srv, chat("garbled"))
        assert s == 200 and body == MALFORMED_BODY
        with pytest.raises(ValueError):
            json.loads(body)
        content = json.loads(post(srv, chat("invalid"))[2])["choices"][0]["message"]["content"]
        assert json.loads(content) == {"__not_in_any_schema__": True}
        t = time.monotonic()
        assert post(srv, chat("slow"))[0] == 200 and time.monotonic() - t >= 0.3
        assert srv.count() == 7
        assert srv.by_status == {429: 1, 503: 1, 500: 1, 400: 1, 200: 3}


def test_fault_selection_by_number_attempt_times_and_seeded_probability():
    with ScriptedOpenAIServer(faults=[Fault("server_error", requests={2}), Fault("rate_limit", match="x", attempts={1})]) as srv:
        assert [post(srv, chat(t))[0] for t in ("a", "b", "x", "x", "x")] == [200, 500, 429, 200, 200]
        assert [r.attempt for r in srv.requests] == [1, 1, 1, 2, 3]
    with ScriptedOpenAIServer(faults=[Fault("server_error", times=2)]) as srv:
        assert [post(srv, chat("a"))[0] for _ in range(4)] == [500, 500, 200, 200]

    def pattern(seed):
        with ScriptedOpenAIServer(faults=[Fault("server_error", probability=0.5)], seed=seed) as srv:
            return [post(srv, chat(str(i)))[0] for i in range(20)]

    p = pattern(7)
    assert p == pattern(7) and 0 < p.count(500) < 20
    with pytest.raises(ValueError):
        Fault("explode")


def test_response_format_acceptance_switches():
    schema_rf = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
    with ScriptedOpenAIServer(accept_json_schema=False) as srv:
        assert post(srv, chat("a", response_format=schema_rf))[0] == 400
        assert post(srv, chat("a", response_format={"type": "json_object"}))[0] == 200
    with ScriptedOpenAIServer(accept_json_object=False) as srv:
        assert post(srv, chat("a", response_format={"type": "json_object"}))[0] == 400
        assert post(srv, chat("a", response_format=schema_rf))[0] == 200
        assert srv.requests[-1].json_schema == {"type": "object"}


def test_concurrent_requests_overlap_and_stop_interrupts_slow_ones():
    with ScriptedOpenAIServer(latency=0.5) as srv:
        t = time.monotonic()
        threads = [threading.Thread(target=post, args=(srv, chat(str(i)))) for i in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert time.monotonic() - t < 2.5  # 8 × 0.5 s would be 4 s one at a time
        assert srv.count() == 8
    srv = ScriptedOpenAIServer(faults=[Fault("slow", delay=60)]).start()
    errors = []

    def doomed():
        try:
            post(srv, chat("z"), 5.0)
        except Exception as exc:  # the server closes the connection without an answer
            errors.append(exc)

    th = threading.Thread(target=doomed)
    th.start()
    time.sleep(0.2)
    t = time.monotonic()
    srv.stop()
    assert time.monotonic() - t < 5
    th.join()
    assert srv.count() == 1 and srv.count(200) == 0 and len(errors) == 1


def test_bad_request_body_and_double_start():
    with ScriptedOpenAIServer() as srv:
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=b"not json")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 400
        with pytest.raises(RuntimeError):
            srv.start()


def test_script_errors_become_500():
    def broken(req):
        raise KeyError("oops")

    with ScriptedOpenAIServer(broken) as srv:
        status, _, body = post(srv, chat("a"))
        assert status == 500 and "KeyError" in json.loads(body)["error"]["message"]
