"""Checks applied to every record at the edge (read), before any validation or encoding.

A record from outside is hostile: it may be nested deeper than Python can recurse, hold
strings that are not Unicode text (lone UTF-16 surrogates such as ``\\ud800``, which JSON's
``\\uXXXX`` escapes can produce and UTF-8 cannot encode), or values that JSON cannot carry
(Parquet timestamps, decimals). Each of these becomes a dead letter with a reason, or is
converted to a JSON value, here — never a crash later in a coder, a metric or a writer.

* :func:`loads` — ``json.loads`` with a nesting bound (``RecursionError`` never escapes) and the
  record check below.
* :func:`check_value` — an iterative (recursion-free) walk: nesting depth at most
  :data:`MAX_NESTING`, no lone surrogate in any key or string, only JSON types; Parquet/Arrow
  temporal and decimal values converted (:func:`json_value`).
* :func:`split_top_level_array` — the element texts of a top-level JSON array, so that one
  record of a ``.json`` file that is too deep to parse does not take the others with it.
* :func:`scrub_surrogates` / :func:`scrub_json_text` — lone surrogates replaced by their
  visible escape text, for anything that is written (dead letters, warnings, results).
* :func:`text_encoding` — the encoding of a JSON text from its first bytes (BOM or the
  pattern of zero bytes, RFC 4627 §3 / RFC 8259 §8.1, through :func:`json.detect_encoding`;
  a head whose first character is not ASCII by how plainly it decodes).
"""
from __future__ import annotations

import base64
import codecs
import datetime as _dt
import decimal
import json
import math
import re
from typing import Any, Optional

import numpy as np

__all__ = [
    "MAX_NESTING",
    "RecordRejected",
    "loads",
    "check_value",
    "json_value",
    "split_top_level_array",
    "scrub_surrogates",
    "scrub_json_text",
    "has_surrogates",
    "text_encoding",
    "ENCODING_PROBE_BYTES",
]

#: Deepest nesting of arrays/objects a record may have (the record itself is level 1). A
#: session record with tool traces needs about 10; 64 leaves room and stays far below Python's
#: recursion limit (1000), which ``json``, ``pydantic``, ``pickle`` and the coders all hit.
MAX_NESTING = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))


class RecordRejected(ValueError):
    """A record that must go to the dead letter; the message is the reason."""


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone UTF-16 surrogate (U+D800–U+DFFF), which no UTF encoding can write."""
    return _SURROGATE.search(text) is not None


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by its visible escape text (``\\ud800``), so
    that it can be written as UTF-8 and a reader sees what was there; other text unchanged."""
    if not isinstance(text, str) or not has_surrogates(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def scrub_json_text(text: str) -> str:
    """Serialised JSON ``text`` (``ensure_ascii=False``) made writable as UTF-8: a lone
    surrogate can only sit inside a JSON string, where it becomes the escaped text
    ``\\\\ud800`` (read back as the six characters ``\\ud800``)."""
    if not has_surrogates(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\\\u{ord(m.group()):04x}", text)


def json_value(value: Any) -> Any:
    """A scalar converted to a JSON value: ``datetime`` → ISO 8601 with offset (a time without
    an offset — Arrow timestamps without a time zone — is taken as UTC, as
    :func:`fair_forge_beam.io.event_time.parse_timestamp` does), ``date``/``time`` →
    ISO 8601, ``timedelta`` → seconds, finite ``Decimal`` → ``float``, ``bytes`` → UTF-8 text
    (or ``"base64:..."`` when not UTF-8), numpy scalars → Python numbers.

    Raises:
        RecordRejected: a type with no JSON form (the reason names it).
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.isoformat()
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        f = float(value)
        if not math.isfinite(f):
            raise RecordRejected(f"decimal value {value} is not a finite number")
        return f
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(b).decode("ascii")
    if isinstance(value, np.generic):
        return value.item()
    raise RecordRejected(f"value of type {type(value).__name__} has no JSON form")


def check_value(value: Any, max_depth: int = MAX_NESTING, convert: bool = False) -> Any:
    """Check a parsed record without recursion; return it (converted when ``convert``).

    Rules: nesting depth ≤ ``max_depth`` (the record itself is level 1); every string and key is
    Unicode text (no lone surrogate); keys are strings; with ``convert=False`` only JSON types
    (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``; tuples as lists), with
    ``convert=True`` other scalars are converted by :func:`json_value` (Parquet rows).

    Raises:
        RecordRejected: the first rule broken, with the path of the offending value
            (``conversation.0.agentic``) in the message.
    """
    root = [value]
    stack = [(root, 0, value, 1, "")]
    while stack:
        parent, key, node, depth, path = stack.pop()
        where = path or "record"
        if len(where) > 80:
            where = where[:40] + "…" + where[-36:]
        if isinstance(node, (dict, list, tuple)):
            if depth > max_depth:
                raise RecordRejected(
                    f"nested more than {max_depth} levels deep (at {where}); records are limited to {max_depth} levels"
                )
            if isinstance(node, dict):
                for k in node:
                    if not isinstance(k, str):
                        raise RecordRejected(f"key {k!r} at {where} is not a string")
                    if has_surrogates(k):
                        raise RecordRejected(_surrogate_reason(f"a key at {where}", k))
                items = node.items()
            else:
                if isinstance(node, tuple):
                    node = list(node)
                    parent[key] = node
                items = enumerate(node)
            for k, v in items:
                if v is None or isinstance(v, (bool, int, float)):
                    continue
                stack.append((node, k, v, depth + 1, f"{path}.{k}" if path else str(k)))
        elif isinstance(node, str):
            if has_surrogates(node):
                raise RecordRejected(_surrogate_reason(where, node))
        elif convert:
            parent[key] = json_value(node)
        else:
            raise RecordRejected(f"value of type {type(node).__name__} at {where} is not a JSON value")
    return root[0]


def _surrogate_reason(where: str, text: str) -> str:
    cp = ord(_SURROGATE.search(text).group())
    return f"{where} holds a lone surrogate U+{cp:04X}: not Unicode text (UTF-8 cannot encode it)"


def _needs_check(text: str, max_depth: int) -> bool:
    return (
        text.count("[") + text.count("{") > max_depth - 1
        or _ESCAPED_SURROGATE.search(text) is not None
        or has_surrogates(text)
    )


def _unique_pairs(pairs: list) -> dict:
    """``object_pairs_hook``: an object whose key repeats is rejected — ``json.loads`` would keep
    the last value silently, and which one the writer meant is unknowable."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        repeated = sorted({k for k, _ in pairs if k in seen or seen.add(k)})
        shown = ", ".join(repr(k[:40]) for k in repeated[:5]) + (", …" if len(repeated) > 5 else "")
        raise RecordRejected(f"a JSON object repeats the key {shown}: which value is meant is ambiguous "
                             "(a plain JSON parser keeps the last one silently)")
    return d


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)


def loads(text: str, max_depth: int = MAX_NESTING) -> Any:
    """``json.loads`` for hostile text: returns a record that passed :func:`check_value`.

    Text with at most ``max_depth - 1`` brackets and no ``\\uD8xx``-``\\uDFxx`` escape is
    parsed without the walk (the common case costs one ``str.count``).

    Raises:
        ValueError: invalid JSON (``json.JSONDecodeError``), or :class:`RecordRejected`: nested
            beyond ``max_depth`` (also when deeper than the parser can recurse), a lone surrogate,
            or an object that repeats a key.
    """
    try:
        obj = _DECODER.decode(text)
    except RecursionError:
        raise RecordRejected(
            f"nested more than {max_depth} levels deep (deeper than the JSON parser can follow); "
            f"records are limited to {max_depth} levels"
        ) from None
    if _needs_check(text, max_depth):
        obj = check_value(obj, max_depth)
    return obj


def _structure(text: str) -> np.ndarray:
    """Bytes of ``text`` (one per character) with the inside of every JSON string blanked, so
    that brackets and commas left are structural."""
    blanked = _JSON_STRING.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text)
    return np.frombuffer(blanked.encode("ascii", errors="replace"), dtype=np.uint8)


def split_top_level_array(text: str) -> Optional[list[str]]:
    """The texts of the elements of a top-level JSON array (``None`` when ``text`` is not one).

    Used when a ``.json`` file as a whole cannot be parsed (an element too deep to recurse
    into): each element is then parsed on its own, so the others are kept. Strings are blanked
    first (a regular expression), then nesting depth is a cumulative sum over brackets; the
    separators are the commas at depth 1. Parsing itself stays with :func:`loads`.
    """
    a = _structure(text)
    nonspace = np.flatnonzero(~np.isin(a, np.frombuffer(b" \t\r\n", dtype=np.uint8)))
    if nonspace.size == 0 or a[nonspace[0]] != ord("[") or a[nonspace[-1]] != ord("]"):
        return None
    delta = np.isin(a, _OPEN).astype(np.int64) - np.isin(a, _CLOSE).astype(np.int64)
    depth = np.cumsum(delta)  # depth after each character
    start, end = int(nonspace[0]), int(nonspace[-1])
    if depth[end] != 0 or (depth[start:end] < 1).any():
        return None  # unbalanced, or more than one top-level value
    commas = np.flatnonzero((a == ord(",")) & (depth == 1))
    commas = commas[(commas > start) & (commas < end)]
    bounds = [start, *commas.tolist(), end]
    parts = [text[bounds[i] + 1 : bounds[i + 1]] for i in range(len(bounds) - 1)]
    if len(parts) == 1 and not parts[0].strip():
        return []
    return parts


#: bytes a reader passes to :func:`text_encoding` (the head of a file): enough to get past a
#: long first line that is not JSON to the records, whose ASCII shows the encoding
ENCODING_PROBE_BYTES = 65536

_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_CANDIDATES = ("utf-8", "utf-32-le", "utf-32-be", "utf-16-le", "utf-16-be")


def code_unit(encoding: str) -> int:
    """Bytes per code unit of a UTF codec name: 4 (UTF-32), 2 (UTF-16) or 1 (UTF-8)."""
    return 4 if "32" in encoding else 2 if "16" in encoding else 1


def _reading(head: bytes, encoding: str) -> tuple[int, int]:
    """How ``head`` reads in ``encoding``: ``(records, plain)``. ``records``: its complete lines
    that are JSON objects (the strongest sign of the right encoding: records parse in it and in
    no other). ``plain``: printable ASCII, tab and newline characters, minus NUL characters and
    minus undecodable units (each becomes one U+FFFD: a bad unit counts against an encoding, it
    does not rule it out)."""
    width = code_unit(encoding)
    text = head[: len(head) - len(head) % width].decode(encoding, errors="replace")
    records = 0
    for line in text.split("\n")[:-1]:  # the last line may be cut by the probe's end
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                records += isinstance(json.loads(line), dict)
            except (ValueError, RecursionError):
                pass
    plain = sum(1 for ch in text if " " <= ch <= "~" or ch in "\n\r\t")
    return records, plain - text.count("\x00") - text.count("\ufffd")


def _is_utf8(head: bytes) -> bool:
    """``head`` is valid UTF-8, a sequence cut by the probe's end (up to 3 bytes) aside."""
    for cut in (0, 1, 2, 3):
        try:
            head[: len(head) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def text_encoding(head: bytes) -> str:
    """Python codec name of a JSON text from its first bytes (pass up to
    :data:`ENCODING_PROBE_BYTES`): ``"utf-8"``, ``"utf-8-sig"``, ``"utf-16"``/``"utf-32"`` (with a
    BOM) or ``"utf-16-le"``, ``"utf-16-be"``, ``"utf-32-le"``, ``"utf-32-be"``.

    With a BOM, or for a head that is valid UTF-8 without any zero byte, the standard library's
    :func:`json.detect_encoding` decides (RFC 4627 §3: the zero-byte pattern of the first 4
    bytes, which assumes the text starts with an ASCII character). Otherwise — zero bytes (never
    in UTF-8 JSON) or bytes that are not UTF-8 — the first character may not be ASCII (a first
    line that is not JSON, say, where RFC 4627's rule would read a UTF-16 file as UTF-8 and lose
    every record of it): the encoding is then the one in which most complete lines of the head
    are JSON objects, then the one under which it reads most plainly (:func:`_reading`), ties
    going to the earlier of UTF-8, UTF-32-LE/BE, UTF-16-LE/BE.
    """
    head = bytes(head[:ENCODING_PROBE_BYTES])  # a whole file may be passed: only its head is read
    if head.startswith(_BOMS) or (b"\x00" not in head and _is_utf8(head)):
        return json.detect_encoding(head[:4])
    return max((*_reading(head, enc), -i, enc) for i, enc in enumerate(_CANDIDATES))[3]


#: bytes asked of a file per read() by :func:`read_all`
READ_CHUNK = 1 << 20


def read_all(f) -> bytes:
    """Every byte left in the file object ``f`` (one opened by Beam's ``FileSystems``), read in
    pieces of :data:`READ_CHUNK`. Beam's decompressing reader (``.gz``, ``.bz2``, …) returns at most
    16 MiB from a ``read()`` without a size (and nothing from ``read(-1)``): a whole-file read of a
    larger compressed file would silently stop there."""
    parts = []
    while True:
        piece = f.read(READ_CHUNK)
        if not piece:
            return b"".join(parts)
        parts.append(piece)
