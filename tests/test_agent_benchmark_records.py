"""The agentic loaders read τ-bench and BFCL records through their pydantic models
(``schemas/agent_benchmarks``): BFCL's ``multi_turn_miss_func`` questions, whose turn that gets the
held-out functions is ``[]``, are read (each was a dead letter: "question[3] is an empty list"), and
an integer id is a bounded one, as every integer read from outside (``bounded_int``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_forge_beam.io.agentic_sources import MISSED_FUNCTION_QUERY, bfcl_sessions, tau_bench_sessions
from fair_forge_beam.io.read import ReadError
from fair_forge_beam.schemas.common import Dataset


def _user(text: str) -> list:
    return [{"role": "user", "content": text}]


# BFCL_v4_multi_turn_miss_func's shape: turn 2 has no message; missed_function holds sort back until it
MISS = {"id": "multi_turn_miss_func_0", "involved_classes": ["GorillaFileSystem"], "excluded_function": ["rm"],
        "question": [_user("Move the report to temp."), _user("Sort it."), []], "missed_function": {"2": ["sort"]}}
MISS_ANSWER = {"id": "multi_turn_miss_func_0",
               "ground_truth": [["mv(source='r.pdf', destination='temp')"], [], ["sort(file_name='r.pdf')"]]}


def _files(tmp_path: Path, questions: list, answers: list) -> str:
    (tmp_path / "BFCL_v4_multi_turn_miss_func.json").write_text(
        "".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    (tmp_path / "possible_answer_BFCL_v4_multi_turn_miss_func.json").write_text(
        "".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return str(tmp_path / "BFCL_v4_multi_turn_miss_func.json")


def test_a_miss_func_question_is_read_its_turn_without_a_message_has_bfcls_query(tmp_path):
    (s,) = bfcl_sessions(_files(tmp_path, [MISS], [MISS_ANSWER]))
    assert Dataset.model_validate(s)
    assert [t["query"] for t in s["conversation"]] == ["Move the report to temp.", "Sort it.", MISSED_FUNCTION_QUERY]
    expected = [t["ground_truth_agentic"]["expected_tools"] for t in s["conversation"]]
    assert expected[1] == [] and expected[2] == [{"tool_name": "sort", "parameters": {"file_name": "r.pdf"}, "step": 1}]


@pytest.mark.parametrize("change,words", [
    ({"missed_function": {}}, "question[2] is an empty list, not a list of the turn's messages: missed_function adds "
                              "no function at that turn"),
    ({"question": [_user("a"), _user("b"), _user("c")]}, "question[2] has messages at a turn where missed_function "
                                                         "adds functions"),
    ({"missed_function": {"2": ["sort"], "7": ["cd"]}}, "missed_function names the turn '7', which the question "
                                                        "does not have (turns 0 to 2)"),
    ({"missed_function": {"2": "sort"}}, "missed_function['2'] is text, not a list of function names"),
    ({"missed_function": {"2": [5]}}, "missed_function['2'][0] is a number (5), not a function name"),
    ({"missed_function": ["sort"]}, "missed_function is a list, not an object of turn index: held-out functions"),
    ({"question": [_user("a"), [{"role": "user", "content": 5}], []]},
     "question[1][0].content is a number (5), not text"),
])
def test_a_miss_func_question_that_cannot_be_mapped_whole_is_one_dead_letter(tmp_path, change, words):
    bad = dict(MISS, id="bad", **change)
    items = bfcl_sessions(_files(tmp_path, [MISS, bad], [MISS_ANSWER, dict(MISS_ANSWER, id="bad")]))
    assert [s["session_id"] for s in items if isinstance(s, dict)] == ["multi_turn_miss_func_0"], items
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert json.loads(dead.raw) == bad and dead.reason.startswith("BFCL record cannot be mapped to a session")
    assert dead.at == (str(tmp_path / "BFCL_v4_multi_turn_miss_func.json"), len(json.dumps(MISS)) + 1), dead.at
    assert words in dead.reason, dead.reason


def test_an_id_over_the_int64_bound_is_a_dead_letter_naming_the_bound(tmp_path):
    """A τ-bench trial or a BFCL id of 2**63 was mapped (its session id and agentic.trial beyond what an
    int64 column holds); now it is a dead letter at read whose reason names the field and the bound."""
    traj = {"task_id": 1, "trial": 2**63, "traj": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps([dict(traj, trial=0), traj]), encoding="utf-8")
    items = tau_bench_sessions(str(path))
    assert [s["session_id"] for s in items if isinstance(s, dict)] == ["tau_bench-task1-trial0"]
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert f"(trial: {2**63} is over the largest value read, 2**63-1" in dead.reason, dead.reason
    q = dict(MISS, id=2**63)
    items = bfcl_sessions(_files(tmp_path, [MISS, q], [MISS_ANSWER, dict(MISS_ANSWER, id=2**63)]))
    (dead,) = [s for s in items if isinstance(s, ReadError)]
    assert json.loads(dead.raw) == q and f"(id: {2**63} is over the largest value read" in dead.reason, dead.reason
