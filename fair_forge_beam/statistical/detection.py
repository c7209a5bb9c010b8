"""Detection statistics: per-class confusion counts (TP, FP, FN) → precision, recall, F-beta.

Accumulator: :class:`CountVectorCombineFn`, an integer vector summed element-wise (mergeable,
exact, order-free). Estimators:

* precision ``TP/(TP+FP)``, recall ``TP/(TP+FN)`` and miss rate ``FN/(TP+FN)`` are rates and go
  through the rate primitive (:func:`~fair_forge_beam.statistical.combiners.estimate_rate`):
  frequentist ``k/n`` (``None`` when ``n = 0``), Bayesian exact Beta(a+k, b+n−k) posterior
  mean and quantiles;
* F-beta ``(1+β²)·P·R / (β²·P + R)`` (van Rijsbergen 1979; β = 2 weighs recall four times as
  much as precision): frequentist from the point rates (0 when undefined, as gaussia 1.2.0);
  Bayesian from MC draws of the joint posterior of the three cell probabilities,
  Dirichlet(a+TP, b+FP, b+FN) with the mode's Beta prior (a, b) — its precision and recall
  marginals are exactly the Beta posteriors of the rates above (aggregation property) —
  ``F_β = (1+β²)p_TP / ((1+β²)p_TP + β²p_FN + p_FP)`` per draw (Goutte & Gaussier 2005 use
  the same per-draw construction), summarised by the mode (mean, percentile interval).

Draws are seeded from the key (:func:`~fair_forge_beam.statistical.seeding.estimator_rng`), so
results are bit-identical on any runner.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import CountVectorSum, estimate_rate
from fair_forge_beam.statistical.seeding import estimator_rng

__all__ = ["CountVectorCombineFn", "f_beta", "confusion_draws", "f_beta_draws", "estimate_confusion"]


class CountVectorCombineFn(CountVectorSum):
    """Element-wise sum of integer vectors of length ``size``.

    Input: a sequence of ``size`` non-negative ints. Accumulator and output: a list of Python
    ints. Raises ``ValueError`` (in ``add_input``) on a wrong length or a negative/non-integer
    entry.
    """

    def __init__(self, size: int):
        if int(size) < 1:
            raise ValueError("size must be >= 1")
        self.size = int(size)

    def create_accumulator(self):
        return [0] * self.size

    def add_input(self, acc, element):
        if len(element) != self.size:
            raise ValueError(f"expected a count vector of length {self.size}, got {len(element)}")
        for i, v in enumerate(element):
            if isinstance(v, bool) or int(v) != v or v < 0:
                raise ValueError(f"counts must be integers >= 0, got {quoted(v)}")
            acc[i] += int(v)
        return acc

    def extract_output(self, acc):
        return list(acc)


def f_beta(precision: Optional[float], recall: Optional[float], beta: float = 2.0) -> float:
    """``(1+β²)PR/(β²P+R)``; 0.0 when the denominator is 0 or either rate is undefined (gaussia)."""
    if precision is None or recall is None:
        return 0.0
    den = beta * beta * precision + recall
    return 0.0 if den == 0 else (1 + beta * beta) * precision * recall / den


def confusion_draws(tp: int, fp: int, fn: int, mode: StatisticalMode, *key) -> np.ndarray:
    """``mode.replicate_count`` draws of ``(p_TP, p_FP, p_FN)`` ~ Dirichlet(a+TP, b+FP, b+FN),
    shape ``(S, 3)``, from a generator seeded by ``(mode.seed, *key)``."""
    a, b = mode.beta_prior()
    rng = estimator_rng(mode.seed, *key)
    return rng.dirichlet([a + tp, b + fp, b + fn], size=mode.replicate_count)


def f_beta_draws(draws: np.ndarray, beta: float = 2.0) -> np.ndarray:
    """F-beta of each row of :func:`confusion_draws` (shape ``(S,)``)."""
    b2 = beta * beta
    tp, fp, fn = draws[:, 0], draws[:, 1], draws[:, 2]
    return (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp)


def _summary(samples: np.ndarray, mode: StatisticalMode, n: int) -> Estimate:
    s = mode.summarize(samples)
    return Estimate(mean=s["mean"], ci_low=s["ci_low"], ci_high=s["ci_high"], n=n)


def estimate_confusion(tp: int, fp: int, fn: int, mode: StatisticalMode, key: Sequence, beta: float = 2.0):
    """Estimates of one class: ``(precision, recall, fn_rate, f_beta, draws or None)``.

    ``precision``, ``recall``, ``fn_rate``: :class:`Estimate` from the rate primitive (``n`` =
    its denominator). ``f_beta``: :class:`Estimate` (frequentist: point value from the point
    rates, 0 when undefined; Bayesian: posterior summary, ``n = TP+FP+FN``). ``f_draws``: the
    ``(F draws, miss-rate draws)`` of the same posterior in Bayesian mode (for composites), else
    ``None``."""
    precision = estimate_rate(tp, tp + fp, mode)
    recall = estimate_rate(tp, tp + fn, mode)
    fn_rate = estimate_rate(fn, tp + fn, mode)
    n = tp + fp + fn
    if not mode.is_bayesian:
        return precision, recall, fn_rate, Estimate(mean=f_beta(precision.mean, recall.mean, beta), n=n), None
    draws = confusion_draws(tp, fp, fn, mode, *key)
    f = f_beta_draws(draws, beta)
    return precision, recall, fn_rate, _summary(f, mode, n), (f, draws[:, 2] / (draws[:, 0] + draws[:, 2]))
