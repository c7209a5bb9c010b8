"""Token attributions of a Hugging Face causal LM through ``interpreto`` (spec §13).

Optional: ``pip install 'fair_forge_beam[explain]'``. Importing this package imports neither
torch nor interpreto; the first explanation does, and raises ``ImportError`` naming the extra
when interpreto is missing. See ``docs/explainability.md``.
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

_EXPORTS = {
    "AttributionMethod": "schemas", "Granularity": "schemas", "TokenAttribution": "schemas", "AttributionResult": "schemas",
    "AttributionBatchResult": "schemas", "AttributionExplainer": "attributions", "InterpretoResultParser": "attributions",
    "compute_attributions": "attributions", "min_max_normalize": "attributions", "ExplainAttributions": "attributions",
    "require_interpreto": "attributions", "GRADIENT_METHODS": "schemas", "PERTURBATION_METHODS": "schemas",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
