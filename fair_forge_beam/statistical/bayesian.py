"""Bayesian mode: posterior summaries with credible intervals (spec §4.3).

Differences from upstream, all deliberate:

* draws never come from one shared generator whose state depends on call order
  (spec §17 item 23): :meth:`BayesianMode.keyed` returns a copy seeded by
  ``(rng_seed, metric, slice, component)``;
* rates use the exact Beta posterior mean and ``scipy.stats.beta.ppf`` quantiles (MC samples
  are still returned for composites);
* ``distribution_divergence`` includes every category of ``reference`` (the declared set),
  zero counts included (spec §17 item 2);
* ``rate_estimation(0, 0)`` is the prior (defined, documented), invalid counts raise.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

import numpy as np

from fair_forge_beam.options import CI_LEVEL, MC_SAMPLES, SEED
from fair_forge_beam.quoting import quoted
from fair_forge_beam.statistical.base import (
    StatisticalMode,
    Summary,
    check_count_map,
    check_counts,
    empty_summary,
)
from fair_forge_beam.statistical.seeding import estimator_rng
from fair_forge_beam.arguments import checks_arguments

__all__ = ["BayesianMode", "beta_posterior_interval"]


def beta_posterior_interval(successes: int, trials: int, a: float, b: float, ci_level: float) -> tuple:
    """``(mean, ci_low, ci_high)`` of the Beta(a + k, b + n − k) posterior of a rate (spec §4.3, §19): its
    exact mean and equal-tailed ``ci_level`` quantiles (``scipy.stats.beta.ppf``), all in [0, 1]. The
    interval :meth:`BayesianMode.rate_estimation` reports, without its draws (the report's inconclusive
    rule judges a rate by this width). Example: k=2, n=10, Beta(1, 1), 0.95 -> (0.25, 0.0602, 0.5178).

    Raises:
        ValueError: negative counts or ``successes > trials`` (case-004)."""
    k, n = check_counts(successes, trials)
    from scipy import stats  # imported on first use (a frequentist run never loads it)

    post_a, post_b = a + k, b + (n - k)
    tail = (1.0 - ci_level) / 2.0
    lo, hi = stats.beta(post_a, post_b).ppf([tail, 1.0 - tail])
    return float(post_a / (post_a + post_b)), float(lo), float(hi)


class BayesianMode(StatisticalMode):
    """Posterior distributions summarised by mean and equal-tailed credible interval.

    Args:
        mc_samples: Monte-Carlo draws per primitive and bootstrap replicates (>= 100; default
            :data:`fair_forge_beam.options.MC_SAMPLES`, the CLI's ``--mc-samples`` default).
        ci_level: credible level in (0, 1) (default :data:`fair_forge_beam.options.CI_LEVEL`).
        dirichlet_prior: symmetric Dirichlet concentration α₀ > 0 for category distributions.
        beta_prior_a, beta_prior_b: Beta prior of rates (> 0).
        rng_seed: seed of every keyed stream (default :data:`fair_forge_beam.options.SEED`); ``None`` draws one seed at construction (the run is
            then not reproducible, but still consistent across workers).

    Raises:
        ValueError: a parameter out of range.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        mc_samples: int = MC_SAMPLES,
        ci_level: float = CI_LEVEL,
        dirichlet_prior: float = 1.0,
        beta_prior_a: float = 1.0,
        beta_prior_b: float = 1.0,
        rng_seed: Optional[int] = SEED,
    ):
        if int(mc_samples) != mc_samples or mc_samples < 100:
            raise ValueError(f"mc_samples must be an integer >= 100, got {quoted(mc_samples)}")
        if not 0.0 < ci_level < 1.0:
            raise ValueError(f"ci_level must be in (0, 1), got {quoted(ci_level)}")
        for name, v in (("dirichlet_prior", dirichlet_prior), ("beta_prior_a", beta_prior_a), ("beta_prior_b", beta_prior_b)):
            if not (v > 0 and np.isfinite(v)):
                raise ValueError(f"{name} must be a finite number > 0, got {quoted(v)}")
        self.mc_samples = int(mc_samples)
        self.ci_level = float(ci_level)
        self.dirichlet_prior = float(dirichlet_prior)
        self.beta_prior_a = float(beta_prior_a)
        self.beta_prior_b = float(beta_prior_b)
        self.rng_seed = rng_seed
        self.effective_seed = int(rng_seed) if rng_seed is not None else int(np.random.SeedSequence().entropy % (2**63))
        self.rng = np.random.default_rng(self.effective_seed)

    def __repr__(self) -> str:
        return (
            f"BayesianMode(mc_samples={self.mc_samples}, ci_level={self.ci_level}, "
            f"dirichlet_prior={self.dirichlet_prior}, beta_prior_a={self.beta_prior_a}, "
            f"beta_prior_b={self.beta_prior_b}, rng_seed={self.rng_seed})"
        )

    def get_result_type(self) -> str:
        return "distribution"

    def keyed(self, *key: Any) -> "BayesianMode":
        """Copy whose ``rng`` is seeded by ``(effective_seed, *key)`` (see :func:`estimator_rng`)."""
        other = copy.copy(self)
        other.rng = estimator_rng(self.effective_seed, *[str(k) for k in key])
        return other

    @property
    def _alpha(self) -> float:
        return (1.0 - self.ci_level) / 2.0

    # ------------------------------------------------------------------ primitives
    def rate_estimation(self, successes: int, trials: int) -> Summary:
        """Beta(a + k, b + n − k) posterior of a rate (spec §4.3, §19).

        Returns the exact posterior mean, exact equal-tailed quantiles (``beta.ppf``) and
        ``mc_samples`` draws. ``trials == 0`` gives the prior. Example: k=2, n=10, Beta(1,1)
        prior -> mean 0.25, 95 % CI [0.0602, 0.5178].

        Raises:
            ValueError: negative counts or ``successes > trials`` (case-004).
        """
        mean, lo, hi = beta_posterior_interval(successes, trials, self.beta_prior_a, self.beta_prior_b, self.ci_level)
        k, n = check_counts(successes, trials)
        samples = self.rng.beta(self.beta_prior_a + k, self.beta_prior_b + (n - k), size=self.mc_samples)
        return {"mean": mean, "ci_low": lo, "ci_high": hi, "samples": samples}

    def distribution_divergence(
        self,
        observed: Mapping[str, float],
        reference: Mapping[str, float],
        divergence_type: str = "total_variation",
    ) -> Summary:
        """Posterior of the total variation distance between p and the reference q.

        ``observed`` holds *counts*. Categories = keys of ``reference`` followed by any other
        observed key, so declared zero-count groups are kept (spec §17 item 2 fixed).
        ``p ~ Dirichlet(α₀ + counts)``; per draw ``½ Σ |p − q|`` with ``q`` renormalised (a
        category missing from ``reference`` gets weight 1/#categories before renormalising).

        Raises:
            NotImplementedError: other divergence types.
            ValueError: negative counts, or a reference that sums to 0.
        """
        if divergence_type != "total_variation":
            raise NotImplementedError(f"divergence_type {quoted(divergence_type)} is not supported")
        check_count_map("observed", observed)
        check_count_map("reference", reference)
        cats = list(dict.fromkeys([*reference.keys(), *observed.keys()]))
        if not cats:
            return empty_summary()
        counts = np.array([float(observed.get(c, 0.0)) for c in cats])
        ref = np.array([float(reference.get(c, 1.0 / len(cats))) for c in cats])
        if ref.sum() <= 0:
            raise ValueError("reference must have a positive total")
        ref = ref / ref.sum()
        p = self.rng.dirichlet(self.dirichlet_prior + counts, size=self.mc_samples)
        tvd = 0.5 * np.abs(p - ref[None, :]).sum(axis=1)
        return self.summarize(tvd)

    def _samples_of(self, v: Any) -> np.ndarray:
        if isinstance(v, dict):
            s = v.get("samples")
            if s is not None and len(s) == self.mc_samples:
                return np.asarray(s, dtype=np.float64)
            m = v.get("mean")
            return np.full(self.mc_samples, 0.0 if m is None else float(m))
        return np.full(self.mc_samples, float(v))

    def aggregate_metrics(self, metrics: Mapping[str, Any], weights: Mapping[str, float]) -> Summary:
        """Weighted sum applied per MC draw, then summarised (spec §4.3).

        Weights are normalised to sum 1; a metric without samples counts as a constant; names
        missing from ``weights`` get weight 0. Total weight 0, or a metric of positive weight that
        is undefined (``None`` or an empty summary), gives the empty summary — the same rule as
        :meth:`FrequentistMode.aggregate_metrics`.

        Raises:
            ValueError: a negative or non-finite weight.
        """
        check_count_map("weights", weights)
        total = float(sum(weights.values()))
        if total == 0:
            return empty_summary()
        acc = np.zeros(self.mc_samples)
        for k, v in metrics.items():
            w = float(weights.get(k, 0.0)) / total
            if w:
                if v is None or (isinstance(v, dict) and v.get("mean") is None):
                    return empty_summary()
                acc = acc + w * self._samples_of(v)
        return self.summarize(acc)

    def dispersion_metric(self, values: Mapping[str, Any], center: str = "mean") -> Summary:
        """Mean absolute deviation around the per-draw mean or median, summarised (spec §4.3).

        Empty ``values`` give the empty summary (no data), as :meth:`FrequentistMode.dispersion_metric`
        gives ``None``; undefined values (``None`` or an empty summary) are left out.

        Raises:
            ValueError: unknown ``center``.
        """
        if center not in ("mean", "median"):
            raise ValueError(f"Unknown center type {quoted(center)}; use 'mean' or 'median'")
        live = [v for v in values.values() if v is not None and not (isinstance(v, dict) and v.get("mean") is None)]
        if not live:
            return empty_summary()
        mat = np.stack([self._samples_of(v) for v in live])  # (groups, draws)
        c = mat.mean(axis=0) if center == "mean" else np.median(mat, axis=0)
        return self.summarize(np.abs(mat - c[None, :]).mean(axis=0))
