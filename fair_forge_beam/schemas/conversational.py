"""Conversational schemas: the judge's answer and the results (spec §5.2, §6.4, plus slices).

Seven dimensions, each on the judge's **0–10** scale (not normalised, as upstream):
``memory``, ``language``, ``quality_maxim``, ``quantity_maxim``, ``relation_maxim``,
``manner_maxim``, ``sensibleness``. Result fields carry the prefix ``conversational_``.
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import Estimate, InteractionMetric, JudgedSessionMetric, JudgedSliceMetric

__all__ = [
    "DIMENSIONS",
    "RESULT_FIELDS",
    "ConversationalJudgeOutput",
    "ConversationalInteraction",
    "ConversationalMetric",
    "ConversationalSliceMetric",
]

#: the judge's dimensions, in output order
DIMENSIONS = ("memory", "language", "quality_maxim", "quantity_maxim", "relation_maxim", "manner_maxim", "sensibleness")
#: result field names of the dimensions (``conversational_<dimension>``)
RESULT_FIELDS = tuple(f"conversational_{d}" for d in DIMENSIONS)

class ConversationalJudgeOutput(BaseModel):
    """What the judge must answer for one turn (spec §5.2, ``extra="forbid"``): seven scores
    ∈ [0, 10] and an ``insight``. Invalid answers are re-asked, then dead-lettered."""

    model_config = ConfigDict(extra="forbid")

    memory: float = Field(ge=0.0, le=10.0, description="use of earlier turns; 10 when the question needs none")
    language: float = Field(ge=0.0, le=10.0, description="the answer is written in the required language")
    quality_maxim: float = Field(ge=0.0, le=10.0, description="truthful and supported by evidence")
    quantity_maxim: float = Field(ge=0.0, le=10.0, description="as informative as needed, no more")
    relation_maxim: float = Field(ge=0.0, le=10.0, description="relevant to the question")
    manner_maxim: float = Field(ge=0.0, le=10.0, description="clear, brief, orderly, unambiguous")
    sensibleness: float = Field(ge=0.0, le=10.0, description="makes sense in the conversation")
    insight: str = Field(description="short explanation of the scores")


class ConversationalInteraction(InteractionMetric):
    """One judged turn: upstream ``ConversationalInteraction`` (``qa_id`` + 7 scores ∈ [0, 10],
    here prefixed ``conversational_`` so that ``conversational_language`` does not clash with the
    session ``language``) plus the judge's ``insight`` (upstream drops it, spec §17 item 14),
    ``reasoning`` (None when empty) and ``history_turns`` (previous turns shown to the judge)."""

    conversational_memory: float
    conversational_language: float
    conversational_quality_maxim: float
    conversational_quantity_maxim: float
    conversational_relation_maxim: float
    conversational_manner_maxim: float
    conversational_sensibleness: float
    insight: str = ""
    reasoning: Optional[str] = None
    history_turns: int = 0


class _DimensionEstimates(BaseModel):
    """The seven dimensions as :class:`Estimate` s (:data:`RESULT_FIELDS`, in output order): the
    session's and the slice's record hold them after their header."""

    conversational_memory: Estimate
    conversational_language: Estimate
    conversational_quality_maxim: Estimate
    conversational_quantity_maxim: Estimate
    conversational_relation_maxim: Estimate
    conversational_manner_maxim: Estimate
    conversational_sensibleness: Estimate


class ConversationalMetric(_DimensionEstimates, JudgedSessionMetric):
    """One session (upstream ``ConversationalMetric``; each dimension an :class:`Estimate` with
    upstream's ``mean``/``ci_low``/``ci_high`` plus ``n``).

    Each ``conversational_<dimension>``: weighted mean over the scored turns (weights spec §3.4,
    resolved over the scored turns) — frequentist exact; Bayesian: Bayesian-bootstrap mean and
    credible interval (one set of bootstrap weights shared by the seven dimensions); ``mean``
    None when nothing was scored. ``n_interactions``: scored turns; ``n_failed``: turns whose
    judgement failed (in the dead letter). ``interactions``: filled by ``Conversational.run``.
    """

    interactions: list[ConversationalInteraction] = Field(default_factory=list)


class ConversationalSliceMetric(_DimensionEstimates, JudgedSliceMetric):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``): each
    dimension is the mean of session means weighted by the sessions' scored-turn counts;
    Bayesian: Bayesian bootstrap over sessions. ``n_failed``: turns whose judgement failed."""

    resampling: Optional[str] = None
    judge_model: str = ""
