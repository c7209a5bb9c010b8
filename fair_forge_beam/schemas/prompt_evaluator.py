"""PromptEvaluator schemas (spec §6.10): K sampled answers per query under one system prompt.

Scales (all in [0, 1] unless said otherwise, rounded to 4 decimals as upstream):
``csr`` consistent-sample rate (share of the K answers in the largest meaning cluster);
``stability`` = 1 − normalised semantic entropy; ``rss`` mean cosine between answers and the
reference answer ([−1, 1]); ``icr`` mean share of constraints passed; ``jq`` mean judge score.
"""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate, InteractionMetric, JudgedSliceMetric

__all__ = ["JQJudgeOutput", "QuerySampleMetrics", "PromptEvaluatorMetric", "PromptEvaluatorSliceMetric"]


class JQJudgeOutput(BaseModel):
    """The judge's answer for one sampled response (judge quality, JQ). ``score`` ∈ [0, 1]
    (1 = fully meets the criteria and the expected answer); answers outside the range are
    re-asked, then dead-lettered — never scored 0 (upstream clamps or scores 0)."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0.0, le=1.0, description="how well the response meets the criteria and the expected answer, 0 to 1")
    insight: str = Field(description="short explanation of the score")


class QuerySampleMetrics(InteractionMetric):
    """One query (upstream ``QuerySampleMetrics`` plus location and bookkeeping fields).

    * ``k``: generations asked for; ``n_samples``: generations that succeeded and were scored
      (``n_failed_samples = k − n_samples`` are in the dead letter, stage
      ``prompt_evaluator.generation``);
    * ``csr``: ``n_largest_cluster / n_samples`` (frequentist) or the Beta posterior mean
      (Bayesian), with ``csr_ci_low/high`` in Bayesian mode;
    * ``semantic_entropy`` (SE_n) and ``stability = 1 − SE_n``; ``n_clusters``;
      ``cluster_labels`` by sample index (numbered by first appearance);
    * ``rss`` (None without reference), ``icr`` (None without constraints), ``jq`` (None unless
      JQ is on and there is a reference; ``n_jq_failed`` judge calls failed).
    """

    k: int
    n_samples: int
    n_failed_samples: int = 0
    csr: float
    csr_ci_low: Optional[float] = None
    csr_ci_high: Optional[float] = None
    n_largest_cluster: int
    semantic_entropy: float
    stability: float
    n_clusters: int
    cluster_labels: list[int] = Field(default_factory=list)
    rss: Optional[float] = None
    icr: Optional[float] = None
    jq: Optional[float] = None
    n_jq_failed: int = 0


class PromptEvaluatorMetric(BaseMetric):
    """One session (upstream ``PromptEvaluatorMetric``, plus intervals and counts).

    ``csr``, ``stability``: unweighted means over the session's scored queries (Bayesian:
    Bayesian-bootstrap mean over queries, with ``*_ci_low/high``); ``csr`` averages each query's
    observed ``n_largest_cluster / n_samples`` in both modes, never its Bayesian posterior mean; ``rss``, ``icr``, ``jq``: means
    over the queries that have them (None if none); ``csr_pooled``: the rate ``Σ n_largest /
    Σ n_samples`` through the mode (Bayesian: Beta posterior); ``n_queries``: scored queries;
    ``n_failed``: queries with no successful generation (dead-lettered); ``interactions``: the
    scored queries in turn order.
    """

    model_config = ConfigDict(extra="ignore")

    language: str = "english"
    seed_prompt: str
    k: int
    tau: float
    n_queries: int
    n_interactions: int = 0  # = n_queries (the name every session record shares)
    n_failed: int = 0
    csr: Optional[float] = None
    csr_ci_low: Optional[float] = None
    csr_ci_high: Optional[float] = None
    stability: Optional[float] = None
    stability_ci_low: Optional[float] = None
    stability_ci_high: Optional[float] = None
    rss: Optional[float] = None
    icr: Optional[float] = None
    jq: Optional[float] = None
    csr_pooled: Estimate = Field(default_factory=Estimate)
    interactions: list[QuerySampleMetrics] = Field(default_factory=list)

    def __str__(self) -> str:
        def f(v):
            return "n/a" if v is None else f"{v:.4f}"

        lines = [
            f"PromptEvaluator — session {self.session_id} ({self.assistant_id}), k={self.k}, tau={self.tau}",
            f"  queries scored: {self.n_queries} (no generation: {self.n_failed})",
            f"  CSR {f(self.csr)}  stability {f(self.stability)}  RSS {f(self.rss)}  ICR {f(self.icr)}  JQ {f(self.jq)}",
        ]
        for q in self.interactions:
            lines.append(
                f"  {q.qa_id}: CSR {q.csr:.4f} stability {q.stability:.4f} clusters {q.n_clusters}/{q.n_samples}"
                f" RSS {f(q.rss)} ICR {f(q.icr)} JQ {f(q.jq)}"
            )
        return "\n".join(lines)

    def display(self) -> str:
        """The text report (same as ``str``)."""
        return str(self)


class PromptEvaluatorSliceMetric(JudgedSliceMetric):
    """Aggregate over a slice (``overall``, ``assistant_id=<id>``, ``language=<name>``).

    ``csr``, ``stability``, ``rss``, ``icr``, ``jq``: query-level means (session means weighted by
    their query counts; Bayesian: Bayesian bootstrap over sessions); ``csr_pooled``: pooled rate
    (Beta posterior in Bayesian mode); ``n_failed``: queries without any successful generation.
    """

    k: int
    tau: float
    csr: Estimate
    stability: Estimate
    rss: Estimate
    icr: Estimate
    jq: Estimate
    csr_pooled: Estimate
    resampling: Optional[str] = None
    generator_model: str = ""
    embedder: str = ""
