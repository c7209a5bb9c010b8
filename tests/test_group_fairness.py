"""DR / DTO / ASB / DIDT statistics (spec §6.1, §19) from mergeable accumulators."""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.group_fairness import (
    GroupFairnessCombineFn,
    estimate_group_fairness,
    normalise_didt_weights,
    reference_distribution,
)


def _acc(fn, items):
    acc = fn.create_accumulator()
    for it in items:
        acc = fn.add_input(acc, it)
    return acc


def _spec19_items():
    # N = {a: 3, b: 1}, K = {a: 1, b: 0}; one answer without a group
    return [("e0", True, [0], None), ("e1", False, [0], None), ("e2", False, [0], None),
            ("e3", False, [1], None), ("e4", True, [], None)]


def test_spec19_worked_example_frequentist():
    fn = GroupFairnessCombineFn(["a", "b"], FrequentistMode())
    r = estimate_group_fairness(_acc(fn, _spec19_items()), ["a", "b"], FrequentistMode(), has_sentiment=False)
    e = r["estimates"]
    assert e["DR"].mean == pytest.approx(0.25, abs=1e-12)
    assert e["DTO"].mean == pytest.approx(1 / 6, abs=1e-12)
    assert e["ASB"].mean == 0.0
    assert e["DIDT"].mean == pytest.approx(0.1389, abs=5e-5)
    assert r["T_i"] == {"a": pytest.approx(1 / 3), "b": 0.0}
    assert r["p_i"] == {"a": 0.75, "b": 0.25}
    assert r["N_i"] == {"a": 3, "b": 1} and r["K_i"] == {"a": 1, "b": 0}
    assert r["status"] == "ok"
    assert any("no sentiment analyzer" in n for n in r["notes"])


def test_didt_weights_normalised():
    w = normalise_didt_weights(2, 3, 1)
    assert w == {"w_DR": pytest.approx(1 / 3), "w_ASB": pytest.approx(1 / 2), "w_DTO": pytest.approx(1 / 6)}
    assert normalise_didt_weights(0, 0, 0) == {"w_DR": 1 / 3, "w_ASB": 1 / 3, "w_DTO": 1 / 3}
    with pytest.raises(ValueError):
        normalise_didt_weights(float("nan"), 1, 1)
    # DIDT uses the normalised weights: (2·DR + 1·DTO + 3·ASB) / 6
    fn = GroupFairnessCombineFn(["a", "b"], FrequentistMode())
    r = estimate_group_fairness(_acc(fn, _spec19_items()), ["a", "b"], FrequentistMode(),
                                weights={"w_DR": 2, "w_ASB": 3, "w_DTO": 1}, has_sentiment=False)
    assert r["estimates"]["DIDT"].mean == pytest.approx((2 * 0.25 + 1 / 6) / 6)


def test_reference_distribution():
    assert reference_distribution(["a", "b"]) == {"a": 0.5, "b": 0.5}
    assert reference_distribution(["a", "b"], {"a": 3, "b": 1, "zzz": 5}) == {"a": 0.75, "b": 0.25}
    assert reference_distribution(["a", "b"], {"c": 1}) == {"a": 0.5, "b": 0.5}
    with pytest.raises(ValueError):
        reference_distribution(["a"], {"a": -1})


@pytest.mark.parametrize("mode", [FrequentistMode(), BayesianMode(mc_samples=500)])
def test_no_group_detected_is_undefined_not_half(mode):
    fn = GroupFairnessCombineFn(["a", "b", "c"], mode)
    r = estimate_group_fairness(_acc(fn, [("e0", True, [], 0.5), ("e1", False, [], -0.2)]), ["a", "b", "c"], mode)
    assert r["status"] == "no_group_detected"
    assert all(r["estimates"][c].mean is None for c in ("DR", "DTO", "ASB", "DIDT"))
    assert r["notes"]


def test_empty_accumulator():
    fn = GroupFairnessCombineFn(["a"], FrequentistMode())
    r = estimate_group_fairness(fn.create_accumulator(), ["a"], FrequentistMode())
    assert r["status"] == "empty" and r["estimates"]["DR"].mean is None


def test_bayesian_dr_keeps_zero_count_groups():
    # one of three declared groups detected: upstream's Bayesian DR dropped the other two and
    # gave DR ≡ 0; with them kept the posterior is far from 0 and close to the frequentist 2/3
    mode = BayesianMode(mc_samples=4000)
    items = [(f"e{i}", False, [0], None) for i in range(200)]
    fn = GroupFairnessCombineFn(["a", "b", "c"], mode)
    r = estimate_group_fairness(_acc(fn, items), ["a", "b", "c"], mode, key=("t", "overall"))
    dr = r["estimates"]["DR"]
    assert dr.ci_low > 0.6 and dr.mean == pytest.approx(2 / 3, abs=0.02)
    # p_i: Dirichlet(α₀/K + N) marginal means (issue 19: the prior's total mass α₀ = 1 is spread
    # over K = 3 groups; was Dirichlet(1 + N), 1/203), zero-count groups included
    assert r["p_i"]["b"] == pytest.approx((1 / 3) / 201)
    # T_i only where the group occurs; exact Beta posterior
    assert r["T_i"]["a"] == pytest.approx(1 / 202) and r["T_i"]["b"] is None
    lo, hi = stats.beta.ppf([0.025, 0.975], 1, 201)
    assert r["group_estimates"]["a"]["T"].ci_low == pytest.approx(lo)
    assert r["group_estimates"]["a"]["T"].ci_high == pytest.approx(hi)


def test_dto_and_asb_range_over_groups_that_occur():
    # group c never occurs: it has no rate and no mean sentiment, and does not pull DTO/ASB
    items = [("e0", True, [0], 0.5), ("e1", False, [0], 0.5), ("e2", False, [1], -0.5), ("e3", False, [1], -0.5)]
    fn = GroupFairnessCombineFn(["a", "b", "c"], FrequentistMode())
    r = estimate_group_fairness(_acc(fn, items), ["a", "b", "c"], FrequentistMode())
    assert r["estimates"]["DTO"].mean == pytest.approx(0.25)  # rates 0.5, 0 → MAD 0.25
    assert r["estimates"]["ASB"].mean == pytest.approx(0.5)  # means 0.5, −0.5 → MAD 0.5
    assert r["S_i"] == {"a": 0.5, "b": -0.5, "c": None}


def _random_items(rng, n, G):
    out = []
    for i in range(n):
        gs = [g for g in range(G) if rng.random() < 0.35]
        s = None if rng.random() < 0.1 else float(np.round(rng.uniform(-1, 1), 4))
        out.append((f"s{i // 3}/{i % 3}", bool(rng.random() < 0.3), gs, s))
    return out


def test_bayesian_asb_is_a_bayesian_bootstrap_of_group_means():
    # the replicate mean of each group converges to the group's sample mean, and the interval
    # has the width of a mean's posterior (≈ 2·1.96·sd/√n)
    rng = np.random.default_rng(3)
    mode = BayesianMode(mc_samples=3000)
    items = [(f"e{i}", False, [0], float(rng.normal(0.2, 0.3))) for i in range(400)]
    items += [(f"f{i}", False, [1], float(rng.normal(-0.1, 0.3))) for i in range(400)]
    fn = GroupFairnessCombineFn(["a", "b"], mode)
    r = estimate_group_fairness(_acc(fn, items), ["a", "b"], mode, key=("t", "overall"))
    sa = np.array([s for _, _, _, s in items[:400]])
    S = r["group_estimates"]["a"]["S"]
    assert S.mean == pytest.approx(sa.mean(), abs=0.005)
    width = S.ci_high - S.ci_low
    assert width == pytest.approx(2 * 1.96 * sa.std() / np.sqrt(400), rel=0.15)
    asb = r["estimates"]["ASB"]
    assert asb.ci_low < 0.15 < asb.ci_high


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), splits=st.lists(st.integers(0, 3), min_size=30, max_size=30))
def test_merge_order_and_sharding_do_not_change_a_bit(seed, splits):
    mode = BayesianMode(mc_samples=200)
    items = _random_items(np.random.default_rng(seed), 30, 3)
    fn = GroupFairnessCombineFn(["a", "b", "c"], mode)
    whole = _acc(fn, items)
    shards = [fn.create_accumulator() for _ in range(4)]
    for it, k in zip(items, splits):
        shards[k] = fn.add_input(shards[k], it)
    merged = fn.merge_accumulators([pickle.loads(pickle.dumps(s)) for s in reversed(shards)])
    assert merged == whole
    a = estimate_group_fairness(whole, ["a", "b", "c"], mode, key=("t", "x"))
    b = estimate_group_fairness(merged, ["a", "b", "c"], mode, key=("t", "x"))
    assert a["estimates"] == b["estimates"] and a["group_estimates"] == b["group_estimates"]


def test_seeded_by_key_and_element_id():
    mode = BayesianMode(mc_samples=300)
    items = _random_items(np.random.default_rng(1), 60, 3)
    fn = GroupFairnessCombineFn(["a", "b", "c"], mode)
    r1 = estimate_group_fairness(_acc(fn, items), ["a", "b", "c"], mode, key=("t", "x"))
    r2 = estimate_group_fairness(_acc(fn, items[::-1]), ["a", "b", "c"], mode, key=("t", "x"))
    assert r1["estimates"] == r2["estimates"]
    r3 = estimate_group_fairness(_acc(fn, items), ["a", "b", "c"], mode, key=("t", "other-slice"))
    assert r3["estimates"]["DR"] != r1["estimates"]["DR"]
    other = GroupFairnessCombineFn(["a", "b", "c"], BayesianMode(mc_samples=300, rng_seed=7))
    r4 = estimate_group_fairness(_acc(other, items), ["a", "b", "c"], BayesianMode(mc_samples=300, rng_seed=7), key=("t", "x"))
    assert r4["estimates"]["ASB"] != r1["estimates"]["ASB"]


def test_invalid_inputs():
    with pytest.raises(ValueError):
        GroupFairnessCombineFn([], FrequentistMode())
    with pytest.raises(ValueError):
        GroupFairnessCombineFn(["a", "a"], FrequentistMode())
    fn = GroupFairnessCombineFn(["a"], FrequentistMode())
    with pytest.raises(ValueError):
        fn.add_input(fn.create_accumulator(), ("e", False, [3], None))
    with pytest.raises(ValueError):
        fn.add_input(fn.create_accumulator(), ("e", False, [0], float("nan")))


def test_single_answer_group_with_a_tiny_gamma_draw_is_finite():
    """Regression: a draw below the 2⁻¹⁶ fixed-point step once gave a 0/0 replicate (NaN ASB)."""
    from fair_forge_beam.statistical.seeding import exponential_rows

    mode = BayesianMode(mc_samples=5000)
    eid = next(f"e{i}" for i in range(10_000)
               if exponential_rows(mode.seed, "ns", [f"e{i}"], 5000)[0].min() < 2.0**-17)
    fn = GroupFairnessCombineFn(["a", "b"], mode, "ns")
    acc = _acc(fn, [(eid, False, [0], 0.4), ("other", False, [1], -0.2), ("third", False, [1], 0.1)])
    r = estimate_group_fairness(acc, ["a", "b"], mode, key=("t", "x"))
    S = r["group_estimates"]["a"]["S"]
    # one answer: every replicate is its sentiment (on the 2⁻¹⁶ fixed-point grid of the sums)
    assert (S.mean, S.ci_low, S.ci_high) == (pytest.approx(0.4, abs=2e-5),) * 3
    assert all(np.isfinite([e.mean, e.ci_low, e.ci_high]).all() for e in r["estimates"].values())


def test_a_stored_accumulator_of_other_settings_is_refused_in_plain_words():
    """Trial 28e B6: a roll-up of runs whose manifest's mode or mc_samples was edited decoded the
    stored accumulators under the edited settings: numpy's 'cannot reshape array of size 20000 into
    shape (4,0)' in a Beam traceback. Decoding checks the draws against the settings: a Bayesian
    accumulator holds draws for every group its answers mention, a frequentist one none, each of
    mc_samples draws."""
    bayes = GroupFairnessCombineFn(["a", "b", "c"], BayesianMode(mc_samples=200))
    freq = GroupFairnessCombineFn(["a", "b", "c"], FrequentistMode())
    fewer = GroupFairnessCombineFn(["a", "b", "c"], BayesianMode(mc_samples=100))
    # 30 answers are stored undrawn (at most pending_limit(200) = 32), 60 drawn
    for n_items in (30, 60):
        items = _random_items(np.random.default_rng(5), n_items, 3)
        stored_b, stored_f = bayes.to_stored(_acc(bayes, items)), freq.to_stored(_acc(freq, items))
        gamma, pending = stored_b[-2], stored_b[-1]
        assert (bool(gamma), bool(pending)) == ((False, True) if n_items == 30 else (True, False))
        assert bayes.from_plain(stored_b) == _acc(bayes, items) and freq.from_plain(stored_f) == _acc(freq, items)
        for fn, stored, says in ((freq, stored_b, "stored by a Bayesian run"), (bayes, stored_f, "not stored by a Bayesian"),
                                 *([(fewer, stored_b, "of 200 Monte Carlo draws where these settings make 100")]
                                   if n_items == 60 else [])):  # undrawn answers can be drawn at any count
            with pytest.raises(ValueError, match=says):
                fn.from_plain(stored)


def test_bayesian_replicate_sums_are_the_keyed_draws_of_each_answer():
    """gamma (drawn in chunks, each answer's rows added to its groups) holds, per group, exactly the
    sums of the answers' own keyed rows γ̃ = max(rint(γ·2¹⁶), 1): Σ γ̃·s̃, Σ γ̃ over the answers with a
    sentiment, Σ γ̃ over the flagged ones and Σ γ̃ (chunked or not, any answer order)."""
    from fair_forge_beam.statistical.group_fairness import _SCALE
    from fair_forge_beam.statistical.seeding import exponential_rows

    mode = BayesianMode(mc_samples=200)
    rng = np.random.default_rng(7)
    items = [(f"e{i}", bool(rng.random() < 0.3), sorted({int(g) for g in rng.integers(0, 4, rng.integers(1, 3))}),
              None if rng.random() < 0.4 else float(rng.uniform(-1, 1))) for i in range(150)]
    fn = GroupFairnessCombineFn(["a", "b", "c", "d"], mode, "t|asb")
    gamma = _acc(fn, items).gamma
    want = {}
    for (eid, flagged, gs, s), row in zip(items, exponential_rows(mode.seed, "t|asb", [it[0] for it in items], 200)):
        g_row = np.maximum(np.rint(row * _SCALE), 1.0).astype(np.int64)
        sq = int(round(s * _SCALE)) if s is not None else 0
        for g in gs:
            cur = want.setdefault(g, np.zeros((4, 200), dtype=np.int64))
            cur += np.stack([g_row * sq, g_row * (s is not None), g_row * flagged, g_row])
    assert sorted(gamma) == sorted(want)
    assert all(np.array_equal(gamma[g], want[g]) for g in want)
