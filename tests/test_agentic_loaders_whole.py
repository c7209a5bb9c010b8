"""The τ-bench and BFCL loaders map a record whole or dead-letter it (trial49c B3, B4; fault class
"silent fill-in"): every field a loader maps is checked before it is mapped — text where text is
expected, the role set, a non-empty turn list —, so a record with any such fault is one dead letter
at read whose ``raw`` is the benchmark's record as read and whose reason names the field's path and
the fault. No value is made text (``5`` → ``"5"``, ``null`` → ``""``), no message of another role is
left out, no empty turn becomes an empty query, and no reader or later stage finds the fault in a
mapped session (the old dead letters' raw was the mapped session, the session kept in part)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fair_forge_beam.reports.load import iter_dead_letters

from fair_forge_beam.io.agentic_sources import UNPARSED, bfcl_sessions, tau_bench_sessions
from fair_forge_beam.io.read import ReadError
from fair_forge_beam.schemas.common import Dataset
from pipelines import audit
from helpers import FNAPI

# ------------------------------------------------------------------ BFCL

QUESTION = {"id": "base", "involved_classes": ["GorillaFileSystem"], "question": [
    [{"role": "user", "content": "Move the report to temp."}],
    [{"role": "user", "content": "Search it for 'budget'."}],
]}
ANSWER = {"id": "base", "ground_truth": [["mv(source='r.pdf', destination='temp')"], ["grep(file_name='r.pdf', pattern='budget')"]]}


def _set(path, value):
    """An edit of a record: the value at ``path`` (keys and indices) set, or removed when ``value`` is ``...``."""
    def edit(rec):
        node = rec
        for k in path[:-1]:
            node = node[k]
        if value is ...:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return edit


# (edit of the question record, the reason's words); each was mapped (filled in, left out or made text) before
BFCL_FAULTS = {
    "content 5": (_set(("question", 1, 0, "content"), 5), "question[1][0].content is a number (5), not text"),
    "content null": (_set(("question", 1, 0, "content"), None), "question[1][0].content is null, not text"),
    "content missing": (_set(("question", 1, 0, "content"), ...), "question[1][0].content is missing, not text"),
    "empty turn": (_set(("question", 1), []), "question[1] is an empty list, not a list of the turn's messages"),
    "turn not a list": (_set(("question", 1), {"role": "user", "content": "x"}), "question[1] is an object, not a list"),
    "message not an object": (_set(("question", 1, 0), "hi"), "question[1][0] is text, not a message object"),
    "role wizard": (_set(("question", 1, 0, "role"), "wizard"), "question[1][0].role is 'wizard', not 'user'"),
    "role missing": (_set(("question", 1, 0, "role"), ...), "question[1][0].role is missing, not 'user'"),
    "no question": (_set(("question",), ...), "question is missing, not a list of turns"),
    "empty question": (_set(("question",), []), "question is an empty list, not a list of turns"),
    "classes text": (_set(("involved_classes",), "GorillaFileSystem"), "involved_classes is text, not a list"),
    "class a number": (_set(("involved_classes", 0), 3), "involved_classes[0] is a number (3), not an API class name"),
    "blank id": (_set(("id",), " "), "id is blank text, not an integer or non-blank text"),
}


def _bfcl_files(tmp_path: Path, questions: list, answers: list, name: str = "q") -> Path:
    (tmp_path / f"{name}.json").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    (tmp_path / f"possible_answer_{name}.json").write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return tmp_path / f"{name}.json"


@pytest.mark.parametrize("fault", sorted(BFCL_FAULTS))
def test_a_bfcl_question_with_a_field_it_cannot_map_is_one_dead_letter_with_its_record(tmp_path, fault):
    edit, words = BFCL_FAULTS[fault]
    bad = copy.deepcopy(QUESTION)
    bad["id"] = "bad"
    edit(bad)
    answers = [ANSWER, dict(ANSWER, id=bad.get("id"))]
    items = bfcl_sessions(str(_bfcl_files(tmp_path, [QUESTION, bad], answers)))
    assert [s["session_id"] for s in items if isinstance(s, dict)] == ["base"], items
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert dead.raw == json.dumps(bad), dead.raw  # the benchmark's record, never a mapped session
    assert dead.reason.startswith("BFCL record cannot be mapped to a session") and words in dead.reason, dead.reason
    path = _bfcl_files(tmp_path, [QUESTION, bad], answers)
    assert dead.at == (str(path), len(json.dumps(QUESTION)) + 1), dead.at  # the file and the line's byte offset


@pytest.mark.parametrize("field", ["ground_truth", "result"])
def test_a_null_turn_of_a_ground_truth_or_result_is_never_an_empty_one(tmp_path, field):
    """``[["f()"], null]`` made the second turn expect (or have made) no call: an empty trace scored 1.0."""
    odd = dict(ANSWER, id="odd", ground_truth=[ANSWER["ground_truth"][0], None]) if field == "ground_truth" else dict(ANSWER, id="odd")
    res = tmp_path / "res.json"
    res.write_text(json.dumps({"id": "base", "result": ANSWER["ground_truth"]}) + "\n"
                   + json.dumps({"id": "odd", "result": [ANSWER["ground_truth"][0], None] if field == "result"
                                 else ANSWER["ground_truth"]}) + "\n", encoding="utf-8")
    path = _bfcl_files(tmp_path, [QUESTION, dict(QUESTION, id="odd")], [ANSWER, odd])
    items = bfcl_sessions(str(path), tools_used=str(res))
    assert [s["session_id"] for s in items if isinstance(s, dict)] == ["base"], items
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert f"{field}[1] of 'odd' is null, not a list of calls" in dead.reason, dead.reason
    assert json.loads(dead.raw) == dict(QUESTION, id="odd")


def test_a_bfcl_call_object_without_an_argument_object_is_unparsed_not_given_a_value_argument(tmp_path):
    answers = [dict(ANSWER, ground_truth=[[{"mv": 5}], [{"grep": {"file_name": "r.pdf"}}]])]
    (s,) = bfcl_sessions(str(_bfcl_files(tmp_path, [QUESTION], answers)))
    first, second = (t["ground_truth_agentic"]["expected_tools"] for t in s["conversation"])
    assert first == [{"tool_name": UNPARSED, "parameters": {"text": '{"mv": 5}'}, "step": 1}]
    assert second == [{"tool_name": "grep", "parameters": {"file_name": "r.pdf"}, "step": 1}]


def test_bfcl_audit_reads_only_whole_questions(tmp_path):
    """trial49c B3 through the audit: the content-5, empty-turn and wizard copies were read (32 interactions,
    rejected_at_read 1); each is now one dead letter at read with its question record."""
    copies = []
    for n, fault in enumerate(("content 5", "empty turn", "role wizard")):
        q = copy.deepcopy(QUESTION)
        q["id"] = f"copy{n}"
        BFCL_FAULTS[fault][0](q)
        copies.append(q)
    answers = [ANSWER] + [dict(ANSWER, id=q["id"]) for q in copies]
    path = _bfcl_files(tmp_path, [QUESTION] + copies, answers)
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input-format", "bfcl", "--input", str(path), "--metrics", "agentic",
                     "--agentic-correctness", "tools", "--agentic-k", "1", "--output", str(tmp_path / "out"), "--no-report"])
    s = doc["summary"]
    assert s["interactions_read"] == 2 and s["rejected_at_read"] == 3, s
    dead = list(iter_dead_letters(str(tmp_path / "out")))
    assert sorted(d["stage"] for d in dead) == ["read"] * 3, dead
    assert sorted(json.loads(d["raw"])["id"] for d in dead) == ["copy0", "copy1", "copy2"]


# ------------------------------------------------------------------ τ-bench

def _traj() -> dict:
    return {
        "task_id": 1, "trial": 0, "reward": 1.0,
        "info": {"task": {"actions": [{"name": "get_user", "kwargs": {"id": "u1"}}]}},
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": "{\"id\": \"u1\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": "{}"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "bye"},
        ],
    }


TAU_FAULTS = {
    "assistant content 5": (_set(("traj", 4, "content"), 5), "traj[4].content is a number (5), not text"),
    "user content null": (_set(("traj", 5, "content"), None), "traj[5].content is null, not text (the turn's query)"),
    "user content 7": (_set(("traj", 5, "content"), 7), "traj[5].content is a number (7), not text (the turn's query)"),
    "user content missing": (_set(("traj", 5, "content"), ...), "traj[5].content is missing, not text"),
    "system content 5": (_set(("traj", 0, "content"), 5), "traj[0].content is a number (5), not text (the session's context)"),
    "tool content 5": (_set(("traj", 3, "content"), 5), "traj[3].content is a number (5), not text (the tool's result)"),
    "tool content null": (_set(("traj", 3, "content"), None), "traj[3].content is null, not text (the tool's result)"),
    "tool_call_id 5": (_set(("traj", 3, "tool_call_id"), 5), "traj[3].tool_call_id is a number (5), not text"),
    "call null": (_set(("traj", 2, "tool_calls", 0), None), "traj[2].tool_calls[0] is null, not a tool call object"),
    "call function text": (_set(("traj", 2, "tool_calls", 0, "function"), "get_user"),
                           "traj[2].tool_calls[0].function is text, not an object"),
    "call name missing": (_set(("traj", 2, "tool_calls", 0, "function", "name"), ...),
                          "traj[2].tool_calls[0].function.name is missing, not non-blank text"),
    "call name 5": (_set(("traj", 2, "tool_calls", 0, "function", "name"), 5),
                    "traj[2].tool_calls[0].function.name is a number (5), not non-blank text"),
    "call arguments 5": (_set(("traj", 2, "tool_calls", 0, "function", "arguments"), 5),
                         "traj[2].tool_calls[0].function.arguments is a number (5), not the call's arguments"),
    "call id 5": (_set(("traj", 2, "tool_calls", 0, "id"), 5), "traj[2].tool_calls[0].id is a number (5), not text"),
    "tool_calls text": (_set(("traj", 2, "tool_calls"), "get_user"), "traj[2].tool_calls is text, not a list of tool calls"),
    "action name 5": (_set(("info", "task", "actions", 0, "name"), 5),
                      "info.task.actions[0].name is a number (5), not non-blank text (the expected tool's name)"),
    "action name missing": (_set(("info", "task", "actions", 0, "name"), ...), "info.task.actions[0].name is missing"),
    "action name blank": (_set(("info", "task", "actions", 0, "name"), ""), "info.task.actions[0].name is blank text"),
    "reward text": (_set(("reward",), "1"), "reward is text, not a finite number or true/false"),
    "trial 1.5": (_set(("trial",), 1.5), "trial is a number (1.5): the session id is built from task_id and trial "
                                         "(an integer or non-blank text)"),
    "task_id blank": (_set(("task_id",), ""), "task_id is blank text"),
}


@pytest.mark.parametrize("fault", sorted(TAU_FAULTS))
def test_a_tau_bench_record_with_a_field_it_cannot_map_is_one_dead_letter_with_its_record(tmp_path, fault):
    edit, words = TAU_FAULTS[fault]
    bad = _traj()
    bad["trial"] = 1
    edit(bad)
    path = tmp_path / "t.json"
    path.write_text(json.dumps([_traj(), bad]), encoding="utf-8")
    items = tau_bench_sessions(str(path))
    assert [s["session_id"] for s in items if isinstance(s, dict)] == ["tau_bench-task1-trial0"], items
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert json.loads(dead.raw) == bad  # the benchmark's record as read, never a mapped session
    assert dead.reason.startswith("τ-bench record cannot be mapped to a session") and words in dead.reason, dead.reason
    assert dead.at == (str(path), 1), dead.at  # the file and the element's index
    assert "a number or text" not in dead.reason


def test_a_sound_tau_bench_record_maps_its_values_as_given(tmp_path):
    """The checks refuse nothing τ-bench writes: a null assistant content beside tool calls, a record
    without a reward (no label), true as a reward, text arguments and a system message are read."""
    rec = _traj()
    del rec["reward"]
    other = dict(_traj(), trial=1, reward=True)
    path = tmp_path / "t.json"
    path.write_text(json.dumps([rec, other]), encoding="utf-8")
    a, b = tau_bench_sessions(str(path))
    assert Dataset.model_validate(a) and Dataset.model_validate(b)
    assert [t["query"] for t in a["conversation"]] == ["hi", "thanks"] and a["context"] == "policy"
    assert [t["agentic"]["reward"] for t in a["conversation"]] == [None, None]
    assert [t["agentic"]["reward"] for t in b["conversation"]] == [True, True]
    assert a["conversation"][0]["agentic"]["tools_used"] == [
        {"tool_name": "get_user", "parameters": {"id": "u1"}, "result": "{}", "step": 1}]


def test_tau_bench_audit_dead_letters_the_record_at_read_not_a_turn_of_its_mapped_session(tmp_path):
    """trial49c B4 through the audit: an assistant message with ``content: 5`` was mapped and the reader then
    dead-lettered that turn with the mapped session as raw, the session read in part."""
    bad = _traj()
    bad["trial"] = 1
    bad["traj"][4]["content"] = 5
    path = tmp_path / "t.json"
    path.write_text(json.dumps([_traj(), bad]), encoding="utf-8")
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input-format", "tau_bench", "--input", str(path), "--metrics",
                     "agentic", "--agentic-correctness", "label", "--agentic-k", "1", "--output", str(tmp_path / "out"),
                     "--no-report"])
    s = doc["summary"]
    assert s["interactions_read"] == 2 and s["rejected_at_read"] == 1, s
    (dead,) = list(iter_dead_letters(str(tmp_path / "out")))
    assert dead["stage"] == "read" and json.loads(dead["raw"]) == bad
    assert "traj[4].content is a number (5), not text" in dead["reason"]


# ------------------------------------------------------------------ HH-RLHF (the same module family)

def test_hh_rlhf_never_leaves_out_text_before_the_first_human_turn(tmp_path):
    """A transcript's text (or Assistant turn) before its first ``Human:`` turn was dropped and the rest
    mapped as the whole pair; such a record is now skipped with its reason, like any it cannot parse."""
    from fair_forge_beam.io.hh_rlhf import hh_rlhf_sessions

    sound = "\n\nHuman: hi\n\nAssistant: hello"
    records = [{"chosen": sound, "rejected": sound + " there"},
               {"chosen": "Preamble.\n\nHuman: hi\n\nAssistant: hello", "rejected": sound},
               {"chosen": sound, "rejected": "\n\nAssistant: first\n\nHuman: hi\n\nAssistant: hello"}]
    path = tmp_path / "hh.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    skipped: list = []
    sessions = hh_rlhf_sessions(str(path), skipped=skipped)
    assert {s["session_id"] for s in sessions} == {"hh-00000"}
    assert [n for n, _ in skipped] == [1, 2], skipped
    assert "text before the first 'Human:' turn ('Preamble.')" in skipped[0][1]
    assert "an 'Assistant:' turn before the first 'Human:' turn" in skipped[1][1]
