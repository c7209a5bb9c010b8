"""Hostile input for the τ-bench and BFCL loaders: truncated, garbled, empty and malformed files
never crash a run and are never dropped silently — each unreadable file, line or record becomes
a dead letter (stage ``read``) that names it, and the readable rest is still loaded."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from fair_forge_beam.reports.load import iter_dead_letters

from fair_forge_beam.io.agentic_sources import bfcl_sessions, tau_bench_sessions
from fair_forge_beam.io.read import ReadError
from pipelines import audit
from helpers import FNAPI


def _traj(task_id, reward=1.0):
    return {
        "task_id": task_id, "trial": 0, "reward": reward,
        "info": {"task": {"actions": [{"name": "get_user", "kwargs": {"id": "u1"}}]}},
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "function": {"name": "get_user", "arguments": "{\"id\": \"u1\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
            {"role": "assistant", "content": "done"},
        ],
    }


def _split(items, others=0):
    """Sessions and read errors; ``others`` records are passed through as they are (not objects:
    the reader dead-letters them)."""
    ok = [s for s in items if isinstance(s, dict)]
    bad = [s for s in items if isinstance(s, ReadError)]
    assert len(ok) + len(bad) + others == len(items), items
    return ok, bad


@pytest.mark.parametrize("corrupt,kept", [("truncated", ["tau_bench-task1-trial0"]), ("truncated_gz", []),
                                          ("not_utf8", ["tau_bench-task2-trial0"]), ("empty", [])])
def test_tau_bench_unreadable_file_or_part_is_one_read_error(tmp_path, corrupt, kept):
    """A file that cannot be read, or the part of it that cannot, is one ``ReadError`` naming the file;
    the complete records before a break (and a record after a bad one) are read, as the main
    reader reads a ``.json`` file (contract change: files are read record by record, bounded by
    --max-record-bytes; a truncated or partly undecodable file lost every record)."""
    text = json.dumps([_traj(1), _traj(2)]).encode()
    data = {
        "truncated": text[: len(text) // 2],
        "truncated_gz": gzip.compress(text)[:40],
        "not_utf8": text[:30] + b"\xff\xfe" + text[30:],
        "empty": b"",
    }[corrupt]
    path = tmp_path / ("t.json.gz" if corrupt == "truncated_gz" else "t.json")
    path.write_bytes(data)
    ok, bad = _split(tau_bench_sessions(str(path)))
    assert [s["session_id"] for s in ok] == kept and len(bad) == 1
    assert str(path) in bad[0].reason


def test_tau_bench_malformed_records_are_read_errors_the_rest_loads(tmp_path):
    records = [
        _traj(1),
        {"task_id": 2, "traj": "not a list", "info": "x"},
        {"task_id": 3, "traj": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": "x"}]},
        {"task_id": 4, "traj": [{"role": "user", "content": "hi"}], "info": {"task": {"actions": "not a list"}}},
        {"task_id": 5, "traj": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "tool_calls": [5, {"function": "str"}]}]},
        _traj(6),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    ok, bad = _split(tau_bench_sessions(str(path)))
    assert [s["session_id"] for s in ok] == ["tau_bench-task1-trial0", "tau_bench-task6-trial0"]
    assert len(bad) == 4
    assert all("τ-bench record" in b.reason and b.raw for b in bad)


def _bfcl(tmp_path: Path, name: str, questions: list[str], answers: list[str]) -> Path:
    (tmp_path / f"{name}.json").write_text("\n".join(questions) + "\n", encoding="utf-8")
    (tmp_path / f"possible_answer_{name}.json").write_text("\n".join(answers) + "\n", encoding="utf-8")
    return tmp_path / f"{name}.json"


Q = [json.dumps({"id": f"t{i}", "question": [[{"role": "user", "content": f"do {i}"}]]}) for i in range(3)]
A = [json.dumps({"id": f"t{i}", "ground_truth": [[f"f(x={i})"]]}) for i in range(3)]


def test_bfcl_truncated_question_line_and_answer_line(tmp_path):
    path = _bfcl(tmp_path, "q", Q[:2] + [Q[2][:25]], A[:1] + [A[1][:20]] + A[2:])
    ok, bad = _split(bfcl_sessions(str(path)))
    assert [s["session_id"] for s in ok] == ["t0", "t1"]
    reasons = sorted(b.reason for b in bad)
    assert len(bad) == 2 and any("possible_answer_q.json" in r for r in reasons) and any("/q.json" in r for r in reasons)
    # t1 lost its ground truth: no expected tools (tool correctness not applicable), never a perfect empty match
    t1 = ok[1]["conversation"][0]
    assert "expected_tools" not in (t1["ground_truth_agentic"] or {})


def test_bfcl_malformed_records(tmp_path):
    questions = [Q[0], '"a string"', json.dumps({"id": [1], "question": [[{"role": "user", "content": "x"}]]}),
                 json.dumps({"id": "t5", "question": "not a list"})]
    answers = [A[0], json.dumps({"id": "t5", "ground_truth": "f(1)"})]
    items = bfcl_sessions(str(_bfcl(tmp_path, "m", questions, answers)))
    ok, bad = _split(items, others=1)
    assert "a string" in items  # not an object: passed through, the reader dead-letters it
    assert [s["session_id"] for s in ok] == ["t0"]
    assert len(bad) == 2 and all(b.raw for b in bad)  # the id-is-a-list and question-not-a-list records


def test_bfcl_missing_answer_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "noans.json").write_text(Q[0] + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        audit.run(["--quiet", "--input-format", "bfcl", "--input", str(tmp_path / "noans.json"), "--metrics", "agentic",
                   "--output", str(tmp_path / "out")])
    assert e.value.code == 2
    assert "no BFCL answer file" in capsys.readouterr().err


def test_main_job_counts_every_unreadable_tau_bench_file(tmp_path):
    good = tmp_path / "a-good.json"
    good.write_text(json.dumps([_traj(1), {"task_id": 2, "traj": "x", "info": "x"}]), encoding="utf-8")
    (tmp_path / "b-trunc.json").write_text(json.dumps([_traj(3)])[:50], encoding="utf-8")
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input-format", "tau_bench", "--input", str(tmp_path / "*.json"),
                     "--metrics", "agentic", "--output", str(tmp_path / "out")])
    s = doc["summary"]
    assert s["interactions_read"] == 1 and s["rejected_at_read"] == 2
    dead = list(iter_dead_letters(str(tmp_path / "out")))
    assert sorted(d["stage"] for d in dead) == ["read", "read"]
    assert any("b-trunc.json" in d["reason"] for d in dead)


@pytest.mark.parametrize("layout", ["json", "jsonl", "jsonl.gz", "utf-16.jsonl"])
def test_an_oversized_agentic_record_is_one_read_error_and_the_rest_loads(tmp_path, layout):
    """τ-bench and BFCL files were read whole: one huge record held the whole file in memory."""
    big = _traj(2)
    big["traj"][0]["content"] = "x" * 50_000
    records = [_traj(1), big, _traj(3)]
    if layout == "json":
        data = json.dumps(records).encode()
    else:
        data = "".join(json.dumps(r) + "\n" for r in records).encode("utf-16" if layout.startswith("utf-16") else "utf-8")
    path = tmp_path / f"t.{layout.replace('utf-16.', '')}"
    path.write_bytes(gzip.compress(data) if layout.endswith(".gz") else data)
    ok, bad = _split(tau_bench_sessions(str(path), max_record_bytes=20_000))
    assert [s["session_id"] for s in ok] == ["tau_bench-task1-trial0", "tau_bench-task3-trial0"]
    assert len(bad) == 1 and "over the limit of 20,000 bytes" in bad[0].reason and len(bad[0].raw) <= 1024
