"""Regulatory schemas: the checker's answer and the results (spec §6.8, plus slice aggregates).

Verdicts: a chunk ``SUPPORTS`` the answer, ``CONTRADICTS`` it, or is ``IRRELEVANT`` to it; an
interaction or session is ``COMPLIANT``, ``NON_COMPLIANT`` or ``IRRELEVANT`` (nothing relevant
retrieved or every retrieved chunk irrelevant). Scores are in [0, 1].
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import Estimate, InteractionMetric, JudgedSessionMetric

__all__ = [
    "CHUNK_VERDICTS",
    "VERDICTS",
    "RegulatoryJudgeOutput",
    "RegulatoryChunk",
    "RegulatoryInteraction",
    "RegulatoryMetric",
    "RegulatorySliceMetric",
]

CHUNK_VERDICTS = ("SUPPORTS", "CONTRADICTS", "IRRELEVANT")
VERDICTS = ("COMPLIANT", "NON_COMPLIANT", "IRRELEVANT")


class RegulatoryJudgeOutput(BaseModel):
    """What the judge must answer for one (answer, policy chunk) pair (``extra="forbid"``).

    ``verdict``: ``SUPPORTS`` (the answer follows the passage), ``CONTRADICTS`` (the answer
    breaks or conflicts with it), ``IRRELEVANT`` (the passage does not bear on this exchange);
    ``confidence`` ∈ [0, 1]; ``insight``: one or two sentences citing the passage.
    """

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["SUPPORTS", "CONTRADICTS", "IRRELEVANT"]
    confidence: float = Field(ge=0.0, le=1.0, description="confidence in the verdict, 0 to 1")
    insight: str = Field(description="short justification citing the passage")


class RegulatoryChunk(BaseModel):
    """One retrieved policy chunk and the checker's verdict on it.

    ``similarity``: cosine similarity of the chunk to the query or the answer (the higher of the
    two), rounded to 4 decimals, in [−1, 1] (≥ the retrieval threshold); ``checker_score`` ∈
    [0, 1]: the checker's confidence (judge) or reranker score (reranker checker) — the
    original's ``reranker_score``, still accepted under that name and readable as an attribute.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    text: str
    source: str
    chunk_index: int
    similarity: float = Field(ge=-1.0, le=1.0)
    checker_score: Optional[float] = Field(
        default=None, ge=0.0, le=1.0, validation_alias=AliasChoices("checker_score", "reranker_score")
    )
    verdict: Literal["SUPPORTS", "CONTRADICTS", "IRRELEVANT"]
    insight: str = ""

    @property
    def reranker_score(self) -> Optional[float]:
        """The original's name of :attr:`checker_score` (same value)."""
        return self.checker_score


class RegulatoryInteraction(InteractionMetric):
    """One checked interaction (upstream ``RegulatoryInteraction`` + location fields).

    * ``supporting_chunks`` / ``contradicting_chunks`` / ``irrelevant_chunks``: counts ``s``,
      ``c``, ``i`` over ``retrieved_chunks``;
    * ``compliance_score`` = ``s / (s + c)`` rounded to 4 decimals; ``compliance_threshold`` when
      ``s + c = 0`` (upstream convention);
    * ``verdict``: ``IRRELEVANT`` if ``s + c = 0``; ``NON_COMPLIANT`` if ``c > 0 and s = 0``;
      ``COMPLIANT`` if the score ≥ the threshold; else ``NON_COMPLIANT`` (spec §6.8).
    """

    query: str = ""
    assistant: str = ""
    compliance_score: float = Field(ge=0.0, le=1.0)
    verdict: Literal["COMPLIANT", "NON_COMPLIANT", "IRRELEVANT"]
    supporting_chunks: int = 0
    contradicting_chunks: int = 0
    irrelevant_chunks: int = 0
    retrieved_chunks: list[RegulatoryChunk] = Field(default_factory=list)
    insight: str = ""


class RegulatoryMetric(JudgedSessionMetric):
    """One session (upstream ``RegulatoryMetric`` + ``language``, ``n_failed``, rates).

    * ``n_interactions``: checked interactions; ``n_failed``: interactions that could not be
      checked (a failed chunk check, an empty corpus; they are in the dead letter);
    * ``compliance_score``: weighted mean of the interactions' scores (weights spec §3.4;
      IRRELEVANT interactions count with ``compliance_threshold``, as upstream) — frequentist
      exact, Bayesian the Bayesian-bootstrap mean; ``ci_low`` / ``ci_high`` its interval
      (Bayesian only); None when nothing was checked;
    * ``compliance_rate``: share of COMPLIANT among the COMPLIANT + NON_COMPLIANT interactions
      (IRRELEVANT ones left out) — frequentist ``k/n``, Bayesian Beta posterior (exact);
    * ``verdict``: IRRELEVANT if every checked interaction is; else COMPLIANT when the
      unrounded ``compliance_score`` ≥ the threshold; else NON_COMPLIANT (None when nothing was
      checked);
    * ``interactions``: filled by ``Regulatory.run`` (empty in the pipeline's session records).
    """

    compliance_score: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    verdict: Optional[Literal["COMPLIANT", "NON_COMPLIANT", "IRRELEVANT"]] = None
    compliance_rate: Estimate = Field(default_factory=Estimate)
    n_compliant: int = 0
    n_non_compliant: int = 0
    n_irrelevant: int = 0
    total_supporting_chunks: int = 0
    total_contradicting_chunks: int = 0
    total_irrelevant_chunks: int = 0
    interactions: list[RegulatoryInteraction] = Field(default_factory=list)


class RegulatorySliceMetric(BaseModel):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``).

    ``compliance_rate``: COMPLIANT / (COMPLIANT + NON_COMPLIANT) interactions of the slice —
    frequentist ``k/n``; Bayesian exact Beta(a+k, b+n−k) posterior mean and equal-tailed
    credible interval (prior from the mode, default Beta(1, 1)). ``chunk_support_ratio``:
    supporting / (supporting + contradicting) chunks, descriptive (chunks of one answer are not
    independent). ``status``: ``"ok"``, ``"empty_corpus"`` (no chunk to retrieve from: every
    interaction is dead-lettered) or ``"no_relevant_interactions"`` (n = 0 for the rate).
    """

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    status: str = "ok"
    n_interactions: int
    n_sessions: int = 0
    n_failed: int = 0
    n_compliant: int = 0
    n_non_compliant: int = 0
    n_irrelevant: int = 0
    compliance_rate: Estimate
    total_supporting_chunks: int = 0
    total_contradicting_chunks: int = 0
    total_irrelevant_chunks: int = 0
    chunk_support_ratio: Optional[float] = None
    corpus_chunks: int = 0
    checker: str = ""
