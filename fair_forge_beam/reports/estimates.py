"""What the report, the comparison, the gates and ``load_results`` know about the estimates of a slice record.

A slice record (one element of ``results.json``'s ``metrics.<name>.slices``) holds its estimates
as dicts with the keys ``mean``, ``ci_low`` and ``ci_high`` (and usually ``n``, the
:class:`~fair_forge_beam.schemas.common.Estimate` schema), nested at any depth: Humanity's
``mean_entropy`` and ``emotion_distribution.anger``, Toxicity's ``estimates.DIDT`` and
``group_profiling.group_estimates.women.T``, Bias's ``rates.gender``. :func:`iter_estimates`
finds them all, so the report and the comparison work for every metric, including ones this
version does not know. How to read one — its direction, natural range, the ``(k, n)`` counts
behind a rate, its label — is declared by the metric itself, in its
:class:`~fair_forge_beam.schemas.metric_info.MetricInfo` (read through
:func:`fair_forge_beam.metrics.registry.metric_info`); nothing here is keyed by metric name.
An estimate the info does not declare (or a metric without an info) reads generically: no
better side, a 0–1 range, no counts.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, is_estimate

__all__ = [
    "info_of",
    "sessions_of",
    "estimate_info",
    "is_undefined",
    "is_estimate",
    "iter_estimates",
    "direction",
    "value_range",
    "counts_for",
]


def info_of(metric: str) -> Optional[MetricInfo]:
    """The metric's :class:`MetricInfo`, or ``None`` for a metric this version does not know."""
    from fair_forge_beam.metrics.registry import metric_info

    return metric_info(metric)


def estimate_info(metric: str, path: str) -> tuple[Optional[EstimateInfo], Optional[str]]:
    """``(estimate info, key)`` of a concrete estimate path of ``metric`` (``(None, None)`` when
    the metric or the path is not declared)."""
    info = info_of(metric)
    return info.find(path) if info is not None else (None, None)


def iter_estimates(metric: str, record: dict, headline: Optional[list[str]] = None) -> Iterator[tuple[str, dict]]:
    """``(dotted path, estimate dict)`` for every estimate in ``record``, headline columns first
    (in their order), then the others in the record's key order; lists are not searched and
    paths the metric declares as repeats of another estimate (``MetricInfo.repeats``) are left out."""
    info = info_of(metric)
    found: list[tuple[str, dict]] = []

    def walk(node: dict, prefix: str):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if is_estimate(value):
                if info is None or not info.is_repeat(path):
                    found.append((path, value))
            elif isinstance(value, dict):
                walk(value, path + ".")

    walk(record, "")
    order = {h: i for i, h in enumerate(headline or ())}
    found.sort(key=lambda pe: order.get(pe[0], len(order)))  # stable: the rest keep record order
    yield from found


def direction(metric: str, path: str) -> int:
    """+1 when a higher value of the estimate is better, -1 when lower is better, 0 when unknown."""
    e, _ = estimate_info(metric, path)
    return e.direction if e is not None else 0


def value_range(metric: str, path: str) -> float:
    """Length of the estimate's natural value range (1 unless the metric declares another)."""
    e, _ = estimate_info(metric, path)
    return e.span if e is not None else 1.0


def counts_for(metric: str, record: dict) -> dict[str, tuple[int, int]]:
    """The ``(k, n)`` counts behind the record's rate estimates (empty for unknown metrics)."""
    info = info_of(metric)
    return info.counts(record) if info is not None else {}


def is_undefined(metric: str, path: str, est: Optional[dict]) -> bool:
    """True when the estimate has no value: absent, or ``mean`` is ``None`` (no data — e.g.
    Humanity's Spearman ρ of a slice where no interaction has a reference answer with emotion
    words). A value of 0 is a value: the metric stores ``None`` where there is nothing to
    measure, never a placeholder 0 (issue 28)."""
    return not est or est.get("mean") is None


def sessions_of(metric: str, record: Optional[dict]) -> Optional[int]:
    """The number of resampling units (sessions; BestOf: blocks) of a slice record, from the field
    its metric's info names (``n_sessions`` for a metric without an info); ``None`` when absent."""
    info = info_of(metric)
    field = info.sessions_field if info is not None else "n_sessions"
    n = (record or {}).get(field) if field else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None
