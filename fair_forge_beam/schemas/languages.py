"""Language names: one canonical value per language.

The original stores full lower-case English names (``"english"``) and fails with a
``KeyError`` on ISO codes (spec §17 item 9). Here ``"en"``, ``"EN"``, ``"English"``,
``"en-US"``, ``"eng"`` and ``"english"`` all normalise to ``"english"``. A language that is not
in the table is kept (stripped, lower-cased) and reported by :func:`is_known_language`, so the
caller can warn and count it instead of crashing.
"""
from __future__ import annotations

# canonical name -> ISO 639-1, ISO 639-2/3 codes and native spellings
_ALIASES: dict[str, tuple[str, ...]] = {
    "english": ("en", "eng", "inglés", "ingles"),
    "spanish": ("es", "spa", "español", "espanol", "castellano"),
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
    "catalan": ("ca", "cat", "català"),
}

_LOOKUP: dict[str, str] = {}
for _canonical, _aliases in _ALIASES.items():
    _LOOKUP[_canonical] = _canonical
    for _alias in _aliases:
        _LOOKUP[_alias] = _canonical

KNOWN_LANGUAGES: frozenset[str] = frozenset(_ALIASES)


def normalize_language(value: str) -> str:
    """Return the canonical lower-case English name of a language.

    Accepts names in any case, ISO 639-1/2 codes and region tags (``en-US``, ``pt_BR``).
    Unknown values are returned stripped and lower-cased (never an error); check them with
    :func:`is_known_language`.
    """
    v = value.strip().lower()
    if v in _LOOKUP:
        return _LOOKUP[v]
    for sep in ("-", "_"):
        if sep in v:
            head = v.split(sep, 1)[0]
            if head in _LOOKUP:
                return _LOOKUP[head]
    return v


def is_known_language(value: str) -> bool:
    """True when ``value`` (already normalised or not) names a language in the table."""
    return normalize_language(value) in KNOWN_LANGUAGES
