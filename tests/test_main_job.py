"""The main job (``pipelines/audit.py``) end to end on the example data shipped in the package."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fair_forge_beam.reports.load import iter_dead_letters, iter_quality_warnings, read_sessions

from pipelines import audit
from helpers import FNAPI

EMOTIONS = ("anger", "anticipation", "disgust", "fear", "joy", "sadness", "surprise", "trust")
MAX_SECONDS = 30.0


def _example_inputs() -> dict:
    """Independent reading of the shipped example files: element ids by language."""
    json_in, jsonl_in = audit.default_inputs()
    sessions = json.loads(Path(json_in).read_text(encoding="utf-8"))
    sessions += [json.loads(ln) for ln in Path(jsonl_in).read_text(encoding="utf-8").splitlines() if ln.strip()]
    ids = {"all": [], "spanish": [], "english": []}
    for s in sessions:
        lang = (s.get("language") or "english").lower()
        lang = "spanish" if lang in ("es", "spanish") else lang
        for i, _ in enumerate(s["conversation"]):
            eid = f"{s['session_id']}/{s['assistant_id']}/{i}"
            ids["all"].append(eid)
            ids.setdefault(lang, []).append(eid)
    return ids


EXAMPLES = _example_inputs()


def _run_timed(out: Path, mode: str, *extra: str) -> dict:
    t0 = time.perf_counter()
    doc = audit.run(["--quiet", "--mode", mode, "--output", str(out), f"--runner={FNAPI}", *extra])
    return {"doc": doc, "seconds": time.perf_counter() - t0, "out": out}


@pytest.fixture(scope="module")
def frequentist(tmp_path_factory):
    return _run_timed(tmp_path_factory.mktemp("freq"), "frequentist")


@pytest.fixture(scope="module")
def bayesian(tmp_path_factory):
    return _run_timed(tmp_path_factory.mktemp("bayes"), "bayesian", "--seed", "3")


@pytest.fixture(params=["frequentist", "bayesian"])
def run(request):
    return request.getfixturevalue(request.param)


def test_example_data_shape():
    # the shipped data: 26 Spanish interactions (10 sessions "es" of 1 + 8 "spanish" of 2)
    assert len(EXAMPLES["spanish"]) == 26
    assert len(EXAMPLES["all"]) == len(set(EXAMPLES["all"])) == 2042


@pytest.mark.slow
def test_finishes_in_time_and_writes_all_outputs(run):
    assert run["seconds"] < MAX_SECONDS, f"main job took {run['seconds']:.1f} s"
    out = run["out"]
    for name in ("results.json", "run_info.json"):
        assert (out / name).is_file(), name
    for name in ("results.parquet", "sessions/humanity", "dead_letter", "data_quality"):  # folders of shards
        assert sorted(p.suffix for p in (out / name).iterdir()) and all(
            re.fullmatch(r"part-\d{5}-of-\d{5}\.(parquet|jsonl)", p.name) for p in (out / name).iterdir()), name
    assert not (out / "_parts").exists() and not (out / "dead_letter.jsonl").exists()  # no driver-side parts
    assert "sessions" not in run["doc"]["metrics"]["humanity"]  # session aggregates live in sessions/<metric>/
    on_disk = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert on_disk == run["doc"]


@pytest.mark.slow
def test_results_parquet_one_row_per_scored_interaction(run):
    table = pq.read_table(run["out"] / "results.parquet")
    cols = set(table.column_names)
    expected_cols = {
        "element_id",
        "session_id",
        "assistant_id",
        "language",
        "turn_index",
        "qa_id",
        "humanity_assistant_emotional_entropy",
        "humanity_ground_truth_spearman",
        *(f"humanity_assistant_{e}" for e in EMOTIONS),
    }
    assert expected_cols <= cols, expected_cols - cols
    rows = table.to_pylist()
    scored = run["doc"]["summary"]["metrics"]["humanity"]["scored"]
    assert len(rows) == scored == len(EXAMPLES["all"]) - 26
    ids = [r["element_id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert set(ids) == set(EXAMPLES["all"]) - set(EXAMPLES["spanish"])
    for r in rows:
        assert r["language"] == "english"
        assert 0.0 <= r["humanity_assistant_emotional_entropy"] <= 3.0 + 1e-12
        assert -1.0 <= r["humanity_ground_truth_spearman"] <= 1.0
        dist = [r[f"humanity_assistant_{e}"] for e in EMOTIONS]
        assert all(0.0 <= p <= 1.0 for p in dist)
        assert math.isclose(sum(dist), 1.0, abs_tol=1e-9) or all(p == 0 for p in dist)
        sid, aid, turn = r["element_id"].rsplit("/", 2)
        assert (r["session_id"], r["assistant_id"], r["turn_index"]) == (sid, aid, int(turn))


@pytest.mark.slow
def test_dead_letter_holds_the_26_spanish_interactions(run):
    dead = list(iter_dead_letters(str(run["out"])))
    assert len(dead) == 26
    assert sorted(d["element_id"] for d in dead) == sorted(EXAMPLES["spanish"])
    for d in dead:
        assert d["stage"] == "humanity"
        assert "spanish" in d["reason"]
        raw = json.loads(d["raw"])
        assert raw["element_id"] == d["element_id"] and raw["language"] == "spanish"


@pytest.mark.slow
def test_run_info(run):
    info = json.loads((run["out"] / "run_info.json").read_text(encoding="utf-8"))
    assert info["runner"] == FNAPI
    assert isinstance(info["seconds"], (int, float)) and 0 <= info["seconds"] <= run["seconds"] + 1
    # the run's start and end in UTC (the trend report orders runs by them)
    from datetime import datetime

    start, end = datetime.fromisoformat(info["started_at"]), datetime.fromisoformat(info["finished_at"])
    assert info["started_at"].endswith("Z") and 0 <= (end - start).total_seconds() <= run["seconds"] + 1
    assert info["versions"]["apache-beam"] and info["versions"]["fair_forge_beam"]
    assert "--output" in info["argv"]


@pytest.mark.slow
def test_results_json_summary_is_consistent(run):
    doc = run["doc"]
    s = doc["summary"]
    hs = s["metrics"]["humanity"]
    assert s["interactions_read"] == len(EXAMPLES["all"]) == 2042
    assert s["rejected_at_read"] == 0
    assert s["interactions_read"] == hs["scored"] + hs["interactions_not_scored"]
    assert hs["dead_letters"] == hs["interactions_not_scored"]  # Humanity: one dead letter per interaction
    assert hs["interactions_not_scored"] == 26 and hs["interactions_scored"] + 26 == doc["summary"]["interactions_read"]
    assert hs["dead_letters"] == 26 and sum(hs["dead_letter_reasons"].values()) == 26
    assert all("spanish" in reason for reason in hs["dead_letter_reasons"])
    m = doc["metrics"]["humanity"]
    slices = {r["slice"]: r for r in m["slices"]}
    assert m["slices"][0]["slice"] == "overall"
    ov = slices["overall"]
    assert ov["n_interactions"] == hs["scored"]
    sessions = read_sessions(str(run["out"]), "humanity")
    assert ov["n_sessions"] == len(sessions)
    assert sum(x["n_interactions"] for x in sessions) == hs["scored"]
    by_assistant = [r for k, r in slices.items() if k.startswith("assistant_id=")]
    assert sum(r["n_interactions"] for r in by_assistant) == hs["scored"]
    assert sum(r["n_sessions"] for r in by_assistant) == ov["n_sessions"]
    assert slices["language=english"]["n_interactions"] == hs["scored"]
    assert "language=spanish" not in slices
    assert m["lexicon"] and "non-commercial" in m["lexicon_licence"]
    # results schema 2: texts every slice shares are stated once per metric (common), not in each slice
    assert "lexicon" not in ov and "lexicon_licence" not in ov
    assert m["common"]["lexicon"] == m["lexicon"] and m["common"]["lexicon_licence"] == m["lexicon_licence"]
    for r in m["slices"]:
        total = sum(r["emotion_distribution"][e]["mean"] for e in EMOTIONS)
        assert math.isclose(total, 1.0, abs_tol=1e-9)


@pytest.mark.slow
def test_frequentist_overall_mean_is_mean_over_parquet_rows(frequentist):
    # the example data carry no weights: the overall mean is the plain mean over interactions
    rows = pq.read_table(frequentist["out"] / "results.parquet").to_pylist()
    ov = frequentist["doc"]["metrics"]["humanity"]["slices"][0]
    assert ov["mode"] == "point_estimate"
    # Spearman: over the rows whose reference answer has an emotion profile only (issue 28)
    with_ref = [r for r in rows if r["humanity_has_reference"]]
    assert 0 < len(with_ref) < len(rows) and ov["n_with_reference"] == len(with_ref)
    for col, key, rs in (("humanity_assistant_emotional_entropy", "mean_entropy", rows),
                         ("humanity_ground_truth_spearman", "mean_spearman", with_ref)):
        plain = math.fsum(r[col] for r in rs) / len(rs)
        assert ov[key]["mean"] == pytest.approx(plain, rel=1e-12, abs=1e-12)
        assert ov[key]["ci_low"] is None
    # pooled emotion distribution of the overall slice: proportions sum to 1
    assert ov["emotion_distribution"]["anger"]["n"] > 0


@pytest.mark.slow
def test_bayesian_intervals_in_results(bayesian):
    doc = bayesian["doc"]
    assert doc["config"]["mode"] == "bayesian" and doc["config"]["seed"] == 3 and doc["config"]["mc_samples"] == 5000
    for r in doc["metrics"]["humanity"]["slices"]:
        assert r["mode"] == "distribution"
        for k in ("mean_entropy", "mean_spearman"):
            e = r[k]
            if k == "mean_spearman" and r["n_with_reference"] == 0:  # no reference answer: no estimate
                assert e == {"mean": None, "ci_low": None, "ci_high": None, "n": 0}, (r["slice"], e)
                continue
            if r["n_sessions"] == 1:  # one session: no between-session interval is claimed
                assert e["mean"] is not None and e["ci_low"] is None and e["ci_high"] is None, (r["slice"], k, e)
                continue
            assert e["ci_low"] is not None and e["ci_low"] - 1e-12 <= e["mean"] <= e["ci_high"] + 1e-12, (r["slice"], k, e)
    for s in read_sessions(str(bayesian["out"]), "humanity"):
        e = s["mean_entropy"]
        assert e["ci_low"] - 1e-12 <= e["mean"] <= e["ci_high"] + 1e-12
        if s["n_interactions"] == 1:
            assert e["ci_low"] == e["mean"] == e["ci_high"]


@pytest.mark.slow
def test_results_json_has_no_run_specific_values(run):
    """results.json must be identical for the same input and seed on every run and runner: no
    timings, no paths of the output folder, no process-specific text such as object addresses."""
    text = (run["out"] / "results.json").read_text(encoding="utf-8")
    assert '"seconds"' not in text
    assert str(run["out"]) not in text
    found = re.search(r'"(\w+)": "[^"]* at 0x[0-9a-fA-F]+[^"]*"', text)
    assert found is None, f"results.json embeds a memory address (differs between runs/processes): {found.group(0)}"


def test_console_script_help():
    # the console script installed next to this interpreter (never looked up on PATH: the venv
    # need not be activated)
    exe = Path(sys.executable).parent / "fair-forge-beam"
    assert exe.is_file(), f"console script fair-forge-beam is not installed next to {sys.executable}"
    res = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for flag in ("--input", "--metrics", "--mode", "--seed", "--mc-samples", "--output", "--quiet"):
        assert flag in res.stdout


@pytest.mark.slow
def test_python_m_pipelines_audit_quiet(tmp_path):
    out = tmp_path / "cli_out"
    res = subprocess.run(
        [sys.executable, "-m", "pipelines.audit", "--quiet", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # the installed package, not the checkout's working directory
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "fair_forge_beam audit:" not in res.stdout  # --quiet: no summary table
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["summary"]["interactions_read"] == 2042
    assert (out / "results.parquet").is_dir() and (out / "dead_letter").is_dir() and (out / "run_info.json").is_file()


def test_bad_arguments_fail_fast(tmp_path):
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--metrics", "no_such_metric", "--output", str(tmp_path)])
    assert exc.value.code == 2


@pytest.mark.parametrize("argv", [["--mod", "bayesian"], ["--metric", "humanity"], ["--moed", "bayesian"]])
def test_abbreviated_or_misspelt_flags_are_usage_errors(tmp_path, argv, capsys):
    """``--mod`` must not silently expand to ``--mode`` (argparse's default prefix matching)."""
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", *argv, "--output", str(tmp_path)])
    assert exc.value.code == 2
    assert argv[0] in capsys.readouterr().err
