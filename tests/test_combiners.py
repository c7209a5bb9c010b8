"""Mergeable ``CombineFn``s and their estimators (``fair_forge_beam.statistical.combiners``).

* weights resolution (spec §3.4, §19) and the session weighted mean (spec §18.2);
* the within-session bootstrap reference of spec §19;
* property tests: any partition of the inputs, merged in any order / grouping (nested merges,
  pickled in between), gives *exactly* the same accumulator and bit-identical estimates
  (DESIGN §4: "same input + same seed ⇒ identical output ... for any number of workers");
* the CombineFns inside a real ``TestPipeline`` (FnApiRunner, combiner lifting + coders).
"""
from __future__ import annotations

import math
import pickle

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, strategies as st

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical import combiners as C
from fair_forge_beam.statistical.exact import to_exact

# =============================================================================== weights
WEIGHT_CASES = {
    # name: (raw weights, resolved (spec §19), warning expected, scores)
    "given": ([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], False, [0.9, 0.4, 0.7]),
    "mixed_fill": ([0.6, None, None], [0.6, 0.2, 0.2], False, [0.9, 0.4, 0.7]),
    "all_given_sum_1_1": ([0.5, 0.6], [0.5, 0.5], True, [0.9, 0.4]),
    "mixed_sum_ge_1": ([0.7, 0.5, None], [1 / 3, 1 / 3, 1 / 3], True, [0.9, 0.4, 0.7]),
    "none_n4": ([None] * 4, [0.25] * 4, False, [0.1, 0.2, 0.3, 0.4]),
}


@pytest.mark.parametrize("name", list(WEIGHT_CASES))
def test_resolve_weights_reference(name):
    raw, expected, warns, _ = WEIGHT_CASES[name]
    resolved, warning = C.resolve_weights(raw)
    assert resolved == expected
    assert (warning is not None) == warns
    if warns:
        assert "equal weights" in warning


def test_resolve_weights_edge_cases():
    assert C.resolve_weights([]) == ([], None)
    assert C.resolve_weights([0.3, None]) == ([0.3, 0.7], None)
    assert C.resolve_weights([0.0, None]) == ([0.0, 1.0], None)  # zero weights are legal
    # |Σw − 1| ≤ 1e-6 counts as 1 (given weights kept)
    assert C.resolve_weights([0.5, 0.5000005]) == ([0.5, 0.5000005], None)
    resolved, warning = C.resolve_weights([0.5, 0.500002])
    assert resolved == [0.5, 0.5] and warning is not None


def _resolved_mean(scores, weights):
    resolved, _ = C.resolve_weights(weights)
    return math.fsum(w * s for w, s in zip(resolved, scores)) / math.fsum(resolved)


@pytest.mark.parametrize("name", list(WEIGHT_CASES))
def test_weighted_mean_stats_reproduce_resolved_weights(name):
    raw, resolved, _, scores = WEIGHT_CASES[name]
    st_ = C.WeightedMeanStats()
    for s, w in zip(scores, raw):
        st_.add(s, w)
    expected = math.fsum(w * s for w, s in zip(resolved, scores))
    assert C.weighted_mean_from_stats(st_) == pytest.approx(expected, abs=1e-12)


def test_weighted_mean_stats_empty_is_none():
    assert C.weighted_mean_from_stats(C.WeightedMeanStats()) is None


def test_weighted_mean_stats_rejects_bad_weight():
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="weight"):
            C.WeightedMeanStats().add(0.5, bad)


def test_session_weighted_mean_in_pipeline(test_pipeline):
    """``CombinePerKey(SessionWeightedMeanCombineFn())`` reproduces Σ ŵ s for every spec case."""
    elements = [(name, (s, w)) for name, (raw, _, _, scores) in WEIGHT_CASES.items() for s, w in zip(scores, raw)]
    expected = [
        (name, math.fsum(w * s for w, s in zip(resolved, scores)))
        for name, (_, resolved, _, scores) in WEIGHT_CASES.items()
    ]

    def close(a, b):
        return a[0] == b[0] and abs(a[1] - b[1]) <= 1e-12

    with test_pipeline as p:
        out = (
            p
            | beam.Create(elements, reshuffle=True)
            | beam.CombinePerKey(C.SessionWeightedMeanCombineFn())
            | beam.MapTuple(lambda k, stats: (k, C.weighted_mean_from_stats(stats)))
        )
        assert_that(out, equal_to(expected, equals_fn=close))


# =============================================================================== session bootstrap (spec §19)
class TestSessionMeanEstimates:
    SCORES = np.array([[0.8], [0.6], [1.0]])
    WEIGHTS = [0.5, 0.25, 0.25]

    def test_bayesian_reference(self):
        """Spec §19 last row: mean ≈ 0.798, CI ≈ [0.667, 0.933].

        The spec's numbers come from upstream's *multinomial* weighted bootstrap (index matrix
        drawn with the weights as probabilities, numpy seed 42); ours is a keyed *Bayesian*
        bootstrap (Rubin 1981, Exp(1) weights times the resolved weights), so the values only
        agree approximately: ±0.01 on the mean, ±0.02 on each interval end.
        """
        (e,), warning = C.session_mean_estimates(self.SCORES, self.WEIGHTS, [0, 1, 2], BayesianMode())
        assert warning is None
        assert e.n == 3
        assert e.mean == pytest.approx(0.798, abs=0.01)
        assert e.ci_low == pytest.approx(0.667, abs=0.02)
        assert e.ci_high == pytest.approx(0.933, abs=0.02)

    def test_bayesian_reproducible(self):
        a, _ = C.session_mean_estimates(self.SCORES, self.WEIGHTS, [0, 1, 2], BayesianMode())
        b, _ = C.session_mean_estimates(self.SCORES, self.WEIGHTS, [0, 1, 2], BayesianMode())
        assert a == b

    def test_frequentist_exact(self):
        (e,), warning = C.session_mean_estimates(self.SCORES, self.WEIGHTS, [0, 1, 2], FrequentistMode())
        assert e.mean == 0.8 and e.ci_low is None and e.ci_high is None and e.n == 3
        assert warning is None

    @pytest.mark.parametrize("mode", [BayesianMode(), FrequentistMode()], ids=["bayes", "freq"])
    def test_single_interaction(self, mode):
        (e,), _ = C.session_mean_estimates(np.array([[0.37]]), [None], [0], mode)
        assert e.mean == 0.37 and e.n == 1
        if mode.is_bayesian:
            assert e.ci_low == 0.37 and e.ci_high == 0.37

    def test_empty_session(self):
        out, _ = C.session_mean_estimates(np.zeros((0, 2)), [], [], BayesianMode())
        assert out == [Estimate(mean=None, n=0), Estimate(mean=None, n=0)]

    def test_warning_is_returned(self):
        _, warning = C.session_mean_estimates(np.array([[0.9], [0.4]]), [0.5, 0.6], [0, 1], FrequentistMode())
        assert warning is not None

    def test_multiple_columns_frequentist_match_weighted_mean(self):
        scores = np.array([[0.1, 1.0], [0.5, 0.0], [0.9, 0.5]])
        out, _ = C.session_mean_estimates(scores, [0.2, None, None], [0, 1, 2], FrequentistMode())
        for j, e in enumerate(out):
            assert e.mean == pytest.approx(_resolved_mean(scores[:, j], [0.2, None, None]), abs=1e-12)


# =============================================================================== bootstrap estimator
def _bootstrap(inputs, max_units=2048, m=1):
    fn = C.BootstrapMeanCombineFn(n_values=m, max_units=max_units)
    acc = fn.create_accumulator()
    for x in inputs:
        acc = fn.add_input(acc, x)
    return acc


class TestEstimateBootstrapMeans:
    def test_frequentist_is_exact_weighted_mean(self):
        acc = _bootstrap([("a", 2.0, (0.5,)), ("b", 1.0, (0.2,)), ("c", 1.0, (1.0,))])
        (e,) = C.estimate_bootstrap_means(acc, FrequentistMode())
        assert e.mean == pytest.approx(2.2 / 4, abs=1e-15) and e.ci_low is None and e.n == 3

    def test_bayesian_brackets_the_mean(self):
        inputs = [(f"s{i}", 1.0 + (i % 3), (float(i % 5) / 4,)) for i in range(40)]
        (e,) = C.estimate_bootstrap_means(_bootstrap(inputs), BayesianMode(mc_samples=2000))
        (f,) = C.estimate_bootstrap_means(_bootstrap(inputs), FrequentistMode())
        assert e.ci_low < f.mean < e.ci_high
        assert e.mean == pytest.approx(f.mean, abs=0.02)

    def test_single_unit_degenerate(self):
        acc = _bootstrap([("a", 2.0, (0.5, 0.25)), ("a", 2.0, (0.5, 0.75))], m=2)
        out = C.estimate_bootstrap_means(acc, BayesianMode())
        assert [(e.mean, e.ci_low, e.ci_high) for e in out] == [(0.5, 0.5, 0.5), (0.5, 0.5, 0.5)]

    @pytest.mark.parametrize("mode", [BayesianMode(), FrequentistMode()], ids=["bayes", "freq"])
    def test_empty_and_zero_weight(self, mode):
        assert C.estimate_bootstrap_means(_bootstrap([], m=2), mode) == [Estimate(mean=None, n=0)] * 2
        out = C.estimate_bootstrap_means(_bootstrap([("a", 0.0, (0.3,)), ("b", 0.0, (0.4,))]), mode)
        assert out == [Estimate(mean=None, n=2)]

    def test_n_items(self):
        acc = _bootstrap([("a", 3.0, (0.5,), 3), ("b", 2.0, (0.5,), 2)])
        assert C.estimate_bootstrap_means(acc, FrequentistMode())[0].n == 5

    def test_bucketing_keeps_frequentist_estimate_and_invariants(self):
        inputs = [(f"s{i}", 0.5 + i % 4, (i / 17.0, 1.0 - i / 31.0), 1 + i % 2) for i in range(30)]
        small = _bootstrap(inputs, max_units=3, m=2)
        big = _bootstrap(inputs, max_units=2048, m=2)
        assert small.bucketed and not big.bucketed
        assert len(small.units) <= 3 and len(big.units) == 30
        assert small.n_items == big.n_items == sum(x[3] for x in inputs)
        for j in range(4):
            assert sum(e[j] for e in small.units.values()) == sum(e[j] for e in big.units.values())
        assert C.estimate_bootstrap_means(small, FrequentistMode()) == C.estimate_bootstrap_means(big, FrequentistMode())

    def test_rejects_bad_input(self):
        with pytest.raises(ValueError):
            _bootstrap([("a", 1.0, (0.1, 0.2))], m=1)
        with pytest.raises(ValueError, match="weight"):
            _bootstrap([("a", -1.0, (0.1,))])
        with pytest.raises(ValueError):
            C.BootstrapMeanCombineFn(n_values=0)


# =============================================================================== property tests
def _partitions(data, items):
    """A random permutation of ``items`` cut into random (possibly empty) partitions."""
    perm = data.draw(st.permutations(items), label="order")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(perm)), max_size=6), label="cuts"))
    parts, prev = [], 0
    for c in cuts + [len(perm)]:
        parts.append(perm[prev:c])
        prev = c
    return parts


def _roundtrip(fn, acc, how):
    if how == "pickle":
        return pickle.loads(pickle.dumps(acc))
    if how == "coder":
        coder = fn.get_accumulator_coder()
        return coder.decode(coder.encode(acc))
    return acc


def _merge_randomly(fn, data, accs):
    """Merge ``accs`` in random groups (nested merges), serialising some results in between."""
    accs = list(accs)
    while len(accs) > 1:
        k = data.draw(st.integers(2, len(accs)), label="group size")
        idx = data.draw(st.permutations(range(len(accs))), label="group")[:k]
        group = [accs[i] for i in idx]
        rest = [a for i, a in enumerate(accs) if i not in idx]
        as_iter = data.draw(st.booleans(), label="iterator")
        merged = fn.merge_accumulators(iter(group) if as_iter else group)
        merged = _roundtrip(fn, merged, data.draw(st.sampled_from(["none", "pickle", "coder"]), label="serialise"))
        rest.insert(data.draw(st.integers(0, len(rest)), label="position"), merged)
        accs = rest
    return accs[0]


def _accumulate(fn, items):
    acc = fn.create_accumulator()
    for x in items:
        acc = fn.add_input(acc, x)
    return acc


def _merged_state(fn, data, items):
    accs = [_accumulate(fn, part) for part in _partitions(data, items)]
    return fn.extract_output(_merge_randomly(fn, data, accs))


def _bs_state(b: C.BootstrapStats):
    return (b.m, b.max_units, b.bucketed, b.units, b.n_units)


_rate_item = st.one_of(
    st.booleans(),
    st.integers(0, 50).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)


@given(items=st.lists(_rate_item, max_size=40), data=st.data())
def test_rate_combine_any_merge_order(items, data):
    fn = C.RateCombineFn()
    ref = fn.extract_output(_accumulate(fn, items))
    got = _merged_state(fn, data, items)
    assert got == ref
    assert all(type(v) is int for v in got)
    k = sum(int(x) if isinstance(x, bool) else x[0] for x in items)
    n = sum(1 if isinstance(x, bool) else x[1] for x in items)
    assert ref == (k, n)
    mode = BayesianMode(mc_samples=200)
    assert C.estimate_rate(*got, mode) == C.estimate_rate(*ref, mode)
    assert C.estimate_rate(*got, FrequentistMode()) == C.estimate_rate(*ref, FrequentistMode())
    assert pickle.loads(pickle.dumps(got)) == ref


CATS = ["a", "b", "c"]
_cat_item = st.one_of(
    st.sampled_from(CATS),
    st.dictionaries(st.sampled_from(CATS), st.integers(0, 20), max_size=3),
    st.tuples(*[st.integers(0, 20)] * 3),
)


@given(items=st.lists(_cat_item, max_size=40), data=st.data())
def test_category_count_combine_any_merge_order(items, data):
    fn = C.CategoryCountCombineFn(CATS)
    ref = fn.extract_output(_accumulate(fn, items))
    got = _merged_state(fn, data, items)
    assert got == ref
    expected = [0, 0, 0]
    for x in items:
        if isinstance(x, str):
            expected[CATS.index(x)] += 1
        elif isinstance(x, dict):
            for c, v in x.items():
                expected[CATS.index(c)] += v
        else:
            for i, v in enumerate(x):
                expected[i] += v
    assert list(ref) == expected
    mode = BayesianMode(mc_samples=200).keyed("metric", "slice", "groups")
    mode2 = BayesianMode(mc_samples=200).keyed("metric", "slice", "groups")
    assert C.estimate_distribution(got, CATS, mode) == C.estimate_distribution(ref, CATS, mode)
    ref_dist = {"a": 0.2, "b": 0.3, "c": 0.5}
    assert C.estimate_divergence(got, CATS, ref_dist, mode) == C.estimate_divergence(ref, CATS, ref_dist, mode2)
    assert pickle.loads(pickle.dumps(got)) == ref


_score = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
_weight = st.one_of(
    st.none(),
    st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 1.0]),
    st.floats(min_value=0.0, max_value=10.0, allow_nan=False),
)


@st.composite
def _session(draw):
    scores = draw(st.lists(_score, max_size=12))
    n = len(scores)
    style = draw(st.sampled_from(["none", "equal", "mixed_small", "random"]))
    if style == "none":
        weights = [None] * n
    elif style == "equal":
        weights = [1.0 / n] * n if n else []
    elif style == "mixed_small":
        weights = [draw(st.sampled_from([None, 0.05, 0.1, 0.0])) for _ in range(n)]
    else:
        weights = [draw(_weight) for _ in range(n)]
    return list(zip(scores, weights))


@given(items=_session(), data=st.data())
def test_session_weighted_mean_combine_any_merge_order(items, data):
    fn = C.SessionWeightedMeanCombineFn()
    ref = fn.extract_output(_accumulate(fn, items))
    got = _merged_state(fn, data, items)
    assert got == ref
    assert pickle.loads(pickle.dumps(got)) == ref
    coder = fn.get_accumulator_coder()
    assert coder.decode(coder.encode(got)) == ref
    mean = C.weighted_mean_from_stats(got)
    assert mean == C.weighted_mean_from_stats(ref)  # bit for bit (same exact statistics)
    if not items:
        assert mean is None
        return
    scores = [s for s, _ in items]
    expected = _resolved_mean(scores, [w for _, w in items])
    if math.isfinite(expected):
        scale = max(1.0, max(abs(s) for s in scores))
        assert mean == pytest.approx(expected, abs=1e-9 * scale)


_unit_item = st.tuples(
    st.sampled_from([f"u{i}" for i in range(7)]),
    st.floats(min_value=0.0, max_value=5.0, allow_nan=False),
    st.tuples(st.floats(-10, 10, allow_nan=False), st.floats(-10, 10, allow_nan=False)),
    st.integers(1, 4),
)


@given(items=st.lists(_unit_item, max_size=30), max_units=st.sampled_from([1, 2, 3, 100]), data=st.data())
def test_bootstrap_mean_combine_any_merge_order(items, max_units, data):
    fn = C.BootstrapMeanCombineFn(n_values=2, max_units=max_units)
    ref = fn.extract_output(_accumulate(fn, items))
    got = _merged_state(fn, data, items)
    assert _bs_state(got) == _bs_state(ref)
    assert got.n_units == len(items)
    assert got.bucketed == (len({x[0] for x in items}) > max_units)
    assert len(got.units) <= max(max_units, 0) or not got.bucketed
    for acc in (pickle.loads(pickle.dumps(got)), fn.get_accumulator_coder().decode(fn.get_accumulator_coder().encode(got))):
        assert _bs_state(acc) == _bs_state(ref)
    mode = BayesianMode(mc_samples=200)
    a = C.estimate_bootstrap_means(got, mode)
    b = C.estimate_bootstrap_means(ref, mode)
    assert a == b  # identical floats, whatever the merge order
    assert C.estimate_bootstrap_means(got, FrequentistMode()) == C.estimate_bootstrap_means(ref, FrequentistMode())
    # exact totals are preserved through bucketing
    assert sum(e[1] for e in got.units.values()) == sum(to_exact(x[1]) for x in items)
    assert got.n_items == sum(x[3] for x in items)


def _bs_reference(items, max_units: int, pooled: bool) -> dict:
    """The sums a :class:`BootstrapStats` of ``items`` holds, computed apart (plain dicts): per unit
    key, or per bucket when ``pooled``."""
    ref: dict = {}
    for unit, w, vals, n in items:
        key = C.bucket_of(unit, max_units) if pooled and max_units > 1 else (0 if pooled else unit)
        entry = [n, to_exact(w)] + [to_exact(float(w) * float(v)) for v in vals]
        cur = ref.setdefault(key, [0] * len(entry))
        for i, v in enumerate(entry):
            cur[i] += v
    return ref


@given(items=st.lists(_unit_item, max_size=30), max_units=st.sampled_from([1, 2, 3, 100]), data=st.data())
def test_bootstrap_pooled_arrays_hold_the_exact_sums(items, max_units, data):
    """Pooled :class:`BootstrapStats` keep their bucket sums in one numpy object array (merge and
    subtract element-wise): whatever the merge order, whether a part is subtracted again, and
    through pickle, the stored form (``to_stored`` → ``from_plain`` and → ``from_arrow``, a sliced
    column too), the sums are exactly the per-bucket sums of the inputs, Python integers."""
    import pyarrow as pa

    fn = C.BootstrapMeanCombineFn(n_values=2, max_units=max_units)
    parts = _partitions(data, items)
    accs = [_accumulate(fn, part) for part in parts]
    got = _merge_randomly(fn, data, accs) if accs else fn.create_accumulator()
    pooled = len({x[0] for x in items}) > max_units
    assert got.bucketed == pooled
    assert got.units == _bs_reference(items, max_units, pooled)
    assert got.n_items == sum(x[3] for x in items) and got.n_units == len(items)
    k = data.draw(st.integers(0, len(parts) - 1), label="part subtracted")
    part = _accumulate(fn, parts[k])
    if part.bucketed <= got.bucketed:  # a part pooled where the whole is not cannot be subtracted
        left = fn.subtract(got, part)
        rest = [x for i, p in enumerate(parts) if i != k for x in p]
        assert left.units == {key: e for key, e in _bs_reference(rest, max_units, got.bucketed).items() if any(e)}
        assert left.n_units == len(rest)
        assert got.units == _bs_reference(items, max_units, pooled)  # subtract works on a copy
    stored = [fn.to_stored(got), None, fn.to_stored(part)]
    column = pa.array(stored, type=fn.stored_type())
    for back, want in ((fn.from_plain(stored[0]), got), (fn.from_arrow(column)[0], got),
                       (fn.from_arrow(column.slice(1))[1], part), (pickle.loads(pickle.dumps(got)), got)):
        assert _bs_state(back) == _bs_state(want)
        if back.bucketed:
            assert all(type(v) is int for v in back.sums.ravel())
            assert back.present.tolist() == [b in back.units for b in range(max_units)]
    assert fn.from_arrow(column)[1] is None
    mode = BayesianMode(mc_samples=200)
    assert C.estimate_bootstrap_means(fn.from_arrow(column)[0], mode) == C.estimate_bootstrap_means(got, mode)


# =============================================================================== pipelines
def test_combine_fns_in_pipeline_match_direct(test_pipeline):
    """Combiner lifting + accumulator coders on FnApiRunner give the same exact state."""
    rng = np.random.default_rng(11)
    rate_items = [("k1" if i % 3 else "k2", (bool(rng.random() < 0.3))) for i in range(120)]
    cat_items = [("k1" if i % 2 else "k2", CATS[int(rng.integers(0, 3))]) for i in range(120)]
    boot_items = [
        ("k1" if i % 2 else "k2", (f"s{i % 11}", float(rng.integers(1, 4)), (float(rng.random()),), 1))
        for i in range(120)
    ]

    def direct(fn, items):
        out = {}
        for k, v in items:
            out.setdefault(k, []).append(v)
        return {k: fn.extract_output(_accumulate(fn, vs)) for k, vs in out.items()}

    bfn = C.BootstrapMeanCombineFn(n_values=1, max_units=3)
    gfn = C.GammaBootstrapCombineFn(n_values=1, mode=BayesianMode(mc_samples=200))
    gamma_exp = sorted((k, _gbs_state(v)) for k, v in direct(gfn, boot_items).items())
    rate_exp = sorted(direct(C.RateCombineFn(), rate_items).items())
    cat_exp = sorted(direct(C.CategoryCountCombineFn(CATS), cat_items).items())
    boot_direct = direct(bfn, boot_items)
    boot_exp = sorted((k, _bs_state(v)) for k, v in boot_direct.items())
    mode = BayesianMode(mc_samples=200)
    est_exp = sorted((k, tuple(C.estimate_bootstrap_means(v, mode))) for k, v in boot_direct.items())

    with test_pipeline as p:
        rates = p | "rates" >> beam.Create(rate_items, reshuffle=True) | "rc" >> beam.CombinePerKey(C.RateCombineFn())
        cats = p | "cats" >> beam.Create(cat_items, reshuffle=True) | "cc" >> beam.CombinePerKey(C.CategoryCountCombineFn(CATS))
        boots = p | "boots" >> beam.Create(boot_items, reshuffle=True) | "bc" >> beam.CombinePerKey(bfn)
        assert_that(rates, equal_to(rate_exp), label="rates ok")
        assert_that(cats, equal_to(cat_exp), label="cats ok")
        assert_that(boots | "state" >> beam.MapTuple(lambda k, v: (k, _bs_state(v))), equal_to(boot_exp), label="boots ok")
        est = boots | "est" >> beam.MapTuple(lambda k, v: (k, tuple(C.estimate_bootstrap_means(v, mode))))
        assert_that(est, equal_to(est_exp), label="estimates ok")
        gammas = p | "gammas" >> beam.Create(boot_items, reshuffle=True) | "gc" >> beam.CombinePerKey(gfn)
        assert_that(gammas | "gstate" >> beam.MapTuple(lambda k, v: (k, _gbs_state(v))), equal_to(gamma_exp), label="gamma ok")


@pytest.mark.slow
@given(
    items=st.lists(
        st.tuples(
            st.integers(0, 400).map(lambda i: f"unit-{i}"),
            st.floats(min_value=0.0, max_value=5.0, allow_nan=False),
            st.tuples(st.floats(-10, 10, allow_nan=False), st.floats(-10, 10, allow_nan=False)),
            st.integers(1, 4),
        ),
        min_size=C.EXACT_UNITS + 1,
        max_size=C.EXACT_UNITS + 40,
    ),
    max_units=st.sampled_from([3, 5, 100, 1024]),
)
def test_bootstrap_unit_and_bucket_representations_agree(items, max_units):
    """``BootstrapStats`` docstring: above ``EXACT_UNITS`` units, the per-unit and the pooled
    (bucket) representation of the same inputs give the same estimates bit for bit (weights are
    per bucket, sums are exact). Several units that all hash to one bucket form a degenerate
    posterior: the interval is exactly ``[mean, mean]`` in both representations."""
    fn = C.BootstrapMeanCombineFn(n_values=2, max_units=max_units)
    acc = _accumulate(fn, items)
    if len(acc.units) <= C.EXACT_UNITS and not acc.bucketed:
        return  # duplicates left too few distinct units: the per-unit regime (next test)
    pooled = pickle.loads(pickle.dumps(acc))
    if not pooled.bucketed:
        pooled._to_buckets()
    assert pooled.bucketed and len(pooled.units) <= max_units
    mode = BayesianMode(mc_samples=200)
    assert C.estimate_bootstrap_means(acc, mode) == C.estimate_bootstrap_means(pooled, mode)


def test_bootstrap_few_units_get_their_own_weights():
    """Up to ``EXACT_UNITS`` units, no hash collision can pool two units: two sessions whose keys
    share a bucket still get a non-degenerate interval (Rubin's unit-level bootstrap)."""
    max_units = 4
    keys = [f"s{i}" for i in range(200)]
    b0 = [k for k in keys if C.bucket_of(k, max_units) == C.bucket_of(keys[0], max_units)][:2]
    fn = C.BootstrapMeanCombineFn(n_values=1, max_units=max_units)
    acc = _accumulate(fn, [(b0[0], 1.0, (0.0,), 1), (b0[1], 1.0, (1.0,), 1)])
    (est,) = C.estimate_bootstrap_means(acc, BayesianMode(mc_samples=2000))
    assert est.ci_low < 0.1 and est.ci_high > 0.9 and abs(est.mean - 0.5) < 0.03


# =============================================================================== per-unit Gamma bootstrap
def _gbs_state(g: C.GammaBootstrapStats):
    return (g.m, g.B, g.seed, g.namespace, g.hi.tolist(), g.lo.tolist(), g.n_units, g.n_items, g.W, list(g.WV))


# GammaBootstrapCombineFn's documented domain: weight 0 or >= GAMMA_MIN_WEIGHT (2**-16)
_gamma_unit_item = st.tuples(
    st.sampled_from([f"u{i}" for i in range(7)]),
    st.one_of(st.just(0.0), st.floats(min_value=C.GAMMA_MIN_WEIGHT, max_value=5.0, allow_nan=False)),
    st.tuples(st.floats(-10, 10, allow_nan=False), st.floats(-10, 10, allow_nan=False)),
    st.integers(1, 4),
)


def test_gamma_bootstrap_rejects_weights_below_its_resolution():
    """Weights too small for the exact fixed-point sums raise (they used to give NaN estimates)."""
    mode = BayesianMode(mc_samples=200)
    fn = C.GammaBootstrapCombineFn(n_values=2, mode=mode)
    with pytest.raises(ValueError, match="weight"):
        fn.add_input(fn.create_accumulator(), ("u0", 1e-30, (1.0, 2.0), 1))
    acc = fn.create_accumulator()
    for it in [("u0", 0.0, (0.0, 0.0), 1), ("u1", C.GAMMA_MIN_WEIGHT, (1.0, 2.0), 1), ("u2", C.GAMMA_MIN_WEIGHT, (3.0, 0.0), 1)]:
        acc = fn.add_input(acc, it)
    for est in C.estimate_gamma_bootstrap_means(acc, mode):
        assert est.mean is not None and math.isfinite(est.mean) and est.ci_low <= est.ci_high


@given(items=st.lists(_gamma_unit_item, max_size=25), data=st.data())
def test_gamma_bootstrap_combine_any_merge_order(items, data):
    mode = BayesianMode(mc_samples=200)
    fn = C.GammaBootstrapCombineFn(n_values=2, mode=mode)
    ref = fn.extract_output(_accumulate(fn, items))
    got = _merged_state(fn, data, items)
    assert got == ref
    assert _gbs_state(got) == _gbs_state(ref)
    assert _gbs_state(pickle.loads(pickle.dumps(got))) == _gbs_state(ref)
    coder = fn.get_accumulator_coder()
    assert _gbs_state(coder.decode(coder.encode(got))) == _gbs_state(ref)
    assert C.estimate_gamma_bootstrap_means(got, mode) == C.estimate_gamma_bootstrap_means(ref, mode)
    freq = C.estimate_gamma_bootstrap_means(got, FrequentistMode())
    assert freq == C.estimate_gamma_bootstrap_means(ref, FrequentistMode())
    # the frequentist reading is the exact weighted mean, like BootstrapMeanCombineFn's
    bfn = C.BootstrapMeanCombineFn(n_values=2)
    assert freq == C.estimate_bootstrap_means(_accumulate(bfn, items), FrequentistMode())
    assert got.n_units == len(items) and got.n_items == sum(x[3] for x in items)


def test_gamma_bootstrap_pickled_combine_fn_draws_the_same_rows():
    """The CombineFn drops its row cache when pickled (as Beam does); draws stay keyed."""
    mode = BayesianMode(mc_samples=300)
    items = [(f"s{i}", 1.0 + i % 3, (i / 10.0,)) for i in range(12)]
    fn = C.GammaBootstrapCombineFn(n_values=1, mode=mode)
    a = _accumulate(fn, items)
    b = _accumulate(pickle.loads(pickle.dumps(fn)), items)
    assert a == b
    (e,) = C.estimate_gamma_bootstrap_means(a, mode)
    (f,) = C.estimate_gamma_bootstrap_means(a, FrequentistMode())
    assert e.ci_low < f.mean < e.ci_high
    assert e.mean == pytest.approx(f.mean, abs=0.05)


def test_gamma_bootstrap_single_unit_fed_as_several_inputs_is_degenerate():
    """One resampling unit (a session fed interaction by interaction, all with the same unit
    key) has a point-mass posterior: every replicate is ``Σ g w v / Σ g w`` with the same
    ``g``, i.e. the unit's weighted mean. The single-input case returns it exactly
    (``mean = ci_low = ci_high``); the same unit split over several inputs must do the same,
    not return fixed-point noise around it."""
    mode = BayesianMode(mc_samples=200)
    fn = C.GammaBootstrapCombineFn(n_values=1, mode=mode)
    acc = _accumulate(fn, [("s1", 1.0, (0.5,)), ("s1", 2.0, (0.5,))])
    (e,) = C.estimate_gamma_bootstrap_means(acc, mode)
    assert (e.mean, e.ci_low, e.ci_high) == (0.5, 0.5, 0.5)


# ====================================================== building blocks moved from metrics/ (issue 14)
from hypothesis import settings  # noqa: E402

from fair_forge_beam.statistical.bradley_terry import SliceStatsCombineFn  # noqa: E402
from fair_forge_beam.statistical.passk import PassCountsCombineFn  # noqa: E402


def _merged_output(fn, data, items):
    """Partition ``items``, accumulate each part, merge in a random grouping and order (pickled
    in between), then extract."""
    accs = [pickle.loads(pickle.dumps(_accumulate(fn, part))) for part in _partitions(data, items)]
    return fn.extract_output(_merge_randomly(fn, data, accs))


@settings(max_examples=60)
@given(items=st.lists(st.integers(0, 10**12), max_size=40), data=st.data())
def test_sum_combine_any_merge_order(items, data):
    fn = C.SumCombineFn()
    got = _merged_output(fn, data, items)
    assert got == sum(items) and type(got) is int
    # the output is an accumulator (CombineSlices merges outputs) and add_inputs adds values
    assert fn.merge_accumulators([got, fn.add_inputs(fn.create_accumulator(), [3, 4])]) == sum(items) + 7


@settings(max_examples=60)
@given(items=st.lists(st.one_of(st.none(), _rate_item), max_size=40), data=st.data())
def test_optional_combine_any_merge_order(items, data):
    fn = C.OptionalCombineFn(C.RateCombineFn())
    real = [x for x in items if x is not None]
    assert _merged_output(fn, data, items) == C.RateCombineFn().extract_output(_accumulate(C.RateCombineFn(), real))


_unit = st.tuples(
    st.integers(0, 30).map(lambda i: f"s{i}"), st.integers(1, 5).map(float),
    st.tuples(st.floats(0, 1, allow_nan=False)), st.integers(1, 4),
)


@settings(max_examples=60)
@given(items=st.lists(st.tuples(st.one_of(st.none(), _unit), st.integers(0, 3)), max_size=40), data=st.data())
def test_with_failed_count_any_merge_order_matches_the_inner_combine(items, data):
    # reference: the inner combiner over the scored units alone, and the failed counts summed
    # (what metrics/base.py's former WithFailedCount computed)
    fn = C.WithFailedCount(C.BootstrapMeanCombineFn(1, max_units=8))
    st_, failed = _merged_output(fn, data, items)
    inner = C.BootstrapMeanCombineFn(1, max_units=8)
    old_st = inner.extract_output(_accumulate(inner, [u for u, _ in items if u is not None]))
    assert failed == sum(f for _, f in items)
    assert _bs_state(st_) == _bs_state(old_st)
    mode = BayesianMode(mc_samples=200, rng_seed=3)
    assert C.estimate_bootstrap_means(st_, mode, "ns") == C.estimate_bootstrap_means(old_st, mode, "ns")
    # the output is an accumulator: merging outputs equals combining everything at once
    again = fn.merge_accumulators([fn.extract_output(_accumulate(fn, items)), fn.create_accumulator()])
    assert _bs_state(again[0]) == _bs_state(st_) and again[1] == failed


@settings(max_examples=60)
@given(items=st.lists(st.tuples(st.one_of(st.none(), st.tuples(st.sampled_from("ab"), st.integers(0, 3)).map(
    lambda t: (t[0], 3, t[1]))), st.integers(0, 2)), max_size=30), data=st.data())
def test_with_failed_count_of_pass_counts_any_merge_order(items, data):
    fn = C.WithFailedCount(PassCountsCombineFn())
    ref = fn.extract_output(_accumulate(fn, items))
    assert _merged_output(fn, data, items) == ref
    assert ref[1] == sum(f for _, f in items)


@settings(max_examples=60)
@given(items=st.lists(st.floats(-1, 1, allow_nan=False).flatmap(lambda a: st.tuples(st.just(a), st.floats(a, 1))),
                      max_size=30), data=st.data())
def test_min_max_combine_any_merge_order(items, data):
    got = _merged_output(C.MinMaxCombineFn(), data, items)
    assert got == ([min(a for a, _ in items), max(b for _, b in items)] if items else [None, None])


@pytest.mark.slow
@settings(max_examples=60)
@given(items=st.lists(st.tuples(st.integers(0, 5), st.text(max_size=3)), max_size=30), data=st.data())
def test_sorted_list_combine_any_merge_order(items, data):
    fn = C.SortedListCombineFn(lambda x: x, finish=tuple)
    assert _merged_output(fn, data, items) == tuple(sorted(items))
    assert C.SortedListCombineFn(lambda x: -x[0]).extract_output(list(items)) == sorted(items, key=lambda x: -x[0])


@settings(max_examples=60)
@given(items=st.lists(st.permutations(["a", "b", "c"]).flatmap(lambda ps: st.tuples(
    st.just(tuple(ps[:2])), st.sampled_from([ps[0], ps[1], None]), st.just(((ps[0], ps[1], ps[0]),)),
    st.integers(1, 5), st.integers(0, 2))), max_size=25), data=st.data())
def test_bestof_slice_stats_any_merge_order(items, data):
    fn = SliceStatsCombineFn()
    ref = fn.extract_output(_accumulate(fn, items))
    assert _merged_output(fn, data, items) == ref
    assert ref[2] == len(items) and ref[4] == sum(u[4] for u in items)


def test_moved_building_blocks_in_pipeline_match_direct(test_pipeline):
    """Lifted combines (reshuffled input, accumulator coders) give the direct values."""
    rng = np.random.default_rng(5)
    units = [("k1" if i % 2 else "k2", (None if i % 7 == 0 else (f"s{i % 9}", 1.0, (float(rng.random()),), 1), i % 3))
             for i in range(90)]
    mm = [("k1" if i % 2 else "k2", (float(v), float(v) + 0.5)) for i, v in enumerate(rng.random(60))]
    fn = C.WithFailedCount(C.BootstrapMeanCombineFn(1, max_units=4))
    exp = {}
    for k, v in units:
        exp.setdefault(k, []).append(v)
    exp_w = sorted((k, (_bs_state(o[0]), o[1])) for k, o in ((k, fn.extract_output(_accumulate(fn, vs))) for k, vs in exp.items()))
    exp_mm = sorted((k, [min(a for kk, (a, _) in mm if kk == k), max(b for kk, (_, b) in mm if kk == k)]) for k in ("k1", "k2"))
    with test_pipeline as p:
        w = p | "units" >> beam.Create(units, reshuffle=True) | "wf" >> beam.CombinePerKey(fn)
        assert_that(w | beam.MapTuple(lambda k, o: (k, (_bs_state(o[0]), o[1]))), equal_to(exp_w), label="with failed")
        m = p | "mm" >> beam.Create(mm, reshuffle=True) | "mmc" >> beam.CombinePerKey(C.MinMaxCombineFn())
        assert_that(m, equal_to(exp_mm), label="minmax")
        s = p | "sums" >> beam.Create([("k", i) for i in range(50)], reshuffle=True) | "sc" >> beam.CombinePerKey(C.SumCombineFn())
        assert_that(s, equal_to([("k", 1225)]), label="sum")


@pytest.mark.parametrize("mode", [FrequentistMode(), BayesianMode(mc_samples=300, rng_seed=9)])
def test_session_mean_and_point_estimates_is_the_two_calls(mode):
    scores = np.array([[0.2], [0.9], [0.4], [0.7]])
    weights, turns = [None, 0.5, None, None], [0, 1, 2, 3]
    est, points, warning = C.session_mean_and_point_estimates(scores, weights, turns, mode)
    assert (points, warning) == C.session_mean_estimates(scores, weights, turns, FrequentistMode())
    assert est == C.session_mean_estimates(scores, weights, turns, mode)[0]
    assert (est is points) == (not mode.is_bayesian)


def test_slice_bootstrap_path_reads_both_statistics():
    """One slice-bootstrap path (statistical/slices.py): hash-bucketed and Gamma statistics,
    the one-session rule and the resampling text, in both modes."""
    from fair_forge_beam.statistical.slices import (
        GAMMA_RESAMPLING, SINGLE_SESSION_NOTE, bootstrap_resampling, bootstrap_sessions, slice_bootstrap_means,
        slice_means_combiner,
    )

    bayes, freq = BayesianMode(mc_samples=200, rng_seed=4), FrequentistMode()
    units = [(f"s{i}", 1.0, (0.1 * i, 1.0 - 0.05 * i), 1) for i in range(12)]
    one = [("s0", 1.0, (0.3, 0.6), 1), ("s0", 1.0, (0.5, 0.2), 1)]
    assert isinstance(slice_means_combiner(2, freq, 64, "gamma"), C.BootstrapMeanCombineFn)
    assert isinstance(slice_means_combiner(2, bayes, 64, "buckets"), C.BootstrapMeanCombineFn)
    with pytest.raises(ValueError):
        slice_means_combiner(2, bayes, 64, "poisson")
    for method in ("buckets", "gamma"):
        fn = slice_means_combiner(2, bayes, 64, method, "ns-gamma")
        st_ = _accumulate(fn, units)
        direct = (C.estimate_gamma_bootstrap_means(st_, bayes) if method == "gamma"
                  else C.estimate_bootstrap_means(st_, bayes, "ns"))
        assert bootstrap_sessions(st_) == 12
        assert slice_bootstrap_means(st_, bayes, "ns") == direct
        assert bootstrap_resampling(st_, bayes) == (GAMMA_RESAMPLING if method == "gamma"
                                                     else "Bayesian bootstrap over sessions (64 hash buckets)")
        assert bootstrap_resampling(st_, freq) is None
        single = _accumulate(fn, one)
        assert bootstrap_sessions(single) == 1
        assert all(e.ci_low is None and e.ci_high is None and e.mean is not None
                   for e in slice_bootstrap_means(single, bayes, "ns"))
        assert bootstrap_resampling(single, bayes) == SINGLE_SESSION_NOTE


# ---------------------------------------------- Toxicity's counts and clustering's sample keys (issue 14 item 2)
@settings(max_examples=60)
@given(items=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500),
                                st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), max_size=3)),
                      max_size=40), data=st.data())
def test_token_counts_any_merge_order(items, data):
    items = [(t, n, tuple(c)) for t, n, c in items]
    toxic, total, cats = _merged_output(C.TokenCountsCombineFn(), data, items)
    assert (toxic, total) == (sum(t for t, _, _ in items), sum(n for _, n, _ in items))
    want = {}
    for _, _, cs in items:
        for c, n in cs:
            want[c] = want.get(c, 0) + n
    assert cats == want


@settings(max_examples=60)
@given(items=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 4), max_size=3, unique=True).map(tuple)),
                      max_size=40), data=st.data())
def test_session_group_counts_any_merge_order(items, data):
    n, n_toxic, mentions = _merged_output(C.SessionGroupCountsCombineFn(), data, items)
    assert (n, n_toxic) == (len(items), sum(t for t, _ in items))
    assert mentions == {g: sum(g in gs for _, gs in items) for g in {g for _, gs in items for g in gs}}


@settings(max_examples=60)
@given(items=st.lists(st.integers(0, 2**64 - 1), max_size=60), cap=st.integers(1, 9), data=st.data())
def test_count_and_smallest_any_merge_order(items, cap, data):
    fn = C.CountAndSmallestCombineFn(cap)
    n, threshold = _merged_output(fn, data, items)
    assert n == len(items)
    assert threshold == (sorted(items)[min(cap, len(items)) - 1] if items else None)


def test_count_and_smallest_rejects_a_cap_below_one():
    with pytest.raises(ValueError):
        C.CountAndSmallestCombineFn(0)


@pytest.mark.parametrize("sort", [True, False])
def test_collected_values_are_stored_in_a_total_order_never_arrival_order(sort):
    """Stored statistics (stats/sessions) hold a session's collected values: any arrival order
    of the same values stores the same list (the judge branch saw Context's stored lists change
    between two runs of the same code)."""
    import random

    from fair_forge_beam.statistical.combiners import CollectCombineFn

    fn = CollectCombineFn(order=lambda v: (v[1], v[0]), sort=sort)
    values = [(i % 3, f"k{i % 5}", None if i % 4 == 0 else i / 7) for i in range(40)]
    stored = None
    for seed in range(6):
        shuffled = values[:]
        random.Random(seed).shuffle(shuffled)
        parts = [fn.add_inputs(fn.create_accumulator(), shuffled[i::3]) for i in range(3)]
        got = fn.to_stored(fn.merge_accumulators(parts))
        assert sorted(got, key=repr) == sorted(values, key=repr)
        stored = got if stored is None else stored
        assert got == stored


def test_beta_quantiles_are_scipys_beta_ppf_bit_for_bit():
    """Bayesian rate intervals come from ``scipy.special.betaincinv`` (no import of
    ``scipy.stats``): the same floats, also where the arguments take ``scipy.stats``' own path."""
    import random

    from scipy import stats

    rng = random.Random(27)
    cases = [(al, a, b) for al in (0.005, 0.025, 0.05, 0.25, 0.45) for a in (0.5, 1, 2, 3.5, 1000, 100001)
             for b in (0.5, 1, 7, 250000)]
    cases += [(rng.random() * 0.5, rng.random() * 50 + 1e-3, rng.randint(1, 10**6)) for _ in range(500)]
    cases += [(0.0, 1.0, 1.0), (0.025, 0.0, 3.0), (0.025, math.inf, 2.0)]  # scipy.stats' path
    for alpha, a, b in cases:
        want = tuple(float(v) for v in stats.beta.ppf([alpha, 1.0 - alpha], a, b))
        got = C.beta_quantiles(alpha, a, b)
        assert got == want or all(math.isnan(x) and math.isnan(y) for x, y in zip(got, want)), (alpha, a, b)


@pytest.mark.slow
def test_a_bayesian_rate_does_not_import_scipy_stats():
    """``scipy.stats`` costs a process about 0.4 CPU s to import; a Bayesian rate (the roll-up's
    cut sessions, every audit's Toxicity) no longer needs it."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\nfrom fair_forge_beam.statistical import BayesianMode\n"
            "from fair_forge_beam.statistical.combiners import estimate_distribution, estimate_rate\n"
            "e = estimate_rate(2, 10, BayesianMode())\n"
            "p = estimate_distribution([3, 1], ['a', 'b'], BayesianMode())\n"
            "print(round(e.ci_low, 4), round(e.ci_high, 4), 'scipy.stats' in sys.modules)\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0.0602", "0.5178", "False"]


@pytest.mark.parametrize("k", [1, 2, 3, 65, 1024])
@pytest.mark.parametrize("b", [1, 2, 7, 5000])
def test_weighted_row_sums_are_numpys_stacked_sums_bit_for_bit(k, b):
    """The bootstrap's row-at-a-time weighted sums give the bits of ``(G * w[:, None]).sum(axis=0)`` of the
    stacked rows (signed zeros, tiny and huge weights included)."""
    rng = np.random.default_rng(k * 10_000 + b)
    G = rng.standard_exponential((k, b))
    weights = [rng.normal(size=k),
               np.where(rng.random(k) < 0.5, -0.0, 0.0),
               rng.normal(size=k) * 10.0 ** rng.integers(-300, 300, k)]
    got = C._weighted_row_sums(list(G), [[float(x) for x in w] for w in weights])
    assert [g.tobytes() for g in got] == [(G * w[:, None]).sum(axis=0).tobytes() for w in weights]



_ReadX = __import__("collections").namedtuple("ReadX", "assistant_id language")
_read_item = st.builds(_ReadX, st.sampled_from(["a", "b", "1", None, 1]), st.sampled_from(["english", "es"]))


@given(items=st.lists(_read_item, max_size=40), dims=st.sampled_from([(), ("assistant_id",), ("language",),
                                                                      ("assistant_id", "language")]), data=st.data())
def test_read_counts_combine_any_merge_order(items, dims, data):
    """The results' read counts (``ReadCountsFn``, one combine input per interaction): any split,
    merge grouping and serialisation give the one-accumulator counts (the interactions read, and
    per slice key of ``dims``); its merge adds into the first accumulator, so nesting must not matter."""
    from collections import Counter

    from fair_forge_beam.reports.results import ReadCountsFn

    fn = ReadCountsFn(dims)
    ref = fn.extract_output(_accumulate(fn, items))
    assert _merged_state(fn, data, items) == ref
    per_slice = Counter(f"{d}={getattr(x, d)}" for x in items for d in dims)
    assert ref == ([] if not items else [("read", None, len(items)),
                                         *(("read_slice", k, n) for k, n in sorted(per_slice.items()))])
