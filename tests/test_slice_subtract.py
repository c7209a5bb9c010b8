"""Issue 27 (cells): the slice accumulators' exact ``subtract`` and their stored form.

Property: for random parts ``a``, ``b``, ``c`` merged in any order, subtracting ``b`` and ``c`` (in
any order) gives an accumulator whose estimates are ``a``'s, bit for bit; and a stored accumulator
(``to_stored`` → Arrow → ``from_arrow``) estimates as the original. Checked for every slice
accumulator a roll-up subtracts (Toxicity's group fairness and token counts, Humanity's bootstrap
means and emotion counts, integer sums, rates) and for the engine's fused slice combiner of the real
Humanity and Toxicity specs.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical.combiners import (
    BootstrapMeanCombineFn,
    CategoryCountCombineFn,
    RateCombineFn,
    SumCombineFn,
    TokenCountsCombineFn,
    can_subtract,
    estimate_bootstrap_means,
)
from fair_forge_beam.statistical.group_fairness import GroupFairnessCombineFn, estimate_group_fairness

GROUPS = ["a", "b", "c"]
MODES = {"bayesian": BayesianMode(mc_samples=100), "frequentist": FrequentistMode()}
_SETTINGS = dict(max_examples=40, deadline=None)


def _acc(fn, items):
    acc = fn.create_accumulator()
    for it in items:
        acc = fn.add_input(acc, it)
    return acc


def _text(value) -> str:
    return json.dumps(value, default=repr, sort_keys=True)


def _stored_roundtrip(fn, acc):
    return fn.from_arrow(pa.array([fn.to_stored(acc), None], type=fn.stored_type()))


@st.composite
def _parts(draw, item):
    """Three lists of inputs (``a``, ``b``, ``c``), the order they are merged in and the order ``b``
    and ``c`` are subtracted in."""
    parts = [draw(st.lists(item, max_size=12)) for _ in range(3)]
    return parts, draw(st.permutations([0, 1, 2])), draw(st.permutations([1, 2]))


def _check(fn, estimate, parts, merge_order, subtract_order):
    accs = [_acc(fn, p) for p in parts]
    whole = fn.merge_accumulators([accs[i] for i in merge_order])
    before = _text(estimate(whole))
    left = whole
    for i in subtract_order:
        left = fn.subtract(left, accs[i])
    assert _text(estimate(left)) == _text(estimate(_acc(fn, parts[0])))
    assert _text(estimate(whole)) == before  # subtract never changes its input
    stored, null = _stored_roundtrip(fn, whole)
    assert null is None and _text(estimate(stored)) == before


_answer = st.tuples(st.text("xyz", min_size=1, max_size=3), st.booleans(),
                    st.lists(st.integers(0, len(GROUPS) - 1), max_size=3),
                    st.one_of(st.none(), st.floats(-1, 1, allow_nan=False)))


@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
@settings(**_SETTINGS)
@given(case=_parts(_answer))
def test_group_fairness_subtract_gives_back_the_part(mode, case):
    fn = GroupFairnessCombineFn(GROUPS, MODES[mode], "test|asb")
    assert can_subtract(fn)
    _check(fn, lambda s: estimate_group_fairness(s, GROUPS, MODES[mode], key=("t",)), *case)


def test_group_fairness_subtract_draws_across_the_pending_limit():
    """A part of more answers than are kept undrawn, subtracted from a drawn whole: the same sums."""
    fn = GroupFairnessCombineFn(GROUPS, MODES["bayesian"], "test|asb")
    a = [(f"a{i}", i % 3 == 0, [i % 3], (i % 7) / 7) for i in range(50)]
    b = [(f"b{i}", i % 2 == 0, [0, 2], None) for i in range(80)]
    left = fn.subtract(fn.merge_accumulators([_acc(fn, b), _acc(fn, a)]), _acc(fn, b))
    assert left == _acc(fn, a)
    with pytest.raises(ValueError):
        fn.subtract(_acc(fn, a), _acc(fn, b))  # not a part of it


_unit = st.tuples(st.sampled_from([f"s{i}" for i in range(9)]), st.integers(1, 5),
                  st.tuples(st.floats(-3, 3, allow_nan=False)), st.integers(1, 5))


@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
@pytest.mark.parametrize("max_units", [1, 3, 1024])
@settings(**_SETTINGS)
@given(case=_parts(_unit))
def test_bootstrap_means_subtract_gives_back_the_part(mode, max_units, case):
    """Bit for bit whenever the part keeps its units as the merge does (a roll-up's case: the merged
    runs hold the union's unit keys); a frequentist estimate never depends on the pooling."""
    from hypothesis import assume

    fn = BootstrapMeanCombineFn(1, max_units)
    parts, merge_order, _ = case
    whole = fn.merge_accumulators([_acc(fn, p) for p in parts])
    assume(mode == "frequentist" or _acc(fn, parts[0]).bucketed == whole.bucketed)
    _check(fn, lambda s: estimate_bootstrap_means(s, MODES[mode]), *case)


@settings(**_SETTINGS)
@given(case=_parts(st.tuples(st.integers(0, 3), st.integers(0, 9),
                             st.lists(st.tuples(st.sampled_from("pqr"), st.integers(1, 3)), max_size=2))))
def test_token_counts_subtract_gives_back_the_part(case):
    _check(TokenCountsCombineFn(), lambda acc: acc, *case)


@settings(**_SETTINGS)
@given(case=_parts(st.sampled_from(["joy", "fear", "anger"])))
def test_category_counts_sums_and_rates_subtract(case):
    _check(CategoryCountCombineFn(["joy", "fear", "anger"]), tuple, *case)
    parts, merge_order, subtract_order = case
    as_ints = [[len(x) for x in p] for p in parts]
    _check(SumCombineFn(), lambda acc: acc, as_ints, merge_order, subtract_order)
    _check(RateCombineFn(), tuple, [[x == "joy" for x in p] for p in parts], merge_order, subtract_order)


# ---------------------------------------------------------------- the engine's fused slice combiner
def _specs(mode: str):
    from fair_forge_beam.engine import engine_spec
    from fair_forge_beam.metrics.registry import build_metric, statistical_mode

    options = {"mode": mode, "mc_samples": 100, "seed": 5, "group_extractor": "keyword", "clustering": False}
    m = statistical_mode(options)
    return [engine_spec(build_metric(name, m, options)) for name in ("humanity", "toxicity")]


@st.composite
def _session_inputs(draw):
    """What a session sends a slice: one input per metric (interaction side, session side, scored):
    Humanity's slice value, Toxicity's answers and its session count."""
    from fair_forge_beam.engine import Values
    from fair_forge_beam.metrics.humanity import EMOTIONS

    key = draw(st.sampled_from([f"s{i}" for i in range(6)]))
    n = draw(st.integers(1, 4))
    counts = tuple(draw(st.lists(st.integers(0, 3), min_size=len(EMOTIONS), max_size=len(EMOTIONS))))
    humanity = ((key, float(n), (draw(st.floats(0, 3, allow_nan=False)),), n), None, counts)
    answers = draw(st.lists(st.tuples(st.tuples(st.text("xyz", min_size=1, max_size=3), st.booleans(),
                                                st.lists(st.integers(0, 4), max_size=2), st.none()),
                                      st.tuples(st.integers(0, 2), st.integers(2, 9), st.just(()))),
                            min_size=1, max_size=3))
    return [(0, (None, humanity, 1)), (1, (Values(answers), 1, 1))]


@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
@settings(max_examples=15, deadline=None)
@given(case=_parts(_session_inputs()))
def test_the_fused_slice_combiner_subtracts_and_stores(mode, case):
    """The engine's slice combiner of the real Humanity and Toxicity specs: slice records of
    ``subtract(merge(a, b, c), b, c)`` are those of ``a`` (a slot emptied by the subtraction is
    ``None``: no record, as a slice the metric never reached), and a stored slice accumulator
    gives the same records."""
    from fair_forge_beam.engine import slice_accumulators, slice_combiner

    specs = _specs(mode)
    fused = slice_combiner(specs)
    assert all(can_subtract(fn) for fn in fused.fns)
    parts, merge_order, subtract_order = case
    flat = [[x for session in p for x in session] for p in parts]

    def records(acc):
        out = fused.extract_output(acc)
        # what the engine gives each estimator (its evidence counts included)
        return [None if a is None else spec.estimator.estimate("overall", slice_accumulators(spec, a), None, [])
                for spec, a in zip(specs, out)]

    accs = [_acc(fused, p) for p in flat]
    whole = fused.merge_accumulators([fused.create_accumulator(), *(accs[i] for i in merge_order)])
    left = whole
    for i in subtract_order:
        left = fused.subtract(left, fused.merge_accumulators([fused.create_accumulator(), accs[i]]))
    expected = _acc(fused, flat[0])
    assert _text(records(left)) == _text(records(expected))
    out = fused.extract_output(whole)
    for slot, fn in enumerate(fused.fns):
        if out[slot] is not None:
            stored, _ = _stored_roundtrip(fn, out[slot])
            spec = specs[slot]
            assert _text(spec.estimator.estimate("overall", slice_accumulators(spec, stored), None, [])) == \
                _text(spec.estimator.estimate("overall", slice_accumulators(spec, out[slot]), None, []))
