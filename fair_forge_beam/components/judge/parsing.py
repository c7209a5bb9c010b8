"""Reading a judge's answer: reasoning blocks, JSON objects in free text, schema validation.

All functions are pure. JSON is decoded with the standard library's ``json.JSONDecoder.raw_decode``
started at each ``{`` of the text, so an object wrapped in prose or a Markdown fence is found
without a hand-written parser.
"""
from __future__ import annotations

import functools
import importlib
import json
import re
from typing import Iterator, Mapping, Optional, Union

from pydantic import BaseModel, ValidationError

__all__ = [
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
    decode there is skipped. Arrays and scalars are not yielded.
    """
    i = text.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj
            i = text.find("{", end)
        else:  # pragma: no cover - a value starting with "{" is always an object
            i = text.find("{", i + 1)


def _short_validation_error(exc: ValidationError, limit: int = 5) -> str:
    errs = exc.errors()
    parts = []
    for e in errs[:limit]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {e.get('msg')}")
    more = f" (+{len(errs) - limit} more)" if len(errs) > limit else ""
    return "; ".join(parts) + more


def parse_structured(answer: str, schema: type[BaseModel]) -> tuple[Optional[BaseModel], Optional[str]]:
    """Validate the first JSON object of ``answer`` that fits ``schema``.

    Returns ``(instance, None)`` on success, else ``(None, reason)`` where ``reason`` names the
    validation errors of the first object found, or says that no JSON object was found.
    Reasoning blocks should be removed first (:func:`split_reasoning`): a JSON object inside them
    would otherwise be a candidate.
    """
    first_error: Optional[str] = None
    n = 0
    for obj in iter_json_objects(answer):
        n += 1
        try:
            return schema.model_validate(obj), None
        except ValidationError as exc:
            if first_error is None:
                first_error = _short_validation_error(exc)
    if n == 0:
        return None, "no JSON object found in the answer"
    return None, f"answer does not match schema {schema.__name__}: {first_error}"


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
            raise ValueError(f"output schema {ref!r} is not a pydantic model class")
        return ref
    if not isinstance(ref, str):
        raise ValueError(f"output schema must be a pydantic class or its name, got {type(ref).__name__}")
    if registry and ref in registry:
        return resolve_schema(registry[ref])
    module, sep, qualname = ref.partition(":")
    if not sep or not module or not qualname:
        known = ", ".join(sorted(registry or ())) or "none"
        raise ValueError(f"unknown output schema {ref!r}: not a registered name (registered: {known}) nor 'module:ClassName'")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"output schema {ref!r} cannot be imported: {exc}") from exc
    return resolve_schema(obj)
