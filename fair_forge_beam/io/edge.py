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
  temporal and decimal values converted (:func:`json_value`); bytes that are not UTF-8 refused
  in a text field, kept as ``"base64:..."`` in another.
* :func:`json_values` — the values of a ``.json`` text (the elements of its top-level array) cut
  one by one from pieces of the file, none held whole over a size limit; each is parsed on its
  own, so that one bad or huge element does not take the others with it.
* :func:`scrub_surrogates` / :func:`scrub_json_text` — lone surrogates replaced by their
  visible escape text, for anything that is written (dead letters, warnings, results).
* :func:`open_input` — a user's input file opened for reading in bounded pieces, compressed
  ones (:data:`COMPRESSION_SUFFIXES`: ``.gz``, ``.bz2``, ``.xz``/``.lzma``, ``.zst``/``.zstd``,
  ``.deflate``) decompressed incrementally, the xz decoder's memory bounded
  (:data:`XZ_MEMLIMIT`), a file cut short reported in every compression.
* :func:`read_side_file` / :func:`read_side_text` — a user's file that is read whole (a lexicon,
  a config, a template or prompt, a corpus document, a privacy domain), refused over
  :data:`MAX_SIDE_FILE_BYTES` instead of read without a bound.
* :func:`text_encoding` — the encoding of a JSON text from its first bytes (BOM or the
  pattern of zero bytes, RFC 4627 §3 / RFC 8259 §8.1, through :func:`json.detect_encoding`;
  a head whose first character is not ASCII by how plainly it decodes).
"""
from __future__ import annotations

import base64
import codecs
import datetime as _dt
import decimal
import io
import json
import math
import os
import re
from typing import Any, NamedTuple, Optional

import numpy as np

from fair_forge_beam.plain import head_words, int_digits_reason, plain_reason, plain_words
from fair_forge_beam.quoting import quoted

__all__ = [
    "MAX_NESTING",
    "RecordRejected",
    "loads",
    "check_value",
    "LoneSurrogate",
    "TEXT_FIELDS",
    "not_utf8_reason",
    "undecodable_field",
    "json_value",
    "json_values",
    "JsonValue",
    "scrub_surrogates",
    "scrub_json_text",
    "has_surrogates",
    "text_encoding",
    "ENCODING_PROBE_BYTES",
    "head_pieces",
    "open_input",
    "CompressedDataError",
    "CompressedDataDamaged",
    "CompressedDataCut",
    "NotCompressedData",
    "compressed_check",
    "refuse_damaged",
    "COMPRESSION_SUFFIXES",
    "compression_suffix",
    "XZ_MEMLIMIT",
    "ZSTD_MAX_WINDOW",
    "MAX_SIDE_FILE_BYTES",
    "read_side_file",
    "read_side_text",
    "read_side_json",
    "binary_content",
    "not_text_reason",
    "side_json_loads",
    "check_side_nesting",
    "nesting_depth",
    "SideFileTooDeep",
    "check_regular_file",
    "NotARegularFile",
    "NonFiniteNumber",
    "broken_link",
    "json_error_reason",
    "file_kind",
    "VALUE_BYTES",
    "max_values",
    "count_values",
]

#: Deepest nesting of arrays/objects a record may have (the record itself is level 1). A
#: session record with tool traces needs about 10; 64 leaves room and stays far below Python's
#: recursion limit (1000), which ``json``, ``pydantic``, ``pickle`` and the coders all hit.
MAX_NESTING = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class RecordRejected(ValueError):
    """A record that must go to the dead letter; the message is the reason."""


class LoneSurrogate(RecordRejected):
    """A record holding a lone surrogate; ``where`` is the path of the string (or key) that holds it."""

    def __init__(self, message: str, where: str):
        super().__init__(message)
        self.where = where


#: the fields of an interaction the reader reads as text (ids, language, context, each turn's query,
#: answer, reference, observation, and the nested values of agentic steps, logprobs and spans), and
#: the containers that hold them: bytes that are not UTF-8 there make the record a dead letter
#: (:func:`not_utf8_reason`); only in another field are they kept as ``"base64:..."`` text, with a warning
TEXT_FIELDS = frozenset({
    "session_id", "assistant_id", "language", "context", "chatbot_role", "conversation", "metadata", "batch",
    "turn_index", "qa_id", "query", "assistant", "ground_truth_assistant", "observation", "agentic",
    "ground_truth_agentic", "logprobs", "weight", "spans",
})


def not_utf8_reason(field: Optional[str], reason: str, offset: int, of: str) -> str:
    """The reason of a dead letter for bytes that are not UTF-8, the same in every input format:
    ``field 'conversation.0.assistant' holds bytes that are not UTF-8 text (invalid start byte at
    byte 35 of the value) …`` (``field`` ``None``: the field could not be told). A path holding the
    bytes themselves (a key of a line decoded with ``surrogateescape``: ``'k\udced\udca0\udc80'``) is
    shown as its bytes, ``field b'k\xed\xa0\x80'`` (trial47 B8: the escapes read as characters)."""
    what = f"field {quoted(_as_bytes(field))}" if field else "a field"
    return (f"{what} holds bytes that are not UTF-8 text ({reason} at byte {offset:,} of {of}): decode it to text "
            "(e.g. from Latin-1 or cp1252) before the audit")


#: a byte that did not decode, as ``surrogateescape`` holds it (U+DC80–U+DCFF: bytes 0x80–0xFF)
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _as_bytes(text: str):
    """``text`` as its UTF-8 bytes when it holds bytes that did not decode (``surrogateescape``), so
    that they show as bytes (``b'k\xed\xa0\x80'``); else ``text`` itself."""
    if not _ESCAPED_BYTE.search(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of another kind too: shown as it is
        return text


def undecodable_field(text: str, limit: Optional[int] = None) -> Optional[str]:
    """The path of the first string or key of JSON ``text`` that holds a lone surrogate — where the
    bytes that did not decode are once the text is decoded with ``surrogateescape`` (UTF-8) or
    ``surrogatepass`` (UTF-16/32) — or ``None`` when the text is no record (not JSON, over a bound)."""
    try:
        loads(text, limit=limit)
    except LoneSurrogate as exc:
        return exc.where
    except (ValueError, RecursionError):
        return None
    return None


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
    (bytes that are not UTF-8 are refused; :func:`check_value` decides by field), numpy scalars → Python numbers.

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
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordRejected(not_utf8_reason(None, exc.reason, exc.start, "the value")) from None
    if isinstance(value, np.generic):
        return value.item()
    raise RecordRejected(f"value of type {type(value).__name__} has no JSON form")


def check_value(value: Any, max_depth: int = MAX_NESTING, convert: bool = False,
                text_fields: Optional[frozenset] = None, kept: Optional[list] = None) -> Any:
    """Check a parsed record without recursion; return it (converted when ``convert``).

    Rules: nesting depth ≤ ``max_depth`` (the record itself is level 1); every string and key is
    Unicode text (no lone surrogate); keys are strings; with ``convert=False`` only JSON types
    (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``; tuples as lists), with
    ``convert=True`` other scalars are converted by :func:`json_value` (Parquet rows).

    Bytes that are not UTF-8 (``convert=True``): with ``text_fields=None`` they are left as bytes
    (the reader decides later, knowing the run's slice and timestamp fields); otherwise under a field
    of ``text_fields`` (the top-level key, or a key of a conversation entry, ``metadata`` or ``batch``)
    they reject the record (:func:`not_utf8_reason`: the field and the byte offset), under any other
    field they become ``"base64:..."`` text and their path is appended to ``kept``.

    Raises:
        RecordRejected: the first rule broken in the record's order (a mapping's keys are checked
            before its values), with the path of the offending value (``conversation.0.agentic``)
            in the message.
    """
    root = [value]
    stack = [(root, 0, value, 1, "", None)]
    while stack:
        parent, key, node, depth, path, field = stack.pop()
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
                        raise RecordRejected(f"key {quoted(k)} at {where} is not a string")
                    if has_surrogates(k):
                        raise LoneSurrogate(_surrogate_reason(f"a key at {where}", k), f"{path}.{k}" if path else k)
                items = reversed(node.items())
            else:
                if isinstance(node, tuple):
                    node = list(node)
                    parent[key] = node
                items = zip(range(len(node) - 1, -1, -1), reversed(node))
            # pushed last to first, so that the walk meets values in the record's own order and the
            # reason names the first broken one (trial33 T3: it named conversation.2 of three)
            # the field a value belongs to: the record's key, or the key of a conversation entry, a metadata or batch
            names = isinstance(node, dict) and (depth == 1 or (field == "conversation" and depth == 3)
                                                or (field in ("metadata", "batch") and depth == 2))
            for k, v in items:
                if v is None or isinstance(v, (bool, int, float)):
                    continue
                stack.append((node, k, v, depth + 1, f"{path}.{k}" if path else str(k), k if names else field))
        elif isinstance(node, str):
            if has_surrogates(node):
                raise LoneSurrogate(_surrogate_reason(where, node), path or "record")
        elif convert and isinstance(node, (bytes, bytearray, memoryview)):
            b = bytes(node)
            try:
                parent[key] = b.decode("utf-8")
            except UnicodeDecodeError as exc:
                if text_fields is None:
                    parent[key] = b
                elif field is None or field in text_fields:
                    raise RecordRejected(not_utf8_reason(path or "record", exc.reason, exc.start, "the value")) from None
                else:
                    parent[key] = "base64:" + base64.b64encode(b).decode("ascii")
                    if kept is not None:
                        kept.append(path)
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


def loads(text: str, max_depth: int = MAX_NESTING, limit: Optional[int] = None) -> Any:
    """``json.loads`` for hostile text: returns a record that passed :func:`check_value`.

    Text with at most ``max_depth - 1`` brackets and no ``\\uD8xx``-``\\uDFxx`` escape is
    parsed without the walk (the common case costs one ``str.count``).

    Raises:
        ValueError: invalid JSON (``json.JSONDecodeError``), or :class:`RecordRejected`: nested
            beyond ``max_depth`` (also when deeper than the parser can recurse), a lone surrogate,
            or an object that repeats a key, or (``limit``: the record size limit) more JSON
            values than :func:`max_values` allows, refused before it is parsed.
    """
    too_many = _too_many_values(text, limit)
    if too_many:
        raise RecordRejected(too_many)
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


_CONTROL_NAMES = {0: "NUL", 0x7F: "DEL", 0x1B: "ESC", 0x0C: "form feed", 0x0B: "vertical tab", 0x08: "backspace",
                  0x0D: "CR, carriage return", 0x0A: "LF, line feed", 0x09: "tab"}
#: what a raw line end or tab inside a JSON string says of the file (JSON allows them only escaped)
_RAW_IN_STRING = {"\r": "the file's text holds raw line ends (CR alone: classic Mac OS line ends?) inside a string; "
                        "write them escaped (\\r)",
                  "\n": "the text holds a raw line end inside a string; write it escaped (\\n)",
                  "\t": "the text holds a raw tab inside a string; write it escaped (\\t)"}


def json_error_reason(exc: ValueError, text: str) -> str:
    """``"invalid JSON: <parser's message>"`` for the line ``text``, with what the text holds where
    the parser stopped when the message alone points the wrong way: a control character there
    (``U+0000 (NUL)``: JSON allows one only escaped, inside a string — a binary or zero-padded
    file), or records separated by a carriage return alone (the file's lines end in CR, classic
    Mac OS: a line is cut at LF only, and a raw CR cannot be inside a JSON string, so such a "line"
    holds several records; the file is not read as lines of CR — convert its line ends)."""
    digits = int_digits_reason(exc)
    if digits:  # valid JSON: a number longer than Python converts
        return digits
    why = plain_reason(exc)
    reason = f"invalid JSON: {why}"
    pos = getattr(exc, "pos", None)
    if not isinstance(pos, int) or not 0 <= pos < len(text):
        return reason
    ch = text[pos]
    gap = text[len(text[:pos].rstrip(" \t\r\n")):pos]  # the whitespace before the extra data
    if getattr(exc, "msg", "") == "Extra data" and "\r" in gap and "\n" not in gap:
        n = text.count("\r") - text.count("\r\n")
        # the cause first: a reason kind longer than 160 characters keeps its start and its end
        # the parser's "Extra data: line 1 column N" is left out: it is the symptom, and a grouped reason of
        # more than 160 characters lost its middle to it (trial 28: "… cut at LF … N))")
        return (f"invalid JSON: lines end in CR alone (classic Mac OS), so this line holds {n:,} CR(s) and more "
                "than one record; convert its line ends (e.g. tr '\\r' '\\n' < in > out)")
    code = ord(ch)
    if (code < 0x20 and ch not in " \t\r\n") or code == 0x7F:
        name = _CONTROL_NAMES.get(code, "a control character")
        return (f"invalid JSON: a U+{code:04X} ({name}) character where the parser stopped ({why}): JSON allows "
                "one only escaped, inside a string (a binary, zero-padded or damaged file?)")
    if ch in _RAW_IN_STRING and str(getattr(exc, "msg", "")).startswith("Invalid control character"):
        return (f"invalid JSON: a U+{code:04X} ({_CONTROL_NAMES[code]}) character inside a string where the parser "
                f"stopped ({why}): {_RAW_IN_STRING[ch]}")
    return reason


class JsonValue(NamedTuple):
    """One value of a JSON text, cut by :func:`json_values`.

    ``index``: its place in the top-level array (0 for a text holding one value); ``offset``:
    byte offset of the text between its separators; ``text``: its bytes (surrounding whitespace
    stripped), ``None`` when not kept (over the limit, or the text breaks here); ``size``: bytes
    between its separators; ``head``: its first bytes (for a dead letter); ``problem``: ``None``,
    ``"oversized"``, or why the text cannot be read on from here (a reason).
    """

    index: int
    offset: int
    text: Optional[bytes]
    size: int
    head: bytes
    problem: Optional[str] = None


_WHITESPACE = b" \t\r\n"


class _Value:
    """The value being cut: its bytes while it stays within the limit, else only its size and head."""

    def __init__(self, index: int, offset: int, limit: int, head_bytes: int):
        self.index, self.offset, self.limit, self.head_bytes = index, offset, limit, head_bytes
        self.pieces: Optional[list] = []
        self.size, self.head = 0, b""

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        if len(self.head) < self.head_bytes:
            self.head = (self.head + piece[: self.head_bytes]).lstrip(_WHITESPACE)[: self.head_bytes]
        self.size += len(piece)
        if self.pieces is not None:
            if self.size <= self.limit:
                self.pieces.append(piece)
            else:
                self.pieces = None  # over the limit: never held whole

    def done(self, problem: Optional[str] = None) -> JsonValue:
        if problem is not None or self.pieces is None:
            return JsonValue(self.index, self.offset, None, self.size, self.head, problem or "oversized")
        return JsonValue(self.index, self.offset, b"".join(self.pieces).strip(_WHITESPACE), self.size, self.head)


def _cuts(a: np.ndarray, state: list) -> tuple[np.ndarray, int]:
    """Structure of one chunk ``a`` (bytes as ``uint8``) inside a top-level array: the positions of
    the commas that separate its elements, and the position of the bracket that closes it (-1
    when not in this chunk). ``state`` = ``[backslashes ending the text so far, inside a string
    (0/1), nesting depth]`` is carried from chunk to chunk and updated.

    A quote ends or starts a string unless an odd run of backslashes precedes it; brackets and
    commas outside strings are structural; depth is their running sum (RFC 8259 §2, §7).
    """
    if a.size == 0:
        return np.empty(0, dtype=np.int64), -1
    if _changes_nothing(a, state):
        return np.empty(0, dtype=np.int64), -1
    outside, opens, closes, depth = _structure(a, state)
    ends = np.flatnonzero(closes & (depth == 0))
    end = int(ends[0]) if ends.size else -1
    commas = np.flatnonzero(outside & (a == ord(",")) & (depth == 1))
    if end >= 0:
        commas = commas[commas < end]
    return commas, end


def _changes_nothing(a: np.ndarray, state: list) -> bool:
    """Whether the non-empty chunk ``a`` leaves the structure as it is — no quote and no backslash,
    and inside a string or without a bracket or comma: then it holds no cut, its string state and
    depth carry over, and the run of backslashes ending the text is 0 (``state`` updated so). A few
    byte searches instead of :func:`_structure`'s dozen passes over the chunk: a long string value
    (an image, a transcript, a decompression bomb's one string) is crossed at the speed of
    ``memchr`` (issue 26: 256 MiB of one string took ~25 s of numpy per pass, and a run makes two)."""
    raw = a.tobytes()
    if b'"' in raw or b"\\" in raw:
        return False
    if not state[1] and any(c in raw for c in (b"[", b"]", b"{", b"}", b",")):
        return False
    state[0] = 0
    return True


def _structure(a: np.ndarray, state: list) -> tuple:
    """``(outside strings, opening brackets, closing brackets, depth)`` masks of the non-empty
    chunk ``a``, ``state`` carried and updated as :func:`_cuts` says."""
    n = a.size
    idx = np.arange(n, dtype=np.int64)
    backslash = a == ord("\\")
    last_plain = np.maximum.accumulate(np.where(backslash, -1, idx))  # last non-backslash at or before i
    before = np.empty(n, dtype=np.int64)
    before[0], before[1:] = -1, last_plain[:-1]
    run = np.where(before >= 0, idx - 1 - before, idx + state[0])  # backslashes right before i
    quote = (a == ord('"')) & (run % 2 == 0)
    quotes = np.cumsum(quote, dtype=np.int64) + state[1]
    outside = (quotes % 2 == 0) & ~quote
    opens = outside & ((a == ord("[")) | (a == ord("{")))
    closes = outside & ((a == ord("]")) | (a == ord("}")))
    depth = np.cumsum(opens.astype(np.int64) - closes.astype(np.int64)) + state[2]
    state[0] = int(n - 1 - last_plain[-1]) if last_plain[-1] >= 0 else state[0] + n
    state[1], state[2] = int(quotes[-1] % 2), int(depth[-1])
    return outside, opens, closes, depth


#: bytes of text per JSON value a record may have on average: a parsed value takes Python memory
#: whatever its text (an empty object ``{}``: 2 bytes of text, ~72 bytes in a list), so a record
#: within ``--max-record-bytes`` may hold at most ``limit // VALUE_BYTES`` values (arrays,
#: objects, strings, numbers, literals). Parsed, they take at most ~5x the limit; a record of
#: ordinary text (a conversation) has a value per 20-200 bytes of text.
VALUE_BYTES = 16


def max_values(limit: int) -> int:
    """The most JSON values a record within ``limit`` bytes may hold (:data:`VALUE_BYTES`)."""
    return max(int(limit) // VALUE_BYTES, 1)


def count_values(text: str, chunk_chars: int = 1 << 20) -> int:
    """How many JSON values ``text`` holds, from its structure alone (never parsed): one per
    element of an array or member of an object, plus the text's own value — the commas and
    opening brackets outside strings, plus one (an upper bound by one per empty container).
    Vectorised per chunk of ``chunk_chars`` characters (any character outside ASCII counts as a
    byte of a string or of invalid text, which the parser then names)."""
    state, total = [0, 0, 1], 1
    for at in range(0, len(text), chunk_chars):
        piece = text[at:at + chunk_chars].encode("latin-1", "replace")
        a = np.frombuffer(piece, dtype=np.uint8)
        outside, opens, _closes, _depth = _structure(a, state)
        total += int(np.count_nonzero(opens)) + int(np.count_nonzero(outside & (a == ord(","))))
    return total


def _too_many_values(text: str, limit: Optional[int]) -> Optional[str]:
    """The reason a text of a record within ``limit`` bytes is refused before it is parsed: it
    holds more JSON values than :func:`max_values` (``None``: it does not, or no limit)."""
    if not limit:
        return None
    most = max_values(limit)
    # a value takes at least one character and its separator: a short text cannot hold too many
    if len(text) <= most or text.count(",") + text.count("[") + text.count("{") < most:
        return None
    n = count_values(text)
    if n <= most:
        return None
    return (f"the record holds {n:,} JSON values, over the limit of {most:,} for a record (--max-record-bytes "
            f"{int(limit):,} / {VALUE_BYTES} bytes a value): parsed, each value takes memory whatever its text; "
            "it is never parsed")


def _trailing(index: int, offset: int, rest: bytes, head_bytes: int) -> JsonValue:
    """The problem of text after the top-level array's end: ``rest`` (at byte ``offset``) is not whitespace."""
    at = offset + len(rest) - len(rest.lstrip(_WHITESPACE))
    return JsonValue(index, at, None, 0, rest.strip(_WHITESPACE)[:head_bytes],
                     f"data after the end of the top-level array, at byte {at:,}")


def json_values(read, limit: int, head_bytes: int = 1024, chunk_bytes: int = 1 << 20):
    """The values of a UTF-8 JSON text read in pieces: the elements of a top-level array one by
    one, or the text's one value. Yields :class:`JsonValue`; a value over ``limit`` bytes is
    never held whole (its ``problem`` is ``"oversized"``, with its size and first
    ``head_bytes`` bytes), and the values after it are still cut.

    ``read(n)``: returns up to ``n`` more bytes, ``b""`` at the end. Only the structure is found
    here (strings, escapes, brackets, commas — :func:`_cuts`, vectorised per chunk of
    ``chunk_bytes``); each value is parsed by :func:`loads`. Memory: at most ``limit`` +
    ``chunk_bytes`` bytes of text, plus a few arrays of one chunk.

    A text that breaks the array's structure yields a last value with a ``problem`` naming it
    (an empty element ``[1,,2]``, a ``}`` closing the array, data after its end, the text ending
    inside it), then ends. An empty text (or only whitespace) yields nothing: it holds no record,
    as an empty JSON Lines file, and was one rejected record that never existed (trial33 T5).
    """
    value: Optional[_Value] = None
    mode, offset, index = "start", 0, 0
    state = [0, 0, 1]
    while True:
        chunk = read(chunk_bytes)
        if not chunk:
            break
        pos = 0
        if mode == "start":
            body = chunk.lstrip(_WHITESPACE)
            if not body:
                offset += len(chunk)
                continue
            pos = len(chunk) - len(body)
            if body[:1] == b"[":
                mode, pos = "array", pos + 1
            else:
                mode = "one"
            value = _Value(0, offset + pos, limit, head_bytes)
        if mode == "one":
            value.add(chunk[pos:])
        elif mode == "after":
            if chunk.strip(_WHITESPACE):
                yield _trailing(index, offset, chunk, head_bytes)
                return
        else:
            commas, end = _cuts(np.frombuffer(chunk, dtype=np.uint8)[pos:], state)
            close = end + pos if end >= 0 else -1
            for cut in [*(commas + pos).tolist(), *([close] if close >= 0 else [])]:
                value.add(chunk[pos:cut])
                last = cut == close
                got = value.done()
                if got.text == b"" and not (last and index == 0):
                    yield value.done("an empty element (two commas, or a comma next to a bracket), at byte "
                                     f"{offset + cut:,}")
                    return
                if got.text != b"" or got.problem:
                    yield got
                if last:
                    if chunk[cut] != ord("]"):
                        yield JsonValue(index, offset + cut, None, 0, b"", f"'{chr(chunk[cut])}' closes the top-level "
                                        f"array, at byte {offset + cut:,}")
                        return
                    mode = "after"
                    if chunk[cut + 1:].strip(_WHITESPACE):
                        yield _trailing(index, offset + cut + 1, chunk[cut + 1:], head_bytes)
                        return
                    break
                index += 1
                pos = cut + 1
                value = _Value(index, offset + pos, limit, head_bytes)
            else:
                value.add(chunk[pos:])
        offset += len(chunk)
    if mode == "start":  # empty or only whitespace: no record, as an empty JSON Lines file (trial33 T5)
        return
    elif mode == "one":
        yield value.done()
    elif mode == "array":
        inside = "a string of element" if state[1] else "element"
        yield value.done(f"the text ends inside {inside} {index} of the top-level array, at byte {offset:,} (truncated?)")


#: bytes a reader passes to :func:`text_encoding` (the head of a file): enough to get past a
#: long first line that is not JSON to the records, whose ASCII shows the encoding
ENCODING_PROBE_BYTES = 65536


def head_pieces(f, have: int = 0):
    """The pieces (bytes) of binary file object ``f`` that make its head up to
    :data:`ENCODING_PROBE_BYTES` bytes, ``have`` of them read already (fewer at the end of the
    file): a decompressing reader may give fewer bytes than one ``read`` asks for. Read lazily, so
    a caller that stops at an error of ``f`` keeps the pieces before it."""
    while have < ENCODING_PROBE_BYTES:
        piece = f.read(ENCODING_PROBE_BYTES - have)
        if not piece:
            return
        have += len(piece)
        yield piece

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


#: first bytes of formats that are never JSON text in any encoding (their specifications' magic
#: numbers: RFC 1952 gzip, bzip2, xz, RFC 8878 zstd, zip, Parquet, 7z; RFC 1950 zlib headers of
#: the four compression levels), and the name a reason gives them
_BINARY_SIGNATURES = ((b"\x1f\x8b", "gzip-compressed data"), (b"BZh", "bzip2-compressed data"),
                      (b"\xfd7zXZ\x00", "xz-compressed data"), (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
                      (b"PK\x03\x04", "a zip archive"), (b"PAR1", "a Parquet file"),
                      (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
                      *((bytes([0x78, b]), "zlib/DEFLATE-compressed data") for b in (0x01, 0x5E, 0x9C, 0xDA)))


def binary_content(head: bytes) -> Optional[str]:
    """What ``head`` (the first bytes of a file as read, after its own decompression) is when it
    starts with the magic number of a compressed or binary format — ``"gzip-compressed data"``,
    ``"a Parquet file"``, … — else None. For the reason of a file that is not text (a file
    compressed twice, or named without its compression's ending): ask it only of a head that is
    not UTF-8 (:func:`text_encoding` then guesses among UTF-16/32, which such bytes never are)."""
    head = bytes(head[:8])
    if head.startswith(b"BZh") and not (len(head) > 3 and 0x31 <= head[3] <= 0x39):
        return None  # "BZh" + a block size digit 1-9
    return next((name for magic, name in _BINARY_SIGNATURES if head.startswith(magic)), None)


def not_text_reason(path: str, head: bytes) -> Optional[str]:
    """The one reason for a whole file whose first bytes (``head``, up to
    :data:`ENCODING_PROBE_BYTES`) are not UTF-8 and start as a compressed or binary format
    (:func:`binary_content`), or None: such a file was read as garbage lines under a guessed
    encoding, each a dead letter saying it does not decode."""
    kind = binary_content(head)
    if kind is None or _is_utf8(bytes(head[:ENCODING_PROBE_BYTES])):
        return None
    return f"file {path} holds {kind}, not text (compressed twice, or its name lacks the format's ending); not read"


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


# ------------------------------------------------------------------ opening a user's input file
class CompressedDataError(OSError):
    """A compressed input file whose data cannot be read to its end (any compression): the message
    is ``"<path>: <what happened, in words>"`` (``what``: the words alone). Its subclasses tell what
    happened: :class:`CompressedDataDamaged` (a check failed or the data does not decode: nothing
    of the file is to be trusted), :class:`CompressedDataCut` (the data ends early: what came before
    is sound as far as it can be told), :class:`NotCompressedData` (the file, or what follows its last
    stream, is not data of its compression); this class itself: a decoder's limit (xz memory, a zstd
    window)."""

    what = ""
    #: whether none of the file's records is read (its data is not to be trusted, or cannot be
    #: decoded at all); False: the records before the failure are read, then it is told
    reads_nothing = True


class CompressedDataDamaged(CompressedDataError):
    """A check of the compressed data failed — gzip's CRC-32 or length, zlib's Adler-32, zstd's
    checksum, bzip2's block CRC, xz's check — or the data does not decode (``invalid distance too far
    back``). The check of a gzip member comes after all of its data was given: a flipped byte makes
    the back-references after it copy wrong bytes, which read as records that are not in the data
    (trial 33 T6: 954 such interactions scored). No record of such a file is read
    (:func:`compressed_check` tells it before any is)."""


class CompressedDataCut(CompressedDataError):
    """The compressed data ends before its end-of-stream marker (a file cut short, or a copy that
    stopped): the records decompressed before the cut are read; the rest of the file is missing."""

    reads_nothing = False


class NotCompressedData(CompressedDataError):
    """The file does not start as data of its compression (``after_streams`` False: a plain file
    named ``.gz``), or what follows its last complete stream is not another stream (``after_streams``
    True: plain lines appended to a ``.gz``; the streams before it passed their checks)."""

    after_streams = False

    @property
    def reads_nothing(self) -> bool:
        return not self.after_streams


#: the compression each ``CompressionTypes`` value names, in words
_COMPRESSION_NAMES = {"gzip": "gzip", "bzip2": "bzip2", "lzma": "xz", "zstd": "zstd", "deflate": "zlib"}


class _NoData(EOFError):
    """A compressed file of 0 bytes: it ends before the first byte of its compression's header
    (``gzip -t``: "unexpected end of file", ``bzip2 -t``: "file ends unexpectedly"), a file cut short
    at its start, or a copy that stopped before it wrote anything."""


class _NotAStream(ValueError):
    """A stream of a file (its first, or one after a complete stream) that does not start with its
    compression's header (``head``: its first bytes)."""

    def __init__(self, head: bytes):
        super().__init__("no stream header")
        self.head = bytes(head)


def compressed_error(path: str, kind: str, exc: BaseException, pos: int, head: bytes = b"") -> CompressedDataError:
    """The :class:`CompressedDataError` (of the subclass that says what happened) for decompressor
    error ``exc`` while reading file ``path`` of compression ``kind`` (a ``CompressionTypes`` value),
    ``pos`` decompressed bytes given before it; ``head``: the first bytes of the stream that failed
    to start, when the reader knows them. What each decompressor says, and what it means:

    * ``EOFError`` (each reader's "ends before the end-of-stream marker"; zstd's frame structure):
      cut short;
    * gzip ``Not a gzipped file``, xz ``Input format not supported``, zlib's header errors
      (``incorrect header check`` …), zstd ``Unknown frame descriptor``, a bzip2 stream without ``BZh``: not data of the
      compression — at the start (``pos`` 0), or after the last stream;
    * a decoder's limit (``decompressing needs …``, :class:`_Unxz`, :class:`_Unzstd`): the base class;
    * anything else (a check that fails, data that does not decode): damaged."""
    name = ("lzma" if str(path).lower().endswith(".lzma") else "xz") if kind == "lzma" else _COMPRESSION_NAMES.get(kind, kind)
    text = str(exc).strip().splitlines()[0].strip() if str(exc).strip() else ""
    if isinstance(exc, _NoData):
        cls, what = CompressedDataCut, f"the file is empty (0 bytes), it ends before its {name} header"
    elif isinstance(exc, EOFError):
        cls, what = CompressedDataCut, f"the {name} data ends before its end-of-stream marker"
    elif isinstance(exc, _NotAStream) or text.startswith("Not a gzipped file") or any(t in text for t in (
            "Input format not supported", "Unknown frame descriptor",
            "incorrect header check", "unknown compression method", "invalid window size")):  # zlib's header
        cls = NotCompressedData
        words = plain_reason(exc)  # gzip's names the bytes it found; the others', the stream's head
        if kind != "gzip":
            shown = head_words(getattr(exc, "head", head), name)
            words = f"not {name} data ({shown})" if shown else f"not {name} data"
        what = words if not pos else f"data after the last {name} stream is {words}"
    elif text.startswith("decompressing needs"):
        cls, what = CompressedDataError, f"unreadable {name} data ({text})"
    else:
        cls = CompressedDataDamaged
        detail = re.sub(r"^(Error -?\d+ while decompressing data|zstd decompress error): ", "", text)
        if kind == "gzip" and type(exc).__name__ == "BadGzipFile":
            what = plain_reason(exc)  # gzip data check (CRC) failed, length check (ISIZE) failed, a damaged header
        elif detail == "incorrect data check":
            what = "zlib data check (Adler-32) failed"
        elif "doesn't match checksum" in detail:
            what = "zstd data check (checksum) failed"
        elif kind == "bzip2":  # bz2 says "Invalid data stream" of every damage
            what = "corrupt bzip2 data (a block's check (CRC) failed or it does not decode)"
        elif kind == "lzma" and detail == "Corrupt input data":
            what = f"corrupt {name} data (a check failed or it does not decode)"
        else:
            detail = re.sub(r"^[A-Z](?=[a-z])", lambda m: m.group(0).lower(), plain_words(detail)) if detail else ""
            what = f"corrupt {name} data ({detail or 'it does not decode'})"
        what += ": the file is damaged"
    out = cls(f"{path}: {what}" + (" (the file is cut short)" if cls is CompressedDataCut else ""))
    out.what = what
    if cls is NotCompressedData:
        out.after_streams = bool(pos)
    return out


class _Streams:
    """The part the readers of compressed streams written one after another share: the compressed
    bytes not yet given to a decompressor (``_tail``), read from binary file ``raw`` in pieces of
    :data:`READ_CHUNK`, and whether the data read so far ends inside a stream (``_inside``)."""

    def __init__(self, raw):
        self._raw, self._tail, self._inside = raw, b"", False

    def _refill(self) -> bool:
        """The next compressed piece in ``_tail`` when it is empty; False at the end of the data.
        Raises ``EOFError`` when the data ends inside a stream (a file cut short)."""
        if not self._tail:
            self._tail = self._raw.read(READ_CHUNK)
            if not self._tail:
                if self._inside:
                    raise EOFError("compressed data ends before the end-of-stream marker")
                return False
        return True

    def close(self) -> None:
        pass


class _Inflate(_Streams):
    """``read(n)`` of DEFLATE data (zlib-wrapped, as Beam writes ``.deflate``) from binary file
    ``raw``: at most ``n`` bytes decompressed per call (``zlib``'s ``max_length``), streams
    written one after another read on. Data that ends inside a stream raises ``EOFError``."""

    def __init__(self, raw):
        import zlib

        super().__init__(raw)
        self._new, self._d = zlib.decompressobj, zlib.decompressobj()
        self._fresh, self.stream_head = True, b""

    def read(self, n: int) -> bytes:
        while True:
            if not self._refill():
                return b""
            if self._fresh:  # a stream starts here: its first bytes name what it is, if it fails to start
                self._fresh, self.stream_head = False, self._tail[:8]
            out = self._d.decompress(self._tail, n)
            self._inside = not self._d.eof
            if self._d.eof:
                self._tail = self._d.unused_data  # (unconsumed_tail repeats it at the end of a stream)
                self._d, self._fresh = self._new(), True  # a next stream, if any
            else:
                self._tail = self._d.unconsumed_tail
            if out:
                return out


#: the name endings :func:`open_input` decompresses, as Beam's ``CompressionTypes.detect_compression_type``
#: tells them (lower case; any other name is read uncompressed)
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".deflate")

#: most memory the xz/lzma decoder may use for one file, in bytes (liblzma's ``memlimit``): 128 MiB,
#: the window zstandard allows by default. ``xz -9`` needs 65 MiB; a file written with a larger
#: dictionary (``xz --lzma2=dict=1536MiB`` makes its decoder allocate 1.5 GiB) is refused as
#: unreadable data, one line naming the limit, instead of exhausting a worker.
XZ_MEMLIMIT = 128 * 2**20

#: largest window a zstd frame may need to be decoded, in bytes: 128 MiB, zstandard's default
#: (``zstd --ultra -22`` needs 128 MiB, ``zstd -19`` 8 MiB); a frame written with a longer window
#: (``zstd --long=31``: 2 GiB) is refused as unreadable data, one line naming its window and the limit
ZSTD_MAX_WINDOW = 128 * 2**20


def compression_suffix(path: str) -> str:
    """The compression ending of ``path`` (one of :data:`COMPRESSION_SUFFIXES`, lower case), or ``""``."""
    p = path.lower()
    return next((c for c in COMPRESSION_SUFFIXES if p.endswith(c)), "")


class _OneStreamAtATime(_Streams):
    """The read loop of a decompressor that decodes one stream and stops at its end (``eof``,
    ``unused_data``, ``needs_input``: ``lzma.LZMADecompressor``, ``bz2.BZ2Decompressor``): at most
    ``n`` bytes decompressed per ``read(n)`` (their ``max_length``); after a stream's end, the rest
    starts the next stream (:meth:`_next_stream`), so data after the last stream that is not
    another stream fails in the decompressor. Data that ends inside a stream raises ``EOFError``."""

    def __init__(self, raw):
        super().__init__(raw)
        self._d, self.stream_head = None, b""

    def _next_stream(self):
        """A decompressor for the stream that starts at ``_tail``, or None to read more first."""
        raise NotImplementedError

    def _decompress(self, data: bytes, n: int) -> bytes:
        return self._d.decompress(data, n)

    def read(self, n: int) -> bytes:
        while True:
            if self._d is not None and self._d.eof:
                self._tail, self._d, self._inside = self._d.unused_data, None, False
            if self._d is None or self._d.needs_input:
                if not self._refill():
                    return b""
                if self._d is None:
                    self._d = self._next_stream()
                    if self._d is None:
                        continue
                    self.stream_head = self._tail[:8]
                data, self._tail = self._tail, b""
            else:
                data = b""
            self._inside = True
            out = self._decompress(data, n)
            if out:
                return out


class _Unxz(_OneStreamAtATime):
    """``read(n)`` of xz (or legacy ``.lzma``) data from binary file ``raw``: at most ``n`` bytes
    decompressed per call (``LZMADecompressor``'s ``max_length``), streams written one after another
    read on (zero-byte stream padding between them skipped), the decoder's memory at most
    ``memlimit`` bytes. Data that ends inside a stream raises ``EOFError``; a stream that needs more
    memory than ``memlimit``, ``lzma.LZMAError`` naming the limit. (``lzma.LZMAFile`` takes no
    ``memlimit``, and reads data after a complete stream that does not decode as its end, silently.)"""

    def __init__(self, raw, memlimit: int):
        import lzma

        super().__init__(raw)
        self._lzma, self._memlimit = lzma, memlimit

    def _next_stream(self):
        padding = self._tail
        self._tail = self._tail.lstrip(b"\x00")  # stream padding
        if not self._tail:
            self._padding = self._padding or padding[:8]
            return None
        self._started = True
        return self._lzma.LZMADecompressor(memlimit=self._memlimit)

    _started, _padding = False, b""

    def read(self, n: int) -> bytes:
        out = super().read(n)
        if not out and not self._started and self._padding:  # zero bytes and no stream: padding of nothing
            raise _NotAStream(self._padding)  # (xz -t: "File format not recognized")
        return out

    def _decompress(self, data: bytes, n: int) -> bytes:
        try:
            return self._d.decompress(data, n)
        except self._lzma.LZMAError as exc:
            if "memory" in str(exc).lower():
                raise self._lzma.LZMAError(
                    f"decompressing needs more memory than the limit of {self._memlimit / 2**20:,.0f} MiB (the file "
                    "was compressed with a larger dictionary, e.g. xz --lzma2=dict=...; xz -9 needs 65 MiB)") from None
            raise


class _Bunzip2(_OneStreamAtATime):
    """``read(n)`` of bzip2 data from binary file ``raw``: at most ``n`` bytes decompressed per call
    (``BZ2Decompressor``'s ``max_length``), streams written one after another read on. Data after a
    complete stream that is not another stream raises ``OSError`` (``bz2.BZ2File`` ends the file
    there without a word: appended plain lines were silently dropped); data that ends inside a
    stream, ``EOFError``."""

    def _next_stream(self):
        import bz2

        # "BZh" and the block size digit (a shorter tail at the end of the data: the decompressor
        # tells a stream cut there); bz2 says "Invalid data stream" of anything else as of damage
        if not re.fullmatch(rb"B(?:Z(?:h[1-9]?)?)?", self._tail[:4]):
            raise _NotAStream(self._tail[:8])
        return bz2.BZ2Decompressor()


class _Unzstd:
    """``read1(n)`` / ``read(n)`` of the zstd data of binary file ``raw`` (zstandard's stream reader,
    frames read on, the window bounded by ``max_window`` bytes); a frame that needs a longer window
    raises ``zstandard.ZstdError`` naming its window and the limit (zstandard says "Frame requires
    too much memory for decoding"); :meth:`complete` as :meth:`_ZstdFrames.complete`."""

    def __init__(self, raw, max_window: int):
        import zstandard

        self._zstd, self._max = zstandard, int(max_window)
        self._frames = _ZstdFrames(raw)
        self._reader = zstandard.ZstdDecompressor(max_window_size=self._max).stream_reader(
            self._frames, read_size=READ_CHUNK, read_across_frames=True, closefd=False)

    def complete(self) -> bool:
        return self._frames.complete()

    @property
    def stream_head(self) -> bytes:
        return self._frames.stream_head

    def _named(self, read, n: int) -> bytes:
        try:
            return read(n)
        except self._zstd.ZstdError as exc:
            if "memory" not in str(exc).lower():
                raise
            need = f"a window of {self._frames.window / 2**20:,.0f} MiB" if self._frames.window > self._max \
                else "a longer window"
            raise self._zstd.ZstdError(
                f"decompressing needs {need}, over the limit of {self._max / 2**20:,.0f} MiB (the file was compressed "
                "with a long window, e.g. zstd --long=31; zstd --ultra -22 needs 128 MiB)") from None

    def read1(self, n: int = -1) -> bytes:
        return self._named(self._reader.read1, n)

    def read(self, n: int = -1) -> bytes:
        return self._named(self._reader.read, n)

    def close(self) -> None:
        self._reader.close()


class _ZstdFrames:
    """The compressed file given to zstandard's stream reader, following the frame structure of what
    is read through it (RFC 8878 §3.1: frame header, block headers and sizes, checksum, skippable
    frames; only headers are looked at, the blocks are skipped by their sizes): :meth:`complete` says
    whether the data read so far ends between frames. zstandard's reader ends a file cut inside a frame
    without an error (nor does Beam's); this tells."""

    _MAGIC, _SKIPPABLE = 0xFD2FB528, 0x184D2A50

    def __init__(self, raw):
        self._raw = raw
        self._state, self._need, self._buf, self._skip, self._checksum, self._lost = "magic", 4, b"", 0, 0, False
        self._single, self.window = False, 0  # the largest window a frame header read so far asks (bytes)
        self.stream_head = b""  # the first bytes of what follows the frames when it is not a frame

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data and not self._lost:
            self._feed(data)
        return data

    def complete(self) -> bool:
        """True when the data read ends between frames (or its structure was not followed: then the
        decompressor itself reports the damage)."""
        return self._lost or (self._state == "magic" and not self._buf and not self._skip)

    def _feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n and not self._lost:
            if self._skip:
                k = min(self._skip, n - i)
                self._skip -= k
                i += k
                continue
            take = min(self._need - len(self._buf), n - i)
            self._buf += data[i:i + take]
            i += take
            if len(self._buf) == self._need:
                head, self._buf = self._buf, b""
                self._step(head)

    def _step(self, head: bytes) -> None:
        state, value = self._state, int.from_bytes(head, "little")
        if state == "magic":
            if value == self._MAGIC:
                self._state, self._need = "descriptor", 1
            elif value & 0xFFFFFFF0 == self._SKIPPABLE:
                self._state, self._need = "skippable", 4
            else:
                self._lost, self.stream_head = True, head  # not a frame: the decompressor says what is wrong
        elif state == "descriptor":
            single = (value >> 5) & 1
            self._single = bool(single)
            self._checksum = 4 if value & 4 else 0
            rest = (0 if single else 1) + (0, 1, 2, 4)[value & 3] + ((1 if single else 0), 2, 4, 8)[value >> 6]
            self._state, self._need = ("header", rest) if rest else ("block", 3)
        elif state == "header":
            if not self._single:  # RFC 8878 §3.1.1.1.2: the window descriptor, the header's first byte
                log, mantissa = 10 + (head[0] >> 3), head[0] & 7
                self.window = max(self.window, (1 << log) + (1 << log) // 8 * mantissa)
            self._state, self._need = "block", 3
        elif state == "block":
            kind, size = (value >> 1) & 3, value >> 3
            if kind == 3:
                self._lost = True  # a reserved block type: corrupt, the decompressor says so
                return
            self._skip = 1 if kind == 1 else size
            if not value & 1:
                self._state, self._need = "block", 3
            elif self._checksum:
                self._state, self._need = "checksum", 4
            else:
                self._state, self._need = "magic", 4
        elif state == "checksum":
            self._state, self._need = "magic", 4
        else:  # skippable: its size, then that many bytes
            self._skip, self._state, self._need = value, "magic", 4

    def close(self) -> None:
        pass


class _Decompressing(io.RawIOBase):
    """The raw reader under :func:`open_input`'s buffer: ``readinto(b)`` asks the decompressing
    file object ``inner`` for at most ``len(b)`` bytes (``read1``: one step of decompression, so that
    what comes before a damaged part is given before the error) and turns every decompressor's error
    (``errors``) into the :class:`CompressedDataError` that says what happened (:func:`compressed_error`); at the end of the data it calls ``at_end`` (if
    given), which raises ``EOFError`` for a file cut short; closing it closes ``inner`` and ``raw``."""

    def __init__(self, inner, raw, path: str, kind: str, errors: tuple, at_end=None):
        super().__init__()
        self._inner, self._raw, self._path, self._kind, self._errors = inner, raw, path, kind, errors
        self._read = getattr(inner, "read1", inner.read)
        self._pos, self._at_end = 0, at_end

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        """Decompressed bytes given so far (the buffer above subtracts what it holds)."""
        return self._pos

    def readinto(self, b) -> int:
        try:  # read1: what one step of decompression gives, so the data before a damaged part is kept
            data = self._read(len(b))
            if not data and len(b) and not self._pos and self._raw_empty():
                raise _NoData("the file is empty")  # every decompressor reads 0 bytes as no data, silently
            if not data and len(b) and self._at_end is not None:
                self._at_end()  # a decompressor that does not tell a file cut short: the check that does
        except self._errors as exc:
            raise compressed_error(self._path, self._kind, exc, self._pos, getattr(self._inner, "stream_head", b"")) from None
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def _raw_empty(self) -> bool:
        """Whether the compressed file gave no byte at all (its position is still 0 at the end of its
        data); False when its filesystem cannot tell."""
        try:
            return self._raw.tell() == 0
        except (OSError, AttributeError, ValueError):
            return False

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                self._raw.close()
                super().close()


def open_input(path: str, compression: str = "auto", xz_memlimit: Optional[int] = None, pipe: bool = False):
    """A user's input file (any Beam filesystem) as a binary file object whose ``read(n)`` and
    ``readline(n)`` return at most ``n`` bytes, holding about ``n`` + :data:`READ_CHUNK` bytes of
    decompressed data at most: a highly compressed file (a 2 MB ``.gz`` of one 2 GB record) is
    never expanded whole. Use it as a context manager; ``read()`` without a size reads to the end.

    ``compression``: a Beam ``CompressionTypes`` value; ``"auto"`` (default): by the name's
    extension as Beam tells it (``.gz``, ``.bz2``, ``.xz``/``.lzma``, ``.zst``/``.zstd``,
    ``.deflate``; any other name is uncompressed). The compressed bytes are read through
    ``FileSystems.open(path, compression_type=UNCOMPRESSED)`` and decompressed incrementally by
    the standard library (``gzip.GzipFile``; bzip2 by ``bz2.BZ2Decompressor`` with ``max_length``,
    :class:`_Bunzip2`; xz/lzma by ``lzma.LZMADecompressor``
    with ``max_length`` and a ``memlimit`` of ``xz_memlimit`` bytes, default :data:`XZ_MEMLIMIT`:
    checksums and the end of the stream checked, concatenated streams read on), by ``zstandard``'s
    ``stream_reader`` (frames read on; a frame that needs a window over :data:`ZSTD_MAX_WINDOW`,
    128 MiB, is unreadable data, naming its window and the limit, :class:`_Unzstd`; a file cut inside a frame is told by following the frame
    structure, :class:`_ZstdFrames` — that reader does not tell, nor does Beam's; a file cut exactly
    between two frames cannot be told from a shorter file), or by ``zlib`` with ``max_length``
    (DEFLATE). A file cut short is a :class:`CompressedDataError` in every compression, after the data
    before the cut; so is data after the last stream that is not another stream (plain lines
    appended to a compressed file), after the data of the streams — only zero bytes, the padding
    gzip and xz allow, are skipped. Beam's own decompressing reader expands every 16 MiB of compressed data whole
    into memory (``CompressedFile._fetch_to_internal_buffer``), without a bound.

    Raises:
        OSError: the file cannot be opened (the filesystem's error; "<path> is a FIFO (named
            pipe), not a regular file" for a local FIFO, socket or device, whose open or read waits
            for a writer forever; ``pipe``: a FIFO is opened); while reading,
            :class:`CompressedDataError` (an ``OSError``) for corrupt or truncated compressed data.
        ValueError: an unknown ``compression``.
    """
    import gzip
    import lzma
    import zlib

    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    try:  # before Beam opens it: a FIFO's open blocks until a writer comes (issue 28, trial 28f B11)
        check_regular_file(path, "")
    except NotARegularFile:
        import stat as _stat

        mode = os.stat(path).st_mode
        if not (_stat.S_ISDIR(mode) or (pipe and _stat.S_ISFIFO(mode) and is_process_pipe(path))):
            raise OSError(f"{path} is {file_kind(mode)}, not a regular file; not read") from None  # a folder: the filesystem's own error
    kind = CompressionTypes.detect_compression_type(path) if compression == CompressionTypes.AUTO else compression
    if not CompressionTypes.is_valid_compression_type(kind):
        raise ValueError(f"unknown compression type {quoted(compression)}")
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    if kind == CompressionTypes.UNCOMPRESSED:
        return raw
    errors: tuple = (zlib.error, EOFError, lzma.LZMAError, gzip.BadGzipFile, _NotAStream)
    at_end = None
    try:
        if kind == CompressionTypes.GZIP:
            inner = gzip.GzipFile(fileobj=raw, mode="rb")
        elif kind == CompressionTypes.BZIP2:
            inner = _Bunzip2(raw)
            errors += (OSError,)  # bz2's "Invalid data stream" is a plain OSError
        elif kind == CompressionTypes.LZMA:
            inner = _Unxz(raw, XZ_MEMLIMIT if xz_memlimit is None else int(xz_memlimit))
        elif kind == CompressionTypes.DEFLATE:
            inner = _Inflate(raw)
        else:
            import zstandard

            inner = _Unzstd(raw, ZSTD_MAX_WINDOW)
            errors += (zstandard.ZstdError,)

            def at_end():
                if not inner.complete():
                    raise EOFError("the data ends inside a zstd frame (the file is cut short)")
    except BaseException:
        raw.close()
        raise
    return _KeepingReader(_Decompressing(inner, raw, path, kind, errors, at_end), READ_CHUNK)


class _KeepingReader(io.BufferedReader):
    """:func:`open_input`'s buffer over a decompressing reader: ``read(n)`` gives every byte
    decompressed before an error of the data, and raises the error on the next read. The standard
    buffer joins several reads of the raw reader into one ``read(n)`` and drops them all when the
    last one raises: a ``.json.gz`` cut short lost the elements of its last 1 MiB read (trial 33
    T13: 111 of 560 complete elements kept). ``readline`` keeps the standard behaviour: a line the
    error cuts is not a line."""

    _error: Optional[BaseException] = None

    def read(self, n: Optional[int] = -1) -> bytes:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        parts, want = [], -1 if n is None or n < 0 else n
        while want < 0 or want > 0:
            try:
                piece = self.read1(READ_CHUNK if want < 0 else want)
            except CompressedDataError as exc:
                if not parts:
                    raise
                self._error = exc
                break
            if not piece:
                break
            parts.append(piece)
            want -= len(piece) if want > 0 else 0
        return b"".join(parts)

    def readline(self, size: Optional[int] = -1) -> bytes:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return super().readline(-1 if size is None else size)


def compressed_check(path: str) -> Optional[CompressedDataError]:
    """The :class:`CompressedDataError` reading the compressed file ``path`` (by its name, as
    :func:`open_input` tells it) to its end raises, or ``None`` when its data passes every check of its
    compression (or it is not compressed): a pass that decompresses and drops the data, through the
    same decompressors, in pieces of :data:`READ_CHUNK` (memory: one piece and the decoder's state).
    A reader calls it before it gives any record of a compressed file: a damaged one
    (:class:`CompressedDataDamaged`) is known before its records are parsed, on every runner — a gzip
    member's CRC is checked only after all its data was given (trial 33 T6). Costs a second
    decompression of each compressed input (docs/performance.md).

    Raises:
        OSError: the file cannot be opened (not a :class:`CompressedDataError`: the reader's reading says it)."""
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystem import CompressionTypes

    if CompressionTypes.detect_compression_type(path) == CompressionTypes.UNCOMPRESSED:
        return None
    buf = bytearray(READ_CHUNK)
    with open_input(path) as f:
        try:
            while f.raw.readinto(buf):
                pass
        except CompressedDataError as exc:
            return exc
    return None


def refuse_damaged(path: str) -> None:
    """Raises the :class:`CompressedDataError` of :func:`compressed_check` when none of the records of
    the file ``path`` is to be read (``reads_nothing``: damaged, not data of its compression, over a
    decoder's limit); a file cut short, or with data after its last stream, passes (its reading
    tells it, after the records before it)."""
    error = compressed_check(path)
    if error is not None and error.reads_nothing:
        raise error


# ------------------------------------------------------------------ a user's file read whole
#: largest user file read whole, in bytes (256 MiB): an emotion lexicon CSV, a ``--config`` file, a
#: request template, a system or seed prompt, a regulatory or generator corpus document, a
#: ``--privacy-domain`` file. The NRC lexicon of every language is about 25 MB; records are bounded
#: by ``--max-record-bytes`` instead (they are read one by one)
MAX_SIDE_FILE_BYTES = 256 * 2**20


class SideFileTooLarge(ValueError):
    """A user's file read whole is over its limit (one line: the option, the file, its limit)."""


def read_side_file(path, what: str, limit: Optional[int] = None, pipe: bool = False) -> bytes:
    """The bytes of a user's file that is read whole (any Beam filesystem; a compression ending is
    decompressed, :func:`open_input`), never more than ``limit`` + 1 bytes of it (default
    :data:`MAX_SIDE_FILE_BYTES`, read at call time). ``what``: the option or role that names the
    file in the message (``"--emotion-lexicon-csv"``).

    A local FIFO, socket or device is refused before it is opened (:func:`check_regular_file`):
    opening a FIFO waited for a writer forever (issue 28, trial 28f B11: ``--emotion-lexicon-csv
    FIFO`` hung the audit); ``pipe``: a pipe the shell hands the process is read (``--config <(...)``,
    process substitution: :func:`is_process_pipe`), a named FIFO is still refused (fix28z: ``--config
    FIFO`` that nobody writes to waited for ever). A directory gets the filesystem's own error when opened.

    Raises:
        NotARegularFile (a ``ValueError``): one line naming ``what``, the path and what it is.
        SideFileTooLarge (a ``ValueError``): the file holds more than ``limit`` bytes (decompressed).
        OSError: the file cannot be opened or its compressed data is damaged (:class:`CompressedDataError`).
    """
    _check_side_path(path, what, pipe)
    limit = MAX_SIDE_FILE_BYTES if limit is None else int(limit)
    with open_input(str(path), pipe=pipe) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SideFileTooLarge(f"{what}: {path} is larger than {limit:,} bytes, the most a file read whole may hold "
                               "(fair_forge_beam.io.edge.MAX_SIDE_FILE_BYTES); not read")
    return data


def _check_side_path(path, what: str, pipe: bool = False) -> None:
    import stat

    try:
        check_regular_file(path, what)
    except NotARegularFile:
        mode = os.stat(str(path)).st_mode
        if not (stat.S_ISDIR(mode) or (pipe and stat.S_ISFIFO(mode) and is_process_pipe(path))):
            raise


class SideFileNotText(UnicodeDecodeError):
    """A side file (a corpus file, a prompt file, a lexicon …) that is not UTF-8 text, its message
    naming what it is and the file: ``"generator source file: cannot read corpus/b.md: not UTF-8
    text (invalid start byte at byte 0)"`` — the form of
    :func:`~fair_forge_beam.plain.side_file_error`, which gives it as it is, as
    :func:`~fair_forge_beam.plain.plain_reason` does (issue 28, trial 28h H12: the error named no
    file). A ``UnicodeDecodeError``, so every caller catching that still does."""

    def __init__(self, what: str, path, exc: UnicodeDecodeError):
        super().__init__(exc.encoding, exc.object, exc.start, exc.end, exc.reason)
        self.what, self.path = what, str(path)

    def __str__(self) -> str:
        return f"{self.what}: cannot read {self.path}: not UTF-8 text ({self.reason} at byte {self.start:,})"


def read_side_text(path, what: str, limit: Optional[int] = None) -> str:
    """:func:`read_side_file` decoded as UTF-8 (a UTF-8 BOM dropped). Raises as
    :func:`read_side_file`, and :class:`SideFileNotText` (a ``UnicodeDecodeError`` naming ``what``
    and ``path``) for text that is not UTF-8."""
    data = read_side_file(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SideFileNotText(what, path, exc) from None


def nesting_depth(value: Any) -> int:
    """Levels of lists/tuples and dicts in ``value`` (a scalar 0, ``[]`` 1, ``[[1]]`` 2), walked
    without recursion: for values parsed from a user's side file."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, (list, tuple)):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list, tuple)))
    return deepest


class SideFileTooDeep(ValueError):
    """A user's side file (JSON or TOML) nested more than :data:`MAX_NESTING` levels: one line."""


def check_side_nesting(value: Any, where: str, max_depth: int = MAX_NESTING) -> Any:
    """``value`` (parsed from a side file named ``where``) when nested at most ``max_depth`` levels.

    Raises:
        SideFileTooDeep (a ``ValueError``): deeper — code that walks it would recurse past Python's limit."""
    if nesting_depth(value) > max_depth:
        raise SideFileTooDeep(f"{where} is nested more than {max_depth} levels deep; side files, as input records, "
                              f"are limited to {max_depth} levels")
    return value


def side_json_loads(text: str, where: str, max_depth: int = MAX_NESTING, finite: bool = False) -> Any:
    """``json.loads`` of a user's side file's text (a privacy domain, a run's JSON file), its nesting
    bounded as input records are (:data:`MAX_NESTING`); ``RecursionError`` never escapes. ``finite``:
    ``NaN``, ``Infinity`` and ``-Infinity`` and a number that overflows a float raise
    :class:`NonFiniteNumber` (a ``ValueError``).

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), or :class:`SideFileTooDeep`."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float) if finite else json.loads(text)
    except RecursionError:
        raise SideFileTooDeep(f"{where} is nested deeper than the JSON parser can follow; side files, as input "
                              f"records, are limited to {max_depth} levels") from None
    if text.count("[") + text.count("{") > max_depth - 1:  # the common case: no walk
        check_side_nesting(value, where, max_depth)
    return value


class NotARegularFile(ValueError):
    """A run folder's file that is a local directory, FIFO, socket or device: one line naming it."""


def check_regular_file(path, what: str) -> None:
    """Nothing when ``path`` is not a local path (``gs://…``), does not exist (its reader says so)
    or is a regular file (a symbolic link to one too).

    Raises:
        NotARegularFile (a ``ValueError``): a local directory, FIFO, socket or device — opening a
            directory raises ``IsADirectoryError`` and reading a FIFO waits for a writer forever."""
    import stat

    path = str(path)
    if "://" in path:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{what}: {path} is {file_kind(mode)}, not a regular file; not read")


def is_process_pipe(path) -> bool:
    """Whether the local ``path`` (a FIFO by ``os.stat``) is a pipe the shell handed this process —
    process substitution, ``--config <(cat a.toml)``: ``/dev/fd/N`` or ``/proc/<pid>/fd/N``, whose
    writer the shell started — and not a named FIFO on a filesystem, which nobody may ever open for
    writing: opening it for reading waits for a writer for ever (fix28z). Told by where the path
    leads: a named FIFO is a file of a folder; ``/dev/fd/N`` leads to ``/proc/<pid>/fd/pipe:[…]``,
    nothing on a filesystem. (A shell without ``/dev/fd`` makes a named FIFO for ``<(...)``: refused.)"""
    real = os.path.realpath(str(path))
    return real.startswith(("/dev/fd/", "/proc/")) or not os.path.lexists(real)


def file_kind(mode: int) -> str:
    """What a local path of ``os.stat`` mode ``mode`` is, for a message: "a file", "a directory",
    "a FIFO (named pipe)", "a socket", "a device"."""
    import stat

    for test, name in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def broken_link(path: str) -> Optional[str]:
    """Why the local ``path`` cannot be opened when a symbolic link is the cause: ``"<path> is a
    symbolic link loop …"`` (``ELOOP``, in the path itself or a folder of it) or ``"<path> is a
    symbolic link to a missing target (…)"``; ``None`` otherwise (a remote path, a path that opens,
    a plain missing path). A matcher (glob, Beam's) lists neither: without this, the message was
    "no file matches"."""
    import errno

    if "://" in str(path):
        return None
    try:
        os.stat(path)
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path} is a symbolic link loop (its links lead back to themselves, so it names no file)"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"{path} is a symbolic link to a missing target ({quoted(target)})"
    except ValueError:  # a NUL in the path
        return None
    return None


class NonFiniteNumber(ValueError):
    """A run's JSON file that holds ``NaN``, ``Infinity`` or a number too large for a float: one line."""


def _refuse_constant(token: str):
    raise NonFiniteNumber(token)


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise NonFiniteNumber(token if len(token) <= 40 else f"{token[:40]}... ({len(token):,} characters)")
    return value


def read_side_json(path, what: str, limit: Optional[int] = None):
    """:func:`read_side_file` parsed as JSON (UTF-8): a run's ``results.json``, ``run_info.json`` or
    manifest that a user points at; nested at most :data:`MAX_NESTING` levels (:func:`side_json_loads`).
    Strict JSON only: ``NaN``, ``Infinity`` and a number that overflows a float (``1e999``) are
    refused (every JSON file the package writes is strict, ``allow_nan=False``; an estimate that is
    not a number is written ``null``). A local path that is not a regular file (a directory, a FIFO)
    is refused before it is opened (:func:`check_regular_file`).

    Raises:
        ValueError: one line naming ``path`` — not a regular file, larger than the limit
            (``SideFileTooLarge``), not UTF-8, not JSON (a damaged or truncated file), a non-finite
            number, or nested too deep.
        OSError: as :func:`read_side_file`."""
    check_regular_file(path, what)
    data = read_side_file(path, what, limit)
    try:
        return side_json_loads(data.decode("utf-8"), str(path), finite=True)
    except NonFiniteNumber as exc:
        raise ValueError(f"{path} holds the number {exc}, which JSON does not allow (only finite numbers; "
                         "a damaged or edited file)") from None
    except SideFileTooDeep as exc:
        raise ValueError(f"{exc}: a damaged file") from None
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError

        raise ValueError(f"{path} is not a readable JSON file ({plain_reason(exc)}): a damaged or truncated file") from None
