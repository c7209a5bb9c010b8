"""Issue 28, "Earlier notes, still open": each item fixed, or a documented decision, with a test."""
from __future__ import annotations

import json
import logging
from importlib import metadata

import pytest


def test_run_info_names_the_torch_and_transformers_versions(tmp_path):
    from fair_forge_beam.reports.results import write_run_info

    versions = write_run_info(str(tmp_path), {})["versions"]
    for pkg in ("torch", "transformers", "sentence-transformers"):
        try:
            expected = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            expected = None
        assert pkg in versions and versions[pkg] == expected
    assert json.loads((tmp_path / "run_info.json").read_text())["versions"] == versions


def _chunks(n):
    from fair_forge_beam.generators.schemas import Chunk

    return [Chunk(chunk_id=f"c{i}", content=f"text {i}") for i in range(n)]


def test_chunks_per_sample_above_the_corpus_is_capped_with_a_warning(caplog):
    from fair_forge_beam.generators.strategies import RandomSamplingStrategy

    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.generators.strategies"):
        groups = list(RandomSamplingStrategy(num_samples=2, chunks_per_sample=10, seed=1).select(_chunks(4)))
    assert [len(g) for g in groups] == [4, 4]
    assert [r.getMessage() for r in caplog.records] == [
        "--chunks-per-sample 10 is above the corpus's 4 chunk(s): each of the 2 group(s) holds all 4, in a random order "
        "(pass --with-replacement to draw 10 with repeats)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.generators.strategies"):
        list(RandomSamplingStrategy(num_samples=2, chunks_per_sample=4, seed=1).select(_chunks(4)))
        list(RandomSamplingStrategy(num_samples=2, chunks_per_sample=10, seed=1, with_replacement=True).select(_chunks(4)))
    assert caplog.records == []
