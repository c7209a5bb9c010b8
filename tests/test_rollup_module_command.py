"""``python -m fair_forge_beam.rollup`` runs the roll-up command: it used to import the module, do nothing
and exit 0 (session 29's note), so a user who typed it thought a roll-up had run."""
from __future__ import annotations

import pytest

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "fair_forge_beam.rollup", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_the_module_prints_the_commands_usage(tmp_path):
    done = _run("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--from" in done.stdout and "--output" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
def test_the_module_refuses_a_roll_up_of_nothing_in_one_line(tmp_path):
    done = _run("--from", str(tmp_path / "no-such-audit-*"), "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "out").exists()
