"""fair_forge_beam: fairness, safety and quality metrics for AI assistants as Apache Beam pipelines.

Importing the package has no side effects (no logging configuration, no Beam import): names
below are loaded on first use.

    from fair_forge_beam import Humanity, BayesianMode, ReadInteractions, Retriever
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Humanity": "fair_forge_beam.metrics.humanity",
    "ReadInteractions": "fair_forge_beam.io.read",
    "Retriever": "fair_forge_beam.io.retriever",
    "Interaction": "fair_forge_beam.io.elements",
    "StatisticalMode": "fair_forge_beam.statistical.base",
    "FrequentistMode": "fair_forge_beam.statistical.frequentist",
    "BayesianMode": "fair_forge_beam.statistical.bayesian",
    "Batch": "fair_forge_beam.schemas.common",
    "Dataset": "fair_forge_beam.schemas.common",
    "SessionMetadata": "fair_forge_beam.schemas.common",
    "StreamedBatch": "fair_forge_beam.schemas.common",
    "IterationLevel": "fair_forge_beam.schemas.common",
    "Estimate": "fair_forge_beam.schemas.common",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fair_forge_beam' has no attribute {name!r}")
