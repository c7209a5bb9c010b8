"""The four statistical primitives, seeding, percentile intervals and exact sums.

Reference values come from spec §19 (``/work/shared/spec/upstream-spec.md``); behaviour from
spec §4.2 / §4.3 and DESIGN §4. Tolerances are used only where the spec says "≈" or the value
is Monte-Carlo.
"""
from __future__ import annotations

import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from scipy import integrate, stats

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical import BayesianMode, FrequentistMode, StatisticalMode
from fair_forge_beam.statistical import combiners
from fair_forge_beam.statistical.base import percentile_interval
from fair_forge_beam.statistical.exact import exact_ratio, from_exact, to_exact
from fair_forge_beam.statistical.seeding import estimator_rng, stable_hash64

ALPHA95 = (1.0 - 0.95) / 2.0


# =============================================================================== frequentist
class TestFrequentistPrimitives:
    def test_tvd_reference(self):
        # spec §19: TVD {A:.3, B:.7} vs {.5, .5} = 0.2
        assert FrequentistMode().distribution_divergence({"A": 0.3, "B": 0.7}, {"A": 0.5, "B": 0.5}) == pytest.approx(0.2, abs=1e-15)

    def test_tvd_union_of_keys_missing_is_zero(self):
        # spec §4.2: union of keys, missing = 0; nothing renormalised
        m = FrequentistMode()
        assert m.distribution_divergence({"A": 1.0}, {"B": 1.0}) == 1.0
        assert m.distribution_divergence({}, {}) == 0.0
        assert m.distribution_divergence({"A": 0.5}, {"A": 0.5, "B": 0.5}) == 0.25

    def test_tvd_other_type_not_implemented(self):
        with pytest.raises(NotImplementedError):
            FrequentistMode().distribution_divergence({"A": 1.0}, {"A": 1.0}, divergence_type="kl")

    def test_mad_mean_centre(self):
        # spec §19: MAD mean-centre {0.2, 0.4, 0.6} = 0.1333..
        v = FrequentistMode().dispersion_metric({"a": 0.2, "b": 0.4, "c": 0.6}, center="mean")
        assert v == pytest.approx(0.4 / 3, abs=1e-15)

    def test_mad_median_centre(self):
        # spec §19: MAD median-centre {0, 0.5, 1} = 0.3333..
        v = FrequentistMode().dispersion_metric({"a": 0.0, "b": 0.5, "c": 1.0}, center="median")
        assert v == pytest.approx(1 / 3, abs=1e-15)

    def test_mad_median_differs_from_mean_centre(self):
        vals = {"a": 0.0, "b": 0.0, "c": 1.0}
        m = FrequentistMode()
        assert m.dispersion_metric(vals, "median") == pytest.approx(1 / 3, abs=1e-15)  # centre 0
        assert m.dispersion_metric(vals, "mean") == pytest.approx(4 / 9, abs=1e-15)  # centre 1/3

    def test_mad_empty_and_unknown_centre(self):
        m = FrequentistMode()
        # issue 13 item 9: empty input is "no data" in both modes (was 0.0 here, None in Bayesian mode)
        assert m.dispersion_metric({}) is None
        with pytest.raises(ValueError, match="Unknown center"):
            m.dispersion_metric({"a": 1.0}, center="mode")

    def test_aggregate_reference(self):
        # spec §19: aggregate {0, 1} with weights {1, 3} = 0.75
        assert FrequentistMode().aggregate_metrics({"x": 0.0, "y": 1.0}, {"x": 1.0, "y": 3.0}) == 0.75

    def test_aggregate_zero_total_and_missing_weight(self):
        m = FrequentistMode()
        # issue 13 item 9: zero total weight is "no data" in both modes (was 0.0 here, None in Bayesian mode)
        assert m.aggregate_metrics({"x": 0.3}, {"x": 0.0}) is None
        with pytest.raises(KeyError):
            m.aggregate_metrics({"x": 0.3, "y": 0.5}, {"x": 1.0})
        # extra weight keys still count in the total (spec §4.2)
        assert m.aggregate_metrics({"x": 1.0}, {"x": 1.0, "z": 1.0}) == 0.5

    def test_aggregate_uses_summary_mean(self):
        m = FrequentistMode()
        assert m.aggregate_metrics({"x": {"mean": 0.2}, "y": 1.0}, {"x": 1.0, "y": 1.0}) == pytest.approx(0.6, abs=1e-15)

    def test_rate(self):
        m = FrequentistMode()
        assert m.rate_estimation(3, 4) == 0.75
        assert m.rate_estimation(0, 5) == 0.0
        assert m.rate_estimation(5, 5) == 1.0

    def test_rate_no_data_is_none(self):
        # case-004: a clearly marked empty result, never a fake 0.0
        assert FrequentistMode().rate_estimation(0, 0) is None
        est = combiners.estimate_rate(0, 0, FrequentistMode())
        assert est.mean is None and est.ci_low is None and est.ci_high is None and est.n == 0

    def test_result_type(self):
        assert FrequentistMode().get_result_type() == "point_estimate"
        assert not FrequentistMode().is_bayesian


# =============================================================================== bayesian rates
@pytest.mark.parametrize(
    "k, n, mean, ci_low, ci_high, mean_dp",
    [
        (2, 10, 0.25, 0.0602, 0.5178, 4),  # spec §19: Beta(3, 9)
        (60, 200, 0.302, 0.2408, 0.3669, 3),  # spec §19: Beta(61, 141)
    ],
)
class TestBayesianRateReference:
    def test_rate_estimation(self, k, n, mean, ci_low, ci_high, mean_dp):
        s = BayesianMode().rate_estimation(k, n)
        assert round(s["mean"], mean_dp) == mean
        assert round(s["ci_low"], 4) == ci_low
        assert round(s["ci_high"], 4) == ci_high
        assert s["samples"].shape == (5000,)

    def test_estimate_rate(self, k, n, mean, ci_low, ci_high, mean_dp):
        e = combiners.estimate_rate(k, n, BayesianMode())
        assert isinstance(e, Estimate)
        assert round(e.mean, mean_dp) == mean
        assert round(e.ci_low, 4) == ci_low
        assert round(e.ci_high, 4) == ci_high
        assert e.n == n

    def test_equals_scipy_beta_exactly(self, k, n, mean, ci_low, ci_high, mean_dp):
        dist = stats.beta(1 + k, 1 + n - k)
        lo, hi = dist.ppf([ALPHA95, 1 - ALPHA95])
        for got in (BayesianMode().rate_estimation(k, n), combiners.estimate_rate(k, n, BayesianMode()).model_dump()):
            assert got["mean"] == dist.mean()
            assert got["ci_low"] == lo
            assert got["ci_high"] == hi

    def test_mc_samples_follow_the_posterior(self, k, n, mean, ci_low, ci_high, mean_dp):
        s = BayesianMode(mc_samples=5000).rate_estimation(k, n)["samples"]
        dist = stats.beta(1 + k, 1 + n - k)
        # Monte-Carlo: 5000 draws, standard error of the mean = sd / sqrt(5000)
        assert abs(s.mean() - dist.mean()) < 5 * dist.std() / math.sqrt(5000)
        assert stats.kstest(s, dist.cdf).pvalue > 1e-4


def test_bayesian_rate_respects_prior_and_ci_level():
    m = BayesianMode(beta_prior_a=2.0, beta_prior_b=5.0, ci_level=0.9)
    dist = stats.beta(2 + 3, 5 + 7)
    lo, hi = dist.ppf([0.05, 0.95])
    for got in (m.rate_estimation(3, 10), combiners.estimate_rate(3, 10, m).model_dump()):
        assert got["mean"] == pytest.approx(5 / 17, abs=1e-15)
        assert got["ci_low"] == pytest.approx(lo, abs=1e-12)
        assert got["ci_high"] == pytest.approx(hi, abs=1e-12)


def test_bayesian_rate_no_data_is_the_prior():
    # case-004 / DESIGN: n = 0 -> the Beta(1, 1) prior: mean 0.5, 95 % CI [0.025, 0.975]
    s = BayesianMode().rate_estimation(0, 0)
    e = combiners.estimate_rate(0, 0, BayesianMode())
    for got in (s, e.model_dump()):
        assert got["mean"] == 0.5
        assert got["ci_low"] == pytest.approx(0.025, abs=1e-12)
        assert got["ci_high"] == pytest.approx(0.975, abs=1e-12)
    assert e.n == 0
    assert s["samples"].shape == (5000,)
    assert np.all((s["samples"] >= 0) & (s["samples"] <= 1))


def test_bayesian_mode_parameter_validation():
    for kwargs in ({"mc_samples": 10}, {"mc_samples": 100.5}, {"ci_level": 1.0}, {"ci_level": 0.0},
                   {"dirichlet_prior": 0.0}, {"beta_prior_a": -1.0}, {"beta_prior_b": float("inf")}):
        with pytest.raises(ValueError):
            BayesianMode(**kwargs)


# =============================================================================== bayesian divergence
def _expected_abs_dev_beta(a, b, c):
    """E|p - c| for p ~ Beta(a, b) (numerical integration)."""
    pdf = stats.beta(a, b).pdf
    v1, _ = integrate.quad(lambda p: (c - p) * pdf(p), 0, c)
    v2, _ = integrate.quad(lambda p: (p - c) * pdf(p), c, 1)
    return v1 + v2


class TestBayesianDivergence:
    def test_declared_zero_count_category_is_included(self):
        """Categories = the declared set (keys of ``reference``), zero counts included (DESIGN §4).

        observed {A: 3} vs reference {A: .5, B: .5}: p ~ Dirichlet(4, 1), TVD = |p_A − 0.5|.
        Upstream (categories = observed keys only) would give TVD ≡ 0.
        """
        s = BayesianMode().distribution_divergence({"A": 3}, {"A": 0.5, "B": 0.5})
        expected = _expected_abs_dev_beta(4, 1, 0.5)  # ≈ 0.34
        assert s["samples"].shape == (5000,)
        assert s["mean"] == pytest.approx(expected, abs=0.01)
        assert s["ci_low"] < s["mean"] < s["ci_high"]
        assert s["ci_high"] > 0.3

    def test_matches_hand_dirichlet_loosely(self):
        """Same seed, a hand-written Dirichlet computation: close (only loosely compared)."""
        obs = {"A": 7, "B": 0, "C": 2}
        ref = {"A": 0.2, "B": 0.3, "C": 0.5, "D": 0.0}
        s = BayesianMode(rng_seed=42).distribution_divergence(obs, ref)
        counts = np.array([7.0, 0.0, 2.0, 0.0])
        q = np.array([0.2, 0.3, 0.5, 0.0])
        p = np.random.default_rng(42).dirichlet(1.0 + counts, size=5000)
        tvd = 0.5 * np.abs(p - q).sum(axis=1)
        assert s["mean"] == pytest.approx(tvd.mean(), abs=0.01)
        assert s["ci_low"] == pytest.approx(np.quantile(tvd, ALPHA95), abs=0.02)
        assert s["ci_high"] == pytest.approx(np.quantile(tvd, 1 - ALPHA95), abs=0.02)

    def test_reference_renormalised_and_extra_observed_category(self):
        """A category observed but not in ``reference`` gets 1/#categories before renormalising."""
        obs = {"A": 1000, "C": 0}
        ref = {"A": 2.0, "B": 2.0}  # unnormalised
        s = BayesianMode().distribution_divergence(obs, ref)
        # cats [A, B, C], q = [2, 2, 1/3] / (13/3) = [6/13, 6/13, 1/13]; p ≈ (1, 0, 0)
        expected = 0.5 * (7 / 13 + 6 / 13 + 1 / 13)
        assert s["mean"] == pytest.approx(expected, abs=0.01)

    def test_no_categories_is_empty(self):
        s = BayesianMode().distribution_divergence({}, {})
        assert s["mean"] is None and s["ci_low"] is None and s["ci_high"] is None

    def test_other_type_not_implemented(self):
        with pytest.raises(NotImplementedError):
            BayesianMode().distribution_divergence({"A": 1}, {"A": 1.0}, divergence_type="kl")

    def test_zero_reference_total_rejected(self):
        with pytest.raises(ValueError):
            BayesianMode().distribution_divergence({"A": 1}, {"A": 0.0})

    def test_estimate_divergence_uses_declared_categories(self):
        cats = ["A", "B"]
        e = combiners.estimate_divergence([3, 0], cats, {"A": 0.5, "B": 0.5}, BayesianMode())
        assert e.n == 3
        assert e.mean == pytest.approx(_expected_abs_dev_beta(4, 1, 0.5), abs=0.01)
        f = combiners.estimate_divergence([3, 1], cats, {"A": 0.5, "B": 0.5}, FrequentistMode())
        assert f.mean == 0.25 and f.ci_low is None and f.n == 4
        assert combiners.estimate_divergence([0, 0], cats, {"A": 0.5, "B": 0.5}, FrequentistMode()).mean is None


def test_estimate_distribution_exact_beta_marginals():
    cats = ["a", "b", "c"]
    e = combiners.estimate_distribution([3, 0, 1], cats, BayesianMode())
    # marginal of Dirichlet(4, 1, 2): p_b ~ Beta(1, 6)
    lo, hi = stats.beta(1, 6).ppf([ALPHA95, 1 - ALPHA95])
    assert e["b"].mean == pytest.approx(1 / 7, abs=1e-15)
    assert e["b"].ci_low == pytest.approx(lo, abs=1e-12) and e["b"].ci_high == pytest.approx(hi, abs=1e-12)
    assert e["a"].mean == pytest.approx(4 / 7, abs=1e-15)
    f = combiners.estimate_distribution([3, 0, 1], cats, FrequentistMode())
    assert f["a"].mean == 0.75 and f["b"].mean == 0.0 and f["c"].mean == 0.25
    assert all(v.mean is None for v in combiners.estimate_distribution([0, 0, 0], cats, FrequentistMode()).values())


# =============================================================================== bayesian aggregate / dispersion
class TestBayesianAggregateDispersion:
    def test_aggregate_constants_reference(self):
        # spec §19 in Bayesian form: constants 0 and 1 with weights 1 and 3 -> every draw 0.75
        s = BayesianMode().aggregate_metrics({"x": 0.0, "y": 1.0}, {"x": 1.0, "y": 3.0})
        assert s["mean"] == 0.75 and s["ci_low"] == 0.75 and s["ci_high"] == 0.75
        assert s["samples"].shape == (5000,)

    def test_aggregate_per_draw(self):
        m = BayesianMode(mc_samples=500)
        a = np.random.default_rng(1).random(500)
        b = np.random.default_rng(2).random(500)
        s = m.aggregate_metrics(
            {"a": {"mean": 9.0, "samples": a}, "b": {"mean": 9.0, "samples": b}, "c": 0.4, "ignored": 123.0},
            {"a": 1.0, "b": 2.0, "c": 1.0},  # "ignored" has no weight -> weight 0
        )
        expected = 0.25 * a + 0.5 * b + 0.25 * 0.4
        np.testing.assert_allclose(s["samples"], expected, rtol=0, atol=1e-15)
        assert s["mean"] == pytest.approx(expected.mean(), abs=1e-15)
        assert s["ci_low"] == pytest.approx(np.quantile(expected, ALPHA95), abs=1e-15)
        assert s["ci_high"] == pytest.approx(np.quantile(expected, 1 - ALPHA95), abs=1e-15)

    def test_aggregate_wrong_length_samples_use_mean(self):
        m = BayesianMode(mc_samples=200)
        s = m.aggregate_metrics({"a": {"mean": 0.3, "samples": np.zeros(7)}}, {"a": 1.0})
        assert np.all(s["samples"] == 0.3)

    def test_aggregate_zero_total_is_empty(self):
        s = BayesianMode().aggregate_metrics({"a": 0.3}, {"a": 0.0})
        assert s["mean"] is None

    def test_dispersion_constants_reference(self):
        m = BayesianMode()
        s = m.dispersion_metric({"a": 0.2, "b": 0.4, "c": 0.6}, "mean")
        assert s["mean"] == pytest.approx(0.4 / 3, abs=1e-15)
        assert s["ci_low"] == pytest.approx(0.4 / 3, abs=1e-15) and s["ci_high"] == pytest.approx(0.4 / 3, abs=1e-15)
        s = m.dispersion_metric({"a": 0.0, "b": 0.5, "c": 1.0}, "median")
        assert s["mean"] == pytest.approx(1 / 3, abs=1e-15)

    def test_dispersion_per_draw(self):
        m = BayesianMode(mc_samples=300)
        r = np.random.default_rng(7)
        g = {k: {"mean": 0.0, "samples": r.random(300)} for k in "abcd"}
        mat = np.stack([g[k]["samples"] for k in "abcd"])
        for centre, c in (("mean", mat.mean(axis=0)), ("median", np.median(mat, axis=0))):
            s = m.dispersion_metric(g, centre)
            np.testing.assert_allclose(s["samples"], np.abs(mat - c).mean(axis=0), rtol=0, atol=1e-15)

    def test_dispersion_empty_and_unknown_centre(self):
        assert BayesianMode().dispersion_metric({})["mean"] is None
        with pytest.raises(ValueError, match="Unknown center"):
            BayesianMode().dispersion_metric({"a": 0.1}, center="max")

    def test_result_type(self):
        assert BayesianMode().get_result_type() == "distribution"


# =============================================================================== seeding
STABLE_HASH_EXPECTED = 1867727292860007503  # stable_hash64("fair-forge", 42, b"x"), computed once

_SUBPROCESS_CODE = (
    "from fair_forge_beam.statistical import BayesianMode;"
    "from fair_forge_beam.statistical.seeding import stable_hash64;"
    "s = BayesianMode().keyed('m', 's', 'c').rate_estimation(2, 10)['samples'];"
    "print(stable_hash64('fair-forge', 42, b'x'), stable_hash64('a', 'b'));"
    "print(','.join(repr(float(x)) for x in s[:20]))"
)


class TestSeeding:
    def test_stable_hash64_hard_coded(self):
        assert stable_hash64("fair-forge", 42, b"x") == STABLE_HASH_EXPECTED

    def test_stable_hash64_properties(self):
        assert stable_hash64("ab", "c") != stable_hash64("a", "bc")  # length-prefixed
        assert stable_hash64("1") != stable_hash64(1)  # typed
        assert 0 <= stable_hash64("x") < 2**64
        with pytest.raises(TypeError):
            stable_hash64(1.5)

    def test_keyed_draws_reproducible(self):
        a = BayesianMode().keyed("m", "s", "c").rate_estimation(2, 10)["samples"]
        b = BayesianMode().keyed("m", "s", "c").rate_estimation(2, 10)["samples"]
        np.testing.assert_array_equal(a, b)

    def test_keyed_draws_differ_between_keys_and_seeds(self):
        base = BayesianMode().keyed("m", "s", "c").rate_estimation(2, 10)["samples"]
        for other in (
            BayesianMode().keyed("m", "s", "d"),
            BayesianMode().keyed("m", "t", "c"),
            BayesianMode().keyed("m2", "s", "c"),
            BayesianMode(rng_seed=43).keyed("m", "s", "c"),
        ):
            assert not np.array_equal(base, other.rate_estimation(2, 10)["samples"])

    def test_keyed_is_independent_of_call_order(self):
        """Upstream shares one generator (spec §4.3); keyed copies do not depend on prior calls."""
        mode = BayesianMode()
        first = mode.keyed("m", "s", "c").distribution_divergence({"A": 2}, {"A": 0.5, "B": 0.5})["samples"]
        mode.rate_estimation(1, 2)  # consumes the mode's own generator
        mode.keyed("other").rate_estimation(1, 2)
        again = mode.keyed("m", "s", "c").distribution_divergence({"A": 2}, {"A": 0.5, "B": 0.5})["samples"]
        np.testing.assert_array_equal(first, again)

    def test_keyed_copy_keeps_parameters(self):
        m = BayesianMode(mc_samples=321, ci_level=0.8, beta_prior_a=2.0, rng_seed=5).keyed("k")
        assert (m.mc_samples, m.ci_level, m.beta_prior_a, m.rng_seed) == (321, 0.8, 2.0, 5)

    def test_estimator_rng_stream(self):
        a = estimator_rng(42, "m", "s", "c").random(5)
        np.testing.assert_array_equal(a, estimator_rng(42, "m", "s", "c").random(5))
        assert not np.array_equal(a, estimator_rng(42, "m", "s", "d").random(5))

    def test_same_draws_in_another_process(self):
        """A fresh interpreter with a different PYTHONHASHSEED gives the same hash and draws
        (proves no process-salted ``hash()`` is involved)."""
        env = dict(os.environ, PYTHONHASHSEED="12345")
        out = subprocess.run([sys.executable, "-c", _SUBPROCESS_CODE], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()[-2:]
        assert lines[0] == f"{STABLE_HASH_EXPECTED} {stable_hash64('a', 'b')}"
        here = BayesianMode().keyed("m", "s", "c").rate_estimation(2, 10)["samples"][:20]
        assert lines[1] == ",".join(repr(float(x)) for x in here)


# =============================================================================== percentile interval
@given(
    values=st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=400),
    alpha=st.floats(min_value=0.0, max_value=0.5),
)
def test_percentile_interval_equals_numpy_linear_quantile(values, alpha):
    a = np.array(values, dtype=np.float64)
    lo, hi = percentile_interval(a.copy(), alpha)
    q = np.quantile(a, [alpha, 1.0 - alpha], method="linear")
    assert (lo, hi) == (float(q[0]), float(q[1]))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 39, 40, 41, 100, 199, 200, 201, 999, 1000, 5000, 5001])
@pytest.mark.parametrize("alpha", [0.0, 0.005, 0.025, 0.05, 0.1, 0.25, 0.5])
def test_percentile_interval_sizes(n, alpha):
    rng = np.random.default_rng(n)
    for a in (rng.random(n), rng.integers(0, 5, n).astype(float), rng.standard_normal(n) * 1e-300):
        lo, hi = percentile_interval(a, alpha)
        q = np.quantile(a, [alpha, 1.0 - alpha])
        assert (lo, hi) == (float(q[0]), float(q[1]))


_tricky = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), float("-inf"), 1e-300])


def _partition_oracle(row: np.ndarray, alpha: float) -> tuple[float, float]:
    """The reference every selection path of percentile_interval(s) is held to, written out here
    (independent of the library's code): one two-point ``numpy.partition`` of the row, the next
    order statistic as the smallest value after each point, type-7 interpolation."""
    n = row.size
    pos = [alpha * (n - 1), (1.0 - alpha) * (n - 1)]
    ks = [min(int(np.floor(p)), n - 1) for p in pos]
    part = np.partition(row, sorted(set(ks)))
    ends = [(float(part[k]), float(part[k + 1:].min() if k + 1 < n else part[k]), p - k) for p, k in zip(pos, ks)]
    return tuple(a + (b - a) * t if t < 0.5 else b - (b - a) * (1.0 - t) for a, b, t in ends)


@given(
    rows=st.integers(min_value=1, max_value=3).flatmap(lambda r: st.integers(min_value=1, max_value=60).flatmap(
        lambda n: st.lists(st.lists(st.one_of(_tricky, st.floats(min_value=-3, max_value=3)), min_size=n, max_size=n),
                           min_size=r, max_size=r))),
    alpha=st.sampled_from([0.0, 0.025, 0.05, 0.25, 0.5]),
)
def test_sorted_order_statistics_equal_the_partition_bit_for_bit(rows, alpha):
    """percentile_interval / percentile_intervals give the partition's bits, signed zeros, NaN and
    infinities included (repr compares -0.0 and 0.0 apart)."""
    from fair_forge_beam.statistical.base import percentile_intervals

    arr = np.array(rows, dtype=np.float64)
    want = [_partition_oracle(row.copy(), alpha) for row in arr]
    assert [repr(percentile_interval(row.copy(), alpha)) for row in arr] == [repr(w) for w in want]
    lo, hi = percentile_intervals(arr.copy(), alpha)
    assert [repr((float(a), float(b))) for a, b in zip(lo, hi)] == [repr(w) for w in want]


def _replicate_batches(seed: int, count: int, rows: int = 6, n: int = 5000):
    """Batches shaped like the within-session bootstrap's (``rows`` sessions × ``n`` replicates):
    Dirichlet-weighted means of a few scores, clipped to their range (ties at the ends), some rows
    constant, some with signed zeros, NaN or infinities planted among the draws."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        out = np.empty((rows, n))
        for j in range(rows):
            m = int(rng.integers(3, 9))
            scores = rng.choice([rng.random(m), rng.integers(-1, 2, m).astype(float), np.zeros(m)], p=[0.7, 0.2, 0.1])
            w = rng.standard_exponential((m, n))
            out[j] = np.clip((scores[:, None] * w).sum(axis=0) / w.sum(axis=0), scores.min(), scores.max())
            if rng.random() < 0.05:  # plant awkward values where the order statistics fall (a few batches)
                idx = rng.integers(0, n, int(rng.integers(1, 400)))
                out[j, idx] = rng.choice([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-300], idx.size)
        yield out


@pytest.mark.parametrize("alpha", [0.025, 0.05, 0.005, 0.25])
def test_percentile_intervals_of_replicate_batches_equal_the_partition_bit_for_bit(alpha):
    """The within-session bootstrap's batches (6 × 5,000): every row's interval, from the batched
    call and from the one-sample call, has the bits of the two-point partition of that row alone."""
    from fair_forge_beam.statistical.base import percentile_intervals

    for batch in _replicate_batches(int(alpha * 1e4), 40):
        want = [_partition_oracle(row.copy(), alpha) for row in batch]
        lo, hi = percentile_intervals(batch, alpha)
        assert [repr((float(a), float(b))) for a, b in zip(lo, hi)] == [repr(w) for w in want]
        assert [repr(percentile_interval(row, alpha)) for row in batch] == [repr(w) for w in want]


def test_percentile_intervals_select_with_one_partition(monkeypatch):
    """One selection path: a single two-point ``numpy.partition`` per call, rows or one sample (two
    one-point partitions, the path that replaced it for a while, cost 109-135 against 70-76 µs per
    5,000 replicates on this project's machine: docs/performance.md, bayes45)."""
    from fair_forge_beam.statistical import base

    calls = []
    real = np.partition

    def counting(a, kth, *args, **kw):
        calls.append(np.atleast_1d(kth).size)
        return real(a, kth, *args, **kw)

    monkeypatch.setattr(base.np, "partition", counting)
    batch = next(_replicate_batches(7, 1))
    base.percentile_intervals(batch, 0.025)
    assert calls == [2]
    calls.clear()
    base.percentile_interval(batch[0], 0.025)
    assert calls == [2]


def test_summarize_uses_percentile_interval():
    s = np.random.default_rng(3).random(5000)
    out = BayesianMode(ci_level=0.9).summarize(s)
    q = np.quantile(s, [0.05, 0.95])
    assert out["mean"] == float(np.mean(s))
    assert (out["ci_low"], out["ci_high"]) == (float(q[0]), float(q[1]))


# =============================================================================== exact sums
_finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(xs=st.lists(_finite, max_size=60), seed=st.integers(0, 2**32 - 1))
def test_exact_sum_order_independent_and_equals_fsum(xs, seed):
    perm = list(xs)
    random.Random(seed).shuffle(perm)
    a = sum((to_exact(x) for x in xs), 0)
    b = 0
    for x in perm:
        b += to_exact(x)
    assert a == b
    assert from_exact(a) == math.fsum(xs)
    assert from_exact(b) == math.fsum(perm)


@given(x=_finite)
def test_exact_round_trip(x):
    assert from_exact(to_exact(x)) == x


@given(a=_finite, b=_finite.filter(lambda v: v != 0))
def test_exact_ratio_is_correctly_rounded_division(a, b):
    assume(math.isfinite(a / b))  # an overflowing quotient has no float to compare with
    assert exact_ratio(to_exact(a), to_exact(b)) == a / b


@given(nums=st.lists(_finite, min_size=1, max_size=8), dens=st.lists(_finite, min_size=1, max_size=8))
def test_exact_ratio_and_from_exact_equal_the_fraction_they_replace(nums, dens):
    """``int / int`` (the fast path) gives the float of the reduced ``Fraction`` bit for bit,
    for exact sums of any size and sign (zero's sign included)."""
    from fractions import Fraction

    num, den = sum(map(to_exact, nums)), sum(map(to_exact, dens))
    for total in (num, den, -num):
        assert math.copysign(1.0, from_exact(total)) == math.copysign(1.0, float(Fraction(total, 2**1074)))
        assert from_exact(total) == float(Fraction(total, 2**1074))
    if den != 0:
        try:
            want = float(Fraction(num, den))
        except OverflowError:
            with pytest.raises(OverflowError):
                exact_ratio(num, den)
        else:
            got = exact_ratio(num, den)
            assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
    with pytest.raises(ZeroDivisionError):
        exact_ratio(num, 0)


def test_exact_units():
    assert to_exact(5e-324) == 1
    assert to_exact(1.0) == 2**1074
    assert to_exact(-0.0) == 0
    # fsum-like: 0.1 + 0.2 - 0.3 is not 0 as floats but the exact sum rounds once
    assert from_exact(to_exact(0.1) + to_exact(0.2) + to_exact(-0.3)) == math.fsum([0.1, 0.2, -0.3])
    assert from_exact(to_exact(1e16) + to_exact(1.0) + to_exact(-1e16)) == 1.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_exact_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="non-finite"):
        to_exact(bad)


# =============================================================================== custom modes
class WilsonMode(StatisticalMode):
    """The upstream docs' example custom mode: Wilson score interval for rates."""

    def __init__(self, z: float = 1.96):
        self.z = z

    def get_result_type(self) -> str:
        return "distribution"

    def rate_estimation(self, successes, trials):
        if trials == 0:
            return {"mean": 0.0, "ci_low": 0.0, "ci_high": 1.0}
        p = successes / trials
        z2 = self.z**2
        denom = 1 + z2 / trials
        centre = (p + z2 / (2 * trials)) / denom
        half = self.z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials**2)) / denom
        return {"mean": p, "ci_low": centre - half, "ci_high": centre + half}

    def distribution_divergence(self, observed, reference, divergence_type="total_variation"):
        keys = set(observed) | set(reference)
        v = 0.5 * sum(abs(observed.get(k, 0) - reference.get(k, 0)) for k in keys)
        return {"mean": v, "ci_low": v, "ci_high": v}

    def aggregate_metrics(self, metrics, weights):
        total = sum(weights.values())
        v = sum(m["mean"] * weights[k] for k, m in metrics.items()) / total
        return {"mean": v, "ci_low": v, "ci_high": v}

    def dispersion_metric(self, values, center="mean"):
        vals = [v["mean"] for v in values.values()]
        c = sum(vals) / len(vals)
        d = sum(abs(v - c) for v in vals) / len(vals)
        return {"mean": d, "ci_low": d, "ci_high": d}


class PointMode(StatisticalMode):
    """A minimal custom point-estimate mode."""

    def get_result_type(self):
        return "point_estimate"

    def rate_estimation(self, successes, trials):
        return successes / trials if trials else None

    def distribution_divergence(self, observed, reference, divergence_type="total_variation"):
        return 0.0

    def aggregate_metrics(self, metrics, weights):
        return 0.0

    def dispersion_metric(self, values, center="mean"):
        return 0.0


class TestCustomModes:
    def test_wilson_mode_plugs_into_estimate_rate(self):
        m = WilsonMode()
        e = combiners.estimate_rate(7, 20, m)
        # Wilson 95 % interval for 7/20 (textbook formula, z = 1.96)
        p, n, z = 0.35, 20, 1.96
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert e.mean == pytest.approx(0.35, abs=1e-15)
        assert e.ci_low == pytest.approx(centre - half, abs=1e-12)
        assert e.ci_high == pytest.approx(centre + half, abs=1e-12)
        assert e.ci_low == pytest.approx(0.1812, abs=1e-4) and e.ci_high == pytest.approx(0.5671, abs=1e-4)
        assert e.n == 20

    def test_wilson_mode_defaults(self):
        m = WilsonMode()
        assert m.is_bayesian
        assert m.keyed("a", "b") is m
        assert m.replicate_count == 5000 and m.seed == 42 and m.ci_level == 0.95

    def test_point_mode_bootstrap_means(self):
        fn = combiners.BootstrapMeanCombineFn(n_values=2, max_units=8)
        acc = fn.create_accumulator()
        for unit, w, vals in (("s1", 2.0, (0.5, 1.0)), ("s2", 1.0, (0.2, 0.0)), ("s3", 1.0, (1.0, 0.5))):
            acc = fn.add_input(acc, (unit, w, vals))
        out = combiners.estimate_bootstrap_means(fn.extract_output(acc), PointMode())
        assert [e.mean for e in out] == [pytest.approx(2.2 / 4, abs=1e-15), pytest.approx(2.5 / 4, abs=1e-15)]
        assert all(e.ci_low is None and e.ci_high is None and e.n == 3 for e in out)

    def test_custom_distribution_mode_bootstrap_means(self):
        """A distribution mode without mc_samples/rng attributes still gets a bootstrap (defaults)."""
        fn = combiners.BootstrapMeanCombineFn(n_values=1)
        acc = fn.create_accumulator()
        for i, v in enumerate([0.1, 0.9, 0.4, 0.6]):
            acc = fn.add_input(acc, (f"s{i}", 1.0, (v,)))
        (e,) = combiners.estimate_bootstrap_means(acc, WilsonMode())
        (ref,) = combiners.estimate_bootstrap_means(acc, BayesianMode(mc_samples=5000, rng_seed=42))
        assert e == ref  # same defaults: 5000 replicates, seed 42, 95 %
        assert e.ci_low < 0.5 < e.ci_high
