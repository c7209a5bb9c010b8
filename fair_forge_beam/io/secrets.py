"""Scrubbing secrets out of text we are about to keep (docs/reliability.md).

One function, :func:`scrub`, applied where endpoint text enters our records (the judge handler
scrubs every answer, reasoning, raw body, log-probability token and error with the key it sent,
and again every value its parsers decode: verdicts and cache entries) and again by the writers of
output files and of stdout (:func:`scrub_known`, which looks up the keys named by
:func:`register_secret_env`: the run's own). What is shown to a person (report pages, the console) also has
secret-shaped strings masked (:func:`scrub_shown`, :func:`mask_shapes`; trial33 O1). A secret is
replaced by ``***`` in every spelling JSON text can give it: plain, ``\\/`` and ``\\uXXXX`` escapes of
any or all of its characters, at any nesting depth.

Only values of free text are masked, never names (issue 28): dict keys (but those of the reason
counts, :data:`VALUE_KEYED_FIELDS`, which quote values), the values under the one
declared list :data:`NAME_FIELDS` (slice, metric and column names, gate texts, options that name
metrics or fields; in a command line, :data:`ARGV_FIELDS`) and, in a text drawn from records (the
console table, a page), every name of those records and every gate text (:func:`scrub_known_text`).

Record ids come from outside: they are masked once, where records are read (:func:`id_masker`,
applied by :class:`fair_forge_beam.io.read._ParseRecord` for every input format and command), so that
the names built from them (element ids, slice names, dict keys) never hold a key and every output
names an id the same way; the writers mask them again as values.
Our own words are never masked, values from outside are: a key that is our own words
(:func:`is_own_text`) leaves every value that is itself our own words as it is (docs/reliability.md;
the settings a user gave, :data:`USER_FIELDS`, are masked all the same).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from typing import Any, Callable, Iterable, Optional

from fair_forge_beam.blank import is_invisible_char
from fair_forge_beam.urls import SECRET_SHAPES, install_log_masking, mask_line, mask_shapes, mask_url_secrets  # noqa: F401 - mask_line, install_log_masking, SECRET_SHAPES: here too

__all__ = ["scrub", "scrub_known", "scrub_known_text", "scrub_tokens", "masked_tokens", "name_texts", "gate_texts", "known_secrets",
           "register_secret_env", "secret_envs", "keys_set_here", "require_keys", "MissingKeyError", "is_own_text", "MASK", "MIN_SECRET_LEN", "LOOSE_SECRET_LEN", "NAMES_ENV",
           "NAME_FIELDS", "USER_FIELDS", "ARGV_FIELDS", "slice_parts", "id_masker", "mask_id", "ID_TAG_SEP",
           "mask_line", "install_log_masking", "known_needles", "masks_nothing", "VALUE_KEYED_FIELDS", "SECRET_SHAPES", "mask_shapes", "scrub_shown"]

MASK = "***"
#: shorter values are never treated as secrets (a 1-3 character placeholder would mask text)
MIN_SECRET_LEN = 8
#: secrets at least this long are masked in loose spellings too: in any case (``SK-PROJ-…``) and
#: with whitespace between their characters (``s k - p r o j …``, plain or JSON-escaped ``\n``), as a
#: judge that spells a key out echoes it. Real API keys are 37-164 characters. A shorter secret may
#: be an ordinary word (``password``): loosely, it would mask ``Pass word`` in an answer, so it is
#: masked as written only
LOOSE_SECRET_LEN = 16

_ENVS: set[str] = set()
_ENVS_SNAPSHOT: frozenset = frozenset()
_LOCK = threading.Lock()
#: environment variable listing the registered key-variable *names* (comma-separated), so that
#: worker processes started from this one know them too; it never holds a key
NAMES_ENV = "FAIR_FORGE_SECRET_ENVS"


#: THE declared list of name fields (issue 28: masking covers the secrets in values of free text,
#: never names), used by every writer through :func:`scrub_known` (JSON lines, Parquet tables,
#: results.json, run_info.json, trend.json) and by :func:`name_texts` (the names a console table
#: or a page keeps). A value under one of these dict keys / Parquet columns / struct fields is a
#: name of the run or a field our own code fills, never text from outside, and is never masked:
#:
#: * fields our own code fills: ``turn_index``, and ``language`` (normalised, and masked as a record id
#:   where records are read: :func:`id_masker`);
#: * slice and metric names: ``slice``, ``slices``, ``metric``, ``metrics``, ``level``, ``mode``,
#:   ``statistical_mode``, ``headline_columns``, ``groups``, ``estimate``, ``dimension(s)``,
#:   ``field``, ``column``;
#: * gate texts: ``gate``, ``gates``, ``label``, ``expression``;
#: * options whose values name metrics, fields or choices (their ``dest`` in run_info.json's
#:   ``options`` and, as ``--flag``, in its ``argv``: :data:`ARGV_FIELDS`): every option with
#:   declared choices (a test checks :data:`fair_forge_beam.options.TABLE` against this list) and
#:   the field-naming options ``agentic_label_field``, ``agentic_task_field``, ``timestamp_field``,
#:   ``bestof_criteria``, ``bestof_order``, ``assistant_id``.
#:
#: Record ids (``session_id``, ``assistant_id``, ``qa_id``, ``element_id``, ``request_key``, metadata
#: values) are not names: they come from outside and are masked where records are read
#: (:func:`id_masker`), then again by every writer as values.
#: Before: ``K=humanity`` wrote ``--metrics context,***`` and the gate text ``*** mean_entropy …``.
NAME_FIELDS = frozenset({
    # record fields our own code fills with our own words (never text from outside)
    "turn_index", "language",
    # slice, metric and column names
    "slice", "slices", "metric", "metrics", "level", "mode", "statistical_mode", "headline_columns", "groups",
    "estimate", "dimension", "dimensions", "field", "column",
    # gate texts
    "gate", "gates", "label", "expression",
    # options whose values name metrics, fields or one of their declared choices
    "agentic_label_field", "agentic_task_field", "timestamp_field", "bestof_criteria", "bestof_order",
    "input_format", "slice_bootstrap", "group_extractor", "toxicity_scorer", "toxicity_level", "toxicity_group_set",
    "guardian_kind", "regulatory_embedder", "bestof_mode", "bestof_block", "similarity_embedder", "privacy_detector",
    "privacy_text", "timestamp_policy", "kafka_event_time", "strategy", "assistant_kind", "method", "agentic_correctness",
})

#: dict keys whose value is a command line (a list of arguments, run_info.json's ``argv`` and
#: ``beam_args``): an option's name (``--metrics``) is kept, and so is its value when the option's
#: dest is in :data:`NAME_FIELDS` (``--metrics context,humanity``, ``--gate '…'``); any other value
#: is scrubbed as text
ARGV_FIELDS = frozenset({"argv", "beam_args"})

#: dict keys whose values are settings a user gave (run_info.json's ``argv``, ``beam_args`` and
#: ``options``, results.json's ``config``): values from outside, masked even when they equal our own
#: words (``--judge-model humanity`` with a key ``humanity``; :func:`scrub`'s ``own``)
USER_FIELDS = frozenset({"argv", "beam_args", "options", "config"})

#: dict keys whose value is a dict keyed by text from outside (trial33 O1): the counts of dead letters
#: per reason (``{"conversation[0]: weight: weight must be a number, got str '<the value>'": 1}``,
#: results.json's ``rejected_at_read_reasons``, ``assistant_failed_reasons`` and ``dead_letter_reasons``). A reason quotes the
#: record's value, so its keys are values: masked as values are (two keys that mask to the same
#: text are merged, their counts added), and never kept as names (:func:`name_texts`). Before, a key
#: quoted by a reason was in results.json and on the console even when the run registered it
VALUE_KEYED_FIELDS = frozenset({"rejected_at_read_reasons", "assistant_failed_reasons", "dead_letter_reasons", "not_scored_reasons"})


#: JSON's two-character escapes, by the character they stand for
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def _char_pattern(ch: str) -> str:
    """Every spelling of ``ch`` in JSON text, nested JSON text included: itself, ``\\uXXXX``
    (any case of hex digits; a UTF-16 surrogate pair beyond the BMP) and its two-character escape,
    each escape behind one or more backslashes (a JSON text inside a JSON string doubles them)."""
    code = ord(ch)
    if code > 0xFFFF:
        hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        uni = r"\\+u%s\\+u%s" % (_hex(hi), _hex(lo))
    else:
        uni = r"\\+u" + _hex(code)
    alts = [re.escape(ch), uni]
    if ch in _SHORT_ESCAPES:
        alts.append(r"\\+" + re.escape(_SHORT_ESCAPES[ch]))
    return "(?:" + "|".join(alts) + ")"


def _hex(code: int) -> str:
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")


def _is_invisible(ch: str) -> bool:
    """Whether ``ch`` shows as nothing between two visible characters: Unicode's default-ignorable
    characters and every format character (:func:`fair_forge_beam.blank.is_invisible_char`, Unicode's
    property, not a list kept here): zero-width space / joiners, word joiner, U+FEFF, soft hyphen,
    invisible operators U+2061-2065, bidirectional marks and controls, U+180E, tags, variation
    selectors, the combining grapheme joiner, the Hangul fillers, the Khmer inherent vowels, the
    reserved U+FFF0-FFF8 and every code point of plane 14's U+E0000-E0FFF, assigned or not."""
    return is_invisible_char(ch)


#: the planes that hold default-ignorable characters (0, 1 and 14; a test checks every plane)
_INVISIBLE_PLANES = (range(0, 0x20000), range(0xE0000, 0xE1000))


@functools.lru_cache(maxsize=None)
def _invisibles(planes: tuple = _INVISIBLE_PLANES) -> str:
    """Every invisible character (:func:`_is_invisible`) of ``planes`` that is not whitespace (whitespace
    is a gap of its own): a text shows a loosely spelt secret joined by any of them as the secret
    (hostile-tester trials 3 and 28: U+2062, U+2063, U+180E, U+034F, U+200E, U+202C, U+FE0F, U+E0020
    between a key's characters were written to results.parquet). Computed once, on first use."""
    return "".join(c for r in planes for c in map(chr, r)
                   if not 0xD800 <= ord(c) <= 0xDFFF and _is_invisible(c) and not c.isspace())


def _class(chars: str) -> str:
    """A regular-expression character class of ``chars``, consecutive code points as ranges."""
    codes, parts = sorted(map(ord, chars)), []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append(f"\\U{codes[i]:08x}" + (f"-\\U{codes[j]:08x}" if j > i else ""))
        i = j + 1
    return "[" + "".join(parts) + "]"


def _escaped(chars: str) -> str:
    """Every ``\\uXXXX`` spelling (behind one or more backslashes; a UTF-16 surrogate pair beyond
    the BMP) of ``chars``, lower-case hex: used inside ``(?i:…)``."""
    bmp = sorted(f"{ord(c):04x}" for c in chars if ord(c) <= 0xFFFF)
    pairs: dict = {}
    for c in chars:
        code = ord(c) - 0x10000
        if code >= 0:
            pairs.setdefault(f"{0xD800 + (code >> 10):04x}", []).append(f"{0xDC00 + (code & 0x3FF):04x}")
    alts = ["|".join(bmp)] + [f"{hi}\\\\+u" + ("d[c-f][0-9a-f]{2}" if len(lo) == 0x400 else f"(?:{'|'.join(sorted(lo))})")
                              for hi, lo in sorted(pairs.items())]
    return r"\\+u(?:" + "|".join(alts) + ")"


@functools.lru_cache(maxsize=None)
def _spaces(planes: tuple = _INVISIBLE_PLANES) -> str:
    """Every whitespace character (``str.isspace``, what ``\\s`` and ``str.split`` take: the Zs, Zl and
    Zp categories, U+0085, U+001C-001F …) of ``planes`` (a test checks that no other plane holds one).
    Computed once, on first use."""
    return "".join(c for r in planes for c in map(chr, r) if c.isspace())


@functools.lru_cache(maxsize=None)
def _gap() -> str:
    """What may stand between two characters of a loosely spelt secret: every separator — whitespace
    (:func:`_spaces`) and the invisible characters of :func:`_invisibles` — plain, JSON-escaped as
    ``\\uXXXX`` (hex digits in any case: used inside ``(?i:…)``) or by a two-character escape
    (``\\n``, ``\\r``, ``\\t``, ``\\f``). Hostile-tester trial 28b: ``\\u00a0``, ``\\u2003``,
    ``\\u3000`` and ``\\u0085`` between a key's characters were not gaps (only raw whitespace was),
    and the key reached the judge cache's ``answer`` and ``raw``."""
    return r"(?:\s|\\+[nrtf]|" + _class(_invisibles()) + "|" + _escaped(_spaces() + _invisibles()) + ")*"


@functools.lru_cache(maxsize=None)
def _zero_width() -> tuple:
    """``(hint, invisibles)``: the invisible characters (:func:`_invisibles`) of a text, removed from
    its compact form, and a cheaper pattern looked for first — the Basic Multilingual Plane's
    invisibles (a bitmap test per character) or any character beyond U+FFFF (one range test): the
    full class tests each of its ranges beyond the BMP on every character (about 3 times slower on
    prose; most texts hold neither)."""
    inv = _invisibles()
    bmp = _class([c for c in inv if ord(c) <= 0xFFFF])
    return re.compile(bmp[:-1] + "\\U00010000-\\U0010ffff]"), re.compile(_class(inv))


def _compact(v: str) -> str:
    """``v`` in lower case without whitespace and invisible joiners (what holds a loosely spelt
    secret's compact form); the joiners are looked for first (a search is much cheaper than a
    replacement, and most texts hold none)."""
    if not v.isascii():  # isascii: a flag of the string, no scan
        hint, zero_width = _zero_width()
        if hint.search(v) and zero_width.search(v):
            v = zero_width.sub("", v)
    return "".join(v.split()).lower()


@functools.lru_cache(maxsize=64)
def _pattern(secrets: tuple) -> "re.Pattern":
    """One regular expression matching every secret of ``secrets`` in every JSON spelling (plain,
    ``\\/``, ``\\uXXXX`` escapes of any or all of its characters, at any nesting depth), longest
    secret first; a secret of :data:`LOOSE_SECRET_LEN` characters or more also in any case and with
    whitespace between its characters."""
    gap = _gap()
    alts = ["(?i:" + gap.join(_char_pattern(ch) for ch in s) + ")" if len(s) >= LOOSE_SECRET_LEN
            else "".join(_char_pattern(ch) for ch in s) for s in sorted(secrets, key=len, reverse=True)]
    return re.compile("|".join(alts))


@functools.lru_cache(maxsize=64)
def _loose(secrets: tuple) -> tuple:
    """``(compact, caseless)`` per secret of :data:`LOOSE_SECRET_LEN` characters or more: the secret
    in lower case without whitespace (what a text's compacted lower-case form holds when it holds
    the secret loosely spelt), and its characters that have no case (digits, ``-``, ``_`` …; the
    punctuation first), which a loose spelling keeps as they are — a text without one of them holds
    no loose spelling, a check much cheaper than compacting every text."""
    out = []
    for s in secrets:
        if len(s) >= LOOSE_SECRET_LEN:
            caseless = {c for c in s if c.lower() == c.upper() and not c.isspace()}
            out.append(("".join(s.split()).lower(), tuple(sorted(caseless, key=lambda c: (c.isdigit(), c)))))
    return tuple(out)


def _secrets(secrets: Iterable[str]) -> tuple:
    return tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}))


def _mask_text(v: str, secs: tuple, pattern, keep: tuple) -> str:
    if not keep:
        return pattern.sub(MASK, v)
    spans = [(m.start(), m.end()) for k in keep for m in re.finditer(re.escape(k), v)]
    if not spans:
        return pattern.sub(MASK, v)
    return pattern.sub(lambda m: m.group(0) if any(a <= m.start() and m.end() <= b for a, b in spans) else MASK, v)


def _text_scrubber(secs: tuple, keep: tuple = ()):
    """``text -> text`` masking the secrets ``secs`` (from :func:`_secrets`, not empty) in one text,
    ``keep`` texts kept (see :func:`scrub`); a text that cannot hold a secret is returned as it is,
    the same object, after a few substring tests (the fast path: no regular expression)."""
    pattern, loose, shortest = _pattern(secs), _loose(secs), min(len(s) for s in secs)

    def _text(v: str) -> str:
        if len(v) < shortest:  # every spelling of a secret is at least as long as the secret
            return v
        if "\\" not in v:  # the common case: no escape, and no secret at all
            for s in secs:
                if s in v:
                    break
            else:
                for s, caseless in loose:  # a loose spelling: another case, spaces between characters
                    if (not caseless or caseless[0] in v) and all(c in v for c in caseless[1:]) \
                            and s in _compact(v):
                        break
                else:
                    return v
        return _mask_text(v, secs, pattern, keep)
    return _text


def scrub(value: Any, secrets: Iterable[str], names: Iterable[str] = (), keep: Iterable[str] = (),
          own: bool = False, shapes: bool = False) -> Any:
    """``value`` with every secret of ``secrets`` replaced by :data:`MASK`, in every JSON spelling
    of it (plain, ``\\/``, ``\\uXXXX`` escapes of some or all of its characters: a reply that
    escapes each character of the key is masked as text, and its decoded value is too).

    ``value``: text, or a JSON-like structure (dicts, lists, tuples, NamedTuples): values are
    scrubbed, never dict keys (a key is a field name: masking one would rename the field, issue
    28), nor the text of the values under a key in ``names`` (e.g. :data:`NAME_FIELDS`: slice and
    metric names; a dict there is scrubbed as usual); other types are returned as they are.
    ``keep``: texts never masked where they occur inside a text (names in a page or a console
    table). Secrets shorter than :data:`MIN_SECRET_LEN` characters are ignored; secrets of
    :data:`LOOSE_SECRET_LEN` characters or more are masked in any case and with whitespace between
    their characters too, and with invisible characters between them (every default-ignorable
    character: format characters such as zero-width joiners, bidirectional marks and tags, variation
    selectors, the combining grapheme joiner …, :func:`_is_invisible`; plain or ``\\uXXXX``). Not masked: a secret with
    other characters between its characters (``s-k-…``), in look-alike characters, encoded (base64,
    hex, percent-encoding, HTML numeric entities such as ``&#115;``, reversed) or in part
    (docs/reliability.md).
    ``own``: text we write is never masked (issue 28, trial B7): when every secret is our own words
    (:func:`is_own_text`: a scorer named ``profanity-check``, a sentence such as ``fewer than 2
    sessions``), a value that is itself our own words is kept whole, except under the dict keys of
    :data:`USER_FIELDS` (the settings a user gave: their values come from outside). A secret that is
    not our own words (every real key) is masked in every value, as without ``own``.
    Every text value is also passed through :func:`~fair_forge_beam.urls.mask_url_secrets` (with
    or without ``secrets``): a URL's user name and password and its secret-looking query parameters
    (issue 28, trial 28e B2).
    ``shapes``: secret-shaped strings (:func:`mask_shapes`) are masked too (what is shown to a person:
    :func:`scrub_shown`), our own words kept as with ``own``.
    The keys of a dict under a key of :data:`VALUE_KEYED_FIELDS` are values (reasons quoting the
    data): masked as values, the counts of keys that mask alike added.
    Never raises for any input.
    """
    secs = _secrets(secrets)
    names = frozenset(names)
    if secs:
        pattern = _pattern(secs)
        keep = tuple(sorted({k for k in keep if isinstance(k, str) and k and pattern.search(k)}, key=len, reverse=True))
        _keys = _text_scrubber(secs, keep)

        def _masked(v: str) -> str:
            return mask_url_secrets(_keys(v))
    else:  # no key to mask: the credentials of URLs only
        own, _masked = own and shapes, mask_url_secrets
    if shapes:
        _unshaped = _masked

        def _masked(v: str) -> str:
            out = _unshaped(v)
            shown = mask_shapes(out)
            return out if shown is out else shown

    ours: list = []  # whether every secret is our own words: asked once, when a text would change (is_own_text
    # reads the package's source on its first call, about 1.8 s of CPU: a run whose texts hold no secret never asks)

    def _own_secrets() -> bool:
        if not ours:
            ours.append(all(is_own_text(s) for s in secs))
        return ours[0]

    def _text(v: str, user: bool = False) -> str:
        masked = _masked(v)
        if own and not user and masked is not v and masked != v and _own_secrets() and is_own_text(v):
            return v  # our own words, whole: kept (see ``own``)
        return masked

    def _keyed(d: dict, user: bool) -> dict:  # a dict keyed by values (VALUE_KEYED_FIELDS)
        out: dict = {}
        for k, x in d.items():
            k2, x2 = (_text(k, user) if own else _masked(k)) if isinstance(k, str) else k, _do(x, False, user)
            if k2 in out and isinstance(out[k2], (int, float)) and isinstance(x2, (int, float)) \
                    and not isinstance(x2, bool):
                out[k2] += x2  # two reasons that mask alike: one row, their counts added
            else:
                out[k2] = x2
        return out

    def _argv(args: list) -> list:
        out, named = [], False
        for a in args:
            if not isinstance(a, str):
                out.append(_do(a, user=True))
            elif named:  # the value of an option that names things
                out.append(a)
            elif a.startswith("--") and len(a) > 2:
                flag, eq, val = a.partition("=")
                keep = flag[2:].replace("-", "_") in names
                out.append(flag + eq + (val if keep else _text(val, True)) if eq else flag)
                named = keep and not eq
                continue
            else:
                out.append(_text(a, True))
            named = False
        return out

    def _do(v: Any, name: bool = False, user: bool = False) -> Any:
        if isinstance(v, str):
            return v if name else _text(v, user) if own else _masked(v)  # (one call less per text)
        if isinstance(v, dict):
            return {k: (_argv(x) if names and k in ARGV_FIELDS and isinstance(x, list)
                        else _keyed(x, user) if k in VALUE_KEYED_FIELDS and isinstance(x, dict)
                        else _do(x, k in names, user or k in USER_FIELDS)) for k, x in v.items()}
        if isinstance(v, list):
            return [_do(x, name, user) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(_do(x, name, user) for x in v)
        if isinstance(v, tuple):  # a NamedTuple (e.g. a dead letter): same type, scrubbed fields
            return type(v)(*(_do(x, name, user) for x in v))
        return v

    return _do(value)


#: what joins a masked record id and its tag (:func:`mask_id`): ``s-***~3f0c9a51e27b``
ID_TAG_SEP = "~"
#: hex digits of a masked record id's tag (48 bits: two distinct ids of one run share a tag with
#: odds of about n²/2⁴⁹ for n masked ids)
ID_TAG_HEX = 12
#: scrypt cost of the tag's key (:func:`_id_tag_key`): about 0.1 s and 16 MiB once per process and
#: secret, so a guess of a short key costs as much to test against a tag
_ID_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1}
_ID_SALT = b"fair_forge_beam masked record id v1"


@functools.lru_cache(maxsize=16)
def _id_tag_key(secrets: tuple) -> bytes:
    """The key of the tags of ids holding ``secrets``: scrypt of the secrets (a slow, memory-hard
    derivation: the tag is a keyed hash of an id that holds a secret, and testing a guess of the
    secret against it costs one derivation), cached per process."""
    material = "\0".join(secrets).encode("utf-8", "surrogatepass")
    return hashlib.scrypt(material, salt=_ID_SALT, dklen=32, **_ID_SCRYPT)


@functools.lru_cache(maxsize=16)
def _id_masker(secs: tuple):
    if not secs:
        return None
    text, shortest = _text_scrubber(secs), min(len(s) for s in secs)

    def mask(v: Any) -> Any:
        if v.__class__ is not str or len(v) < shortest:  # not text, or too short to hold a secret
            return v
        masked = text(v)
        if masked is v or masked == v:
            return v
        held = tuple(s for s in secs if _pattern((s,)).search(v)) or secs  # the secrets this id holds
        tag = hashlib.blake2b(v.encode("utf-8", "surrogatepass"), key=_id_tag_key(held),
                              digest_size=ID_TAG_HEX // 2).hexdigest()
        return f"{masked}{ID_TAG_SEP}{tag}"
    return mask


def _same(v: Any) -> Any:
    return v


def id_masker(secrets: Optional[Iterable[str]] = None) -> Callable[[Any], Any]:
    """The function that masks a record id (issue 28: ids are masked once, where records are read,
    so that every output and every name built from an id — slice names, element ids, dict keys —
    holds the same masked id).

    ``secrets``: the secrets to mask; default the current values of the registered key variables
    (:func:`known_secrets`). The function takes a record id (text: a session, assistant or qa id, a
    language, a metadata slice value) and returns it as it is (the same object) when it holds no
    secret (a few substring tests: the fast path), else the id with every secret masked as
    :func:`scrub` does, then :data:`ID_TAG_SEP` and a tag of :data:`ID_TAG_HEX` hex digits:
    ``"s-<key>"`` → ``"s-***~3f0c9a51e27b"``. The tag is a BLAKE2b hash of the whole original id,
    keyed by an scrypt derivation of the secrets the id holds (:func:`_id_tag_key`): the same on every
    runner, worker and run for the same id and key, different for two ids that mask to the same text
    (``s-<key1>`` and ``s-<key2>``, or the key plain and JSON-escaped), so two sessions never merge;
    it holds no part of the key, and a guess of the key costs one scrypt derivation to test. Values
    that are not text are returned as they are. Never raises."""
    secs = _secrets(known_secrets() if secrets is None else secrets)
    return _id_masker(secs) or _same


def mask_id(value: Any, secrets: Optional[Iterable[str]] = None) -> Any:
    """One record id masked by :func:`id_masker` (``secrets`` default: the run's key values)."""
    return id_masker(secrets)(value)


def scrub_tokens(tokens: list, secrets: Iterable[str]) -> list:
    """``tokens`` (texts that are read in sequence, e.g. a reply's log-probability tokens) with
    every token that holds part of a secret replaced by :data:`MASK`, also when the secret is
    split across several tokens (each token alone shows only a piece of it), in any JSON spelling.
    Same length, same order; tokens without a secret are returned as they are."""
    return [MASK if h else t for t, h in zip([str(t) for t in tokens], masked_tokens(tokens, secrets))]


#: a token text this long or longer that is a piece of a secret is masked wherever it stands
#: (:func:`scrub_logprobs`): a key cut into pieces a provider scatters in any order
FRAGMENT_LEN = 6


def scrub_logprobs(items: list, secrets: Iterable[str]) -> list:
    """A reply's log-probability positions (``[{"token", "logprob", "top_logprobs": [{"token",
    "logprob"}]}]``, changed in place and returned) with every token text that holds part of a
    secret replaced by :data:`MASK`, however the provider splits the secret (trial30 T10): along
    the chosen tokens (a position that holds a piece has its alternatives masked too), along a
    position's alternatives, along the r-th alternatives of every position (each walk as
    :func:`masked_tokens`), and any token text of :data:`FRAGMENT_LEN` characters or more that is a
    piece of a secret, in whatever order the pieces stand. Log-probabilities are kept."""
    secs = _secrets(secrets)
    if not secs or not items:
        return items
    for t in _logprob_hits(items, secs):
        t["token"] = MASK
    return scrub(items, secs)


def _logprob_hits(items: list, secs: tuple) -> list:
    """The token dicts of ``items`` (positions as :func:`scrub_logprobs` takes them, texts not yet
    changed: every walk reads the texts as sent) that :func:`scrub_logprobs` masks."""
    def tok(t):
        return t.get("token") if isinstance(t, dict) and isinstance(t.get("token"), str) else ""

    items = [it for it in items if isinstance(it, dict)]
    tops = [[t for t in (it.get("top_logprobs") or []) if isinstance(t, dict)] if isinstance(it.get("top_logprobs"), list)
            else [] for it in items]
    out = []
    for it, alts, hit in zip(items, tops, masked_tokens([tok(it) for it in items], secs)):
        if hit:  # the chosen token holds a piece: its alternatives (the chosen one among them) too
            out.extend((it, *alts))
    walks = list(tops)  # a position's alternatives, in order
    for rank in range(max((len(w) for w in tops), default=0)):  # the r-th alternatives of every position
        walks.append([w[rank] for w in tops if rank < len(w)])
    for walk in walks:
        out.extend(t for t, hit in zip(walk, masked_tokens([tok(t) for t in walk], secs)) if hit)
    out.extend(t for t in (*items, *(t for w in tops for t in w)) if _is_piece(tok(t), secs))
    return out


def scrub_body(body: str, secrets: Iterable[str]) -> str:
    """A reply's body as stored (a dead letter's raw) with the secrets masked as :func:`scrub` does,
    and also when a secret is split across the body's JSON texts (tokens, their alternatives, tool
    calls, refusal…): every text of the JSON document is masked as :func:`scrub_logprobs` masks a
    token, along the document's order. A body that is not JSON is masked as text."""
    import json

    secs = _secrets(secrets)
    if not secs:
        return scrub(body, secs)
    try:
        doc = json.loads(body)
    except (TypeError, ValueError, RecursionError):
        return scrub(body, secs)
    return json.dumps(scrub_reply(doc, secs), ensure_ascii=False)


def scrub_reply(doc: Any, secrets: Iterable[str]) -> Any:
    """A reply's JSON document (changed in place) with every text masked as :func:`scrub_body`
    says, before any reader takes a text from it (answer, reasoning, refusal, tool calls, tokens)."""
    secs = _secrets(secrets)
    if not secs:
        return doc
    doc = scrub(doc, secs)  # a whole key inside a text: that part masked, the text kept
    leaves = []

    def _walk(v):
        if isinstance(v, dict):
            for k in v:
                if isinstance(v[k], str):
                    if k not in _REPLY_FIELDS:
                        leaves.append((v, k))
                else:
                    _walk(v[k])
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, str):
                    leaves.append((v, i))
                else:
                    _walk(x)
    try:
        _walk(doc)
    except RecursionError:
        return scrub(doc, secs)
    hits = [(box, k) for (box, k), hit in zip(leaves, masked_tokens([box[k] for box, k in leaves], secs))
            if hit or _is_piece(box[k], secs)]
    for choice in (doc.get("choices") if isinstance(doc, dict) and isinstance(doc.get("choices"), list) else []):
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):  # the token walks, on the texts as sent
            hits.extend((t, "token") for t in _logprob_hits(lp["content"], secs))
    for box, k in hits:
        box[k] = MASK
    return doc


#: fields of a chat reply that are the protocol's words, not text the model wrote: never masked as
#: pieces of a key (a key ``assistant_id`` must not turn ``"role": "assistant"`` into ``***``);
#: a whole key in them is masked as everywhere
_REPLY_FIELDS = frozenset({"role", "finish_reason", "object", "type", "id", "model", "system_fingerprint", "service_tier"})


def _is_piece(text: str, secs: tuple) -> bool:
    """``text`` (blanks around it aside) is :data:`FRAGMENT_LEN` characters or more of a secret."""
    piece = text.strip().lower()
    return len(piece) >= FRAGMENT_LEN and any(piece in s.lower() for s in secs)


def masked_tokens(tokens: list, secrets: Iterable[str]) -> list:
    """For each token of ``tokens`` (read in sequence), whether it holds part of a secret
    (see :func:`scrub_tokens`)."""
    tokens = [str(t) for t in tokens]
    secs = _secrets(secrets)
    hit = [False] * len(tokens)
    if not secs or not tokens:
        return hit
    text = "".join(tokens)
    ends, at = [], 0
    for t in tokens:
        at += len(t)
        ends.append(at)
    for m in _pattern(secs).finditer(text):
        start, stop = m.span()
        for i, end in enumerate(ends):
            if end > start and end - len(tokens[i]) < stop:
                hit[i] = True
    return hit


def name_texts(value: Any) -> frozenset:
    """The names in a JSON-like structure: its dict keys and the text under :data:`NAME_FIELDS`,
    a slice name's dimension and value too (:func:`slice_parts`): what :func:`scrub_known_text`
    keeps in a text drawn from it (a chart labelled ``bot-a``)."""
    out: set = set()

    def _walk(v: Any, name: bool = False) -> None:
        if isinstance(v, str):
            if name:
                out.add(v)
                out.update(slice_parts(v))
        elif isinstance(v, dict):
            for k, x in v.items():
                if k in VALUE_KEYED_FIELDS and isinstance(x, dict):  # keyed by values: no name there
                    continue
                out.add(str(k))
                _walk(x, k in NAME_FIELDS)
        elif isinstance(v, (list, tuple)):
            for x in v:
                _walk(x, name)

    _walk(value)
    return frozenset(out)


def slice_parts(name: str) -> tuple:
    """The names a slice name holds: ``"assistant_id=bot-a"`` → ``("assistant_id", "bot-a")`` (a page
    labels a chart or a row by the value alone); any other text → ``()``."""
    dim, eq, val = name.partition("=")
    return (dim, val) if eq and dim and val else ()


def register_secret_env(name: str) -> None:
    """Remember that the environment variable ``name`` holds a key (the name only, never the
    value); :func:`scrub_known` then masks its value. Empty names are ignored.

    The name is also added to :data:`NAMES_ENV` in ``os.environ``, so that the worker processes a run
    starts (Beam's multi-processing SDK workers inherit the launcher's environment) mask it too. Inside
    a run (:func:`fair_forge_beam.run_scope.one_run`) both are the run's: undone when it ends, so a later
    run of the process that uses no endpoint masks nothing, as the same run alone (trial44 break 1:
    a judge run made every later run of a notebook mask ``OPENAI_API_KEY``, and every later child
    process inherited the name). Registered outside a run's context, the name is the process's, kept
    for good. Each run that registers a name holds it: it is forgotten when the last holder ends, never
    while another run or the process holds it (trial44b G1b: an audit that ended forgot a name a user had
    registered meanwhile in another thread)."""
    from fair_forge_beam.run_scope import at_run_end

    if not name or "," in str(name):
        return
    name = str(name)
    with _LOCK:
        holders = _HOLDERS.get(name) if name in _ENVS else None  # _ENVS says what is registered
        if holders == _PROCESS:
            return
        if holders is None:
            _set_names(_ENVS | {name})
            named = set(filter(None, os.environ.get(NAMES_ENV, "").split(",")))
            _INHERITED[name] = name in named  # a name the parent process named stays the environment's
            if not _INHERITED[name]:
                os.environ[NAMES_ENV] = ",".join(sorted(named | _ENVS))
        _HOLDERS[name] = (holders or 0) + 1 if at_run_end(lambda ended_well: _release(name)) else _PROCESS


#: key names -> how many open runs hold each (:data:`_PROCESS`: registered outside a run, kept for good)
_HOLDERS: dict = {}
_PROCESS = -1
#: key names -> whether the parent process's environment named it already (then it stays there)
_INHERITED: dict = {}


def _release(name: str) -> None:
    """A run that registered ``name`` ended: the last holder gone, :func:`_forget` it."""
    with _LOCK:
        holders = _HOLDERS.get(name)
        if holders is None or holders == _PROCESS or name not in _ENVS:
            return
        if holders > 1:
            _HOLDERS[name] = holders - 1
            return
        del _HOLDERS[name]
        _forget(name, _INHERITED.pop(name, False))


def _set_names(names) -> None:
    global _ENVS_SNAPSHOT
    _ENVS.clear()
    _ENVS.update(names)
    _ENVS_SNAPSHOT = frozenset(_ENVS)


def _forget(name: str, inherited: bool) -> None:
    """The runs that registered ``name`` ended (the caller holds ``_LOCK``): neither this process's writers
    nor the worker processes it starts from now on mask its value (unless ``inherited`` from the parent's
    environment)."""
    _set_names(_ENVS - {name})
    if inherited:
        return
    names = set(filter(None, os.environ.get(NAMES_ENV, "").split(","))) - {name}
    if names:
        os.environ[NAMES_ENV] = ",".join(sorted(names))
    else:
        os.environ.pop(NAMES_ENV, None)


def keys_set_here(names: Iterable[str]) -> tuple:
    """The names among ``names`` whose variable holds a value in this process's environment (the
    names only, sorted, never a value): what a launcher hands to the steps that send or mask a key, so
    that a worker can tell a key it lacks from one the run never had (:func:`require_keys`)."""
    return tuple(sorted({str(n) for n in names if n and os.environ.get(str(n))}))


class MissingKeyError(RuntimeError):
    """A worker lacks an API-key variable that was set where the run was launched (trial39 T1)."""


def require_keys(names: Iterable[str], role: str = "endpoint") -> None:
    """On a worker, at set-up: register every name of ``names`` (those :func:`keys_set_here` gave the
    launcher), so this process's writers mask their values too, and raise :class:`MissingKeyError`, one
    line naming the variable and the fix, when one of them is not set here. Before, the SDK workers of a
    Flink cluster started before the export sent ``Bearer not-needed`` and wrote an echoed key in clear."""
    names = tuple(names or ())
    for n in names:
        register_secret_env(n)
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise MissingKeyError(f"the {role}'s API key variable {missing[0]} is set where the run was launched but not in this "
                              f"worker's environment: export it before starting the cluster (docs/runners.md)")


def secret_envs() -> frozenset:
    """The registered variable names (this process and :data:`NAMES_ENV`): the key variables of
    the endpoints this run uses (a judge, guardian, generator or assistant registers its own when
    it is built). A run without an endpoint masks no variable's value (issue 28: ``OPENAI_API_KEY``
    was masked in every run, and a field whose value equalled it lost its value); what it shows a
    person still has secret-shaped strings masked (:func:`scrub_shown`, trial33 O1)."""
    return _names(_ENVS_SNAPSHOT, os.environ.get(NAMES_ENV, ""))


@functools.lru_cache(maxsize=16)
def _names(mine: frozenset, inherited: str) -> frozenset:
    return frozenset(mine | set(filter(None, inherited.split(","))))


def gate_texts(gates: Any) -> frozenset:
    """Every text of the gates ``gates`` (objects with ``model_dump``, ``label`` and ``text``, or
    plain structures): names and thresholds of the run's configuration, kept by
    :func:`scrub_known_text`."""
    out: set = set()

    def _walk(v: Any) -> None:
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, dict):
            for x in v.values():
                _walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                _walk(x)

    for g in gates or ():
        for attr in ("label", "text"):
            try:
                _walk(getattr(g, attr, None))
            except Exception:  # noqa: BLE001 - a property that cannot be read names nothing
                pass
        _walk(g.model_dump() if hasattr(g, "model_dump") else g)
    return frozenset(out)


def known_secrets() -> list:
    """The current values of the registered key variables (read now, from this process's
    environment; never stored)."""
    env = os.environ
    return [v for v in (env.get(n) for n in secret_envs()) if v]


#: a number as our sentences format one (``2``, ``-0.25``, ``1,000``, ``1e-05``, ``95%``)
_NUMBER = re.compile(r"[-+]?[0-9]+(?:[.,][0-9]+)*(?:[eE][-+]?[0-9]+)?%?")
#: a field of a ``str.format`` / ``%`` template in a string constant
_FIELD = re.compile(r"\{[^{}]*\}|%[-#0 +]*[0-9]*(?:\.[0-9]+)?[sdifgeEr]")


@functools.lru_cache(maxsize=1)
def _own_texts() -> tuple:
    """``(texts, templates)`` of the package's own source (``fair_forge_beam`` and ``pipelines``, read
    with :mod:`ast`, docstrings left out, and the page templates ``templates/*.j2``): every string
    constant, and every template — an f-string, a constant with ``{…}`` / ``%s`` fields, a page
    template — as its literal parts (a field between each two).
    Read once per process, on the first key that could be our words (about 0.5 s)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    texts: set = set()
    templates: set = set()
    for root in (package, package.parent / "pipelines"):
        for path in sorted(root.rglob("*.py")) if root.is_dir() else ():
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                continue
            docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
            for n in ast.walk(tree):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                    texts.add(n.value)
                    if _FIELD.search(n.value):
                        templates.add(tuple(_FIELD.split(n.value)))
                elif isinstance(n, ast.JoinedStr):
                    parts, cur = [], ""
                    for v in n.values:
                        if isinstance(v, ast.Constant) and isinstance(v.value, str):
                            cur += v.value
                        else:
                            parts.append(cur)
                            cur = ""
                    parts.append(cur)
                    if len(parts) > 1:
                        templates.add(tuple(parts))
    for path in sorted((package / "templates").glob("*.j2")):  # the report pages' own sentences
        try:
            parts = tuple(_JINJA.split(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
        texts.update(parts)
        templates.add(parts)
    return frozenset(texts), tuple(sorted(templates))


#: a Jinja expression, statement or comment (a field of a page template)
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)


@functools.lru_cache(maxsize=64)
def is_own_text(value: str) -> bool:
    """Whether ``value`` is our own words: part of a string constant of the package's source, or part
    of a sentence it composes, numbers in place of the template's fields (``fewer than 2 sessions``
    from ``f"fewer than {MIN_SESSIONS} sessions: …"``), or words (:func:`_filled_in`). A value without a letter is never our words,
    and at least half of a value matched to a sentence must be text other than numbers (a key of
    digits fits any number field). Such a value is published with the
    package: a key equal to it protects nothing, and masking it would mask our own words (a scorer
    named ``***``, issue 28 trial B7)."""
    if not isinstance(value, str) or not any(c.isalpha() for c in value):  # digits alone are no words
        return False
    texts, templates = _own_texts()
    if any(value in t for t in texts):
        return True
    pieces = _NUMBER.split(value)
    if len(pieces) < 2 or 2 * sum(map(len, pieces)) < len(value) or not any(c.isalpha() for c in "".join(pieces)):
        return _filled_in(value, templates)
    first, mid, last = pieces[0], pieces[1:-1], pieces[-1]
    for parts in templates:
        for i in range(len(parts) - len(pieces) + 1):
            if (parts[i].endswith(first) and parts[i + len(pieces) - 1].startswith(last)
                    and all(parts[i + 1 + j] == m for j, m in enumerate(mid))):
                return True
    return _filled_in(value, templates)


@functools.lru_cache(maxsize=1)
def _own_words() -> frozenset:
    """The words of the package's own texts (:func:`_own_texts`): what a word field of its sentences holds."""
    return frozenset(w for t in _own_texts()[0] for w in re.findall(r"[A-Za-z][A-Za-z_-]*", t))


def _filled_in(value: str, templates) -> bool:
    """Whether ``value`` is part of a sentence one of ``templates`` composes with a word or a number in
    each field (``too small to judge (sessions are the resampling unit)`` from ``f"… too small to judge
    ({units} are the resampling unit)"``): the end of one literal part, whole literal parts between
    fields, the start of another, each field one run of non-space characters; at least half of
    ``value`` literal text, holding a letter (a key made mostly of what fields hold is not our words)."""
    n = len(value)
    words = _own_words()
    w = min(4, n)  # a template whose literal parts hold neither the value's first nor its last characters
    run_end = list(range(n + 1))  # run_end[k]: the end of the run of non-space characters from k
    for k in range(n - 1, -1, -1):
        if not value[k].isspace():
            run_end[k] = run_end[k + 1]

    def composed(pos: int, seq, spans: list) -> bool:
        """value[pos:] is a field, seq[0], a field, … and the start of one of seq's parts."""
        for b in range(pos + 1, run_end[pos] + 1):
            if not (_NUMBER.fullmatch(value, pos, b) or value[pos:b] in words):
                continue  # a field holds a number or one of our own words, never a stranger's token
            here = spans + [(pos, b)]
            if seq[0].startswith(value[b:]):  # the value ends in this part
                filled = sum(e - a for a, e in here)
                literal = "".join(value[e:a] for (_, e), (a, _) in zip([(0, 0)] + here, here + [(n, n)]))
                if 2 * filled <= n and any(c.isalpha() for c in literal):
                    return True
            elif len(seq) > 1 and value.startswith(seq[0], b) and composed(b + len(seq[0]), seq[1:], here):
                return True
        return False

    for parts in templates:
        if not any(value[:w] in p or value[-w:] in p for p in parts):  # (a field at both ends: mostly fields)
            continue
        for i in range(len(parts) - 1):
            for a in range(n):
                if run_end[a] > a and parts[i].endswith(value[:a]) and composed(a, parts[i + 1:], []):
                    return True
    return False


#: :func:`~fair_forge_beam.urls.mask_url_secrets` changes a text only where it holds one of these:
#: its first rule masks a URL's user info (before an ``@``), its second a query parameter's value
#: (after an ``=``)
_URL_NEEDLES = ("@", "=")


@functools.lru_cache(maxsize=64)
def _needles(secs: tuple) -> Optional[tuple]:
    """Texts one of which every text that :func:`scrub` with the secrets ``secs`` (from
    :func:`_secrets`) can change holds, or ``None`` when there is no such short list.

    The proof, rule by rule: a URL's credentials need an ``@`` or an ``=`` (:data:`_URL_NEEDLES`); a
    secret spelt as written is itself in the text, and escaped (``\\/``, ``\\uXXXX``, a nested
    JSON text's doubled escapes) the text holds a backslash; loosely spelt (another case, separators
    between its characters) the text holds the first of the secret's characters that have no case —
    :func:`_text_scrubber` tests exactly that before anything else, so a secret of
    :data:`LOOSE_SECRET_LEN` characters or more made of letters only (no caseless character) gives
    ``None``. ``own`` and ``names`` only keep texts that would change: they add no needle."""
    needles = list(_URL_NEEDLES)
    if secs:
        needles.append("\\")
        needles.extend(secs)
        for _, caseless in _loose(secs):
            if not caseless:
                return None
            needles.append(caseless[0])
    return tuple(dict.fromkeys(needles))


def known_needles() -> Optional[tuple]:
    """:func:`_needles` of the current key values (:func:`known_secrets`): a text that holds none of
    them is left as it is by :func:`scrub_known`; ``None``: no such list (look at every text)."""
    return _needles(_secrets(known_secrets()))


def masks_nothing(value: Any) -> bool:
    """Whether :func:`scrub_known` is sure to give ``value`` back unchanged, decided on ``value``'s
    JSON text (``json.dumps``, in C) instead of a walk in Python: ``True`` when that text holds
    none of :func:`known_needles`. Sound because the text holds every text value of ``value``
    verbatim unless it holds a backslash (``json.dumps`` with ``ensure_ascii=False`` escapes only
    quotes, backslashes and control characters; a backslash is a needle whenever a key is
    registered, and ``@`` and ``=`` are never escaped); dict keys, numbers and the text of objects
    that are no JSON (``default=str``) can only add needles. ``False`` (walk it) also when the value
    has no JSON text (a dict key that is no text nor number, a cycle, nesting too deep).
    Measured (issue 26): the writers' walks were about 15 % of a 20k keyword audit's CPU (cProfile),
    with no key and no URL in any text."""
    import json

    needles = known_needles()
    if needles is None:
        return False
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return False
    return not any(n in text for n in needles)


def scrub_known(value: Any) -> Any:
    """:func:`scrub` of a record we write, with the current values of the registered key
    variables: values masked, never dict keys nor the names under :data:`NAME_FIELDS`."""
    return scrub(value, known_secrets(), names=NAME_FIELDS, own=True)


def scrub_shown(value: Any) -> Any:
    """:func:`scrub_known` of a record we show to a person (a report page's dead letters, reasons and
    warnings, the console's): secret-shaped strings (:func:`mask_shapes`) masked too, whatever the
    environment holds. The files that keep a record as read (``dead_letter/``: the original record
    and its reason) are masked by :func:`scrub_known` only (docs/reliability.md)."""
    return scrub(value, known_secrets(), names=NAME_FIELDS, own=True, shapes=True)


def scrub_known_text(text: str, names: Iterable[str] = ()) -> str:
    """:func:`scrub` of a text drawn from our records (a console table, a page) with the current
    key values, every occurrence of ``names`` kept (:func:`name_texts` of the records it shows,
    field names and gate texts): a key equal to a field name masks the values around it, never
    the name (issue 28). A key that is our own words (:func:`is_own_text`) is not masked in such a
    text: the text is composed of our words and of values already masked by :func:`scrub_known` (the
    writer of a page or table passes it masked records), and cannot tell one from the other."""
    keys = known_secrets()
    masked = scrub(text, keys, keep=names)
    if masked is text or masked == text or not keys:  # nothing masked: our own words never asked (a cold
        return masked  # is_own_text reads the package's source, about 1.8 s of CPU)
    return scrub(text, [k for k in keys if not is_own_text(k)], keep=names)
