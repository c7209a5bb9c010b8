"""The interval rule of slice estimates, in one place (docs/statistics.md).

A slice interval is a statement about the population of **sessions** the slice samples from:
slice means resample sessions (Bayesian bootstrap, unit = the session), and rates that pool
interactions (Toxicity's ``toxic_rate``, Vision's hallucination rate, Regulatory's compliance
rate, Bias rates, PromptEvaluator's pooled CSR, Toxicity's DR/DTO/ASB/DIDT) are Beta /
Dirichlet posteriors whose trials are the slice's interactions (unit = the interaction,
treated as exchangeable; within-session correlation is not modelled).

One rule for both kinds: **a slice made of a single session reports its estimates without an
interval** (``ci_low = ci_high = None``). One session cannot tell how sessions vary, and a
pooled-interaction interval there would be the session's own interval under another name — that
one is in the session record. Its value is the observed one: a slice mean keeps its mean (the
session's own), and a pooled rate is its observed share ``k/n`` (:func:`slice_rate`), never the
posterior mean — with 0 of 3 answers toxic, Beta(1, 1)'s posterior mean 0.2 is the prior
speaking, not the session (issue 28). Every estimate of every metric follows it: the engine
estimates a one-session slice of a distribution-mode run again with its modes observed
(:class:`ObservedMode`, :func:`one_session_estimator`), so an estimator that calls an estimate
directly (Humanity's category shares did, with a Dirichlet prior and intervals) cannot escape
the rule; the helpers here give the same values. The console, the report and the gates read these
records, so the rule holds on every surface. Frequentist estimates never carry intervals, so
the rule only touches distribution modes.

The rule holds **per estimate**: an estimate counts the sessions whose evidence it rests on, not
the slice's (issue 28, trial30: Toxicity's DIDT had an interval in a slice of five sessions whose
group mentions all came from one). A metric declares the kinds of per-session evidence
(:class:`~fair_forge_beam.engine.Evidence`), the engine counts the sessions holding each kind,
and the estimator says which estimates rest on which kind
(:meth:`~fair_forge_beam.engine.SliceAccumulators.rests_on`, :func:`rest_on`: one call, which also
chooses the mode, :func:`estimate_mode`); the engine applies the rule by that count (:func:`without_one_session_intervals`);
an estimate resting on fewer sessions than its slice says how many in its ``n_sessions``, and the
surfaces read :func:`estimate_sessions` / :func:`one_session_note`.

The same support rule for **differences** (:func:`too_small_to_compare`): no change or
difference is claimed between two slice estimates when either rests on fewer than
:data:`MIN_COMPARE_SESSIONS` sessions, or either interval is degenerate (zero width: e.g. 2–3
sessions of identical templated answers give ``-0.5423 [-0.5423, -0.5423]``). Such a pair is
"too small to compare".
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence, TypeVar, Union

from fair_forge_beam._beam import beam
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.metric_info import is_estimate

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.frequentist import FrequentistMode
from fair_forge_beam.statistical.combiners import (
    BootstrapMeanCombineFn,
    BootstrapStats,
    GammaBootstrapCombineFn,
    GammaBootstrapStats,
    estimate_bootstrap_means,
    estimate_gamma_bootstrap_means,
)
from fair_forge_beam.statistical.seeding import RowCache

__all__ = [
    "SINGLE_SESSION_NOTE",
    "single_session",
    "slice_win_rate",
    "behind",
    "ONE_OBSERVATION_NOTE",
    "ONE_SESSION_NOTE",
    "rests_on_one_observation",
    "NO_OBSERVATION_NOTE",
    "rests_on_no_observation",
    "estimate_sessions",
    "one_session_note",
    "estimate_mode",
    "rest_on",
    "ObservedMode",
    "one_session_estimator",
    "record_sessions",
    "record_is_distribution",
    "rests_on_one_session",
    "is_estimate",
    "without_one_session_intervals",
    "slice_estimate",
    "slice_estimates",
    "slice_rate",
    "slice_resampling",
    "GAMMA_RESAMPLING",
    "SLICE_BOOTSTRAPS",
    "slice_means_combiner",
    "bootstrap_sessions",
    "slice_bootstrap_means",
    "bootstrap_resampling",
    "MIN_COMPARE_SESSIONS",
    "TOO_SMALL_TO_COMPARE",
    "too_small_to_compare",
]

#: the ``resampling`` text of a one-session slice
SINGLE_SESSION_NOTE = "single session: no slice interval (see the session's interval)"

E = TypeVar("E", bound=Estimate)


def _distribution(mode: StatisticalMode) -> bool:
    return mode.get_result_type() == "distribution"


def single_session(n_sessions: Optional[int], mode: StatisticalMode) -> bool:
    """True when the rule applies: a distribution mode (:class:`ObservedMode` of one included) and
    a slice of exactly one session."""
    return _distribution(mode) and n_sessions == 1


class ObservedMode(FrequentistMode):
    """The mode a one-session slice of a distribution-mode run is estimated in: every estimate is
    the observed one (the point estimate of :class:`FrequentistMode`: shares ``k/n``, means,
    the frequentist formulas of composite indices), without an interval, so no prior and no
    resampling speaks for the one session; the records still say the run's mode
    (``get_result_type``: ``"distribution"``, ``resampling``: :data:`SINGLE_SESSION_NOTE`) and
    its settings (``ci_level``, priors, seeds) are the run's. :func:`one_session_estimator` puts
    it in place of every mode of a slice estimator; the engine applies it to every metric."""

    def __init__(self, base: StatisticalMode):
        self.__dict__.update(getattr(base, "__dict__", {}))
        self.base = base

    def __repr__(self) -> str:
        return f"ObservedMode({self.base!r})"

    def get_result_type(self) -> str:
        return self.base.get_result_type()

    @property
    def is_bayesian(self) -> bool:
        return False

    def keyed(self, *key) -> "ObservedMode":
        return self


def one_session_estimator(estimator):
    """A shallow copy of the slice estimator ``estimator`` whose statistical modes (attributes
    holding a distribution-mode :class:`StatisticalMode`) are :class:`ObservedMode` s; ``None``
    when it holds none (nothing to change)."""
    import copy

    swapped = {k: ObservedMode(v) for k, v in vars(estimator).items()
               if isinstance(v, StatisticalMode) and not isinstance(v, ObservedMode) and _distribution(v)}
    if not swapped:
        return None
    out = copy.copy(estimator)
    for k, v in swapped.items():
        setattr(out, k, v)
    return out


def record_sessions(rec) -> Optional[int]:
    """A slice record's ``n_sessions`` (a dict's or a model's); None when it has none."""
    n = rec.get("n_sessions") if isinstance(rec, Mapping) else getattr(rec, "n_sessions", None)
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def record_is_distribution(rec) -> bool:
    mode = rec.get("mode") if isinstance(rec, Mapping) else getattr(rec, "mode", None)
    return mode == "distribution"


def rests_on_one_session(rec, slice_sessions: Optional[int]) -> bool:
    """Whether the engine estimates the slice record ``rec`` again with its modes observed
    (:func:`one_session_estimator`): it rests on one session — its ``n_sessions``, or, for a record
    that states neither a count nor a mode (an estimator written from docs/engine.md),
    ``slice_sessions``, the engine's count — in a distribution mode (the record's, when it states one)."""
    mode = rec.get("mode") if isinstance(rec, Mapping) else getattr(rec, "mode", None)
    n = record_sessions(rec)
    if n is None and mode is None:
        n = slice_sessions
    return n == 1 and mode in (None, "distribution")


def without_one_session_intervals(rec, slice_sessions: Optional[int]):
    """The one-session rule applied by the engine to every slice record of every metric, whatever its
    estimator did (docs/statistics.md). Each estimate in the record ``rec`` (a dict, as the engine
    heads it; an estimate is a dict of :func:`is_estimate`, at any depth of dicts and lists) that has a
    value from data (``n`` not 0: a prior's interval over no data, Privacy's for a class never seen,
    stays) and rests on fewer than 2 sessions has no interval (``ci_low = ci_high = None``). The
    sessions it rests on: those it states (``n_sessions``: the count of the evidence it rests on,
    :meth:`~fair_forge_beam.engine.SliceAccumulators.rests_on`), else the slice's ``slice_sessions``
    (the engine's count); one observation (``n = 1``) is one session (:func:`behind`). In a list, where
    ``n`` need not count observations (Agentic's task curve counts tasks, BestOf's strengths games),
    only an estimate stating one session, and every estimate of a slice of one session (trial36b B4: a
    list entry kept an interval its estimator gave where the same estimate at top level lost it). An estimate keeps the count it states only when it has a
    value of several observations resting on fewer sessions than the slice (else its count is the
    slice's, and the field goes: such records are as before). A record of a point-estimate run (``mode`` stated and not
    ``"distribution"``: BestOf's frequentist Wald intervals stay, as :func:`single_session` has it)
    keeps its intervals; a record that needs no change is returned as it is."""
    if not isinstance(rec, dict):
        return rec
    distribution = rec.get("mode", "distribution") == "distribution"

    def estimate(value: dict, listed: bool) -> dict:
        own = value.get("n_sessions")
        own = own if isinstance(own, int) and not isinstance(own, bool) else None
        if own is None and listed and slice_sessions != 1:  # a slice of one session: every estimate, listed too
            return value
        n = value.get("n")
        sessions = behind(slice_sessions if own is None else own, n)
        out = value
        if (distribution and value.get("mean") is not None and n != 0 and isinstance(sessions, int)
                and (own == 1 or slice_sessions == 1 if listed else sessions < 2) and (value["ci_low"] is not None or value["ci_high"] is not None)):
            out = {**value, "ci_low": None, "ci_high": None}
        if own is not None and not (value.get("mean") is not None and n != 1
                                    and (slice_sessions is None or own < slice_sessions)):
            out = {k: v for k, v in out.items() if k != "n_sessions"}
        return out

    def fixed(node, listed: bool):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        out = node
        for key, value in items:
            if isinstance(value, dict):
                new = estimate(value, listed) if is_estimate(value) else fixed(value, listed)
            elif isinstance(value, list):
                new = fixed(value, True)
            else:
                continue
            if new is not value:
                out = (dict(out) if isinstance(node, dict) else list(out)) if out is node else out
                out[key] = new
        return out

    return fixed(rec, False)


def behind(n_sessions: Optional[int], n: Optional[int]) -> Optional[int]:
    """The sessions behind an estimate of ``n`` observations in a slice of ``n_sessions``: one
    observation comes from one session, whatever the slice holds (a per-group sub-estimate —
    Toxicity's sentiment or toxic share of the answers mentioning a group — of one answer in a
    slice of many sessions, issue 28); else the slice's count."""
    return 1 if n == 1 else n_sessions


#: how every surface marks an estimate of one observation (:func:`rests_on_one_observation`)
ONE_OBSERVATION_NOTE = "1 observation: no interval"


def rests_on_one_observation(est) -> bool:
    """Whether an estimate (a dict or an :class:`Estimate`) is a value resting on one observation
    without an interval (:func:`behind`: one observation, one session). The console, the report
    and the gates decide with this one predicate and say :data:`ONE_OBSERVATION_NOTE`; in
    ``results.json`` the estimate is the same record (``n = 1``, ``ci_low = ci_high = null``)."""
    if est is None:
        return False
    get = est.get if isinstance(est, Mapping) else (lambda k: getattr(est, k, None))
    return get("mean") is not None and get("n") == 1 and (get("ci_low") is None or get("ci_high") is None)


#: how every surface marks a value resting on no observation (:func:`rests_on_no_observation`)
NO_OBSERVATION_NOTE = "prior only: no observation"


def _valued(est):
    """The field getter of an estimate (a dict or an :class:`Estimate`) that has a value (``mean``);
    ``None`` for no estimate or one without a value."""
    if est is None:
        return None
    get = est.get if isinstance(est, Mapping) else (lambda k: getattr(est, k, None))
    return None if get("mean") is None else get


def rests_on_no_observation(est, slice_sessions: Optional[int] = None) -> Optional[str]:
    """Why the value of an estimate (a dict or an :class:`Estimate`) rests on no observation — its
    ``n`` is 0, or it states 0 sessions (``n_sessions``), or its slice holds none (``slice_sessions``
    0) — or ``None``. Such a value is its prior's (a Bayesian rate over no data: 0.5000 [0.0250,
    0.9750]; Privacy's class no session showed): the one predicate of every surface, which say
    :data:`NO_OBSERVATION_NOTE` — the console and the report show ``n/a`` marked so, no gate
    passes on it and no difference is claimed from it (trial36b B5: the console and the report
    showed the prior's interval, unmarked, and the report flagged it "inconclusive")."""
    get = _valued(est)
    if get is None:
        return None
    n = get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n == 0:
        return "n = 0"
    own = get("n_sessions")
    if isinstance(own, int) and not isinstance(own, bool) and own == 0:
        return f"n = {n}, in 0 sessions holding its evidence"
    if slice_sessions == 0:
        return f"n = {n}, in 0 sessions scored"
    return None


def undefined_because(est, slice_units: Optional[int], unit: str = "session",
                      observed: str = "session") -> Optional[tuple[str, str]]:
    """Why an estimate (a dict or an :class:`Estimate`) that has a value has no interval, in the
    words every surface uses: ``(reason, short)`` — its slice rests on one resampling unit (``unit``:
    a session; BestOf's block), it rests on one ``unit`` of a larger slice (its ``n_sessions``), or it
    is one observation (:func:`rests_on_one_observation`; ``observed``: what one is, e.g. a task) —
    or ``None`` (no value at all: no data, or no rule applies). ``slice_units``: the slice's count of
    ``unit`` (``n_sessions``; BestOf's ``n_blocks``). The gates name their reason from it (trial37
    T6: a one-block BestOf slice's gate said "no data: n = 3", reading ``n_sessions``, which a BestOf
    record does not have)."""
    get = _valued(est)
    if get is None:
        return None
    n = get("n")
    units = f"{unit}s"
    if isinstance(slice_units, int) and not isinstance(slice_units, bool) and slice_units < 2:
        return (f"the slice rests on {slice_units} {unit} (n = {n}), too small to judge ({units} are the resampling unit)",
                f"the slice rests on 1 {unit}, too small to judge")
    if get("n_sessions") == 1 and n != 1:
        return (f"the estimate rests on 1 {unit} of the slice's {slice_units} (n = {n}), too small to judge "
                f"({units} are the resampling unit)", f"the estimate rests on 1 {unit}, too small to judge")
    if rests_on_one_observation(est):
        why = f"{units} are the resampling unit" if observed == unit else f"a {observed} is one observation of it"
        return (f"the estimate rests on 1 observation (n = 1), so on 1 {observed}, too small to judge ({why})",
                "the estimate rests on 1 observation, too small to judge")
    return None


#: how every surface marks an estimate of several observations from one session (:func:`one_session_note`)
ONE_SESSION_NOTE = "1 session: no interval"


def estimate_sessions(est, slice_sessions: Optional[int]) -> Optional[int]:
    """The sessions behind an estimate (a dict or an :class:`Estimate`) of a slice of
    ``slice_sessions``: its own ``n_sessions`` when it states one (it rests on part of the slice's
    evidence), else :func:`behind`."""
    get = est.get if isinstance(est, Mapping) else (lambda k: getattr(est, k, None))
    own = get("n_sessions")
    return own if isinstance(own, int) and not isinstance(own, bool) else behind(slice_sessions, get("n"))


def one_session_note(est) -> Optional[str]:
    """How the console, the report and the gates mark an estimate without an interval because it
    rests on one observation (:data:`ONE_OBSERVATION_NOTE`) or on one session of a larger slice
    (:data:`ONE_SESSION_NOTE`, its ``n_sessions`` = 1), or whose value rests on no observation
    (:data:`NO_OBSERVATION_NOTE`, :func:`rests_on_no_observation`: shown ``n/a``); ``None`` otherwise."""
    if rests_on_no_observation(est) is not None:
        return NO_OBSERVATION_NOTE
    if rests_on_one_observation(est):
        return ONE_OBSERVATION_NOTE
    if est is None:
        return None
    get = est.get if isinstance(est, Mapping) else (lambda k: getattr(est, k, None))
    if get("mean") is not None and get("n_sessions") == 1 and (get("ci_low") is None or get("ci_high") is None):
        return ONE_SESSION_NOTE
    return None


def estimate_mode(mode: StatisticalMode, sessions: Optional[int]) -> StatisticalMode:
    """The mode to estimate in with ``sessions`` behind the estimate: :class:`ObservedMode` under
    the one-session rule (an observed share, no prior, no interval), else ``mode``."""
    return ObservedMode(mode) if single_session(sessions, mode) and not isinstance(mode, ObservedMode) else mode


def _estimates_of(value, where: str):
    """The estimates (:class:`Estimate` s) in ``value``, an estimator's result: an :class:`Estimate`,
    ``None``, or a mapping / list / tuple of them at any depth; anything else is refused in words."""
    if value is None:
        return
    if isinstance(value, Estimate):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _estimates_of(v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _estimates_of(v, where)
    else:
        raise TypeError(f"{where}: an estimate function gives an Estimate, None, or a mapping, list or tuple of "
                        f"them, not {type(value).__name__}")


def _rebuilt(value, leaf, other=None):
    """``value`` with each :class:`Estimate` ``e`` (and ``o``, the one in the same place of ``other``) as ``leaf(e, o)``."""
    if isinstance(value, Estimate):
        return leaf(value, other)
    if isinstance(value, Mapping):
        return {k: _rebuilt(v, leaf, None if other is None else other[k]) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_rebuilt(v, leaf, None if other is None else other[i]) for i, v in enumerate(value))
    return value


def _one_observation_with_interval(est: Estimate) -> bool:
    return est.mean is not None and est.n == 1 and (est.ci_low is not None or est.ci_high is not None)


def rest_on(evidence: Mapping, kind: str, mode: StatisticalMode, estimate):
    """:meth:`~fair_forge_beam.engine.SliceAccumulators.rests_on`: the estimates ``estimate(m)`` (a function
    of the mode to estimate in) gives, estimated in the mode the one-session rule asks for, each stating
    the sessions holding evidence ``kind`` (``evidence[kind]``) as its ``n_sessions``, by which the engine
    applies the rule (:func:`without_one_session_intervals`). The mode: :class:`ObservedMode` when one
    session holds ``kind`` (:func:`estimate_mode`), else ``mode``; and an estimate of one observation
    (``n = 1``, :func:`behind`) that came with an interval is taken from ``estimate`` in the observed mode
    (its observed value: a posterior of one observation is the prior speaking, trial36b B1). A kind the
    metric does not declare (:class:`~fair_forge_beam.engine.Evidence`) and an ``estimate`` that is not a
    function are refused: a misspelt kind fell back to the slice's count in silence (trial36b B2), and
    estimates given already made could not be estimated in the observed mode (B3)."""
    if kind not in evidence:
        declared = ", ".join(map(repr, evidence)) or "none (the metric declares no MetricSpec.evidence)"
        raise KeyError(f"rests_on: {kind!r} is not a kind of evidence the metric declares; its kinds: {declared}")
    if not callable(estimate) or isinstance(estimate, Estimate):
        raise TypeError(f"rests_on({kind!r}, mode, estimate): estimate is a function of the mode to estimate in "
                        f"(e.g. lambda m: estimate_rate(k, n, m)), so that the rule can choose it, not "
                        f"{type(estimate).__name__}")
    sessions = evidence[kind]
    used = estimate_mode(mode, sessions)
    out = estimate(used)
    where = f"rests_on({kind!r})"
    if _distribution(mode) and not isinstance(used, ObservedMode) and any(
            _one_observation_with_interval(e) for e in _estimates_of(out, where)):
        observed = estimate(ObservedMode(mode))
        out = _rebuilt(out, lambda e, o: o if _one_observation_with_interval(e) else e, observed)
    else:
        list(_estimates_of(out, where))  # refuses what is not an estimate
    # an estimate without a value states no count (the engine would drop it: an empty input's record stays as it was)
    return _rebuilt(out, lambda e, o: e if e.mean is None else e.model_copy(update={"n_sessions": sessions}))


def slice_estimate(est: E, n_sessions: Optional[int], mode: StatisticalMode) -> E:
    """``est`` with its interval removed when the slice holds one session or the estimate rests on one
    observation (:func:`behind`; see the module docstring)."""
    if est is not None and single_session(behind(n_sessions, est.n), mode):
        return est.model_copy(update={"ci_low": None, "ci_high": None})
    return est


def slice_rate(k: int, n: int, n_sessions: Optional[int], mode: StatisticalMode) -> Estimate:
    """A slice's pooled rate of ``k`` events in ``n`` trials: :func:`~fair_forge_beam.statistical.combiners.estimate_rate`
    in ``mode``, or, under the one-session rule (the slice's, or one observation: :func:`slice_estimate`),
    the observed share ``k/n`` without an interval (``mean=None`` when ``n = 0``)."""
    from fair_forge_beam.statistical.combiners import estimate_rate
    from fair_forge_beam.statistical.exact import exact_ratio

    if not single_session(behind(n_sessions, n), mode):
        return slice_estimate(estimate_rate(k, n, mode), n_sessions, mode)
    return Estimate(mean=exact_ratio(k, n) if n else None, n=n)


def slice_win_rate(wins: int, losses: int, ties: int, n_sessions: Optional[int], mode: StatisticalMode) -> Estimate:
    """A win rate over ``wins + losses + ties`` matches, ties as half wins (BestOf's
    ``leader_win_rate``): :func:`slice_rate` (a Beta posterior in a Bayesian run, ``k/n`` in a
    frequentist one, the observed share under the one-session rule; for BestOf a block is the
    session). With ties the Beta posterior counts each as half a win and half a loss,
    Beta(a + w + t/2, b + l + t/2). Before (issue 28, hostile trial 8) it was the raw share
    without an interval in every mode, so a gate on its ``ci_low`` could never pass."""
    from fair_forge_beam.statistical.combiners import _beta_interval

    games = wins + losses + ties
    if not ties:
        return slice_rate(wins, games, n_sessions, mode)
    if not mode.is_bayesian or single_session(behind(n_sessions, games), mode) or mode.beta_prior_a is None:
        return Estimate(mean=(wins + 0.5 * ties) / games, n=games)
    a0, b0 = mode.beta_prior()
    a, b = a0 + wins + 0.5 * ties, b0 + losses + 0.5 * ties
    lo, hi = _beta_interval(mode.tail_probability, a, b)
    return Estimate(mean=a / (a + b), ci_low=lo, ci_high=hi, n=games)


def slice_estimates(ests: Iterable[E], n_sessions: Optional[int], mode: StatisticalMode) -> list[E]:
    """:func:`slice_estimate` of each estimate."""
    return [slice_estimate(e, n_sessions, mode) for e in ests]


def slice_resampling(default: str, n_sessions: Optional[int], mode: StatisticalMode) -> Optional[str]:
    """The slice record's ``resampling`` text: ``None`` in frequentist mode, the one-session note
    when the rule applies, else ``default``."""
    if not _distribution(mode):
        return None
    return SINGLE_SESSION_NOTE if single_session(n_sessions, mode) else default


#: fewest sessions behind each side of a difference for a change to be claimed
MIN_COMPARE_SESSIONS = 2
#: the verdict of a pair that :func:`too_small_to_compare` refuses
TOO_SMALL_TO_COMPARE = "too small to compare"


def too_small_to_compare(estimates: Sequence[Optional[Mapping]], n_sessions: Sequence[Optional[int]],
                         names: Sequence[str] = ("current", "baseline")) -> Optional[str]:
    """Why a difference between these slice estimates must not be claimed, or ``None`` when it may.

    Args:
        estimates: the two (or more) sides' estimates ``{mean, ci_low, ci_high, …}``.
        n_sessions: each side's slice session count (``None``: not recorded, not checked); an
            estimate's own ``n_sessions`` (it rests on fewer) stands for it.
        names: how each side is called in the reason.

    Returns:
        ``None``, or a one-line reason: a side rests on fewer than :data:`MIN_COMPARE_SESSIONS`
        sessions (``"baseline rests on 1 session"``), or its interval has zero width
        (``"current's interval has zero width ([0.5, 0.5])"``). Sessions are the resampling unit
        (module docstring): one session, or a degenerate interval, says nothing about how sessions vary.
    """
    for name, n, est in zip(names, n_sessions, estimates):
        if rests_on_no_observation(est) is not None:  # its prior's value (every surface's predicate; a slice of
            # 0 sessions is said by the count below)
            return f"{name} is its {NO_OBSERVATION_NOTE}"
        own = (est or {}).get("n_sessions")  # an estimate resting on fewer sessions than its slice says so
        n = own if isinstance(own, int) and not isinstance(own, bool) else n
        if n is not None and n < MIN_COMPARE_SESSIONS:
            return f"{name} rests on {n} session{'' if n == 1 else 's'}"
    for name, est in zip(names, estimates):
        lo, hi = (est or {}).get("ci_low"), (est or {}).get("ci_high")
        if lo is not None and hi is not None and not hi > lo:
            return f"{name}'s interval has {'zero width' if hi == lo else 'its ends reversed'} ([{lo:.4g}, {hi:.4g}])"
    return None


# ------------------------------------------------------------------------ the slice bootstrap
#: the ``resampling`` text of a slice bootstrapped with Gamma(1) weights (:class:`GammaBootstrapCombineFn`)
GAMMA_RESAMPLING = "Bayesian bootstrap over sessions (Gamma(1) weights keyed by session)"
SLICE_BOOTSTRAPS = ("buckets", "gamma")


def slice_means_combiner(n_values: int, mode: StatisticalMode, max_units: int = 1024, method: str = "buckets",
                         namespace: str = "gamma-bootstrap") -> beam.CombineFn:
    """The CombineFn of a slice's session means (unit = the session): :class:`BootstrapMeanCombineFn`
    (``max_units`` hash buckets), or with ``method="gamma"`` in a distribution mode
    :class:`GammaBootstrapCombineFn` (Gamma(1) weights keyed by session, stream ``namespace``);
    a point-estimate mode needs no draws and always gets the former, with one group (its estimate,
    the exact ratio of sums, does not depend on the grouping). Read its output with
    :func:`slice_bootstrap_means`.

    Raises:
        ValueError: unknown ``method``.
    """
    if method not in SLICE_BOOTSTRAPS:
        raise ValueError(f"slice_bootstrap must be 'buckets' or 'gamma', got {quoted(method)}")
    if method == "gamma" and mode.is_bayesian:
        return GammaBootstrapCombineFn(n_values, mode, namespace)
    # a point estimate is the exact ratio of the sums over every unit, however they are grouped:
    # one group, so that no unit key is hashed (the same bits; a tenth of a roll-up's CPU before)
    return BootstrapMeanCombineFn(n_values, max_units if mode.is_bayesian else 1)


def bootstrap_sessions(st: Union[BootstrapStats, GammaBootstrapStats]) -> int:
    """Number of sessions (units) merged into ``st``: for :class:`BootstrapStats` the unit count
    once hash-bucketed, else the number of distinct unit keys; for :class:`GammaBootstrapStats`
    the unit count, or at most 1 when every input came from one unit."""
    if isinstance(st, GammaBootstrapStats):
        return st.n_units if st.multi else min(st.n_units, 1)
    return st.n_units if st.bucketed else len(st.units)


def slice_bootstrap_means(
    st: Union[BootstrapStats, GammaBootstrapStats], mode: StatisticalMode, namespace: str, rows: Optional[RowCache] = None
) -> list[Estimate]:
    """The slice means of a :func:`slice_means_combiner` output: one :class:`Estimate` per value
    column (:func:`estimate_bootstrap_means` — Bayesian bootstrap over sessions in a distribution
    mode, the exact weighted mean in a point-estimate mode — or :func:`estimate_gamma_bootstrap_means`),
    with the one-session rule applied. ``namespace`` and ``rows``: the keyed stream and a worker's
    row cache of :func:`estimate_bootstrap_means` (unused for Gamma statistics)."""
    if isinstance(st, GammaBootstrapStats):
        est = estimate_gamma_bootstrap_means(st, mode)
    else:
        est = estimate_bootstrap_means(st, mode, namespace, rows)
    return slice_estimates(est, bootstrap_sessions(st), mode)


def bootstrap_resampling(st: Union[BootstrapStats, GammaBootstrapStats], mode: StatisticalMode) -> Optional[str]:
    """The ``resampling`` text of a slice estimated by :func:`slice_bootstrap_means` (see
    :func:`slice_resampling`): names the hash buckets (``st.max_units``) or the Gamma weights."""
    if isinstance(st, GammaBootstrapStats):
        default = GAMMA_RESAMPLING
    else:
        default = f"Bayesian bootstrap over sessions ({st.max_units} hash buckets)"
    return slice_resampling(default, bootstrap_sessions(st), mode)
