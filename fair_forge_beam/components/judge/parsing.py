"""Reading a judge's answer: data fences, reasoning blocks, JSON verdicts, strict validation.

All functions are pure. JSON is decoded with the standard library's ``json.JSONDecoder.raw_decode``
started at each ``{`` / ``[`` of the text, so a value wrapped in prose or a Markdown fence is found
without a hand-written parser.

The verdict rule (docs/reliability.md), applied by :func:`parse_verdict` — the only path by
which a judge answer becomes a score:

1. Text we put in the prompt from outside (questions, answers, references, contexts, history)
   sits between *data fences* (:func:`fence`) whose marker carries a BLAKE2b digest of the fenced
   text, so user text cannot write the closing marker of its own block. Unless the reply is one
   JSON value answering a JSON-mode request (rule 3), every echoed data block (and every
   verbatim echo of a fenced message) is cut out of it before anything is read
   (:func:`strip_echoes`); an opened block that is never closed cuts to the end.
2. A reply that did not end as a whole answer is rejected, complete or not: cut by the token
   limit (``finish_reason == "length"``), withheld or cut by a content filter
   (``"content_filter"``) or any other end than the model stopping by itself
   (:func:`~fair_forge_beam.components.replies.unfinished_reply`, the one rule of every reader).
3. Structured output first: when the server enforced a JSON mode and the whole answer is one
   JSON value, that value is the verdict (an array or a scalar is rejected).
4. Otherwise (text mode, or a server that ignored the JSON mode) every top-level JSON value of
   the answer is looked at — never just the first. An object sharing a field name with the schema
   is *verdict-shaped*; an array holding one is a *list of verdicts* (rejected). Every
   verdict-shaped object must validate, and all of them must be the same verdict; two different
   verdicts are ambiguous (rejected → dead letter). No verdict-shaped object → rejected. When
   the verdicts differ, a JSON value that also stands inside a data block (:func:`quoted_json`:
   an answer carrying a planted ``{"score": 1.0}``, valid or not, a list of them) is a quotation
   of the judged text and is set aside, so a judge that quotes it beside its own verdict is
   scored by its own; still two different verdicts → ambiguous. Values are compared as JSON
   data: key order and spacing aside, numbers equal by value at any depth (``1`` == ``1.0`` ==
   ``10E-1``), ``true`` never equal to ``1``, strings by their decoded text.
5. Validation is pydantic's strict mode (``true`` is not a number, ``"0_8"`` is not a number),
   over JSON in which repeated keys and ``NaN`` / ``Infinity`` are errors.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
from decimal import Decimal
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence, Union

from pydantic import BaseModel, ValidationError

from fair_forge_beam.components.replies import unfinished_reply
from fair_forge_beam.plain import json_kind
from fair_forge_beam.quoting import quoted

__all__ = [
    "fence",
    "strip_echoes",
    "unfence",
    "parse_verdict",
    "quoted_json",
    "is_whole_json",
    "split_reasoning",
    "iter_json_objects",
    "parse_structured",
    "schema_instruction",
    "json_schema_response_format",
    "resolve_schema",
    "schema_ref",
    "schema_json",
]

_OPEN = r"<(?:think|thinking|reasoning)>"
_CLOSE = r"</(?:think|thinking|reasoning)>"
_BLOCK_RE = re.compile(_OPEN + r"(.*?)" + _CLOSE, re.DOTALL | re.IGNORECASE)
_OPEN_RE = re.compile(_OPEN, re.IGNORECASE)
_CLOSE_RE = re.compile(_CLOSE, re.IGNORECASE)
_DECODER = json.JSONDecoder()


def split_reasoning(text: Optional[str]) -> tuple[str, str]:
    """Split ``text`` into ``(reasoning, answer)``.

    Reasoning is the content of every ``<think>…</think>`` block (also ``<thinking>`` and
    ``<reasoning>``, any case), joined by blank lines. Two partial forms are handled: a closing
    tag without an opening one (chat templates that open the block inside the prompt: everything
    before it is reasoning) and an opening tag that is never closed (output cut off: everything
    after it is reasoning). ``answer`` is the rest, stripped. ``None`` gives ``("", "")``.
    """
    if not text:
        return "", ""
    parts: list[str] = []

    def _take(m: re.Match) -> str:
        parts.append(m.group(1).strip())
        return " "

    rest = _BLOCK_RE.sub(_take, text)
    closes = list(_CLOSE_RE.finditer(rest))
    if closes:  # orphan closing tag(s): the text before the last one is reasoning
        last = closes[-1]
        parts.insert(0, _CLOSE_RE.sub(" ", rest[: last.start()]).strip())
        rest = rest[last.end():]
    m = _OPEN_RE.search(rest)
    if m:  # unclosed opening tag: the answer was cut off inside the reasoning
        parts.append(rest[m.end():].strip())
        rest = rest[: m.start()]
    return "\n\n".join(p for p in parts if p), rest.strip()


def iter_json_objects(text: str) -> Iterator[dict]:
    """Yield every top-level JSON object (``dict``) embedded in ``text``, left to right.

    A candidate starts at each ``{`` not inside an object already yielded; text that does not
    decode there is skipped. Arrays and scalars are not yielded. Work is bounded as in
    :func:`_iter_json_values` (the standard, non-strict decoder).
    """
    for value in _iter_json_values(text, _DECODER, "{"):
        if isinstance(value, dict):
            yield value


# ----------------------------------------------------------------------------------------------
# Data fences
# ----------------------------------------------------------------------------------------------
_FENCE_RE = re.compile(r"<<<BEGIN ([A-Z0-9_]{1,40}) ([0-9a-f]{16})>>>\n")
_LABEL_RE = re.compile(r"[^A-Z0-9_]")


def _fence_nonce(label: str, text: str) -> str:
    blob = f"{label}\x00{text}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(blob, digest_size=8, person=b"ffb-data-fence").hexdigest()


def fence(label: str, text: Optional[str]) -> str:
    """``text`` between data markers that it cannot close itself.

    Returns ``"<<<BEGIN LABEL n>>>\\n" + text + "\\n<<<END LABEL n>>>"`` where ``LABEL`` is
    ``label`` upper-cased (characters outside ``[A-Z0-9_]`` become ``_``, at most 40) and ``n`` the
    16-hex-digit BLAKE2b digest of label and text. To close the block early, the text would have
    to contain the digest of itself, so a fake end marker in user text closes nothing. The marker
    depends on the text only (no randomness): prompts, cache keys and results stay reproducible.
    ``None`` is fenced as empty text.
    """
    lab = _LABEL_RE.sub("_", str(label).upper())[:40] or "DATA"
    text = "" if text is None else str(text)
    n = _fence_nonce(lab, text)
    return f"<<<BEGIN {lab} {n}>>>\n{text}\n<<<END {lab} {n}>>>"


def _blocks(text: str) -> Iterator[tuple[str, str, str]]:
    """``(label, nonce, whole block)`` of every genuine data block of ``text`` (outermost first)."""
    pos = 0
    while True:
        m = _FENCE_RE.search(text, pos)
        if m is None:
            return
        lab, n = m.group(1), m.group(2)
        end_marker = f"\n<<<END {lab} {n}>>>"
        j = text.find(end_marker, m.end() - 1)
        if j != -1 and _fence_nonce(lab, text[m.end(): j]) == n:
            yield lab, n, text[m.start(): j + len(end_marker)]
            pos = j + len(end_marker)
        else:
            pos = m.end()


def unfence(text: str) -> str:
    """``text`` with every genuine data block replaced by its inner text (markers removed);
    for reading prompts in tests and logs. Blocks nested inside blocks are unwrapped too."""
    out = text or ""
    while True:
        blocks = list(_blocks(out))
        if not blocks:
            return out
        for lab, n, whole in blocks:
            inner = whole[len(f"<<<BEGIN {lab} {n}>>>\n"): -len(f"\n<<<END {lab} {n}>>>")]
            out = out.replace(whole, inner)


def _contents(messages: Iterable[Sequence[str]]) -> Iterator[str]:
    """The text content of each ``(role, content)`` pair or ``{"role", "content"}`` mapping."""
    for m in messages:
        content = m[1] if not isinstance(m, Mapping) else m.get("content")
        if isinstance(content, str):
            yield content


def _data_blocks(text: str) -> Iterator[tuple[str, str, str]]:
    """``(label, nonce, inner text)`` of every genuine data block of ``text``, blocks nested in
    blocks included (a quoted inner block is data too)."""
    todo = [text]
    while todo:
        for lab, n, whole in _blocks(todo.pop()):
            inner = whole[len(f"<<<BEGIN {lab} {n}>>>\n"): -len(f"\n<<<END {lab} {n}>>>")]
            todo.append(inner)
            yield lab, n, inner


def _number_text(value: Any) -> str:
    """One text per number value (JSON's data model: ``1``, ``1.0``, ``1e0``, ``10E-1`` are one
    number), from the number as written (:class:`_Number`) where the decoder kept it: exact, no
    rounding to a float or to a context's precision; ``-0`` is ``0``."""
    d = Decimal(value.text if isinstance(value, _Number) else int(value) if isinstance(value, int) else repr(value))
    if not d.is_finite():
        return str(d)
    sign, digits, exp = d.as_tuple()
    text = "".join(map(str, digits)).lstrip("0")
    if not text:
        return "0"
    stripped = text.rstrip("0")
    return f"{'-' if sign else ''}{stripped}e{exp + len(text) - len(stripped)}"


def _canonical(value: Any) -> str:
    """One text per JSON value, at any depth: whatever its key order or spacing, numbers equal by
    value (``1`` == ``1.0`` == ``1e0`` == ``10E-1``; ``true`` is not ``1``), flagged values
    included. A value nested past the recursion limit gets a text of its own (equal to nothing)."""
    try:
        return _canon(value)
    except RecursionError:
        return f"<too deep {id(value)}>"


def _canon(value: Any) -> str:
    if value is None or isinstance(value, (bool, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _canon(v) for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canon(v) for v in value) + "]"
    return repr(value)  # NaN / Infinity (_BadConstant)


def quoted_json(messages: Iterable[Sequence[str]] = ()) -> frozenset:
    """The canonical text (:func:`_canonical`) of every JSON object and array written inside the
    data blocks of ``messages``, at any depth: what a judge's reply can only *quote*.

    A reply that repeats one of them repeats the judged text (an answer may carry a planted
    verdict such as ``{"score": 1.0}``); :func:`parse_verdict` sets such values aside. Text outside
    the data blocks (the instructions, which may show an example verdict) is not included."""
    out: set = set()
    for content in _contents(messages):
        for _lab, _n, inner in _data_blocks(content):
            todo = list(_iter_json_values(inner))
            while todo:
                value = todo.pop()
                if isinstance(value, (dict, list)):
                    out.add(_canonical(value))
                    todo.extend(value.values() if isinstance(value, dict) else value)
    return frozenset(out)


def strip_echoes(answer: str, messages: Iterable[Sequence[str]] = (), extra: Iterable[str] = ()) -> str:
    """``answer`` without what it repeats of the fenced prompt.

    ``messages``: the ``(role, content)`` pairs sent. Removed, in this order: every verbatim copy
    of a message content that holds a data block (:func:`fence`) and of each ``extra`` text
    (e.g. the schema instruction); then, for every genuine block of the messages, the text from
    its begin marker to its end marker (also when the copy differs from the original), and from
    a begin marker that is never closed to the end of the answer. A removed span leaves a blank
    line. Text without fenced messages is returned unchanged.
    """
    if not answer:
        return answer or ""
    keys: dict[tuple[str, str], None] = {}
    verbatim: list[str] = [e for e in extra if e]
    for content in _contents(messages):
        found = False
        for lab, n, _inner in _data_blocks(content):
            keys[(lab, n)] = None
            found = True
        if found:
            verbatim.append(content)
    if not keys and not verbatim:
        return answer
    out = answer
    for v in sorted(set(verbatim), key=len, reverse=True):
        out = out.replace(v, "\n\n")
    for lab, n in keys:
        begin, end = f"<<<BEGIN {lab} {n}>>>", f"<<<END {lab} {n}>>>"
        while True:
            i = out.find(begin)
            if i == -1:
                break
            j = out.find(end, i + len(begin))
            out = out[:i] + "\n\n" + ("" if j == -1 else out[j + len(end):])
        out = out.replace(end, "\n\n")  # an end marker whose begin was cut off
    return out


# ----------------------------------------------------------------------------------------------
# JSON values in text
# ----------------------------------------------------------------------------------------------
class _Suspect(dict):
    """A decoded object that repeated a key (the decoder keeps it, flagged)."""


class _BadConstant:
    """``NaN`` / ``Infinity`` in the JSON: never a valid number."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _pairs(pairs):
    d = dict(pairs)
    return _Suspect(d) if len(d) != len(pairs) else d


class _Number(float):
    """A JSON number with a fraction or an exponent: the float, and ``text``, the number as
    written (so that equality of values is exact: :func:`_number_text`)."""

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


_STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_BadConstant, parse_float=_Number)


def _suspect(value: Any) -> Optional[str]:
    """Why a decoded value cannot be a verdict (repeated key, NaN/Infinity), else None."""
    if isinstance(value, _Suspect):
        return "a key is repeated in one JSON object"
    if isinstance(value, _BadConstant):
        return f"{value.name} is not a number"
    if isinstance(value, dict):
        vals = value.values()
    elif isinstance(value, list):
        vals = value
    else:
        return None
    for v in vals:
        why = _suspect(v)
        if why:
            return why
    return None


_FAILED_READ_PER_CHAR = 64  # characters failed decodes may read, per character of the text
_TOO_DEEP = 8  # starts nested past the interpreter's recursion limit


def _iter_json_values(text: str, decoder: Optional[json.JSONDecoder] = None, starts: str = "{[",
                      too_deep: Optional[list] = None) -> Iterator[Any]:
    """Every top-level JSON object or array of ``text``, left to right (strict decoder).

    A decode is tried at each ``{`` / ``[`` outside the values found. Work is bounded for any
    text: once the failed tries have read more than 64 characters per character of ``text`` (plus
    10^6), or 8 tries nested past the recursion limit, the rest of the text is not read (such text
    — ``[[[[…`` or ``{"a":{"a":…`` by the hundred thousand — is a bomb, never a verdict; without the
    bound one 200,000-character answer took 21 s). ``too_deep``: a list that gets the index of each
    start nested past the recursion limit (a reason names the depth, not "no JSON object", trial40 J6)."""
    decoder = decoder or _STRICT_DECODER
    i = 0
    n = len(text)
    budget = _FAILED_READ_PER_CHAR * n + 1_000_000
    deep = 0
    while i < n:
        cands = [x for x in (text.find(c, i) for c in starts) if x != -1]
        if not cands:
            return
        i = min(cands)
        try:
            obj, end = decoder.raw_decode(text, i)
        except RecursionError:
            if too_deep is not None:
                too_deep.append(i)
            deep += 1
            if deep >= _TOO_DEEP:
                return
            i += 1
            continue
        except ValueError as exc:
            budget -= max(getattr(exc, "pos", i + 1) - i, 1)
            if budget < 0:
                return
            i += 1
            continue
        yield obj
        i = end


def _field_names(schema: type[BaseModel]) -> frozenset:
    names = set()
    for name, f in schema.model_fields.items():
        names.add(name)
        if f.alias:
            names.add(f.alias)
    return frozenset(names)


def _validate_strict(obj: Any, schema: type[BaseModel]) -> tuple[Optional[BaseModel], Optional[str]]:
    why = _suspect(obj)
    if why:
        return None, why
    try:
        return schema.model_validate_json(json.dumps(obj, ensure_ascii=False), strict=True), None
    except ValidationError as exc:
        return None, _short_validation_error(exc)


_MD_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def _whole_json(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` (stripped; a Markdown code fence around it allowed) is one
    JSON value and nothing else, else ``(False, None)``."""
    body = (text or "").strip()
    m = _MD_FENCE_RE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        whole, end = _STRICT_DECODER.raw_decode(body, 0)
    except (ValueError, RecursionError):
        return False, None
    return (True, whole) if not body[end:].strip() else (False, None)


def is_whole_json(text: str) -> bool:
    """``text`` is one JSON value and nothing else (what a server enforcing a JSON mode sends).
    The judge handler then reads it as it is; otherwise echoes are cut out first."""
    return _whole_json(text)[0]



class ReplyWords(NamedTuple):
    """What the reasons of :func:`parse_verdict` call a reply and what it holds, by whose reply it is."""

    subject: str  #: the reply, first in a reason: ``answer``, ``the generator's reply``
    within: str  #: the reply after "in": ``the answer``, ``the generator's reply``
    objects: str  #: a JSON list of what it should hold one of: ``a list of verdicts``, ``a list of objects``
    mismatch: str  #: the start of a reason about an object that does not fit the schema
    use: str  #: what is never done with a cut reply (:func:`~fair_forge_beam.components.replies.unfinished_reply`)


def reply_words(role: str) -> ReplyWords:
    """The words of a ``role``'s reply: a judge's or a guardian's answer holds a verdict that is scored; any other
    role's (a generator's) reply holds an object that is used (trial38 T13, trial39b B11: a generator's reply was
    said to hold "a list of verdicts" that are "never scored")."""
    if role in ("judge", "guardian"):
        return ReplyWords("answer", "the answer", "a list of verdicts", "answer does not match the verdict schema",
                          "scored")
    reply = f"the {role}'s reply"
    return ReplyWords(reply, reply, "a list of objects", reply, "used")


def parse_verdict(
    answer: str,
    schema: type[BaseModel],
    *,
    structured: bool = False,
    finish_reason: Optional[str] = None,
    quotes: frozenset = frozenset(),
    role: str = "judge",
) -> tuple[Optional[BaseModel], Optional[str]]:
    """The judge's verdict in ``answer`` under the rule of this module's docstring.

    ``answer``: the answer with echoes and reasoning removed (:func:`strip_echoes`,
    :func:`split_reasoning`). ``structured``: the request asked the server for a JSON mode
    (``json_schema`` or ``json_object``). ``finish_reason``: as sent by the server. ``quotes``:
    :func:`quoted_json` of the request's messages; in text mode a JSON value of the answer equal to
    one of them is a quotation of the judged text, set aside when the verdicts differ (rule 4).
    ``role``: whose reply it is (:func:`reply_words`: a judge's or a guardian's holds a verdict that is scored, a
    generator's an object that is used).

    Returns ``(instance, None)`` or ``(None, reason)``; never raises for any text.
    """
    words = reply_words(role)
    unfinished = unfinished_reply(finish_reason, words.use)
    if unfinished:
        return None, unfinished
    text = (answer or "").strip()
    if structured:
        complete, whole = _whole_json(text)
        if complete:
            if isinstance(whole, dict):
                obj, why = _validate_strict(whole, schema)
                return (obj, None) if obj is not None else (None, f"{words.mismatch}: {why}")
            kind = words.objects if isinstance(whole, list) else json_kind(whole)
            return None, f"{words.subject} is {kind}, not one JSON object"
    fields = _field_names(schema)
    verdicts: list[BaseModel] = []
    canon: dict[str, bool] = {}  # each distinct verdict -> whether every copy of it is a quotation
    other = None  # the last JSON object of the reply's own with none of the schema's fields (another shape)
    too_deep: list = []  # starts of values nested past the decoder's depth (a reason of their own)
    for value in _iter_json_values(text, too_deep=too_deep):
        quote = bool(quotes) and isinstance(value, (dict, list)) and _canonical(value) in quotes
        if isinstance(value, list):
            if not quote and any(isinstance(x, dict) and fields & set(x) for x in value):
                return None, f"{words.subject} holds {words.objects}; exactly one JSON object is expected"
            continue
        if isinstance(value, dict) and not quote and not fields & set(value):
            other = value
        if not isinstance(value, dict) or not fields & set(value):
            continue
        obj, why = _validate_strict(value, schema)
        if obj is None:
            if quote:  # an invalid verdict written in the judged text, quoted: not the judge's
                continue
            return None, f"{words.mismatch}: {why}"
        verdicts.append(obj)
        key = json.dumps(obj.model_dump(mode="json"), sort_keys=True)
        canon[key] = canon.get(key, True) and quote
    if not verdicts:
        if other is not None:  # an object of another shape is there: what is wrong with it, not "none found"
            return None, f"{words.mismatch}: {_validate_strict(other, schema)[1]}"
        if too_deep:  # a value is there, too deep to read: not "none found" (trial40 J6)
            return None, (f"{words.subject} holds JSON nested deeper than the JSON decoder goes (Python's recursion "
                          "limit); no object of it could be read")
        return None, f"no JSON object found in {words.within}"
    if len(canon) > 1:
        own = [k for k, only_quoted in canon.items() if not only_quoted]
        if len(own) != 1:
            return None, (f"ambiguous answer: {len(canon)} different verdicts (the judge's own verdict cannot be told apart"
                          + (f"; {len(canon) - len(own)} of them repeat the judged text)" if len(own) < len(canon) else ")"))
        return next(v for v in reversed(verdicts) if json.dumps(v.model_dump(mode="json"), sort_keys=True) == own[0]), None
    return verdicts[-1], None


def _short_validation_error(exc: ValidationError, limit: int = 5) -> str:
    from fair_forge_beam.plain import validation_words

    return validation_words(exc, limit=limit, root="the answer", missing_first=True)


def parse_structured(answer: str, schema: type[BaseModel]) -> tuple[Optional[BaseModel], Optional[str]]:
    """:func:`parse_verdict` in text mode (kept for callers of the earlier name).

    Returns ``(instance, None)`` or ``(None, reason)``. Earlier versions took the first object
    that validated, which text quoted from the evaluated answer could supply."""
    return parse_verdict(answer, schema)


@functools.lru_cache(maxsize=256)
def _schema_json_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), ensure_ascii=False, sort_keys=True)


def schema_json(schema: type[BaseModel]) -> dict:
    """``schema.model_json_schema()``, computed once per class (a fresh copy on every call)."""
    return json.loads(_schema_json_text(schema))


@functools.lru_cache(maxsize=256)
def schema_instruction(schema: type[BaseModel]) -> str:
    """The instruction appended to the system prompt when the server cannot enforce the schema
    itself (``json_object`` and plain-text modes). Mentions JSON (``json_object`` mode on OpenAI
    requires the word) and embeds the schema's JSON Schema."""
    js = json.dumps(schema_json(schema), ensure_ascii=False, indent=2, sort_keys=True)
    return (
        "Give your final answer as a single JSON object that validates against the JSON Schema "
        "below. Write nothing after that JSON object.\n"
        f"JSON Schema:\n{js}"
    )


_NAME_RE = re.compile(r"[^a-zA-Z0-9_-]")


def json_schema_response_format(schema: type[BaseModel], strict: bool = False) -> dict:
    """``response_format`` for the Chat Completions API's JSON-schema structured output
    (name limited to 64 characters of ``[a-zA-Z0-9_-]``)."""
    name = _NAME_RE.sub("_", schema.__name__)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema_json(schema), "strict": bool(strict)}}


def schema_ref(schema: type[BaseModel]) -> str:
    """``"module:QualifiedName"`` of a pydantic model class (what :func:`resolve_schema` imports)."""
    return f"{schema.__module__}:{schema.__qualname__}"


def resolve_schema(
    ref: Union[None, str, type[BaseModel]], registry: Optional[Mapping[str, type[BaseModel]]] = None
) -> Optional[type[BaseModel]]:
    """Turn a schema reference into the pydantic model class.

    ``ref`` is a class (returned as is), a name in ``registry``, a ``"module:QualifiedName"``
    path (imported), or None (returned as None). Raises ``ValueError`` for anything else, for
    paths that do not import, and for objects that are not pydantic models.
    """
    if ref is None:
        return None
    if isinstance(ref, type):
        if not issubclass(ref, BaseModel):
            raise ValueError(f"output schema {quoted(ref)} is not a pydantic model class")
        return ref
    if not isinstance(ref, str):
        raise ValueError(f"output schema must be a pydantic class or its name, got {quoted(ref)}")
    if registry and ref in registry:
        return resolve_schema(registry[ref])
    module, sep, qualname = ref.partition(":")
    if not sep or not module or not qualname:
        known = ", ".join(sorted(registry or ())) or "none"
        raise ValueError(f"unknown output schema {quoted(ref)}: not a registered name (registered: {known}) nor 'module:ClassName'")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        from fair_forge_beam.plain import plain_reason

        raise ValueError(f"output schema {quoted(ref)} cannot be imported: {plain_reason(exc)}") from None
    return resolve_schema(obj)
