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


@pytest.fixture(scope="session")
def audit_once(tmp_path_factory):
    """``(argv) -> (doc, out)``: the main job (:func:`pipelines.audit.run`) with ``argv`` plus
    ``--output <new folder>``, run at most once per test session for each exact ``argv`` tuple.

    Modules that need the same end-to-end run (e.g. the in-memory reference of the runner suite
    and the toxicity runner checks) share it instead of repeating a minute-long audit. ``doc`` is
    a deep copy per call (a test may change it); the output folder ``out`` is shared and must be
    treated as read-only. An audit that raises is not cached (the next caller runs it again and
    sees the same error).
    """
    import copy

    from pipelines import audit

    cache: dict[tuple, tuple] = {}

    def get(argv) -> tuple:
        key = tuple(argv)
        if key not in cache:
            out = tmp_path_factory.mktemp("audit-once") / "out"
            cache[key] = (audit.run([*key, "--output", str(out)]), out)
        doc, out = cache[key]
        return copy.deepcopy(doc), out

    return get


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"shared data folder not found at {SHARED}")
    return SHARED


# ------------------------------------------------------------------ judged-metric test helpers
def handler_for(srv, tmp_path, **kw):
    """An ``OpenAIJudgeHandler`` for the scripted server ``srv``: own cache file, no retries, no key."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler

    kw.setdefault("cache_path", str(tmp_path / "cache.sqlite3"))
    kw.setdefault("num_retries", 0)
    kw.setdefault("client_retries", 0)
    kw.setdefault("api_key_env", "FFB_TEST_UNSET_KEY")
    return OpenAIJudgeHandler("judge-model", srv.base_url, **kw)


METRIC_OUTPUTS = ("interactions", "sessions", "slices", "dead_letter", "quality")


def run_metric(metric, interactions, out):
    """Run ``metric`` over ``interactions`` on FnApiRunner; its outputs as lists of dicts."""
    from apache_beam.testing.test_pipeline import TestPipeline

    from fair_forge_beam._beam import beam
    from fair_forge_beam.runner import read_jsonl_shards, write_jsonl

    p = TestPipeline(runner=FNAPI, blocking=True)
    res = p | beam.Create(interactions) | metric
    for name in METRIC_OUTPUTS:
        write_jsonl(res[name], str(out / name), f"W{name}")
    p.run().wait_until_finish()
    return {name: read_jsonl_shards(str(out / name)) for name in METRIC_OUTPUTS}
