"""What a run writes under ``--output``, by name (Beam-free: the console summary, the output-folder
checks and the launcher read it before any pipeline exists). Shard folders end in ``/``; their
content is described in :mod:`fair_forge_beam.reports.results` and docs/data.md."""
from __future__ import annotations

__all__ = ["OUTPUT_FILES", "STAGE_MARK", "run_id_of"]

#: what the main job writes under --output, in the order the console lists them
OUTPUT_FILES = ("results.json", "results.parquet/", "sessions/", "slices/", "dead_letter/", "data_quality/", "run_info.json",
                "stats/", "report.html", "comparison.json")


#: what marks a run's stage folder beside its output folder (``<output>.staging-<run id>``)
STAGE_MARK = ".staging-"


def run_id_of(stage: str) -> str:
    """The id of the run writing into ``stage`` (``<UTC time>-<random>``): what the published
    folder's ``_SUCCESS`` holds, and what its stored statistics' manifest and Parquet shards record
    as ``run_id``."""
    return stage.rstrip("/").rsplit(STAGE_MARK, 1)[-1]


