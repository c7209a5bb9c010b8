"""Sentiment analyzers for the Toxicity metric's ASB component (spec §6.1 "ASB", support schema
``SentimentScore``).

Pieces:

* :class:`SentimentScore` — ``score`` in [−1, 1] (negative … positive), optional ``confidence``
  in [0, 1], optional ``label``.
* :class:`SentimentAnalyzer` — the interface: ``setup()`` once per worker, ``infer(text)``,
  ``infer_batch(texts)``.
* :class:`VaderSentimentAnalyzer` — the default: VADER (Hutto & Gilbert, "VADER: A Parsimonious
  Rule-based Model for Sentiment Analysis of Social Media Text", ICWSM 2014) from the PyPI
  package ``vaderSentiment`` 3.3.2 (MIT licence, lexicon shipped in the package, fully offline).
  English only: words of other languages are mostly unknown to its lexicon and score near 0.

``vaderSentiment`` is imported in :meth:`VaderSentimentAnalyzer.setup` (lazily), never at module
import.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.embedder import check_texts
from fair_forge_beam.components.shared_resources import Transient
from fair_forge_beam.components.text import reading_text
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "SentimentScore",
    "SentimentAnalyzer",
    "VaderSentimentAnalyzer",
    "VADER_THRESHOLD",
]

#: VADER's conventional cut-off on the compound score (vaderSentiment README, "About the
#: scoring"): positive when compound ≥ 0.05, negative when compound ≤ −0.05, neutral otherwise.
VADER_THRESHOLD = 0.05


class SentimentScore(BaseModel):
    """Sentiment of one text.

    Attributes:
        score: polarity in [−1, 1] (−1 most negative, 0 neutral, +1 most positive); finite.
        confidence: optional confidence of the analyzer in [0, 1] (``None`` when the analyzer
            has no calibrated confidence, as VADER).
        label: optional class name (VADER: ``"positive"``, ``"negative"`` or ``"neutral"``).

    Raises:
        pydantic.ValidationError: a value outside its range, or NaN/±inf.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float = Field(ge=-1.0, le=1.0, allow_inf_nan=False)
    confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    label: Optional[str] = None


def _check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return text


class SentimentAnalyzer(ABC):
    """Scores the sentiment of texts.

    Contract: ``setup()`` loads resources once per worker (idempotent; ``infer`` must also work
    without it, loading lazily); ``infer(text)`` returns a :class:`SentimentScore` for one
    ``str`` (``TypeError`` otherwise); ``infer_batch(texts)`` returns one score per text, in
    order (``TypeError`` unless a list/tuple of ``str``). Instances must pickle small (drop
    loaded resources in ``__getstate__``): the metric ships them to every worker.
    """

    name: str = "custom"

    def setup(self) -> None:
        """Load resources (default: nothing)."""

    @abstractmethod
    def infer(self, text: str) -> SentimentScore:
        """Sentiment of one text."""

    def infer_batch(self, texts: Sequence[str]) -> list[SentimentScore]:
        """Sentiment of each text, in order (default: ``infer`` per text)."""
        return [self.infer(t) for t in check_texts(texts)]


def _windowed_vader(base: type) -> type:
    """``base`` (vaderSentiment's ``SentimentIntensityAnalyzer``) with its two per-word checks
    handed only the words they read.

    For every sentiment word at position ``i`` VADER 3.3.2 calls ``_negation_check(valence,
    words, start_i, i)`` (only when ``i > start_i``; it then reads positions ``i-3 … i``, never below 0) and
    ``_special_idioms_check(valence, words, i)`` (only when ``i > 2``; it reads ``i-3 … i+2``),
    and each first lower-cases the *whole* word list: quadratic in the text length. Here they
    get the slice ``words[max(0, i-3) : i+1]`` / ``words[i-3 : i+3]`` with ``i`` shifted accordingly: the same
    words at the same relative positions, and the same "is there a word after ``i``" length
    tests, so VADER's own code computes the same valence (tests compare against the stock
    analyzer). Calls VADER never makes (``i <= start_i``; idioms at ``i < 3``), where a negative
    position would wrap around the list, go to the original with the whole list.
    """

    class WindowedSentimentIntensityAnalyzer(base):
        @staticmethod
        def _negation_check(valence, words_and_emoticons, start_i, i):
            if i <= start_i:
                return base._negation_check(valence, words_and_emoticons, start_i, i)
            lo = max(0, i - 3)
            return base._negation_check(valence, words_and_emoticons[lo:i + 1], start_i, i - lo)

        @staticmethod
        def _special_idioms_check(valence, words_and_emoticons, i):
            if i < 3:
                return base._special_idioms_check(valence, words_and_emoticons, i)
            return base._special_idioms_check(valence, words_and_emoticons[i - 3:i + 3], 3)

    return WindowedSentimentIntensityAnalyzer


class VaderSentimentAnalyzer(Transient, SentimentAnalyzer):
    """VADER compound polarity (vaderSentiment 3.3.2, MIT).

    ``score`` = VADER's ``compound``: the sum of the valences of the known words (after VADER's
    rules for negation, intensifiers, "but", capitals and punctuation) mapped into (−1, 1) by
    ``x / sqrt(x² + 15)`` (Hutto & Gilbert 2014; the package's ``normalize``). ``label`` =
    ``"positive"`` if score ≥ ``threshold``, ``"negative"`` if score ≤ −``threshold``, else
    ``"neutral"`` (default ``threshold`` 0.05: the cut-off the vaderSentiment README recommends).
    ``confidence`` is ``None`` (VADER has no calibrated confidence). A text that is empty or
    only whitespace scores ``0.0`` (neutral) without calling VADER.

    VADER reads the text every word-reading scorer reads
    (:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC,
    case kept — VADER intensifies ``"HATE"``): ``"I ha\\u200bte you"`` and ``"I ＨＡＴＥ you"`` score
    as ``"I hate you"`` and ``"I HATE you"`` (trial49c B2: 0.0, neutral).

    VADER's negation and idiom checks are given only the words around the scored word (see
    :func:`_windowed_vader`): the same compound, bit for bit, in time linear in the text length
    (vaderSentiment 3.3.2's own analyzer is quadratic).

    The analyzer (lexicon dictionaries, ~7.5k entries) is built once per process in ``setup``
    (or on first ``infer``) and dropped when pickled. It is shared by every instance in the
    process (:func:`~fair_forge_beam.components.shared_resources.acquire`, key ``("vader",)``;
    the threshold only labels scores): ``polarity_scores`` only reads the analyzer's
    dictionaries, so concurrent use from several threads is safe.

    Args:
        threshold: label cut-off in [0, 1).

    Raises:
        ValueError: ``threshold`` outside [0, 1).
        RuntimeError (at ``setup``): ``vaderSentiment`` is not installed.
    """

    name = "vader"

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, threshold: float = VADER_THRESHOLD):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (0.0 <= threshold < 1.0):
            raise ValueError(f"threshold must be a number in [0, 1), got {quoted(threshold)}")
        self.threshold = float(threshold)
        self._analyzer = None

    _transient = ("_analyzer",)

    def __setstate__(self, state):
        self.__dict__.update(state)

    def setup(self) -> None:
        if self._analyzer is None:
            try:
                from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
            except ImportError as exc:
                from fair_forge_beam.plain import plain_reason

                raise RuntimeError(f"VaderSentimentAnalyzer needs the package vaderSentiment: pip install vaderSentiment==3.3.2 ({plain_reason(exc)})") from exc
            from fair_forge_beam.components.shared_resources import acquire

            self._analyzer = acquire(("vader", "windowed"), lambda: _windowed_vader(SentimentIntensityAnalyzer)())

    def label_of(self, score: float) -> str:
        """``"positive"`` / ``"negative"`` / ``"neutral"`` for a compound score."""
        if score >= self.threshold:
            return "positive"
        if score <= -self.threshold:
            return "negative"
        return "neutral"

    def infer(self, text: str) -> SentimentScore:
        text = _check_text(text)
        if is_blank(text):
            return SentimentScore(score=0.0, label="neutral")
        if self._analyzer is None:
            self.setup()
        compound = float(self._analyzer.polarity_scores(reading_text(text))["compound"])
        if not math.isfinite(compound):  # pragma: no cover - VADER's normalisation is bounded
            compound = 0.0
        compound = min(1.0, max(-1.0, compound))
        return SentimentScore(score=compound, label=self.label_of(compound))
