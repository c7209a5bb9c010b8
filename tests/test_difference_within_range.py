"""What a comparison shows is what its numbers are (trial49 B4).

* A difference of two rates lies in [−1, 1]: the Agresti–Caffo interval of 6/7 against 0/14 was
  printed ``+0.8571 [+0.4189, +1.0117]`` by ``compare`` and ``+1.012`` on the gate's line. Every
  difference interval lies within ±(high − low) of its estimate's declared range (the metric info's
  ``value_range``).
* A rate is compared in the current run's mode from both runs' counts, so a baseline of the other
  mode is shown as the difference reads it (``k/n``, or the posterior under this run's prior), with
  what its own run shows beside it: the gate's line showed a Bayesian baseline's posterior mean
  0.0625 beside a difference +0.8571 computed from its 0/14.

Expected numbers are computed here from the formulas (Agresti & Caffo 2000; the Beta posterior).
"""
from __future__ import annotations

import math

import pytest
from scipy import stats

from fair_forge_beam.reports.compare import compare_runs, comparison_table
from fair_forge_beam.reports.gates import evaluate_gates, parse_gate
from fair_forge_beam.reports.html import _comparison_view
from fair_forge_beam.statistical.compare import agresti_caffo_difference, difference

Z = stats.norm.ppf(0.975)


def _rate(k, n, bayesian):
    if not bayesian:
        return {"mean": k / n, "ci_low": None, "ci_high": None, "n": n}
    post = stats.beta(1 + k, 1 + n - k)
    return {"mean": (1 + k) / (2 + n), "ci_low": float(post.ppf(0.025)), "ci_high": float(post.ppf(0.975)), "n": n}


def _doc(mode, k, n):
    rec = {"slice": "overall", "n_interactions": n, "n_sessions": n, "n_toxic": k,
           "toxic_rate": _rate(k, n, mode == "bayesian")}
    return {"config": {"mode": mode, "ci_level": 0.95, "seed": 3, "beta_prior_a": 1.0, "beta_prior_b": 1.0},
            "summary": {"interactions_read": n, "metrics": {"toxicity": {"scored": n}}},
            "metrics": {"toxicity": {"slices": [rec]}}}


def _toxic_row(cmp):
    return next(r for r in cmp["rows"] if r["estimate"] == "toxic_rate")


def test_agresti_caffo_interval_is_clipped_to_the_range_of_a_rate_difference():
    p1, p2 = 7 / 9, 1 / 16  # (k + 1) / (n + 2) of 6/7 and 0/14
    half = Z * math.sqrt(p1 * (1 - p1) / 9 + p2 * (1 - p2) / 16)
    assert p1 - p2 + half > 1.01  # the Wald interval reaches past 1
    d = agresti_caffo_difference(6, 7, 0, 14)
    assert d["ci_low"] == pytest.approx(p1 - p2 - half, abs=1e-12) and d["ci_high"] == 1.0
    assert d["mean"] == pytest.approx(6 / 7, abs=1e-12)
    low = agresti_caffo_difference(0, 14, 6, 7)  # the other way round: clipped at −1
    assert low["ci_low"] == -1.0 and low["ci_high"] == pytest.approx(-(p1 - p2 - half), abs=1e-12)


def test_a_normal_approximation_stays_within_the_declared_range():
    # two judge-like scores on [0, 1] with wide intervals: Δ = 0.9 ± z·√(2·0.3²) reaches 1.73
    cur, base = {"mean": 0.95, "ci_low": 0.4, "ci_high": 1.0}, {"mean": 0.05, "ci_low": 0.0, "ci_high": 0.6}
    free = difference(cur, base)
    assert free["ci_high"] > 1.0  # unbounded without the range
    d = difference(cur, base, value_range=(0.0, 1.0))
    assert d["method"] == "normal_from_intervals" and d["ci_high"] == 1.0 and d["ci_low"] == free["ci_low"]
    wide = difference(cur, base, value_range=(0.0, 10.0))  # a range of length 10: the interval as it was
    assert wide == free


def test_compare_and_the_gate_line_never_show_a_rate_difference_past_1():
    cur, base = _doc("frequentist", 6, 7), _doc("frequentist", 0, 14)
    cmp = compare_runs(cur, base)
    row = _toxic_row(cmp)
    assert row["method"] == "agresti_caffo" and row["difference"]["ci_high"] == 1.0
    assert "+1.0000]" in comparison_table(cmp) and "1.0117" not in comparison_table(cmp)
    (check,) = [c for c in evaluate_gates(cur, [parse_gate("regression toxicity toxic_rate not worse")], base)
                if c.field == "toxic_rate"]
    assert check.status == "fail" and check.difference["ci_high"] == 1.0
    assert "+1]" in check.message(0.95) and "1.012" not in check.message(0.95)
    assert "baseline 0;" in check.message(0.95)  # a baseline of this run's mode: shown as its run shows it


def test_a_bayesian_baseline_is_shown_as_a_frequentist_comparison_reads_it():
    cur, base = _doc("frequentist", 6, 7), _doc("bayesian", 0, 14)
    row = _toxic_row(compare_runs(cur, base))
    assert row["difference"]["mean"] == pytest.approx(6 / 7, abs=1e-12)
    # the baseline the difference reads: 0/14 = 0, not its posterior mean 1/16
    assert row["baseline"]["mean"] == 0.0 and row["baseline"]["ci_low"] is None
    assert row["baseline"]["counts"] == [0, 14]
    assert row["baseline"]["its_run"]["mode"] == "bayesian"
    assert row["baseline"]["its_run"]["mean"] == pytest.approx(1 / 16, abs=1e-12)
    assert row["difference"]["mean"] == pytest.approx(row["current"]["mean"] - row["baseline"]["mean"], abs=1e-12)
    (check,) = [c for c in evaluate_gates(cur, [parse_gate("regression toxicity toxic_rate not worse")], base)
                if c.field == "toxic_rate"]
    line = check.message(0.95)
    assert "baseline 0 (k/n = 0/14 as this frequentist run reads it; its bayesian run shows 0.0625 [" in line, line
    assert check.baseline["mean"] == 0.0 and check.baseline["its_run"]["mean"] == pytest.approx(0.0625)
    # the report's comparison table says the same
    view = _comparison_view(compare_runs(cur, base))
    text = next(r["baseline_text"] for r in view["rows"] if r["estimate"] == "toxic_rate")
    assert text.startswith("0.0000 (k/n = 0/14") and "its bayesian run shows 0.0625" in text, text


def test_a_frequentist_baseline_is_shown_as_a_bayesian_comparison_reads_it():
    cur, base = _doc("bayesian", 6, 7), _doc("frequentist", 0, 14)
    row = _toxic_row(compare_runs(cur, base))
    assert row["method"] == "beta_posterior"
    post = stats.beta(1, 15)  # Beta(1 + 0, 1 + 14) under this run's prior
    assert row["baseline"]["mean"] == pytest.approx(1 / 16, abs=1e-12)
    assert row["baseline"]["ci_low"] == pytest.approx(post.ppf(0.025), abs=1e-9)
    assert row["baseline"]["ci_high"] == pytest.approx(post.ppf(0.975), abs=1e-9)
    assert row["baseline"]["its_run"] == {"mode": "frequentist", "mean": 0.0, "ci_low": None, "ci_high": None}
    # the Monte-Carlo mean of the difference is that of the posteriors shown
    assert row["difference"]["mean"] == pytest.approx(row["current"]["mean"] - row["baseline"]["mean"], abs=0.01)


def test_runs_of_one_mode_show_their_own_values():
    for mode in ("bayesian", "frequentist"):
        row = _toxic_row(compare_runs(_doc(mode, 6, 7), _doc(mode, 3, 14)))
        assert row["baseline"] == _rate(3, 14, mode == "bayesian") or mode == "bayesian"
        assert "its_run" not in row["baseline"] and "its_run" not in row["current"], row
