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


@pytest.mark.slow
def test_a_run_of_an_older_layout_is_said_where_its_provenance_matters(tmp_path, caplog, capsys):
    """trial37 T9: an output folder of an older layout (no run_info.json, no stats/; results.json
    holds the config) was replaced, compared and used as a --baseline without a word of what it
    lacks, and "the runs share data" was missing for two runs of the same file. The one reader of a
    run's settings falls back to results.json's config, and each command says once what is missing."""
    import shutil

    from fair_forge_beam.reports import compare
    from pipelines import audit

    a, old = tmp_path / "A", tmp_path / "OLD"
    common = ["--input", _shipped(), "--no-report", f"--runner={FNAPI}"]
    audit.run(["--metrics", "humanity,toxicity", "--mode", "bayesian", "--output", str(a), *common])
    shutil.copytree(a, old)
    for gone in ("stats", "run_info.json", "_SUCCESS"):
        p = old / gone
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    capsys.readouterr()
    # compare: what OLD lacks, and the data both runs read (by results.json's inputs)
    assert compare.main([str(a), str(old)]) in (0, None)
    table = capsys.readouterr().out
    assert (f"warning: {old} has no run_info.json and no stats/manifest.json (a run of an older layout, or a partial "
            "copy)") in table
    # a warning, not a gate's failure: without OLD's manifest the file may have changed between the runs
    assert f"warning: the runs may share data: {a} and {old} both name {_shipped()} as input in results.json" in table
    assert "version of" not in table  # results.json's versions are compared with the packages both name, not all
    # --baseline: the same two lines as warnings, and the report's comparison (--compare) says them too
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        audit.run(["--metrics", "humanity,toxicity", "--mode", "bayesian", "--baseline", str(old), "--gate",
                   "regression toxicity toxic_rate not worse", "--compare", str(old), "--output", str(tmp_path / "C"),
                   *[c for c in common if c != "--no-report"]])
    html = (tmp_path / "C" / "report.html").read_text(encoding="utf-8")
    assert "has no run_info.json and no stats/manifest.json" in html and 'id="possibly-shared-data"' in html
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"--baseline: {old} has no run_info.json") for m in said), said
    assert any(m.startswith("--baseline: the runs may share data:") and str(old) in m for m in said), said
    # replaced: said even with the same settings (its options could not be compared), once
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        audit.run(["--metrics", "humanity", "--mode", "bayesian", "--output", str(old), *common])
        [line] = _replaced(caplog)
        assert line.startswith(f"replaced the earlier run in {old}, made with other settings (metrics [humanity, "
                               "toxicity] -> [humanity]); it had no run_info.json (an older layout)")
        caplog.clear()
        audit.run(["--metrics", "humanity", "--mode", "bayesian", "--output", str(old), *common])
        assert _replaced(caplog) == []  # now a run of this layout, made with the same settings
