"""Trial33 T12: the bare ``fair-forge-beam`` (its defaults: ``--metrics humanity --mode frequentist
--output fair_forge_output``) replaced README's humanity+toxicity Bayesian audit in the same folder
without a word. A run still replaces the run its ``--output`` holds (docs/cli.md: every run replaces
the previous outputs once it ends well); when that run was made with other settings it now says so,
in one warning line on stderr naming the folder and each setting that differed. A re-run with the
same settings says nothing."""
from __future__ import annotations

import importlib.resources
import logging

import pytest

from helpers import FNAPI


def _shipped() -> str:
    return str(importlib.resources.files("fair_forge_beam").joinpath("data/examples/fair_forge_examples.json"))


def _replaced(caplog) -> list:
    return [r.getMessage() for r in caplog.records if "replaced the earlier run" in r.getMessage()]


@pytest.mark.slow
def test_a_run_that_replaces_a_run_of_other_settings_says_so(tmp_path, caplog):
    from pipelines import audit

    out = tmp_path / "fair_forge_output"
    common = ["--input", _shipped(), "--output", str(out), "--no-report", f"--runner={FNAPI}"]
    with caplog.at_level(logging.WARNING):
        audit.run(["--metrics", "humanity,toxicity", "--mode", "bayesian", *common])  # README's job
        assert _replaced(caplog) == []  # nothing was there
        audit.run(common)  # the defaults: humanity, frequentist
    [line] = _replaced(caplog)
    assert line == (f"replaced the earlier run in {out}, made with other settings (mode bayesian -> frequentist; "
                    "metrics [humanity, toxicity] -> [humanity]); give another --output to keep both runs")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        audit.run(common)  # a re-run with the same settings: nothing to say
        assert _replaced(caplog) == []
        audit.run(["--slices", "overall,assistant_id", *common])  # an option that changes the results
    [line] = _replaced(caplog)
    assert "--slices" in line and "metrics" not in line and "mode" not in line
