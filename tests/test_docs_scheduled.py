"""docs/scheduled.md's nightly walk-through runs as written: every command of its
"A nightly job, end to end" block, in order, in a scratch folder. ``fair-forge-beam`` runs as
``<this interpreter> -m pipelines.audit`` (the console script's module, by the interpreter's own
path), and the shipped data's path is the installed package's. A renamed option, a gate the
grammar rejects, a roll-up or trend that fails, or an exit code other than 0 fails this test."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "scheduled.md"


def _walkthrough() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## A nightly job, end to end", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.M | re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_walkthrough_commands_are_found():
    commands = _walkthrough()
    assert sum("fair-forge-beam" in c for c in commands) == 5
    assert any(c.startswith("fair-forge-beam rollup") for c in commands)
    assert any(c.startswith("fair-forge-beam trend") for c in commands)


def test_nightly_walkthrough_runs_as_written(tmp_path):
    import fair_forge_beam

    data = Path(fair_forge_beam.__file__).resolve().parent / "data" / "examples"
    python = shlex.quote(sys.executable)  # the interpreter by its own path: never python from PATH
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for cmd in _walkthrough():
        line = cmd.replace("fair_forge_beam/data/examples", shlex.quote(str(data)))
        line = re.sub(r"^fair-forge-beam\b", f"{python} -m pipelines.audit", line)
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"{cmd}\nexit {proc.returncode}\n{proc.stderr[-3000:]}"
    nights = sorted(p.name for p in (tmp_path / "audits").iterdir())
    assert nights == ["2026-12-01", "2026-12-02", "2026-12-03"]
    week = json.loads((tmp_path / "week49" / "results.json").read_text(encoding="utf-8"))
    read = [json.loads((tmp_path / "audits" / n / "results.json").read_text())["summary"]["interactions_read"]
            for n in nights]
    assert week["summary"]["interactions_read"] == sum(read) > 0
    gates = json.loads((tmp_path / "audits" / "2026-12-03" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 4 and gates["passed"]
    assert json.loads((tmp_path / "week49" / "gates.json").read_text(encoding="utf-8"))["passed"]
    assert (tmp_path / "trend" / "trend.html").is_file() and (tmp_path / "trend" / "trend.json").is_file()
    trend = json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))
    assert len(trend["runs"]) == 4


def _scheduler_blocks() -> dict:
    section = PAGE.read_text(encoding="utf-8").split("## On a schedule: cron and Airflow", 1)[1]
    return {kind: re.search(rf"^```{kind}\n(.*?)^```", section, re.M | re.S).group(1) for kind in ("bash", "cron", "python")}


def test_cron_and_airflow_call_the_nightly_script():
    import ast

    blocks = _scheduler_blocks()
    entries = [line for line in blocks["cron"].splitlines() if line.strip() and not line.startswith("#")]
    assert len(entries) == 1
    fields = entries[0].split(None, 5)
    assert fields[:5] == ["30", "2", "*", "*", "*"] and "./nightly.sh" in fields[5]
    assert "%" not in fields[5].replace("\\%", "")  # cron turns an unescaped % into a newline
    tree = ast.parse(blocks["python"])  # Airflow is not installed here: the DAG file must at least be Python
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "BashOperator"]
    command = next(k.value.value for k in calls[0].keywords if k.arg == "bash_command")
    assert "./nightly.sh {{ ds }}" in command


def test_nightly_script_runs_three_nights_with_an_empty_one(tmp_path):
    """The page's nightly.sh, as written, for three nights: the first audits and rolls up (exit 0),
    the second has an empty export (exit 4: nothing published, the first night's folder
    untouched), the third gates against the first (the previous published night) and the week
    rolls up both nights."""
    import fair_forge_beam

    data = Path(fair_forge_beam.__file__).resolve().parent / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
    lines = data.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "2026-12-01.jsonl").write_text("".join(lines[:10]), encoding="utf-8")
    (tmp_path / "logs" / "2026-12-02.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "logs" / "2026-12-03.jsonl").write_text("".join(lines[10:20]), encoding="utf-8")
    script = tmp_path / "nightly.sh"
    script.write_text(_scheduler_blocks()["bash"], encoding="utf-8")
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"  # fair-forge-beam on PATH: the console script's module, by this interpreter's path
    bin_dir.mkdir()
    shim = bin_dir / "fair-forge-beam"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pipelines.audit "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def night(day):
        return subprocess.run([str(script), day], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    first = night("2026-12-01")
    assert first.returncode == 0, first.stderr[-3000:]
    before = {p: p.read_bytes() for p in sorted((tmp_path / "audits").rglob("*")) if p.is_file()}
    empty = night("2026-12-02")
    assert empty.returncode == 4, empty.stderr[-3000:]
    assert "empty run" in empty.stderr
    assert {p: p.read_bytes() for p in sorted((tmp_path / "audits").rglob("*")) if p.is_file()} == before
    third = night("2026-12-03")
    assert third.returncode == 0, third.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "audits").iterdir()) == ["2026-12-01", "2026-12-03"]
    gates = json.loads((tmp_path / "audits" / "2026-12-03" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 3 and gates["passed"]  # coverage, assistants of the baseline, regression
    week = json.loads((tmp_path / "week" / "results.json").read_text(encoding="utf-8"))
    read = [json.loads((tmp_path / "audits" / n / "results.json").read_text())["summary"]["interactions_read"]
            for n in ("2026-12-01", "2026-12-03")]
    assert week["summary"]["interactions_read"] == sum(read) > 0
    assert len(json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))["runs"]) == 3
