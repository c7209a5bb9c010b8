"""A small scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and demos.

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models`` over real HTTP (stdlib
``ThreadingHTTPServer``, one thread per connection, HTTP/1.1 keep-alive), answers from a script
and injects faults on demand::

    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

    def answer(req):                       # ChatRequest -> str | dict | list | Reply
        return {"score": 1.0, "insight": req.prompt[:20]}

    with ScriptedOpenAIServer(answer, latency=0.02,
                              faults=[Fault("rate_limit", match="item-7", attempts={1})]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="unused")
        ...
        assert srv.count() == 51

Faults (``Fault.kind``): ``"rate_limit"`` (429 with ``Retry-After``), ``"unavailable"`` (503 with
``Retry-After``), ``"server_error"`` (500), ``"bad_request"`` (400), ``"slow"`` (extra delay, then
a normal answer — longer than the client's timeout it emulates a timeout), ``"malformed"`` (200
whose body is not JSON), ``"invalid"`` (200 whose message content is JSON that fits no schema).
A fault fires on given arrival numbers, on prompts containing a substring, with a seeded
probability, and optionally only on given attempts of the same prompt (``attempts={1}`` = the
first try of each matching prompt only, so a retry succeeds).

``accept_json_schema=False`` / ``accept_json_object=False`` make the server answer 400 to
``response_format`` of that type, like servers that lack structured output.

Run ``python -m fair_forge_beam.testing.openai_server --port 8000 --answer '{"score": 1}'`` for a
demo endpoint.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: a Ctrl-C while it still imports is one line (fix47b)
    from fair_forge_beam.console import starting

    starting("python -m fair_forge_beam.testing.openai_server", "server")

import argparse
import hashlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Collection, Optional, Union

__all__ = ["ScriptedOpenAIServer", "Fault", "Reply", "ChatRequest", "FAULT_KINDS"]

FAULT_KINDS = ("rate_limit", "unavailable", "server_error", "bad_request", "slow", "malformed", "invalid")

MALFORMED_BODY = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"message": {"content": "'
INVALID_CONTENT = '{"__not_in_any_schema__": true}'


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completion request as the script sees it.

    ``number``: 1-based arrival order among chat requests (concurrent requests get numbers in
    the order their bodies were read). ``attempt``: 1-based count of requests seen so far with
    the same ``messages`` (so a client retry of one prompt has ``attempt == 2``).
    ``received_at``: ``time.monotonic()`` when the body was read.
    """

    number: int
    attempt: int
    body: dict
    received_at: float = 0.0

    @property
    def messages(self) -> list:
        return list(self.body.get("messages") or [])

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def prompt(self) -> str:
        """All message contents joined by newlines (text parts only)."""
        return "\n".join(_content_text(m.get("content")) for m in self.messages if isinstance(m, dict))

    @property
    def response_format(self) -> Optional[dict]:
        rf = self.body.get("response_format")
        return rf if isinstance(rf, dict) else None

    @property
    def json_schema(self) -> Optional[dict]:
        """The JSON schema sent with ``response_format={"type": "json_schema", ...}``, else None."""
        rf = self.response_format or {}
        if rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("schema")
        return None


@dataclass
class Reply:
    """A scripted answer with full control.

    ``content``: message content (None → ``null``). ``reasoning_content``: sent as the
    non-standard ``message.reasoning_content`` field when not None. ``status`` ≠ 200 sends an
    OpenAI-style error body with ``content`` as the message. ``headers``: extra response headers.
    ``delay``: seconds to wait before answering (on top of the server latency). ``body``: raw
    response bytes that replace everything else (for malformed answers). ``finish_reason``:
    sent as the choice's ``finish_reason`` (``"length"`` emulates a reply cut by the token
    limit). ``logprobs``: the choice's ``logprobs`` object as sent (e.g. ``{"content": [{"token",
    "logprob", "bytes", "top_logprobs": [...]}]}``); None → ``null``.

    Huge replies (never held whole by the server): ``pad_to`` > 0 sends a valid reply (the
    completion, or the error body with ``status`` ≠ 200) padded to about ``pad_to`` bytes with a
    non-standard ``x_padding`` field, written in 1 MiB pieces; ``chunked`` sends it with
    ``Transfer-Encoding: chunked`` (no ``Content-Length``: the client learns the size only by
    reading); ``gzip`` compresses it (``Content-Encoding: gzip``, chunked): a small wire size
    for a large decoded reply.

    Slow replies: ``drip`` > 0 writes the body one byte at a time, ``drip`` seconds apart (each
    read of a client gets a byte well within its time-out; the whole reply takes ``drip`` × its
    size); with ``drip_headers`` the status line and headers are dripped too.
    """

    content: Optional[str] = None
    reasoning_content: Optional[str] = None
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    body: Optional[bytes] = None
    finish_reason: str = "stop"
    logprobs: Optional[dict] = None
    pad_to: int = 0
    chunked: bool = False
    gzip: bool = False
    drip: float = 0.0
    drip_headers: bool = False


@dataclass
class Fault:
    """A fault to inject; the first fault (in list order) that matches a request applies.

    Selection (any of): ``requests`` — arrival numbers (1-based); ``match`` — substring of the
    prompt; ``probability`` — per-request chance drawn from the server's seeded generator. With
    none of them the fault matches every request. ``attempts`` (optional) further restricts it
    to those attempt numbers of the same prompt. ``times`` caps how often it fires in all.

    ``retry_after``: the ``Retry-After`` header value (seconds, as text; None → no header);
    ``"default"`` sends ``1`` with ``rate_limit`` / ``unavailable`` and nothing with
    ``server_error`` / ``bad_request``. ``delay``: seconds of extra latency for ``slow``.
    ``content``: the message content for ``invalid`` (default: a JSON object no schema accepts).
    """

    kind: str
    requests: Collection[int] = ()
    match: Optional[str] = None
    probability: float = 0.0
    attempts: Optional[Collection[int]] = None
    times: Optional[int] = None
    retry_after: Optional[str] = "default"
    delay: float = 5.0
    content: Optional[str] = None

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be in [0, 1]")


Answer = Union[None, str, dict, list, Reply, Callable[[ChatRequest], Any]]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _tokens(text: Optional[str]) -> int:
    return len(text.split()) if text else 0


class ScriptedOpenAIServer:
    """OpenAI-compatible chat server on ``127.0.0.1`` (port 0 → a free port), as a context manager.

    Args:
      answer: a fixed content string, a dict/list (sent as JSON text), a :class:`Reply`, or a
        callable ``ChatRequest -> str | dict | list | Reply`` computing the answer from the
        request. Default: the content ``"OK"``.
      latency: seconds slept before every chat answer (e.g. 0.02 for benchmarks).
      faults: :class:`Fault` list.
      seed: seed of the generator used by probabilistic faults.
      accept_json_schema / accept_json_object: when False, a request with that
        ``response_format`` type gets HTTP 400.
      model: the model id listed by ``/v1/models`` (requests may name any model).
      port: 0 picks a free port.

    Counters (thread-safe): :meth:`count` (chat requests, optionally by status),
    ``by_status`` (``Counter`` of status codes), ``requests`` (every :class:`ChatRequest`),
    ``usage_totals`` (``prompt_tokens`` / ``completion_tokens`` of the completions sent),
    ``authorizations`` (``Counter`` of ``Authorization`` header values — test use only), ``paths``
    (``Counter`` of the chat requests' paths, query string included).
    Raises ``RuntimeError`` when started twice.
    """

    def __init__(
        self,
        answer: Answer = None,
        *,
        latency: float = 0.0,
        faults: Collection[Fault] = (),
        seed: int = 0,
        accept_json_schema: bool = True,
        accept_json_object: bool = True,
        model: str = "scripted-model",
        port: int = 0,
    ):
        self.answer = answer
        self.latency = float(latency)
        self.faults = list(faults)
        self.accept_json_schema = accept_json_schema
        self.accept_json_object = accept_json_object
        self.model = model
        self._port = port
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.reset_counts()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "ScriptedOpenAIServer":
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stop.clear()
        httpd = _Server(("127.0.0.1", self._port), _Handler)
        try:  # a start cut short (Ctrl-C) undoes itself: the port is closed, nothing serves
            httpd.daemon_threads = True
            httpd.scripted = self  # type: ignore[attr-defined]
            thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            thread.start()
        except BaseException:
            httpd.server_close()
            raise
        self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stop.set()  # wakes slow handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "ScriptedOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (what OpenAI clients take as ``base_url``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- counters ----------------------------------------------------------------------------
    def reset_counts(self) -> None:
        with self._lock:
            self.requests: list[ChatRequest] = []
            self.by_status: Counter = Counter()
            self.authorizations: Counter = Counter()
            self.paths: Counter = Counter()
            self._attempts: Counter = Counter()
            self._fault_fired: Counter = Counter()
            self._received = 0
            self.usage_totals: Counter = Counter()

    def count(self, status: Optional[int] = None) -> int:
        """Chat-completion requests received (counted on arrival, so a request whose client timed
        out is counted too), or those answered with ``status`` (counted when the answer is sent)."""
        with self._lock:
            return self._received if status is None else self.by_status[status]

    def _arrived(self) -> None:
        with self._lock:
            self._received += 1

    # -- request handling (called from handler threads) --------------------------------------
    def _register(self, body: dict, authorization: Optional[str]) -> ChatRequest:
        key = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            self._attempts[key] += 1
            req = ChatRequest(number=len(self.requests) + 1, attempt=self._attempts[key], body=body, received_at=time.monotonic())
            self.requests.append(req)
            if authorization is not None:
                self.authorizations[authorization] += 1
        return req

    def _record_status(self, status: int, usage: Optional[dict] = None) -> None:
        with self._lock:
            self.by_status[status] += 1
            if usage:
                self.usage_totals["prompt_tokens"] += usage["prompt_tokens"]
                self.usage_totals["completion_tokens"] += usage["completion_tokens"]

    def _pick_fault(self, req: ChatRequest) -> Optional[Fault]:
        prompt = req.prompt
        with self._lock:
            for i, f in enumerate(self.faults):
                if f.times is not None and self._fault_fired[i] >= f.times:
                    continue
                if f.attempts is not None and req.attempt not in f.attempts:
                    continue
                selectors = bool(f.requests) or f.match is not None or f.probability > 0
                hit = not selectors
                if f.requests and req.number in f.requests:
                    hit = True
                if f.match is not None and f.match in prompt:
                    hit = True
                if not hit and f.probability > 0 and self._rng.random() < f.probability:
                    hit = True
                if hit:
                    self._fault_fired[i] += 1
                    return f
        return None

    def _answer(self, req: ChatRequest) -> Reply:
        ans = self.answer
        if callable(ans) and not isinstance(ans, Reply):
            ans = ans(req)
        if ans is None:
            ans = "OK"
        if isinstance(ans, Reply):
            return ans
        if isinstance(ans, (dict, list)):
            return Reply(content=json.dumps(ans, ensure_ascii=False))
        return Reply(content=str(ans))

    def _completion(self, req: ChatRequest, reply: Reply) -> dict:
        message: dict = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        prompt_tokens = sum(_tokens(_content_text(m.get("content"))) for m in req.messages if isinstance(m, dict))
        completion_tokens = _tokens(reply.content) + _tokens(reply.reasoning_content)
        return {
            "id": f"chatcmpl-{req.number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": reply.logprobs}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _sleep(self, seconds: float) -> bool:
        """Sleep; False when the server is stopping."""
        return not (seconds > 0 and self._stop.wait(seconds))


class _Server(ThreadingHTTPServer):
    # the default listen backlog (5) drops connections when a client opens many at once; the
    # client then sees a connect timeout for a request the server never received
    request_queue_size = 256
    daemon_threads = True


def _error_body(status: int, message: str, typ: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": typ, "param": None, "code": status}}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedOpenAI/1.0"
    # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every keep-alive answer
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr access log
        pass

    @property
    def app(self) -> ScriptedOpenAIServer:
        return self.server.scripted  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, headers: Optional[dict] = None, content_type: str = "application/json"):
        headers = dict(headers or {})
        for k in [k for k in headers if k.lower() == "content-type"]:  # a scripted type replaces the default
            content_type = str(headers.pop(k))
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # the client gave up (timeout)

    def _send_padded(self, reply: Reply, doc: dict) -> None:
        """``doc`` as JSON with an ``x_padding`` field of about ``reply.pad_to`` bytes, streamed."""
        import zlib

        head = json.dumps(doc, ensure_ascii=False).encode("utf-8")[:-1] + b', "x_padding": "'
        pad = max(0, reply.pad_to - len(head) - 2)
        piece = b"a" * (1 << 20)

        def pieces():
            yield head
            left = pad
            while left > 0:
                yield piece[: min(left, len(piece))]
                left -= len(piece)
            yield b'"}'

        chunks = pieces()
        if reply.gzip:
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            chunks = (c for c in [*(z.compress(p) for p in pieces()), z.flush()] if c)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            if reply.chunked or reply.gzip:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(head) + pad + 2))
            if reply.gzip:
                self.send_header("Content-Encoding", "gzip")
            for k, v in reply.headers.items():
                self.send_header(k, str(v))
            self.end_headers()
            for c in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c) if (reply.chunked or reply.gzip) else c)
            if reply.chunked or reply.gzip:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # the client stopped reading (a bounded reader)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = {"object": "list", "data": [{"id": self.app.model, "object": "model", "created": 0, "owned_by": "scripted"}]}
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, _error_body(404, f"no route {self.path}", "not_found"))

    def do_POST(self):
        app = self.app
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        from urllib.parse import urlsplit

        if urlsplit(self.path).path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):  # a query is the client's
            self._send(404, _error_body(404, f"no route {self.path}", "not_found"))
            return
        with app._lock:
            app.paths[self.path] += 1
        app._arrived()
        try:
            body = json.loads(raw.decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except (UnicodeDecodeError, ValueError) as exc:
            app._record_status(400)
            self._send(400, _error_body(400, f"request body is not a JSON object: {exc}", "invalid_request_error"))
            return
        req = app._register(body, self.headers.get("Authorization"))

        rf_type = (req.response_format or {}).get("type")
        if (rf_type == "json_schema" and not app.accept_json_schema) or (rf_type == "json_object" and not app.accept_json_object):
            app._record_status(400)
            self._send(400, _error_body(400, f"response_format type {rf_type!r} is not supported", "invalid_request_error"))
            return

        if not app._sleep(app.latency):
            return
        fault = app._pick_fault(req)
        reply: Optional[Reply] = None
        if fault is not None:
            kind = fault.kind
            if kind in ("rate_limit", "unavailable", "server_error", "bad_request"):
                status = {"rate_limit": 429, "unavailable": 503, "server_error": 500, "bad_request": 400}[kind]
                retry_after = fault.retry_after
                if retry_after == "default":
                    retry_after = "1" if kind in ("rate_limit", "unavailable") else None
                headers = {"Retry-After": retry_after} if retry_after is not None else {}
                app._record_status(status)
                self._send(status, _error_body(status, "scripted " + kind.replace("_", " "), kind), headers)
                return
            if kind == "malformed":
                app._record_status(200)
                self._send(200, MALFORMED_BODY)
                return
            if kind == "slow":
                if not app._sleep(fault.delay):
                    return
            if kind == "invalid":
                reply = Reply(content=fault.content if fault.content is not None else INVALID_CONTENT)
        if reply is None:
            try:
                reply = app._answer(req)
            except Exception as exc:  # a script bug becomes a visible 500, not a hung client
                app._record_status(500)
                self._send(500, _error_body(500, f"answer script failed: {type(exc).__name__}: {exc}", "script_error"))
                return
        if reply.delay and not app._sleep(reply.delay):
            return
        if reply.pad_to > 0:
            doc = app._completion(req, reply) if reply.status == 200 else json.loads(_error_body(reply.status, reply.content or "scripted error", "scripted"))
            app._record_status(reply.status, doc.get("usage"))
            self._send_padded(reply, doc)
        elif reply.body is not None:
            app._record_status(reply.status)
            self._send(reply.status, reply.body, reply.headers)
        elif reply.status != 200:
            app._record_status(reply.status)
            self._send(reply.status, _error_body(reply.status, reply.content or "scripted error", "scripted"), reply.headers)
        else:
            completion = app._completion(req, reply)
            app._record_status(200, completion["usage"])
            body = json.dumps(completion, ensure_ascii=False).encode("utf-8")
            if reply.drip > 0:
                self._send_dripped(reply, body)
            else:
                self._send(200, body, reply.headers)

    def _send_dripped(self, reply: Reply, body: bytes) -> None:
        """A 200 with ``body``, written one byte every ``reply.drip`` s (the headers too with
        ``reply.drip_headers``); stops when the client hangs up or the server stops."""
        head = b"".join([b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n",
                         b"Content-Length: %d\r\n" % len(body),
                         *(f"{k}: {v}\r\n".encode("latin-1") for k, v in reply.headers.items()), b"\r\n"])
        try:
            if not reply.drip_headers:
                self.wfile.write(head)
                self.wfile.flush()
                head = b""
            data = head + body
            for i in range(len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                if not self.app._sleep(reply.drip):
                    return
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass
        self.close_connection = True


#: the command, as its lines name it
PROG = "python -m fair_forge_beam.testing.openai_server"


def main(argv: Optional[list] = None) -> None:
    """Serve until interrupted: ``--port``, ``--latency`` (s), ``--answer`` (text or JSON)."""
    from fair_forge_beam.console import start_undone_on_interrupt

    ap = argparse.ArgumentParser(prog=PROG, description="Scripted OpenAI-compatible chat server for demos and tests")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    ap.add_argument("--answer", default="OK", help="fixed answer content (text; JSON text for judges)")
    ap.add_argument("--model", default="scripted-model")
    args = ap.parse_args(argv)
    srv = ScriptedOpenAIServer(args.answer, latency=args.latency, port=args.port, model=args.model)
    try:
        # a Ctrl-C / SIGTERM before it serves: one line, exit code 130 / 143, the port closed (fix47b: a traceback)
        with start_undone_on_interrupt(PROG, lambda: "stopped while starting; nothing is served"):
            srv.start()
        print(f"serving {srv.base_url} (Ctrl-C to stop)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # the documented stop of a serving server
        pass
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
