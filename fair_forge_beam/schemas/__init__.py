"""Pydantic schemas: common data (spec §1) and one module per metric's results."""
from fair_forge_beam.schemas.common import (
    BaseMetric,
    Batch,
    Dataset,
    Estimate,
    IterationLevel,
    Logprobs,
    SessionMetadata,
    StreamedBatch,
)
from fair_forge_beam.schemas.languages import is_known_language, normalize_language

__all__ = [
    "BaseMetric",
    "Batch",
    "Dataset",
    "Estimate",
    "IterationLevel",
    "Logprobs",
    "SessionMetadata",
    "StreamedBatch",
    "is_known_language",
    "normalize_language",
]
