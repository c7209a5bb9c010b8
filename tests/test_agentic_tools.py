"""Tool correctness (spec §6.7): upstream examples, the fixed parameter matching, step order,
weights, and malformed traces."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fair_forge_beam.components.tool_correctness import (
    ToolTraceError,
    conversation_tool_calls,
    normalise_tool_weights,
    tool_correctness,
)


def call(name, step=None, **params):
    c = {"tool_name": name, "parameters": params}
    if step is not None:
        c["step"] = step
    return c


CALC = call("calculator", 1, operation="add", a=15, b=27)


def test_perfect_match_is_one():
    r = tool_correctness({"tools_used": [CALC], "final_answer_uses_tools": True},
                         {"expected_tools": [CALC], "tool_sequence_matters": False})
    assert r["overall_correctness"] == 1.0 and r["is_correct"] is True
    assert (r["tool_selection_accuracy"], r["parameter_accuracy"], r["sequence_correct"], r["result_utilization"]) == (1, 1, 1, 1)


def test_wrong_parameter_lowers_accuracy_and_overall():
    used = call("calculator", 1, operation="add", a=15, b=72)
    r = tool_correctness({"tools_used": [used], "final_answer_uses_tools": True}, {"expected_tools": [CALC]})
    # keys {operation, a, b}: 2 of 3 equal
    assert r["parameter_accuracy"] == pytest.approx(2 / 3)
    assert r["overall_correctness"] == pytest.approx(0.25 * (1 + 2 / 3 + 1 + 1))
    assert r["is_correct"] is False and "parameters match 0.67" in r["reasoning"]


def test_ith_expected_call_compared_with_ith_used_call():
    """Upstream compares every expected call with the first used call (spec §17 item 11): two
    correct calls of one tool scored 0.5 there; here 1.0."""
    calls = [call("calculator", 1, op="mul", a=3, b=12), call("calculator", 2, op="mul", a=36, b=0.9)]
    r = tool_correctness({"tools_used": calls, "final_answer_uses_tools": True}, {"expected_tools": calls, "tool_sequence_matters": True})
    assert r["parameter_accuracy"] == 1.0 and r["overall_correctness"] == 1.0
    # a missing second call scores 0 for that expected call
    r = tool_correctness({"tools_used": calls[:1], "final_answer_uses_tools": True}, {"expected_tools": calls})
    assert r["parameter_accuracy"] == 0.5 and r["sequence_correct"] == 0.5


def test_order_comes_from_step_fields_not_list_order():
    a, b = call("search", 1, q="x"), call("book", 2, id=1)
    expected = {"expected_tools": [a, b], "tool_sequence_matters": True}
    shuffled = tool_correctness({"tools_used": [b, a], "final_answer_uses_tools": True}, expected)
    assert shuffled["overall_correctness"] == 1.0
    swapped = tool_correctness({"tools_used": [call("search", 2, q="x"), call("book", 1, id=1)], "final_answer_uses_tools": True}, expected)
    assert swapped["sequence_correct"] == 0.0 and swapped["overall_correctness"] == 0.75
    unordered = tool_correctness({"tools_used": [call("search", 2, q="x"), call("book", 1, id=1)], "final_answer_uses_tools": True},
                                 {**expected, "tool_sequence_matters": False})
    assert unordered["sequence_correct"] == 1.0


def test_missing_ground_truth_and_call_without_parameters():
    assert tool_correctness({"tools_used": [CALC]}, None) is None
    assert tool_correctness({"tools_used": [CALC]}, {}) is None
    # a tool call without parameters is a result, compared as {}
    r = tool_correctness({"tools_used": [{"tool_name": "now"}], "final_answer_uses_tools": True},
                         {"expected_tools": [{"tool_name": "now", "parameters": None}]})
    assert r["overall_correctness"] == 1.0
    r = tool_correctness({"tools_used": [{"tool_name": "calculator"}], "final_answer_uses_tools": True}, {"expected_tools": [CALC]})
    assert r["parameter_accuracy"] == 0.0 and 0 < r["overall_correctness"] < 1
    # no tools used although expected: scored (selection 0), not skipped as upstream
    r = tool_correctness({}, {"expected_tools": [CALC]})
    assert r["tool_selection_accuracy"] == 0.0 and r["overall_correctness"] == 0.0
    # nothing expected, nothing used: perfect
    assert tool_correctness({"tools_used": []}, {"expected_tools": []})["overall_correctness"] == 1.0
    assert tool_correctness({"tools_used": [CALC], "final_answer_uses_tools": True}, {"expected_tools": []})["overall_correctness"] == 0.25


@pytest.mark.parametrize("bad,msg", [
    ([{"parameters": {}}], "no tool_name"),
    (["calculator"], "must be an object"),
    ([{"tool_name": "x", "parameters": [1, 2]}], "parameters must be an object"),
    ([{"tool_name": "x", "step": "first"}], "step must be an integer"),
    ({"tool_name": "x"}, "must be a list"),
])
def test_malformed_traces_raise_tool_trace_error(bad, msg):
    with pytest.raises(ToolTraceError, match=msg):
        tool_correctness({"tools_used": bad}, {"expected_tools": [CALC]})


def test_weights_normalised_and_validated():
    w = normalise_tool_weights({"selection": 1, "parameters": 1, "sequence": 1, "utilization": 1})
    assert w == {"selection": 0.25, "parameters": 0.25, "sequence": 0.25, "utilization": 0.25}
    r = tool_correctness({"tools_used": [CALC]}, {"expected_tools": [CALC]}, weights={"selection": 2, "utilization": 2})
    assert r["overall_correctness"] == 0.5  # utilization 0: final_answer_uses_tools missing
    for bad in ({"selection": -1}, {"speed": 1}, {"selection": 0}, {"selection": float("nan")}):
        with pytest.raises(ValueError):
            normalise_tool_weights(bad)


names = st.sets(st.sampled_from("abcdef"), max_size=6)


@given(names, names)
def test_selection_is_the_upstream_case_analysis(u, e):
    if u == e:
        expected = 1.0
    elif u < e:
        expected = len(u) / len(e)
    elif e < u:
        expected = len(e) / len(u)
    else:
        expected = len(u & e) / len(u | e)
    r = tool_correctness({"tools_used": [call(n) for n in sorted(u)]}, {"expected_tools": [call(n) for n in sorted(e)]})
    assert r["tool_selection_accuracy"] == pytest.approx(expected)
    assert all(0.0 <= r[f] <= 1.0 for f in ("parameter_accuracy", "sequence_correct", "overall_correctness"))


def test_conversation_trace_orders_by_turn_then_step():
    turns = [
        (1, {"tools_used": [call("book", 1, id=1)], "final_answer_uses_tools": True},
         {"expected_tools": [call("search", 1, q="x"), call("book", 2, id=1)], "tool_sequence_matters": True}),
        (0, {"tools_used": [call("search", 1, q="x")]}, {}),
    ]
    ag, gt, used, expected = conversation_tool_calls(turns)
    assert [c["tool_name"] for c in used] == ["search", "book"] and [c["step"] for c in used] == [1, 2]
    r = tool_correctness(ag, gt, used=used, expected=expected)
    assert r["overall_correctness"] == 1.0
    assert conversation_tool_calls([(0, {"tools_used": [CALC]}, {})]) is None
