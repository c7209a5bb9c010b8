"""pass@k / pass^k over tasks: unbiased estimators vs direct enumeration of k-subsets
(hypothesis), the mergeable (n, c) combiner (merge order must not matter), the Bayesian curve."""
from __future__ import annotations

import random
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.passk import (
    PassCountsCombineFn,
    pass_at_k_unbiased,
    pass_k_curve,
    pass_pow_k_unbiased,
    task_histogram,
)

outcomes = st.lists(st.booleans(), min_size=1, max_size=9)


@given(outcomes, st.integers(1, 10))
def test_unbiased_equals_enumeration_of_k_subsets(trials, k):
    n, c = len(trials), sum(trials)
    if k > n:
        assert pass_at_k_unbiased(n, c, k) is None and pass_pow_k_unbiased(n, c, k) is None
        return
    subsets = list(combinations(range(n), k))
    any_ok = sum(any(trials[i] for i in s) for s in subsets) / len(subsets)
    all_ok = sum(all(trials[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k_unbiased(n, c, k) == pytest.approx(any_ok, abs=1e-12)
    assert pass_pow_k_unbiased(n, c, k) == pytest.approx(all_ok, abs=1e-12)


tasks = st.dictionaries(st.text("abc", min_size=1, max_size=3), st.lists(st.booleans(), min_size=1, max_size=5), max_size=6)


@given(tasks, st.integers(1, 5))
def test_curve_is_the_task_average_of_enumerated_values(data, k):
    hist = task_histogram({t: (len(v), sum(v)) for t, v in data.items()})
    (point,) = pass_k_curve(hist, [k], FrequentistMode())
    usable = [v for v in data.values() if len(v) >= k]
    assert point.pass_pow_k.n == len(usable)
    if not usable:
        assert point.pass_pow_k.mean is None and point.pass_at_k.mean is None
        return
    pw = np.mean([np.mean([all(v[i] for i in s) for s in combinations(range(len(v)), k)]) for v in usable])
    at = np.mean([np.mean([any(v[i] for i in s) for s in combinations(range(len(v)), k)]) for v in usable])
    assert point.pass_pow_k.mean == pytest.approx(pw, abs=1e-12)
    assert point.pass_at_k.mean == pytest.approx(at, abs=1e-12)


# (task id or None, n, c) per conversation
conversations = st.lists(
    st.tuples(st.one_of(st.none(), st.sampled_from(["t1", "t2", "t3"])), st.integers(0, 4), st.integers(0, 4)).map(
        lambda x: (x[0], max(x[1], x[2]), min(x[1], x[2]))
    ),
    max_size=25,
)


def _combine(fn, parts):
    accs = []
    for part in parts:
        acc = fn.create_accumulator()
        for e in part:
            acc = fn.add_input(acc, e)
        accs.append(acc)
    return fn.extract_output(fn.merge_accumulators(accs))


@given(conversations, st.randoms(use_true_random=False))
def test_pass_counts_combiner_merge_order_does_not_matter(convs, rnd):
    fn = PassCountsCombineFn()
    whole = _combine(fn, [convs])
    shuffled = list(convs)
    rnd.shuffle(shuffled)
    cuts = sorted(rnd.sample(range(len(shuffled) + 1), min(3, len(shuffled) + 1)))
    parts = [shuffled[a:b] for a, b in zip([0] + cuts, cuts + [len(shuffled)])]
    rnd.shuffle(parts)
    assert _combine(fn, parts) == whole
    # nested merges of merged accumulators
    assert fn.merge_accumulators([fn.merge_accumulators([_combine(fn, [p])]) for p in parts] or [fn.create_accumulator()]) == whole
    assert sum(whole["conversations"].values()) == len(convs)
    assert whole["empty"] == sum(1 for _, n, _ in convs if n == 0)
    for t, (n_t, s_t) in whole["tasks"].items():
        mine = [(n, c) for task, n, c in convs if task == t and n > 0]
        assert n_t == len(mine) and s_t == sum(1 for n, c in mine if c == n)


def test_combiner_rejects_impossible_counts():
    fn = PassCountsCombineFn()
    with pytest.raises(ValueError):
        fn.add_input(fn.create_accumulator(), ("t", 2, 3))


def test_bayesian_curve_is_a_bootstrap_over_units_of_the_frequentist_values():
    """The Bayesian curve is the posterior of the frequentist average under a Bayesian bootstrap over
    the units (trial37 T1; it averaged each task's Beta(1, 1) posterior mean, another quantity)."""
    mode = BayesianMode(mc_samples=4000, rng_seed=7)
    hist = {(4, 1): 2, (4, 4): 1, (2, 0): 1}
    curve = pass_k_curve(hist, [1, 2, 3, 4], mode, ("agentic", "overall"))
    freq = pass_k_curve(hist, [1, 2, 3, 4], FrequentistMode(), ("agentic", "overall"))
    for pt, fp in zip(curve, freq):
        k = pt.k
        # the exact posterior mean of a Dirichlet-weighted mean is the plain mean: the frequentist value
        assert pt.pass_pow_k.mean == pytest.approx(fp.pass_pow_k.mean, abs=1e-12)
        assert pt.pass_at_k.mean == pytest.approx(fp.pass_at_k.mean, abs=1e-12)
        assert pt.pass_pow_k.ci_low <= pt.pass_pow_k.mean <= pt.pass_pow_k.ci_high
        assert pt.pass_at_k.ci_low <= pt.pass_at_k.mean <= pt.pass_at_k.ci_high
        # the tasks with n >= k (issue 13 item 9: as in frequentist mode)
        assert pt.pass_pow_k.n == fp.pass_pow_k.n == (4 if k <= 2 else 3)
    # same key, any insertion order of the histogram: bit-identical
    items = list(hist.items())
    random.Random(1).shuffle(items)
    assert pass_k_curve(dict(items), [1, 2, 3, 4], mode, ("agentic", "overall")) == curve
    # another key: another interval, same mean
    other = pass_k_curve(hist, [2], mode, ("agentic", "assistant_id=x"))[0]
    assert other.pass_pow_k.mean == curve[1].pass_pow_k.mean and other.pass_pow_k.ci_low != curve[1].pass_pow_k.ci_low
    # the interval matches an independent Bayesian bootstrap of the four tasks' unbiased pass@2
    rng = np.random.default_rng(0)
    values = np.array([pass_at_k_unbiased(n, c, 2) for (n, c), cnt in hist.items() for _ in range(cnt)])
    sims = rng.dirichlet(np.ones(len(values)), 200_000) @ values
    assert curve[1].pass_at_k.ci_low == pytest.approx(np.quantile(sims, 0.025), abs=0.01)
    assert curve[1].pass_at_k.ci_high == pytest.approx(np.quantile(sims, 0.975), abs=0.01)


@pytest.mark.parametrize("estimator", ["unbiased", "plugin"])
@pytest.mark.parametrize("c", [0, 3])
def test_bayesian_curve_over_many_units_holds_an_extreme_frequentist_value(estimator, c):
    """50 tasks (or conversations) of 3 trials, every one successful (or every one failed): frequentist
    pass@k and pass^k are 1 (or 0) at every k; the Bayesian interval holds that value and its mean is it.
    It read pass^3 = 4/7 [0.53, 0.61] (each unit's Beta(4, 1) posterior mean, averaged): the prior's pull
    did not shrink with the number of units (trial37 T1)."""
    hist = {(3, c): 50}
    freq = pass_k_curve(hist, [1, 2, 3], FrequentistMode(), ("a",), estimator)
    for pt, fp in zip(pass_k_curve(hist, [1, 2, 3], BayesianMode(mc_samples=1000, rng_seed=5), ("a",), estimator), freq):
        for b, f in ((pt.pass_at_k, fp.pass_at_k.mean), (pt.pass_pow_k, fp.pass_pow_k.mean)):
            assert f == (1.0 if c else 0.0)
            assert b.ci_low <= f <= b.ci_high and b.mean == pytest.approx(f), (pt.k, b)


def test_empty_and_invalid():
    (pt,) = pass_k_curve({}, [3], BayesianMode())
    assert pt.pass_at_k.mean is None and pt.pass_pow_k.n == 0
    (pt,) = pass_k_curve({}, [3], FrequentistMode())
    assert pt.pass_at_k.mean is None
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            pass_k_curve({(3, 1): 1}, [bad], FrequentistMode())
    with pytest.raises(ValueError):
        pass_k_curve({(3, 4): 1}, [1], FrequentistMode())


@given(conversations, st.lists(st.integers(0, 3), min_size=25, max_size=25), st.randoms(use_true_random=False))
def test_agentic_slice_combiner_merge_order_does_not_matter(convs, failed, rnd):
    from fair_forge_beam.metrics.agentic import _SliceCombineFn

    fn = _SliceCombineFn()
    items = list(zip(convs, failed))
    whole = _combine(fn, [items])
    rnd.shuffle(items)
    half = len(items) // 2
    assert _combine(fn, [items[half:], items[:half]]) == whole
    assert whole[1] == sum(f for _, f in zip(convs, failed))


def test_bayesian_curve_large_cells_are_chunked_and_deterministic():
    mode = BayesianMode(mc_samples=500, rng_seed=3)
    hist = {(4, 2): 600, (4, 4): 10}
    a = pass_k_curve(hist, [2], mode, ("k",))[0]
    assert a == pass_k_curve(dict(reversed(list(hist.items()))), [2], mode, ("k",))[0]
    assert a.pass_pow_k.ci_low < a.pass_pow_k.mean < a.pass_pow_k.ci_high and a.pass_pow_k.n == 610
