"""fix51a: every record a shipped retriever cannot use is a dead letter (plain reason, the record as
``raw``, its file and position as ``source``), never a silent skip; a compressed file cut short keeps
its complete records, as the audit's reader does."""
import gzip
import json

import pytest


def _pair(i: int) -> dict:
    return {"chosen": f"\n\nHuman: hi {i}\n\nAssistant: hello there friend {i}",
            "rejected": f"\n\nHuman: hi {i}\n\nAssistant: go {i}"}


def test_hh_rlhf_refused_records_are_dead_letters_with_plain_reasons_and_file_offsets(tmp_path):
    """trial50 B1: 5 records skipped, ``len(m.dead_letter) == 0``, two reasons Python error text."""
    from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
    from fair_forge_beam.metrics.humanity import Humanity

    bad = [b'{"chosen": 5, "rejected": "x"}', b"[1]", b"null",
           json.dumps({"chosen": "Assistant first\n\nHuman: x", "rejected": "\n\nHuman: x\n\nAssistant: y"}).encode(),
           b"\xff\xfe"]
    lines = [json.dumps(_pair(i)).encode() for i in range(3)] + bad
    path = tmp_path / "hh.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    offsets = [sum(len(x) + 1 for x in lines[:k]) for k in range(3, 8)]
    m = Humanity.run(HHRLHFPairs, path=str(path))
    dead = sorted(m.dead_letter, key=lambda d: int(d["source"].rsplit(":", 1)[1]))
    assert [d["source"] for d in dead] == [f"{path}:{o}" for o in offsets], dead
    reasons = [d["reason"] for d in dead]
    assert reasons[:3] == ["the 'chosen' transcript is a number, not text", "record is a list, not an object",
                           "record is null, not an object"], reasons
    assert "text before the first 'Human:' turn ('Assistant first')" in reasons[3], reasons
    assert reasons[4].startswith("line is not valid UTF-8"), reasons
    for r in reasons:
        assert "subscriptable" not in r and "indices" not in r and "Error" not in r, r
    assert [d["raw"].strip() for d in dead[:3]] == ['{"chosen": 5, "rejected": "x"}', "[1]", "null"]


def test_hh_rlhf_cut_gzip_keeps_the_records_before_the_cut_and_one_dead_letter(tmp_path):
    """trial50 B1: a cut ``.jsonl.gz`` made ``Humanity.run`` raise ``CompressedDataCut``, no record read."""
    from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
    from fair_forge_beam.io.read import ReadError

    rows = "".join(json.dumps(_pair(i)) + "\n" for i in range(2000)).encode()
    blob = gzip.compress(rows)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) // 2])
    got = HHRLHFPairs(path=str(path)).load_dataset()
    errors = [g for g in got if isinstance(g, ReadError)]
    sessions = [g for g in got if not isinstance(g, ReadError)]
    assert len(errors) == 1 and got[-1] is errors[0], errors
    n = len(sessions) // 2
    assert 0 < n < 2000 and {s["session_id"] for s in sessions} == {f"hh-{i:05d}" for i in range(n)}
    assert f"it is cut short: {n:,} lines read before the cut" in errors[0].reason, errors[0].reason
    assert errors[0].at == (str(path), sum(len(x) + 1 for x in rows.split(b"\n")[:n])), errors[0].at


# ------------------------------------------------------------------ B4: every JSON writer is strict

def test_tau_bench_converter_writes_strict_json_of_a_call_with_1e999(tmp_path, monkeypatch):
    """trial50 B4: ``"arguments": "{\\"a\\": 1e999}"`` was written ``"parameters": {"a": Infinity}``."""
    from fair_forge_beam.io.agentic_sources import main

    traj = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1e999}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"},
            {"role": "assistant", "content": "done"}]
    (tmp_path / "tau.json").write_text(json.dumps([{"task_id": 1, "trial": 0, "reward": 1.0,
                                                    "info": {"task": {"actions": []}}, "traj": traj}]))
    monkeypatch.chdir(tmp_path)
    assert main(["tau_bench", "tau.json", "conv.jsonl"]) == 0
    text = (tmp_path / "conv.jsonl").read_text()

    def refuse(name):
        raise ValueError(f"non-strict JSON: {name}")
    session = json.loads(text, parse_constant=refuse)
    call = session["conversation"][0]["agentic"]["tools_used"][0]
    assert call["parameters"] == {"__unparsed_arguments__": '{"a": 1e999}'}, call


def _json_writes_without_allow_nan(roots):
    """``file:line`` of each ``json.dump``/``json.dumps`` call whose statement writes somewhere (a
    ``write``, ``write_text``, ``write_text_output``, ``replace_files`` or ``put`` call) without
    ``allow_nan=False``."""
    import ast
    import pathlib

    writers = {"write", "write_text", "write_text_output", "replace_files", "put", "writelines"}
    found = []
    for root in roots:
        for path in sorted(pathlib.Path(root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for stmt in ast.walk(tree):
                if not isinstance(stmt, (ast.Expr, ast.Assign, ast.Return, ast.AugAssign)):
                    continue
                calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
                named = {getattr(c.func, "attr", getattr(c.func, "id", None)) for c in calls}
                if not named & writers:
                    continue
                for c in calls:
                    f = c.func
                    if (isinstance(f, ast.Attribute) and f.attr in ("dump", "dumps") and isinstance(f.value, ast.Name)
                            and f.value.id == "json" and not any(
                                k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                                for k in c.keywords)):
                        found.append(f"{path}:{c.lineno}")
    return found


def test_every_json_the_package_writes_refuses_nan_and_infinity():
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = _json_writes_without_allow_nan([os.path.join(here, "fair_forge_beam"), os.path.join(here, "pipelines")])
    assert found == [], found


# ------------------------------------------------------------------ B5: one source rule for every loader

def test_bfcl_dead_letters_name_their_file_and_byte_offset_as_the_audit_reader_does(tmp_path):
    """trial50 B5: a BFCL dead letter's source was ``retriever:…BfclRetriever:<item number>`` while the
    audit's reader names ``file:byte offset``."""
    from fair_forge_beam.io.agentic_sources import BfclRetriever
    from fair_forge_beam.io.read import retriever_item

    good = json.dumps({"id": "t0", "question": [[{"role": "user", "content": "do"}]]})
    bad = json.dumps({"id": "t5", "question": "not a list"})
    lines = [good, "{not json", bad]
    (tmp_path / "q.json").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    answers = [json.dumps({"id": "t0", "ground_truth": [["f(x=1)"]]}), json.dumps({"ground_truth": [["f()"]]})]
    (tmp_path / "possible_answer_q.json").write_text("".join(x + "\n" for x in answers), encoding="utf-8")
    items = BfclRetriever(path=str(tmp_path / "q.json")).load_dataset()
    placed = [retriever_item("retriever:x", i, item) for i, item in enumerate(items)]
    sources = sorted((p[0], p[1]) for p in placed if p[0] != "retriever:x")
    q, a = str(tmp_path / "q.json"), str(tmp_path / "possible_answer_q.json")
    assert sources == [(a, len(answers[0]) + 1), (q, len(good) + 1), (q, len(good) + len(lines[1]) + 2)], placed
