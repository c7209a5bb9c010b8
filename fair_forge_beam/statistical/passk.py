"""pass@k and pass^k estimators (spec §6.7; Chen et al. 2021; Yao et al. 2024).

Statistics of the Agentic metric: pure functions of counts, validated up front.

* Plug-in (the original's per-conversation values, spec §6.7): with ``p = c/n``,
  ``pass@k = 1 − (1 − p)^k`` and ``pass^k = p^k`` (0 when ``c = 0``, 1 when ``c = n``); ``k`` may
  exceed ``n``.
* Unbiased, over ``n`` trials of the same task with ``c`` successes (sampling ``k`` of the ``n``
  without replacement): ``pass@k = 1 − C(n−c, k)/C(n, k)`` (Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code") and ``pass^k = C(c, k)/C(n, k)`` (Yao et al. 2024,
  "τ-bench"). Defined for ``k ≤ n`` only; ``k > n`` returns ``None``.
* Bayesian, ``p ~ Beta(a + c, b + n − c)``: closed-form posterior means
  ``E[p^k] = B(a'+k, b')/B(a', b')`` and ``E[1 − (1−p)^k] = 1 − B(a', b'+k)/B(a', b')``; both
  quantities are monotone in ``p``, so their equal-tailed credible intervals are the transforms
  of the exact Beta quantiles — no Monte Carlo. Spec §19: n=3, c=1, Beta(1,1) prior →
  means 0.7143 / 0.1143.
* Over many units (tasks with repeated trials, or conversations): :class:`PassCountsCombineFn`
  merges integer ``(n, c)`` statistics per slice in any order; :func:`pass_k_curve` averages the
  per-unit estimators over units (τ-bench's per-task average) and, in Bayesian mode, gives the
  posterior of that same average by a Bayesian bootstrap over the units (Rubin 1981), whose
  Gamma weights are keyed by ``(seed, key, n, c)``: one estimand in both modes.
"""
from __future__ import annotations

import math
from math import comb
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from scipy import special, stats

from fair_forge_beam._beam import beam
from fair_forge_beam.quoting import quoted

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode, check_counts, percentile_interval
from fair_forge_beam.statistical.seeding import estimator_rng

__all__ = ["check_k", "pass_at_k_plugin", "pass_pow_k_plugin", "pass_at_k_unbiased", "pass_pow_k_unbiased", "pass_k_estimates",
           "pass_k_note", "PassCountsCombineFn", "task_histogram", "CurvePoint", "pass_k_curve"]


def check_k(k) -> int:
    """Validate the attempt count (case-005).

    Raises:
        ValueError: ``k`` is not a positive integer (``k = 0``, ``k = -1``, ``2.5``, ``True``...).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer (the number of attempts in pass@k / pass^k), got {quoted(k)}")
    return k


def _plugin_rate(n: int, c: int, k: int) -> Optional[float]:
    """Validated ``p = c/n`` for the plug-in estimators; ``None`` when ``n = 0``."""
    c, n = check_counts(c, n)
    check_k(k)
    return None if n == 0 else c / n


def pass_at_k_plugin(n: int, c: int, k: int) -> Optional[float]:
    """Plug-in pass@k ``1 − (1 − c/n)^k`` in [0, 1] (0 when ``c = 0``, 1 when ``c = n``); ``None`` when ``n = 0``."""
    p = _plugin_rate(n, c, k)
    return None if p is None else 1.0 - (1.0 - p) ** k


def pass_pow_k_plugin(n: int, c: int, k: int) -> Optional[float]:
    """Plug-in pass^k ``(c/n)^k`` in [0, 1] (0 when ``c = 0``, 1 when ``c = n``); ``None`` when ``n = 0``."""
    p = _plugin_rate(n, c, k)
    return None if p is None else p**k


def pass_at_k_unbiased(n: int, c: int, k: int) -> Optional[float]:
    """Unbiased pass@k ``1 − C(n−c, k)/C(n, k)`` (Chen et al. 2021); ``None`` if ``k > n`` or ``n = 0``."""
    c, n = check_counts(c, n)
    k = check_k(k)
    if n == 0 or k > n:
        return None
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_pow_k_unbiased(n: int, c: int, k: int) -> Optional[float]:
    """Unbiased pass^k ``C(c, k)/C(n, k)`` (Yao et al. 2024, τ-bench); ``None`` if ``k > n`` or ``n = 0``."""
    c, n = check_counts(c, n)
    k = check_k(k)
    if n == 0 or k > n:
        return None
    return comb(c, k) / comb(n, k)


def pass_k_estimates(n: int, c: int, k: int, mode: StatisticalMode) -> tuple[Estimate, Estimate]:
    """``(pass@k, pass^k)`` for ``c`` correct out of ``n``.

    Frequentist: the plug-in values. Bayesian (Beta prior from the mode, default Beta(1, 1)):
    closed-form posterior means and exact credible intervals (see the module docstring); ``n = 0``
    gives the prior's values.
    """
    c, n = check_counts(c, n)
    k = check_k(k)
    if not mode.is_bayesian:
        return Estimate(mean=pass_at_k_plugin(n, c, k), n=n), Estimate(mean=pass_pow_k_plugin(n, c, k), n=n)
    a0, b0 = mode.beta_prior()
    a = a0 + c
    b = b0 + n - c
    alpha = mode.tail_probability
    p_lo, p_hi = stats.beta.ppf([alpha, 1.0 - alpha], a, b)
    base = special.betaln(a, b)
    mean_pow = math.exp(special.betaln(a + k, b) - base)
    mean_at = 1.0 - math.exp(special.betaln(a, b + k) - base)
    at = Estimate(mean=mean_at, ci_low=1.0 - (1.0 - p_lo) ** k, ci_high=1.0 - (1.0 - p_hi) ** k, n=n)
    pw = Estimate(mean=mean_pow, ci_low=p_lo**k, ci_high=p_hi**k, n=n)
    return at, pw


# ----------------------------------------------------------------------------------------------
# Mergeable (n, c) statistics and estimators over many conversations / tasks
# ----------------------------------------------------------------------------------------------
class PassCountsCombineFn(beam.CombineFn):
    """Mergeable pass@k statistics of a slice, from one element per conversation.

    Input: ``(task_id or None, n, c)`` — a conversation with ``n`` scored interactions of which
    ``c`` are correct, and the task it is a trial of. A conversation is a *successful trial*
    when ``n > 0`` and ``c == n``.

    Accumulator (and output, as :class:`~fair_forge_beam.engine.CombineSlices` needs):
    ``{"conversations": {(n, c): count}, "tasks": {task_id: (trials, successes)},
    "untasked": int, "empty": int}`` — integers only, so any merge order gives the same
    accumulator. Conversations with ``n = 0`` count in ``empty`` and are no trial. Memory is
    O(distinct (n, c) pairs + tasks).

    Raises ``ValueError`` (from :func:`check_counts`) on impossible counts.
    """

    def create_accumulator(self):
        return {"conversations": {}, "tasks": {}, "untasked": 0, "empty": 0}

    def add_input(self, acc, element):
        task, n, c = element
        c, n = check_counts(c, n)
        conv = acc["conversations"]
        conv[(n, c)] = conv.get((n, c), 0) + 1
        if n == 0:
            acc["empty"] += 1
        elif task is None:
            acc["untasked"] += 1
        else:
            t, s = acc["tasks"].get(task, (0, 0))
            acc["tasks"][task] = (t + 1, s + (1 if c == n else 0))
        return acc

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for a in accumulators:
            for key, v in a["conversations"].items():
                out["conversations"][key] = out["conversations"].get(key, 0) + v
            for task, (t, s) in a["tasks"].items():
                t0, s0 = out["tasks"].get(task, (0, 0))
                out["tasks"][task] = (t0 + t, s0 + s)
            out["untasked"] += a["untasked"]
            out["empty"] += a["empty"]
        return out

    def extract_output(self, acc):
        return acc


def task_histogram(tasks: Mapping[Any, tuple[int, int]]) -> dict[tuple[int, int], int]:
    """``{task: (trials, successes)}`` → ``{(n, c): number of tasks}`` (tasks with the same counts
    are exchangeable for every estimator here)."""
    out: dict[tuple[int, int], int] = {}
    for n, c in tasks.values():
        out[(int(n), int(c))] = out.get((int(n), int(c)), 0) + 1
    return out




class CurvePoint(NamedTuple):
    """pass@k and pass^k at one ``k`` over a set of units (tasks or conversations)."""

    k: int
    pass_at_k: Estimate
    pass_pow_k: Estimate


def _check_hist(hist: Mapping[tuple[int, int], int]) -> list[tuple[int, int, int]]:
    cells = []
    for (n, c), count in sorted(hist.items()):
        c, n = check_counts(c, n)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"unit count of (n={n}, c={c}) must be a non-negative integer, got {quoted(count)}")
        if count and n > 0:
            cells.append((n, c, count))
    return cells


def pass_k_curve(
    hist: Mapping[tuple[int, int], int],
    ks: Sequence[int],
    mode: StatisticalMode,
    key: Sequence[Any] = (),
    estimator: str = "unbiased",
) -> list[CurvePoint]:
    """pass@k and pass^k averaged over units (τ-bench's per-task average), for every ``k`` in ``ks``.

    Args:
        hist: ``{(n, c): number of units}``; units with ``n = 0`` are ignored.
        ks: attempt counts (each a positive integer).
        mode: frequentist or Bayesian.
        key: stable key of the estimate (metric, slice, level) — seeds the Monte-Carlo draws.
        estimator: frequentist estimator per unit: ``"unbiased"`` (Chen et al. 2021 / Yao et al.
            2024; only units with ``n ≥ k`` count, in both modes, ``n`` of the estimate says how many) or
            ``"plugin"`` (spec §6.7, every unit).

    Frequentist: the mean over units of the per-unit estimator (``mean = None`` when no unit
    qualifies). Bayesian: the same mean's posterior under a Bayesian bootstrap over the units
    (Rubin 1981; the resampling unit of every slice mean, docs/statistics.md): replicate ``b`` is
    ``Σ_u g_ub v_u / Σ_u g_ub`` with ``v_u`` the unit's frequentist value and ``g_ub ~ Gamma(1, 1)``;
    units of one ``(n, c)`` cell share their value, so the cell's summed weight is one
    ``Gamma(count)`` draw from a generator seeded by ``(seed, *key, n, c)`` (:func:`estimator_rng`):
    the result does not depend on the order of units or on the other cells, and draws are shared
    across ``k``. The posterior mean is exact (the Dirichlet weights' mean is ``1/units``): the
    frequentist value. Replicates are clipped to the range of the units' values. Cost
    O(cells × mc_samples). (It was each unit's Beta posterior mean, averaged: with few trials per
    unit the prior's pull did not shrink with the number of units — 50 tasks of 3 successful trials
    each gave pass^3 = 4/7 [0.53, 0.61] against the frequentist 1.0: trial37 T1.)

    Units counted (one rule, both modes): with ``estimator="unbiased"`` a unit counts at ``k``
    only when it has ``n ≥ k`` trials — the unbiased estimator is undefined below, and the
    Bayesian estimand is the mean over the same units (``n`` of each estimate says how many);
    ``mean = None`` when no unit qualifies. With ``"plugin"`` every unit counts (``k`` may exceed
    ``n``). Example: one task with 0 of 2 trials correct, k = 5 → pass@5 ``None`` in both modes
    (before, the Bayesian mode reported 0.625).

    Raises:
        ValueError: invalid ``k``, counts or estimator name.
    """
    ks = [check_k(k) for k in ks]
    if estimator not in ("unbiased", "plugin"):
        raise ValueError(f"estimator must be 'unbiased' or 'plugin', got {quoted(estimator)}")
    cells = _check_hist(hist)
    units = sum(count for _, _, count in cells)
    if not mode.is_bayesian:
        one = pass_at_k_unbiased if estimator == "unbiased" else pass_at_k_plugin
        pow_ = pass_pow_k_unbiased if estimator == "unbiased" else pass_pow_k_plugin
        out = []
        for k in ks:
            at, pw, m = [], [], 0
            for n, c, count in cells:
                a = one(n, c, k)
                if a is None:
                    continue
                at.append(a * count)
                pw.append(pow_(n, c, k) * count)
                m += count
            out.append(
                CurvePoint(
                    k,
                    Estimate(mean=math.fsum(at) / m if m else None, n=m),
                    Estimate(mean=math.fsum(pw) / m if m else None, n=m),
                )
            )
        return out
    if units == 0:
        return [CurvePoint(k, Estimate(mean=None, n=0), Estimate(mean=None, n=0)) for k in ks]
    # Bayesian bootstrap over the units of the frequentist per-unit values (the units counted at
    # each k are those of the frequentist mode); units of one (n, c) cell share a value, so their
    # summed Dirichlet(1, ..., 1) weights are one Gamma(count) draw per cell and replicate
    one = pass_at_k_unbiased if estimator == "unbiased" else pass_at_k_plugin
    pow_ = pass_pow_k_unbiased if estimator == "unbiased" else pass_pow_k_plugin
    alpha = mode.tail_probability
    draws = mode.replicate_count
    weights = np.stack([estimator_rng(mode.seed, *[str(x) for x in key], "passk", n, c).gamma(float(count), size=draws)
                        for n, c, count in cells])  # (cells, draws)
    out = []
    for k in ks:
        rows = [i for i, (n, c, _) in enumerate(cells) if one(n, c, k) is not None]
        m = sum(cells[i][2] for i in rows)
        if m == 0:
            out.append(CurvePoint(k, Estimate(mean=None, n=0), Estimate(mean=None, n=0)))
            continue
        g = weights[rows]
        den = g.sum(axis=0)
        pair = []
        for f in (one, pow_):
            v = np.array([f(cells[i][0], cells[i][1], k) for i in rows])
            counts = [cells[i][2] for i in rows]
            # replicates kept inside the range of the units' values (float noise): all units 1.0 give [1.0, 1.0]
            reps = np.clip((v[:, None] * g).sum(axis=0) / den, v.min(), v.max())
            lo, hi = percentile_interval(reps, alpha)
            pair.append(Estimate(mean=math.fsum(x * cnt for x, cnt in zip(v, counts)) / m, ci_low=lo, ci_high=hi, n=m))
        out.append(CurvePoint(k, *pair))
    return out


def pass_k_note(n: int, c: int, k: int, mode: StatisticalMode) -> Optional[str]:
    """Bayesian mode: the sentence that says why pass@k / pass^k differ from ``is_fully_correct``
    (issue 13 item 9). ``is_fully_correct`` records what was observed (all ``n`` interactions
    correct); pass^k is the posterior mean of ``p^k``, the chance that ``k`` new attempts all
    succeed, with ``p ~ Beta(a + c, b + n − c)`` — one success out of one does not make ``p = 1``
    (c = n = 1, k = 3, Beta(1, 1): pass^3 = E[p³] = 0.4). ``None`` in frequentist mode (the
    plug-in ``(c/n)^k`` is 1 exactly when the conversation is fully correct) and for ``n = 0``."""
    if not mode.is_bayesian or n == 0:
        return None
    a0, b0 = mode.beta_prior()
    a = a0 + c
    b = b0 + n - c
    return (f"pass@{k} and pass^{k} are posterior means for {k} new attempts with the success probability "
            f"p ~ Beta({a:g}, {b:g}) from {c} of {n} interactions correct; is_fully_correct records only the "
            f"observed {c}/{n}, so the two differ when few interactions were seen")
