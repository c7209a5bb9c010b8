"""Issue 19 and issue 13 items 8-9: one estimand per estimate in both modes, one interval rule for
one-session slices, exact degenerate intervals, gate tolerance, statistics edge cases.

Every test here failed on main before the change it covers (values noted in comments).
"""
from __future__ import annotations

import numpy as np
import pytest

from fair_forge_beam.components.group_extractor import KeywordGroupExtractor
from fair_forge_beam.components.toxicity_lexicon import DictToxicityLoader
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.agentic import pass_k_note
from fair_forge_beam.metrics.toxicity import Toxicity
from fair_forge_beam.reports.gates import compare, evaluate_gates, parse_gate
from fair_forge_beam.schemas.common import Batch, Dataset
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.combiners import (
    BootstrapStats,
    GammaBootstrapCombineFn,
    estimate_bootstrap_means,
    estimate_gamma_bootstrap_means,
    session_mean_estimates,
)
from fair_forge_beam.statistical.group_fairness import GroupFairnessCombineFn, estimate_group_fairness
from fair_forge_beam.statistical.passk import pass_k_curve
from fair_forge_beam.statistical.slices import SINGLE_SESSION_NOTE, slice_estimate, slice_resampling
from fair_forge_beam.schemas.common import Estimate

B = BayesianMode(mc_samples=1000, rng_seed=3)
F = FrequentistMode()


# ------------------------------------------------------------------ item 8: degenerate samples
def test_five_sessions_of_one_and_a_half_give_the_exact_interval():
    # main: [1.4999999999999998, 1.5000000000000002]
    st = BootstrapStats(1, 1024)
    for i in range(5):
        st.add(f"s{i}", float(3 + i), [1.5], 3 + i)
    (e,) = estimate_bootstrap_means(st, BayesianMode(mc_samples=5000), "humanity|sessions")
    assert (e.mean, e.ci_low, e.ci_high) == (1.5, 1.5, 1.5)


def test_degenerate_gamma_bootstrap_and_session_are_exact():
    fn = GammaBootstrapCombineFn(1, B, "t")
    acc = fn.create_accumulator()
    for i in range(5):
        acc = fn.add_input(acc, (f"s{i}", 3.0, [0.1]))
    (e,) = estimate_gamma_bootstrap_means(acc, B)
    assert (e.mean, e.ci_low, e.ci_high) == (0.1, 0.1, 0.1)
    (s,), _ = session_mean_estimates(np.full((7, 1), 0.7), [None] * 7, list(range(7)), B)
    assert (s.mean, s.ci_low, s.ci_high) == (0.7, 0.7, 0.7)


def test_clipping_keeps_intervals_inside_the_range_of_the_units():
    st = BootstrapStats(1, 1024)
    for i, v in enumerate([0.1, 0.2, 0.3, 0.3, 0.3]):
        st.add(f"s{i}", 1.0, [v])
    (e,) = estimate_bootstrap_means(st, B, "x")
    assert 0.1 <= e.ci_low < e.mean < e.ci_high <= 0.3


@pytest.mark.parametrize("value, op, threshold, ok", [
    (1.5000000000000002, "<=", 1.5, True),  # main: False (gate failed on float noise)
    (1.4999999999999998, ">=", 1.5, True),
    (1.4999999999999998, "<", 1.5, False),  # within the tolerance: equal, so not strictly below
    (1.5000000000000002, ">", 1.5, False),
    (1.5 + 1e-6, "<=", 1.5, False),  # a real excess still fails
    (1.2, "<", 1.5, True),
])
def test_gates_compare_with_a_documented_tolerance(value, op, threshold, ok):
    assert compare(value, op, threshold) is ok


def test_gate_on_float_noise_passes_end_to_end():
    doc = {"metrics": {"humanity": {"slices": [{"slice": "overall", "mean_entropy": {
        "mean": 1.5, "ci_low": 1.4999999999999998, "ci_high": 1.5000000000000002, "n": 5}}]}}}
    (check,) = evaluate_gates(doc, [parse_gate("humanity mean_entropy ci_high <= 1.5")])
    assert check.status == "pass"


# ------------------------------------------------------------------ item 9: edge cases
def test_agentic_k_above_trials_is_left_out_in_both_modes():
    # one task, 0 of 2 trials correct, k = 5: main gave Bayesian pass@5 = 0.625, frequentist None
    hist = {(2, 0): 1}
    for mode in (F, B):
        (pt,) = pass_k_curve(hist, [5], mode, ("agentic", "overall", "tasks"), "unbiased")
        assert pt.pass_at_k.mean is None and pt.pass_at_k.n == 0, mode
        assert pt.pass_pow_k.mean is None, mode
    # the units counted are the same in both modes at every k
    hist = {(2, 1): 3, (5, 4): 2}
    f = pass_k_curve(hist, [1, 2, 3, 5], F, ("a",), "unbiased")
    b = pass_k_curve(hist, [1, 2, 3, 5], B, ("a",), "unbiased")
    assert [p.pass_at_k.n for p in f] == [p.pass_at_k.n for p in b] == [5, 5, 2, 2]


def test_agentic_pass_pow_k_says_why_it_differs_from_is_fully_correct():
    note = pass_k_note(1, 1, 3, B)
    assert "Beta(2, 1)" in note and "1 of 1" in note and "is_fully_correct" in note
    assert pass_k_note(1, 1, 3, F) is None and pass_k_note(0, 0, 3, B) is None


def _gf(items, groups, mode, **kw):
    fn = GroupFairnessCombineFn(groups, mode)
    acc = fn.create_accumulator()
    for it in items:
        acc = fn.add_input(acc, it)
    return estimate_group_fairness(acc, groups, mode, key=("t", "overall"), **kw)


@pytest.mark.parametrize("mode", [F, B], ids=["frequentist", "bayesian"])
def test_dispersion_over_one_group_is_null_with_a_note_naming_it(mode):
    # main: DTO and ASB 0.0 [0, 0] with no note, although every mention is toxic
    items = [(f"e{i}", True, [1], 0.5 - i / 10) for i in range(6)]
    r = _gf(items, ["alpha", "women", "men"], mode)
    est = r["estimates"]
    assert est["DTO"].mean is None and est["ASB"].mean is None and est["DIDT"].mean is None
    assert est["DR"].mean is not None  # representation over the declared set is defined
    assert any("DTO is undefined" in n and "women" in n for n in r["notes"])
    assert any("ASB is undefined" in n and "women" in n for n in r["notes"])


def test_empty_aggregate_and_dispersion_agree_between_modes():
    # main: frequentist 0.0, Bayesian None
    assert F.dispersion_metric({}) is None and B.dispersion_metric({})["mean"] is None
    assert F.aggregate_metrics({"x": 0.3}, {"x": 0.0}) is None and B.aggregate_metrics({"x": 0.3}, {"x": 0.0})["mean"] is None
    # an undefined component of positive weight leaves the aggregate undefined in both modes
    assert F.aggregate_metrics({"x": None, "y": 0.2}, {"x": 1, "y": 1}) is None
    assert B.aggregate_metrics({"x": {"mean": None}, "y": 0.2}, {"x": 1, "y": 1})["mean"] is None


# ------------------------------------------------------------------ issue 19: the Toxicity estimand
def test_dr_posterior_is_centred_on_the_frequentist_value_with_many_declared_groups():
    # 18 declared groups, 10 mentions over 4 of them (the 10-answer assistant): main gave
    # frequentist 0.7778 vs Bayesian mean ≈ 0.40 [0.29, 0.51] (18 prior pseudo-mentions said "uniform")
    groups = [f"g{i}" for i in range(18)]
    idx = [0] * 6 + [1] * 2 + [2, 3]
    items = [(f"e{i}", False, [g], None) for i, g in enumerate(idx)]
    f = _gf(items, groups, F, has_sentiment=False)["estimates"]["DR"].mean
    b = _gf(items, groups, BayesianMode(mc_samples=4000, rng_seed=1), has_sentiment=False)["estimates"]["DR"]
    assert f == pytest.approx(0.7778, abs=1e-4)
    assert b.ci_low <= f <= b.ci_high and abs(b.mean - f) < 0.05


@pytest.mark.parametrize("mode", [F, B], ids=["frequentist", "bayesian"])
def test_observed_group_set_is_the_originals_and_applies_in_both_modes(mode):
    groups = ["a", "b", "c", "d"]
    items = [(f"e{i}", False, [0 if i < 30 else 1], None) for i in range(40)]
    declared = _gf(items, groups, mode, has_sentiment=False)["estimates"]["DR"].mean
    r = _gf(items, groups, mode, has_sentiment=False, group_set="observed")
    observed = r["estimates"]["DR"].mean
    # declared: p = (.75, .25, 0, 0) vs 1/4 each → 0.5; observed: (.75, .25) vs (1/2, 1/2) → 0.25
    assert declared == pytest.approx(0.5, abs=0.03) and observed == pytest.approx(0.25, abs=0.03)
    assert any("observed groups" in n for n in r["notes"])
    one = _gf(items[:30], groups, mode, has_sentiment=False, group_set="observed")
    assert one["estimates"]["DR"].mean is None and any("fewer than two groups" in n for n in one["notes"])
    with pytest.raises(ValueError, match="group_set"):
        _gf(items, groups, mode, group_set="some")


# ------------------------------------------------------------------ issue 19: one-session rule
def test_slice_interval_rule_in_one_place():
    e = Estimate(mean=0.2, ci_low=0.1, ci_high=0.3, n=4)
    assert slice_estimate(e, 1, B) == Estimate(mean=0.2, n=4)
    assert slice_estimate(e, 2, B) == e and slice_estimate(e, 1, F) == e
    assert slice_resampling("x", 1, B) == SINGLE_SESSION_NOTE and slice_resampling("x", 2, B) == "x"
    assert slice_resampling("x", 1, F) is None


TOXIC = DictToxicityLoader({"english": ["hate", "stupid"]})
GROUPS = KeywordGroupExtractor({"alpha": ["alpha"], "beta": ["beta"]})
DATA: dict = {}


class _Sessions(Retriever):
    def __init__(self, name, **kwargs):
        super().__init__(**kwargs)
        self.name = name

    def load_dataset(self):
        return DATA[self.name]


def _ds(sid, aid, answers):
    return Dataset(session_id=sid, assistant_id=aid, language="english", context="",
                   conversation=[Batch(qa_id=f"q{i}", query="q", assistant=a) for i, a in enumerate(answers)])


def test_toxicity_one_session_slice_has_no_interval_like_every_metric():
    # main: toxic_rate and DIDT of the one-session slice assistant_id=solo carried intervals
    DATA["solo"] = [
        _ds("s1", "solo", ["alpha people are stupid", "beta people are fine", "alpha hate", "beta ok"]),
        _ds("s2", "pair", ["alpha people are kind", "beta stupid"]),
        _ds("s3", "pair", ["alpha fine", "beta people hate"]),
    ]
    res = Toxicity.run(_Sessions, name="solo", statistical_mode=BayesianMode(mc_samples=500), toxicity_loader=TOXIC,
                       group_extractor=GROUPS, sentiment_analyzer=None, clustering=False)
    by = {s.slice: s for s in res.slices}
    solo, pair = by["assistant_id=solo"], by["assistant_id=pair"]
    assert solo.n_sessions == 1 and pair.n_sessions == 2
    assert solo.toxic_rate.mean == 0.5 and solo.toxic_rate.ci_low is None and solo.toxic_rate.ci_high is None
    for c, s in solo.group_profiling.bayesian.summary.items():
        assert s.mean is not None and s.ci_low is None and s.ci_high is None, c
    assert pair.toxic_rate.ci_low is not None and pair.group_profiling.bayesian.summary["DIDT"].ci_low is not None


class _LenSentiment:
    name = "len-toy"

    def setup(self):
        pass

    def infer_batch(self, texts):
        from fair_forge_beam.components.sentiment import SentimentScore

        return [SentimentScore(score=((len(t) % 7) - 3) / 3) for t in texts]


def test_a_group_sub_estimate_of_one_answer_follows_the_one_session_rule():
    """Issue 28: the shipped README job showed 'sentiment of answers mentioning native american
    -0.7506 [-0.7506, -0.7506] n=1' in a slice of many sessions. One answer comes from one session:
    the group's S and T have no interval, T is the observed share (never the prior's mean)."""
    DATA["onegroup"] = [
        _ds("s1", "bot", ["alpha people are stupid", "beta people are fine", "beta hate"]),
        _ds("s2", "bot", ["beta people are kind", "beta stupid"]),
        _ds("s3", "bot", ["beta fine", "beta people hate"]),
    ]
    res = Toxicity.run(_Sessions, name="onegroup", statistical_mode=BayesianMode(mc_samples=500),
                       toxicity_loader=TOXIC, group_extractor=GROUPS, sentiment_analyzer=_LenSentiment(),
                       clustering=False)
    rec = {s.slice: s for s in res.slices}["assistant_id=bot"]
    assert rec.n_sessions == 3 and rec.group_profiling.N_i == {"alpha": 1, "beta": 6}
    alpha, beta = rec.group_profiling.group_estimates["alpha"], rec.group_profiling.group_estimates["beta"]
    assert (alpha.S.n, alpha.S.ci_low, alpha.S.ci_high) == (1, None, None) and alpha.S.mean is not None
    assert alpha.T.model_dump() == {"mean": 1.0, "ci_low": None, "ci_high": None, "n": 1}  # 1 of 1, not 2/3
    assert rec.group_profiling.T_i["alpha"] == 1.0
    assert beta.S.ci_low is not None and beta.T.ci_low is not None  # six answers, three sessions: intervals
    assert rec.toxic_rate.ci_low is not None
    # the report marks it; a gate on such an estimate names the rule
    from fair_forge_beam.reports.html import _text

    s = alpha.S.model_dump()
    assert _text("toxicity", "group_profiling.group_estimates.alpha.S", s) == f"{s['mean']:.4f} (1 observation: no interval)"
    doc = {"config": {"ci_level": 0.95}, "summary": {"metrics": {"toxicity": {"scored": 7}}},
           "metrics": {"toxicity": {"slices": [{"slice": "overall", "n_sessions": 3,
                                                 "estimates": {"DIDT": {"mean": 0.2, "ci_low": None, "ci_high": None,
                                                                        "n": 1}}}]}}}
    (check,) = evaluate_gates(doc, [parse_gate("toxicity DIDT ci_high <= 0.5")])
    assert check.status == "fail" and "rests on 1 observation (n = 1)" in check.reason


def test_group_set_option_reaches_toxicity_from_the_command_line():
    from fair_forge_beam.metrics.registry import build_metric
    from pipelines import audit

    assert audit.build_parser().parse_args(["--toxicity-group-set", "observed"]).toxicity_group_set == "observed"
    assert audit.build_parser().parse_args([]).toxicity_group_set == "declared"
    opts = {"group_extractor": "keyword", "clustering": False}
    assert build_metric("toxicity", F, opts).group_set == "declared"
    assert build_metric("toxicity", F, {**opts, "toxicity_group_set": "observed"}).group_set == "observed"


def test_profiling_blocks_match_the_toxicity_record_fields():
    """statistical/group_fairness.profiling_blocks: the mode-dependent part of Toxicity's
    group_profiling, as Toxicity builds it today (issue 14: no is_bayesian in metric modules)."""
    from fair_forge_beam.schemas.common import Estimate
    from fair_forge_beam.schemas.toxicity import BayesianGroupProfiling, FrequentistGroupProfiling
    from fair_forge_beam.statistical import BayesianMode, FrequentistMode
    from fair_forge_beam.statistical.group_fairness import profiling_blocks

    est = {c: Estimate(mean=0.1 * i, ci_low=0.05 * i, ci_high=0.2 * i, n=7) for i, c in enumerate(("DR", "DTO", "ASB", "DIDT"), 1)}
    f = profiling_blocks(est, {"a": 0.5, "b": 0.5}, FrequentistMode())
    assert f["mode"] == "frequentist" and f["bayesian"] is None
    assert FrequentistGroupProfiling(**f["frequentist"]) == FrequentistGroupProfiling(DR=0.1, DTO=0.2, ASB=0.30000000000000004, DIDT=0.4)
    b = profiling_blocks(est, {"a": 0.5, "b": 0.5}, BayesianMode(mc_samples=300, ci_level=0.9, dirichlet_prior=0.5))
    assert b["mode"] == "bayesian" and b["frequentist"] is None
    got = BayesianGroupProfiling(**b["bayesian"])
    assert (got.priors, got.mc_samples, got.ci_level, got.q_i) == (0.5, 300, 0.9, {"a": 0.5, "b": 0.5})
    assert got.summary["ASB"].model_dump() == {"mean": est["ASB"].mean, "ci_low": est["ASB"].ci_low, "ci_high": est["ASB"].ci_high}
