"""case-005: k <= 0 for pass@k / pass^k is rejected with a clear message, never pass@k = -1 or pass^k = 2."""
import pytest

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.passk import (
    check_k,
    pass_at_k_plugin,
    pass_at_k_unbiased,
    pass_k_estimates,
    pass_pow_k_plugin,
    pass_pow_k_unbiased,
)


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3", None])
def test_case_005_nonpositive_k_is_rejected(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        check_k(k)
    for fn in (pass_at_k_plugin, pass_pow_k_plugin, pass_at_k_unbiased, pass_pow_k_unbiased):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            fn(3, 1, k)
    for mode in (FrequentistMode(), BayesianMode()):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            pass_k_estimates(3, 1, k, mode)


def test_case_005_valid_k_stays_in_range():
    for k in (1, 2, 3, 10):
        for c in range(4):
            for v in (pass_at_k_plugin(3, c, k), pass_pow_k_plugin(3, c, k)):
                assert 0.0 <= v <= 1.0
