"""Emotion lexicons for Humanity (spec §6.5): pluggable, loaded once per worker.

The default, :class:`NRCLexPackageLexicon`, reads the English NRC Emotion Lexicon that the
``nrclex`` PyPI package installs (``nrclex/data/nrc_en.json``) — offline, no download.

Licence: the NRC Word-Emotion Association Lexicon (Mohammad & Turney, 2013, National Research
Council Canada) is free for **non-commercial research and educational use only**; commercial
use needs a licence from NRC Canada. Cite: Saif M. Mohammad and Peter D. Turney,
"Crowdsourcing a Word-Emotion Association Lexicon", Computational Intelligence 29(3), 2013.
This project does not ship the lexicon; it reads the copy installed by ``nrclex``.

Bring another lexicon by subclassing :class:`EmotionLexicon` (e.g. a commercially licensed
one), or load the upstream multi-language CSV with :class:`NRCCsvLexicon`.
"""
from __future__ import annotations

import csv
import importlib.resources
import json
from abc import ABC, abstractmethod
from typing import Mapping, Optional

from fair_forge_beam.components.shared_resources import SharedDict, Transient, acquire, content_key, file_key
from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.text import normalize_text, tokenize
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.languages import normalize_language
from fair_forge_beam.arguments import checks_arguments

__all__ = ["EMOTIONS", "tokenize", "EmotionLexicon", "NRCLexPackageLexicon", "NRCCsvLexicon", "DictEmotionLexicon"]

#: Plutchik's eight emotions, in the order of every count vector (spec §6.5).
EMOTIONS: tuple[str, ...] = ("anger", "anticipation", "disgust", "fear", "joy", "sadness", "surprise", "trust")
_INDEX = {e: i for i, e in enumerate(EMOTIONS)}

NRC_LICENCE = (
    "NRC Word-Emotion Association Lexicon (Mohammad & Turney 2013, National Research Council Canada): "
    "free for non-commercial research and educational use only; commercial use requires a licence from NRC Canada."
)


#: the NRC lexicon's two sentiment columns (``Positive``, ``Negative``, beside the eight emotions):
#: neither an emotion of Humanity nor a language (trial36 T6: read as languages 'positive', 'negative')
NRC_SENTIMENTS: tuple[str, ...] = ("positive", "negative")


def _indices(emotions) -> tuple[int, ...]:
    return tuple(sorted({_INDEX[e.strip().lower()] for e in emotions if e.strip().lower() in _INDEX}))


def _normalized_table(table: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Entries keyed as text tokens are (:func:`~fair_forge_beam.components.text.normalize_text`:
    NFKC, invisible characters dropped, lower case), so an entry written with decomposed accents
    or full-width letters is found; entries that become equal are merged (union of emotions)."""
    out: dict[str, tuple[int, ...]] = {}
    for word, idx in table.items():
        key = normalize_text(word).strip()
        if key in out and out[key] != tuple(idx):
            out[key] = tuple(sorted(set(out[key]) | set(idx)))
        else:
            out.setdefault(key, tuple(idx))
    return out


class EmotionLexicon(Transient, ABC):
    """token -> emotions, per language. Subclasses implement :meth:`load`.

    ``table(language)`` returns ``{normalised token: tuple of emotion indices into EMOTIONS}``
    (keys normalised like the text, :func:`fair_forge_beam.components.text.normalize_text`)
    or ``None`` when the lexicon has no entries for that language. The tables are read-only.

    ``shared_key()`` — hashable identity of the loaded tables, or ``None`` (default for custom
    subclasses: each instance loads its own). With a key the tables are loaded once per worker
    process and shared by every instance and thread
    (:func:`~fair_forge_beam.components.shared_resources.acquire`).
    """

    name: str = "custom"
    licence: str = "unspecified"

    def __init__(self):
        self._tables: Optional[dict[str, dict[str, tuple[int, ...]]]] = None

    @abstractmethod
    def load(self) -> Mapping[str, Mapping[str, tuple[int, ...]]]:
        """Return ``{canonical language: {token: emotion indices}}``."""

    def shared_key(self) -> Optional[tuple]:
        """Identity of the loaded tables for per-process sharing; ``None`` = not shared."""
        return None

    def _build(self) -> SharedDict:
        return SharedDict({normalize_language(k): _normalized_table(v) for k, v in self.load().items()})

    def _ensure(self):
        if self._tables is None:
            key = self.shared_key()
            self._tables = self._build() if key is None else acquire(("emotion-lexicon", type(self).__qualname__, *key), self._build)
        return self._tables

    @property
    def languages(self) -> frozenset[str]:
        return frozenset(self._ensure())

    def table(self, language: str) -> Optional[dict[str, tuple[int, ...]]]:
        return self._ensure().get(normalize_language(language))

    _transient = ("_tables",)  # reloaded once per worker, never shipped in the pipeline graph


class NRCLexPackageLexicon(EmotionLexicon):
    """English NRC Emotion Lexicon from the installed ``nrclex`` package (6,468 words).

    The package's ``positive``/``negative`` sentiment tags are dropped; the 8 emotions are kept.

    Raises:
        RuntimeError: (on first use) ``nrclex`` is not installed.
    """

    name = "NRC Emotion Lexicon (nrclex 4.1.0 package copy, English)"
    licence = NRC_LICENCE

    def shared_key(self) -> tuple:
        return ()

    def load(self):
        try:
            text = importlib.resources.files("nrclex").joinpath("data/nrc_en.json").read_text(encoding="utf-8")
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            raise RuntimeError(
                "the default emotion lexicon needs the 'nrclex' package (pip install nrclex==4.1.0), "
                "or pass your own EmotionLexicon"
            ) from exc
        data = json.loads(text)
        table = {}
        for word, emotions in data.items():
            idx = _indices(emotions)
            if idx:
                table[str(word).lower()] = idx
        return {"english": table}


class NRCCsvLexicon(EmotionLexicon):
    """The upstream multi-language NRC CSV (``;``-separated; columns ``english;french;...;Trust``).

    Every column is a language (its name or ISO code, :func:`~fair_forge_beam.schemas.languages.normalize_language`)
    but the eight emotions and NRC's sentiment columns ``Positive``/``Negative`` (:data:`NRC_SENTIMENTS`,
    not read: Humanity counts emotions), in any case and spacing.

    As upstream (spec §6.5): key = lower-cased word of the language column, value = emotions
    flagged 1; **later duplicate keys overwrite earlier ones**. Rows with no emotion are kept as
    "no emotion" entries (they overwrite too).
    """

    licence = NRC_LICENCE

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.name = f"NRC Emotion Lexicon CSV ({path})"

    def shared_key(self) -> Optional[tuple]:
        key = file_key(self.path)  # path, size and mtime: an edited file is read again
        return None if key is None else key

    def load(self):
        import io

        from fair_forge_beam.io.edge import read_side_text

        text = read_side_text(self.path, "--emotion-lexicon-csv")  # read whole, bounded
        if "\0" in text:
            raise ValueError(f"a NUL character on line {text.count(chr(10), 0, text.index(chr(0))) + 1}: not a CSV text")
        with io.StringIO(text, newline="") as f:
            reader = csv.DictReader(f, delimiter=";", strict=True)
            try:
                _check_header(reader.fieldnames or [])
                emo_cols = {c: c.strip().lower() for c in reader.fieldnames if c.strip().lower() in _INDEX}
                lang_cols = [c for c in reader.fieldnames if c not in emo_cols and c.strip().lower() not in NRC_SENTIMENTS]
                tables: dict[str, dict[str, tuple[int, ...]]] = {normalize_language(c): {} for c in lang_cols}
                for row in reader:
                    idx = _indices([emo for col, emo in emo_cols.items() if _flagged(row, col, reader.line_num)])
                    for col in lang_cols:
                        word = str(row.get(col) or "").strip().lower()
                        if word:
                            tables[normalize_language(col)][word] = idx
            except csv.Error as exc:  # an unclosed quote: the rest of the file would be one field
                from fair_forge_beam.plain import plain_reason

                raise ValueError(f"not a ';'-separated CSV text: {plain_reason(exc)} (after line {reader.line_num})") from None
        return tables


#: an emotion cell's texts (stripped): flagged, not flagged. **Decision** (trial38 T2): ``1.0`` and
#: ``0.0`` are 1 and 0 (a spreadsheet or pandas writes a 0/1 column as floats); any other text is refused
#: with the line, the column and the value — ``TRUE``, ``x``, ``5``, ``NaN`` or an empty cell read as "no
#: emotion" silently, and a lexicon of ``1.0`` cells scored no emotion at all (entropy 0.0000)
_CELL = {"1": True, "1.0": True, "0": False, "0.0": False}


def _flagged(row: dict, col: str, line: int) -> bool:
    """Whether the emotion column ``col`` of the CSV ``row`` (on ``line``) flags its emotion; raises
    ``ValueError`` naming the line, the column and the value unless the cell is one of :data:`_CELL`,
    or when the line has more cells than the header names."""
    if None in row:  # csv.DictReader's key of the cells past the header's
        raise ValueError(f"line {line} has {len(row) - 1 + len(row[None])} cells, more than the "
                         f"{len(row) - 1} columns its header names")
    v = row.get(col)
    flag = _CELL.get(v.strip()) if isinstance(v, str) else None
    if flag is None:
        what = "no cell (the line has fewer cells than its header names)" if v is None else (
            "an empty cell" if is_blank(v) else quoted(v))
        raise ValueError(f"line {line}, column {quoted(col.strip())}: {what} is not 0 or 1 (an emotion cell is 1 when "
                         "the word has the emotion, else 0; 1.0 and 0.0 are read as 1 and 0)")
    return flag


def _check_header(columns: list) -> None:
    """Raises ``ValueError`` unless ``columns`` (an NRC CSV's header) names each column once (emotions
    in any case and spacing) and holds at least one emotion column and one language column: a
    header that does not is read as a lexicon covering no language of the data (trial 28b: a
    comma-separated file, duplicate columns — every row then scored nothing, an empty run)."""
    tagged = set(_INDEX) | set(NRC_SENTIMENTS)
    names = [c.strip().lower() if c.strip().lower() in tagged else c for c in columns]
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise ValueError(f"its header names column(s) {', '.join(map(repr, twice))} more than once")
    head = ";".join(columns)
    head = head if len(head) <= 120 else head[:120] + "…"
    if not any(n in _INDEX for n in names):
        raise ValueError(f"its header {quoted(head)} names no emotion column ({';'.join(e.title() for e in EMOTIONS)}, "
                         "';'-separated)")
    if all(n in tagged for n in names):
        raise ValueError(f"its header {quoted(head)} names no language column (e.g. 'english', ';'-separated)")


class DictEmotionLexicon(EmotionLexicon):
    """A lexicon from a Python mapping ``{language: {word: [emotions]}}`` (tests, small custom lists)."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, entries: Mapping[str, Mapping[str, list[str]]], name: str = "dict", licence: str = "user-supplied"):
        super().__init__()
        self.entries, self.name, self.licence = {k: dict(v) for k, v in entries.items()}, name, licence

    def shared_key(self) -> Optional[tuple]:
        digest = content_key(self.entries)
        return None if digest is None else (digest,)

    def load(self):
        return {lang: {w.lower(): _indices(e) for w, e in words.items()} for lang, words in self.entries.items()}
