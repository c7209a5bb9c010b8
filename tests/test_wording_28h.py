"""Wording that contradicted the run (issue 28, trial 28h H13)."""
from __future__ import annotations

import pytest

from fair_forge_beam.components.tool_correctness import ToolTraceError, tool_calls


@pytest.mark.parametrize("call, says", [
    ({"tool_name": 5}, "tools_used[0].tool_name must be text, got a number (5)"),
    ({"tool_name": ["a"]}, "tools_used[0].tool_name must be text, got a list (['a'])"),
    ({"tool_name": "  "}, "tools_used[0].tool_name is empty"),
    ({"tool_name": None}, "tools_used[0] has no tool_name"),
    ({"parameters": {}}, "tools_used[0] has no tool_name"),
])
def test_a_tool_name_of_the_wrong_type_is_not_called_missing(call, says):
    with pytest.raises(ToolTraceError) as exc:
        tool_calls([call], "tools_used")
    assert str(exc.value) == says


def _run(metric, slices):
    return {"config": {"mode": "frequentist", "metrics": [metric], "inputs": ["x"]},
            "metrics": {metric: {"slices": slices}}}


def test_a_comparison_that_compared_nothing_says_why():
    from fair_forge_beam.reports.compare import compare_runs, comparison_table

    scored = [{"slice": "overall", "n_interactions": 3, "n_sessions": 3,
               "mean_entropy": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}}]
    cmp = compare_runs(_run("humanity", []), _run("humanity", scored))
    table = comparison_table(cmp)
    assert "humanity: nothing compared: the current run scored nothing" in table.splitlines(), table
    assert cmp["not_compared"] == {"humanity": "the current run scored nothing"}
    back = comparison_table(compare_runs(_run("humanity", scored), _run("humanity", [])))
    assert "humanity: nothing compared: the baseline run scored nothing" in back.splitlines(), back


def test_the_one_observation_note_names_the_metrics_unit(tmp_path, capsys):
    """agentic pass@k over one task of 4 sessions rests on one task, not "on one session"."""
    import json

    from pipelines import audit

    data = tmp_path / "ag.jsonl"
    data.write_text("".join(json.dumps({"session_id": f"s{i}", "assistant_id": "g", "language": "english", "context": "",
                                        "conversation": [{"qa_id": "q", "query": "book", "assistant": "done",
                                                          "agentic": {"task_id": "t1", "trial": i, "reward": 1.0},
                                                          "ground_truth_agentic": {}}]}) + "\n" for i in range(4)))
    assert audit.main(["--metrics", "agentic", "--mode", "frequentist", "--no-report", "--input", str(data),
                       "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    notes = [ln for ln in out.splitlines() if ln.strip().startswith("(1 observation)")]
    assert len(notes) == 1 and "rests on one observation, so on one task:" in notes[0], out
