"""Issue 27, trial27x: an export with half of its lines unparsable passed the documented nightly
gates (exit 0): records rejected at read reach no slice, so no ``dead_letter_share`` sees them.
``coverage rejected_share <op> <threshold>`` bounds them, run-level: rejected at read /
(records that gave an interaction + rejected at read), in ``results.json`` (``summary.records_read``)
and ``gates.json`` (``records_read``, ``records_rejected``); a roll-up gives the union's value."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from fair_forge_beam.reports.gates import GateConfigError, evaluate_gates, parse_gate, validate_gates

DATA = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"


def _documented_gates() -> list[str]:
    """The coverage gates of docs/scheduled.md's nightly.sh (``gates=(...)``), as arguments."""
    text = (REPO / "docs" / "scheduled.md").read_text(encoding="utf-8")
    line = re.search(r'^gates=\((.*)\)$', text, re.M).group(1)
    return shlex.split(line)


def test_parsed_and_evaluated_run_level():
    g = parse_gate("coverage rejected_share <= 0.05")
    assert (g.kind, g.field, g.metric, g.slices, g.threshold) == ("coverage", "rejected_share", None, "overall", 0.05)
    validate_gates([g], ["toxicity"], bayesian=False)
    doc = {"summary": {"interactions_read": 858, "records_read": 450, "rejected_at_read": 400}, "metrics": {}}
    (check,) = evaluate_gates(doc, [g])
    assert check.status == "fail" and check.value == pytest.approx(400 / 850)
    assert check.record()["records_read"] == 450 and check.record()["records_rejected"] == 400
    assert "400 of 850 input records rejected at read" in check.message()
    doc["summary"].update(rejected_at_read=0)
    assert evaluate_gates(doc, [g])[0].status == "pass"
    doc["summary"].update(records_read=0)  # nothing read: no share, never green
    assert evaluate_gates(doc, [g])[0].status == "fail"


@pytest.mark.parametrize("text, words", [
    ("coverage rejected_share <= 0.05 in every assistant_id", "run-level only"),
    ("coverage toxicity rejected_share <= 0.05", "without a metric"),
    ("coverage rejected_share <= 5", "outside the range of coverage rejected_share, 0 to 1"),  # a share: 5% is 0.05
])
def test_no_per_slice_or_per_metric_form(text, words):
    with pytest.raises(GateConfigError, match=words):
        validate_gates([parse_gate(text)], ["toxicity"], bayesian=False)


def _audit(tmp_path: Path, name: str, lines: list[str], gates: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / f"{name}.jsonl").write_text("".join(lines), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pipelines.audit", "--quiet", "--no-report", "--mode", "bayesian",
                           "--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--input",
                           f"{name}.jsonl", "--output", name, *gates], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


GARBAGE = [f"{{garbage line {i}, not JSON\n" for i in range(400)]


@pytest.mark.slow
def test_trial_half_garbage_export_fails_the_documented_nightly_gates(tmp_path):
    lines = DATA.read_text(encoding="utf-8").splitlines(keepends=True)
    gates = _documented_gates()
    assert "coverage rejected_share <= 0.05" in gates
    half = _audit(tmp_path, "half", lines[:450] + GARBAGE, gates)
    assert half.returncode == 3, half.stderr[-3000:]
    report = json.loads((tmp_path / "half" / "gates.json").read_text(encoding="utf-8"))
    by = {g["gate"]: g for g in report["gates"]}
    (check,) = by["coverage rejected_share <= 0.05"]["checks"]
    assert (check["records_read"], check["records_rejected"]) == (450, 400)
    assert check["value"] == pytest.approx(400 / 850) and check["status"] == "fail"
    assert by["coverage dead_letter_share <= 0.05 in every assistant_id"]["status"] == "pass"  # blind to it
    clean = _audit(tmp_path, "clean", lines[:450], gates)
    assert clean.returncode == 0, clean.stderr[-3000:]
    assert json.loads((tmp_path / "clean" / "results.json").read_text())["summary"]["records_read"] == 450


@pytest.mark.slow
def test_rollup_gives_the_unions_rejected_share(tmp_path):
    """Two days, each part garbage, one session's records in both (cut across the days, as a
    conversation across midnight): the roll-up's records_read and rejected_at_read (from the runs'
    stored statistics) are the union audit's, and so its rejected_share."""
    lines = DATA.read_text(encoding="utf-8").splitlines(keepends=True)
    gate = ["--gate", "coverage rejected_share <= 0.05"]
    assert _audit(tmp_path, "d1", lines[:40] + GARBAGE[:10], gate).returncode == 3
    assert _audit(tmp_path, "d2", lines[39:100] + GARBAGE[10:40], gate).returncode == 3
    assert _audit(tmp_path, "union", lines[:40] + GARBAGE[:10] + lines[39:100] + GARBAGE[10:40], gate).returncode == 3
    roll = subprocess.run([sys.executable, "-m", "pipelines.audit", "rollup", "--quiet", "--no-report", "--from", "d1",
                           "--from", "d2", "--output", "week", *gate], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert roll.returncode == 3, roll.stderr[-3000:]
    week = json.loads((tmp_path / "week" / "results.json").read_text(encoding="utf-8"))["summary"]
    union = json.loads((tmp_path / "union" / "results.json").read_text(encoding="utf-8"))["summary"]
    assert (week["records_read"], week["rejected_at_read"]) == (union["records_read"], union["rejected_at_read"]) == (101, 40)
    gates = [json.loads((tmp_path / r / "gates.json").read_text(encoding="utf-8"))["gates"][0]["checks"][0]
             for r in ("week", "union")]
    assert gates[0]["value"] == gates[1]["value"] == pytest.approx(40 / 141)
