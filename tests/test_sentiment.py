"""Sentiment analyzers (spec §6.1 ASB, SentimentScore schema)."""
from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from fair_forge_beam.components.sentiment import (
    VADER_THRESHOLD,
    SentimentAnalyzer,
    SentimentScore,
    VaderSentimentAnalyzer,
)

vader = pytest.importorskip("vaderSentiment.vaderSentiment", reason="needs vaderSentiment (pip install vaderSentiment==3.3.2)")


def test_sentiment_score_ranges():
    assert SentimentScore(score=-1.0).confidence is None
    assert SentimentScore(score=0.3, confidence=1.0, label="positive").label == "positive"
    for bad in (dict(score=1.01), dict(score=-1.5), dict(score=float("nan")), dict(score=float("inf")),
                dict(score=0.0, confidence=1.2), dict(score=0.0, confidence=-0.1), dict(score=0.0, extra=1)):
        with pytest.raises(ValidationError):
            SentimentScore(**bad)
    s = SentimentScore(score=0.5)
    with pytest.raises(ValidationError):
        s.score = 2.0  # frozen


def test_vader_scores_and_labels():
    va = VaderSentimentAnalyzer()
    assert va.name == "vader" and VADER_THRESHOLD == 0.05
    pos = va.infer("I love this, it is wonderful and very helpful!")
    neg = va.infer("This is terrible, I hate it and it is useless.")
    neu = va.infer("The meeting is at 10 am in room 4.")
    assert pos.score > 0.5 and pos.label == "positive"
    assert neg.score < -0.5 and neg.label == "negative"
    assert neu.score == 0.0 and neu.label == "neutral"
    assert pos.confidence is None
    # exactly VADER's compound score
    text = "Not bad at all, but the ending was REALLY disappointing!!"
    assert va.infer(text).score == vader.SentimentIntensityAnalyzer().polarity_scores(text)["compound"]


def test_vader_edge_cases_and_types():
    va = VaderSentimentAnalyzer()
    assert va.infer("") == SentimentScore(score=0.0, label="neutral")
    assert va.infer("   \n").score == 0.0
    assert va.label_of(0.05) == "positive" and va.label_of(-0.05) == "negative" and va.label_of(0.0499) == "neutral"
    assert VaderSentimentAnalyzer(threshold=0.5).label_of(0.3) == "neutral"
    with pytest.raises(TypeError):
        va.infer(None)
    with pytest.raises(TypeError):
        va.infer_batch("a string is not a batch")
    with pytest.raises(TypeError):
        va.infer_batch(["ok", 1])
    with pytest.raises(ValueError):
        VaderSentimentAnalyzer(threshold=1.0)
    texts = ["great!", "", "awful."]
    assert va.infer_batch(texts) == [va.infer(t) for t in texts]
    assert va.infer_batch([]) == []


def test_vader_loads_once_and_pickles_small():
    va = VaderSentimentAnalyzer()
    assert va._analyzer is None  # lazy
    va.setup()
    first = va._analyzer
    va.setup()
    assert va._analyzer is first  # idempotent
    blob = pickle.dumps(va)
    assert len(blob) < 300  # the lexicon is not pickled
    clone = pickle.loads(blob)
    assert clone._analyzer is None
    assert clone.infer("good job") == va.infer("good job")


def test_custom_analyzer_default_batch():
    class Length(SentimentAnalyzer):
        name = "length"

        def infer(self, text):
            return SentimentScore(score=min(1.0, len(text) / 10))

    a = Length()
    a.setup()
    assert [s.score for s in a.infer_batch(["abc", "a" * 20])] == [0.3, 1.0]


# --------------------------------------------------------------------------- VADER's fast path
_VADER_WORDS = (
    "no not never without doubt so this kind of sort least at very but good great bad awful hate love "
    "isn't don't can't ain't nor or the a it is was HATE GOOD really extremely barely kinda "
    "bad ass kiss of death the bomb yeah right cut the mustard hand to mouth back handed "
    ":) :( :-D <3 ! ? !! ??? . , 😀 😡 friend enemy safe danger happy sad "
    "kiss death die to for just enough bus stop beating heart shit bomb yeah right".split()
)


def _stock_compound(text: str) -> float:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    global _STOCK
    try:
        _STOCK
    except NameError:
        _STOCK = SentimentIntensityAnalyzer()
    return min(1.0, max(-1.0, float(_STOCK.polarity_scores(text)["compound"])))


def test_vader_fast_path_matches_stock_vader_on_crafted_texts():
    """The analyzer's VADER gives bit-identical compounds to vaderSentiment's own analyzer: on
    VADER's rules for negation ("never so", "without doubt", n't, "no"), idioms, boosters,
    "kind of", "least", "but", capitals, punctuation and emoji, at every position of the text
    (start, middle, end: the window edges)."""
    va = VaderSentimentAnalyzer()
    texts = [
        "I do not hate it", "It is never so good", "without doubt this is great", "No good at all",
        "He is not bad ass", "the kiss of death", "yeah right, great", "kind of good but really awful",
        "at least it works", "very least good", "least good", "GOOD job, it is bad", "I can't say it isn't good!!",
        "no, not never without doubt so this good", "😀 great 😡 awful", "It cut the mustard. Hand to mouth, sadly",
        "good", "not good", "never good", "a b c good", "so this never good bad", "nor or no good",
        "It was back handed but kinda great???",
        # idioms and booster bigrams one, two and three words before the sentiment word
        "kiss of death good", "a kind of x good", "sort of the good", "just enough a great", "yeah right x good",
        "the bomb a good", "to die for good", "x kind of good", "good kind of", "we kind of a good", "bad ass good x",
        "beating heart happy", "good bus stop", "hate the shit", "love kiss of death", "never kind of x good",
    ]
    for t in texts:
        assert va.infer(t).score == _stock_compound(t), t


def test_vader_fast_path_matches_stock_vader_on_random_texts():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings, strategies as st

    va = VaderSentimentAnalyzer()

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(_VADER_WORDS), min_size=0, max_size=40))
    def check(words):
        t = " ".join(words)
        if t.strip():
            assert va.infer(t).score == _stock_compound(t)

    check()


def test_vader_cost_is_linear_in_text_length(monkeypatch):
    """vaderSentiment 3.3.2 lower-cases the whole text again in its negation and idiom checks,
    once per sentiment word (quadratic in the length); the analyzer hands those checks only the
    words they read (at most 6 around the sentiment word), so a long text costs linear time."""
    import vaderSentiment.vaderSentiment as vs

    base = vs.SentimentIntensityAnalyzer
    seen = []
    for name in ("_negation_check", "_special_idioms_check"):
        real = getattr(base, name)

        def spy(valence, words, *rest, _real=real):
            seen.append(len(words))
            return _real(valence, words, *rest)

        monkeypatch.setattr(base, name, staticmethod(spy))
    va = VaderSentimentAnalyzer()
    text = " ".join(["not", "so", "good", "friend", "awful", "very"] * 50)
    va.infer(text)
    assert seen and max(seen) <= 6, max(seen)
