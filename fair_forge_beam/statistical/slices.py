"""The interval rule of slice estimates, in one place (README "Statistics").

A slice interval is a statement about the population of **sessions** the slice samples from:
slice means resample sessions (Bayesian bootstrap, unit = the session), and rates that pool
interactions (Toxicity's ``toxic_rate``, Vision's hallucination rate, Regulatory's compliance
rate, Bias rates, PromptEvaluator's pooled CSR, Toxicity's DR/DTO/ASB/DIDT) are Beta /
Dirichlet posteriors whose trials are the slice's interactions (unit = the interaction,
treated as exchangeable; within-session correlation is not modelled).

One rule for both kinds: **a slice made of a single session reports its estimates without an
interval** (``ci_low = ci_high = None``; the mean is kept). One session cannot tell how
sessions vary, and a pooled-interaction interval there would be the session's own interval
under another name — that one is in the session record. Frequentist estimates never carry
intervals, so the rule only touches distribution modes.
"""
from __future__ import annotations

from typing import Iterable, Optional, TypeVar

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import BootstrapStats, estimate_bootstrap_means
from fair_forge_beam.statistical.seeding import RowCache

__all__ = [
    "SINGLE_SESSION_NOTE",
    "single_session",
    "slice_estimate",
    "slice_estimates",
    "slice_resampling",
    "bootstrap_sessions",
    "slice_bootstrap_means",
    "bootstrap_resampling",
]

#: the ``resampling`` text of a one-session slice
SINGLE_SESSION_NOTE = "single session: no slice interval (see the session's interval)"

E = TypeVar("E", bound=Estimate)


def single_session(n_sessions: Optional[int], mode: StatisticalMode) -> bool:
    """True when the rule applies: a distribution mode and a slice of exactly one session."""
    return bool(mode.is_bayesian) and n_sessions == 1


def slice_estimate(est: E, n_sessions: Optional[int], mode: StatisticalMode) -> E:
    """``est`` with its interval removed when the slice holds one session (see the module docstring)."""
    if est is None or not single_session(n_sessions, mode):
        return est
    return est.model_copy(update={"ci_low": None, "ci_high": None})


def slice_estimates(ests: Iterable[E], n_sessions: Optional[int], mode: StatisticalMode) -> list[E]:
    """:func:`slice_estimate` of each estimate."""
    return [slice_estimate(e, n_sessions, mode) for e in ests]


def slice_resampling(default: str, n_sessions: Optional[int], mode: StatisticalMode) -> Optional[str]:
    """The slice record's ``resampling`` text: ``None`` in frequentist mode, the one-session note
    when the rule applies, else ``default``."""
    if not mode.is_bayesian:
        return None
    return SINGLE_SESSION_NOTE if single_session(n_sessions, mode) else default


# ------------------------------------------------------------------------ the slice bootstrap
def bootstrap_sessions(st: BootstrapStats) -> int:
    """Number of sessions (units) merged into ``st``: the unit count once hash-bucketed, else the
    number of distinct unit keys."""
    return st.n_units if st.bucketed else len(st.units)


def slice_bootstrap_means(
    st: BootstrapStats, mode: StatisticalMode, namespace: str, rows: Optional[RowCache] = None
) -> list[Estimate]:
    """The slice means of a :class:`BootstrapMeanCombineFn` output: one :class:`Estimate` per
    value column, from :func:`estimate_bootstrap_means` (Bayesian bootstrap over sessions in a
    distribution mode, the exact weighted mean in a point-estimate mode) with the one-session rule
    applied. ``namespace`` and ``rows`` as there (the keyed stream and a worker's row cache)."""
    return slice_estimates(estimate_bootstrap_means(st, mode, namespace, rows), bootstrap_sessions(st), mode)


def bootstrap_resampling(max_units: int, n_sessions: Optional[int], mode: StatisticalMode) -> Optional[str]:
    """The ``resampling`` text of a slice estimated by :func:`slice_bootstrap_means` with
    ``max_units`` hash buckets (see :func:`slice_resampling`)."""
    return slice_resampling(f"Bayesian bootstrap over sessions ({max_units} hash buckets)", n_sessions, mode)
