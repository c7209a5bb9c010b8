"""Every scorer that reads an answer's words reads the same text (trial49c B2): invisible characters
removed and NFKC-folded, case kept (:func:`fair_forge_beam.components.text.reading_text`).

The lexicon tokeniser read ``"wo\\u200bman"`` as ``woman`` while the keyword group extractor read
``wo`` and ``man`` (an answer about a woman counted for the group ``men``), VADER scored
``"I ha\\u200bte you"`` 0.0, profanity-check scored full-width insults 0.036 and the PII patterns
found nothing in ``john\\u200b@example.com``. One test per scorer, each failing on that code."""
from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fair_forge_beam.components.constraints import KeywordConstraint
from fair_forge_beam.components.embedder import HashingEmbedder
from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords, keyword_tokens
from fair_forge_beam.components.pii import PIISpan, PresidioDetector, build_detector
from fair_forge_beam.components.sentiment import VaderSentimentAnalyzer
from fair_forge_beam.components.text import normalize_text, reading_text, reading_text_origin
from fair_forge_beam.components.toxicity_classifier import ProfanityCheckClassifier

FULL_WIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


def hidden(word: str) -> list:
    """``word`` as it shows, spelled five other ways: U+200B, U+034F, U+2060 or a soft hyphen inside
    it, or in full-width letters."""
    mid = len(word) // 2
    return [word[:mid] + ch + word[mid:] for ch in ("\u200b", "\u034f", "\u2060", "\u00ad")] + [word.translate(FULL_WIDTH)]


def test_reading_text_keeps_case_and_ascii_as_it_is():
    assert reading_text("I ha\u200bte \uff28\uff21\uff34\uff25 you\u2026") == "I hate HATE you..."
    assert reading_text("cafe\u0301 don\u2019t") == "caf\u00e9 don\u2019t"  # composed; apostrophes are the tokeniser's
    text = "plain ASCII, \x00 and all"
    assert reading_text(text) is text


@given(st.text(alphabet=st.sampled_from(list("aé e'\u2019\u02bc\u0301\u0338\u200b\u00ad\u034f\ufe0f\uff21\uff41\ufb01\u2460"
                                             "\u1100\u1161\u11a8\uac00\u2026"))))
def test_the_lexicon_tokeniser_reads_the_reading_text(text):
    assert normalize_text(text) == reading_text(text).translate({0x2019: "'", 0x02BC: "'", 0x2018: "'"}).lower()


ORIGIN_ALPHABET = list("ab1@.- ") + ["\u200b", "\u00ad", "\u034f", "\u2060", "\u0301", "\u0327", "\u05b8", "\u0345",
                                     "\uff21", "\uff11", "\ufb01", "\u2474", "\u3392", "\u1100", "\u1161", "\u11a8",
                                     "\uac00", "\u00e9", "\u1e9b", "\ufb2c"]


@settings(max_examples=400)
@given(st.text(alphabet=st.sampled_from(ORIGIN_ALPHABET), max_size=14))
def test_offsets_of_the_reading_text_map_back_to_the_original(text):
    reading, origin = reading_text_origin(text)
    assert reading == reading_text(text)
    if origin is None:
        assert reading == text
        return
    for s in range(len(reading)):
        for e in range(s + 1, len(reading) + 1):
            a, b = origin.span(s, e)
            assert 0 <= a < b <= len(text)
            assert reading[s:e] in reading_text(text[a:b])  # the original span reads as (at least) what was found


STABLE = list("ab1@. \u00e9\u00df\u4e2d\u6587\u0416\u3042")  # each its own reading text, none joins a neighbour


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(STABLE), max_size=8), st.text(alphabet=st.sampled_from(ORIGIN_ALPHABET), max_size=10))
def test_offsets_are_exact_outside_the_changed_characters(prefix, rest):
    """Before the first changed character offsets are the same; after it they shift by the prefix
    (trial: a run of Chinese before a hidden character mapped every span to the text's start)."""
    prefix, rest = prefix + " ", "x" + rest  # no mark of the rest joins the prefix's last character
    reading, origin = reading_text_origin(prefix + rest)
    alone, alone_origin = reading_text_origin(rest)
    assert reading == prefix + alone
    if origin is None:
        return
    n = len(prefix)
    for s in range(n):
        for e in range(s + 1, n + 1):
            assert origin.span(s, e) == (s, e)
    for s in range(len(alone)):
        for e in range(s + 1, len(alone) + 1):
            a, b = alone_origin.span(s, e) if alone_origin else (s, e)
            assert origin.span(n + s, n + e) == (n + a, n + b)


# ---------------------------------------------------------------- the keyword group extractor
@pytest.mark.parametrize("word", hidden("woman"))
def test_group_extractor_reads_hidden_words(word):
    assert keyword_tokens(word) == ["woman"]
    ex = KeywordGroupExtractor(default_group_keywords())
    found = {g for g, d in ex.detect_one(f"the {word} is an idiot").items() if d.present}
    assert found == {g for g, d in ex.detect_one("the woman is an idiot").items() if d.present} == {"women"}
    assert KeywordGroupExtractor({"w": [word]}).detect_one("a woman").get("w").present  # keywords read alike


# ---------------------------------------------------------------- VADER (Toxicity's ASB and DIDT input)
@pytest.mark.parametrize("word", hidden("hate")[:4])
def test_vader_reads_hidden_words(word):
    vader = VaderSentimentAnalyzer()
    plain = vader.infer("I hate you").score
    assert plain == pytest.approx(-0.5719)
    assert vader.infer(f"I {word} you").score == plain


def test_vader_reads_full_width_capitals_as_capitals():
    vader = VaderSentimentAnalyzer()
    shouted = vader.infer("I HATE you").score
    assert shouted < vader.infer("I hate you").score  # VADER intensifies capitals: case is kept
    assert vader.infer("I \uff28\uff21\uff34\uff25 you").score == shouted


# ---------------------------------------------------------------- profanity-check (the default toxicity scorer)
def test_classifier_reads_hidden_words():
    clf = ProfanityCheckClassifier()
    plain = "you are a fucking idiot"
    variants = ["you are a fu\u200bcking idi\u200bot", "you are a fuc\u034fking idiot",
                "you are a f\u00aducking id\u2060iot", plain.translate(FULL_WIDTH)]
    probs = clf.probabilities([plain, *variants])
    assert probs[0] > 0.99 and probs[1:] == [probs[0]] * len(variants)


# ---------------------------------------------------------------- PII detectors
@pytest.mark.parametrize("text, label, found", [
    ("write to john\u200b@example.com today", "email_address", "john@example.com"),
    ("write to \uff4a\uff4f\uff48\uff4e@example.com today", "email_address", "john@example.com"),
    ("card 4111\u200b 1111 1111\u2060 1111 ok", "credit_card", "4111 1111 1111 1111"),
    ("card \uff14\uff11\uff11\uff11-1111-1111-1111 ok", "credit_card", "4111-1111-1111-1111"),
    ("ssn 123\u00ad-45-6789.", "us_ssn", "123-45-6789"),
    ("ssn 123-4\u200b5-67\ufeff89.", "us_ssn", "123-45-6789"),
    ("ip 10.0\u200b.0.1 here", "ip_address", "10.0.0.1"),
])
def test_patterns_read_hidden_characters_and_keep_original_offsets(text, label, found):
    spans = build_detector("patterns").predict(text)
    assert [(s.label, reading_text(s.text)) for s in spans] == [(label, found)]
    s = spans[0]
    assert s.text == text[s.start:s.end]  # offsets into the original text
    assert not s.text[0].isspace() and not s.text[-1].isspace()
    assert unicodedata.category(s.text[0]) != "Cf" and unicodedata.category(s.text[-1]) != "Cf"


@pytest.mark.parametrize("before", ["", "caf\u00e9 ", "\u4e2d\u6587\u5b57 " * 3, "\uff21 ", "e\u0301 "])
def test_pattern_offsets_after_other_text(before):
    text = f"{before}mail john\u200b@example.com now"
    at = text.index("john")
    assert build_detector("patterns").predict(text) == [PIISpan("email_address", at, at + 17, "john\u200b@example.com")]


def test_patterns_spans_cover_removed_characters_inside_only():
    text = "\u200bjohn\u200b@example.com\u200b and 123-45-6789"
    spans = build_detector("patterns").predict(text)
    assert [(s.label, s.start, s.end, s.text) for s in spans] == [
        ("email_address", 1, 18, "john\u200b@example.com"), ("us_ssn", 24, 35, "123-45-6789")]
    assert build_detector("patterns").predict("write to john@example.com") == [
        PIISpan("email_address", 9, 25, "john@example.com")]


class _Result:
    def __init__(self, entity_type, start, end, score):
        self.entity_type, self.start, self.end, self.score = entity_type, start, end, score


class _FakeEngine:
    """Presidio's ``AnalyzerEngine.analyze``: finds ``john@example.com`` where it is in the text it is given."""

    def analyze(self, text, language):
        at = text.find("john@example.com")
        return [] if at < 0 else [_Result("EMAIL_ADDRESS", at, at + 16, 0.9)]


def test_presidio_reads_the_reading_text_and_keeps_original_offsets():
    det = PresidioDetector.__new__(PresidioDetector)  # presidio_analyzer is not installed here
    det.language, det.domain_fit, det.regulatory_fit, det._engine = "en", 1.0, 1.0, _FakeEngine()
    text = "mail \uff4aohn\u200b@example.com now"
    assert det.predict(text) == [PIISpan("email_address", 5, 22, "\uff4aohn\u200b@example.com", 0.9)]


# ---------------------------------------------------------------- the hashing embedder and the keyword constraint
def test_hashing_embedder_reads_hidden_words():
    emb = HashingEmbedder(dim=32)
    rows = emb.encode(["the woman", *(f"the {w}" for w in hidden("woman"))])
    assert all(np.array_equal(rows[0], r) for r in rows[1:])


@pytest.mark.parametrize("word", hidden("refund"))
def test_keyword_constraint_reads_hidden_words(word):
    assert KeywordConstraint("refund").check(f"you get a {word}")
    assert KeywordConstraint("refund", case_sensitive=True).check(f"you get a {word}")
    assert KeywordConstraint(word).check("you get a refund")
