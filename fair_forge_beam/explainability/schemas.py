"""Result schemas of the explainability module (spec §13): methods, granularities, results."""
from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel, Field

__all__ = ["AttributionMethod", "Granularity", "TokenAttribution", "AttributionResult", "AttributionBatchResult",
           "GRADIENT_METHODS", "PERTURBATION_METHODS"]


class AttributionMethod(str, Enum):
    """Attribution methods; each value names the ``interpreto`` class of the same name."""

    SALIENCY = "Saliency"
    INTEGRATED_GRADIENTS = "IntegratedGradients"
    GRADIENT_SHAP = "GradientShap"
    SMOOTH_GRAD = "SmoothGrad"
    SQUARE_GRAD = "SquareGrad"
    VAR_GRAD = "VarGrad"
    INPUT_X_GRADIENT = "InputXGradient"
    LIME = "Lime"
    KERNEL_SHAP = "KernelShap"
    OCCLUSION = "Occlusion"
    SOBOL = "Sobol"


GRADIENT_METHODS = frozenset({AttributionMethod.SALIENCY, AttributionMethod.INTEGRATED_GRADIENTS, AttributionMethod.GRADIENT_SHAP,
                              AttributionMethod.SMOOTH_GRAD, AttributionMethod.SQUARE_GRAD, AttributionMethod.VAR_GRAD,
                              AttributionMethod.INPUT_X_GRADIENT})
PERTURBATION_METHODS = frozenset(set(AttributionMethod) - GRADIENT_METHODS)


class Granularity(str, Enum):
    """Unit an attribution is given for: a token, a word or a sentence."""

    TOKEN = "token"
    WORD = "word"
    SENTENCE = "sentence"


class TokenAttribution(BaseModel):
    """One element (token, word or sentence): ``text``, raw ``score`` (method units, signed),
    0-based ``position`` and ``normalized_score`` ∈ [0, 1] (min-max over the result; 0.5 when
    all scores are equal)."""

    text: str
    score: float
    position: int = Field(ge=0)
    normalized_score: float = Field(ge=0.0, le=1.0)


class AttributionResult(BaseModel):
    """Attributions of one (prompt, target) pair; ``metadata`` holds ``compute_time_seconds``,
    ``max_length`` and the ``seed`` used."""

    prompt: str
    target: str
    method: AttributionMethod
    granularity: Granularity
    attributions: list[TokenAttribution]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def top_attributions(self) -> list[TokenAttribution]:
        """Elements sorted by |score|, largest first (ties: lower position first)."""
        return sorted(self.attributions, key=lambda a: (-abs(a.score), a.position))

    def get_top_k(self, k: int = 5) -> list[TokenAttribution]:
        """The ``k`` elements with the largest |score|."""
        return self.top_attributions[: max(0, int(k))]

    def to_dict_for_visualization(self) -> dict:
        """``{"tokens": [...], "scores": [...], "normalized_scores": [...]}`` in position order."""
        return {"tokens": [a.text for a in self.attributions], "scores": [a.score for a in self.attributions],
                "normalized_scores": [a.normalized_score for a in self.attributions]}


class AttributionBatchResult(BaseModel):
    """Results of :meth:`AttributionExplainer.explain_batch`, in input order."""

    results: list[AttributionResult]
    model_name: Optional[str] = None
    total_compute_time_seconds: float = 0.0
