"""docs/optimizer.md's worked example runs as written in an empty folder, as a user who installed
the package would run it (trial48 B2: it opened ``dataset_gepa_es.json``, a file in no package or
repository folder, and every example ended in ``FileNotFoundError``): it prints the line the doc
says, and writes the ``dataset_gepa_es.json`` the doc's command line reads (the original's four
sessions, as the shared copy holds them)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO, SHARED

DOC = (REPO / "docs" / "optimizer.md").read_text(encoding="utf-8")


@pytest.mark.slow  # ~15 s: the optimizer runs its evaluation pipelines
def test_the_worked_example_runs_in_an_empty_folder_and_prints_what_the_doc_says(tmp_path):
    section = DOC.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    says = re.search(r"it prints\s+`([^`]+)`", section).group(1)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == says
    original = json.loads((SHARED / "data" / "fair_forge_examples" / "dataset_gepa_es.json").read_text(encoding="utf-8"))
    assert json.loads((tmp_path / "dataset_gepa_es.json").read_text(encoding="utf-8")) == original
    assert "--input dataset_gepa_es.json" in section
