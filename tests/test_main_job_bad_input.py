"""Acceptance test of the main job on dirty input (DESIGN §8): a run never crashes on bad
records and never loses one silently; configuration errors fail fast with exit code 2."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from fair_forge_beam.reports.load import iter_jsonl_lines, read_sessions

WORDS = ["happy", "angry", "trust", "fear", "joy", "sad", "surprise", "hope", "calm", "friend", "thank", "worried"]
N_SESSIONS = 100


def _sentence(rng: random.Random) -> str:
    return "I " + " and ".join(rng.sample(WORDS, rng.randint(1, 4))) + " about it."


def make_dirty_jsonl(path: Path, seed: int = 11) -> dict:
    """100 valid sessions (1-4 turns) with 5 malformed lines mixed in."""
    rng = random.Random(seed)
    sessions = []
    for i in range(N_SESSIONS):
        sessions.append(
            {
                "session_id": f"sess-{i:03d}",
                "assistant_id": f"assistant-{i % 3}",
                "language": rng.choice(["english", "en", "EN", "English"]),
                "context": "You are a helpful assistant.",
                "conversation": [
                    {
                        "qa_id": f"q{t}",
                        "query": f"How do you feel about item {t}?",
                        "assistant": _sentence(rng),
                        "ground_truth_assistant": _sentence(rng) if rng.random() < 0.7 else None,
                    }
                    for t in range(rng.randint(1, 4))
                ],
            }
        )
    missing_sid = {"assistant_id": "assistant-0", "conversation": [{"qa_id": "q0", "query": "hi", "assistant": "I am happy"}]}
    as_list = [{"session_id": "in-a-list", "assistant_id": "assistant-0", "conversation": [{"qa_id": "q0", "query": "hi", "assistant": "happy"}]}]
    bad_weight = {"session_id": "bad-weight", "assistant_id": "assistant-1", "conversation": [{"qa_id": "q0", "query": "hi", "assistant": "I fear", "weight": -1}]}
    bad_lines = [
        ("invalid JSON", '{"session_id": "broken", "assistant_id": "assistant-2" "conversation": []}'),
        ("session_id", json.dumps(missing_sid)),
        ("list", json.dumps(as_list)),
        ("weight", json.dumps(bad_weight)),
        ("invalid JSON", json.dumps({**sessions[0], "session_id": "truncated"})[:57]),
    ]
    lines = [json.dumps(s) for s in sessions]
    for k, (_, text) in enumerate(bad_lines):
        lines.insert(7 + 19 * k, text)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "sessions": sessions,
        "n_interactions": sum(len(s["conversation"]) for s in sessions),
        "element_ids": sorted(f"{s['session_id']}/{s['assistant_id']}/{t}" for s in sessions for t in range(len(s["conversation"]))),
        "bad": bad_lines,
    }


@pytest.fixture(scope="module")
def dirty(tmp_path_factory):
    d = tmp_path_factory.mktemp("dirty")
    info = make_dirty_jsonl(d / "conversations.jsonl")
    info["path"] = d / "conversations.jsonl"
    return info


@pytest.fixture(scope="module")
def audit_run(dirty, tmp_path_factory):
    from pipelines.audit import run

    out = tmp_path_factory.mktemp("audit") / "out"
    doc = run(["--input", str(dirty["path"]), "--output", str(out), "--quiet"])
    return doc, out


@pytest.mark.slow
def test_run_returns_and_counts_every_record(dirty, audit_run):
    doc, out = audit_run
    s = doc["summary"]
    assert s["rejected_at_read"] == 5
    assert sum(s["rejected_at_read_reasons"].values()) == 5
    assert s["interactions_read"] == dirty["n_interactions"]
    assert s["metrics"]["humanity"]["scored"] == dirty["n_interactions"]
    assert s["metrics"]["humanity"]["interactions_not_scored"] == 0 and s["metrics"]["humanity"]["dead_letters"] == 0
    sessions = read_sessions(str(out), "humanity")
    assert len(sessions) == N_SESSIONS
    expected = {(x["session_id"], x["assistant_id"]): len(x["conversation"]) for x in dirty["sessions"]}
    assert {(r["session_id"], r["assistant_id"]): r["n_interactions"] for r in sessions} == expected
    assert {r["language"] for r in sessions} == {"english"}
    overall = [r for r in doc["metrics"]["humanity"]["slices"] if r["slice"] == "overall"]
    assert overall and overall[0]["n_interactions"] == dirty["n_interactions"] and overall[0]["n_sessions"] == N_SESSIONS
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == doc


@pytest.mark.slow
def test_dead_letter_file_has_stage_reason_and_raw(dirty, audit_run):
    _, out = audit_run
    lines = list(iter_jsonl_lines(str(out), "dead_letter"))
    assert len(lines) == 5
    records = [json.loads(ln) for ln in lines]
    for r in records:
        assert r["stage"] == "read"
        assert isinstance(r["reason"], str) and r["reason"]
        assert isinstance(r["raw"], str) and r["raw"]
    # each malformed line is there once, with its original text (or the record it parses to)
    remaining = list(records)
    for fragment, text in dirty["bad"]:
        hits = [r for r in remaining if fragment in r["reason"] and (r["raw"].rstrip("\n") == text or _same_json(r["raw"], text))]
        assert len(hits) == 1, (fragment, text, remaining)
        remaining.remove(hits[0])


def _same_json(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return False


@pytest.mark.slow
def test_parquet_has_one_row_per_scored_interaction(dirty, audit_run):
    pq = pytest.importorskip("pyarrow.parquet")
    doc, out = audit_run
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == doc["summary"]["metrics"]["humanity"]["scored"] == dirty["n_interactions"]
    assert sorted(table.column("element_id").to_pylist()) == dirty["element_ids"]
    assert set(table.column("metric").to_pylist()) == {"humanity"}


def _cli(args, cwd, timeout=180):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "pipelines.audit", *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_cli_exit_code_and_summary(dirty, tmp_path):
    out = tmp_path / "cli_out"
    proc = _cli(["--input", str(dirty["path"]), "--output", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "5 rejected" in proc.stdout, proc.stdout
    assert f"{dirty['n_interactions']} interactions read" in proc.stdout
    assert f"humanity: interactions: {dirty['n_interactions']} scored, 0 not scored (of {dirty['n_interactions']} read)" in proc.stdout
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["summary"]["rejected_at_read"] == 5
    assert "Traceback" not in proc.stderr


def test_cli_unknown_metric_fails_fast_listing_available_metrics(dirty, tmp_path):
    out = tmp_path / "never"
    proc = _cli(["--input", str(dirty["path"]), "--output", str(out), "--metrics", "nosuchmetric"], tmp_path)
    assert proc.returncode == 2
    # named by its length, not shown: a text that is no metric may be a secret given in the wrong place (trial39b B8)
    assert "unknown metric a text of 12 characters" in proc.stderr and "nosuchmetric" not in proc.stderr
    assert "available" in proc.stderr and "humanity" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists(), "a configuration error must stop before the pipeline writes anything"


def test_input_matching_nothing_is_an_empty_run_with_exit_code_4(tmp_path, capsys):
    """A missing export (every --input pattern matches no file) is an empty run: exit code 4, one
    line, nothing written (it was a usage error, exit 2, so a nightly job could not tell a missing
    export from a bad configuration: issue 27's fresh-user trial). One pattern of several that
    matches nothing stays a usage error: the run would audit part of its input. Same parser path as
    the CLI (``main`` only adds logging set-up), without a second interpreter start."""
    from pipelines.audit import run

    out = tmp_path / "never"
    pattern = str(tmp_path / "no-such-dir" / "*.jsonl")
    with pytest.raises(SystemExit) as ei:
        run(["--input", pattern, "--output", str(out), "--quiet"])
    assert ei.value.code == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty run: no input record (no input file matches" in err[0] and pattern in err[0], err
    assert not out.exists()
    present = tmp_path / "day1.jsonl"
    present.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit) as ei:
        run(["--input", str(present), "--input", pattern, "--output", str(out), "--quiet"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "no input file matches" in err and pattern in err
    assert "usage:" not in err and err.strip().splitlines()[-1].endswith(" (every option: fair-forge-beam --help)")
    assert not out.exists()
    with pytest.raises(SystemExit) as ei:
        run(["--input", pattern, "--metrics", " , ", "--quiet"])
    assert ei.value.code == 2
    assert "--metrics" in capsys.readouterr().err


def test_allow_empty_publishes_a_run_whose_input_matches_no_file(tmp_path, capsys):
    """--allow-empty publishes a missing export's run like any empty run (results.json: nothing read)."""
    from pipelines.audit import run

    doc = run(["--input", str(tmp_path / "missing-*.jsonl"), "--output", str(tmp_path / "out"), "--no-report", "--quiet",
               "--allow-empty", "--metrics", "humanity", "--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner"])
    assert doc["summary"]["interactions_read"] == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["summary"]["interactions_read"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("name,text", [("empty.jsonl", ""), ("empty.json", ""), ("blank.json", " \n\t\n")])
def test_empty_input_says_nothing_was_read(tmp_path, capsys, name, text):
    """An empty JSONL file: the summary says no interaction was read (fresh-clone trial: it printed
    an empty table with no warning). Since issue 27 an empty run is exit code 4 with one line and
    nothing published; with --allow-empty it succeeds as before. An empty or blank ``.json`` file
    is the same: no record (trial33 T5: "every record was rejected at read … records after this point
    are missing", and one rejected record counted that never existed)."""
    from pipelines.audit import run

    (tmp_path / name).write_text(text, encoding="utf-8")
    argv = ["--input", str(tmp_path / name), "--output", str(tmp_path / "out"), "--no-report",
            "--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner"]
    with pytest.raises(SystemExit) as exc:
        run(argv)
    assert exc.value.code == 4 and "empty run: no input record" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    doc = run([*argv, "--allow-empty"])
    assert doc["summary"]["interactions_read"] == 0 and doc["summary"]["rejected_at_read"] == 0
    assert "warning: no interaction was read" in capsys.readouterr().out
