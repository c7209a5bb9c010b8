"""Issue 12 item 2: README's main command — MiniLM group detection, UMAP + HDBSCAN cluster
profiling, Bayesian mode — gives a byte-identical ``results.json`` in one process and on two
worker processes (``--direct_running_mode=multi_processing --direct_num_workers=2``).

Before the per-text embedding fix the same command gave 131 vs 141 clusters between two runs:
the embedding of an answer depended on which answers shared its forward pass, so UMAP and
HDBSCAN saw other points. Each runner's audit runs once per module (about 2–4 minutes each on
2 cores)."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.testing import runners as rn
from pipelines import audit

pytestmark = pytest.mark.slow

#: README's main command (`fair-forge-beam --metrics humanity,toxicity --mode bayesian`), quiet
ARGS = ["--quiet", "--metrics", "humanity,toxicity", "--mode", "bayesian"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache: dict[str, bytes] = {}

    def get(name: str) -> bytes:
        if name not in cache:
            out = tmp_path_factory.mktemp(f"default-audit-{name}")
            audit.run([*ARGS, "--output", str(out), *rn.runner_args(name)])
            cache[name] = (out / "results.json").read_bytes()
        return cache[name]

    return get


def _clustering(doc: dict) -> dict:
    found = []

    def walk(x):
        if isinstance(x, dict):
            if "n_clusters" in x and "params" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    assert found, "no cluster profile in results.json"
    return found[0]


def test_default_audit_runs_the_embedding_and_clustering_path(runs):
    doc = json.loads(runs("in_memory"))
    prof = doc["metrics"]["toxicity"]["slices"][0]["clustering"]
    assert prof == _clustering(doc)
    assert prof["status"] == "ok" and prof["n_clusters"] > 1 and prof["params"]["umap"]["fitted"]
    assert prof["n_points"] == 2015  # every non-empty shipped answer embedded and clustered
    # duplicate answers got one vector each: as many distinct points as distinct non-empty answers
    assert prof["params"]["umap"]["distinct_points"] == 1402


def test_default_audit_in_memory_and_two_workers_give_identical_results_json(runs):
    a, b = runs("in_memory"), runs("multi_process")
    assert a == b
