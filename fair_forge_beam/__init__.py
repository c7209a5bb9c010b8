"""fair_forge_beam: fairness, safety and quality metrics for AI assistants as Apache Beam pipelines.

Importing the package has no side effects (no logging configuration, no Beam import): names
below are loaded on first use.

    from fair_forge_beam import Humanity, BayesianMode, ReadInteractions, Retriever
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Humanity": "metrics.humanity",
    "ReadInteractions": "io.read",
    "Retriever": "io.retriever",
    "Interaction": "io.elements",
    "StatisticalMode": "statistical.base",
    "FrequentistMode": "statistical.frequentist",
    "BayesianMode": "statistical.bayesian",
    "Batch": "schemas.common",
    "Dataset": "schemas.common",
    "SessionMetadata": "schemas.common",
    "StreamedBatch": "schemas.common",
    "IterationLevel": "schemas.common",
    "Estimate": "schemas.common",
}

__all__ = sorted(_EXPORTS) + ["__version__"]
__getattr__ = lazy_exports(__name__, _EXPORTS)
