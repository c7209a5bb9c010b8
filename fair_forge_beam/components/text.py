"""One text normaliser and tokeniser for every lexicon (NRC emotions for Humanity, HurtLex for
Toxicity), applied to the answers and to the lexicon entries alike.

:func:`normalize_text`, in this order:

1. invisible characters are removed (below) and typographic apostrophes (U+2019, U+02BC,
   U+2018) become ``'``;
2. Unicode NFKC (UAX #15): full-width and other compatibility forms fold to their ordinary
   letters (``"ＨＡＴＥ"`` → ``"HATE"``, ``"ﬁ"`` → ``"fi"``), and a letter followed by combining
   accents composes to the precomposed letter (``"e\\u0301"`` → ``"é"``), so both spellings of
   a word are one token;
   The characters removed, before and after NFKC, are the package's one definition of invisible
   (:func:`fair_forge_beam.blank.is_invisible_char`: every ``Default_Ignorable_Code_Point`` and
   format character, Cf): soft hyphen U+00AD, zero-width space / non-joiner / joiner
   U+200B–U+200D, word joiner U+2060, BOM U+FEFF, bidirectional marks, the combining grapheme
   joiner U+034F, variation selectors, tag characters, Hangul fillers (U+115F, U+1160, U+3164),
   U+17B4/U+17B5 … — so ``"h\\u200bate"``, ``"hat\\u00ade"`` and ``"ha\\u034fte"`` read as
   ``"hate"`` (trial49b B8: a hand-kept list of 23 missed U+034F, U+FE0F, U+E0041, U+17B4, the
   Hangul fillers);
3. lower case (``str.lower``).

:func:`tokenize` then takes words as runs of Unicode word characters (``\\w``) joined by
apostrophes: ``"I don't know."`` → ``["i", "don't", "know"]`` — a contraction stays one word,
so it no longer counts as the lexicon entry ``"don"`` (upstream's ``\\b\\w+\\b`` split it into
``"don"`` and ``"t"``). In languages that elide articles and prepositions with an apostrophe
(:data:`ELISION_LANGUAGES`: Italian, French, Catalan, Portuguese) the apostrophe separates
words instead, as upstream: ``"l'idiota"`` → ``["l", "idiota"]``. Apostrophes and quotes at
the edges of a word are not part of it (``"'hello'"`` → ``["hello"]``).

Text without apostrophes, format characters or compatibility forms tokenises exactly as
upstream's ``re.findall(r"\\b\\w+\\b", text.lower())`` (spec §6.1 step 6, §6.5). ASCII text
with no apostrophe to keep takes a fast path with the same result: the runs of ``[a-z0-9_]`` of
the lower-cased text, split by one byte translation (about 4× faster than the regex).
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Iterator, Optional

import regex

from fair_forge_beam.blank import INVISIBLE_CLASS, is_invisible_char, without_invisible

__all__ = ["ELISION_LANGUAGES", "TOKEN_PIECE_CHARS", "ascii_words", "normalize_text", "reading_text",
           "reading_text_origin", "token_pieces", "tokenize"]

#: Canonical language names (see :func:`fair_forge_beam.schemas.languages.normalize_language`)
#: in which an apostrophe marks elision between two words rather than a contraction.
ELISION_LANGUAGES = frozenset({"italian", "french", "catalan", "portuguese"})

#: typographic apostrophes, read as ``'``
_APOSTROPHES = {0x2019: "'", 0x02BC: "'", 0x2018: "'"}

_WORD = re.compile(r"\w+(?:'\w+)*")
_WORD_ELISION = re.compile(r"\w+")
#: byte -> itself for ASCII letters, digits and "_" (``\w`` on ASCII), a space for every other byte
_ASCII_WORD_BYTES = bytes(c if c < 128 and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256))


def reading_text(text: str) -> str:
    """The text every scorer that reads an answer's words reads: ``text`` with every invisible
    character removed (:func:`fair_forge_beam.blank.without_invisible`, before and after NFKC) and
    folded by Unicode NFKC (``"ＨＡＴＥ"`` → ``"HATE"``, ``"ﬁ"`` → ``"fi"``, ``"…"`` → ``"..."``,
    ``"e\u0301"`` → ``"é"``); case and apostrophes kept (VADER reads ``"HATE"`` as intensified).
    The lexicon tokeniser (:func:`normalize_text`), the keyword group extractor, VADER, the
    toxicity classifier, the PII detectors, every embedder and the keyword constraint all read
    it, so ``"wo\u200bman"``, ``"wo\u034fman"`` and ``"ｗｏｍａｎ"`` are ``"woman"`` to every one of
    them (trial49c B2: only the lexicons read it; the others saw two words, or none).

    An ASCII text is returned as it is (no invisible character or compatibility form is ASCII), and
    so is any text with neither: their scores are what they were, bit for bit. A detector that
    reports character offsets maps them back with :func:`reading_text_origin`."""
    if text.isascii():
        return text
    return without_invisible(unicodedata.normalize("NFKC", without_invisible(text)))


def normalize_text(text: Optional[str]) -> str:
    """:func:`reading_text`, typographic apostrophes as ``'``, lower case (see the module
    docstring). ``None`` → ``""``."""
    if not text:
        return ""
    if text.isascii():  # no format character, typographic apostrophe nor compatibility form: NFKC is the identity
        return text.lower()
    return reading_text(text).translate(_APOSTROPHES).lower()


class _TextOrigin:
    """Where each character of a :func:`reading_text` came from in the original text: the reading
    text is cut into pieces, each the NFKC of one run of original characters (a letter and its
    combining marks, a compatibility character, and the invisible characters inside such a run) or a
    run of characters copied one to one (ASCII, full-width letters: one character each).

    :meth:`span` maps ``[start, end)`` of the reading text to the original: a span found across a
    removed character covers it, and one that starts or ends inside a piece of several characters
    (the ``"i"`` of ``"ﬁ"``) covers that piece whole. Invisible characters just outside a span stay
    outside it."""

    __slots__ = ("_n_starts", "_pieces")

    def __init__(self, pieces: list):
        #: (reading start, reading end, original start, original end, one to one?) in reading order
        self._pieces = pieces
        self._n_starts = [p[0] for p in pieces]

    def _piece(self, i: int) -> tuple:
        return self._pieces[bisect.bisect_right(self._n_starts, i) - 1]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original ``[start, end)`` of the reading text's ``[start, end)`` (``start < end``)."""
        n0, _, o0, o1, linear = self._piece(start)
        ostart = o0 + (start - n0) if linear else o0
        n0, _, o0, o1, linear = self._piece(end - 1)
        oend = o0 + (end - n0) if linear else o1
        return ostart, oend


#: a run of characters NFKC may change, join to a neighbour or reorder, or that are removed: not
#: ``NFKC_Quick_Check=Yes``, a combining class other than 0, or invisible. Every other character (all
#: of ASCII, CJK, precomposed letters) is its own reading text and no character after it reaches back
#: across it (the ``regex`` package's Unicode tables: a character they call stable is stable in
#: ``unicodedata``'s older version too, where it is the same or unassigned)
_UNSTABLE_RUN = regex.compile(rf"(?:[^\p{{NFKC_QC=Y}}]|\P{{ccc=0}}|[{INVISIBLE_CLASS}])+")


def _nfkc_clusters(text: str, start: int, stop: int) -> Iterator[tuple[int, int, str]]:
    """``(original start, original end, reading text)`` of consecutive runs of ``text[start:stop]``
    whose :func:`reading_text` is the concatenation of theirs. A run ends before a starter (canonical
    combining class 0) whose NFKC begins with a starter and that does not compose with the run
    (NFKC of the run and it is NFKC of each, concatenated): nothing after it can then reach back
    into the run. Invisible characters are dropped from the run that holds them."""
    seg, s0, s1 = "", start, start
    nfkc = unicodedata.normalize
    for i in range(start, stop):
        c = text[i]
        if is_invisible_char(c):
            continue
        if seg and not unicodedata.combining(c):
            nc = nfkc("NFKC", c)
            if nc and not unicodedata.combining(nc[0]):
                done = nfkc("NFKC", seg)
                if nfkc("NFKC", seg + c) == done + nc:
                    yield s0, s1, without_invisible(done)
                    seg = ""
        if not seg:
            s0 = i
        seg += c
        s1 = i + 1
    if seg:
        yield s0, s1, without_invisible(nfkc("NFKC", seg))


def reading_text_origin(text: str) -> tuple[str, Optional[_TextOrigin]]:
    """:func:`reading_text` ``(text)`` and its :class:`_TextOrigin`, or ``None`` when the reading
    text is ``text`` itself (offsets into one are offsets into the other). Work in Python is spent
    only on the characters that are not their own reading text (:data:`_UNSTABLE_RUN`), and on the
    character before each run of them, which a combining mark may join: 1 MB of Chinese or of
    accented Latin with one invisible character is mapped in a few hundredths of a second."""
    reading = reading_text(text)
    if reading == text:
        return text, None
    pieces: list = []
    parts: list = []
    n = 0

    def add(o0: int, o1: int, out: str, copied: bool = False) -> None:
        nonlocal n
        if not out:
            return
        # one to one: a copied run of stable characters, or one character read as one (a run of
        # several may be reordered by NFKC: its characters map to the run as a whole)
        linear = copied or (o1 - o0 == 1 and len(out) == 1)
        last = pieces[-1] if pieces else None
        if linear and last is not None and last[4] and last[1] == n and last[3] == o0:
            pieces[-1] = (last[0], n + len(out), last[2], o1, True)
        else:
            pieces.append((n, n + len(out), o0, o1, linear))
        parts.append(out)
        n += len(out)

    pos = 0
    for m in _UNSTABLE_RUN.finditer(text):
        s = m.start() - 1 if m.start() > pos else m.start()  # the stable character a mark may combine with
        if s > pos:
            add(pos, s, text[pos:s], copied=True)
        for o0, o1, out in _nfkc_clusters(text, s, m.end()):
            add(o0, o1, out)
        pos = m.end()
    if pos < len(text):
        add(pos, len(text), text[pos:], copied=True)
    if "".join(parts) != reading:  # pragma: no cover - the runs are cut where NFKC cannot reach across
        return reading, _TextOrigin([(0, len(reading), 0, len(text), False)])
    return reading, _TextOrigin(pieces)


def tokenize(text: Optional[str], language: Optional[str] = None) -> list[str]:
    """Words of :func:`normalize_text` ``(text)``: ``\\w`` runs joined by inner apostrophes
    (contractions are one word), except in :data:`ELISION_LANGUAGES` where ``'`` separates.

    ``language``: a canonical language name (``"english"``, ``"italian"``, ...) or ``None``
    (contractions kept, the English rule). Returns ``[]`` for ``None`` or empty text.
    """
    if not text:
        return []
    elision = language in ELISION_LANGUAGES
    if text.isascii() and (elision or "'" not in text):
        # ASCII with no contraction to keep: the words are the runs of [a-z0-9_] of the lower-cased
        # text (what both patterns find there), split by one byte translation instead of the regex
        return ascii_words(text)
    norm = normalize_text(text)
    if not norm:
        return []
    return (_WORD_ELISION if elision else _WORD).findall(norm)


#: characters of a text tokenised at once by :func:`token_pieces` (a piece runs on to the next whitespace)
TOKEN_PIECE_CHARS = 1 << 20
#: where a piece may end (:func:`token_pieces`): whitespace; ASCII punctuation that is neither part of a word
#: (``_``, ``'``) nor ignored by ``str.lower``'s final-sigma rule; and ``. , : ; ^ ` `` (which that rule looks
#: through) only between two ASCII letters or digits (``word,word``: no sigma beside them to change)
_CUT = re.compile(r"""\s|[!"#$%&()*+\-/<=>?@\[\\\]{|}~]|(?<=[A-Za-z0-9])[.,:;^`](?=[A-Za-z0-9])""")


def token_pieces(text: Optional[str], language: Optional[str] = None,
                 piece_chars: int = TOKEN_PIECE_CHARS) -> Iterator[list[str]]:
    """:func:`tokenize` ``(text, language)`` in consecutive lists whose concatenation is exactly that
    list, each of the words of about ``piece_chars`` characters of ``text``: what a word count or
    lexicon scan over an answer of any size holds at once (a 50 MB answer's 10 million words were one
    list of about 700 MB; an answer of at most ``piece_chars`` characters is one piece).

    A piece ends just before the first character at or after ``piece_chars`` characters where no word,
    contraction or normalisation can span the cut: whitespace (``str.isspace``); ASCII punctuation that is no
    word character, no apostrophe and not looked through by ``str.lower``'s final-sigma rule (``- / , ( ) ! ?``
    …); and ``. , : ; ^ `````, which that rule looks through, when between two ASCII letters or digits (words
    joined by commas: trial47b B2, 9 million words joined by ``,`` were one piece). Such a character is never a
    word character, nor removed as an invisible format character, nor composed with its neighbours by NFKC. A
    run of ``piece_chars`` characters without one stays in one piece (one long word is one word anyway).

    Raises:
        ValueError: ``piece_chars`` < 1."""
    if piece_chars < 1:
        raise ValueError(f"piece_chars must be at least 1, got {piece_chars}")
    if not text:
        return
    start, end = 0, len(text)
    while start < end:
        cut = _CUT.search(text, start + piece_chars) if start + piece_chars < end else None
        stop = cut.start() if cut is not None else end
        yield tokenize(text if (start, stop) == (0, end) else text[start:stop], language)
        start = stop


def ascii_words(text: str) -> list[str]:
    """``re.findall(r"\\w+", text.lower())`` for an ASCII ``text``: the runs of ``[a-z0-9_]`` of
    the lower-cased text (Python's ``\\w`` on ASCII characters), split by one byte translation
    instead of a regular expression (about 4x faster). The caller checks ``text.isascii()``.

    Raises:
        UnicodeEncodeError: ``text`` is not ASCII.
    """
    return text.lower().encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
