"""Vision schemas (spec §6.9): one frame = one interaction, its description (``assistant``)
compared with the reference description of the frame (``ground_truth_assistant``).

Scales: similarity scores are cosines in [−1, 1] rounded to 4 decimals (as upstream; 1 = same
meaning); ``hallucination_rate`` ∈ [0, 1] = share of frames whose similarity is below
``threshold``.
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate, InteractionMetric

__all__ = ["VisionInteraction", "VisionSessionMetric", "VisionSimilarityMetric", "VisionHallucinationMetric", "VisionSliceMetric"]


class VisionInteraction(InteractionMetric):
    """One scored frame: ``similarity_score`` (cosine, rounded 4) and ``is_hallucination``
    (``similarity_score < threshold``)."""

    similarity_score: float
    is_hallucination: bool
    threshold: float


class VisionSimilarityMetric(BaseMetric):
    """Upstream ``VisionSimilarityMetric``: mean/min/max similarity of a session's frames (each
    rounded 4), a one-sentence ``summary`` and ``interactions`` = ``[(qa_id, similarity_score)]``
    in frame order. ``mean_similarity_ci_low/high``: credible interval (Bayesian mode only)."""

    model_config = ConfigDict(extra="ignore")

    mean_similarity: float
    min_similarity: float
    max_similarity: float
    mean_similarity_ci_low: Optional[float] = None
    mean_similarity_ci_high: Optional[float] = None
    summary: str
    interactions: list[tuple[str, float]] = Field(default_factory=list)

    def display(self) -> str:
        """Multi-line text report."""
        lines = [f"Vision similarity — session {self.session_id} ({self.assistant_id})", f"  {self.summary}"]
        lines += [f"  {q}: {s:.4f}" for q, s in self.interactions]
        return "\n".join(lines)


class VisionHallucinationMetric(BaseMetric):
    """Upstream ``VisionHallucinationMetric``: ``hallucination_rate`` = ``n_hallucinations /
    n_frames`` (rounded 4; Bayesian mode: Beta posterior mean, with its credible interval),
    ``threshold``, a ``summary`` and ``interactions`` = ``[(qa_id, similarity_score,
    is_hallucination)]`` in frame order."""

    model_config = ConfigDict(extra="ignore")

    hallucination_rate: float
    hallucination_rate_ci_low: Optional[float] = None
    hallucination_rate_ci_high: Optional[float] = None
    n_hallucinations: int
    n_frames: int
    threshold: float
    summary: str
    interactions: list[tuple[str, float, bool]] = Field(default_factory=list)

    def display(self) -> str:
        """Multi-line text report."""
        lines = [f"Vision hallucination — session {self.session_id} ({self.assistant_id})", f"  {self.summary}"]
        lines += [f"  {q}: {s:.4f}{'  HALLUCINATION' if h else ''}" for q, s, h in self.interactions]
        return "\n".join(lines)


class VisionSessionMetric(BaseMetric):
    """One session (a video / a sequence of frames): both upstream results in one record.

    ``mean_similarity`` (frequentist: plain mean over frames; Bayesian: Bayesian-bootstrap mean
    over the frames with its credible interval), ``min_similarity``, ``max_similarity``,
    ``hallucination_rate`` (rate through the mode: ``k/n`` or the Beta posterior), counts,
    ``threshold``, the two upstream summaries and the frames (``interactions``) in order. All
    values rounded to 4 decimals (as upstream). Convert with :meth:`to_similarity` /
    :meth:`to_hallucination`.
    """

    model_config = ConfigDict(extra="ignore")

    language: str = "english"
    n_frames: int
    n_interactions: int = 0  # = n_frames (the name every session record shares)
    mean_similarity: float
    mean_similarity_ci_low: Optional[float] = None
    mean_similarity_ci_high: Optional[float] = None
    min_similarity: float
    max_similarity: float
    hallucination_rate: float
    hallucination_rate_ci_low: Optional[float] = None
    hallucination_rate_ci_high: Optional[float] = None
    n_hallucinations: int
    threshold: float
    similarity_summary: str
    hallucination_summary: str
    scorer: str = ""
    interactions: list[VisionInteraction] = Field(default_factory=list)

    def to_similarity(self) -> VisionSimilarityMetric:
        return VisionSimilarityMetric(
            session_id=self.session_id, assistant_id=self.assistant_id,
            mean_similarity=self.mean_similarity, min_similarity=self.min_similarity, max_similarity=self.max_similarity,
            mean_similarity_ci_low=self.mean_similarity_ci_low, mean_similarity_ci_high=self.mean_similarity_ci_high,
            summary=self.similarity_summary, interactions=[(i.qa_id, i.similarity_score) for i in self.interactions],
        )

    def to_hallucination(self) -> VisionHallucinationMetric:
        return VisionHallucinationMetric(
            session_id=self.session_id, assistant_id=self.assistant_id,
            hallucination_rate=self.hallucination_rate, hallucination_rate_ci_low=self.hallucination_rate_ci_low,
            hallucination_rate_ci_high=self.hallucination_rate_ci_high, n_hallucinations=self.n_hallucinations,
            n_frames=self.n_frames, threshold=self.threshold, summary=self.hallucination_summary,
            interactions=[(i.qa_id, i.similarity_score, i.is_hallucination) for i in self.interactions],
        )


class VisionSliceMetric(BaseModel):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``).

    ``mean_similarity``: mean over all frames of the slice (session means weighted by frame
    counts; Bayesian: Bayesian bootstrap over sessions); ``min_similarity`` / ``max_similarity``
    over all frames; ``hallucination_rate``: pooled rate ``Σ hallucinations / Σ frames``
    (Bayesian: Beta posterior with credible interval).
    """

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    n_interactions: int
    n_sessions: int
    threshold: float
    mean_similarity: Estimate
    min_similarity: Optional[float] = None
    max_similarity: Optional[float] = None
    hallucination_rate: Estimate
    n_hallucinations: int = 0
    resampling: Optional[str] = None
    scorer: str = ""
