"""pass@k and pass^k estimators (spec §6.7; Chen et al. 2021; Yao et al. 2024).

Groundwork for the Agentic metric: pure functions of counts, validated up front.

* Plug-in (the original's per-conversation values, spec §6.7): with ``p = c/n``,
  ``pass@k = 1 − (1 − p)^k`` and ``pass^k = p^k`` (0 when ``c = 0``, 1 when ``c = n``); ``k`` may
  exceed ``n``.
* Unbiased, over ``n`` trials of the same task with ``c`` successes (sampling ``k`` of the ``n``
  without replacement): ``pass@k = 1 − C(n−c, k)/C(n, k)`` (Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code") and ``pass^k = C(c, k)/C(n, k)`` (Yao et al. 2024,
  "τ-bench"). Defined for ``k ≤ n`` only; ``k > n`` returns ``None``.
* Bayesian, ``p ~ Beta(a + c, b + n − c)``: closed-form posterior means
  ``E[p^k] = B(a'+k, b')/B(a', b')`` and ``E[1 − (1−p)^k] = 1 − B(a', b'+k)/B(a', b')``; both
  quantities are monotone in ``p``, so their equal-tailed credible intervals are the transforms
  of the exact Beta quantiles — no Monte Carlo. Spec §19: n=3, c=1, Beta(1,1) prior →
  means 0.7143 / 0.1143.
"""
from __future__ import annotations

import math
from math import comb
from typing import Optional

from scipy import special, stats

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode, check_counts

__all__ = ["check_k", "pass_at_k_plugin", "pass_pow_k_plugin", "pass_at_k_unbiased", "pass_pow_k_unbiased", "pass_k_estimates"]


def check_k(k) -> int:
    """Validate the attempt count (case-005).

    Raises:
        ValueError: ``k`` is not a positive integer (``k = 0``, ``k = -1``, ``2.5``, ``True``...).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer (the number of attempts in pass@k / pass^k), got {k!r}")
    return k


def _plugin_rate(n: int, c: int, k: int) -> Optional[float]:
    """Validated ``p = c/n`` for the plug-in estimators; ``None`` when ``n = 0``."""
    c, n = check_counts(c, n)
    check_k(k)
    return None if n == 0 else c / n


def pass_at_k_plugin(n: int, c: int, k: int) -> Optional[float]:
    """Plug-in pass@k ``1 − (1 − c/n)^k`` in [0, 1] (0 when ``c = 0``, 1 when ``c = n``); ``None`` when ``n = 0``."""
    p = _plugin_rate(n, c, k)
    return None if p is None else 1.0 - (1.0 - p) ** k


def pass_pow_k_plugin(n: int, c: int, k: int) -> Optional[float]:
    """Plug-in pass^k ``(c/n)^k`` in [0, 1] (0 when ``c = 0``, 1 when ``c = n``); ``None`` when ``n = 0``."""
    p = _plugin_rate(n, c, k)
    return None if p is None else p**k


def pass_at_k_unbiased(n: int, c: int, k: int) -> Optional[float]:
    """Unbiased pass@k ``1 − C(n−c, k)/C(n, k)`` (Chen et al. 2021); ``None`` if ``k > n`` or ``n = 0``."""
    c, n = check_counts(c, n)
    k = check_k(k)
    if n == 0 or k > n:
        return None
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_pow_k_unbiased(n: int, c: int, k: int) -> Optional[float]:
    """Unbiased pass^k ``C(c, k)/C(n, k)`` (Yao et al. 2024, τ-bench); ``None`` if ``k > n`` or ``n = 0``."""
    c, n = check_counts(c, n)
    k = check_k(k)
    if n == 0 or k > n:
        return None
    return comb(c, k) / comb(n, k)


def pass_k_estimates(n: int, c: int, k: int, mode: StatisticalMode) -> tuple[Estimate, Estimate]:
    """``(pass@k, pass^k)`` for ``c`` correct out of ``n``.

    Frequentist: the plug-in values. Bayesian (Beta prior from the mode, default Beta(1, 1)):
    closed-form posterior means and exact credible intervals (see the module docstring); ``n = 0``
    gives the prior's values.
    """
    c, n = check_counts(c, n)
    k = check_k(k)
    if not mode.is_bayesian:
        return Estimate(mean=pass_at_k_plugin(n, c, k), n=n), Estimate(mean=pass_pow_k_plugin(n, c, k), n=n)
    a = float(getattr(mode, "beta_prior_a", 1.0)) + c
    b = float(getattr(mode, "beta_prior_b", 1.0)) + n - c
    alpha = (1.0 - float(getattr(mode, "ci_level", 0.95))) / 2.0
    p_lo, p_hi = stats.beta.ppf([alpha, 1.0 - alpha], a, b)
    base = special.betaln(a, b)
    mean_pow = math.exp(special.betaln(a + k, b) - base)
    mean_at = 1.0 - math.exp(special.betaln(a, b + k) - base)
    at = Estimate(mean=mean_at, ci_low=1.0 - (1.0 - p_lo) ** k, ci_high=1.0 - (1.0 - p_hi) ** k, n=n)
    pw = Estimate(mean=mean_pow, ci_low=p_lo**k, ci_high=p_hi**k, n=n)
    return at, pw
