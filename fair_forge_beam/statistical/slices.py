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

__all__ = ["SINGLE_SESSION_NOTE", "single_session", "slice_estimate", "slice_estimates", "slice_resampling"]

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
