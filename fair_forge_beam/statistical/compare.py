"""Intervals of the difference between two estimates, and when a difference has the support to be claimed.

Used by the run comparison (``--compare``, :mod:`fair_forge_beam.reports.compare`), the report's
between-assistant differences, the regression gates and the trend report: one implementation of
each method, chosen per estimate by :func:`difference`. Every difference is ``current −
baseline`` in the estimate's own units; intervals are equal-tailed at ``level``.

* :func:`beta_difference` — a rate with integer counts ``(k, n)`` on both sides in a Bayesian run:
  the posterior of the difference of two independent ``Beta(a + k, b + n − k)`` posteriors,
  from ``draws`` Monte-Carlo draws per side, each keyed by ``(seed, *key, side)``
  (:func:`~fair_forge_beam.statistical.seeding.estimator_rng`): same inputs and seed → the same
  numbers on every machine.
* :func:`agresti_caffo_difference` — the same rate in a frequentist run: Agresti & Caffo (2000),
  "Simple and effective confidence intervals for proportions and differences of proportions
  result from adding two successes and two failures", *The American Statistician* 54(4): one
  success and one failure added to each side, then the Wald interval, clipped to [−1, 1] (the
  Wald interval can reach past it: 12/14 against 0/14 gave [+0.42, +1.01] unclipped); the reported
  difference is the raw ``k1/n1 − k2/n2``.
* :func:`rate_as_compared` — the value of one side's rate that those two methods read from its
  counts (``k/n``; the Beta posterior's mean and interval), so a comparison shows each side as it
  was compared, also a baseline of the other mode or prior (trial49 B4: a Bayesian baseline shown
  0.0625, its posterior mean, beside a difference computed from its 0/14).
* :func:`normal_difference` — any other estimate whose two sides both carry an interval: normal
  approximation, each side's standard error read off its interval as ``(ci_high − ci_low) / (2z)``
  with ``z`` the normal quantile of that side's level; interval ``Δ ± z √(se₁² + se₂²)``. An
  approximation: bootstrap intervals of skewed statistics are not symmetric.

**Within the range.** A difference of two values in ``[low, high]`` lies in ``[−(high − low), high −
low]``: :func:`difference` clips every interval to it, given the estimate's declared range
(``value_range``: its metric info's ``EstimateInfo.value_range``), and a rate difference to [−1, 1].

**Too small to compare.** Callers first ask
:func:`fair_forge_beam.statistical.slices.too_small_to_compare` (the support rule next to the
one-session rule): no difference is claimed — credible (Bayesian) or detectable (frequentist) —
when either side rests on fewer than two sessions or has a zero-width interval (a Bayesian
bootstrap over sessions gives zero width only when every session it resamples has the same value:
as far as the estimate can tell, fewer than two distinct sessions).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from fair_forge_beam.options import CI_LEVEL, SEED
from fair_forge_beam.statistical.seeding import estimator_rng

__all__ = [
    "normal_quantile",
    "beta_difference",
    "agresti_caffo_difference",
    "rate_as_compared",
    "normal_difference",
    "difference",
    "METHODS",
]

#: method name -> one-line description (the ``method`` of :func:`difference`)
METHODS = {
    "beta_posterior": "posterior of the difference of two independent Beta posteriors of the stored counts "
                      "(Monte-Carlo draws keyed by seed, metric, slice and estimate)",
    "agresti_caffo": "Agresti–Caffo normal interval for a difference of two proportions from the stored counts",
    "normal_from_intervals": "normal approximation: standard errors read off each run's interval "
                             "((ci_high − ci_low) / 2z), difference ± z·√(se₁² + se₂²)",
    "no_interval": "point estimates without interval: the difference only",
    "out_of_range": "estimates near the limit of a float (1.8e308): their difference or its interval is beyond it, "
                    "so it is not computed",
}


def normal_quantile(level: Optional[float]) -> float:
    """``z`` of a two-sided interval at ``level`` (default :data:`~fair_forge_beam.options.CI_LEVEL`): ``Φ⁻¹(0.5 + level/2)``.
    (``scipy.stats`` is imported here, when a comparison needs it: a frequentist audit that compares
    nothing never imports scipy, though it reads what this module declares.)"""
    from scipy import stats

    return float(stats.norm.ppf(0.5 + (level or CI_LEVEL) / 2))


def _has_interval(e: dict) -> bool:
    return e.get("ci_low") is not None and e.get("ci_high") is not None


def beta_difference(k1: int, n1: int, k2: int, n2: int, *, prior: tuple[float, float] = (1.0, 1.0),
                    level: float = CI_LEVEL, draws: int = 20000, seed: int = SEED, key: Sequence = ()) -> dict:
    """Posterior of ``p₁ − p₂`` for ``p_i ~ Beta(a + k_i, b + n_i − k_i)`` independent.

    Args:
        k1, n1 / k2, n2: successes and trials of the current / baseline side (``0 ≤ k ≤ n``, ``n > 0``).
        prior: ``(a, b)`` of the Beta prior (Beta(1, 1) = uniform).
        level: interval level in (0, 1).
        draws: Monte-Carlo draws per side.
        seed, key: the draws of side ``s`` come from ``estimator_rng(seed, *key, s)``.

    Returns:
        ``{"mean", "ci_low", "ci_high", "p_current_higher"}``: Monte-Carlo mean, equal-tailed
        quantiles at ``level`` and the posterior probability that ``p₁ > p₂``.
    """
    a, b = prior
    d1 = estimator_rng(seed, *key, "current").beta(a + k1, b + n1 - k1, draws)
    d2 = estimator_rng(seed, *key, "baseline").beta(a + k2, b + n2 - k2, draws)
    diff = d1 - d2
    q = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(diff, [q, 1 - q]))
    return {"mean": float(diff.mean()), "ci_low": lo, "ci_high": hi, "p_current_higher": float((diff > 0).mean())}


def agresti_caffo_difference(k1: int, n1: int, k2: int, n2: int, *, level: float = CI_LEVEL) -> dict:
    """Agresti–Caffo interval of ``p₁ − p₂`` (one success and one failure added to each side,
    then Wald): ``p̃_i = (k_i + 1)/(n_i + 2)``, ``se = √(Σ p̃_i(1 − p̃_i)/(n_i + 2))``, interval
    ``p̃₁ − p̃₂ ± z·se``, clipped to [−1, 1], where a difference of two rates lies (the Wald
    interval is not bounded: 12/14 against 0/14 reaches +1.01). Returns ``{"mean": k1/n1 − k2/n2,
    "ci_low", "ci_high"}`` (``n_i > 0``)."""
    z = normal_quantile(level)
    p1, p2 = (k1 + 1) / (n1 + 2), (k2 + 1) / (n2 + 2)
    se = math.sqrt(p1 * (1 - p1) / (n1 + 2) + p2 * (1 - p2) / (n2 + 2))
    return {"mean": k1 / n1 - k2 / n2, "ci_low": max(-1.0, p1 - p2 - z * se), "ci_high": min(1.0, p1 - p2 + z * se)}


def rate_as_compared(k: int, n: int, *, bayesian: bool, prior: tuple[float, float] = (1.0, 1.0),
                     level: float = CI_LEVEL) -> dict:
    """One side's rate as :func:`difference` reads it from its counts ``(k, n)`` (``n > 0``): in a
    frequentist comparison (:func:`agresti_caffo_difference`) ``k/n`` without interval, in a
    Bayesian one (:func:`beta_difference`) the ``Beta(a + k, b + n − k)`` posterior's exact mean and
    equal-tailed interval at ``level``. Returns ``{"mean", "ci_low", "ci_high"}``. A run of the
    other mode (or another prior) shows another value for the same counts: a comparison shows this
    one beside its difference."""
    if not bayesian:
        return {"mean": k / n, "ci_low": None, "ci_high": None}
    from fair_forge_beam.statistical.bayesian import beta_posterior_interval

    mean, lo, hi = beta_posterior_interval(k, n, prior[0], prior[1], level)
    return {"mean": mean, "ci_low": lo, "ci_high": hi}


def normal_difference(current: dict, baseline: dict, *, level: float = CI_LEVEL, current_level: Optional[float] = None,
                      baseline_level: Optional[float] = None) -> dict:
    """Normal-approximation interval of ``mean₁ − mean₂`` from the two sides' intervals (their
    standard errors read off as ``width / 2z`` at each side's own level, default :data:`~fair_forge_beam.options.CI_LEVEL`).
    Returns ``{"mean", "ci_low", "ci_high"}``."""
    # in units of the largest value: estimates near float's limit (1e308) give no intermediate
    # overflow (a width of 2e308, its square); a result beyond the range is inf (difference() says so)
    u = max(abs(float(e[k])) for e in (current, baseline) for k in ("mean", "ci_low", "ci_high"))
    u = u if u > 1e150 else 1.0  # scaled only where it is needed: the same bits as ever below
    se1 = (current["ci_high"] / u - current["ci_low"] / u) / (2 * normal_quantile(current_level))
    se2 = (baseline["ci_high"] / u - baseline["ci_low"] / u) / (2 * normal_quantile(baseline_level))
    mean = current["mean"] / u - baseline["mean"] / u
    half = normal_quantile(level) * math.sqrt(se1 * se1 + se2 * se2)
    return {"mean": mean * u, "ci_low": (mean - half) * u, "ci_high": (mean + half) * u}


def difference(current: dict, baseline: dict, *, current_counts: Optional[tuple[int, int]] = None,
               baseline_counts: Optional[tuple[int, int]] = None, bayesian: bool = False,
               prior: tuple[float, float] = (1.0, 1.0), level: float = CI_LEVEL, current_level: Optional[float] = None,
               baseline_level: Optional[float] = None, draws: int = 20000, seed: int = SEED, key: Sequence = (),
               value_range: Optional[tuple[float, float]] = None) -> dict:
    """The difference ``current − baseline`` of two estimates with the interval of the method that
    fits them (module docstring): counts on both sides → :func:`beta_difference` (``bayesian``)
    or :func:`agresti_caffo_difference`; else intervals on both sides →
    :func:`normal_difference`; else the difference of the means only. ``value_range``: the
    estimates' declared ``(low, high)``; the interval is clipped to ``[−(high − low), high − low]``,
    where a difference of two such values lies (a normal approximation is not bounded).

    Both means must be numbers (the caller handles undefined estimates and
    :func:`~fair_forge_beam.statistical.slices.too_small_to_compare`).

    Returns:
        ``{"method", "mean", "ci_low", "ci_high"[, "p_current_higher"]}``; ``ci_low``/``ci_high``
        are ``None`` for ``method == "no_interval"``, and all three for ``"out_of_range"`` (a
        difference of estimates near float's limit that does not fit in a float).
    """
    found = _difference(current, baseline, current_counts=current_counts, baseline_counts=baseline_counts,
                        bayesian=bayesian, prior=prior, level=level, current_level=current_level,
                        baseline_level=baseline_level, draws=draws, seed=seed, key=key)
    if all(v is None or math.isfinite(v) for k, v in found.items() if k in ("mean", "ci_low", "ci_high")):
        if value_range is not None and found["ci_low"] is not None:
            span = float(value_range[1]) - float(value_range[0])
            found.update(ci_low=max(-span, found["ci_low"]), ci_high=min(span, found["ci_high"]))
        return found
    return {"method": "out_of_range", "mean": None, "ci_low": None, "ci_high": None}  # trial37 T2: inf in JSON


def _difference(current: dict, baseline: dict, *, current_counts, baseline_counts, bayesian, prior, level,
                current_level, baseline_level, draws, seed, key) -> dict:
    if current_counts and baseline_counts and current_counts[1] > 0 and baseline_counts[1] > 0:
        (k1, n1), (k2, n2) = current_counts, baseline_counts
        if bayesian:
            return {"method": "beta_posterior",
                    **beta_difference(k1, n1, k2, n2, prior=prior, level=level, draws=draws, seed=seed, key=key)}
        return {"method": "agresti_caffo", **agresti_caffo_difference(k1, n1, k2, n2, level=level)}
    if _has_interval(current) and _has_interval(baseline):
        return {"method": "normal_from_intervals",
                **normal_difference(current, baseline, level=level, current_level=current_level,
                                    baseline_level=baseline_level)}
    return {"method": "no_interval", "mean": current["mean"] - baseline["mean"], "ci_low": None, "ci_high": None}
