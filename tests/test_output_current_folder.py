"""``--output .`` (or any folder holding the current one) of a command that publishes its folder whole is a usage
error (trial48c A: the run replaced the folder the shell was in, left it in a deleted folder, and the next run
failed with a traceback); ``trend``, which writes its files into the folder, may still write into ``.``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from fair_forge_beam.reports.output_folder import check_output_folder, staged_output


def test_the_audit_refuses_the_current_folder_as_output_and_leaves_it(tmp_path):
    data = tmp_path / "good.jsonl"
    data.write_text(json.dumps({"session_id": "s1", "assistant_id": "bot", "language": "english", "conversation": [
        {"qa_id": "q1", "query": "Can you help me?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": "Happy to help."}]}) + "\n")
    here = tmp_path / "d"
    here.mkdir()
    (here / "mine.txt").write_text("keep")
    (here / "sub").mkdir()
    inode = here.stat().st_ino
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for cwd, out in ((here / "sub", ".."),):  # the other spellings: below, in process
        done = subprocess.run([sys.executable, "-m", "pipelines.audit", "--quiet", "--metrics", "humanity",
                               "--input", str(data), "--output", out], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert "current folder" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert here.stat().st_ino == inode and sorted(p.name for p in here.iterdir()) == ["mine.txt", "sub"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "good.jsonl"]  # no stage, no run


@pytest.mark.parametrize("out", [".", "..", "./"])
def test_every_staged_command_refuses_a_folder_holding_the_current_one(tmp_path, monkeypatch, out):
    """generate, run_assistant, optimize, explain, rollup, the loop's stages: every one publishes through
    staged_output, which checks its folder first."""
    (tmp_path / "d").mkdir()
    monkeypatch.chdir(tmp_path / "d")
    with pytest.raises(ValueError, match=r"current folder.*a run replaces its output folder whole"):
        with staged_output(out):
            pytest.fail("the block ran")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"] and os.getcwd() == str(tmp_path / "d")


def test_a_folder_inside_the_current_one_and_trends_dot_are_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with staged_output("out") as stage:
        Path(stage, "results.json").write_text("{}")
    assert (tmp_path / "out" / "results.json").exists()
    assert check_output_folder(".", staged=False, may_hold_reads=True) == "."  # trend writes two files into it
