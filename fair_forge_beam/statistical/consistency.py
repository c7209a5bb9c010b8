"""Consistency statistics of K sampled answers to one query (spec §6.10 steps 4–5).

Given cluster labels of the K answers (same label = same meaning):

* consistent-sample rate ``CSR = n_max / K`` (``n_max`` = size of the largest cluster) — a rate,
  estimated through the statistical mode (:func:`csr_estimate`): frequentist ``n_max/K``;
  Bayesian ``Beta(a + n_max, b + K − n_max)`` posterior (closed-form mean, exact quantiles; spec
  §19: 7 of 10 with a Beta(1, 1) prior → (7+1)/(10+2) ≈ 0.667);
* normalised semantic entropy ``SE_n = −Σ_ℓ (n_ℓ/K) ln(n_ℓ/K) / ln K`` (0 when K ≤ 1), in
  [0, 1]: 0 = one meaning, 1 = every answer different (Kuhn et al., ICLR 2023, "Semantic
  Uncertainty", normalised by its maximum ln K); computed with ``scipy.stats.entropy``;
* stability ``= 1 − SE_n``.

Spec §19: labels [0, 0, 1] → CSR 0.6667, SE_n 0.5794, stability 0.4206, 2 clusters.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from scipy import stats

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import estimate_rate

__all__ = ["cluster_sizes", "normalized_semantic_entropy", "csr_estimate"]


def cluster_sizes(labels: Sequence[int]) -> list[int]:
    """Sizes of the clusters, largest first (ties in any order: only sizes are returned)."""
    return sorted(Counter(labels).values(), reverse=True)


def normalized_semantic_entropy(labels: Sequence[int]) -> float:
    """``SE_n`` in [0, 1] of the cluster labels of K answers; 0.0 when K ≤ 1."""
    k = len(labels)
    if k <= 1:
        return 0.0
    h = float(stats.entropy(cluster_sizes(labels)))  # natural log; normalises the counts itself
    return min(1.0, max(0.0, h / math.log(k)))


def csr_estimate(labels: Sequence[int], mode: StatisticalMode) -> Estimate:
    """CSR of the cluster labels as a rate ``(n_max, K)`` through ``mode`` (``n`` = K).

    ``K = 0`` gives ``Estimate(mean=None)`` in frequentist mode (no data) and the prior in
    Bayesian mode, as :func:`~fair_forge_beam.statistical.combiners.estimate_rate`.
    """
    sizes = cluster_sizes(labels)
    return estimate_rate(sizes[0] if sizes else 0, len(labels), mode)
