"""Issue 13 item 13: fields renamed from the original stay readable under their original name."""
from __future__ import annotations

from pathlib import Path

import pytest

from fair_forge_beam.schemas.agentic import ToolCorrectnessScore

# the "Differences from the original" section of README, now its own page (issue 15)
DIFFERENCES = Path(__file__).resolve().parents[1] / "docs" / "differences.md"
BASE = dict(parameter_accuracy=1.0, sequence_correct=1.0, result_utilization=1.0, overall_correctness=0.875, is_correct=False)


def test_tool_selection_correct_is_accepted_and_readable():
    original = ToolCorrectnessScore(tool_selection_correct=0.5, **BASE)  # the original's keyword
    ours = ToolCorrectnessScore(tool_selection_accuracy=0.5, **BASE)
    assert original == ours
    assert original.tool_selection_correct == original.tool_selection_accuracy == 0.5
    # a dict written by the original validates
    assert ToolCorrectnessScore.model_validate({"tool_selection_correct": 0.5, **BASE}) == ours
    assert ToolCorrectnessScore.model_validate(ours.model_dump()) == ours
    with pytest.raises(ValueError):
        ToolCorrectnessScore(tool_selection_correct=1.5, **BASE)


def test_regulatory_reranker_score_is_accepted_and_readable():
    from fair_forge_beam.schemas.regulatory import RegulatoryChunk

    base = dict(text="t", source="s.md", chunk_index=0, similarity=0.5, verdict="SUPPORTS")
    original = RegulatoryChunk(reranker_score=0.8, **base)
    assert original == RegulatoryChunk(checker_score=0.8, **base)
    assert original.reranker_score == original.checker_score == 0.8
    assert RegulatoryChunk.model_validate(original.model_dump()) == original


def test_readme_lists_every_renamed_field():
    section = DIFFERENCES.read_text(encoding="utf-8")
    assert section.startswith("# Differences from the original\n")
    for original, ours in (("tool_selection_correct", "tool_selection_accuracy"), ("reranker_score", "checker_score")):
        assert f"`{original}`" in section and f"`{ours}`" in section
