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
