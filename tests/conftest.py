"""Shared test fixtures: Beam pipelines on FnApiRunner (named explicitly, no download)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
# ../shared (next to the checkout) holds the real public datasets and the regression cases.
SHARED = Path(os.environ.get("FAIR_FORGE_SHARED", REPO.parent / "shared"))

settings.register_profile("ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"


@pytest.fixture
def test_pipeline():
    """A ``TestPipeline`` on FnApiRunner in-memory (use as a context manager)."""
    from apache_beam.testing.test_pipeline import TestPipeline

    return TestPipeline(runner=FNAPI, blocking=True)


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"shared data folder not found at {SHARED}")
    return SHARED
