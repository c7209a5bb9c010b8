"""Issue 28, item 1: judge, guardian, generator and assistant replies have a size limit of their own
(``--judge-max-reply-bytes``, ``--guardian-max-reply-bytes``, ``--generator-max-reply-bytes``,
``--assistant-max-reply-bytes``). A reply over it is read no further than the limit (declared
``Content-Length``, chunked or gzip-compressed), becomes a dead letter naming its size or "over N
bytes" and the limit, is never cached and never scored; the other calls go on. Against the real
scripted server on 127.0.0.1."""
from __future__ import annotations

import json
import resource
import sqlite3

import pytest

from helpers import handler_for
from fair_forge_beam.components.judge import judge_request
from fair_forge_beam.components.replies import ReplyTooLarge, read_bounded
from fair_forge_beam.options import MAX_REPLY_BYTES
from fair_forge_beam.schemas.context import ContextJudgeOutput
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

GOOD = {"score": 0.5, "insight": "fine"}
MB = 2**20


def _script(big: Reply):
    """A judge that answers ``big`` (padded, a valid verdict inside) to prompts with [big], else GOOD."""
    def answer(req):
        if "[big]" in req.prompt:
            return Reply(content=json.dumps(GOOD), pad_to=big.pad_to, chunked=big.chunked, gzip=big.gzip, status=big.status)
        return GOOD
    return answer


def _ask(srv, tmp_path, **kw):
    handler = handler_for(srv, tmp_path, output_schema=ContextJudgeOutput, invalid_answer_retries=1, **kw)
    client = handler.create_client()
    reqs = [judge_request("big", [("user", "judge this [big]")]), judge_request("small", [("user", "judge this")])]
    try:
        return handler.request(reqs, client), client.cache
    finally:
        client.close()


def _cached(tmp_path) -> int:
    with sqlite3.connect(str(tmp_path / "cache.sqlite3")) as con:
        return con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'").fetchone()[0] and \
            sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))


@pytest.mark.parametrize("shape,reason", [
    ({}, "reply of 52,428,800 bytes is over the limit of 1,048,576 bytes (--judge-max-reply-bytes)"),
    ({"chunked": True}, "reply over 1,048,576 bytes is over the limit of 1,048,576 bytes (--judge-max-reply-bytes)"),
    ({"gzip": True}, "reply over 1,048,576 bytes is over the limit of 1,048,576 bytes (--judge-max-reply-bytes)"),
])
def test_a_50mb_judge_reply_is_a_dead_letter_never_cached_never_scored(tmp_path, shape, reason):
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with ScriptedOpenAIServer(_script(Reply(pad_to=50 * MB, **shape))) as srv:
        (big, small), _ = _ask(srv, tmp_path, max_reply_bytes=MB, max_reply_option="--judge-max-reply-bytes")
        sent = srv.count()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak0) / 1024
    assert small.error is None and small.parsed == GOOD
    assert big.parsed is None and big.error.startswith(reason), big.error
    assert big.error.endswith("not read further, not cached, not scored")
    if shape:  # read up to the limit: its first 1,024 characters are kept
        assert big.raw.startswith('{"id": "chatcmpl-') and len(big.raw) == 1024
    else:  # a declared Content-Length over the limit: not one byte of the body is read
        assert big.raw == ""
    assert sent == 2  # never re-asked (invalid_answer_retries=1 is for answers that do not validate)
    assert _cached(tmp_path) == 1  # the small answer only
    assert grown_mb < 40, f"peak RSS grew by {grown_mb:.0f} MB reading a 50 MB reply"


def test_a_reply_at_the_limit_is_read_and_scored(tmp_path):
    with ScriptedOpenAIServer(_script(Reply(pad_to=200_000))) as srv:
        (big, small), _ = _ask(srv, tmp_path, max_reply_bytes=200_000)
    assert big.error is None and big.parsed == GOOD and small.parsed == GOOD


def test_an_oversize_error_body_is_bounded_too(tmp_path):
    with ScriptedOpenAIServer(_script(Reply(pad_to=20 * MB, status=400, chunked=True))) as srv:
        (big, small), _ = _ask(srv, tmp_path, max_reply_bytes=MB)
    assert small.parsed == GOOD
    assert big.error.startswith("reply over 1,048,576 bytes is over the limit of 1,048,576 bytes (max_reply_bytes)")


def test_the_judge_default_is_the_declared_one():
    from fair_forge_beam.options import TABLE

    assert MAX_REPLY_BYTES == 4 * MB
    for name in ("judge", "guardian", "generator", "assistant"):
        assert TABLE[f"{name}_max_reply_bytes"].default == MAX_REPLY_BYTES


def test_read_bounded():
    assert read_bounded([b"ab", b"cd"], 4) == b"abcd"
    with pytest.raises(ReplyTooLarge) as e:
        read_bounded([b"ab", b"cd", b"e"], 4)
    assert e.value.size is None and e.value.head == b"abcde"
    with pytest.raises(ReplyTooLarge) as e:
        read_bounded(iter(()), 4, declared=5)
    assert e.value.reason("--x") == "reply of 5 bytes is over the limit of 4 bytes (--x); not read further, not cached, not scored"


# ------------------------------------------------------------------ the assistant under test
def _session():
    return json.dumps({"session_id": "S", "assistant_id": "bot", "language": "english", "context": "",
                       "conversation": [{"qa_id": "q0", "query": "say [big]", "assistant": "", "ground_truth_assistant": ""},
                                        {"qa_id": "q1", "query": "hello", "assistant": "", "ground_truth_assistant": ""}]})


@pytest.mark.parametrize("kind", ["openai", "http"])
@pytest.mark.parametrize("chunked", [False, True])
def test_an_oversize_assistant_reply_fails_the_turn_the_session_goes_on(tmp_path, kind, chunked):
    from fair_forge_beam.assistants.assistant import AssistantHandler

    def answer(req):
        if "[big]" in req.prompt:
            return Reply(content="a big answer", pad_to=30 * MB, chunked=chunked)
        return "hi"

    with ScriptedOpenAIServer(answer) as srv:
        if kind == "openai":
            h = AssistantHandler("openai", model="bot", base_url=srv.base_url, client_retries=0, max_reply_bytes=MB,
                                 cache_path=str(tmp_path / "a.sqlite3"))
        else:
            h = AssistantHandler("http", url=srv.base_url + "/chat/completions", client_retries=0, max_reply_bytes=MB,
                                 request_template='{"model": "bot", "messages": {{ messages | tojson }}}',
                                 response_path="choices.0.message.content", cache_path=str(tmp_path / "a.sqlite3"))
        client = h.create_client()
        try:
            out = client.run_session(_session())
        finally:
            client.close()
    turns = out["session"]["conversation"]
    size = "over 1,048,576 bytes" if chunked else "of 31,457,280 bytes"
    assert turns[0]["agentic"]["runner"]["ok"] is False
    assert f"reply {size} is over the limit of 1,048,576 bytes (--assistant-max-reply-bytes)" in turns[0]["agentic"]["runner"]["error"]
    assert turns[1]["assistant"] == "hi"
    assert [d["stage"] for d in out["dead_letters"]] == ["runner"]
    with sqlite3.connect(str(tmp_path / "a.sqlite3")) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables) == 1


@pytest.mark.parametrize("headers", [False, True])
def test_the_timeout_is_a_deadline_for_the_whole_judge_reply(tmp_path, headers):
    """Hostile-tester trial (issue 28): --judge-timeout bounded each read, so a server dripping one
    byte every 0.5 s held a call ~55 s. Every HTTP attempt of an openai endpoint (judge, guardian,
    generator, assistant) now has a deadline for the whole reply (connect, headers, body): with a
    1 s time-out a dripped reply fails as a time-out after about 1 s, the other call is scored."""
    import time

    def answer(req):
        if "[slow]" in req.prompt:
            return Reply(content=json.dumps(GOOD), drip=0.05, drip_headers=headers)  # ~30 s for the reply
        return GOOD

    with ScriptedOpenAIServer(answer) as srv:
        handler = handler_for(srv, tmp_path, output_schema=ContextJudgeOutput, request_timeout=1.0)
        client = handler.create_client()
        reqs = [judge_request("slow", [("user", "judge this [slow]")]), judge_request("fine", [("user", "judge this")])]
        start = time.monotonic()
        try:
            slow, fine = handler.request(reqs, client)
        finally:
            client.close()
        took = time.monotonic() - start
    assert took < 4, f"the dripped reply held the call {took:.1f} s with a 1 s time-out"
    assert not slow.ok and "timeout after 1 s" in slow.error, slow
    assert fine.ok


@pytest.mark.parametrize("kind,headers", [("openai", False), ("http", False), ("http", True)])
def test_the_timeout_is_a_deadline_for_the_whole_assistant_reply(tmp_path, kind, headers):
    """Both kinds of assistant endpoint (the http kind timed each read only: a server dripping its
    reply held a turn 19 s at a 2 s time-out, and an endless chunked reply held it for good)."""
    import time

    from fair_forge_beam.assistants.assistant import AssistantHandler

    def answer(req):
        return Reply(content="a slow answer", drip=0.05, drip_headers=headers) if "[slow]" in req.prompt else "hi"

    with ScriptedOpenAIServer(answer) as srv:
        where = (dict(model="bot", base_url=srv.base_url) if kind == "openai" else
                 dict(url=srv.base_url + "/chat/completions", request_template='{"messages": {{ messages | tojson }}}',
                      response_path="choices.0.message.content"))
        h = AssistantHandler(kind, **where, client_retries=0, request_timeout=1.0, cache_path=str(tmp_path / "a.sqlite3"))
        client = h.create_client()
        start = time.monotonic()
        try:
            out = client.run_session(json.dumps({"session_id": "s", "assistant_id": "bot", "conversation": [
                {"qa_id": "q0", "query": "[slow] hello", "assistant": "", "ground_truth_assistant": ""},
                {"qa_id": "q1", "query": "hello", "assistant": "", "ground_truth_assistant": ""}]}))
        finally:
            client.close()
        took = time.monotonic() - start
    turns = out["session"]["conversation"]
    assert took < 4, f"the dripped reply held the turn {took:.1f} s with a 1 s time-out"
    assert turns[0]["agentic"]["runner"]["ok"] is False and "timeout after 1 s" in turns[0]["agentic"]["runner"]["error"]
    assert turns[1]["assistant"] == "hi"


def test_an_invalid_utf8_judge_reply_is_a_dead_letter_not_scored_with_replacement_characters(tmp_path):
    """Hostile-tester trial (issue 28): a reply whose bytes are not UTF-8 was decoded with U+FFFD
    and scored without a warning. JSON is UTF-8 (RFC 8259 §8.1): it is an unreadable reply."""
    content = json.dumps(json.dumps({"score": 0.5, "insight": "fine@@"})).encode().replace(b"@@", b"\xff\xfe")

    def answer(req):
        if "[bad]" in req.prompt:
            return Reply(body=b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
                              b'"finish_reason": "stop", "message": {"role": "assistant", "content": ' + content + b"}}]}")
        return GOOD

    with ScriptedOpenAIServer(answer) as srv:
        handler = handler_for(srv, tmp_path, output_schema=ContextJudgeOutput)
        client = handler.create_client()
        try:
            bad, fine = handler.request([judge_request("bad", [("user", "judge [bad]")]),
                                         judge_request("fine", [("user", "judge")])], client)
        finally:
            client.close()
    assert not bad.ok and "not valid UTF-8" in bad.error, bad
    assert fine.ok


def test_identical_calls_to_a_dripping_judge_fail_together_in_one_time_out(tmp_path):
    """Hostile-tester trial (issue 28 B15): 12 identical judge calls (the same turn in 4 sessions)
    to a server dripping 1 byte / 0.5 s at --judge-timeout 3 held each batch attempt ~40 s: the
    single-flight guard let one ask while the others waited, and after its time-out each waiter
    asked in turn — 12 time-outs one after the other. A failure is now handed to the identical
    requests that waited for it: the batch fails after about one time-out, one request sent."""
    import time

    with ScriptedOpenAIServer(lambda req: Reply(content=json.dumps(GOOD), drip=0.05)) as srv:
        handler = handler_for(srv, tmp_path, output_schema=ContextJudgeOutput, request_timeout=1.0, max_concurrency=8)
        client = handler.create_client()
        reqs = [judge_request(f"k{i}", [("user", "judge this")], element_id=f"s{i}") for i in range(6)]
        start = time.monotonic()
        try:
            out = handler.request(reqs, client)
        finally:
            client.close()
        took = time.monotonic() - start
        sent = srv.count()
    assert took < 3, f"6 identical dripped calls held the batch {took:.1f} s with a 1 s time-out"
    assert sent == 1
    assert [r.key for r in out] == [f"k{i}" for i in range(6)] and [r.element_id for r in out] == [f"s{i}" for i in range(6)]
    assert all(not r.ok and "timeout after 1 s" in r.error for r in out), out


def _raw_server(mode: str):
    """A 127.0.0.1 server that breaks HTTP the way ``mode`` says, for every connection; returns
    ``(base_url, stop)``."""
    import socket
    import struct
    import threading

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    lsock.settimeout(0.2)
    stop = threading.Event()

    def serve(conn):
        try:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
                if mode == "plain-to-tls":
                    break
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while mode != "plain-to-tls" and len(body) < length:  # the whole request read: no reset for unread bytes
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            if mode == "plain-to-tls":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            elif mode in ("many headers", "one huge header"):
                head = (b"".join(b"X-H%d: %s\r\n" % (i, b"a" * 8000) for i in range(200)) if mode == "many headers"
                        else b"X-Big: " + b"a" * (2 * 1024 * 1024) + b"\r\n")
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + head)
                while conn.recv(65536):  # until the client hangs up
                    pass
            elif mode in ("reset mid-body", "closed mid-body"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\": ")
                if mode == "reset mid-body":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        finally:
            conn.close()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        lsock.close()

    threading.Thread(target=loop, daemon=True).start()
    port = lsock.getsockname()[1]
    scheme = "https" if mode == "plain-to-tls" else "http"
    return f"{scheme}://127.0.0.1:{port}/v1", stop.set


@pytest.mark.parametrize("mode, words", [
    ("many headers", "the reply's status line and headers are too large to read"),
    ("one huge header", "the reply's status line and headers are too large to read"),
    ("refused", "the connection was refused"),
    ("reset mid-body", "the connection was reset by the server"),
    ("closed mid-body", "the server closed the connection before the reply was whole (7 of 1,000 bytes received)"),
    ("plain-to-tls", "the TLS handshake failed: the server does not speak TLS on this port"),
])
def test_a_transport_failure_says_what_happened(tmp_path, mode, words):
    """Hostile-tester trial (issue 28 B10): a judge sending 2000 headers of 8 KB, or one of 50 MB,
    failed with 'connection error: Connection error.' (openai's words for any transport failure).
    Each failure now says what happened, in plain words, never a class name; a body cut short is a
    failure of the call (it escaped the judge before)."""
    import socket

    from fair_forge_beam.components.judge import OpenAIJudgeHandler

    if mode == "refused":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        url, stop = f"http://127.0.0.1:{s.getsockname()[1]}/v1", (lambda: None)
        s.close()
    else:
        url, stop = _raw_server(mode)
    try:
        handler = OpenAIJudgeHandler("m", url, cache_path=None, output_schema=ContextJudgeOutput, num_retries=0,
                                     client_retries=0, request_timeout=5, api_key_env="FFB_TEST_UNSET_KEY")
        client = handler.create_client()
        try:
            (res,) = handler.request([judge_request("k", [("user", "judge this")])], client)
        finally:
            client.close()
    finally:
        stop()
    assert not res.ok and words in res.error, res.error
    assert "Connection error." not in res.error and "Error" not in res.error, res.error
