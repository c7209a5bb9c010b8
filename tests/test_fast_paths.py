"""Issue 14 item 4 (fast paths): costs a run does not pay.

* a frequentist audit never imports ``scipy`` through the project's own code (only Bayesian
  intervals and a rare Spearman tie at a rounding boundary need it). The audit pins the lexicon
  toxicity scorer: the default classifier (alt-profanity-check) runs on scikit-learn, which
  imports scipy itself;
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_NO_SCIPY = """
import logging, sys, tempfile
logging.disable(logging.WARNING)
from pipelines.audit import run
run(["--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex", "--mode", "frequentist",
     "--quiet", "--no-report", "--output", tempfile.mkdtemp()])
print("SCIPY", sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy.")))
"""


@pytest.mark.slow
def test_a_frequentist_audit_never_imports_scipy():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _NO_SCIPY], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "SCIPY []"
