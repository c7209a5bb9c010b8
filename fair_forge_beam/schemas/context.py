"""Context schemas: the judge's answer and the results (spec §5.2, §6.3, plus slice aggregates).

Score scale: ``context_awareness`` ∈ [0, 1] (1 = the answer keeps entirely to the context).
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import Estimate, InteractionMetric, JudgedSessionMetric, JudgedSliceMetric

__all__ = ["ContextJudgeOutput", "ContextInteraction", "ContextMetric", "ContextSliceMetric"]


class ContextJudgeOutput(BaseModel):
    """What the judge must answer for one interaction (spec §5.2, ``extra="forbid"``).

    ``score`` ∈ [0, 1]; ``insight``: the judge's explanation. Answers outside the range or with
    other fields fail validation and are re-asked, then dead-lettered (never scored 0).
    """

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0.0, le=1.0, description="alignment of the answer with the context, 0 (none) to 1 (full)")
    insight: str = Field(description="short explanation of the score")


class ContextInteraction(InteractionMetric):
    """One judged interaction (upstream ``ContextInteraction`` fields + location fields).

    ``context_awareness`` ∈ [0, 1]; ``insight``: the judge's explanation; ``reasoning``: the
    judge's reasoning text (``<think>`` block or reasoning channel), None when empty.
    """

    context_awareness: float
    insight: str = ""
    reasoning: Optional[str] = None


class ContextMetric(JudgedSessionMetric):
    """One session (upstream ``ContextMetric``, plus ``language``, ``n_failed`` and ``estimate``).

    * ``n_interactions``: interactions the judge scored (failures excluded);
    * ``n_failed``: interactions whose judgement failed (they are in the dead letter);
    * ``context_awareness``: weighted mean of the scores (weights spec §3.4, resolved over the
      scored interactions) — frequentist: exact (§3.5/§18.2); Bayesian: Bayesian-bootstrap mean;
      None when nothing was scored;
    * ``context_awareness_ci_low`` / ``_ci_high``: credible interval (Bayesian only);
    * ``estimate``: the same numbers as an :class:`Estimate`;
    * ``interactions``: the scored interactions, by turn (filled by ``Context.run``; empty in
      the pipeline's session records, whose interactions are a separate output).
    """

    context_awareness: Optional[float] = None
    context_awareness_ci_low: Optional[float] = None
    context_awareness_ci_high: Optional[float] = None
    estimate: Estimate = Field(default_factory=Estimate)
    interactions: list[ContextInteraction] = Field(default_factory=list)


class ContextSliceMetric(JudgedSliceMetric):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``).

    ``context_awareness``: mean of the session means weighted by each session's number of scored
    interactions (with no weights given: the plain mean over scored interactions); Bayesian:
    Bayesian bootstrap over sessions. ``n_failed``: interactions of the slice whose judgement
    failed. ``judge_model``: the model name of the judge.
    """

    context_awareness: Estimate
    resampling: Optional[str] = None
    judge_model: str = ""
