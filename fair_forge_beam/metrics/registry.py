"""Metric names usable from the main job (``--metrics``) and how to build each transform."""
from __future__ import annotations

from typing import Callable, Optional

import pyarrow as pa

from fair_forge_beam.statistical.base import StatisticalMode

__all__ = ["METRICS", "build_metric", "interaction_parquet_fields"]


def _humanity(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.emotion_lexicon import NRCCsvLexicon
    from fair_forge_beam.metrics.humanity import Humanity

    lexicon = NRCCsvLexicon(options["emotion_lexicon_csv"]) if options.get("emotion_lexicon_csv") else None
    return Humanity(statistical_mode=mode, lexicon=lexicon, slice_bootstrap=options.get("slice_bootstrap", "buckets"))


def _humanity_fields() -> list[pa.Field]:
    from fair_forge_beam.components.emotion_lexicon import EMOTIONS

    return [
        pa.field("humanity_assistant_emotional_entropy", pa.float64()),
        pa.field("humanity_ground_truth_spearman", pa.float64()),
        *[pa.field(f"humanity_assistant_{e}", pa.float64()) for e in EMOTIONS],
    ]


def _toxicity(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.toxicity_lexicon import HurtLexLoader
    from fair_forge_beam.metrics.toxicity import Toxicity

    kwargs = {}
    if options.get("group_extractor", "embedding") == "keyword":
        from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords

        kwargs["group_extractor"] = KeywordGroupExtractor(default_group_keywords())
    return Toxicity(
        statistical_mode=mode,
        toxicity_loader=HurtLexLoader(level=options.get("toxicity_level", "inclusive")),
        clustering=options.get("clustering"),
        cluster_points_path=options.get("cluster_points_path"),
        **kwargs,
    )


def _toxicity_fields() -> list[pa.Field]:
    return [
        pa.field("toxicity_total_words", pa.int64()),
        pa.field("toxicity_toxic_words", pa.int64()),
        pa.field("toxicity_toxic_ratio", pa.float64()),
        pa.field("toxicity_is_toxic", pa.bool_()),
        pa.field("toxicity_matched", pa.list_(pa.string())),
        pa.field("toxicity_groups", pa.list_(pa.string())),
        pa.field("toxicity_sentiment", pa.float64()),
    ]


#: name -> (factory(mode, options) -> MetricTransform, per-interaction Parquet fields)
METRICS: dict[str, tuple[Callable, Callable[[], list]]] = {
    "humanity": (_humanity, _humanity_fields),
    "toxicity": (_toxicity, _toxicity_fields),
}

BASE_FIELDS = [
    pa.field("metric", pa.string()),
    pa.field("element_id", pa.string()),
    pa.field("session_id", pa.string()),
    pa.field("assistant_id", pa.string()),
    pa.field("language", pa.string()),
    pa.field("turn_index", pa.int64()),
    pa.field("qa_id", pa.string()),
]


def build_metric(name: str, mode: StatisticalMode, options: Optional[dict] = None):
    """Build the transform of metric ``name``.

    Raises:
        ValueError: unknown metric name (lists the known ones).
    """
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; available: {', '.join(sorted(METRICS))}")
    return METRICS[name][0](mode, options or {})


def interaction_parquet_fields(names) -> pa.Schema:
    """Union Parquet schema of the per-interaction rows of the given metrics."""
    fields = list(BASE_FIELDS)
    for n in names:
        fields.extend(METRICS[n][1]())
    return pa.schema(fields)
