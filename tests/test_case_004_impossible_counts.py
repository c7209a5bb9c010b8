"""case-004: impossible counts reach a statistical primitive.

``/work/shared/cases/case-004-impossible-counts.md``: ``rate_estimation(successes=5,
trials=3)``, ``rate_estimation(successes=-1, trials=3)`` and a ``distribution_divergence`` with
a negative count must raise a ``ValueError`` whose message names the argument and the value,
in both modes — never 1.667 or a posterior with negative parameters. ``rate_estimation(0, 0)``
is defined and documented: the prior mean in Bayesian mode, a clearly marked empty result
(``None``) rather than a fake 0.0 rate in Frequentist mode.
"""
from __future__ import annotations

import re

import apache_beam as beam
import pytest

from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.statistical import combiners as C

MODES = [FrequentistMode(), BayesianMode()]
MODE_IDS = ["frequentist", "bayesian"]


# ------------------------------------------------------------------------------ rate_estimation
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_more_successes_than_trials(mode):
    with pytest.raises(ValueError) as exc:
        mode.rate_estimation(successes=5, trials=3)
    msg = str(exc.value)
    assert "successes" in msg and "5" in msg
    assert "trials" in msg and "3" in msg


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize(
    "successes, trials, bad_arg, bad_value",
    [
        (-1, 3, "successes", "-1"),
        (0, -1, "trials", "-1"),
        (-2, -1, "successes", "-2"),
        (1.5, 3, "successes", "1.5"),
        (1, 2.5, "trials", "2.5"),
        (float("nan"), 3, "successes", "nan"),
        (1, float("inf"), "trials", "inf"),
        (True, 3, "successes", "True"),
        ("2", 3, "successes", "'2'"),
    ],
)
def test_invalid_counts_name_argument_and_value(mode, successes, trials, bad_arg, bad_value):
    with pytest.raises(ValueError) as exc:
        mode.rate_estimation(successes=successes, trials=trials)
    msg = str(exc.value)
    assert bad_arg in msg
    assert bad_value in msg


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize(
    "successes, trials, bad_arg, bad_value",
    [
        (-1.0, 3, "successes", "-1"),  # an integer-valued float is accepted as a count ...
        (-3.0, -2.0, "successes", "-3"),  # ... but its sign must still be checked
        (1, -2.0, "trials", "-2"),
    ],
)
def test_negative_integer_valued_floats_rejected(mode, successes, trials, bad_arg, bad_value):
    """Integer-valued floats (e.g. counts that went through a float column) are accepted as
    counts, so a negative one must be rejected like a negative int: (-3.0, -2.0) must not give
    a rate of 1.5 (Frequentist) nor a Beta(-2, 2) posterior (Bayesian)."""
    with pytest.raises(ValueError) as exc:
        mode.rate_estimation(successes=successes, trials=trials)
    msg = str(exc.value)
    assert bad_arg in msg
    assert bad_value in msg


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_integer_valued_floats_are_counts(mode):
    a = mode.rate_estimation(2.0, 10.0)
    b = mode.rate_estimation(2, 10)
    if mode.is_bayesian:
        assert (a["mean"], a["ci_low"], a["ci_high"]) == (b["mean"], b["ci_low"], b["ci_high"])
    else:
        assert a == b == 0.2


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_estimate_rate_validates_too(mode):
    with pytest.raises(ValueError, match=r"successes=5.*trials=3"):
        C.estimate_rate(5, 3, mode)
    with pytest.raises(ValueError, match=r"successes.*-1"):
        C.estimate_rate(-1, 3, mode)


# ------------------------------------------------------------------------------ rate (0, 0)
def test_no_trials_frequentist_is_marked_empty():
    assert FrequentistMode().rate_estimation(0, 0) is None
    e = C.estimate_rate(0, 0, FrequentistMode())
    assert e.mean is None and e.ci_low is None and e.ci_high is None and e.n == 0


def test_no_trials_bayesian_is_the_prior():
    s = BayesianMode().rate_estimation(0, 0)
    assert s["mean"] == 0.5
    assert s["ci_low"] == pytest.approx(0.025, abs=1e-12)
    assert s["ci_high"] == pytest.approx(0.975, abs=1e-12)
    s = BayesianMode(beta_prior_a=2.0, beta_prior_b=6.0).rate_estimation(0, 0)
    assert s["mean"] == 0.25
    e = C.estimate_rate(0, 0, BayesianMode(beta_prior_a=2.0, beta_prior_b=6.0))
    assert e.mean == 0.25 and e.n == 0


# ------------------------------------------------------------------------------ distribution_divergence
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_negative_observed_count(mode):
    with pytest.raises(ValueError) as exc:
        mode.distribution_divergence({"A": -1, "B": 3}, {"A": 0.5, "B": 0.5})
    msg = str(exc.value)
    assert "observed" in msg and "'A'" in msg and "-1" in msg


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_negative_reference_value(mode):
    with pytest.raises(ValueError) as exc:
        mode.distribution_divergence({"A": 1, "B": 3}, {"A": -0.5, "B": 1.5})
    msg = str(exc.value)
    assert "reference" in msg and "'A'" in msg and "-0.5" in msg


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_observed_count(mode, bad):
    with pytest.raises(ValueError, match=r"observed\['B'\]"):
        mode.distribution_divergence({"A": 1, "B": bad}, {"A": 0.5, "B": 0.5})


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_estimate_divergence_negative_counts(mode):
    """The estimator on a count vector must not hide a negative count (here the total is 0,
    which would otherwise short-circuit to "no data")."""
    with pytest.raises(ValueError, match=re.escape("-1")):
        C.estimate_divergence([1, -1], ["A", "B"], {"A": 0.5, "B": 0.5}, mode)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_estimate_distribution_negative_counts(mode):
    """A negative count must raise, not give a proportion of -0.5 or a Beta(0, ·) marginal."""
    with pytest.raises(ValueError) as exc:
        C.estimate_distribution([3, -1], ["A", "B"], mode)
    assert "'B'" in str(exc.value) and "-1" in str(exc.value)


# ------------------------------------------------------------------------------ CombineFns
@pytest.mark.parametrize(
    "element, pattern",
    [
        ((5, 3), r"successes=5.*trials=3"),
        ((-1, 3), r"successes.*-1"),
        ((0, -4), r"trials.*-4"),
        ((1.5, 2), r"successes.*1\.5"),
        ((-1.0, 3), r"successes.*-1"),
    ],
)
def test_rate_combine_fn_rejects(element, pattern):
    fn = C.RateCombineFn()
    with pytest.raises(ValueError, match=pattern):
        fn.add_input(fn.create_accumulator(), element)


def test_rate_combine_fn_accepts_valid():
    fn = C.RateCombineFn()
    acc = fn.create_accumulator()
    for e in (True, False, (2, 5), (0, 0), (3, 3)):
        acc = fn.add_input(acc, e)
    assert fn.extract_output(acc) == (6, 10)


def test_rate_combine_fn_rejects_in_pipeline(test_pipeline):
    """In a pipeline the bad element fails the run with the same message."""
    with pytest.raises(Exception, match=r"successes=5.*trials=3"):
        with test_pipeline as p:
            _ = p | beam.Create([("k", (1, 2)), ("k", (5, 3))]) | beam.CombinePerKey(C.RateCombineFn())


CATS = ["a", "b", "c"]


@pytest.mark.parametrize(
    "element, pattern",
    [
        ("d", r"'d'.*not in the declared set"),
        ({"d": 1}, r"'d'.*not in the declared set"),
        ({"a": -1}, r"'a'.*-1"),
        ({"b": 1.5}, r"'b'.*1\.5"),
        ({"c": True}, r"'c'.*True"),
        ((1, -2, 0), r"'b'.*-2"),
        ((1, 0, 0.5), r"'c'.*0\.5"),
        ((1, 2), r"2 entries, expected 3"),
        ([0, 0, 0, 0], r"4 entries, expected 3"),
    ],
)
def test_category_count_combine_fn_rejects(element, pattern):
    fn = C.CategoryCountCombineFn(CATS)
    with pytest.raises(ValueError, match=pattern):
        fn.add_input(fn.create_accumulator(), element)


@pytest.mark.parametrize(
    "element, name",
    [
        ({"a": float("nan")}, "'a'"),
        ({"b": float("inf")}, "'b'"),
        ((0, 0, float("inf")), "'c'"),
        ((float("nan"), 0, 0), "'a'"),
    ],
)
def test_category_count_combine_fn_rejects_non_finite(element, name):
    """A NaN or infinite count must raise the same named ValueError as any other bad count
    (not an ``OverflowError`` from ``int(inf)``, nor numpy's anonymous NaN message)."""
    fn = C.CategoryCountCombineFn(CATS)
    with pytest.raises(ValueError) as exc:
        fn.add_input(fn.create_accumulator(), element)
    assert name in str(exc.value)


def test_category_count_combine_fn_bad_declaration():
    for cats in ([], ["a", "a"]):
        with pytest.raises(ValueError, match="distinct"):
            C.CategoryCountCombineFn(cats)


def test_category_count_combine_fn_accepts_valid():
    fn = C.CategoryCountCombineFn(CATS)
    acc = fn.create_accumulator()
    for e in ("a", {"b": 2, "c": 0}, (1, 0, 3), {"a": 2.0}):
        acc = fn.add_input(acc, e)
    assert fn.extract_output(acc) == (4, 2, 3)
