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
    assert len(bad) == 2 and {b.at[0] for b in bad} == {str(tmp_path / "possible_answer_q.json"), str(path)}, bad
    assert {b.at[1] for b in bad} == {len(Q[0]) + len(Q[1]) + 2, len(A[0]) + 1}, bad
    # t1 lost its ground truth: no expected tools (tool correctness not applicable), never a perfect empty match
    t1 = ok[1]["conversation"][0]
    assert "expected_tools" not in (t1["ground_truth_agentic"] or {})


def test_bfcl_malformed_records(tmp_path):
    questions = [Q[0], '"a string"', json.dumps({"id": [1], "question": [[{"role": "user", "content": "x"}]]}),
                 json.dumps({"id": "t5", "question": "not a list"})]
    answers = [A[0], json.dumps({"id": "t5", "ground_truth": "f(1)"})]
    items = bfcl_sessions(str(_bfcl(tmp_path, "m", questions, answers)))
    ok, bad = _split(items)
    assert [s["session_id"] for s in ok] == ["t0"]
    assert len(bad) == 3 and all(b.raw for b in bad)  # the not-an-object, id-is-a-list and question-not-a-list records
    # not an object: a dead letter at its file and byte offset, the audit reader's reason (trial50 B5: was passed
    # through and named retriever:…BfclRetriever:<item number> by the reader)
    text = [b for b in bad if b.raw == '"a string"']
    assert [(t.reason, t.at) for t in text] == [("record is text, not an object",
                                                 (str(tmp_path / "m.json"), len(questions[0]) + 1))], bad


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


def _bfcl_repro(tmp_path: Path) -> tuple:
    """trial49b B4's files: m1 has 3 turns and a ground truth of 1, m2's ground truth is given twice
    (the second, ``[[]]``, an empty expectation), m3 twice alike, m4 is sound."""
    q = [json.dumps({"id": i, "question": [[{"role": "user", "content": f"{i} {t}"}] for t in range(n)]})
         for i, n in (("m1", 3), ("m2", 1), ("m3", 1), ("m4", 1))]
    a = [json.dumps({"id": "m1", "ground_truth": [["cd(folder='a')"]]}),
         json.dumps({"id": "m2", "ground_truth": [["cd(folder='a')"]]}), json.dumps({"id": "m2", "ground_truth": [[]]}),
         json.dumps({"id": "m3", "ground_truth": [["cd(folder='c')"]]}), json.dumps({"id": "m3", "ground_truth": [["cd(folder='c')"]]}),
         json.dumps({"id": "m4", "ground_truth": [["cd(folder='d')"]]})]
    res = tmp_path / "res.json"
    res.write_text("".join(json.dumps({"id": i, "result": r}) + "\n" for i, r in (
        ("m1", [["cd(folder='a')"]]), ("m2", [[]]), ("m3", [["cd(folder='c')"]]), ("m4", [["cd(folder='d')"]]))), encoding="utf-8")
    return _bfcl(tmp_path, "qs", q, a), res, q, a


def test_bfcl_never_gives_a_turn_an_empty_expectation_for_a_missing_one_nor_lets_a_repeated_id_win(tmp_path):
    """trial49b B4: turns past the end of the ground truth got ``expected_tools: []`` (an empty trace scored
    1.0) and of two answer records of one id the last silently won. Now a question whose ground truth has
    another number of turns, or two different ground truths, is a dead letter with the question record as
    ``raw``; each repeated answer record is one too, with its own record; an identical repeat is read once."""
    path, res, q, a = _bfcl_repro(tmp_path)
    ok, bad = _split(bfcl_sessions(str(path), tools_used=str(res)))
    assert [s["session_id"] for s in ok] == ["m3", "m4"]
    by_raw = {b.raw: b.reason for b in bad}
    assert len(bad) == 4 and set(by_raw) == {q[0], q[1], a[2], a[4]}, by_raw
    assert "ground_truth of 'm1' has 1 turn(s) for its 3 question turn(s)" in by_raw[q[0]]
    at = [sum(len(x) + 1 for x in a[:k]) for k in range(len(a))]  # each answer line's byte offset (its source)
    assert f"gives it 2 different ground truths (the records at {at[1]}, {at[2]})" in by_raw[q[1]]
    assert f"answer record repeats id 'm2' of the record at {at[1]} with another ground_truth" in by_raw[a[2]]
    assert f"answer record repeats id 'm3' of the record at {at[3]} with the same ground_truth: read once" in by_raw[a[4]]
    answers = str(tmp_path / "possible_answer_qs.json")
    assert {b.raw: b.at for b in bad}[a[2]] == (answers, at[2]) and {b.raw: b.at for b in bad}[a[4]] == (answers, at[4])
    assert all(t["ground_truth_agentic"]["expected_tools"] for s in ok for t in s["conversation"])


def test_bfcl_result_file_that_misses_a_question_or_its_turns_is_a_dead_letter_not_an_empty_trace(tmp_path):
    q = [json.dumps({"id": i, "question": [[{"role": "user", "content": "x"}], [{"role": "user", "content": "y"}]]})
         for i in ("r1", "r2", "r3")]
    a = [json.dumps({"id": i, "ground_truth": [[], []]}) for i in ("r1", "r2", "r3")]  # BFCL's "call nothing"
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"id": "r1", "result": [[], []]}) + "\n" + json.dumps({"id": "r2", "result": [[]]}) + "\n",
                   encoding="utf-8")
    ok, bad = _split(bfcl_sessions(str(_bfcl(tmp_path, "r", q, a)), tools_used=str(res)))
    assert [s["session_id"] for s in ok] == ["r1"]
    reasons = [b.reason for b in sorted(bad, key=lambda b: b.at)]  # in file order: r2, then r3
    assert "result of 'r2' has 1 turn(s) for its 2 question turn(s)" in reasons[0], reasons
    assert f"no result for it in {res} (a missing result is not an empty trace)" in reasons[1], reasons


def test_bfcl_repro_audited_for_tool_correctness_scores_only_what_has_its_ground_truth(tmp_path):
    path, _, _, _ = _bfcl_repro(tmp_path)
    ans = tmp_path / "possible_answer_qs.json"
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input-format", "bfcl", "--input", str(path), "--metrics", "agentic",
                     "--agentic-correctness", "tools", "--agentic-k", "1", "--output", str(tmp_path / "out"), "--no-report"])
    s = doc["summary"]
    # the ground truth is the trace (tools_used ground_truth): m3, m4 read, m1, m2 and the two answer repeats rejected
    assert s["interactions_read"] == 2 and s["rejected_at_read"] == 4, s
    dead = [d for d in iter_dead_letters(str(tmp_path / "out")) if d["stage"] == "read"]
    assert len(dead) == 4 and any(str(ans) in d["reason"] for d in dead)


def test_tau_bench_never_leaves_out_part_of_a_record_it_maps(tmp_path):
    """trial49b B5: non-object actions ("cancel_everything", null, 42) were dropped from expected_tools
    (the task then scored like a clean one), non-object or unknown-role messages and assistant messages
    before the first user message were ignored, and ``{"foo": 1}`` became the dead letter "session has an
    empty conversation" whose raw was the mapped session. Each is now a dead letter naming the part,
    with the τ-bench record as ``raw``; a record without actions gets no expectation (not an empty one)."""
    def traj(task_id, **change):
        rec = _traj(task_id)
        for k, v in change.items():
            if k == "actions":
                rec["info"]["task"]["actions"] = v
            elif k == "message":
                rec["traj"].insert(v[0], v[1])
            else:
                rec[k] = v
        return rec

    records = [
        traj(1, actions=[{"name": "get_user", "kwargs": {"id": "u1"}}, "cancel_everything", None, 42]),
        traj(2, message=(4, "a string")),
        traj(3, message=(4, {"role": "function", "content": "x"})),
        traj(4, message=(1, {"role": "assistant", "content": "hello first"})),
        {"foo": 1},
        traj(6, message=(4, {"role": "tool", "tool_call_id": "nobody", "content": "{}"})),
        traj(7, info={}),
        traj(7),
        traj(8),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    ok, bad = _split(tau_bench_sessions(str(path)))
    assert [s["session_id"] for s in ok] == ["tau_bench-task7-trial0", "tau_bench-task8-trial0"]
    assert ok[0]["conversation"][-1]["ground_truth_agentic"] == {}  # no actions given: no expectation
    assert [len(t["ground_truth_agentic"]["expected_tools"]) for t in ok[1]["conversation"][-1:]] == [1]
    assert [b.raw for b in bad] == [json.dumps(r, ensure_ascii=False) for r in records[:6] + records[7:8]]
    assert [b.at for b in bad] == [(str(path), i) for i in (0, 1, 2, 3, 4, 5, 7)], bad  # each element's index
    why = [b.reason.split("cannot be mapped to a session ", 1)[1] for b in bad]
    assert why == [
        "(info.task.actions[1] is text, not an action object ({name, kwargs}))",
        "(traj[4] is text, not a message object)",
        "(traj[4] has role 'function', not one of system, user, assistant, tool)",
        "(traj[1] is an assistant message before the first user message: it belongs to no turn)",
        "(task_id is missing: the session id is built from task_id and trial (an integer or non-blank text))",
        "(traj[4] is the result of tool call 'nobody', which no earlier call awaits)",
        "(task_id '7' and trial '0' repeat those of the record at 6: a second trajectory of the same task and trial)",
    ], why


def test_tau_bench_actions_that_cannot_be_read_are_never_scored_as_a_clean_task(tmp_path):
    """trial49b B5 through the audit: ``--input-format tau_bench --agentic-correctness tools`` scored the
    task whose actions held "cancel_everything", null and 42 1.0; now it is a dead letter at read."""
    good, bad = _traj(1), _traj(2)
    bad["info"]["task"]["actions"] += ["cancel_everything", None, 42]
    path = tmp_path / "t.json"
    path.write_text(json.dumps([good, bad]), encoding="utf-8")
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input-format", "tau_bench", "--input", str(path), "--metrics",
                     "agentic", "--agentic-correctness", "tools", "--agentic-k", "1", "--output", str(tmp_path / "out"),
                     "--no-report"])
    s = doc["summary"]
    assert s["interactions_read"] == 1 and s["rejected_at_read"] == 1, s
    (dead,) = [d for d in iter_dead_letters(str(tmp_path / "out")) if d["stage"] == "read"]
    assert "info.task.actions[1] is text" in dead["reason"] and json.loads(dead["raw"]) == bad
