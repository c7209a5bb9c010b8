"""Acceptance (issue 3): Toxicity's Bayesian summaries are bit-identical across FnApiRunner
in-memory and multi-process ×2, and independent of input order (shuffled input, same output).

Runs the main job with ``--metrics humanity,toxicity`` (one shared read) and the keyword group
extractor, in Bayesian mode with a fixed seed. Runner options: see test_shard_invariance.py.
The in-memory and multi-process runs are the keyword audit of tests/test_runners_integration.py
(same argv, seed 7), run once per session through ``audit_once`` (tests/conftest.py).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pipelines import audit
from helpers import FNAPI

ARGS = ["--quiet", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000",
        "--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex"]
IN_MEMORY = [f"--runner={FNAPI}"]
MULTI_PROCESS = [f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def _run(out: Path, *extra: str) -> tuple[dict, bytes]:
    out.mkdir(parents=True, exist_ok=True)
    doc = audit.run([*ARGS, "--output", str(out), *extra])
    return doc, (out / "results.json").read_bytes()


def _shared(audit_once, *extra: str) -> tuple[dict, bytes]:
    doc, out = audit_once([*ARGS, *extra])
    return doc, (out / "results.json").read_bytes()


@pytest.fixture(scope="module")
def in_memory(audit_once):
    return _shared(audit_once, *IN_MEMORY)


@pytest.mark.slow
def test_toxicity_runs_with_humanity_on_one_read(in_memory):
    doc, _ = in_memory
    assert set(doc["metrics"]) == {"humanity", "toxicity"}
    ov = doc["metrics"]["toxicity"]["slices"][0]
    assert ov["slice"] == "overall"
    gp = ov["group_profiling"]
    assert gp["mode"] == "bayesian" and gp["status"] == "ok"
    s = gp["bayesian"]["summary"]["DIDT"]
    assert s["ci_low"] <= s["mean"] <= s["ci_high"]
    assert sum(gp["N_i"].values()) > 0
    # every interaction read is scored by toxicity or in its dead letter
    ms = doc["summary"]["metrics"]["toxicity"]
    assert ms["scored"] + ms["dead_letters"] == doc["summary"]["interactions_read"] - doc["summary"]["rejected_at_read"]


@pytest.mark.slow
def test_toxicity_bit_identical_in_memory_vs_multi_process(in_memory, audit_once):
    _, bytes_a = in_memory
    _, bytes_b = _shared(audit_once, *MULTI_PROCESS)
    assert bytes_a == bytes_b


@pytest.mark.slow
def test_toxicity_independent_of_input_order(in_memory, tmp_path):
    doc_a, _ = in_memory
    json_in, jsonl_in = audit.default_inputs()
    sessions = json.loads(Path(json_in).read_text(encoding="utf-8"))
    random.Random(5).shuffle(sessions)
    (tmp_path / "in").mkdir()
    j = tmp_path / "in" / "examples.json"
    j.write_text(json.dumps(sessions, ensure_ascii=False), encoding="utf-8")
    lines = [ln for ln in Path(jsonl_in).read_text(encoding="utf-8").splitlines() if ln.strip()]
    random.Random(6).shuffle(lines)
    jl = tmp_path / "in" / "hh.jsonl"
    jl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    doc_b, _ = _run(tmp_path / "out", *IN_MEMORY, "--input", str(jl), "--input", str(j))
    assert json.dumps(doc_b["metrics"], sort_keys=True) == json.dumps(doc_a["metrics"], sort_keys=True)
