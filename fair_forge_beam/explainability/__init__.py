"""Token attributions of a Hugging Face causal LM through ``interpreto`` (spec §13).

Optional: ``pip install 'fair_forge_beam[explain]'``. Importing this package imports neither
torch nor interpreto; the first explanation does, and raises ``ImportError`` naming the extra
when interpreto is missing. See ``docs/explainability.md``.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "AttributionMethod": "schemas", "Granularity": "schemas", "TokenAttribution": "schemas", "AttributionResult": "schemas",
    "AttributionBatchResult": "schemas", "AttributionExplainer": "attributions", "InterpretoResultParser": "attributions",
    "compute_attributions": "attributions", "min_max_normalize": "attributions", "ExplainAttributions": "attributions",
    "require_interpreto": "attributions", "GRADIENT_METHODS": "schemas", "PERTURBATION_METHODS": "schemas",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
