"""Humanity result schemas (spec §6.5, plus session and slice aggregates)."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict

from fair_forge_beam.schemas.common import BaseMetric, Estimate, InteractionMetric

__all__ = ["HumanityMetric", "HumanitySessionMetric", "HumanitySliceMetric"]


class HumanityMetric(InteractionMetric):
    """One interaction (upstream ``HumanityMetric`` fields + ``element_id``, ``turn_index``).

    * ``humanity_assistant_emotional_entropy``: Shannon entropy, in **bits**, of the answer's
      emotion distribution over the 8 NRC emotions; range [0, 3]; 0 when no lexicon word.
    * ``humanity_ground_truth_spearman``: Spearman's ρ between the emotion distributions of the
      reference answer and of the answer (average ranks), rounded to 3 decimals; range [−1, 1];
      0 when either distribution has zero variance (e.g. no lexicon word, or no reference). An
      interaction whose reference has no emotion profile has no reference for the session and
      slice means of Spearman (they leave it out).
    * ``humanity_has_reference``: whether the reference answer has an emotion profile (its 8
      counts not all equal); the session and slice means of Spearman rest on these rows only.
    * ``humanity_assistant_<emotion>``: the answer's emotion proportions (sum 1, or all 0).
    """

    humanity_assistant_emotional_entropy: float
    humanity_ground_truth_spearman: float
    humanity_has_reference: bool
    humanity_assistant_anger: float
    humanity_assistant_anticipation: float
    humanity_assistant_disgust: float
    humanity_assistant_fear: float
    humanity_assistant_joy: float
    humanity_assistant_sadness: float
    humanity_assistant_surprise: float
    humanity_assistant_trust: float


class HumanitySessionMetric(BaseMetric):
    """Session aggregate: weighted means over the session's interactions (spec §3.4 weights).

    Frequentist: point values. Bayesian: Bayesian bootstrap over the session's interactions
    (mean and credible interval).

    ``n_with_reference``: interactions whose reference answer has an emotion profile (its 8
    counts not all equal); ``mean_spearman`` rests on those only and has ``mean = None`` (no
    estimate) when there are none. ``None``: a record of a version before it was counted.
    """

    model_config = ConfigDict(extra="ignore")

    language: str
    n_interactions: int
    n_with_reference: Optional[int] = None
    mean_entropy: Estimate
    mean_spearman: Estimate


class HumanitySliceMetric(BaseModel):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``).

    ``mean_entropy`` / ``mean_spearman``: mean over the slice's interactions, each session
    contributing its interaction count distributed by its resolved weights (with no weights:
    the plain mean over interactions). Bayesian: Bayesian bootstrap over sessions.
    ``mean_spearman`` counts only the ``n_with_reference`` interactions whose reference answer
    has an emotion profile, and only the sessions holding one (its ``n`` = ``n_with_reference``;
    the one-session rule counts those sessions); ``mean = None`` (no estimate) when there are none.
    ``emotion_distribution``: pooled emotion proportions (Bayesian: Dirichlet posterior).
    """

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    n_interactions: int
    n_with_reference: Optional[int] = None
    n_sessions: int
    mean_entropy: Estimate
    mean_spearman: Estimate
    emotion_distribution: dict[str, Estimate]
    resampling: Optional[str] = None
    lexicon: str
    lexicon_licence: str
