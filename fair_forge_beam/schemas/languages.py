"""Language names: one canonical value per language.

The original stores full lower-case English names (``"english"``) and fails with a
``KeyError`` on ISO codes (spec §17 item 9). Here ``"en"``, ``"EN"``, ``"English"``,
``"en-US"``, ``"eng"`` and ``"english"`` all normalise to ``"english"`` — for every language of
ISO 639-3 (``pycountry.languages``, the iso-codes project's data: its ISO 639-1 code, its ISO
639-3 code (= ISO 639-2/T), its ISO 639-2/B code, its English names; the withdrawn ISO 639-1 codes
BCP 47 still reads, ``iw`` ``in`` ``ji`` ``jw`` ``mo``). trial36 T6: the table held 16 languages, so
``sv``, ``sv-SE`` and ``swe`` were three languages apart from ``swedish`` (separate slices; dead
letters although the lexicon had Swedish). The canonical name is the English name, lower-cased,
its qualifier dropped and an inverted name turned (``"Greek, Modern (1453-)"`` -> ``"modern
greek"``); where two languages share a name or code, the one ISO 639-1 / 639-2 names first holds
it; the languages of :data:`_ALIASES` keep their names and native spellings. ISO's special codes
(``und``, ``mul``, ``zxx``, ``mis``) name no language. A language that is not in the table is kept
(stripped, lower-cased) and reported by :func:`is_known_language`, so the caller can warn and count
it instead of crashing. The ISO table is read on the first value outside :data:`_ALIASES` (about
8,000 languages; a run in the usual languages never reads it).
"""
from __future__ import annotations

import re
from collections import Counter

import functools

# canonical name -> ISO 639-1, ISO 639-2/3 codes and native spellings
_ALIASES: dict[str, tuple[str, ...]] = {
    "english": ("en", "eng", "inglés", "ingles"),
    "spanish": ("es", "spa", "español", "espanol", "castellano", "castilian"),
    "italian": ("it", "ita", "italiano"),
    "portuguese": ("pt", "por", "português", "portugues"),
    "french": ("fr", "fra", "fre", "français", "francais"),
    "german": ("de", "deu", "ger", "deutsch"),
    "dutch": ("nl", "nld", "dut", "nederlands"),
    "russian": ("ru", "rus", "русский"),
    "japanese": ("ja", "jpn", "日本語"),
    "chinese": ("zh", "zho", "chi", "中文"),
    "arabic": ("ar", "ara", "العربية"),
    "hindi": ("hi", "hin"),
    "korean": ("ko", "kor"),
    "turkish": ("tr", "tur"),
    "polish": ("pl", "pol"),
    "catalan": ("ca", "cat", "català", "valencian"),
    "greek": ("el", "ell", "gre", "ελληνικά"),  # ISO 639-2 names it "Greek, Modern (1453-)" beside Ancient Greek
}

#: ISO 639-1 codes withdrawn and replaced; BCP 47 and older systems (Java's Locale) still write them
_WITHDRAWN_639_1 = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}


def _iso_names(name: str) -> list[str]:
    """The lower-case forms of an ISO 639-2 English name: each ``;``-separated form, its
    parenthesised qualifier dropped and an inverted form turned (``"Greek, Modern (1453-)"`` ->
    ``"modern greek"``; ``"Bokmål, Norwegian; Norwegian Bokmål"`` -> ``"norwegian bokmål"``)."""
    out = []
    for form in name.split(";"):
        form = " ".join(re.sub(r"\([^)]*\)", " ", form).split())
        if ", " in form:
            head, tail = form.split(", ", 1)
            form = f"{tail} {head}"
        if form and form.lower() not in out:
            out.append(form.lower())
    return out


def _iso_rows() -> list[tuple[str, str, str, str]]:
    """ISO 639-3's languages as ``(ISO 639-1 or "", ISO 639-3, ISO 639-2/B or "", "name; inverted
    name")`` from ``pycountry``: those ISO 639-1 names first, then those ISO 639-2 names (a
    bibliographic code, a macrolanguage), then the rest, each group by code — the order in which a
    shared name or code is given away. ISO's special codes (scope ``S``) are left out."""
    import pycountry

    rows = []
    for lang in pycountry.languages:
        scope = getattr(lang, "scope", "")
        if scope == "S":
            continue
        a2, b3 = getattr(lang, "alpha_2", ""), getattr(lang, "bibliographic", "")
        names = "; ".join(n for n in (lang.name, getattr(lang, "inverted_name", "")) if n)
        rank = 0 if a2 else 1 if b3 or scope == "M" else 2
        rows.append((rank, lang.alpha_3, (a2, lang.alpha_3, b3, names)))
    return [row for *_, row in sorted(rows)]


def _alias_lookup() -> dict[str, str]:
    lookup: dict[str, str] = {}
    for canonical, aliases in _ALIASES.items():
        lookup[canonical] = canonical
        for alias in aliases:
            lookup[alias] = canonical
    return lookup


#: the languages of :data:`_ALIASES`: read without the ISO table
_ALIAS_LOOKUP: dict[str, str] = _alias_lookup()


@functools.lru_cache(maxsize=1)
def _iso_lookup() -> dict[str, str]:
    """Every name and code of :func:`_iso_rows` and :data:`_ALIASES` -> its canonical name."""
    lookup = _alias_lookup()
    rows = _iso_rows()
    for a2, a3, b3, name in rows:
        codes = [c for c in (a2, a3, b3) if c]
        names = _iso_names(name)
        canonical = next((lookup[c] for c in codes if c in lookup), None) or names[0]
        for key in (canonical, *codes, *names):
            lookup.setdefault(key, canonical)  # a name another language holds first stays that language's
    for old, new in _WITHDRAWN_639_1.items():
        lookup.setdefault(old, lookup[new])
    # an inverted name's head alone ("Greek, Modern" -> "greek") when one language has it
    heads = Counter(form.split(", ", 1)[0].lower() for *_, name in rows for form in name.split("; ")
                    if ", " in form)
    for a2, a3, b3, name in rows:
        for form in name.split("; "):
            head = form.split(", ", 1)[0].lower()
            if ", " in form and heads[head] == 1:
                lookup.setdefault(head, lookup[a3])
    return lookup


def normalize_language(value: str) -> str:
    """Return the canonical lower-case English name of a language.

    Accepts names in any case, ISO 639-1/2 codes and region tags (``en-US``, ``pt_BR``).
    Unknown values are returned stripped and lower-cased (never an error); check them with
    :func:`is_known_language`.
    """
    v = value.strip().lower()
    for lookup in (_ALIAS_LOOKUP, None):
        lookup = _iso_lookup() if lookup is None else lookup
        if v in lookup:
            return lookup[v]
        for sep in ("-", "_"):
            if sep in v:
                head = v.split(sep, 1)[0]
                if head in lookup:
                    return lookup[head]
    return v


def is_known_language(value: str) -> bool:
    """True when ``value`` (already normalised or not) names a language in the table."""
    name = normalize_language(value)
    return name in _ALIASES or name in _iso_names_known()


@functools.lru_cache(maxsize=1)
def _iso_names_known() -> frozenset:
    return frozenset(_iso_lookup().values())
