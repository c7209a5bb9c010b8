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
from typing import Optional

import regex

__all__ = ["INVISIBLE_CLASS", "is_blank", "is_blank_char", "is_blank_line", "is_invisible_char", "damage_char", "blank_text_reason",
           "unreadable_text_reason"]

#: what shows as nothing between two visible characters: Unicode's ``Default_Ignorable_Code_Point``
#: (zero-width characters and joiners, U+FEFF, U+2060-U+206F, soft hyphen, bidirectional marks,
#: variation selectors, the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, tags,
#: and the unassigned code points Unicode reserves as ignorable) and every format character (Cf), as
#: the ``regex`` package's tables hold them (Unicode 18.0; Python 3.11's ``unicodedata`` is 14.0 and
#: has no such property) — not a hand-kept list (trial30 T1: U+17B4, U+17B5, U+2065, U+FFF0-FFF8
#: were missing)
_INVISIBLE = r"\p{Default_Ignorable_Code_Point}\p{Cf}"
#: :data:`_INVISIBLE`, for another ``regex`` character class that must name the same characters
#: (:func:`fair_forge_beam.components.text.reading_text_origin`)
INVISIBLE_CLASS = _INVISIBLE
_INVISIBLE_CHAR = regex.compile(f"[{_INVISIBLE}]")
#: one character that shows as nothing: an invisible one, ``White_Space``, and this package's own
#: decisions: every separator and control character (categories Zs, Zl, Zp, Cc: ``"\x00"`` is no
#: text to read) and the Braille blank U+2800
_BLANK_CHAR = regex.compile(rf"[{_INVISIBLE}\p{{White_Space}}\p{{Zs}}\p{{Zl}}\p{{Zp}}\p{{Cc}}\u2800]")


def without_invisible(text: str) -> str:
    """``text`` with every invisible character (:func:`is_invisible_char`) removed: what the lexicon
    tokeniser reads (:func:`fair_forge_beam.components.text.normalize_text`), so ``"idi\u034fot"`` is
    ``"idiot"`` as ``"idi\u200bot"`` is."""
    return _INVISIBLE_CHAR.sub("", text)


def is_invisible_char(ch: str) -> bool:
    """Whether the one character ``ch`` shows as nothing between two visible characters: a
    ``Default_Ignorable_Code_Point`` or format (Cf) character (:data:`_INVISIBLE`); whitespace is
    not (it shows as a gap). The secret masker's gaps ask it (:mod:`fair_forge_beam.io.secrets`)."""
    return _INVISIBLE_CHAR.fullmatch(ch) is not None


@functools.lru_cache(maxsize=4096)
def is_blank_char(ch: str) -> bool:
    """Whether the one character ``ch`` shows as nothing: an invisible character
    (:func:`is_invisible_char`), ``White_Space``, a separator or control character (categories Zs,
    Zl, Zp, Cc), the Braille blank. Cached: :func:`is_blank` asks it per character."""
    return _BLANK_CHAR.fullmatch(ch) is not None


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
    return is_blank(text) and damage_char(text) is None


def damage_char(text: str) -> Optional[int]:
    """The position of the first control character of ``text`` that is not whitespace (a NUL, U+0001,
    ESC …), or ``None``: such a character is damage (a file cut and padded, a disk block of zeros,
    bytes read as the wrong encoding), never text to read. Tab, line feed and carriage return are
    whitespace, not damage."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cc" and not ch.isspace():
            return i
    return None


def blank_text_reason(field: str, text: str) -> Optional[str]:
    """Why ``text`` (a ``field``: "prompt", "target", "question" …) holds nothing to read, or ``None``:
    blank by :func:`is_blank` (empty, whitespace, zero-width or other invisible characters), or only
    combining marks (with invisible characters): no base character for a mark to sit on (explain's
    model failed on it with a library's words, "ArrayRef: invalid slice", issue 28 trial29 T10)."""
    if is_blank(text):
        return (f"blank {field}: the {field} holds nothing to read "
                f"({'empty' if not text else 'only whitespace or invisible characters'})")
    if all(is_blank_char(ch) or unicodedata.category(ch).startswith("M") for ch in text):
        return f"blank {field}: the {field} holds only combining marks (no character for them to sit on)"
    return None


def unreadable_text_reason(field: str, text: str) -> Optional[str]:
    """Why a text that is made, not read from a user's file (a generated question), is no text to use,
    or ``None``: :func:`blank_text_reason`, or a control character that is not whitespace anywhere in it
    (:func:`damage_char`: ``"a\\x00b"`` shows as ``ab`` and is damage, not a question)."""
    blank = blank_text_reason(field, text)
    if blank:
        return blank
    at = damage_char(text)
    if at is not None:
        return (f"the {field} holds a control character, U+{ord(text[at]):04X} at character {at + 1} of "
                f"{len(text)}: damage, not text")
    return None
