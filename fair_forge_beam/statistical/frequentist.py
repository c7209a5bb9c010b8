"""Frequentist mode: point estimates (spec §4.2)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from fair_forge_beam.options import CI_LEVEL
from fair_forge_beam.statistical.base import StatisticalMode, check_count_map, check_counts
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["FrequentistMode"]


class FrequentistMode(StatisticalMode):
    """Point estimates; every primitive returns a float (or ``None`` for "no data").

    Differences from upstream (spec §17/case-004): invalid counts raise ``ValueError``;
    ``rate_estimation(0, 0)`` returns ``None`` (no data) instead of a fake ``0.0``.

    Attributes (from :class:`StatisticalMode`): ``ci_level`` (the CLI's ``--ci-level``, default
    :data:`~fair_forge_beam.options.CI_LEVEL`) — no point estimate carries an interval, but
    BestOf's Bradley–Terry Wald intervals and the intervals of a comparison with another run
    (``--compare``, regression gates: Agresti–Caffo) are at this level (trial34 T4: ``--ci-level
    0.99`` gave 95 % intervals without a word); priors, ``mc_samples`` and seeds are ``None``
    (nothing is drawn).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, ci_level: float = CI_LEVEL) -> None:
        if isinstance(ci_level, bool) or not isinstance(ci_level, (int, float)) or not 0.0 < ci_level < 1.0:
            raise ValueError(f"ci_level must be in (0, 1), got {quoted(ci_level)}")
        self.ci_level = float(ci_level)

    def __repr__(self) -> str:  # the default level as before (a run's recorded statistical_mode unchanged)
        return "FrequentistMode()" if self.ci_level == CI_LEVEL else f"FrequentistMode(ci_level={self.ci_level})"

    def get_result_type(self) -> str:
        return "point_estimate"

    def rate_estimation(self, successes: int, trials: int) -> Optional[float]:
        """``successes / trials`` in [0, 1]; ``None`` when ``trials == 0``.

        Raises:
            ValueError: negative counts or ``successes > trials``.
        """
        s, t = check_counts(successes, trials)
        if t == 0:
            return None
        return s / t

    def distribution_divergence(
        self,
        observed: Mapping[str, float],
        reference: Mapping[str, float],
        divergence_type: str = "total_variation",
    ) -> float:
        """Total variation distance ``½ Σ_k |p_k − q_k|`` over the union of keys (spec §4.2).

        ``observed`` must already be proportions (nothing is renormalised, as upstream);
        missing keys count as 0. Range [0, 1] for proper distributions.

        Raises:
            NotImplementedError: ``divergence_type`` other than ``"total_variation"``.
            ValueError: a negative or non-finite entry.
        """
        if divergence_type != "total_variation":
            raise NotImplementedError(f"divergence_type {quoted(divergence_type)} is not supported")
        check_count_map("observed", observed)
        check_count_map("reference", reference)
        keys = list(dict.fromkeys([*observed.keys(), *reference.keys()]))
        return 0.5 * sum(abs(float(observed.get(k, 0.0)) - float(reference.get(k, 0.0))) for k in keys)

    def aggregate_metrics(self, metrics: Mapping[str, Any], weights: Mapping[str, float]) -> Optional[float]:
        """Normalised weighted sum ``Σ_k m_k w_k / Σ w`` (spec §4.2).

        Summary dicts in ``metrics`` contribute their ``mean``. ``None`` (no data) when
        ``Σ w == 0`` or a metric of positive weight is undefined (``None``) — the same rule as
        :meth:`BayesianMode.aggregate_metrics` (upstream returns 0.0 for ``Σ w == 0``).

        Raises:
            KeyError: a metric has no weight.
            ValueError: a negative or non-finite weight.
        """
        check_count_map("weights", weights)
        total = float(sum(weights.values()))
        if total == 0:
            return None
        acc = 0.0
        for k, v in metrics.items():
            value = v["mean"] if isinstance(v, dict) else v
            w = float(weights[k])
            if value is None:
                if w:
                    return None
                continue
            acc += float(value) * w / total
        return acc

    def dispersion_metric(self, values: Mapping[str, Any], center: str = "mean") -> Optional[float]:
        """Mean absolute deviation ``(1/m) Σ |v − c|`` around the mean or median.

        ``None`` (no data) for empty ``values`` — the same rule as
        :meth:`BayesianMode.dispersion_metric` (upstream returns 0.0). Undefined values
        (``None``) are left out.

        Raises:
            ValueError: unknown ``center``.
        """
        if center not in ("mean", "median"):
            raise ValueError(f"Unknown center type {quoted(center)}; use 'mean' or 'median'")
        raw = [v["mean"] if isinstance(v, dict) else v for v in values.values()]
        vals = np.array([v for v in raw if v is not None], dtype=np.float64)
        if vals.size == 0:
            return None
        c = float(np.mean(vals)) if center == "mean" else float(np.median(vals))
        return float(np.mean(np.abs(vals - c)))
