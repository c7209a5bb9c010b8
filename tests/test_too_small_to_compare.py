"""Differences need support (issue 27): no credible or detectable difference is claimed for a slice
under the one-session rule, or for an estimate whose interval is degenerate (zero width: its
sessions do not vary). One rule (``statistical.slices.too_small_to_compare``) decides it for the
comparison, the report and the gates alike.

The issue's case: the comparison reported 4 "detectable differences" in
``group_profiling.group_estimates.{women,elderly}.S``, each from a side whose interval had zero
width (``-0.5423 [-0.5423, -0.5423]``, 2–3 sessions of identical templated answers)."""
from __future__ import annotations

import pytest

from helpers import FNAPI
from fair_forge_beam.reports.compare import TOO_SMALL, compare_runs
from fair_forge_beam.reports.gates import evaluate_gates, parse_gate
from fair_forge_beam.reports.html import render_report
from fair_forge_beam.reports.scorecard import credible_differences, scorecard
from fair_forge_beam.statistical.slices import MIN_COMPARE_SESSIONS, too_small_to_compare


def _est(mean, lo=None, hi=None, n=3):
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n}


def test_the_rule():
    assert MIN_COMPARE_SESSIONS == 2
    assert too_small_to_compare([_est(0.1, 0.0, 0.2), _est(0.3, 0.2, 0.4)], [5, 5]) is None
    assert too_small_to_compare([_est(0.1), _est(0.3, 0.2, 0.4)], [1, 5]) == "current rests on 1 session"
    assert too_small_to_compare([_est(0.1), _est(0.3)], [3, 0]) == "baseline rests on 0 sessions"
    assert too_small_to_compare([_est(-0.5423, -0.5423, -0.5423), _est(0.1, 0.0, 0.2)], [3, 40]) == (
        "current's interval has zero width ([-0.5423, -0.5423])")
    assert too_small_to_compare([_est(0.3, 0.2, 0.4), _est(0.3, 0.3, 0.3 + 1e-6)], [None, None]) is None


def _tox_doc(s_women, sessions=40):
    rec = {"slice": "overall", "n_interactions": 100, "n_sessions": sessions, "n_toxic": 10,
           "toxic_rate": _est(0.1, 0.05, 0.17, 100),
           "group_profiling": {"group_estimates": {"women": {"S": s_women}, "men": {"S": _est(0.1, 0.0, 0.2)}}}}
    return {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 1, "inputs": []},
            "summary": {"interactions_read": 100, "rejected_at_read": 0, "data_quality_warnings": 0,
                        "metrics": {"toxicity": {"scored": 100, "dead_letters": 0}}},
            "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": [rec]}}}


def test_zero_width_group_sentiment_is_too_small_in_comparison_report_and_gates():
    """Before: the zero-width S of 'women' against a real interval was a 'lower' difference."""
    current = _tox_doc(_est(-0.5423, -0.5423, -0.5423, 3))
    baseline = _tox_doc(_est(0.2, 0.1, 0.3, 30))
    cmp = compare_runs(current, baseline)
    rows = {r["estimate"]: r for r in cmp["rows"]}
    women = rows["group_profiling.group_estimates.women.S"]
    assert women["verdict"] == TOO_SMALL == "too small to compare"
    assert women["too_small"] == "current's interval has zero width ([-0.5423, -0.5423])"
    assert women["difference"] == {"mean": -0.5423 - 0.2, "ci_low": None, "ci_high": None} and women["method"] is None
    assert rows["group_profiling.group_estimates.men.S"]["verdict"] == "no detectable difference"
    assert cmp["verdicts"]["toxicity"] == {"no detectable difference": 2, "too small to compare": 1}
    html = render_report(current, comparison=cmp)
    assert "1 too small to compare" in html and "(current&#39;s interval has zero width ([-0.5423, -0.5423]))" in html


def test_one_session_slice_is_too_small_in_both_modes_and_regression_gates_skip_it():
    def doc(mode, k, n, sessions):
        return {"config": {"mode": mode, "ci_level": 0.95, "seed": 1},
                "summary": {"metrics": {"toxicity": {"scored": n}}},
                "metrics": {"toxicity": {"slices": [{"slice": "assistant_id=solo", "n_interactions": n,
                                                     "n_sessions": sessions, "n_toxic": k,
                                                     "toxic_rate": _est(k / n, None, None, n)}]}}}
    for mode in ("bayesian", "frequentist"):
        now, before = doc(mode, 30, 40, 1), doc(mode, 1, 40, 12)
        (row,) = compare_runs(now, before)["rows"]
        assert row["verdict"] == TOO_SMALL, mode  # before issue 27: "worse" (30/40 vs 1/40 looks decisive)
        (check,) = evaluate_gates(now, [parse_gate("regression toxicity toxic_rate not worse in every assistant_id")],
                                  before)
        assert (check.status, check.too_small) == ("skipped", row["too_small"])
        assert check.difference is None and check.baseline["mean"] == 1 / 40


def test_report_claims_no_credible_difference_against_a_zero_width_interval():
    """Scorecard: 'flat' has context awareness 1.0 [1.0, 1.0] over 6 sessions; 'varied' 0.5
    [0.4, 0.6]. The normal approximation would call that a credible difference of 0.5; the rule
    says too small to compare, so none is listed."""
    def rec(key, m, lo, hi):
        return {"slice": key, "n_interactions": 12, "n_sessions": 6, "context_awareness": _est(m, lo, hi, 12)}
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 1},
           "metrics": {"context": {"headline_columns": ["context_awareness"], "slices": [
               rec("overall", 0.75, 0.6, 0.9), rec("assistant_id=flat", 1.0, 1.0, 1.0),
               rec("assistant_id=varied", 0.5, 0.4, 0.6), rec("assistant_id=other", 0.9, 0.85, 0.95)]}}}
    card = scorecard(doc, 0.9)
    diffs = credible_differences(doc, card)
    assert [(d["worse"], d["better"]) for d in diffs] == [("varied", "other")]


@pytest.mark.parametrize("sessions", [None, 2, 40])
def test_enough_sessions_and_a_real_interval_still_compare(sessions):
    current = _tox_doc(_est(-0.5, -0.6, -0.4, 30), sessions or 40)
    baseline = _tox_doc(_est(0.2, 0.1, 0.3, 30))
    rows = {r["estimate"]: r for r in compare_runs(current, baseline)["rows"]}
    assert rows["group_profiling.group_estimates.women.S"]["verdict"] == "lower"


# ------------------------------------------------------------------ issue 28: the one-session rule on every surface
def test_a_single_session_rate_is_its_observed_share_not_the_prior():
    from fair_forge_beam.statistical.bayesian import BayesianMode
    from fair_forge_beam.statistical.frequentist import FrequentistMode
    from fair_forge_beam.statistical.slices import slice_rate

    bayes = BayesianMode(rng_seed=1)
    assert slice_rate(0, 3, 1, bayes).model_dump() == {"mean": 0.0, "ci_low": None, "ci_high": None, "n": 3}
    assert slice_rate(1, 3, 1, bayes).mean == 1 / 3 and slice_rate(0, 0, 1, bayes).mean is None
    two = slice_rate(0, 3, 2, bayes)  # two sessions: the posterior, with its interval
    assert two.mean == 0.2 and two.ci_low is not None
    assert slice_rate(0, 3, 1, FrequentistMode()).mean == 0.0


@pytest.mark.slow
def test_single_session_slices_read_the_same_in_the_console_and_the_gates(tmp_path, capsys):
    """The shipped examples, Bayesian: agent_response_1 has one session of 3 answers, none toxic.
    Its toxic_rate is 0 (not Beta(1, 1)'s 0.2), marked 1* in the console, and a gate on the mean
    per assistant reads that same value."""
    import json

    from pipelines import audit

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:  # support-bot / sushi_bot: Spanish answers, no slice: the gate fails there
        audit.run(["--no-report", "--metrics", "toxicity", "--group-extractor", "keyword", "--mode", "bayesian",
                   "--toxicity-scorer", "hurtlex", "--output", str(out), f"--runner={FNAPI}",
                   "--gate", "toxicity toxic_rate mean <= 0.1 in every assistant_id"])
    assert exc.value.code == 3
    console = capsys.readouterr().out
    row = next(line for line in console.splitlines() if "assistant_id=agent_response_1" in line)
    assert row.split()[1:4] == ["3", "1*", "0.0000"], row
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    one = next(s for s in doc["metrics"]["toxicity"]["slices"] if s["slice"] == "assistant_id=agent_response_1")
    assert one["n_sessions"] == 1 and one["toxic_rate"] == {"mean": 0.0, "ci_low": None, "ci_high": None, "n": 3}
    (gate,) = json.loads((out / "gates.json").read_text(encoding="utf-8"))["gates"]
    mine = next(c for c in gate["checks"] if c["slice"] == "assistant_id=agent_response_1")
    assert mine["status"] == "pass" and mine["value"] == 0.0 and "no interval" in mine["message"]
