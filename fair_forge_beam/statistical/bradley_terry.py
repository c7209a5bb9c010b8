"""Bradley–Terry ranking from pairwise verdicts: mergeable counts and the estimator.

Model (Bradley & Terry 1952; the same model as Zermelo 1929 and arena-style leaderboards):
contestant ``i`` has a log-strength ``β_i`` and beats ``j`` with probability
``σ(β_i − β_j) = 1 / (1 + exp(−(β_i − β_j)))``. Strengths are identified by ``Σ β_i = 0``.

**Ties count as half a win for each side** (the usual convention of arena leaderboards; the
Davidson 1970 tie model is not used). With ``w_ij`` the wins of ``i`` over ``j`` plus half
their ties, the log-likelihood is ``ℓ(β) = Σ_{i≠j} w_ij · log σ(β_i − β_j)``.

* **Sufficient statistics**: the integer counts ``(wins_a, wins_b, ties)`` per unordered pair,
  held by :class:`PairwiseCountCombineFn` (a Beam ``CombineFn``; integer sums, so merge order
  and sharding never change a bit).
* **Frequentist** (:func:`fit_bradley_terry` with ``prior_sd=None``): maximum-likelihood
  estimate; Wald intervals from the inverse Fisher information (Moore–Penrose pseudo-inverse,
  which is the covariance of the sum-to-zero estimate). The MLE exists iff the "has beaten or
  tied" directed graph is strongly connected (Ford 1957; Hunter 2004, Assumption 1); when it is
  not (e.g. one contestant never lost), no strength is reported (``mle_exists=False``) instead
  of a diverging number.
* **Bayesian** (``prior_sd=σ``): independent ``N(0, σ²)`` priors on ``β``; the posterior is
  approximated by the Laplace approximation ``N(β_MAP, H⁻¹)`` (``H`` = Hessian of the negative
  log-posterior at the mode). Credible intervals are the exact normal quantiles of that
  approximation; rank probabilities (``P(best)``, mean rank) come from MC draws of it, seeded by
  key (:func:`~fair_forge_beam.statistical.seeding.estimator_rng`), never by arrival order.

The fit is convex; it uses ``scipy.optimize.minimize`` (trust-region with the exact Hessian).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from scipy import optimize, sparse, stats
from scipy.sparse import csgraph

from fair_forge_beam._beam import beam
from fair_forge_beam.options import CI_LEVEL
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.seeding import estimator_rng

__all__ = [
    "PairwiseCountCombineFn",
    "SliceStatsCombineFn",
    "BTEstimate",
    "estimate_bradley_terry",
    "pair_outcome",
    "win_matrix",
    "ford_condition",
    "BTFit",
    "fit_bradley_terry",
    "rank_probabilities",
    "strength_intervals",
    "elo_scale",
    "counts_by_player",
    "STRENGTH_TIE_TOLERANCE",
    "competition_ranks",
]


def pair_outcome(a: str, b: str, winner: Optional[str]) -> tuple[tuple[str, str], tuple[int, int, int]]:
    """One verdict as ``((lo, hi), (wins_lo, wins_hi, ties))`` with ``lo < hi`` (sorted ids).

    ``winner`` is ``a``, ``b`` or ``None`` (tie). Raises ``ValueError`` when ``a == b`` or the
    winner is neither contestant."""
    if a == b:
        raise ValueError(f"a contestant cannot meet itself ({quoted(a)})")
    lo, hi = (a, b) if a < b else (b, a)
    if winner is None:
        return (lo, hi), (0, 0, 1)
    if winner == lo:
        return (lo, hi), (1, 0, 0)
    if winner == hi:
        return (lo, hi), (0, 1, 0)
    raise ValueError(f"winner {quoted(winner)} is neither {quoted(a)} nor {quoted(b)}")


class PairwiseCountCombineFn(beam.CombineFn):
    """Pairwise verdict counts, the sufficient statistics of the Bradley–Terry likelihood.

    Input: ``(a, b, winner)`` (``winner`` = ``a``, ``b`` or ``None`` for a tie) or
    ``(a, None, None)`` to register a contestant without a comparison (e.g. a walkover).
    Accumulator: ``(players: dict[id, 1], pairs: dict[(lo, hi), [wins_lo, wins_hi, ties]])`` —
    Python ints only. Output: ``(players, pairs)`` as sorted tuples
    ``((id, …), (((lo, hi), (w_lo, w_hi, t)), …))``, identical for any merge order.

    Raises ``ValueError`` on a self-match or a winner that is not one of the two.
    """

    def create_accumulator(self):
        return ({}, {})

    def add_input(self, acc, element):
        players, pairs = acc
        a, b, winner = element
        players[a] = 1
        if b is None:
            return acc
        players[b] = 1
        key, (x, y, t) = pair_outcome(a, b, winner)
        c = pairs.setdefault(key, [0, 0, 0])
        c[0] += x
        c[1] += y
        c[2] += t
        return acc

    def merge_accumulators(self, accumulators):
        players: dict = {}
        pairs: dict = {}
        for p, q in accumulators:
            players.update(p)
            for k, v in q.items():
                c = pairs.setdefault(k, [0, 0, 0])
                c[0] += v[0]
                c[1] += v[1]
                c[2] += v[2]
        return (players, pairs)

    def extract_output(self, acc):
        players, pairs = acc
        return tuple(sorted(players)), tuple((k, tuple(pairs[k])) for k in sorted(pairs))


class SliceStatsCombineFn(beam.CombineFn):
    """Per slice: pairwise verdict counts (:class:`PairwiseCountCombineFn`) plus block counts.

    Input: a block unit ``(contestants, winner or None, pairs ((left, right, winner or None), …),
    n_interactions, n_failed)``. Accumulator: ``[pairwise accumulator, {id: [blocks, blocks_won]},
    n_blocks, n_interactions, n_failed]`` — integers only, so merge order never changes a bit.
    Output: ``(players, pairs)`` of the pairwise counts, ``((id, blocks, won), …)`` sorted,
    ``n_blocks``, ``n_interactions``, ``n_failed``.
    """

    def __init__(self):
        self.pairs = PairwiseCountCombineFn()

    def create_accumulator(self):
        return [self.pairs.create_accumulator(), {}, 0, 0, 0]

    def add_input(self, acc, unit):
        contestants, winner, pairs, n_interactions, n_failed = unit
        for c in contestants:
            acc[0] = self.pairs.add_input(acc[0], (c, None, None))
            e = acc[1].setdefault(c, [0, 0])
            e[0] += 1
            e[1] += int(c == winner)
        for p in pairs:
            acc[0] = self.pairs.add_input(acc[0], tuple(p))
        acc[2] += 1
        acc[3] += int(n_interactions)
        acc[4] += int(n_failed)
        return acc

    def merge_accumulators(self, accumulators):
        accs = list(accumulators)
        blocks: dict = {}
        for a in accs:
            for k, (n, w) in a[1].items():
                e = blocks.setdefault(k, [0, 0])
                e[0] += n
                e[1] += w
        return [self.pairs.merge_accumulators([a[0] for a in accs]), blocks, sum(a[2] for a in accs),
                sum(a[3] for a in accs), sum(a[4] for a in accs)]

    def extract_output(self, acc):
        return (self.pairs.extract_output(acc[0]), tuple((k, *acc[1][k]) for k in sorted(acc[1])), acc[2], acc[3], acc[4])


def win_matrix(players: Sequence[str], pairs: Iterable) -> np.ndarray:
    """``W[i, j]`` = wins of ``players[i]`` over ``players[j]`` plus half their ties (float64).

    ``pairs``: ``((lo, hi), (w_lo, w_hi, ties))`` items as output by
    :class:`PairwiseCountCombineFn`. Raises ``KeyError`` for a pair naming an unknown player."""
    idx = {p: i for i, p in enumerate(players)}
    w = np.zeros((len(players), len(players)), dtype=np.float64)
    for (lo, hi), (x, y, t) in pairs:
        i, j = idx[lo], idx[hi]
        w[i, j] += x + 0.5 * t
        w[j, i] += y + 0.5 * t
    return w


def ford_condition(w: np.ndarray) -> bool:
    """True iff the graph "i has beaten or tied j" (``w[i, j] > 0``) is strongly connected —
    the condition for the Bradley–Terry MLE to exist and be unique (Ford 1957; Hunter 2004).
    A single player: True (trivially, β = 0)."""
    n = w.shape[0]
    if n <= 1:
        return True
    k, _ = csgraph.connected_components(sparse.csr_matrix(w > 0), directed=True, connection="strong")
    return k == 1


class BTFit(NamedTuple):
    """Result of :func:`fit_bradley_terry`.

    ``players``: ids (sorted). ``beta``: log-strengths, sum 0 (None when the MLE does not
    exist). ``cov``: covariance of ``beta`` as centred strengths (Wald: pseudo-inverse of the
    Fisher information; Bayesian: Laplace approximation ``C H⁻¹ C`` with ``C = I − 11ᵀ/n``, the
    common shift being unidentified by the data), None with ``beta``. ``mle_exists``: Ford's condition.
    ``converged``: optimiser status. ``loglik``: ``ℓ(β)`` at the estimate (ties as half wins).
    ``prior_sd``: σ of the Gaussian prior, None for the MLE. ``message``: why ``beta`` is None.
    """

    players: tuple
    beta: Optional[np.ndarray]
    cov: Optional[np.ndarray]
    mle_exists: bool
    converged: bool
    loglik: Optional[float]
    prior_sd: Optional[float]
    message: str = ""


def _objective(w: np.ndarray, prior_sd: Optional[float]):
    n = w.shape[0]
    tot = w + w.T  # games (ties as 2 × ½)
    prec = 0.0 if prior_sd is None else 1.0 / (prior_sd * prior_sd)

    def probs(beta):
        d = beta[:, None] - beta[None, :]
        return 1.0 / (1.0 + np.exp(-d))  # p[i, j] = P(i beats j)

    def f(beta):
        d = beta[:, None] - beta[None, :]
        # -log σ(d) = log(1 + exp(-d)), computed stably
        return float(np.sum(w * np.logaddexp(0.0, -d)) + 0.5 * prec * beta @ beta)

    def grad(beta):
        p = probs(beta)
        return -(w.sum(axis=1) - (tot * p).sum(axis=1)) + prec * beta

    def hess(beta):
        p = probs(beta)
        v = tot * p * p.T  # n_ij p_ij (1 - p_ij), symmetric
        h = -v
        h[np.diag_indices(n)] = v.sum(axis=1) - np.diag(v) + prec
        return h

    return f, grad, hess


def fit_bradley_terry(players: Sequence[str], pairs: Iterable, prior_sd: Optional[float] = None) -> BTFit:
    """Fit the Bradley–Terry model (ties as half wins) to pairwise counts.

    Args:
        players: contestant ids; order defines the order of ``beta`` (callers pass them sorted).
        pairs: ``((lo, hi), (w_lo, w_hi, ties))`` items (:class:`PairwiseCountCombineFn` output).
        prior_sd: None → maximum likelihood (frequentist); σ > 0 → MAP under ``N(0, σ²)`` priors
            with the Laplace covariance (Bayesian).

    Returns:
        :class:`BTFit`. No players → empty fit; one player → ``beta = [0]`` with zero variance;
        the MLE without Ford's condition → ``beta = None`` and a message naming the cause.

    Raises:
        ValueError: ``prior_sd`` not a finite number > 0, or a pair with an unknown player.
    """
    players = tuple(players)
    if prior_sd is not None and not (np.isfinite(prior_sd) and prior_sd > 0):
        raise ValueError(f"prior_sd must be a finite number > 0 (or None), got {quoted(prior_sd)}")
    try:
        w = win_matrix(players, pairs)
    except KeyError as exc:
        raise ValueError(f"pair names a player not in players: {quoted(exc.args[0]) if exc.args else 'unknown'}") from None
    n = len(players)
    exists = ford_condition(w)
    if n == 0:
        return BTFit(players, np.zeros(0), np.zeros((0, 0)), True, True, 0.0, prior_sd, "no contestants")
    if prior_sd is None and not exists:
        return BTFit(players, None, None, False, False, None, None,
                     "the maximum-likelihood strengths do not exist: some contestants never lost (or never won) "
                     "against the rest (Ford's condition fails)")
    f, grad, hess = _objective(w, prior_sd)
    if n == 1:
        beta = np.zeros(1)
        ok = True
    else:
        if prior_sd is None:
            # the likelihood is shift-invariant: fit with β_0 = 0 (positive-definite Hessian),
            # then report the sum-0 point
            full = lambda x: np.concatenate(([0.0], x))
            res = optimize.minimize(lambda x: f(full(x)), np.zeros(n - 1), jac=lambda x: grad(full(x))[1:],
                                    hess=lambda x: hess(full(x))[1:, 1:], method="trust-exact", options={"gtol": 1e-9})
            beta = full(res.x)
            beta = beta - beta.mean()
        else:
            res = optimize.minimize(f, np.zeros(n), jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-9})
            beta = res.x
        # trust-exact may stop with "bad approximation" once the gradient is at rounding level
        ok = bool(res.success) or float(np.max(np.abs(res.jac))) < 1e-7 * max(1.0, float(w.sum()))
    h = hess(beta)
    if prior_sd is None:
        cov = np.linalg.pinv(h, hermitian=True)
    else:
        # the data identify only differences: report the posterior of the centred strengths
        # β − mean(β) (C Σ C, C = I − 11ᵀ/n); otherwise every marginal interval would carry the
        # prior's variance of the common shift
        c = np.eye(n) - 1.0 / n
        cov = c @ np.linalg.inv(h) @ c
    cov = 0.5 * (cov + cov.T)
    loglik = -float(np.sum(w * np.logaddexp(0.0, -(beta[:, None] - beta[None, :]))))
    return BTFit(players, beta, cov, exists, ok, loglik, prior_sd, "" if ok else "optimiser did not converge")


def strength_intervals(fit: BTFit, level: float = CI_LEVEL) -> list[tuple[float, float]]:
    """Equal-tailed normal intervals ``β_i ± z·sd_i`` at ``level`` (Wald for the MLE, Laplace
    credible interval for the MAP). Raises ``ValueError`` when the fit has no ``beta``."""
    if fit.beta is None:
        raise ValueError("no strengths to give intervals for")
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    sd = np.sqrt(np.clip(np.diag(fit.cov), 0.0, None))
    return [(float(b - z * s), float(b + z * s)) for b, s in zip(fit.beta, sd)]


def rank_probabilities(fit: BTFit, draws: int, seed: int, *key) -> tuple[np.ndarray, np.ndarray]:
    """``(P(best), mean rank)`` per player from ``draws`` samples of ``N(beta, cov)``.

    Rank 1 = strongest; exact ties between draws are impossible in practice (continuous).
    The generator is :func:`estimator_rng` ``(seed, *key)``: same key → same numbers on every
    worker and runner. Raises ``ValueError`` when the fit has no ``beta``."""
    if fit.beta is None:
        raise ValueError("no strengths to rank")
    n = len(fit.beta)
    if n == 1:
        return np.ones(1), np.ones(1)
    rng = estimator_rng(seed, *[str(k) for k in key])
    z = rng.multivariate_normal(fit.beta, fit.cov, size=int(draws), method="eigh")
    order = np.argsort(-z, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(z.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, n + 1)[None, :]
    return (ranks == 1).mean(axis=0), ranks.mean(axis=0)


#: two log-strengths closer than this are equal estimates (they share a rank): far above what the
#: optimiser leaves (gradient tolerance 1e-9; an exactly symmetric verdict table gives strengths
#: equal to the last bits, e.g. 0.23104905946749485 and 0.23104905946749452) and far below what any
#: data resolve (a strength's standard error is at least 2/√(its matches), its Fisher information
#: being at most a quarter of them: 0.002 after a million matches); 1e-6 is 0.00017 Elo points
STRENGTH_TIE_TOLERANCE = 1e-6


def competition_ranks(values: Sequence[Optional[float]], tolerance: float = 0.0) -> list[Optional[int]]:
    """Standard competition ranks ("1224") of ``values``, higher = better: equal estimates share
    a rank and the next rank skips as many places as shared it (1, 1, 3). ``None`` (no estimate)
    gets no rank. Values are equal when they differ by at most ``tolerance`` from the previous
    one, in descending order (``0``: exactly equal, as win rates of integer counts are). The
    ranks depend on the values only, never on the order of ``values``' ids."""
    order = sorted((i for i, v in enumerate(values) if v is not None), key=lambda i: -values[i])
    ranks: list[Optional[int]] = [None] * len(values)
    prev = None
    for place, i in enumerate(order, start=1):
        v = values[i]
        ranks[i] = ranks[prev] if prev is not None and values[prev] - v <= tolerance else place
        prev = i
    return ranks


def elo_scale(beta: float) -> float:
    """Log-strength on the Elo scale used by arena leaderboards: ``1000 + 400·β / ln 10``."""
    return 1000.0 + 400.0 * beta / math.log(10.0)


def counts_by_player(players: Sequence[str], pairs: Iterable) -> Mapping[str, tuple[int, int, int]]:
    """``{player: (wins, losses, ties)}`` from pairwise counts."""
    out = {p: [0, 0, 0] for p in players}
    for (lo, hi), (x, y, t) in pairs:
        out[lo][0] += x
        out[lo][1] += y
        out[lo][2] += t
        out[hi][0] += y
        out[hi][1] += x
        out[hi][2] += t
    return {p: tuple(v) for p, v in out.items()}


class BTEstimate(NamedTuple):
    """A slice's Bradley–Terry estimate: the ``fit``, per compared player its log-strength
    :class:`Estimate` (``strengths``; interval at the mode's ``ci_level``), per player
    ``(P(best), mean rank)`` (``ranks``; distribution modes only, else empty) and the sentence
    that names the ``estimator``."""

    fit: BTFit
    strengths: dict
    ranks: dict
    estimator: str


def estimate_bradley_terry(pairs, wlt: Mapping[str, tuple[int, int, int]], mode: StatisticalMode,
                           prior_sd: float, *key) -> BTEstimate:
    """Bradley–Terry strengths of the players met in ``pairs`` (``((lo, hi), (w_lo, w_hi, ties))``
    counts, ties as half wins), in ``mode``.

    Point-estimate mode: maximum likelihood with Wald intervals from the Fisher information at
    ``mode.ci_level`` (the one frequentist estimate that carries an interval). Distribution mode:
    Gaussian prior N(0, ``prior_sd``²) on log-strengths, Laplace-approximation posterior with
    ``ci_level`` credible intervals, and P(best) / mean rank from ``mode.replicate_count`` draws
    seeded by ``(mode.seed, *key)`` (:func:`rank_probabilities`). ``wlt``: per player
    ``(wins, losses, ties)`` (:func:`counts_by_player`), whose sum is each estimate's ``n``.
    """
    bayes = mode.is_bayesian
    level = float(mode.ci_level)
    compared = sorted({p for (lo, hi), _ in pairs for p in (lo, hi)})
    fit = fit_bradley_terry(compared, pairs, prior_sd if bayes else None)
    strengths: dict = {}
    ranks: dict = {}
    if fit.beta is not None and len(compared):
        ivs = strength_intervals(fit, level)
        for p, b, (lo, hi) in zip(compared, fit.beta, ivs):
            strengths[p] = Estimate(mean=float(b), ci_low=lo, ci_high=hi, n=sum(wlt[p]))
        if bayes:
            pb, mr = rank_probabilities(fit, mode.replicate_count, mode.seed, *key)
            ranks = {p: (float(x), float(y)) for p, x, y in zip(compared, pb, mr)}
    if bayes:
        estimator = (f"Bradley-Terry, ties as half wins; Gaussian prior N(0, {prior_sd}^2) on log-strengths, "
                     f"Laplace-approximation posterior, {level:.0%} credible intervals; P(best) and mean rank from "
                     f"{mode.replicate_count} draws seeded by slice")
    else:
        estimator = f"Bradley-Terry maximum likelihood, ties as half wins; {level:.0%} Wald intervals (Fisher information)"
        if fit.beta is None:
            estimator += f"; no strengths: {fit.message}; ranked by win rate"
    return BTEstimate(fit, strengths, ranks, estimator)
