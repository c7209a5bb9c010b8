"""Whether a text holds nothing to read: :func:`is_blank`, the one predicate of every emptiness
check of the package (an empty answer or description, a missing reference, a role, a prompt, a
query, an id, a seed prompt ...).

A text made only of whitespace and invisible characters shows as nothing, so it is as empty as
``""``: ``"\\u200b"`` (zero-width space), ``"\\ufeff"`` (byte-order mark), ``"\\u2060"`` (word joiner),
``"\\u00a0"`` (no-break space), ``"\\u2028"`` (line separator), ``"\\x00"`` are blank; ``"a\\u200b"``,
``"é"`` and ``"\\u0301"`` (a combining mark, shown on a dotted circle) are not. ``str.strip()``
keeps the format characters (category ``Cf``), so ``"\\u200b".strip()`` was content: a vision
answer ``"\\u200b"`` was scored without its empty-description warning, a role ``"\\u200b"`` was
judged, an explain prompt ``"\\u200b"`` reached the model and failed there (issue 28 H11).
"""
from __future__ import annotations

import functools
import unicodedata

__all__ = ["is_blank", "is_blank_char", "is_blank_line"]

#: Unicode categories that show nothing: format characters, space separators, line and paragraph
#: separators, control characters
_BLANK_CATEGORIES = frozenset({"Cf", "Zs", "Zl", "Zp", "Cc"})
#: characters of other categories that show as nothing (the Braille blank pattern, the Hangul fillers)
_BLANK_OTHERS = frozenset("\u2800\u115f\u1160\u3164\uffa0")


@functools.lru_cache(maxsize=4096)
def is_blank_char(ch: str) -> bool:
    """Whether the one character ``ch`` shows as nothing: whitespace, a format, separator or control
    character (categories Cf, Zs, Zl, Zp, Cc: zero-width space and joiners, U+FEFF, U+2060, soft
    hyphen, bidirectional marks, tags), a variation selector, the combining grapheme joiner, a
    Hangul filler, the Braille blank."""
    if ch.isspace() or ch in _BLANK_OTHERS:
        return True
    if unicodedata.category(ch) in _BLANK_CATEGORIES:
        return True
    code = ord(ch)
    return (0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or 0x180B <= code <= 0x180F or code == 0x034F
            or 0xE0000 <= code <= 0xE0FFF)


def is_blank(text) -> bool:
    """Whether ``text`` holds nothing to read: ``None``, ``""``, or only characters that show as
    nothing (:func:`is_blank_char`). A text is walked until its first visible character, so most
    texts are decided by their first one or two characters. Not text (a number, a list): ``False``
    — the caller's type check says what is wrong with it."""
    if text is None:
        return True
    if not isinstance(text, str):
        return False
    for ch in text:
        if not is_blank_char(ch):
            return False
    return True


def is_blank_line(text: str) -> bool:
    """Whether a line of a JSON Lines file is a blank line, not a record: :func:`is_blank`, but for a
    control character that is not whitespace (a NUL, U+0001 …): a line of NULs is damage (a file
    cut and padded, a disk block of zeros), so it stays a rejected line that names it. The audit's
    reader and the agentic loaders both ask this (issue 29 T14: a line of only U+200B was rejected
    as invalid JSON while one of only NBSP or U+2028 was skipped)."""
    return is_blank(text) and not any(unicodedata.category(ch) == "Cc" and not ch.isspace() for ch in text)
