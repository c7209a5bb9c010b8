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
