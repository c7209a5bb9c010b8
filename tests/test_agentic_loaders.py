"""τ-bench and BFCL loaders, and the main job on the τ-bench airline trajectories (reward as the
label): pass^k / pass@k for k = 1..4 equal the per-task values computed from the raw file."""
from __future__ import annotations

import gzip
import json
from math import comb

import pytest
from fair_forge_beam.reports.load import read_sessions

from fair_forge_beam.components.tool_correctness import tool_correctness
from fair_forge_beam.io.agentic_sources import bfcl_sessions, main as convert, parse_call, tau_bench_sessions
from fair_forge_beam.schemas.common import Dataset
from helpers import FNAPI


@pytest.fixture
def tau_path(shared_dir):
    return str(shared_dir / "data" / "tau_bench" / "gpt-4o-airline.json.gz")


def test_tau_bench_mapping(tau_path):
    sessions = tau_bench_sessions(tau_path)
    raw = json.load(gzip.open(tau_path, "rt"))
    assert len(sessions) == 200 and all(Dataset.model_validate(s) for s in sessions)
    turns = [t for s in sessions for t in s["conversation"]]
    assert len(turns) == 1490 and sum(len(t["agentic"]["tools_used"]) for t in turns) == 1164
    s0, r0 = sessions[0], raw[0]
    assert s0["session_id"] == "tau_bench-task0-trial0" and s0["assistant_id"] == "gpt-4o"
    assert s0["context"].startswith("# Airline Agent Policy")
    assert {t["agentic"]["reward"] for t in s0["conversation"]} == {r0["reward"]}
    last = s0["conversation"][-1]["ground_truth_agentic"]
    assert [e["tool_name"] for e in last["expected_tools"]] == [a["name"] for a in r0["info"]["task"]["actions"]]
    assert all(t["ground_truth_agentic"] == {} for t in s0["conversation"][:-1])
    first_call = next(c for t in s0["conversation"] for c in t["agentic"]["tools_used"])
    assert first_call["tool_name"] == "get_user_details" and first_call["parameters"] == {"user_id": "mia_li_3668"}
    assert first_call["result"].startswith('{"name"')


def test_bfcl_mapping_and_perfect_fixture(shared_dir):
    path = str(shared_dir / "data" / "bfcl" / "BFCL_v4_multi_turn_base.json")
    sessions = bfcl_sessions(path)
    turns = [t for s in sessions for t in s["conversation"]]
    assert len(sessions) == 200 and len(turns) == 734 and all(Dataset.model_validate(s) for s in sessions)
    calls = [c for t in turns for c in t["ground_truth_agentic"]["expected_tools"]]
    assert len(calls) == 1142 and not [c for c in calls if c["tool_name"] == "<unparsed>"]
    # positional arguments are named from multi_turn_func_doc: sort('final_report.pdf')
    assert sessions[0]["conversation"][2]["ground_truth_agentic"]["expected_tools"] == [
        {"tool_name": "sort", "parameters": {"file_name": "final_report.pdf"}, "step": 1}
    ]
    scores = [tool_correctness(t["agentic"], t["ground_truth_agentic"]) for t in turns]
    assert all(s["overall_correctness"] == 1.0 for s in scores)  # ground truth as the answer
    none = bfcl_sessions(path, tools_used="none")[0]["conversation"][0]
    assert tool_correctness(none["agentic"], none["ground_truth_agentic"])["overall_correctness"] == 0.0


def test_parse_call_literals_only():
    assert parse_call("f(1, b=[2, 'x'])", {"f": ["a", "b"]}) == {"tool_name": "f", "parameters": {"a": 1, "b": [2, "x"]}}
    assert parse_call("g(x)")["tool_name"] == "<unparsed>"  # a name, not a literal: never evaluated
    assert parse_call("not a call")["tool_name"] == "<unparsed>"


def test_converter_writes_our_jsonl(tau_path, tmp_path):
    out = tmp_path / "tau.jsonl"
    assert convert(["tau_bench", tau_path, str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and Dataset.model_validate_json(lines[0]).session_id == "tau_bench-task0-trial0"


@pytest.mark.slow
def test_main_job_on_tau_bench_rewards(tau_path, tmp_path):
    from pipelines import audit

    raw = json.load(gzip.open(tau_path, "rt"))
    per_task: dict = {}
    for r in raw:
        per_task.setdefault(r["task_id"], []).append(r["reward"] == 1.0)
    doc = audit.run([
        "--quiet", "--input", tau_path, "--input-format", "tau_bench", "--metrics", "agentic", "--agentic-k", "4",
        "--output", str(tmp_path / "out"), f"--runner={FNAPI}",
    ])
    m = doc["metrics"]["agentic"]
    (ov,) = [s for s in m["slices"] if s["slice"] == "overall"]
    assert (ov["n_sessions"], ov["n_tasks"], ov["n_interactions"]) == (200, 50, 1490)
    ms = doc["summary"]["metrics"]["agentic"]
    assert (ms["scored"], ms["interactions_scored"], ms["interactions_not_scored"], ms["dead_letters"], ms["dead_letter_reasons"]) == (
        1490, 1490, 0, 0, {})
    for point in ov["curve"]:
        k = point["k"]
        pw = sum(comb(sum(v), k) / comb(len(v), k) for v in per_task.values()) / len(per_task)
        at = sum(1 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in per_task.values()) / len(per_task)
        assert point["pass_pow_k"]["mean"] == pytest.approx(pw, abs=1e-12)
        assert point["pass_at_k"]["mean"] == pytest.approx(at, abs=1e-12)
    assert ov["success_rate"]["mean"] == pytest.approx(84 / 200)
    assert m["headline_columns"] == ["success_rate", "pass_at_k", "pass_pow_k"]
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "results.parquet")
    assert table.num_rows == 1490 and table.column("agentic_is_correct").to_pylist().count(True) == sum(
        len(s["correct_indices"]) for s in read_sessions(str(tmp_path / "out"), "agentic")
    )


def test_a_trace_files_lines_are_bounded_and_named_as_the_audit_reader_does(tmp_path):
    """The agentic loaders' JSON Lines reader parses with the same bounds and reasons as the audit's:
    a line of more JSON values than its size allows (--max-record-bytes / 16) is refused before it
    is parsed, and a NUL where the parser stopped is named (trial 28c)."""
    import json

    from fair_forge_beam.io.agentic_sources import _file_records
    from fair_forge_beam.io.read import ReadError

    good = json.dumps({"a": 1})
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good, json.dumps([[]] * 400), "\x00" + good, good]) + "\n")
    got = _file_records(str(path), limit=4096)
    assert [r for r in got if not isinstance(r, ReadError)] == [{"a": 1}, {"a": 1}]
    reasons = [r.reason for r in got if isinstance(r, ReadError)]
    assert reasons[0].startswith("the record holds 801 JSON values, over the limit of 256"), reasons
    assert reasons[1].startswith("invalid JSON: a U+0000 (NUL) character where the parser stopped"), reasons
    line2 = len(good) + 1  # each refused line's source: the file and its byte offset, as the audit reader's
    assert [r.at for r in got if isinstance(r, ReadError)] == [(str(path), line2), (str(path), line2 + len(json.dumps([[]] * 400)) + 1)]


@pytest.mark.parametrize("case", ["missing input", "bfcl without answers", "output is a folder"])
def test_the_converter_says_a_bad_argument_in_one_line(tmp_path, capsys, case):
    """Trial 28f B10: a missing input, a BFCL file without its answers or an output that cannot be
    written ended in a 15-line traceback (exit 1); now one line naming the problem, exit 2, and
    no output file."""
    (tmp_path / "t.json").write_text("[]", encoding="utf-8")
    (tmp_path / "b.json").write_text('{"id": "x", "question": []}', encoding="utf-8")
    (tmp_path / "dir").mkdir()
    argv = {"missing input": ["tau_bench", str(tmp_path / "nope.json"), str(tmp_path / "out.jsonl")],
            "bfcl without answers": ["bfcl", str(tmp_path / "b.json"), str(tmp_path / "out.jsonl")],
            "output is a folder": ["tau_bench", str(tmp_path / "t.json"), str(tmp_path / "dir")]}[case]
    with pytest.raises(SystemExit) as exc:
        convert(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("skipped (unreadable)")]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.slow
def test_a_k_above_every_tasks_trials_says_why_pass_at_k_is_n_a(tau_path, tmp_path, capsys):
    """trial48 B9: ``--agentic-k 5`` where each task has 4 trials showed ``pass_at_k n/a`` (``n: 0``) with no
    word of why; the console says it under the table, from the estimate's declared reason."""
    from pipelines import audit

    doc = audit.run(["--input", tau_path, "--input-format", "tau_bench", "--metrics", "agentic", "--agentic-k", "5",
                     "--output", str(tmp_path / "out"), f"--runner={FNAPI}", "--no-report"])
    (ov,) = [s for s in doc["metrics"]["agentic"]["slices"] if s["slice"] == "overall"]
    assert ov["pass_at_k"]["mean"] is None and ov["pass_at_k"]["n"] == 0
    lines = [ln.strip() for ln in capsys.readouterr().out.splitlines()]
    why = [ln for ln in lines if ln.startswith("n/a (")]
    assert why == ["n/a (pass_at_k, pass_pow_k): no task of the slice has --agentic-k conversations (trials) with its "
                   "task id (agentic.task_id, --agentic-task-field): pass@k and pass^k average the tasks with at least "
                   "k trials; the curve in results.json has the smaller k"], lines
