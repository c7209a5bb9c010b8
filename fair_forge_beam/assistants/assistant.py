"""Running a dataset against the assistant under test (spec §11), through Beam ``RunInference``.

    interactions ─► GroupByKey(session) ─► one element per session (turns sorted by turn_index)
        ─► RunInference(AssistantHandler).with_exception_handling()
        ─► answered sessions + per-session summaries + dead letters ─► files

Endpoints (``AssistantHandler(kind=...)``):

* ``"openai"`` — an OpenAI-compatible Chat Completions endpoint (``base_url``, ``model``), called
  with the ``openai`` client. Messages: the session ``context`` as system message when
  ``send_context``, the earlier successful turns (user query, assistant answer) in order, then
  the turn's query.
* ``"http"`` — any JSON-over-HTTP endpoint: ``url`` plus a ``request_template``, a jinja2 template
  (sandboxed, strict) of the JSON body whose variables are ``query``, ``history`` (list of
  ``{"role", "content"}``), ``messages`` (history + this user turn), ``session_id``,
  ``assistant_id``, ``qa_id``, ``turn_index``, ``context``, ``agentic``, ``language``; use
  ``| tojson`` after every ``{{ … }}`` (numbers aside: checked at construction, so a query can
  never write JSON fields of its own into the body); the rendered text must be JSON. The answer
  is read at ``response_path``: dot-separated keys, and list indices as numbers
  (``choices.0.message.content``); it must be text. Called with ``httpx`` (the client of the
  ``openai`` package) and Beam's ``retry.with_exponential_backoff``.

Retries, throttling, cache — all from maintained code, none hand-rolled:

* per HTTP call, the client's own retry machinery: ``openai`` (``max_retries``: 408/409/429/5xx,
  timeouts, connection errors, exponential backoff, ``Retry-After``) or, for the ``http`` kind,
  Beam's ``retry.with_exponential_backoff`` (408/429/5xx and transport errors incl. time-outs,
  exponential backoff, ``Retry-After`` up to 60 s), ``client_retries`` times;
* every attempt's whole reply (connect, headers, body) must arrive within ``request_timeout``
  seconds (a deadline, not a time per read: a server that drips its reply is cut), and at most
  ``max_reply_bytes`` of it are read;
* ``requests_per_minute`` paces HTTP calls per worker process (the judge's pacer) and an optional
  Beam ``RateLimiter`` is applied per batch; Beam's ``RemoteModelHandler`` retries a batch that
  raised (``num_retries``) with backoff and adaptive throttling;
* a turn's answer is cached (the judge's SQLite cache, content-addressed by endpoint identity,
  messages/body and parameters); errors are never cached, but a turn that failed is not asked again in
  the same run (a batch's retry: :meth:`~fair_forge_beam.components.replies.EndpointClient.one_question`).
  A re-run with the same cache makes no
  call for turns already answered.

A session is one element: its turns go out one after another, each with the history of the
earlier ones. Sessions of a batch run concurrently (``max_concurrency`` per worker process).

A failed turn (an HTTP error or timeout that stays after the client's retries, an answer that
is not text, an invalid rendered request) keeps the original's contract: ``assistant`` =
``"[ERROR] <reason>"``, the ``observation`` gets a line ``[runner error] <reason>``, the success
flag is false; it is left out of the history of the next turns, counted and dead-lettered
(stage ``"runner"``). Every turn gets ``agentic["runner"] = {"ok", "latency_ms", "cached",
"error"}``; the audit dead-letters a turn whose ``ok`` is false (:class:`~fair_forge_beam.io.failed_turns.SkipFailedTurns`), so an
error text is never scored as an answer. ``latency_ms`` is wall time of the turn (a cache hit
costs ~0 ms).

Per-session summary (spec §11): ``session_id``, ``assistant_id``, ``total_batches``,
``successes``, ``failures``, ``cached``, ``total_execution_time_ms``, ``avg_batch_time_ms``.
"""
from __future__ import annotations

import copy
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from fair_forge_beam._beam import beam, inference_base
from apache_beam.ml.inference.base import RemoteModelHandler, RunInference

inference_base()  # Beam's memory measure bound without torch: no "Resource module is not available" line

from fair_forge_beam.components.judge.cache import DEFAULT_CACHE, cache_key, default_cache_path, endpoint_identity
from fair_forge_beam.io.secrets import keys_set_here, register_secret_env, require_keys
from fair_forge_beam.components.replies import (NO_KEY, RequestFailureNotices, limit_setting, REPLY_CHUNK, EndpointClient, NotAnAnswer, ReplyTooLarge, UnreadableReply,
                                                chat_completion_body, check_call_limits, declared_length, http_client, is_streamed_body,
                                                read_bounded, read_chat_reply, redirect_reason)
from fair_forge_beam.io.elements import dead_letter, make_element_id
from fair_forge_beam.io.failed_turns import RUNNER_STAGE
from fair_forge_beam.options import ENDPOINT_DOWN_AFTER, MAX_REPLY_BYTES
from fair_forge_beam.plain import json_kind, plain_reason
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["AssistantHandler", "RunAssistant", "WriteRunOutputs", "render_request", "response_field", "RUNNER_NAMESPACE", "assistant_counters", "sessions_from_interactions",
           "COUNTER_NAMES", "KINDS"]

_LOG = logging.getLogger(__name__)

RUNNER_NAMESPACE = "fair_forge_beam.assistant"
KINDS = ("openai", "http")
COUNTER_NAMES = ("sessions", "turns", "successes", "failures", "cache_hits", "requests")
"""Beam counters in :data:`RUNNER_NAMESPACE`. ``requests``: HTTP requests sent by the ``openai``
client (retries included); the ``http`` kind counts one per turn sent (the retries of Beam's
``retry`` are not counted)."""
ERROR_PREFIX = "[ERROR] "


# ----------------------------------------------------------------------------------------------
# Pure helpers
# ----------------------------------------------------------------------------------------------
class _RawValue(ValueError):
    pass


class _JsonText(str):
    """The text of one ``| tojson`` (a ``str`` subclass whose methods and operators return plain
    ``str``): the only text a request template may print."""

    __slots__ = ()


def _tojson(eval_ctx, value, indent=None):
    """jinja2's own ``tojson`` (its escaping and the environment's ``json.dumps`` policy), marked
    as :class:`_JsonText`. ``indent`` may be a whole number 0-16 only: ``json.dumps`` writes a text
    indent verbatim before every item, so ``tojson(query)`` let a query add fields to the body
    (``'"admin": true, '`` turned ``{"a": 1}`` into ``{"admin": true, "a": 1}``; issue 28's trial)."""
    from jinja2.filters import do_tojson

    if indent is not None and (type(indent) is not int or not 0 <= indent <= 16):
        raise _RawValue("tojson's indent must be a whole number 0-16 (a text indent is written verbatim into the body)")
    return _JsonText(do_tojson(eval_ctx, value, indent))


def _only_json(value: Any) -> Any:
    """Jinja ``finalize``: an expression may print only the output of ``| tojson`` itself or a
    number, so text from outside (queries, history) can never write JSON of its own into the body.
    Anything done to ``tojson``'s output (``| safe``, ``| e``, ``| forceescape``, ``| replace``,
    ``+``, slicing, a method) gives other text and is refused."""
    if type(value) is _JsonText or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise _RawValue("every {{ … }} in a request template must end in | tojson, and tojson must be its last filter "
                    "(text from outside is hostile)")


from fair_forge_beam.components.template_sandbox import MAX_TEMPLATE_VALUE  # noqa: E402,F401 - re-exported


def _bounded_sandbox():
    """jinja2's immutable sandbox under the size and work budget of
    :mod:`~fair_forge_beam.components.template_sandbox` (every operator, ``~``, filter, call, loop
    and printed value is counted before the work is done)."""
    from fair_forge_beam.components.template_sandbox import bounded_sandbox

    return bounded_sandbox()


def _template(source: str, names=None):
    from jinja2 import StrictUndefined, meta, pass_eval_context

    env = _bounded_sandbox()(undefined=StrictUndefined, autoescape=False, finalize=_only_json)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    env.filters["tojson"] = pass_eval_context(_tojson)
    from jinja2 import nodes

    tree = env.parse(source)
    for block in tree.find_all((nodes.FilterBlock, nodes.CallBlock)):
        # a {% filter %} / {% call %} block prints its filtered body without finalize: a filter
        # argument (replace("Q", query), format(query)) would write outside text into the body
        kind = "filter" if isinstance(block, nodes.FilterBlock) else "call"
        raise _RawValue(f"{{% {kind} %}} blocks are not allowed: their output escapes the rule that every {{{{ … }}}} "
                        "must end in | tojson, and tojson must be its last filter (text from outside is hostile)")
    unknown = sorted(meta.find_undeclared_variables(tree) - set(names or ()) - set(env.globals)) if names is not None else []
    if unknown:  # a misspelled name: named here, not a TypeError about an undefined object
        raise _RawValue(f"unknown variable(s) {', '.join(unknown)} (known: {', '.join(sorted(names))})")
    return env.from_string(tree)


def render_request(template: str, values: Mapping[str, Any]) -> Any:
    """The JSON body from ``template`` (jinja2, sandboxed, strict) and ``values``.

    Raises:
        ValueError: one line naming the cause: a missing variable, a ``{{ … }}`` whose last filter
            is not ``tojson`` (and that is no number), any error while rendering (a syntax error,
            the sandbox's limits such as ``range`` over 100,000 items, a recursion), or a result
            that is not JSON.
    """
    try:
        text = _template(template, values).render(**values)
    except Exception as exc:  # noqa: BLE001 — _RawValue, TemplateError, TypeError (| tojson of an undefined name), OverflowError (range), RecursionError, ...
        raise ValueError(f"request template: {plain_reason(exc)}") from None  # plain words, no class name
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"request template did not render to JSON ({plain_reason(exc)}); use | tojson for every "
                         "value") from None


def response_field(doc: Any, path: str) -> Any:
    """``doc`` at the dotted ``path`` (keys; numbers index lists). Raises ``ValueError`` when a
    step is missing."""
    cur = doc
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise ValueError(f"response has no field {quoted(path)} (stopped at {quoted(part)})")
    return cur


# ----------------------------------------------------------------------------------------------
# Worker-side client
# ----------------------------------------------------------------------------------------------
@dataclass
class _Config:
    kind: str
    model: str
    base_url: Optional[str]
    url: Optional[str]
    request_template: Optional[str]
    response_path: str
    api_key_env: str
    params: dict
    send_context: bool
    cache_path: Optional[str]
    request_timeout: float
    max_concurrency: int
    requests_per_minute: Optional[float]
    client_retries: int
    headers: dict = field(default_factory=dict)
    max_reply_bytes: int = MAX_REPLY_BYTES
    endpoint_down_after: int = ENDPOINT_DOWN_AFTER  # dead batches in a row after which the run stops asking (0: never)
    role: str = "assistant"
    launch_keys: tuple = ()  # key variables set where the runner was built (names only): a worker must have them

    @property
    def identity(self) -> str:
        if self.kind == "openai":
            return f"openai:{endpoint_identity(self.model, self.base_url)}"
        return f"http:{self.url}"


class _TurnFailed(Exception):
    pass


class _TurnTooLarge(_TurnFailed):
    """A reply over the size limit: never cached, never kept for a later identical turn."""


class _TurnTransient(_TurnFailed):
    """A time-out, refused connection or 408/409/429/5xx still failing after the client's retries: what
    says, batch after batch, that the endpoint is down (:class:`~fair_forge_beam.components.replies.EndpointHealth`)."""


#: HTTP statuses of a generic endpoint's reply that are asked again (``client_retries`` times)
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: the longest ``Retry-After`` (seconds) waited before asking again; a longer one is cut to it
MAX_RETRY_AFTER = 60.0


class _RetryStatus(Exception):
    """A reply of :data:`RETRY_STATUSES`: asked again by Beam's retry after the server's
    ``Retry-After`` (seconds, at most :data:`MAX_RETRY_AFTER`), if it gave one."""

    def __init__(self, status: int, raw: bytes, retry_after: Optional[str]):
        super().__init__(f"HTTP {status}")
        self.status, self.raw = status, raw
        try:
            wait = float(retry_after) if retry_after is not None else 0.0
        except ValueError:  # an HTTP date: Beam's backoff alone
            wait = 0.0
        self.retry_after = min(max(wait, 0.0), MAX_RETRY_AFTER) if wait == wait else 0.0


def _retryable(exc: Exception) -> bool:
    """Beam's retry filter of a generic endpoint's attempt: a refused reply (after its
    ``Retry-After``) or a transport error (time-outs included) is asked again; anything else
    (a reply over the size limit, a bad rendered body) is final."""
    import httpx2

    if isinstance(exc, _RetryStatus):
        if exc.retry_after:
            time.sleep(exc.retry_after)
        return True
    return isinstance(exc, httpx2.TransportError)


@dataclass
class _BatchTally:
    """One batch across Beam's attempts: ``sent``, the HTTP requests of its failed attempts."""

    batch: Any
    attempt: int = 0
    sent: int = 0


class _Client(EndpointClient):
    """An endpoint's client shared by the threads of a process (:class:`EndpointClient`): an
    ``openai`` client, or for the ``http`` kind a plain ``httpx`` one with the key as its bearer."""

    def __init__(self, cfg: _Config, api_key: str):
        super().__init__(cfg, api_key, "fair-forge-assistant")
        self._tally_lock = threading.Lock()
        self._tallies: dict = {}  # id(batch) -> _BatchTally
        if cfg.kind == "openai":
            import openai

            self._openai = openai
            self.client = self.openai_client(openai, api_key, cfg.headers)
        else:
            hdrs = dict(cfg.headers)
            if self._secret:
                hdrs.setdefault("Authorization", f"Bearer {self._secret}")
            self.client = http_client(cfg.request_timeout, hdrs, cfg.client_retries)

    def batch_attempt(self, batch: Sequence[str]) -> "_BatchTally":
        """The tally of ``batch`` across Beam's attempts of it (Beam retries a batch with the same
        object), its ``attempt`` counted up: the requests its failed attempts sent."""
        with self._tally_lock:
            tally = self._tallies.get(id(batch))
            if tally is None or tally.batch is not batch:  # the batch held: its id is not reused while the tally lives
                tally = self._tallies[id(batch)] = _BatchTally(batch)
            tally.attempt += 1
            return tally

    def batch_done(self, batch: Sequence[str]) -> None:
        with self._tally_lock:
            self._tallies.pop(id(batch), None)

    def count_request(self) -> None:
        # HTTP requests of the session running in this thread (a session runs in one thread); returned
        # with the session's result and counted by the DoFn: Beam counters incremented in the executor's
        # threads are outside Beam's metrics context and lost
        self._local.requests = getattr(self._local, "requests", 0) + 1

    # -- one turn ----------------------------------------------------------------------------
    def _call_openai(self, messages: list) -> str:
        openai = self._openai
        try:
            data, _body = chat_completion_body(self.client, self.cfg.max_reply_bytes, model=self.cfg.model,
                                               messages=messages, **self.cfg.params)
        except ReplyTooLarge as exc:
            raise _TurnTooLarge(exc.reason("--assistant-max-reply-bytes")) from None
        except UnreadableReply as exc:
            raise _TurnFailed(f"unreadable answer: {plain_reason(exc)}"[:2000]) from None
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:  # time-outs included
            raise _TurnTransient(self.describe(exc)) from None
        except openai.APIStatusError as exc:
            raise (_TurnTransient if exc.status_code in (408, 409) else _TurnFailed)(self.describe(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a malformed body and the like: the turn fails, the run goes on
            raise _TurnFailed(f"unreadable answer: {self.scrub(plain_reason(exc))}"[:2000]) from None
        try:  # the one reader of every chat reply: the same reason as the audit's judge gives for this reply
            return read_chat_reply(data, "used as the assistant's answer",
                                   limit_setting(self.cfg.params, "AssistantHandler(params={'max_tokens': …})")).content  # "" is an answer (an empty one)
        except NotAnAnswer as no:  # refused, cut, withheld, a tool call, content not text…: not the assistant's whole answer
            raise _TurnFailed(no.reason) from None

    def _call_http(self, body: Any) -> str:
        import httpx2
        from apache_beam.utils import retry

        cfg = self.cfg
        self.on_request()

        @retry.with_exponential_backoff(num_retries=cfg.client_retries, initial_delay_secs=0.5, max_delay_secs=30,
                                        retry_filter=_retryable, logger=_LOG.info)
        def attempt() -> tuple:
            with self.client.stream("POST", cfg.url, json=body) as resp:  # the body read here, never past the limit
                try:
                    raw = read_bounded(resp.iter_bytes(REPLY_CHUNK), cfg.max_reply_bytes, declared_length(resp.headers))
                except ReplyTooLarge as exc:
                    raise _TurnTooLarge(f"HTTP {resp.status_code}: {exc.reason('--assistant-max-reply-bytes')}") from None
            moved = redirect_reason(resp)
            if moved:
                raise _TurnFailed(moved)
            if resp.status_code in RETRY_STATUSES:
                raise _RetryStatus(resp.status_code, raw, resp.headers.get("retry-after"))
            return resp.status_code, raw, resp.headers.get("content-type")

        content_type = None
        try:
            status, raw, content_type = attempt()
        except _RetryStatus as exc:  # still refused after the retries: the last reply is the reason
            status, raw = exc.status, exc.raw
        except httpx2.HTTPError as exc:  # time-outs included
            raise _TurnTransient(self.describe(exc)) from None
        text = raw.decode("utf-8", "replace")  # JSON is UTF-8 (RFC 8259)
        if status != 200:
            raise (_TurnTransient if status in RETRY_STATUSES else _TurnFailed)(f"HTTP {status}: {self.scrub(text)[:500]}")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            if is_streamed_body(content_type, text):  # trial40 J6: "not JSON" named no cause
                raise _TurnFailed("response is a streamed reply (text/event-stream, 'data:' events), not one JSON "
                                  f"document; configure the endpoint for whole replies: {self.scrub(text)[:500]}") from None
            raise _TurnFailed(f"response is not JSON: {self.scrub(text)[:500]}") from None
        try:
            value = response_field(doc, cfg.response_path)
        except ValueError as exc:
            raise _TurnFailed(plain_reason(exc)) from None
        if not isinstance(value, str):
            raise _TurnFailed(f"response field {quoted(cfg.response_path)} is {json_kind(value)}, not text")
        return value

    def _answer(self, session: dict, turn: dict, turn_index: int, history: list) -> tuple[str, bool]:
        cfg = self.cfg
        if cfg.kind == "openai":
            messages = ([{"role": "system", "content": session.get("context") or ""}] if cfg.send_context and session.get("context") else [])
            messages += history + [{"role": "user", "content": turn["query"]}]
            key_doc: Any = [["session", json.dumps([session["session_id"], session["assistant_id"]], ensure_ascii=False)], *([m["role"], m["content"]] for m in messages)]
        else:
            values = {"query": turn["query"], "history": history, "messages": history + [{"role": "user", "content": turn["query"]}],
                      "session_id": session["session_id"], "assistant_id": session["assistant_id"], "qa_id": turn["qa_id"],
                      "turn_index": turn_index, "context": session.get("context") or "", "agentic": turn.get("agentic") or {},
                      "language": session.get("language") or "english"}
            try:
                body = render_request(cfg.request_template, values)
            except ValueError as exc:
                raise _TurnFailed(plain_reason(exc)) from None
            key_doc = [["session", json.dumps([session["session_id"], session["assistant_id"]], ensure_ascii=False)], ["request", json.dumps(body, sort_keys=True, ensure_ascii=False)]]
        key = cache_key(cfg.identity, key_doc, cfg.params, None, 0)
        with self.one_question(key) as question:  # a turn that failed is not asked again in this run (a batch's retry)
            if question.known is not None:
                raise _TurnFailed(question.known)
            if self.cache is not None:
                hit = self.cache.get(key)
                if hit is not None and isinstance(hit.get("answer"), str):
                    return self.scrub(hit["answer"]), True  # an entry written before a spelling of the key was masked
            down = self.health.reason()
            if down is not None:  # the endpoint failed whole batches after all their retries: not asked again this run
                raise _TurnFailed(down)
            try:
                answer = self.scrub(self._call_openai(messages) if cfg.kind == "openai" else self._call_http(body))
            except _TurnFailed as exc:
                question.failed(str(exc), len(str(exc)), final=not isinstance(exc, _TurnTooLarge))
                raise
            if self.cache is not None:
                self.cache.put(key, {"answer": answer})
        return answer, False

    def run_session(self, session_json: str) -> dict:
        """Run one session turn by turn; returns ``{"session", "summary", "dead_letters", "counts", "endpoint"}``
        (``counts``: this session's :data:`COUNTER_NAMES` values). An exception that escapes it (the
        batch fails) carries ``requests_sent``: the HTTP requests this session had sent."""
        self._local.requests = 0
        self._local.replied, self._local.transient = False, None  # what the session's turns said of the endpoint
        try:
            return self._run_session(session_json)
        except BaseException as exc:
            try:
                exc.requests_sent = int(self._local.requests)
            except Exception:  # noqa: BLE001 - an exception that takes no attribute: its requests stay uncounted
                pass
            raise

    def _run_session(self, session_json: str) -> dict:
        session = json.loads(session_json)
        out = copy.deepcopy(session)
        history: list[dict] = []
        successes = failures = cached_n = 0
        total_ms = 0.0
        dead = []
        for i, turn in enumerate(out["conversation"]):
            t0 = time.perf_counter()
            error, cached = None, False
            sent_before, transient = int(self._local.requests), False
            try:
                answer, cached = self._answer(session, turn, i, history)
            except _TurnFailed as exc:
                error = self.scrub(exc)
                transient = isinstance(exc, _TurnTransient)
                if transient:
                    self._local.transient = error
            if self._local.requests > sent_before and not transient:
                self._local.replied = True  # the endpoint answered this turn (an answer, or a reply that is none): it is up
            ms = round((time.perf_counter() - t0) * 1000.0, 3)
            total_ms += ms
            agentic = dict(turn.get("agentic") or {})
            agentic["runner"] = {"ok": error is None, "latency_ms": ms, "cached": cached, "error": error}
            turn["agentic"] = agentic
            if error is None:
                successes += 1
                cached_n += int(cached)
                turn["assistant"] = answer
                history += [{"role": "user", "content": turn["query"]}, {"role": "assistant", "content": answer}]
            else:
                failures += 1
                turn["assistant"] = ERROR_PREFIX + error
                obs = turn.get("observation")
                turn["observation"] = (f"{obs}\n" if obs else "") + f"[runner error] {error}"
                eid = make_element_id(out["session_id"], out["assistant_id"], i)
                raw = {k: turn.get(k) for k in ("qa_id", "query")}
                dead.append(dead_letter(RUNNER_STAGE, f"assistant call failed: {error}", raw, element_id=eid,
                                        source=f"runner:{cfg_identity(self.cfg)}")._asdict())
        n = len(out["conversation"])
        summary = {"session_id": out["session_id"], "assistant_id": out["assistant_id"], "total_batches": n,
                   "successes": successes, "failures": failures, "cached": cached_n,
                   "total_execution_time_ms": round(total_ms, 3), "avg_batch_time_ms": round(total_ms / n, 3) if n else 0.0}
        counts = {"sessions": 1, "turns": n, "successes": successes, "failures": failures, "cache_hits": cached_n,
                  "requests": int(self._local.requests)}
        return {"session": out, "summary": summary, "dead_letters": dead, "counts": counts,
                "endpoint": (int(self._local.requests) > 0, bool(self._local.replied), self._local.transient)}


def cfg_identity(cfg: _Config) -> str:
    return cfg.identity


# ----------------------------------------------------------------------------------------------
# The handler
# ----------------------------------------------------------------------------------------------
class AssistantHandler(RemoteModelHandler):
    """Beam ``RemoteModelHandler`` whose element is one session (JSON text of a ``Dataset`` with
    its turns in order) and whose result is ``{"session", "summary", "dead_letters"}``.

    Args:
      kind: ``"openai"`` or ``"http"`` (module docstring).
      model: model name (``openai``; required there).
      base_url: OpenAI-compatible base URL (``openai``), e.g. ``http://localhost:8000/v1``.
      url: the endpoint (``http``; required there).
      request_template: JSON body template (``http``; required there; checked at construction
        against a sample turn).
      response_path: dotted path of the answer in the response (``http``).
      api_key_env: environment variable with the API key, read on the worker (``openai``: the
        client's key; ``http``: sent as ``Authorization: Bearer``; unset → no key).
      params: extra request parameters (``openai``: ``temperature``, ``max_tokens``, …); part of
        the cache key (with the session — its id and assistant id, as sessions are keyed —, the
        messages or rendered body, and the endpoint: two
        sessions that send the same turn each get their own answer and cache entry, so the
        number of calls and a cached re-run's file never depend on which of them ran first).
      send_context: send the session's ``context`` as system message (``openai``).
      cache_path: SQLite cache file, ``"default"`` (the judge's default location) or None.
      request_timeout: seconds per HTTP request (> 0).
      max_concurrency: sessions in flight per worker process (≥ 1).
      requests_per_minute: optional cap on HTTP calls per worker process.
      client_retries: retries per HTTP call by the client (≥ 0).
      num_retries / throttle_delay_secs: Beam's batch-level retries and adaptive throttling.
      rate_limiter: optional Beam ``RateLimiter``.
      headers: extra HTTP headers (no secrets: they would be pickled).
      max_reply_bytes: largest reply read, in bytes (> 0; default
        :data:`~fair_forge_beam.options.MAX_REPLY_BYTES`, 4 MiB); a longer reply is read no further
        (:mod:`~fair_forge_beam.components.replies`) and fails the turn with a reason naming its size
        and the limit (never cached).
      endpoint_down_after: batches in a row whose every turn sent failed transiently (time-out, refused
        connection, 408/409/429/5xx after the client's retries) and none got a reply, after which this run
        (per worker process) sends the endpoint nothing more: every later turn not in the cache fails at
        once, ``assistant endpoint down: …`` (:class:`~fair_forge_beam.components.replies.EndpointHealth`;
        0: never).

    Raises ``ValueError`` on an invalid configuration.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, kind: str = "openai", *, model: str = "", base_url: Optional[str] = None, url: Optional[str] = None,
                 request_template: Optional[str] = None, response_path: str = "answer", api_key_env: str = "ASSISTANT_API_KEY",
                 params: Optional[Mapping[str, Any]] = None, send_context: bool = False, cache_path: Optional[str] = None,
                 request_timeout: float = 60.0, max_concurrency: int = 16, requests_per_minute: Optional[float] = None,
                 client_retries: int = 3, num_retries: int = 2, throttle_delay_secs: int = 5, rate_limiter=None,
                 headers: Optional[Mapping[str, str]] = None, namespace: str = RUNNER_NAMESPACE,
                 max_reply_bytes: int = MAX_REPLY_BYTES, endpoint_down_after: int = ENDPOINT_DOWN_AFTER):
        if kind not in KINDS:
            from fair_forge_beam.quoting import did_you_mean

            raise ValueError(f"kind must be one of {KINDS}{did_you_mean(kind, KINDS)}")  # the value is not shown: it may be a secret
        if kind == "openai" and not model:
            raise ValueError("an OpenAI-compatible assistant needs a model name")
        if kind == "http":
            if not url:
                raise ValueError("an HTTP assistant needs a url")
            if not request_template:
                raise ValueError("an HTTP assistant needs a request template")
            sample = {"query": "q", "history": [], "messages": [{"role": "user", "content": "q"}], "session_id": "s",
                      "assistant_id": "a", "qa_id": "q1", "turn_index": 0, "context": "", "agentic": {}, "language": "english"}
            render_request(request_template, sample)  # fail fast on a template that cannot work
            if not response_path:
                raise ValueError("an HTTP assistant needs a response path")
            if any(not step.strip() for step in str(response_path).split(".")):  # '.', 'a..b', 'a.': no reply has it
                raise ValueError(f"response path {quoted(response_path)} has an empty step; give dot-separated keys and "
                                 f"list indices, e.g. 'choices.0.message.content'")
        from fair_forge_beam.components.judge.arguments import check_sampling

        check_sampling("params", params)  # a known parameter of the wrong type, never shown (trial38b B12)
        params = dict(params or {})
        bad = sorted(set(params) & {"model", "messages", "stream", "n"})
        if bad:
            raise ValueError(f"parameters {bad} are set by the runner itself")
        check_call_limits(request_timeout, max_concurrency, requests_per_minute, (client_retries, num_retries),
                          max_reply_bytes)
        if isinstance(endpoint_down_after, bool) or int(endpoint_down_after) < 0:
            raise ValueError(f"endpoint_down_after must be >= 0 (0: never), got {quoted(endpoint_down_after)}")
        if api_key_env:
            register_secret_env(api_key_env)
        super().__init__(namespace=namespace, num_retries=int(num_retries), throttle_delay_secs=throttle_delay_secs,
                         rate_limiter=rate_limiter)
        self.logger = RequestFailureNotices(self.logger)  # a failed request Beam retries is a warning (fix47b)
        self._cfg = _Config(kind, model, base_url, url, request_template, response_path, api_key_env, params, bool(send_context),
                            cache_path, float(request_timeout), int(max_concurrency), requests_per_minute, int(client_retries),
                            dict(headers or {}), int(max_reply_bytes), int(endpoint_down_after),
                            launch_keys=keys_set_here((api_key_env,)) if api_key_env else ())
        self._namespace = namespace
        self._batch_kwargs = {"min_batch_size": int(max_concurrency), "max_batch_size": 4 * int(max_concurrency)}

    @property
    def model_name(self) -> str:
        return self._cfg.identity

    def create_client(self) -> _Client:
        import dataclasses
        import os

        cfg = self._cfg
        require_keys(getattr(cfg, "launch_keys", ()), cfg.role)  # one line when the launcher had the key and this worker has not
        api_key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
        if cfg.cache_path == DEFAULT_CACHE:
            cfg = dataclasses.replace(cfg, cache_path=default_cache_path())
        return _Client(cfg, api_key or NO_KEY)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return dict(self._batch_kwargs)

    def get_metrics_namespace(self) -> str:
        return self._namespace

    def get_num_bytes(self, batch: Sequence[str]) -> int:
        return sum(len(s.encode("utf-8")) for s in batch)

    def request(self, batch: Sequence[str], model: _Client, inference_args: Optional[dict] = None) -> list[dict]:
        """Run the sessions of ``batch`` concurrently (≤ ``max_concurrency``), each turn by turn.

        Every session runs to its end before the batch returns or fails. An attempt in which a
        session raised fails (Beam retries the batch) but its HTTP requests are kept: a later attempt
        that succeeds adds them to its first session's ``requests``; the last attempt returns, for
        every session of the batch, the dead letter a failed batch gets (``"batch failed: …"``,
        as :class:`_FailedBatch` writes it), the requests of all attempts in the first one's
        ``counts``. Before, a failed batch's requests were never counted (issue 29 T6: 18 sent,
        ``requests: 0``). A failure of the machine (a full disk) is raised on every attempt: the run
        stops."""
        from concurrent.futures import wait

        tally = model.batch_attempt(batch)
        futures = [model.executor.submit(model.run_session, s) for s in batch]
        wait(futures)
        failure = next((f.exception() for f in futures if f.exception() is not None), None)
        if failure is None:
            model.batch_done(batch)
            results = [f.result() for f in futures]
            seen = [r.pop("endpoint") for r in results]  # (sent, replied, last transient failure) of each session
            model.health.batch_ended(any(s for s, _r, _t in seen), any(r for _s, r, _t in seen),
                                     next((t for _s, _r, t in reversed(seen) if t), None))
            if results and tally.sent:  # the requests of the earlier, failed attempts of this batch
                results[0]["counts"]["requests"] = int(results[0]["counts"].get("requests", 0)) + tally.sent
            return results
        tally.sent += sum(int(getattr(f.exception(), "requests_sent", 0) or 0) if f.exception() is not None
                          else int(f.result()["counts"].get("requests", 0)) for f in futures)
        from fair_forge_beam.console import environment_failure

        if tally.attempt <= self.num_retries or environment_failure(failure):
            raise failure  # Beam asks the batch again (the machine's failure: the run stops after the retries)
        model.batch_done(batch)  # the last attempt: each session's dead letter, and every request counted
        reason = f"batch failed: {model.scrub(repr(failure))}"[:2000]
        return [{"session": None, "summary": None, "dead_letters": [_batch_dead_letter(s, reason)._asdict()],
                 "counts": {"requests": tally.sent} if i == 0 else {}} for i, s in enumerate(batch)]


def assistant_counters(pipeline_result, namespace: str = RUNNER_NAMESPACE) -> dict[str, int]:
    """The runner's Beam counters (:data:`COUNTER_NAMES`) of a finished pipeline."""
    from apache_beam.metrics.metric import MetricsFilter

    out = {n: 0 for n in COUNTER_NAMES}
    for c in pipeline_result.metrics().query(MetricsFilter().with_namespace(namespace))["counters"]:
        if c.key.metric.name in out:
            out[c.key.metric.name] += int(c.committed or 0)
    return out


# ----------------------------------------------------------------------------------------------
# Transforms
# ----------------------------------------------------------------------------------------------
def _session_json(kv, assistant_id: Optional[str]) -> tuple:
    """A session's interactions → its ``Dataset`` record: every field the session and interaction
    models declare (``chatbot_role``, ``spans`` too: a list of nine dropped them, so a dataset run
    through the assistant lost its roles and PII spans; trial49 B1's class), those two only when
    set (``Interaction.as_record``: a dataset without them is written as before, byte for byte)."""
    from fair_forge_beam.schemas.common import Batch, SessionMetadata

    _, items = kv
    records = [it.as_record() for it in sorted(items, key=lambda it: it.turn_index)]
    rec = {k: records[0][k] for k in SessionMetadata.model_fields if k in records[0]}
    rec["assistant_id"] = assistant_id or rec["assistant_id"]
    rec["conversation"] = [{k: r[k] for k in Batch.model_fields if k in r} for r in records]
    return (rec["session_id"], rec["assistant_id"]), json.dumps(rec, ensure_ascii=False, sort_keys=True)


def sessions_from_interactions(interactions, assistant_id: Optional[str] = None, label: str = "Runner"):
    """``PCollection[Interaction]`` → ``PCollection[str]``: one JSON ``Dataset`` per session,
    turns sorted by ``turn_index``; ``assistant_id`` replaces the sessions' own when given."""
    return (interactions
            | f"{label}KeyBySession" >> beam.Map(lambda it: (it.session_key, it))
            | f"{label}GroupSession" >> beam.GroupByKey()
            | f"{label}SessionJson" >> beam.Map(lambda kv: _session_json(kv, assistant_id)[1]))


@beam.typehints.with_output_types(Any)
class _Split(beam.DoFn):
    """Splits the handler's results; increments the runner's Beam counters here, in the DoFn's
    metrics context, from each result's ``counts``."""

    def __init__(self, namespace: str = RUNNER_NAMESPACE):
        super().__init__()
        self._namespace = namespace

    def setup(self):
        self._ctr = {n: beam.metrics.Metrics.counter(self._namespace, n) for n in COUNTER_NAMES}

    def process(self, res):
        counts = res.get("counts") or {}
        for n in COUNTER_NAMES:
            if counts.get(n):
                self._ctr[n].inc(int(counts[n]))
        yield beam.pvalue.TaggedOutput("counts", dict(counts))
        if res["session"] is not None:  # None: a session of a batch that failed (its dead letter below)
            yield beam.pvalue.TaggedOutput("sessions", res["session"])
            yield beam.pvalue.TaggedOutput("summaries", res["summary"])
        for d in res["dead_letters"]:
            yield beam.pvalue.TaggedOutput("dead_letter", dead_letter(**d))


def _batch_dead_letter(session_json: str, reason: str):
    """The dead letter of a session whose batch failed: stage ``runner``, the session as raw."""
    try:
        rec = json.loads(session_json)
        eid = make_element_id(rec["session_id"], rec["assistant_id"], 0)
    except Exception:  # noqa: BLE001
        eid = None
    return dead_letter(RUNNER_STAGE, reason, session_json, element_id=eid, source=RUNNER_STAGE)


@beam.typehints.with_output_types(Any)
class _FailedBatch(beam.DoFn):
    def process(self, failed):
        batch, exc = failed
        reason = (f"batch failed: {exc[1]}" if isinstance(exc, tuple) and len(exc) >= 2 else f"batch failed: {quoted(exc)}")[:2000]
        from fair_forge_beam.console import environment_failure

        if environment_failure(exc if isinstance(exc, BaseException) else RuntimeError(reason)):
            # a full disk is the machine's failure, never the data's (issue 28 B3): the run stops, exit code 1
            raise RuntimeError(reason)
        for s in batch:
            yield _batch_dead_letter(s, reason)


class RunAssistant(beam.PTransform):
    """``PCollection[Interaction]`` → ``{"sessions": answered Dataset dicts, "summaries":
    per-session summary dicts, "dead_letter": DeadLetter (stage "runner"), "counts": per-session
    dicts of :data:`COUNTER_NAMES` values}``. The Beam counters in the handler's namespace are
    incremented from these counts."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, handler: AssistantHandler, assistant_id: Optional[str] = None):
        super().__init__()
        self._handler, self._assistant_id = handler, assistant_id

    def expand(self, interactions):
        from fair_forge_beam.io.secrets import mask_id

        # --assistant-id replaces the ids read (masked where they were read): masked the same way
        sessions = sessions_from_interactions(interactions, mask_id(self._assistant_id) if self._assistant_id else None)
        main, other = sessions | "RunnerRunInference" >> RunInference(self._handler).with_exception_handling()
        split = main | "RunnerSplit" >> beam.ParDo(_Split(self._handler.get_metrics_namespace())).with_outputs(
            "sessions", "summaries", "dead_letter", "counts")
        failed = other.failed_inferences | "RunnerBatchFailures" >> beam.ParDo(_FailedBatch())
        dead = (split.dead_letter, failed) | "RunnerDead" >> beam.Flatten()
        return {"sessions": split.sessions, "summaries": split.summaries, "dead_letter": dead, "counts": split.counts}


def _write_run(out: str, sessions: list, summaries: list, dead: list, counts: dict, run_counts: Optional[list] = None) -> list[str]:
    from fair_forge_beam.io.write import OutputFiles, sorted_dead_letters

    def order(d):
        return (d["session_id"], d["assistant_id"])

    files = OutputFiles(out)
    sessions = sorted(sessions, key=order)
    summaries = sorted(summaries, key=order)
    dead_sorted = sorted_dead_letters(dead)
    files.put_jsonl("dataset.jsonl", sessions)
    files.put_jsonl("session_summaries.jsonl", summaries)
    files.put_jsonl("dead_letter.jsonl", dead_sorted)
    total_ms = sum(s["total_execution_time_ms"] for s in summaries)
    turns = sum(s["total_batches"] for s in summaries)
    doc = {"sessions": len(sessions), "turns": turns, "successes": sum(s["successes"] for s in summaries),
           "failures": sum(s["failures"] for s in summaries), "cached": sum(s["cached"] for s in summaries),
           "dead_letters": len(dead_sorted), "dead_letters_by_stage": _by_stage(dead_sorted),
           "total_execution_time_ms": round(total_ms, 3), "avg_turn_time_ms": round(total_ms / turns, 3) if turns else 0.0,
           **counts}
    if run_counts is not None:
        doc["counters"] = {n: sum(int(c.get(n, 0)) for c in run_counts) for n in COUNTER_NAMES}
    files.put_json("run_summary.json", doc)
    return files.written


def _by_stage(dead: list) -> dict:
    out: dict[str, int] = {}
    for d in dead:
        out[d["stage"]] = out.get(d["stage"], 0) + 1
    return dict(sorted(out.items()))


class WriteRunOutputs(beam.PTransform):
    """``{"sessions", "summaries", "dead_letter"}`` → files in ``out`` (written once, sorted by
    session): ``dataset.jsonl`` (the answered sessions — the audit's input),
    ``session_summaries.jsonl``, ``dead_letter.jsonl`` and ``run_summary.json``. ``extra_dead``:
    more dead-letter PCollections (e.g. the reader's)."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, out: str, extra_dead: Sequence = (), counts: Optional[dict] = None):
        super().__init__()
        self._out, self._extra, self._counts = out, tuple(extra_dead), dict(counts or {})

    def expand(self, outs):
        p = outs["sessions"].pipeline
        dead = (outs["dead_letter"], *self._extra) | "RunAllDead" >> beam.Flatten()
        parts = [("Sessions", outs["sessions"]), ("Summaries", outs["summaries"]), ("Dead", dead)]
        if "counts" in outs:
            parts.append(("Counts", outs["counts"]))
        lists = [x | f"Run{n}List" >> beam.combiners.ToList() for n, x in parts]
        return (p | "RunWriteOnce" >> beam.Create([None])
                | "RunWrite" >> beam.Map(_write_run_once, self._out, self._counts,
                                         *[beam.pvalue.AsSingleton(x) for x in lists]))


def _write_run_once(_, out, counts, sessions, summaries, dead, run_counts=None):
    return _write_run(out, sessions, summaries, dead, counts, run_counts)
