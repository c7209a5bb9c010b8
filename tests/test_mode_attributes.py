"""``StatisticalMode`` carries ``ci_level``, the priors, ``mc_samples`` and the seeds as
attributes for every mode (issue 14 item 2): no reader needs ``getattr(mode, name, default)``."""
from __future__ import annotations

import pytest

from fair_forge_beam.reports.results import results_config
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical import BayesianMode, FrequentistMode, StatisticalMode
from fair_forge_beam.statistical.combiners import estimate_rate
from fair_forge_beam.statistical.passk import pass_k_estimates


class _CustomDistribution(StatisticalMode):
    """A distribution mode that declares no priors: its own rate_estimation is used."""

    def rate_estimation(self, successes, trials):
        return {"mean": 0.5, "ci_low": 0.1, "ci_high": 0.9, "samples": None}

    def distribution_divergence(self, observed, reference, divergence_type="total_variation"):
        raise NotImplementedError

    def aggregate_metrics(self, metrics, weights):
        raise NotImplementedError

    def dispersion_metric(self, values, center="mean"):
        raise NotImplementedError

    def get_result_type(self):
        return "distribution"


def test_frequentist_mode_attributes():
    f = FrequentistMode()
    assert f.ci_level == 0.95 and f.tail_probability == pytest.approx(0.025)
    assert (f.beta_prior_a, f.beta_prior_b, f.dirichlet_prior, f.mc_samples, f.rng_seed, f.effective_seed) == (None,) * 6
    assert f.beta_prior() == (1.0, 1.0) and f.dirichlet_concentration() == 1.0
    assert f.replicate_count == 5000 and f.seed == 42


def test_bayesian_mode_attributes():
    b = BayesianMode(mc_samples=200, ci_level=0.9, dirichlet_prior=0.5, beta_prior_a=2.0, beta_prior_b=3.0, rng_seed=7)
    assert b.ci_level == 0.9 and b.tail_probability == pytest.approx(0.05)
    assert b.beta_prior() == (2.0, 3.0) and b.dirichlet_concentration() == 0.5
    assert b.replicate_count == 200 and b.seed == 7 and b.rng_seed == 7


def test_results_config_records_what_the_mode_carries():
    cfg = results_config(["humanity"], FrequentistMode(), ["x.json"])
    assert (cfg["seed"], cfg["mc_samples"], cfg["ci_level"], cfg["beta_prior_a"], cfg["beta_prior_b"]) == (None, None, 0.95, None, None)
    cfg = results_config(["humanity"], BayesianMode(mc_samples=1000, rng_seed=7), ["x.json"])
    assert (cfg["seed"], cfg["mc_samples"], cfg["ci_level"], cfg["beta_prior_a"], cfg["beta_prior_b"]) == (7, 1000, 0.95, 1.0, 1.0)


def test_custom_distribution_mode_without_priors():
    m = _CustomDistribution()
    # no Beta prior declared: the mode's own rate_estimation, as before
    assert estimate_rate(2, 10, m) == Estimate(mean=0.5, ci_low=0.1, ci_high=0.9, n=10)
    # pass@k uses the uniform Beta(1, 1) default and the class ci_level 0.95
    at, _ = pass_k_estimates(10, 2, 1, m)
    ref, _ = pass_k_estimates(10, 2, 1, BayesianMode(mc_samples=100))
    assert at == ref
