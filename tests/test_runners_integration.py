"""Acceptance (issue 6, item 3): the same audit gives identical outputs on four runners —
FnApiRunner in-memory, FnApiRunner with 2 worker processes, Flink (Beam's job server, embedded
cluster) and Prism (Beam's Go runner).

The audit is the main job with ``--metrics humanity,toxicity --group-extractor keyword --mode
bayesian --seed 7`` on the shipped examples (2,042 interactions in 809 sessions). Compared
across runners: ``results.json`` byte for byte (summary, slice posteriors and credible
intervals), the session aggregates (``sessions/<metric>/`` shards) as a multiset of records, the
dead letter as a multiset of lines, and the rows of ``results.parquet`` as a multiset (file
order and sharding are the runner's business).

Flink and Prism need artifacts fetched by ``.ci/get_runners.sh`` (see
``fair_forge_beam/testing/runners.py``). Missing locally: skipped. Missing under ``CI=true``:
the test fails — unless the script recorded that the registry does not serve the artifact at
all, in which case it is skipped with the registry's answer (nothing in this repository can
make the runner exist). A fifth run, ``prism_workers``, has Prism hand bundles to SDK workers
in separate ``python`` processes (EXTERNAL environment, Beam's worker pool), which import the
installed package. Select the suite with ``-m runners``. Each runner's audit runs once
per module; Prism's job server is started once per process (Beam's shared handle).
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from fair_forge_beam.reports.load import iter_jsonl_lines

from fair_forge_beam.testing import runners as rn
from pipelines import audit

pytestmark = [pytest.mark.runners, pytest.mark.slow]

ARGS = ["--quiet", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000",
        "--metrics", "humanity,toxicity", "--group-extractor", "keyword"]
IN_CI = os.environ.get("CI", "").lower() == "true"


def _require(name: str) -> None:
    reason = rn.missing_reason(name)
    if reason is None:
        return
    refused = rn.unavailable_reason(name)
    if refused:
        pytest.skip(f"{name}: the registry does not serve its artifact: {refused}")
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def _outputs(out: Path) -> dict:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "results.parquet")
    rows = Counter(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
    dead = Counter(iter_jsonl_lines(str(out), "dead_letter"))
    sessions = {m: Counter(pq.read_table(out / "sessions" / m).column("record").to_pylist())
                for m in ("humanity", "toxicity")}  # session aggregates: their shards, as multisets of records
    return {"results": (out / "results.json").read_bytes(), "dead_letter": dead, "parquet_rows": rows,
            "parquet_schema": table.schema.to_string(), "sessions": sessions}


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    """``runner name -> outputs``, each runner's audit run at most once per module."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            _require(name)
            out = tmp_path_factory.mktemp(f"audit-{name}")
            if name == "prism_workers":
                with rn.WorkerPool() as pool:
                    audit.run([*ARGS, "--output", str(out), *rn.runner_args(name, worker_pool=pool)])
            else:
                audit.run([*ARGS, "--output", str(out), *rn.runner_args(name)])
            cache[name] = _outputs(out)
        return cache[name]

    return get


def test_reference_audit_is_meaningful(audits):
    """The in-memory reference: both metrics scored, Bayesian intervals, dead letters counted."""
    doc = json.loads(audits("in_memory")["results"])
    assert doc["config"]["mode"] == "bayesian" and doc["config"]["seed"] == 7
    assert set(doc["metrics"]) == {"humanity", "toxicity"}
    s = doc["summary"]
    assert s["interactions_read"] > 1000
    for name in ("humanity", "toxicity"):
        assert s["metrics"][name]["scored"] > 0
        ms = s["metrics"][name]
        assert ms["scored"] + ms["dead_letters"] == s["interactions_read"] - s["rejected_at_read"]
        assert ms["interactions_scored"] + ms["interactions_not_scored"] == s["interactions_read"]
    didt = doc["metrics"]["toxicity"]["slices"][0]["group_profiling"]["bayesian"]["summary"]["DIDT"]
    assert didt["ci_low"] <= didt["mean"] <= didt["ci_high"]


@pytest.mark.parametrize("runner", ["multi_process", "prism", "flink", "prism_workers"])
def test_identical_to_in_memory(audits, runner):
    ref = audits("in_memory")
    got = audits(runner)
    assert got["results"] == ref["results"], f"results.json differs between in_memory and {runner}"
    assert got["dead_letter"] == ref["dead_letter"]
    assert got["parquet_schema"] == ref["parquet_schema"]
    assert got["parquet_rows"] == ref["parquet_rows"]
    assert got["sessions"] == ref["sessions"], f"session aggregates differ between in_memory and {runner}"


def test_runner_args_never_download():
    """Prism is always given by path, and the two direct modes never use multi-threading."""
    for name in rn.RUNNERS + rn.EXTRA_RUNNERS:
        try:
            args = rn.runner_args(name, worker_pool="localhost:1")
        except FileNotFoundError:
            continue
        assert not any("multi_threading" in a for a in args)
        if name == "prism":
            loc = [a for a in args if a.startswith("--prism_location=")]
            assert loc and Path(loc[0].split("=", 1)[1]).is_file()
    with pytest.raises(ValueError):
        rn.missing_reason("spark")


def test_missing_artifact_fails_under_ci(monkeypatch, tmp_path):
    """With an empty cache: skip locally, fail under CI=true, skip with the registry's answer
    when the fetch script recorded one."""
    import _pytest.outcomes as outcomes

    monkeypatch.setenv("FAIR_FORGE_RUNNERS_DIR", str(tmp_path))
    monkeypatch.delenv("FAIR_FORGE_PRISM", raising=False)
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", True)
    with pytest.raises(outcomes.Failed, match="CI=true"):
        _require("prism")
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", False)
    with pytest.raises(outcomes.Skipped, match="no artifact"):
        _require("prism")
    (tmp_path / "prism.unavailable").write_text("not found: v9.9.9\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", True)
    with pytest.raises(outcomes.Skipped, match="not found: v9.9.9"):
        _require("prism")
    with pytest.raises(outcomes.Skipped, match="not found: v9.9.9"):
        _require("prism_workers")
    monkeypatch.setenv("FAIR_FORGE_PRISM", "/bin/true")  # any executable file counts as present
    assert rn.missing_reason("prism") is None
