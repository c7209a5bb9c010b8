"""Bradley–Terry statistics (fair_forge_beam.statistical.bradley_terry): the MLE against an
independent algorithm (Hunter 2004 MM), closed forms for two players, existence (Ford's
condition), the Laplace posterior against a direct optimisation, seeded rank probabilities, and
merge-order invariance of the count CombineFns (hypothesis)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import optimize

from fair_forge_beam.metrics.best_of import SliceStatsCombineFn
from fair_forge_beam.statistical.bradley_terry import (
    PairwiseCountCombineFn,
    counts_by_player,
    elo_scale,
    fit_bradley_terry,
    ford_condition,
    pair_outcome,
    rank_probabilities,
    strength_intervals,
    win_matrix,
)

PLAYERS = ("a", "b", "c", "d")
# a strongly connected set of verdicts (everyone wins and loses something), with ties
PAIRS = (
    (("a", "b"), (5, 2, 1)),
    (("a", "c"), (3, 3, 0)),
    (("a", "d"), (6, 1, 2)),
    (("b", "c"), (2, 4, 1)),
    (("b", "d"), (4, 2, 0)),
    (("c", "d"), (1, 1, 3)),
)


def mm_bradley_terry(w: np.ndarray, iters: int = 20000) -> np.ndarray:
    """Hunter's (2004) MM algorithm for the BT MLE, on strengths π = exp(β); β centred."""
    n = w + w.T
    pi = np.ones(w.shape[0])
    for _ in range(iters):
        denom = (n / (pi[:, None] + pi[None, :])).sum(axis=1)
        pi = w.sum(axis=1) / denom
        pi /= np.exp(np.log(pi).mean())
    b = np.log(pi)
    return b - b.mean()


def test_mle_matches_the_mm_algorithm_and_the_win_matrix_counts_ties_as_halves():
    w = win_matrix(PLAYERS, PAIRS)
    assert w[0, 1] == 5.5 and w[1, 0] == 2.5 and w[2, 3] == 2.5 and w[3, 2] == 2.5
    fit = fit_bradley_terry(PLAYERS, PAIRS)
    assert fit.mle_exists and fit.converged and fit.prior_sd is None
    assert abs(fit.beta.sum()) < 1e-12
    np.testing.assert_allclose(fit.beta, mm_bradley_terry(w), atol=1e-7)
    # the score equations hold: observed wins = expected wins
    p = 1 / (1 + np.exp(-(fit.beta[:, None] - fit.beta[None, :])))
    np.testing.assert_allclose(w.sum(axis=1), ((w + w.T) * p).sum(axis=1), atol=1e-8)
    # covariance of the sum-0 estimate: rows sum to 0
    np.testing.assert_allclose(fit.cov.sum(axis=1), 0.0, atol=1e-10)


def test_two_players_closed_form_and_wald_interval():
    # 3 wins, 1 loss: β_a − β_b = log 3; Fisher information of the difference n·p(1−p) = 0.75,
    # so var(β_a) = var(diff)/4 = 1/3
    fit = fit_bradley_terry(["a", "b"], [(("a", "b"), (3, 1, 0))])
    assert fit.beta[0] == pytest.approx(math.log(3) / 2, abs=1e-9)
    assert fit.cov[0, 0] == pytest.approx(1 / 3, abs=1e-9)
    (lo, hi), _ = strength_intervals(fit, 0.95)
    assert (lo, hi) == pytest.approx((math.log(3) / 2 - 1.959963984540054 * math.sqrt(1 / 3),
                                      math.log(3) / 2 + 1.959963984540054 * math.sqrt(1 / 3)), abs=1e-9)
    assert fit.loglik == pytest.approx(3 * math.log(0.75) + math.log(0.25), abs=1e-9)
    # ties only: equal strengths
    tie = fit_bradley_terry(["a", "b"], [(("a", "b"), (0, 0, 4))])
    assert tie.beta == pytest.approx([0.0, 0.0], abs=1e-12)
    assert elo_scale(0.0) == 1000.0 and elo_scale(math.log(10)) == pytest.approx(1400.0)


def test_no_mle_without_fords_condition_but_a_posterior():
    pairs = [(("a", "b"), (3, 0, 0)), (("b", "c"), (1, 1, 0))]  # a never lost
    assert not ford_condition(win_matrix("abc", pairs))
    fit = fit_bradley_terry("abc", pairs)
    assert fit.beta is None and not fit.mle_exists and "Ford" in fit.message
    with pytest.raises(ValueError):
        strength_intervals(fit)
    post = fit_bradley_terry("abc", pairs, prior_sd=1.0)
    assert post.beta is not None and not post.mle_exists
    assert post.beta[0] > post.beta[1] and post.beta[0] > post.beta[2]
    # a single player and no players are defined; a tie makes both directions
    assert fit_bradley_terry(["a"], []).beta.tolist() == [0.0]
    assert fit_bradley_terry([], []).beta.size == 0
    assert ford_condition(win_matrix("ab", [(("a", "b"), (0, 0, 1))]))


def test_laplace_posterior_matches_a_direct_optimisation_of_the_log_posterior():
    sd = 0.8
    w = win_matrix(PLAYERS, PAIRS)

    def neg_log_post(b):
        total = 0.0
        for i in range(4):
            for j in range(4):
                if i != j and w[i, j]:
                    total -= w[i, j] * math.log(1 / (1 + math.exp(-(b[i] - b[j]))))
        return total + sum(x * x for x in b) / (2 * sd * sd)

    ref = optimize.minimize(neg_log_post, np.zeros(4), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 40000, "maxfev": 40000})
    fit = fit_bradley_terry(PLAYERS, PAIRS, prior_sd=sd)
    np.testing.assert_allclose(fit.beta, ref.x, atol=1e-5)
    # Laplace covariance = inverse of the numerical Hessian of the negative log-posterior
    eps = 1e-4
    h = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            e_i, e_j = np.eye(4)[i] * eps, np.eye(4)[j] * eps
            h[i, j] = (neg_log_post(fit.beta + e_i + e_j) - neg_log_post(fit.beta + e_i - e_j)
                       - neg_log_post(fit.beta - e_i + e_j) + neg_log_post(fit.beta - e_i - e_j)) / (4 * eps * eps)
    # (of the centred strengths: the data identify differences only)
    c = np.eye(4) - 0.25
    np.testing.assert_allclose(fit.cov, c @ np.linalg.inv(h) @ c, atol=1e-4)
    np.testing.assert_allclose(fit.cov.sum(axis=1), 0.0, atol=1e-10)
    # the prior shrinks towards 0 compared with the MLE
    assert np.abs(fit.beta).sum() < np.abs(fit_bradley_terry(PLAYERS, PAIRS).beta).sum()


def test_rank_probabilities_are_seeded_by_key():
    fit = fit_bradley_terry(PLAYERS, PAIRS, prior_sd=1.0)
    pb, mr = rank_probabilities(fit, 4000, 42, "bestof", "overall", "bradley-terry")
    pb2, mr2 = rank_probabilities(fit, 4000, 42, "bestof", "overall", "bradley-terry")
    pb3, _ = rank_probabilities(fit, 4000, 42, "bestof", "language=english", "bradley-terry")
    assert pb.tolist() == pb2.tolist() and mr.tolist() == mr2.tolist()
    assert pb.tolist() != pb3.tolist()
    assert pb.sum() == pytest.approx(1.0) and mr.sum() == pytest.approx(1 + 2 + 3 + 4)
    assert int(np.argmax(pb)) == int(np.argmax(fit.beta))


def test_pair_outcome_and_counts():
    assert pair_outcome("b", "a", "b") == (("a", "b"), (0, 1, 0))
    assert pair_outcome("a", "b", None) == (("a", "b"), (0, 0, 1))
    with pytest.raises(ValueError):
        pair_outcome("a", "a", None)
    with pytest.raises(ValueError):
        pair_outcome("a", "b", "c")
    assert counts_by_player("ab", [(("a", "b"), (2, 1, 3))]) == {"a": (2, 1, 3), "b": (1, 2, 3)}
    with pytest.raises(ValueError):
        fit_bradley_terry(["a"], [(("a", "z"), (1, 0, 0))])
    with pytest.raises(ValueError):
        fit_bradley_terry(["a", "b"], [], prior_sd=0.0)


# ------------------------------------------------------------------ merge order (hypothesis)
IDS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def verdicts(draw):
    a = draw(IDS)
    b = draw(IDS.filter(lambda x: x != a))
    return a, b, draw(st.sampled_from([a, b, None]))


def _combine_in_pieces(fn, items, perm, cuts):
    ordered = [items[i] for i in perm]
    bounds = [0, *cuts, len(ordered)]
    accs = []
    for lo, hi in zip(bounds, bounds[1:]):
        acc = fn.create_accumulator()
        for x in ordered[lo:hi]:
            acc = fn.add_input(acc, x)
        accs.append(acc)
    return fn.extract_output(fn.merge_accumulators(accs[::-1]))


@given(st.data())
def test_pairwise_counts_do_not_depend_on_merge_order(data):
    items = data.draw(st.lists(verdicts(), max_size=25), label="verdicts")
    items += data.draw(st.lists(st.tuples(IDS, st.none(), st.none()), max_size=3), label="registrations")
    fn = PairwiseCountCombineFn()
    ref = _combine_in_pieces(fn, items, range(len(items)), [])
    perm = data.draw(st.permutations(range(len(items))), label="order")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=5), label="cuts"))
    assert _combine_in_pieces(fn, items, perm, cuts) == ref
    players, pairs = ref
    assert sum(sum(c) for _, c in pairs) == sum(1 for x in items if x[1] is not None)


@st.composite
def block_units(draw):
    contestants = tuple(draw(st.lists(IDS, min_size=1, max_size=4, unique=True)))
    pairs = []
    for i in range(len(contestants)):
        for j in range(i + 1, len(contestants)):
            a, b = contestants[i], contestants[j]
            pairs.append((a, b, draw(st.sampled_from([a, b, None]))))
    winner = draw(st.sampled_from(list(contestants) + [None]))
    return contestants, winner, tuple(pairs), draw(st.integers(1, 9)), draw(st.integers(0, 2))


@given(st.data())
def test_slice_stats_do_not_depend_on_merge_order(data):
    items = data.draw(st.lists(block_units(), max_size=12), label="blocks")
    fn = SliceStatsCombineFn()
    ref = _combine_in_pieces(fn, items, range(len(items)), [])
    perm = data.draw(st.permutations(range(len(items))), label="order")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=4), label="cuts"))
    assert _combine_in_pieces(fn, items, perm, cuts) == ref
    (_, _), blocks, n_blocks, n_inter, n_failed = ref
    assert n_blocks == len(items) and n_inter == sum(u[3] for u in items) and n_failed == sum(u[4] for u in items)
    assert sum(won for _, _, won in blocks) == sum(1 for u in items if u[1] is not None)
