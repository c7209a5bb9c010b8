"""PII detectors for the privacy metric: an offline pattern detector and an optional Presidio one.

A detector turns one text into :class:`PIISpan`\\ s (``label``, character offsets ``[start,
end)`` into the Python string, the matched ``text`` and an optional confidence ``score`` in
[0, 1]). Labels are the canonical class names of gaussia 1.2.0's detectors:

==================  ===========================================================================
``email_address``   ``local@domain.tld`` (local part ≤ 64, labels ≤ 63, 1–8 dots in the domain);
                    an address over one of these bounds is not reported (never a cut piece of it)
``phone_number``    7–15 digits (ITU-T E.164 maximum) in one run of digits, spaces, ``.-()``,
                    optionally led by ``+``; a run with neither ``+`` nor a separator only with
                    exactly 10 digits (a bare run of 7–9 or 11–15 digits is read as another
                    number: an order number, an amount); at most one ``(`` and one ``)``, no
                    ``..`` nor ``--``; ISO dates (``2024-01-31``) are not phones
``credit_card``     13–19 digits (ISO/IEC 7812) passing the Luhn check, written as one run of
                    digits (``4111111111111111``) or in groups of 2–6 digits separated by one
                    space or ``-`` (``4111 1111 1111 1111``); as Presidio's recognizer, whose
                    separators are optional too
``iban_code``       ISO 13616: 2 upper-case letters, 2 check digits, 11–30 upper-case letters and
                    digits (spaces between groups of 4 allowed), passing the ISO 7064 mod-97 check
                    (remainder 1)
``ip_address``      IPv4 dotted quad (each octet 0–255, written without a leading zero: ``01`` is
                    no octet) and IPv6 (validated by :mod:`ipaddress`), an IPv4-mapped one
                    (``::ffff:192.0.2.1``) whole
``us_ssn``          US Social Security number ``AAA-GG-SSSS`` (dashes required): area not 000,
                    666 or 900–999, group not 00, serial not 0000 (SSA rules since 2011)
==================  ===========================================================================

No other government id is detected by the pattern detector (names, street addresses and dates
need a model: use :class:`PresidioDetector`).

Hostile text: every pattern is a single pass with bounded repetitions and no nested
quantifiers, so matching is linear in the text length (a test times a 100 kB adversarial
string); candidates are then checked in Python (checksums, ranges). Text is treated as a
sequence of code points: lone surrogates and other broken Unicode are matched like any other
non-ASCII character (never raise), and only ASCII digits and letters count (``re.ASCII``).

Both detectors read the text every word-reading scorer reads
(:func:`fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC), so
``john\u200b@example.com``, ``4111\u200b1111\u200b1111\u200b1111``, ``123\u00ad-45-6789`` and
full-width digits are found as their visible text reads (trial49c B2: none was). A span's offsets are
offsets into the original text (:class:`~fair_forge_beam.components.text._TextOrigin`): it covers the
characters removed inside it, and its ``text`` is the original's ``text[start:end]``.
"""
from __future__ import annotations

import bisect
import ipaddress
import re
from abc import ABC, abstractmethod
from typing import NamedTuple, Optional

from fair_forge_beam.components.shared_resources import Transient
from fair_forge_beam.components.text import reading_text_origin
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["PIISpan", "PIIDetector", "PatternDetector", "PresidioDetector", "PATTERN_CLASSES", "luhn_valid",
           "iban_valid", "build_detector"]

#: the classes the pattern detector finds
PATTERN_CLASSES = ("credit_card", "email_address", "iban_code", "ip_address", "phone_number", "us_ssn")


class PIISpan(NamedTuple):
    """One PII span: ``label``, ``[start, end)`` character offsets, ``text`` and optional ``score``."""

    label: str
    start: int
    end: int
    text: str
    score: Optional[float] = None


class PIIDetector(ABC):
    """A PII detector (gaussia's ``PIIDetector`` contract).

    Attributes:
        name: identifier in the results.
        domain_fit, regulatory_fit: the detector's fit to the evaluation domain and its regulatory
            framework, each in [0, 1] (gaussia multiplies them into the score; default 1.0).
    """

    name = "detector"

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, domain_fit: float = 1.0, regulatory_fit: float = 1.0):
        for n, v in (("domain_fit", domain_fit), ("regulatory_fit", regulatory_fit)):
            if not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"{n} must be in [0, 1], got {quoted(v)}")
        self.domain_fit, self.regulatory_fit = float(domain_fit), float(regulatory_fit)

    @property
    @abstractmethod
    def supported_classes(self) -> frozenset:
        """Canonical classes the detector can find."""

    @abstractmethod
    def predict(self, text: str) -> list:
        """The :class:`PIISpan`\\ s found in ``text`` (any order, may overlap)."""

    def setup(self) -> None:
        """Loads heavy resources (once per worker)."""


# ------------------------------------------------------------------ checks
def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) check of a string of ASCII digits (ISO/IEC 7812-1 Annex B)."""
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616 IBAN check (spaces ignored): 15–34 characters, 2 letters, 2 digits, then
    alphanumerics; the rearranged number (first four characters moved to the end, letters as
    10–35) is 1 modulo 97 (ISO 7064 MOD 97-10)."""
    s = iban.replace(" ", "").upper()
    if not 15 <= len(s) <= 34 or not s.isascii() or not s.isalnum():
        return False
    if not (s[:2].isalpha() and s[2:4].isdigit()):
        return False
    rem = 0
    for ch in s[4:] + s[:4]:
        v = int(ch, 36)  # '0'-'9' -> 0-9, 'A'-'Z' -> 10-35
        rem = (rem * (100 if v > 9 else 10) + v) % 97
    return rem == 1


# ------------------------------------------------------------------ patterns (bounded, no nested quantifiers)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}", re.ASCII)
# a run of digits with phone/card separators; bounded, and the run is validated afterwards
_NUMBER_RUN = re.compile(r"\+?\(?[0-9][0-9 ().-]{4,30}[0-9]", re.ASCII)
_SSN = re.compile(r"[0-9]{3}-[0-9]{2}-[0-9]{4}", re.ASCII)
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{1,4}){3,8}", re.ASCII)
_IPV4 = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}", re.ASCII)
#: an IPv6 candidate, its last 32 bits possibly a dotted quad (``::ffff:192.0.2.1``, RFC 4291 §2.2)
_IPV6 = re.compile(r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]{0,35}", re.ASCII)
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
#: a card number as written: one run of digits, or groups of 2-6 digits separated by one space or "-"
_CARD_GROUPS = re.compile(r"[0-9]{13,19}|[0-9]{2,6}(?:[ -][0-9]{2,6}){1,5}", re.ASCII)
#: a character of an email's local part, and of a domain label
_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_LABEL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def _alnum_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and text[i].isascii() and text[i].isalnum()


def _ssn_valid(s: str) -> bool:
    area, group, serial = s[:3], s[4:6], s[7:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


class PatternDetector(PIIDetector):
    """Offline regular-expression detector of :data:`PATTERN_CLASSES` (see the module docstring).

    Linear time in ``len(text)``; overlapping candidates are resolved in this order of
    precedence: IBAN, email, SSN, credit card, IPv6, IPv4, phone. Scores are ``None`` (rules,
    not probabilities). Never raises on str input; non-str input gives no spans.
    """

    name = "patterns"

    @property
    def supported_classes(self) -> frozenset:
        return frozenset(PATTERN_CLASSES)

    def predict(self, text: str) -> list:
        if not isinstance(text, str) or not text:
            return []
        return in_original(text, self._find)

    @staticmethod
    def _find(text: str) -> list:
        """The spans of ``text`` as it is (the reading text, :meth:`predict`)."""
        found: list = []
        starts: list = []  # accepted non-overlapping [start, end) ranges, sorted: drop lower-precedence overlaps
        ends: list = []

        def add(label: str, start: int, end: int) -> None:
            i = bisect.bisect_right(starts, start)
            if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
                return
            starts.insert(i, start)
            ends.insert(i, end)
            found.append(PIISpan(label, start, end, text[start:end]))

        for m in _IBAN.finditer(text):
            if _alnum_at(text, m.start() - 1):
                continue
            s, e = m.start(), m.end()
            # the longest prefix ending at a group boundary that passes mod-97 (at most ~9 checks)
            while e > s:
                if not _alnum_at(text, e) and iban_valid(text[s:e]):
                    add("iban_code", s, e)
                    break
                cut = text.rfind(" ", s, e)
                if cut <= s:
                    break
                e = cut
        for m in _EMAIL.finditer(text):
            s, e = m.start(), m.end()
            # the pattern's bounds cut an address longer than the module docstring's: its local part
            # went on before s, or its domain after e (a longer label, or a ninth dot): not an address
            if text[s - 1:s] in _LOCAL_CHARS or text[e:e + 1] in _LABEL_CHARS or \
                    (text[e:e + 1] == "." and text[e + 1:e + 2] in _LABEL_CHARS):
                continue
            while e > s and text[e - 1] in ".-":
                e -= 1
            if "." in text[text.index("@", s, e):e]:
                add("email_address", s, e)
        for m in _SSN.finditer(text):
            s, e = m.span()
            if not _alnum_at(text, s - 1) and not _alnum_at(text, e) and text[s - 1:s] != "-" and text[e:e + 1] != "-" \
                    and _ssn_valid(m.group()):
                add("us_ssn", s, e)
        runs = []
        for m in _NUMBER_RUN.finditer(text):
            s, e = m.span()
            if _alnum_at(text, s - 1) or _alnum_at(text, e):
                continue
            runs.append((s, e))
        for s, e in runs:  # cards first: a 13-19 digit Luhn-valid run with card grouping
            g = _CARD_GROUPS.fullmatch(text, s, e)
            digits = re.sub(r"[^0-9]", "", text[s:e])
            if g and 13 <= len(digits) <= 19 and luhn_valid(digits):
                add("credit_card", s, e)
        for m in _IPV6.finditer(text):  # before IPv4: an IPv4-mapped address is one IPv6 address, not its tail
            s, cand = m.start(), m.group()
            if _alnum_at(text, s - 1):
                continue
            if _alnum_at(text, m.end()):  # runs into a word: only a part before a dot can be an address
                if "." not in cand:
                    continue
                cand = cand[:cand.index(".")]
            cand = _ipv6_prefix(cand)
            if not _ipv6(cand) and "." in cand:
                cand = _ipv6_prefix(cand[:cand.index(".")])
            if cand.count(":") >= 2 and _ipv6(cand):
                add("ip_address", s, s + len(cand))
        for m in _IPV4.finditer(text):
            s, e = m.span()
            if _alnum_at(text, s - 1) or text[s - 1:s] == "." or _alnum_at(text, e) or \
                    (text[e:e + 1] == "." and _alnum_at(text, e + 1)):
                continue
            if all(int(o) <= 255 and (o == "0" or o[0] != "0") for o in m.group().split(".")):
                add("ip_address", s, e)
        for s, e in runs:
            raw = text[s:e]
            digits = re.sub(r"[^0-9]", "", raw)
            if not 7 <= len(digits) <= 15 or _ISO_DATE.fullmatch(raw):
                continue
            if raw.count("(") > 1 or raw.count(")") > 1 or ".." in raw or "--" in raw:
                continue
            if raw[0] == "+" or any(c in raw for c in " .-()") or len(digits) == 10:
                add("phone_number", s, e)
        found.sort(key=lambda sp: (sp.start, sp.end, sp.label))
        return found


def in_original(text: str, find) -> list:
    """``find(reading)``'s :class:`PIISpan`\\ s of ``text``'s reading text
    (:func:`~fair_forge_beam.components.text.reading_text_origin`), as offsets into ``text`` with
    ``text[start:end]`` as their ``text``, sorted by ``(start, end, label)``. ``text`` that is its own
    reading text (every ASCII text) is ``find(text)`` itself."""
    reading, origin = reading_text_origin(text)
    if origin is None:
        return find(text)
    out = []
    for sp in find(reading):
        start, end = origin.span(sp.start, sp.end)
        out.append(sp._replace(start=start, end=end, text=text[start:end]))
    out.sort(key=lambda sp: (sp.start, sp.end, sp.label))
    return out


def _ipv6_prefix(cand: str) -> str:
    """``cand`` without the trailing ``:`` (not ``::``) and ``.`` that keep it from being an IPv6 address."""
    while cand and not _ipv6(cand) and (cand.endswith(":") and not cand.endswith("::") or cand.endswith(".")):
        cand = cand[:-1]
    return cand


def _ipv6(s: str) -> bool:
    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


# ------------------------------------------------------------------ Presidio (optional)
#: Presidio entity type -> canonical class (as gaussia 1.2.0's Presidio adapter)
PRESIDIO_TO_CLASS = {
    "PERSON": "person", "EMAIL_ADDRESS": "email_address", "PHONE_NUMBER": "phone_number", "IBAN_CODE": "iban_code",
    "CREDIT_CARD": "credit_card", "DATE_TIME": "date_time", "IP_ADDRESS": "ip_address", "US_SSN": "us_ssn",
    "LOCATION": "street_address", "NRP": "person",
}


class PresidioDetector(Transient, PIIDetector):
    """Microsoft Presidio's ``AnalyzerEngine`` (``pip install presidio-analyzer`` and a spaCy
    model), imported lazily in :meth:`setup`; entity types mapped by :data:`PRESIDIO_TO_CLASS`
    (others dropped). ``score`` = Presidio's confidence.

    Raises:
        ImportError: (at construction) ``presidio_analyzer`` is not installed — a configuration
            error raised before any pipeline is built.
    """

    name = "presidio"

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, language: str = "en", domain_fit: float = 1.0, regulatory_fit: float = 1.0):
        super().__init__(domain_fit, regulatory_fit)
        import importlib.util

        if importlib.util.find_spec("presidio_analyzer") is None:
            raise ImportError("the presidio detector needs presidio_analyzer: pip install presidio-analyzer "
                              "(and a spaCy model such as en_core_web_lg), or use the 'patterns' detector")
        self.language = language
        self._engine = None

    _transient = ("_engine",)

    def setup(self) -> None:
        if self._engine is None:
            from presidio_analyzer import AnalyzerEngine

            self._engine = AnalyzerEngine(supported_languages=[self.language])

    @property
    def supported_classes(self) -> frozenset:
        self.setup()
        ents = self._engine.get_supported_entities(language=self.language)
        return frozenset(PRESIDIO_TO_CLASS[e] for e in ents if e in PRESIDIO_TO_CLASS)

    def predict(self, text: str) -> list:
        self.setup()
        return in_original(text, self._analyze)

    def _analyze(self, text: str) -> list:
        out = []
        for r in self._engine.analyze(text=text, language=self.language):
            label = PRESIDIO_TO_CLASS.get(r.entity_type)
            if label is not None and r.end > r.start:
                out.append(PIISpan(label, int(r.start), int(r.end), text[r.start:r.end], float(r.score)))
        return out


def build_detector(kind: str = "patterns", domain_fit: float = 1.0, regulatory_fit: float = 1.0) -> PIIDetector:
    """``"patterns"`` → :class:`PatternDetector`, ``"presidio"`` → :class:`PresidioDetector`.

    Raises ``ValueError`` for another kind, ``ImportError`` for presidio when not installed."""
    if kind == "patterns":
        return PatternDetector(domain_fit, regulatory_fit)
    if kind == "presidio":
        return PresidioDetector(domain_fit=domain_fit, regulatory_fit=regulatory_fit)
    raise ValueError(f"unknown PII detector {quoted(kind)}; expected 'patterns' or 'presidio'")
