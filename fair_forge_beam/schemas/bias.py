"""Bias result schemas (spec §6.2; session and slice aggregates added).

Field names of the original are kept (``AttributeBiasRate``: ``protected_attribute``,
``n_samples``, ``k_biased``, ``rate``, ``ci_low``, ``ci_high``; ``GuardianInteraction``:
``qa_id``, ``is_biased``, ``attribute``, ``certainty``; ``BiasMetric.attribute_rates`` and
``guardian_interactions``), so ``metrics[0].attribute_rates[i].rate`` reads as upstream.
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate, InteractionMetric

__all__ = [
    "GuardianBias",
    "GuardianInteraction",
    "AttributeBiasRate",
    "BiasInteractionMetric",
    "BiasMetric",
    "BiasSliceMetric",
]


class GuardianBias(BaseModel):
    """One guardian verdict (the return type of ``Guardian.is_biased``).

    * ``is_biased``: the guardian flagged the answer for ``attribute``.
    * ``certainty``: in [0, 1], or ``None`` = not measured. For the LLM guardians: the
      probability the model gave to the *unsafe* label (``"unsafe"`` / ``"Yes"``) at its label
      token, computed from the log-probabilities the server returned; ``None`` when none were
      requested or returned (the original wrote 1.0 there, a certainty nobody measured).
      Custom guardians define their own meaning (``None`` when they give none).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    is_biased: bool
    attribute: str
    certainty: Optional[float] = Field(default=None, ge=0.0, le=1.0)


class GuardianInteraction(BaseModel):
    """One (interaction, attribute) verdict, as stored by the original (+ ``element_id``)."""

    model_config = ConfigDict(extra="ignore")

    qa_id: str
    attribute: str
    is_biased: bool
    certainty: Optional[float] = Field(default=None, ge=0.0, le=1.0, description="P(unsafe label) from logprobs; null = not measured")
    element_id: str = ""


class AttributeBiasRate(BaseModel):
    """Bias rate of one protected attribute over the judged interactions of a session or slice.

    * ``n_samples``: interactions with a verdict for this attribute (failed guardian calls and
      unparseable answers are **not** counted — they are in the dead letter and in ``n_failed``).
    * ``k_biased``: of those, how many were flagged.
    * ``rate``: frequentist ``k/n`` (``None`` when ``n = 0``); Bayesian: exact posterior mean
      ``(a+k)/(a+b+n)`` of Beta(a+k, b+n−k) (prior Beta(a, b) from the mode, default Beta(1, 1)).
    * ``ci_low`` / ``ci_high``: Bayesian only — exact equal-tailed quantiles of that Beta
      (``scipy.stats.beta.ppf``) at the mode's ``ci_level``; ``None`` in frequentist mode.
      Example (spec §19): k=2, n=10 → 0.25, [0.0602, 0.5178].
    * ``n_failed``: guardian calls for this attribute that produced no verdict.
    """

    model_config = ConfigDict(extra="ignore")

    protected_attribute: str
    n_samples: int = Field(ge=0)
    k_biased: int = Field(ge=0)
    rate: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n_failed: int = Field(default=0, ge=0)


class BiasInteractionMetric(InteractionMetric):
    """The verdicts of one interaction, one entry per attribute that got a verdict, in the
    declared attribute order. ``failed_attributes``: attributes whose guardian call failed (see
    the dead letter for the reason)."""

    guardian_interactions: list[GuardianInteraction]
    failed_attributes: list[str] = Field(default_factory=list)


class BiasMetric(BaseMetric):
    """One session (the original emits one ``BiasMetric`` per ``batch()`` call = per session).

    ``n_interactions``: interactions with at least one verdict (an interaction whose every
    guardian call failed is not counted; its failures are in ``n_failed``).
    ``attribute_rates``: one :class:`AttributeBiasRate` per attribute, declared order.
    ``guardian_interactions``: ``{attribute: [GuardianInteraction, …]}`` sorted by turn.
    """

    model_config = ConfigDict(extra="ignore")

    language: str = "english"
    n_interactions: int = 0
    attribute_rates: list[AttributeBiasRate]
    guardian_interactions: dict[str, list[GuardianInteraction]] = Field(default_factory=dict)


class BiasSliceMetric(BaseModel):
    """Bias rates over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``): counts
    ``(k, n)`` summed over the slice's interactions, then estimated as in
    :class:`AttributeBiasRate`. ``n_interactions``: interactions with at least one verdict;
    ``n_sessions``: sessions with at least one verdict (the engine's count of scored sessions, docs/engine.md; a session whose every guardian call failed adds its failures, not a session). ``guardian``: the guardian's name.
    ``rates``: the same rates as ``{attribute: Estimate(mean=rate, ci_low, ci_high, n=n_samples)}``
    (the shape the run summary reads)."""

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    n_interactions: int
    n_sessions: int
    attribute_rates: list[AttributeBiasRate]
    rates: dict[str, Estimate] = Field(default_factory=dict)
    guardian: str = ""
