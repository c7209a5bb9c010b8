"""LLM judge over OpenAI-compatible Chat Completions endpoints, as a Beam ``RemoteModelHandler``.

Use it through ``RunInference`` (or :class:`RunJudge`, which adds the dead-letter split)::

    handler = OpenAIJudgeHandler("my-model", base_url="http://localhost:8000/v1",
                                 output_schema=ContextJudgeOutput, cache_path="judge.sqlite3")
    out = requests | RunJudge(handler)          # out.results: JudgeResult, out.dead_letters: DeadLetter

Retries happen in two layers, both from maintained code:

* per HTTP call, the ``openai`` client retries 408/409/429/5xx, timeouts and connection errors
  with exponential backoff and honours ``Retry-After`` / ``retry-after-ms`` (``client_retries``);
* per batch, Beam's ``RemoteModelHandler`` retries with exponential backoff (first wait about
  5 s) and feeds its client-side adaptive throttler (``num_retries``, ``throttle_delay_secs``).
  A batch is retried only when some of its calls failed transiently; calls that already
  succeeded are kept and not sent again. On the last attempt the calls still failing become
  failed results, so one bad call never takes its batch-mates to the dead letter.

Answers that never validate, permanent HTTP errors and calls that stay failing become
:class:`JudgeResult` with ``error`` set; :class:`RunJudge` turns them into
:class:`~fair_forge_beam.io.elements.DeadLetter` records (stage ``"judge"``) with the reason and the
raw answer. Nothing is ever scored 0 silently.

One question, one outcome per run: identical requests (the same answer-cache key — endpoint,
messages, parameters, schema, sample index — computed whether or not a cache is configured) are
asked once at a time (:meth:`~fair_forge_beam.components.replies.EndpointClient.one_question`), and
a question that failed after its attempts is not asked again in the run: the identical requests
that waited for it and the later ones get the same failure with their own ids and zero tokens
(counted as ``shared_failures``). By kind of failure:

* an invalid answer after ``1 + invalid_answer_retries`` asks (no verdict, a cut reply, a refusal,
  a body that is not a chat completion), a permanent HTTP error (400, 401, 404, …) and an
  unreadable reply: final at once — the same prompt and parameters were already asked every time
  the rule allows, and asking again only makes the run's requests and failures depend on which
  identical request came first;
* a transient failure (time-out, refused connection, 429/5xx after the client's retries): handed to
  the requests in flight, and asked again by Beam's retry of the batch (that is how a transient
  failure is retried), but a question gets ``1 + num_retries`` such asks in a run, whichever batches
  make them: then (or when a batch holding it has no retry left) its failure is final for the rest
  of the run. Before, each batch holding the question had its own ``1 + num_retries``;
* never sent (a prompt over ``max_prompt_chars``, an unknown schema) and a reply over
  ``max_reply_bytes``: as before, a failure of that request only (never cached, never kept).

The memory belongs to the worker's client, so it lasts one run (Beam shares one client per process
and ``RunInference`` step of a pipeline: a later run in the same process asks again); it keeps at
most :data:`~fair_forge_beam.components.replies.FAILED_QUESTIONS_MAX` questions
(:class:`~fair_forge_beam.components.replies.FailedQuestions`).

A dead endpoint costs a run ``endpoint_down_after`` batches (``--endpoint-down-after``, default 2):
after that many batches in a row whose every request sent still failed transiently after all its
attempts, with no reply, the worker process sends it nothing more in this run and every request not in
the cache fails at once, ``judge endpoint down: …`` with the last error
(:class:`~fair_forge_beam.components.replies.EndpointHealth`; a batch with one reply resets the count).

The API key is read from the environment (``api_key_env``) on the worker when the client is
created; it is not an attribute of the handler, so it is never pickled into the pipeline graph,
and it is scrubbed (:mod:`.secrets`) from every answer, reasoning text, raw body, logprob token
and error as they arrive, so no result, dead letter or cache entry holds it.

Answers are read under one rule (:func:`~.parsing.parse_verdict`): echoed data fences are cut
out, structured output first, never the first object found, ambiguity / lists / cut replies
rejected, strict pydantic validation.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

from fair_forge_beam._beam import beam, inference_base
from apache_beam.ml.inference.base import RemoteModelHandler, RunInference

inference_base()  # Beam's memory measure bound without torch: no "Resource module is not available" line

from fair_forge_beam.components.judge.cache import DEFAULT_CACHE, cache_key, default_cache_path, endpoint_identity
from fair_forge_beam.components.judge.parsing import (
    is_whole_json,
    json_schema_response_format,
    parse_verdict,
    quoted_json,
    strip_echoes,
    resolve_schema,
    schema_instruction,
    schema_json,
    schema_ref,
    split_reasoning,
)
from fair_forge_beam.components.shared_resources import Transient
from fair_forge_beam.io.secrets import keys_set_here, register_secret_env, require_keys, scrub as scrub_secrets, scrub_body, scrub_logprobs, scrub_reply
from fair_forge_beam.components.replies import (NO_KEY, ENDPOINT_DOWN_AFTER, RequestFailureNotices, EndpointClient, NotAnAnswer, ReplyTooLarge, check_call_limits, UnreadableReply,
                                                chat_completion_body, read_chat_reply, unfinished_reply, usage_count, limit_setting)
from fair_forge_beam.io.elements import dead_letter
from fair_forge_beam.options import MAX_PROMPT_CHARS, MAX_REPLY_BYTES
from fair_forge_beam.quoting import quoted, shown
from fair_forge_beam.plain import plain_reason, repr_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "JudgeRequest",
    "JudgeResult",
    "JudgeOutputs",
    "JudgeTransientError",
    "OpenAIJudgeHandler",
    "RunJudge",
    "judge_request",
    "judge_counters",
    "restage",
    "STRUCTURED_MODES",
    "COUNTER_NAMES",
]

_LOG = logging.getLogger(__name__)

STRUCTURED_MODES = ("json_schema", "json_object", "text")
"""Structured-output modes, strongest first; ``"auto"`` starts at the first and steps down when the
server answers HTTP 400 to a mode and the next one works (remembered per worker process)."""

COUNTER_NAMES = ("requests", "calls", "cache_hits", "shared_failures", "retries", "results", "failures", "prompt_tokens",
                 "completion_tokens")
"""Beam counters in the handler's namespace. ``requests``: HTTP requests sent (= what the server
receives). ``calls``: elements that needed the endpoint (first request of each). ``retries``:
``requests - calls`` (client retries, batch retries, re-asks after invalid answers, fallback
re-sends). ``shared_failures``: elements that sent nothing because an identical question (same
cache key) failed — while they waited for it, or earlier in the run — and got its failure
(:meth:`~fair_forge_beam.components.replies.EndpointClient.one_question`); each is also a
``failure``. ``cache_hits`` + ``calls`` + ``shared_failures`` = elements, but for the failures that
were never sent (a prompt over the limit, an unknown schema); ``results`` + ``failures`` =
elements. Tokens: as reported by the server, for calls actually made (cache hits and shared
failures add none). Before ``shared_failures`` existed, the failures shared by requests in flight
were in none of the three."""

_RUNTIME_LOCK = threading.Lock()
_FORBIDDEN_PARAMS = frozenset({"model", "messages", "response_format", "stream", "n"})


# ----------------------------------------------------------------------------------------------
# Element types
# ----------------------------------------------------------------------------------------------
class JudgeRequest(NamedTuple):
    """One judge call.

    ``key``: unique id of the call (e.g. ``f"{element_id}#{sample_index}"``); results and dead
    letters carry it. ``messages``: ``((role, content), …)``, roles ``system`` / ``developer`` /
    ``user`` / ``assistant``. ``schema``: pydantic model class, registered name or
    ``"module:ClassName"``; None → the handler's ``output_schema`` (and None there → free text).
    ``sample_index``: ≥ 0, distinguishes repeated samples of one prompt (part of the cache key).
    ``element_id``: the interaction the call belongs to (for the dead letter). ``tag``: text
    handed to the result untouched (neither sent nor part of the cache key), e.g. the session
    key its verdict joins.
    """

    key: str
    messages: tuple
    schema: Union[None, str, type] = None
    sample_index: int = 0
    element_id: Optional[str] = None
    tag: Optional[str] = None


class JudgeResult(NamedTuple):
    """Outcome of one judge call.

    ``parsed``: the validated answer as a JSON-compatible dict (None without a schema or on
    error). ``answer``: the content without reasoning blocks. ``reasoning``: ``reasoning_content``
    sent by the server and ``<think>`` blocks, joined. ``raw``: the content as received (on error:
    the last raw answer or response body, possibly empty). ``prompt_tokens`` /
    ``completion_tokens``: usage of the answer (for a cache hit, the usage when it was first
    asked; on error, all attempts). ``cached``: served from the cache. ``error``: None on
    success, else the reason. ``logprobs``: the server's log-probabilities of the answer as
    ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}`` (chat
    shape), kept in the cache too; None when not requested or not sent. ``tag``: the request's.

    Every text field (and every logprob token) has had the API key scrubbed out
    (:func:`~.secrets.scrub`); ``answer`` also has echoed data fences removed
    (:func:`~.parsing.strip_echoes`), ``raw`` has not.
    """

    key: str
    element_id: Optional[str]
    sample_index: int
    parsed: Optional[dict]
    answer: str
    reasoning: str
    raw: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    model: str
    error: Optional[str] = None
    logprobs: Optional[dict] = None
    tag: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None


def judge_request(
    key: str,
    messages: Iterable[Union[Mapping[str, str], Sequence[str]]],
    schema: Union[None, str, type] = None,
    sample_index: int = 0,
    element_id: Optional[str] = None,
    tag: Optional[str] = None,
) -> JudgeRequest:
    """Build a :class:`JudgeRequest`; messages may be ``{"role", "content"}`` dicts or pairs.

    Raises ``ValueError`` on an empty key, no messages, an unknown role, non-text content or a
    negative sample index."""
    from fair_forge_beam.components.judge.prompts import checked_message

    if not isinstance(key, str) or not key:
        raise ValueError("key must be a non-empty string")
    msgs = []
    for m in messages:
        role, content = (m["role"], m["content"]) if isinstance(m, Mapping) else tuple(m)
        msgs.append(checked_message(role, content))
    if not msgs:
        raise ValueError("a judge request needs at least one message")
    if int(sample_index) < 0:
        raise ValueError("sample_index must be >= 0")
    return JudgeRequest(key, tuple(msgs), schema, int(sample_index), element_id, tag)


class _JudgeRequestCoder(beam.coders.Coder):
    """Deterministic JSON coder; a schema class travels as ``"module:ClassName"``."""

    def encode(self, value: JudgeRequest) -> bytes:
        schema = value.schema
        if isinstance(schema, type):
            schema = schema_ref(schema)
        doc = [value.key, [list(m) for m in value.messages], schema, value.sample_index, value.element_id, value.tag]
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def decode(self, encoded: bytes) -> JudgeRequest:
        key, msgs, schema, sample, eid, tag = json.loads(encoded.decode("utf-8"))
        return JudgeRequest(key, tuple(tuple(m) for m in msgs), schema, sample, eid, tag)

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return JudgeRequest


class _JudgeResultCoder(beam.coders.Coder):
    def encode(self, value: JudgeResult) -> bytes:
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def decode(self, encoded: bytes) -> JudgeResult:
        return JudgeResult(*json.loads(encoded.decode("utf-8")))

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return JudgeResult


beam.coders.registry.register_coder(JudgeRequest, _JudgeRequestCoder)
beam.coders.registry.register_coder(JudgeResult, _JudgeResultCoder)


class JudgeTransientError(RuntimeError):
    """Some calls of a batch failed transiently (429/5xx/timeout/connection) after the client's
    retries; raised from ``request`` so that Beam retries the batch with backoff and throttles."""


def _retry_transient_only(exc: Exception) -> bool:
    """Beam's retry filter: transient call failures and Beam's own rate-limit refusals."""
    from apache_beam.ml.inference.base import RateLimitExceeded

    return isinstance(exc, (JudgeTransientError, RateLimitExceeded))


# ----------------------------------------------------------------------------------------------
# The worker-side client
# ----------------------------------------------------------------------------------------------
@dataclass
class _Tally:
    requests: int = 0


@dataclass
class _Outcome:
    result: Optional[JudgeResult] = None  # success or permanent failure
    transient: Optional[str] = None  # reason, when the call may succeed later
    requests: int = 0
    cache_hit: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    question: Optional[str] = None  # its answer-cache key (None: never asked, e.g. a prompt over the limit)
    shared: bool = False  # the failure of an identical question (in flight or earlier in the run): nothing sent
    too_large: bool = False  # a reply over the size limit: never kept for a later identical request


class _BadAnswer(Exception):
    """The server answered 200 but the answer is unusable (re-ask, then dead letter)."""

    def __init__(self, reason: str, raw: str, prompt_tokens: int = 0, completion_tokens: int = 0):
        super().__init__(reason)
        self.reason, self.raw = reason, raw
        self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens


@dataclass
class _Config:
    model: str
    base_url: Optional[str]
    api_key_env: str
    output_schema: Any
    schemas: dict
    params: dict
    structured_output: str
    strict_schema: bool
    cache_path: Optional[str]
    request_timeout: float
    max_concurrency: int
    requests_per_minute: Optional[float]
    client_retries: int
    invalid_answer_retries: int
    default_headers: dict = field(default_factory=dict)
    max_reply_bytes: int = MAX_REPLY_BYTES
    max_reply_option: Optional[str] = None
    max_prompt_chars: int = MAX_PROMPT_CHARS
    max_prompt_option: Optional[str] = None
    max_tokens_setting: str = "OpenAIJudgeHandler(params={'max_tokens': …})"
    batch_attempts: int = 1  # 1 + Beam's num_retries: the asks a question that fails transiently gets in a run
    endpoint_down_after: int = ENDPOINT_DOWN_AFTER  # dead batches in a row after which the run stops asking (0: never)
    role: str = "judge"  # what the endpoint is to the handler, in messages
    launch_keys: tuple = ()  # key variables set where the handler was built (names only): a worker must have them


def _failed(out: "_Outcome") -> bool:
    return out.result is None or out.result.error is not None


def _still_failing(req: JudgeRequest, out: "_Outcome", attempts: int, model: str) -> JudgeResult:
    """The failed result of a request whose question still failed transiently after ``attempts``
    batch attempts (each with the client's retries)."""
    return JudgeResult(req.key, req.element_id, req.sample_index, None, "", "", "", out.prompt_tokens, out.completion_tokens,
                       False, model, f"{out.transient} (still failing after {attempts} batch attempt(s))")


def _chars(out: "_Outcome") -> int:
    """The characters a failed outcome holds (its reason and raw answer): what it costs the memory."""
    res = out.result
    return len(out.transient or "") + (len(res.error or "") + len(res.raw or "") if res is not None else 0)


class _JudgeClient(EndpointClient):
    """Worker-side state shared by every DoFn thread of a process (:class:`EndpointClient`): the
    ``openai`` client (its request hook counts HTTP requests in the thread's tally), the thread
    pool, the cache and the structured-output mode the server was found to support."""

    def __init__(self, cfg: _Config, api_key: str):
        import openai

        super().__init__(cfg, api_key, "fair-forge-judge")
        self._openai_mod = openai
        self.client = self.openai_client(openai, api_key, cfg.default_headers)
        self.identity = endpoint_identity(cfg.model, cfg.base_url)  # the cache key's model: this endpoint's
        self._mode_lock = threading.Lock()
        self.mode = "json_schema" if cfg.structured_output == "auto" else cfg.structured_output

    def count_request(self) -> None:
        tally = getattr(self._local, "tally", None)
        if tally is not None:
            tally.requests += 1

    # -- one call ----------------------------------------------------------------------------
    def judge(self, req: JudgeRequest, params: Mapping[str, Any]) -> _Outcome:
        tally = _Tally()
        self._local.tally = tally
        try:
            out = self._judge(req, params)
        except Exception as exc:  # noqa: BLE001 - one request's failure is its dead letter, never its batch's (issue 28 G1)
            reason = f"request failed: {self.scrub(plain_reason(exc))}"[:2000]
            out = _Outcome(result=JudgeResult(req.key, req.element_id, req.sample_index, None, "", "", "", 0, 0, False,
                                              self.cfg.model, reason))
        finally:
            self._local.tally = None
        out.requests = tally.requests
        return out

    def _judge(self, req: JudgeRequest, params: Mapping[str, Any]) -> _Outcome:
        cfg = self.cfg
        eid = req.element_id

        def failure(reason: str, raw: str = "", pt: int = 0, ct: int = 0) -> _Outcome:
            res = JudgeResult(req.key, eid, req.sample_index, None, "", "", self.scrub(raw), pt, ct, False, cfg.model, self.scrub(reason))
            return _Outcome(result=res, prompt_tokens=pt, completion_tokens=ct)

        try:
            schema = resolve_schema(req.schema if req.schema is not None else cfg.output_schema, cfg.schemas)
        except ValueError as exc:
            return failure(str(exc))
        size = sum(len(content) for _role, content in req.messages)
        if size > cfg.max_prompt_chars:  # never sent, never cached: a re-run with a higher limit asks it
            return failure(f"prompt of {size:,} characters is over the limit of {cfg.max_prompt_chars:,} characters "
                           f"({cfg.max_prompt_option or 'max_prompt_chars'}); not sent")
        key = cache_key(self.identity, req.messages, params, schema_json(schema) if schema is not None else None, req.sample_index)
        with self.one_question(key) as question:
            shared = question.known
            if shared is not None:  # the same question failed while this request waited, or earlier in the run: so does this one
                res = shared.result and shared.result._replace(key=req.key, element_id=eid, sample_index=req.sample_index,
                                                               prompt_tokens=0, completion_tokens=0)
                return _Outcome(result=res, transient=shared.transient, question=key, shared=True)
            out = self._ask_and_store(req, params, schema, key, failure)
            out.question = key
            if _failed(out):
                # a failure after its attempts is the question's for the whole run; a transient one is final once the
                # question was asked as often as a batch is (1 + num_retries, whichever batches asked it) or when its
                # batch has no attempt left (``request``); a reply over the size limit is never kept (as never cached)
                final = out.result is not None and not out.too_large
                if out.result is None:
                    asks = self.failed_questions.failed_once_more(key)
                    if asks >= cfg.batch_attempts:
                        out.result, final = _still_failing(req, out, asks, cfg.model), True
                question.failed(out, _chars(out), final=final)
            else:
                self.failed_questions.answered(key)
            return out

    def remember_failure(self, question: Optional[str], result: JudgeResult) -> None:
        """``result``, the final failure of a question that failed transiently (its batch had no
        attempt left), is what a later identical request of this run gets (:class:`FailedQuestions`)."""
        if question is not None:
            self.failed_questions.put(question, _Outcome(result=result), _chars(_Outcome(result=result)))

    def _ask_and_store(self, req: JudgeRequest, params: Mapping[str, Any], schema, key: str, failure) -> _Outcome:
        """The cached answer for ``key``, or the question asked (re-asked on an invalid answer)
        and a valid answer stored."""
        cfg = self.cfg
        eid = req.element_id
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                hit = scrub_secrets(hit, [self._secret])  # a record written by an older version
                res = JudgeResult(
                    req.key, eid, req.sample_index, hit.get("parsed"), hit.get("answer", ""), hit.get("reasoning", ""),
                    # counts of an entry written before usage was read as advisory may be no counts (10**30)
                    hit.get("raw", ""), usage_count(hit.get("prompt_tokens"), "a cached prompt_tokens"),
                    usage_count(hit.get("completion_tokens"), "a cached completion_tokens"), True, cfg.model,
                    None, hit.get("logprobs"),
                )
                return _Outcome(result=res, cache_hit=True)
        down = self.health.reason()
        if down is not None:  # the endpoint failed whole batches after all their retries: not asked again this run
            return failure(down)

        openai = self._openai_mod
        pt = ct = 0
        last_reason, last_raw = "", ""
        try:
            quotes = quoted_json(req.messages) if schema is not None else frozenset()  # once per request, not per ask
            for _ask in range(1 + cfg.invalid_answer_retries):
                try:
                    content, reasoning_field, finish, p_tok, c_tok, logprobs, mode = self._ask(req, schema, params)
                except _BadAnswer as bad:
                    pt, ct = pt + bad.prompt_tokens, ct + bad.completion_tokens
                    last_reason, last_raw = bad.reason, bad.raw
                    continue
                pt, ct = pt + p_tok, ct + c_tok
                last_raw = content  # the original of this ask, for its dead letter whatever fails below
                structured = schema is not None and mode in ("json_schema", "json_object")
                judged = getattr(quotes, "text", "")  # a reasoning tag planted in the judged data is not one
                think, answer = split_reasoning(content, judged)
                if not (structured and is_whole_json(answer)):
                    # echoed data fences go first: a planted </think> or verdict inside them is inert
                    extra = (schema_instruction(schema),) if schema is not None else ()
                    think, answer = split_reasoning(strip_echoes(content, req.messages, extra), judged)
                reasoning = "\n\n".join(x for x in (reasoning_field.strip(), think) if x)
                parsed = None
                if schema is not None:
                    obj, why = parse_verdict(answer, schema, structured=structured, finish_reason=finish,
                                             quotes=quotes, role=cfg.role)
                    if obj is None:
                        last_reason, last_raw = why, content
                        continue
                    # the decoded values too (issue 28): a verdict field is text that left a parser, whatever
                    # spelling of the key the reply used (escapes, a validator's rewrite)
                    parsed = scrub_secrets(obj.model_dump(mode="json"), [self._secret])
                elif unfinished_reply(finish):  # free text (guardians, generators) cut or withheld: never used
                    last_reason, last_raw = unfinished_reply(finish, "used"), content
                    continue
                record = scrub_secrets({  # every text that is kept, cache entry included, masked as it leaves the parsers
                    "parsed": parsed, "answer": answer, "reasoning": reasoning, "raw": content,
                    "prompt_tokens": p_tok, "completion_tokens": c_tok, "logprobs": logprobs,
                }, [self._secret])
                parsed, answer, reasoning, content, logprobs = (record[k] for k in ("parsed", "answer", "reasoning", "raw", "logprobs"))
                if self.cache is not None:
                    self.cache.put(key, record)
                res = JudgeResult(req.key, eid, req.sample_index, parsed, answer, reasoning, content, pt, ct, False, cfg.model, None, logprobs)
                return _Outcome(result=res, prompt_tokens=pt, completion_tokens=ct)
            asks = 1 + cfg.invalid_answer_retries
            return failure(f"invalid answer after {asks} attempt(s): {last_reason}", last_raw, pt, ct)
        except ReplyTooLarge as big:  # never re-asked, never cached, never scored
            out = failure(big.reason(cfg.max_reply_option or "max_reply_bytes"), big.head_text(self.scrub), pt, ct)
            out.too_large = True
            return out
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
            out = _Outcome(transient=self.describe(exc))
        except openai.APIStatusError as exc:
            if exc.status_code in (408, 409):
                out = _Outcome(transient=self.describe(exc))
            else:
                return failure(self.describe(exc), self._body_text(exc), pt, ct)
        except Exception as exc:  # noqa: BLE001 - anything else this one reply did (issue 28 G1): its dead letter only
            return failure(f"unreadable reply: {self.scrub(plain_reason(exc))}"[:2000], last_raw, pt, ct)
        out.prompt_tokens, out.completion_tokens = pt, ct
        return out

    def describe(self, exc: Exception) -> str:
        if isinstance(exc, self._openai_mod.APIStatusError) and exc.status_code in (401, 403):
            return f"HTTP {exc.status_code}: authentication failed (check the key in ${self.cfg.api_key_env})"
        return super().describe(exc)

    def _body_text(self, exc) -> str:
        try:
            if exc.status_code in (401, 403):
                return ""
            return self.scrub(exc.response.text)
        except Exception:
            return ""

    def _ask(self, req: JudgeRequest, schema, params: Mapping[str, Any]):
        """One question, walking down the structured-output modes on HTTP 400 when ``auto``.

        Returns ``(content, reasoning_content, finish_reason, prompt_tokens, completion_tokens,
        logprobs, mode)`` with the key scrubbed from every text; raises ``_BadAnswer`` for an
        unusable 200 and ``openai`` errors otherwise."""
        openai = self._openai_mod
        base = [{"role": r, "content": c} for r, c in req.messages]
        if schema is None:
            modes = [None]
        else:
            start = self.mode
            modes = list(STRUCTURED_MODES[STRUCTURED_MODES.index(start):]) if self.cfg.structured_output == "auto" else [start]
        last_exc: Optional[Exception] = None
        for mode in modes:
            kwargs = dict(params)
            messages = base
            if mode == "json_schema":
                kwargs["response_format"] = json_schema_response_format(schema, self.cfg.strict_schema)
            elif mode in ("json_object", "text"):
                messages = _with_instruction(base, schema_instruction(schema))
                if mode == "json_object":
                    kwargs["response_format"] = {"type": "json_object"}
            try:
                data, body = chat_completion_body(self.client, self.cfg.max_reply_bytes, model=self.cfg.model,
                                                  messages=messages, **kwargs)
            except UnreadableReply as exc:  # a 200 whose body is not a JSON object
                raise _BadAnswer(f"response body is not a chat completion ({exc})", scrub_body(exc.body, [self._secret])) from None
            except openai.BadRequestError as exc:
                last_exc = exc
                if mode is None or mode == modes[-1]:
                    raise
                continue
            if mode is not None and mode != modes[0]:
                with self._mode_lock:  # remember only a step down that worked
                    if STRUCTURED_MODES.index(mode) > STRUCTURED_MODES.index(self.mode):
                        _LOG.info("judge endpoint rejected response_format %r; using %r from now on", self.mode, mode)
                        self.mode = mode
            return self._read(data, body, "scored" if schema is not None else "used", params) + (mode,)
        raise last_exc  # pragma: no cover - the loop always returns or raises

    def _read(self, data, body: str, use: str, params: Mapping[str, Any]):
        """The answer of one reply by the one reader of every caller (:func:`~.replies.read_chat_reply`):
        a reply that is not a whole answer (refused, cut, a tool call, content not text, a hostile
        ``finish_reason``…) raises ``_BadAnswer`` with its reason; so does an empty answer (no verdict,
        no label). Usage counts are advisory."""
        try:  # every text of the reply masked first, however the server split the key across them
            reply = read_chat_reply(scrub_reply(data, [self._secret]), use,
                                    limit_setting(params, self.cfg.max_tokens_setting))
        except NotAnAnswer as no:  # the answer's text, when it had one (a cut verdict), else the whole body
            raw = self.scrub(no.answer) if no.answer is not None else scrub_body(body, [self._secret])
            raise _BadAnswer(self.scrub(no.reason), raw, no.prompt_tokens, no.completion_tokens) from None
        if not reply.content:
            raise _BadAnswer(f"empty answer (finish_reason={reply.finish_reason})", scrub_body(body, [self._secret]),
                             reply.prompt_tokens,
                             reply.completion_tokens)
        return (self.scrub(reply.content), self.scrub(reply.reasoning), reply.finish_reason, reply.prompt_tokens,
                reply.completion_tokens, self._logprobs(reply.logprobs))

    def _logprobs(self, lp) -> Optional[dict]:
        """A choice's ``logprobs`` (as sent) in the chat shape, key scrubbed from tokens; None when absent."""
        if lp is None:
            return None
        try:
            data = lp.model_dump() if hasattr(lp, "model_dump") else dict(lp)
            items = []
            for it in data.get("content") or []:
                if not isinstance(it, Mapping) or not _finite(it.get("logprob")):
                    continue
                tops = [
                    {"token": str(t.get("token", "")), "logprob": float(t["logprob"])}
                    for t in it.get("top_logprobs") or []
                    if isinstance(t, Mapping) and _finite(t.get("logprob"))
                ]
                items.append({"token": str(it.get("token", "")), "logprob": float(it["logprob"]), "top_logprobs": tops})
        except (TypeError, ValueError, AttributeError):
            return None
        if not items:
            return None
        return {"content": scrub_logprobs(items, [self._secret])}

    def __del__(self):  # pragma: no cover - process teardown
        try:
            self.close()
        except Exception:
            pass


def _finite(x: Any) -> bool:
    """A real, finite number (a log-probability of -inf or NaN is left out: no mass, not JSON)."""
    import math

    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _with_instruction(messages: list, instruction: str) -> list:
    """Append the instruction to the first system message, or add one in front (some chat
    templates accept a single system message only)."""
    out = [dict(m) for m in messages]
    for m in out:
        if m["role"] == "system":
            m["content"] = f"{m['content']}\n\n{instruction}"
            return out
    return [{"role": "system", "content": instruction}] + out


# ----------------------------------------------------------------------------------------------
# The handler
# ----------------------------------------------------------------------------------------------
@dataclass
class _BatchState:
    keys: tuple
    attempt: int = 0
    done: dict = field(default_factory=dict)  # batch index -> JudgeResult
    sent: set = field(default_factory=set)  # batch indices that already sent a request
    replied: bool = False  # a request of it got a reply from the endpoint (EndpointHealth)
    last_error: Optional[str] = None  # the last transient failure of a request it sent


class OpenAIJudgeHandler(Transient, RemoteModelHandler):
    """``RemoteModelHandler`` for OpenAI-compatible ``/v1/chat/completions`` (OpenAI, vLLM,
    Ollama, llama.cpp server, Groq, …): ``JudgeRequest`` in, ``JudgeResult`` out.

    Args:
      model: model name sent to the server; also part of the cache key.
      base_url: endpoint root including ``/v1`` (None → api.openai.com).
      api_key_env: environment variable holding the key, read on the worker. When unset, a
        placeholder is sent if ``base_url`` is given (local servers need none); with no
        ``base_url`` the client creation raises ``ValueError``.
      output_schema: default pydantic model (class, registered name or ``"module:ClassName"``)
        for requests whose ``schema`` is None; None → free-text answers.
      schemas: ``{name: model class}`` registry for names used in requests.
      params: sampling parameters sent with every call (``temperature``, ``max_tokens``,
        ``seed``, ``top_p``, ``extra_body``, …); part of the cache key. ``model``, ``messages``,
        ``response_format``, ``stream`` and ``n`` are not allowed (``ValueError``).
      structured_output: ``"auto"`` (JSON-schema ``response_format``, stepping down to
        ``json_object`` + schema in the prompt, then to plain text + schema in the prompt, when
        the server answers 400), or one of ``"json_schema"``, ``"json_object"``, ``"text"``.
      strict_schema: send ``strict: true`` with the JSON schema (OpenAI then requires every field
        to be required and ``additionalProperties: false``).
      cache_path: SQLite file; ``"default"`` → :func:`~.cache.default_cache_path` on the worker;
        None → no cache.
      request_timeout: seconds per HTTP request (> 0).
      max_concurrency: HTTP calls in flight per worker process (≥ 1).
      requests_per_minute: optional cap on HTTP requests (retries included) per worker process.
      client_retries: retries per HTTP call inside the ``openai`` client (Retry-After honoured).
      num_retries: Beam's batch-level retries (exponential backoff from about 5 s).
      throttle_delay_secs: Beam's adaptive-throttling wait (s).
      invalid_answer_retries: extra asks when an answer does not validate (≥ 0).
      min_batch_size / max_batch_size: ``BatchElements`` bounds (defaults: ``max_concurrency``
        and 4 × ``max_concurrency``); a batch's calls run concurrently, so a batch smaller than
        ``max_concurrency`` leaves capacity unused (the last batch of a bundle may be smaller).
      namespace: namespace of the Beam counters (:data:`COUNTER_NAMES`) and of Beam's logs.
      rate_limiter: optional Beam ``RateLimiter`` (e.g. a global Envoy limit), applied per batch.
      default_headers: extra HTTP headers (do not put secrets here: they would be pickled).
      max_reply_bytes: largest reply read, in bytes (> 0; default
        :data:`~fair_forge_beam.options.MAX_REPLY_BYTES`, 4 MiB): a longer reply is read no further
        (:mod:`~fair_forge_beam.components.replies`) and becomes a failed result naming its size and
        the limit — never re-asked, cached or scored.
      max_reply_option: the option named in that reason (e.g. ``"--judge-max-reply-bytes"``).
      max_prompt_chars: longest prompt sent, in characters of all its messages together (> 0;
        default :data:`~fair_forge_beam.options.MAX_PROMPT_CHARS`, 400,000): a longer prompt is
        not sent and becomes a failed result naming its size and the limit — never cached or
        scored (a 6 MB answer was one 6 MB request; each turn of a conversation carries its whole
        history, so a long conversation's requests grow with the square of its length).
      max_prompt_option: the option named in that reason (e.g. ``"--judge-max-prompt-chars"``).
      max_tokens_setting: the Python setting of ``max_tokens`` a cut reply's reason names (no CLI
        option sets it; e.g. ``"GuardianLLMConfig(max_tokens=…)"``), with the ``max_tokens`` sent.
      endpoint_down_after: batches in a row whose every request sent failed transiently after all
        its attempts, after which this run (per worker process) sends the endpoint nothing more: every
        request that is not a cache hit fails at once, ``<role> endpoint down: N batches in a row failed
        every request after all retries (last error: …)`` (:class:`~fair_forge_beam.components.replies.EndpointHealth`;
        ≥ 0, 0: never; default :data:`~fair_forge_beam.components.replies.ENDPOINT_DOWN_AFTER`).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        model: str,
        base_url: Optional[str] = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        output_schema: Union[None, str, type] = None,
        schemas: Optional[Mapping[str, type]] = None,
        params: Optional[Mapping[str, Any]] = None,
        structured_output: str = "auto",
        strict_schema: bool = False,
        cache_path: Optional[str] = DEFAULT_CACHE,
        request_timeout: float = 60.0,
        max_concurrency: int = 16,
        requests_per_minute: Optional[float] = None,
        client_retries: int = 3,
        num_retries: int = 3,
        throttle_delay_secs: int = 5,
        invalid_answer_retries: int = 1,
        min_batch_size: Optional[int] = None,
        max_batch_size: Optional[int] = None,
        namespace: str = "fair_forge_beam.judge",
        rate_limiter=None,
        default_headers: Optional[Mapping[str, str]] = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        max_reply_option: Optional[str] = None,
        max_prompt_chars: int = MAX_PROMPT_CHARS,
        max_prompt_option: Optional[str] = None,
        max_tokens_setting: str = _Config.max_tokens_setting,
        endpoint_down_after: int = ENDPOINT_DOWN_AFTER,
    ):
        from fair_forge_beam.quoting import did_you_mean

        if not model:
            raise ValueError("model is required")
        if structured_output not in ("auto",) + STRUCTURED_MODES:  # the value is not shown: it may be a secret in the wrong key
            raise ValueError(f"structured_output must be 'auto' or one of {STRUCTURED_MODES}"
                             + did_you_mean(structured_output, ("auto",) + STRUCTURED_MODES))
        params = dict(params or {})
        _check_params(params)
        check_call_limits(request_timeout, max_concurrency, requests_per_minute,
                          (client_retries, num_retries, invalid_answer_retries), max_reply_bytes)
        if int(max_prompt_chars) <= 0:
            raise ValueError(f"max_prompt_chars must be > 0, got {quoted(max_prompt_chars)}")
        if isinstance(endpoint_down_after, bool) or int(endpoint_down_after) < 0:
            raise ValueError(f"endpoint_down_after must be >= 0 (0: never), got {quoted(endpoint_down_after)}")
        if not api_key_env:
            raise ValueError("api_key_env must name an environment variable")
        register_secret_env(api_key_env)  # the writers mask its value too (name only, never the key)
        if output_schema is not None:
            resolve_schema(output_schema, schemas)  # fail fast on a bad default schema
        max_batch_size = int(max_batch_size or 4 * int(max_concurrency))
        min_batch_size = int(min_batch_size or min(int(max_concurrency), max_batch_size))
        if not 1 <= min_batch_size <= max_batch_size:
            raise ValueError("need 1 <= min_batch_size <= max_batch_size")
        super().__init__(
            namespace=namespace,
            num_retries=int(num_retries),
            throttle_delay_secs=throttle_delay_secs,
            retry_filter=_retry_transient_only,
            rate_limiter=rate_limiter,
        )
        self.logger = RequestFailureNotices(self.logger)  # a failed request Beam retries is a warning (fix47b)
        #: what the endpoint is to this handler, in messages ("judge", "generator": the counters' namespace)
        self.role = str(namespace).rsplit(".", 1)[-1] or "judge"
        self._cfg = _Config(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            output_schema=output_schema,
            schemas=dict(schemas or {}),
            params=params,
            structured_output=structured_output,
            strict_schema=bool(strict_schema),
            cache_path=cache_path,
            request_timeout=float(request_timeout),
            max_concurrency=int(max_concurrency),
            requests_per_minute=requests_per_minute,
            client_retries=int(client_retries),
            invalid_answer_retries=int(invalid_answer_retries),
            default_headers=dict(default_headers or {}),
            max_reply_bytes=int(max_reply_bytes),
            max_reply_option=max_reply_option,
            max_prompt_chars=int(max_prompt_chars),
            max_prompt_option=max_prompt_option,
            max_tokens_setting=str(max_tokens_setting),
            batch_attempts=1 + int(num_retries),
            endpoint_down_after=int(endpoint_down_after),
            role=self.role,
            launch_keys=keys_set_here((api_key_env,)),
        )
        self._namespace = namespace
        self._batch_kwargs = {"min_batch_size": int(min_batch_size), "max_batch_size": max_batch_size}
        self._runtime = None

    # -- pickling: runtime state (locks, per-batch bookkeeping) never travels -----------------
    _transient = ("_runtime",)

    def _rt(self):
        if self._runtime is None:
            with _RUNTIME_LOCK:
                if self._runtime is None:
                    self._runtime = {"lock": threading.Lock(), "batches": {}, "counters": _counters(self._namespace)}
        return self._runtime

    # -- ModelHandler API ----------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._cfg.model

    @property
    def max_prompt_chars(self) -> int:
        """The longest prompt this judge sends, in characters of all its messages together (a
        longer one is a failure, never sent): a metric that can shorten its prompts fits them to it."""
        return self._cfg.max_prompt_chars

    def create_client(self) -> _JudgeClient:
        """Build the worker-side client; reads the API key from ``api_key_env`` here (never
        before, never stored on the handler). Raises ``ValueError`` when the key is missing
        for api.openai.com and ``sqlite3.Error`` when the cache file cannot be opened."""
        import dataclasses
        import os

        cfg = self._cfg
        require_keys(getattr(cfg, "launch_keys", ()), cfg.role)  # one line when the launcher had the key and this worker has not
        api_key = os.environ.get(cfg.api_key_env, "")
        if not api_key:
            if cfg.base_url is None:
                raise ValueError(f"no API key: set the environment variable {cfg.api_key_env} (or give base_url for a local server)")
            api_key = NO_KEY
        if cfg.cache_path == DEFAULT_CACHE:
            cfg = dataclasses.replace(cfg, cache_path=default_cache_path())
        return _JudgeClient(cfg, api_key)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return dict(self._batch_kwargs)

    def get_metrics_namespace(self) -> str:
        return self._namespace

    def get_num_bytes(self, batch: Sequence[JudgeRequest]) -> int:
        return sum(len(c.encode("utf-8")) for r in batch for _, c in r.messages)

    def validate_inference_args(self, inference_args: Optional[dict[str, Any]]):
        if inference_args:
            _check_params(inference_args)

    def request(self, batch: Sequence[JudgeRequest], model: _JudgeClient, inference_args: Optional[dict[str, Any]] = None) -> list[JudgeResult]:
        """Judge a batch: cached answers first, the rest concurrently (≤ ``max_concurrency``).

        Returns one :class:`JudgeResult` per request, in order. Raises
        :class:`JudgeTransientError` when some calls failed transiently and Beam has retries
        left (the successful ones are kept for the retry)."""
        rt = self._rt()
        params = dict(self._cfg.params, **(inference_args or {}))
        keys = tuple(r.key for r in batch)
        with rt["lock"]:
            st = rt["batches"].get(id(batch))
            if st is None or st.keys != keys:
                st = rt["batches"][id(batch)] = _BatchState(keys)
        st.attempt += 1
        final = st.attempt > self.num_retries
        c = rt["counters"]
        try:
            todo = [i for i in range(len(batch)) if i not in st.done]
            if st.attempt == 1:
                c["submitted"].inc(len(todo))  # progress: pending = submitted - (results + failures)
            futures = [(i, model.executor.submit(model.judge, batch[i], params)) for i in todo]
            pending: list[str] = []
            for i, fut in futures:
                out: _Outcome = fut.result()
                if out.cache_hit:
                    c["cache_hits"].inc()
                if out.requests:
                    if out.transient is None and out.result is not None:
                        st.replied = True  # the endpoint answered (valid or not, or a permanent HTTP error): it is up
                    first = 0 if i in st.sent else 1
                    st.sent.add(i)
                    c["requests"].inc(out.requests)
                    if first:
                        c["calls"].inc()
                    if out.requests - first:
                        c["retries"].inc(out.requests - first)
                if out.prompt_tokens:
                    c["prompt_tokens"].inc(out.prompt_tokens)
                if out.completion_tokens:
                    c["completion_tokens"].inc(out.completion_tokens)
                if out.shared and i not in st.sent and (out.result is not None or final):
                    c["shared_failures"].inc()  # its outcome: an identical question's failure, nothing sent
                if out.transient is not None and not out.shared:
                    st.last_error = out.transient
                if out.result is not None:
                    st.done[i] = out.result
                elif final:
                    st.done[i] = _still_failing(batch[i], out, st.attempt, self._cfg.model)
                    model.remember_failure(out.question, st.done[i])  # after all its attempts: the question's for the run
                else:
                    pending.append(f"{shown(batch[i].key)}: {out.transient}")  # the key holds ids from the data
            if pending:
                raise JudgeTransientError(f"{len(pending)} of {len(batch)} {self.role} calls failed transiently; "
                                         f"first: {pending[0]}")
        except JudgeTransientError:
            raise
        except BaseException:
            with rt["lock"]:
                rt["batches"].pop(id(batch), None)
            raise
        with rt["lock"]:
            rt["batches"].pop(id(batch), None)
        model.health.batch_ended(bool(st.sent), st.replied, st.last_error)
        results = [st.done[i] if batch[i].tag is None else st.done[i]._replace(tag=batch[i].tag) for i in range(len(batch))]
        for r in results:
            c["failures" if r.error is not None else "results"].inc()
        return results


def _counters(namespace: str) -> dict:
    """The handler's Beam counters (:data:`COUNTER_NAMES` plus ``submitted``, elements handed to the
    endpoint), each also counted in the launcher's progress tally (:mod:`fair_forge_beam.progress`)."""
    from fair_forge_beam.progress import ProgressCounter

    return {n: ProgressCounter(n, namespace, beam.metrics.Metrics.counter(namespace, n))
            for n in (*COUNTER_NAMES, "submitted")}


def judge_counters(pipeline_result, namespace: str = "fair_forge_beam.judge") -> dict[str, int]:
    """The judge's Beam counters (:data:`COUNTER_NAMES`, zero when never incremented) from a
    finished ``PipelineResult``, committed values summed over steps."""
    from apache_beam.metrics.metric import MetricsFilter

    out = {n: 0 for n in COUNTER_NAMES}
    for c in pipeline_result.metrics().query(MetricsFilter().with_namespace(namespace))["counters"]:
        name = c.key.metric.name
        if name in out:
            out[name] += int(c.committed or 0)
    return out


def _check_params(params: Mapping[str, Any]) -> None:
    from fair_forge_beam.components.judge.arguments import check_sampling

    check_sampling("params", params)  # a known parameter of the wrong type, never shown (trial38b B12)
    bad = sorted(set(params) & _FORBIDDEN_PARAMS)
    if bad:
        raise ValueError(f"parameters {bad} are set by the judge itself and cannot be passed")


# ----------------------------------------------------------------------------------------------
# The transform with the dead-letter split
# ----------------------------------------------------------------------------------------------
class JudgeOutputs(NamedTuple):
    """Outputs of :class:`RunJudge`: ``results`` (``JudgeResult`` with ``error is None``) and
    ``dead_letters`` (``DeadLetter``, stage ``"judge"``)."""

    results: Any
    dead_letters: Any


def _request_raw(req: JudgeRequest) -> str:
    return json.dumps({"key": req.key, "messages": [list(m) for m in req.messages], "sample_index": req.sample_index}, ensure_ascii=False)


class _SplitResults(beam.DoFn):
    DEAD = "dead_letters"

    def process(self, res):
        if isinstance(res, JudgeResult) and res.error is None:
            yield res
        elif isinstance(res, JudgeResult):
            yield beam.pvalue.TaggedOutput(
                self.DEAD, dead_letter("judge", res.error, res.raw or "", element_id=res.element_id or res.key, source=f"judge:{res.key}")
            )
        else:  # pragma: no cover - a handler returned something unexpected
            yield beam.pvalue.TaggedOutput(self.DEAD, dead_letter("judge", f"unexpected output type {type(res).__name__}", repr(res)))


@beam.typehints.with_output_types(Any)
class _BatchFailureToDeadLetters(beam.DoFn):
    """A whole batch that raised after Beam's retries (e.g. a bug, or transient failures when
    retries ran out outside ``request``): one dead letter per request, counted as failures."""

    def __init__(self, namespace: str):
        self._namespace = namespace

    def setup(self):
        from fair_forge_beam.progress import ProgressCounter

        self._failures = ProgressCounter("failures", self._namespace, beam.metrics.Metrics.counter(self._namespace, "failures"))

    def process(self, failed):
        batch, exc = failed
        if isinstance(exc, tuple) and len(exc) >= 2:  # (exception type, repr, traceback lines)
            reason = f"batch failed: {repr_reason(exc[1])}"
        else:
            reason = f"batch failed: {plain_reason(exc)}"
        reason = reason[:2000]
        for req in batch:
            self._failures.inc()
            if isinstance(req, JudgeRequest):
                yield dead_letter("judge", reason, _request_raw(req), element_id=req.element_id or req.key, source=f"judge:{req.key}")
            else:  # pragma: no cover
                yield dead_letter("judge", reason, repr(req))


def restage(stage: str, prefix: str = "judge: "):
    """``DeadLetter`` → the same dead letter under ``stage`` with ``prefix`` before its reason: a
    :class:`RunJudge` dead letter (stage ``"judge"``) as the dead letter of the metric (or stage)
    that asked."""

    def f(d):
        return d._replace(stage=stage, reason=f"{prefix}{d.reason}")

    return f


class RunJudge(beam.PTransform):
    """``PCollection[JudgeRequest]`` → :class:`JudgeOutputs` (results, dead letters).

    ``RunInference(handler).with_exception_handling()`` plus the split of failed results into
    :class:`~fair_forge_beam.io.elements.DeadLetter` records. ``inference_args`` are extra
    sampling parameters for every call (part of the cache key).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, handler: OpenAIJudgeHandler, inference_args: Optional[Mapping[str, Any]] = None, label_prefix: str = "Judge"):
        from fair_forge_beam.components.judge.arguments import check_sampling

        super().__init__()
        check_sampling("inference_args", inference_args)  # a known parameter of the wrong type, never shown
        self._handler = handler
        self._inference_args = dict(inference_args) if inference_args else None
        self._prefix = label_prefix

    def expand(self, requests):
        p = self._prefix
        main, other = requests | f"{p}RunInference" >> RunInference(self._handler, inference_args=self._inference_args).with_exception_handling()
        split = main | f"{p}Split" >> beam.ParDo(_SplitResults()).with_outputs(_SplitResults.DEAD, main="results")
        failed = other.failed_inferences | f"{p}BatchFailures" >> beam.ParDo(_BatchFailureToDeadLetters(self._handler.get_metrics_namespace()))
        dead = (split[_SplitResults.DEAD], failed) | f"{p}DeadLetters" >> beam.Flatten()
        return JudgeOutputs(split.results, dead)
