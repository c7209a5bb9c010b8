"""Statistics: the only place that knows statistics (DESIGN §2, §4).

* :class:`StatisticalMode` (ABC), :class:`FrequentistMode`, :class:`BayesianMode` — the four
  primitives of the original (spec §4), order-independent.
* ``combiners`` — mergeable ``CombineFn``s (rate, declared category counts, session weighted
  mean, Bayesian-bootstrap means) and their estimators.
"""
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.statistical.frequentist import FrequentistMode

__all__ = ["StatisticalMode", "FrequentistMode", "BayesianMode"]
