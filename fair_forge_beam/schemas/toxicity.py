"""Toxicity result schemas (spec §6.1), per interaction, per session and per slice.

Upstream emits one pooled ``ToxicityMetric`` labelled with the first assistant (spec §17 item
5); here every slice (``overall``, ``assistant_id=<id>``, ``language=<name>``) gets its own
:class:`ToxicitySliceMetric` with the upstream ``group_profiling`` block.
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate, InteractionMetric

__all__ = [
    "ToxicityMetric",
    "ToxicitySessionMetric",
    "ToxicitySliceMetric",
    "GroupProfiling",
    "FrequentistGroupProfiling",
    "BayesianGroupProfiling",
    "IntervalSummary",
    "GroupEstimates",
]


class ToxicityMetric(InteractionMetric):
    """One scored answer.

    * ``total_words`` / ``toxic_words``: ``\\w+`` tokens of the lower-cased answer and the tokens
      covered by lexicon matches; ``toxic_ratio = toxic_words / total_words`` (0 for no token);
      ``is_toxic``: ``toxic_ratio > toxicity_threshold`` (strict, spec §6.1).
    * ``categories``: lexicon category → number of matches (HurtLex codes such as ``ps``, ``om``).
    * ``matched``: the matched lemmas (distinct, sorted).
    * ``groups``: the declared groups detected in the answer; ``group_scores``: the extractor's
      score of each detected group (cosine similarity in [−1, 1], or 1.0 for a keyword match).
    * ``sentiment``: the analyzer's score in [−1, 1]; ``None`` without an analyzer, and (by default)
      for answers that mention no group, whose sentiment ASB does not use.
    """

    total_words: int
    toxic_words: int
    toxic_ratio: float
    is_toxic: bool
    categories: dict[str, int] = Field(default_factory=dict)
    matched: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    group_scores: dict[str, float] = Field(default_factory=dict)
    sentiment: Optional[float] = None


class ToxicitySessionMetric(BaseMetric):
    """One session: ``toxic_rate`` = share of its answers flagged toxic (Bayesian: Beta posterior,
    exact mean and quantiles), ``group_mentions`` = answers mentioning each detected group."""

    model_config = ConfigDict(extra="ignore")

    language: str
    n_interactions: int
    n_toxic: int
    toxic_rate: Estimate
    group_mentions: dict[str, int] = Field(default_factory=dict)


class IntervalSummary(BaseModel):
    """``{mean, ci_low, ci_high}`` as in upstream's ``bayesian.summary`` (``None`` = undefined)."""

    model_config = ConfigDict(extra="forbid")

    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None


class FrequentistGroupProfiling(BaseModel):
    """Point values (``None`` when undefined, e.g. no group detected)."""

    model_config = ConfigDict(extra="forbid")

    DR: Optional[float] = None
    ASB: Optional[float] = None
    DTO: Optional[float] = None
    DIDT: Optional[float] = None


class GroupEstimates(BaseModel):
    """Per-group estimates with intervals: ``p`` share of group mentions, ``T`` toxicity rate,
    ``S`` mean sentiment (Bayesian: Dirichlet marginal, Beta posterior, Bayesian bootstrap)."""

    model_config = ConfigDict(extra="forbid")

    p: Estimate
    T: Estimate
    S: Estimate


class BayesianGroupProfiling(BaseModel):
    """Upstream's ``bayesian`` block: priors, draws, level, reference and ``summary``."""

    model_config = ConfigDict(extra="forbid")

    priors: float
    mc_samples: int
    ci_level: float
    q_i: Optional[dict[str, float]] = None
    summary: dict[str, IntervalSummary]


class GroupProfiling(BaseModel):
    """Upstream ``GroupProfiling`` (spec §6.1) plus ``status``, ``S_i``, ``group_estimates``, ``notes``.

    ``p_i``, ``q_i``, ``T_i`` are filled in both modes (Bayesian: posterior means); ``T_i`` and
    ``S_i`` are ``None`` for a group never detected. ``status``: ``"ok"``,
    ``"no_group_detected"`` (DR/DTO/ASB/DIDT undefined) or ``"empty"``.
    """

    model_config = ConfigDict(extra="forbid")

    mode: str
    status: str
    weights: dict[str, float]
    groups: list[str]
    N_i: dict[str, int]
    K_i: dict[str, int]
    p_i: dict[str, Optional[float]]
    q_i: dict[str, float]
    T_i: dict[str, Optional[float]]
    S_i: dict[str, Optional[float]]
    frequentist: Optional[FrequentistGroupProfiling] = None
    bayesian: Optional[BayesianGroupProfiling] = None
    toxicity_threshold: float
    group_estimates: dict[str, GroupEstimates] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class ToxicitySliceMetric(BaseModel):
    """One slice: counts, the toxic-answer rate, lexicon categories, ``group_profiling`` and (for
    ``overall``, when clustering ran) ``cluster_profiling`` ``{cluster label: toxic-word ratio}``
    (label ``"-1"`` = noise) with the clustering run's details in ``clustering``.

    ``assistant_id`` is set on ``assistant_id=<id>`` slices only (upstream pooled all assistants
    under the first one's id).
    """

    model_config = ConfigDict(extra="ignore")

    slice: str
    assistant_id: Optional[str] = None
    mode: str
    n_interactions: int
    n_sessions: int
    n_toxic: int
    toxic_rate: Estimate
    toxic_words: int
    total_words: int
    categories: dict[str, int] = Field(default_factory=dict)
    group_profiling: GroupProfiling
    cluster_profiling: Optional[dict[str, float]] = None
    clustering: Optional[dict] = None
    lexicon: str
    lexicon_licence: str
    group_extractor: dict
    sentiment_analyzer: Optional[str] = None
