"""pass@k / pass^k estimators: spec §19 values, enumeration, Bayesian closed forms."""
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.passk import (
    pass_at_k_plugin,
    pass_at_k_unbiased,
    pass_k_estimates,
    pass_pow_k_plugin,
    pass_pow_k_unbiased,
)


@pytest.mark.parametrize(
    "n,c,k,at,pw",
    [(3, 1, 3, 0.7037, 0.0370), (3, 2, 3, 0.9630, 0.2963), (3, 2, 5, 0.99588, 0.13169), (9, 3, 3, 0.7037, 0.0370)],
)
def test_plugin_values_spec_19(n, c, k, at, pw):
    assert pass_at_k_plugin(n, c, k) == pytest.approx(at, abs=5e-5)
    assert pass_pow_k_plugin(n, c, k) == pytest.approx(pw, abs=5e-5)


def test_plugin_edges():
    assert pass_at_k_plugin(3, 0, 3) == 0.0 and pass_pow_k_plugin(3, 3, 3) == 1.0
    assert pass_at_k_plugin(0, 0, 3) is None and pass_pow_k_plugin(0, 0, 1) is None


@pytest.mark.parametrize("n", range(1, 8))
def test_unbiased_estimators_equal_enumeration(n):
    for c in range(n + 1):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(combinations(range(n), k))
            any_ok = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
            all_ok = sum(all(outcomes[i] for i in s) for s in subsets) / len(subsets)
            assert pass_at_k_unbiased(n, c, k) == pytest.approx(any_ok, abs=1e-12)
            assert pass_pow_k_unbiased(n, c, k) == pytest.approx(all_ok, abs=1e-12)
        assert pass_at_k_unbiased(n, c, n + 1) is None


def test_bayesian_closed_forms_spec_19():
    at, pw = pass_k_estimates(3, 1, 3, BayesianMode())
    assert at.mean == pytest.approx(0.7143, abs=5e-5) and pw.mean == pytest.approx(0.1143, abs=5e-5)
    draws = stats.beta(2, 3).rvs(400_000, random_state=np.random.default_rng(1))
    assert at.mean == pytest.approx(np.mean(1 - (1 - draws) ** 3), abs=2e-3)
    assert pw.ci_low == pytest.approx(np.quantile(draws**3, 0.025), abs=2e-3)
    assert pw.ci_high == pytest.approx(np.quantile(draws**3, 0.975), abs=2e-3)
    f_at, f_pw = pass_k_estimates(3, 1, 3, FrequentistMode())
    assert f_at.ci_low is None and f_at.mean == pytest.approx(0.7037, abs=5e-5) and f_pw.mean == pytest.approx(0.0370, abs=5e-5)
