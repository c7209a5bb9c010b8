"""The one-session rule's contract with a metric (trial36b B1-B5, B11; docs/engine.md "Sessions per estimate").

One call, ``accs.rests_on(kind, mode, estimate)``: ``estimate`` is a function of the mode, so the engine both
chooses the mode (observed, no prior, when one session holds the kind, or for an estimate of one
observation) and marks the count; a kind the metric does not declare is refused. The engine removes the
interval of every estimate of a one-session slice, listed ones too, and every surface marks a value that
rests on no observation the same way ("prior only")."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.engine import SliceAccumulators
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.statistical.combiners import estimate_rate
from fair_forge_beam.statistical.frequentist import FrequentistMode
from pipelines import audit

ACCS = SliceAccumulators(None, None, 3, {"foo": 1, "bar": 0, "baz": 3})
MODE = BayesianMode(mc_samples=200)


def test_a_kind_the_metric_does_not_declare_is_refused_naming_the_declared_ones():
    """B2: a misspelt kind fell back to the slice's count in silence: an estimate of one session of three
    kept its interval and gates passed on it."""
    with pytest.raises(KeyError, match="'fooo'.*'foo', 'bar', 'baz'"):
        ACCS.rests_on("fooo", MODE, lambda m: estimate_rate(2, 3, m))
    with pytest.raises(KeyError, match="declares no MetricSpec.evidence"):
        SliceAccumulators(None, None, 3).rests_on("foo", MODE, lambda m: estimate_rate(2, 3, m))


def test_rests_on_chooses_the_mode_so_one_session_gives_the_observed_value():
    """B3: ``rests_on`` without ``mode_for`` marked Beta(1, 1)'s posterior mean 0.6 "(1 session)"; the observed
    share is 2/3. Now the one call estimates it, and an estimate made beforehand is refused in words."""
    e = ACCS.rests_on("foo", MODE, lambda m: estimate_rate(2, 3, m))
    assert (e.mean, e.ci_low, e.ci_high, e.n, e.n_sessions) == (pytest.approx(2 / 3), None, None, 3, 1), e
    kept = ACCS.rests_on("baz", MODE, lambda m: estimate_rate(2, 3, m))  # 3 sessions: the run's mode
    assert kept.mean == pytest.approx(0.6) and kept.ci_low is not None and kept.n_sessions == 3
    with pytest.raises(TypeError, match="function of the mode"):
        ACCS.rests_on("foo", MODE, estimate_rate(2, 3, MODE))


def test_rests_on_takes_what_estimators_return_lists_included():
    """B11: a list raised ``AttributeError: 'list' object has no attribute 'model_copy'``."""
    out = ACCS.rests_on("foo", MODE, lambda m: [estimate_rate(2, 3, m), (estimate_rate(1, 3, m), None),
                                               {"a": [estimate_rate(0, 3, m)]}])
    assert [e.n_sessions for e in (out[0], out[1][0], out[2]["a"][0])] == [1, 1, 1]
    assert out[1][1] is None and isinstance(out[1], tuple) and out[0].ci_low is None
    with pytest.raises(TypeError, match="Estimate, None, or a mapping, list or tuple of them, not float"):
        ACCS.rests_on("foo", MODE, lambda m: 0.5)


def test_an_estimate_of_one_observation_is_its_observed_value():
    """B1's mechanism: with the kind in 3 sessions, an estimate of one observation (one task) was Beta(1, 1)'s
    posterior (0.6667 for 1 of 1) whose interval the engine then removed."""
    e = ACCS.rests_on("baz", MODE, lambda m: {"one": estimate_rate(1, 1, m), "many": estimate_rate(2, 3, m)})
    assert (e["one"].mean, e["one"].ci_low, e["one"].n) == (1.0, None, 1), e
    assert e["many"].ci_low is not None  # the others keep the run's mode


def _agentic(sid, reward, task=None):
    turn = {"qa_id": f"{sid}-q0", "query": "What is 15 + 27?", "assistant": "42",
            "agentic": {"reward": reward, **({"task_id": task} if task else {})}}
    return {"session_id": sid, "assistant_id": "botA", "language": "english", "context": "", "conversation": [turn]}


def test_agentic_one_task_is_its_observed_value_everywhere_in_the_record(tmp_path):
    """B1: task T1 in 3 conversations (rewards 1, 0, 1) and 2 without a task, k = 3. Bayesian gave pass@3
    0.8857 and pass^3 0.2857 marked "(1 observation)" and the curve kept intervals for the same estimates;
    frequentist gave the observed 1.0 and 0.0. Now Bayesian gives them too, and nowhere an interval."""
    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [_agentic("s1", 1, "T1"), _agentic("s2", 0, "T1"),
                                                          _agentic("s3", 1, "T1"), _agentic("s4", 1), _agentic("s5", 0)]))
    assert audit.main(["--metrics", "agentic", "--agentic-correctness", "label", "--agentic-k", "3", "--mode", "bayesian",
                       "--mc-samples", "300", "--no-report", "--quiet", "--input", str(data),
                       "--output", str(tmp_path / "run")]) == 0
    doc = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    a = next(r for r in doc["metrics"]["agentic"]["slices"] if r["slice"] == "assistant_id=botA")
    assert (a["pass_at_k"]["mean"], a["pass_pow_k"]["mean"]) == (1.0, 0.0)
    observed = {1: (2 / 3, 2 / 3), 2: (1.0, 1 / 3), 3: (1.0, 0.0)}
    for p in a["curve"]:
        for f, want in zip(("pass_at_k", "pass_pow_k"), observed[p["k"]]):
            e = p[f]
            assert (e["mean"], e["ci_low"], e["ci_high"], e["n"]) == (pytest.approx(want), None, None, 1), (p["k"], f, e)


def test_a_one_session_slice_removes_listed_intervals_too():
    """B4: in a slice of one session, an estimate inside a list kept an interval its estimator gave (one
    ignoring its mode) while the same estimate at top level lost it."""
    from fair_forge_beam.statistical.slices import without_one_session_intervals

    est = {"mean": 0.5, "ci_low": 0.09, "ci_high": 0.91, "n": 3}
    out = without_one_session_intervals({"mode": "distribution", "n_sessions": 1, "fixed": est, "curve": [est]}, 1)
    assert out["fixed"]["ci_low"] is None and out["curve"][0]["ci_low"] is None, out
    several = without_one_session_intervals({"mode": "distribution", "n_sessions": 3, "curve": [est]}, 3)
    assert several["curve"][0]["ci_low"] == 0.09  # a list of a larger slice: judged by the count it states


def test_a_prior_over_no_data_is_marked_the_same_on_every_surface():
    """B5: ``n = 0`` (a Bayesian rate over no data, 0.5000 [0.0250, 0.9750]) showed with its interval on the
    console and "inconclusive" in the report, while the gates called it its prior's value and compare "too
    small to compare". One predicate (``rests_on_no_observation``), one wording (``NO_OBSERVATION_NOTE``)."""
    from fair_forge_beam.reports.html import _text
    from fair_forge_beam.reports.gates import _on_no_observation
    from fair_forge_beam.reports.scorecard import inconclusive
    from fair_forge_beam.reports.summary import summary_table
    from fair_forge_beam.statistical.slices import NO_OBSERVATION_NOTE, too_small_to_compare

    prior = {"mean": 0.5, "ci_low": 0.025, "ci_high": 0.975, "n": 0}
    data = {"mean": 0.4, "ci_low": 0.2, "ci_high": 0.6, "n": 30}
    rec = {"slice": "assistant_id=botA", "mode": "distribution", "n_sessions": 5, "n_interactions": 30,
           "rate": prior, "other": data}
    assert _text("custom", "rate", prior) == f"n/a ({NO_OBSERVATION_NOTE})"
    assert inconclusive("custom", "rate", prior, rec, 0.2, 0.95) is None
    assert _on_no_observation("custom", rec, prior) == "n = 0"
    assert too_small_to_compare([prior, data], [5, 5]) == f"current is its {NO_OBSERVATION_NOTE}"
    assert too_small_to_compare([data, prior], [5, 5]) == f"baseline is its {NO_OBSERVATION_NOTE}"
    doc = {"config": {"mode": "bayesian", "seed": 0, "mc_samples": 100},
           "summary": {"interactions_read": 30, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"custom": {}}},
           "metrics": {"custom": {"headline_columns": ["rate"], "slices": [{**rec, "slice": "overall"}]}}}
    printed = summary_table(doc, "out")
    assert "n/a (prior only)" in printed and "0.0250" not in printed, printed
    assert "(prior only): the estimate rests on no observation (n = 0)" in printed, printed
