"""The main job's output folder (``fair_forge_beam.reports.output_folder``, moved out of
``pipelines/audit.py``): a reused folder is cleaned, a file is a usage error, and the launcher's
comparison is written without the report when ``--no-report`` is given."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.reports.compare import compare_runs
from fair_forge_beam.reports.output_folder import OUTPUT_FILES, STALE_OUTPUTS, prepare_output_folder, write_launcher_reports

DOC = {"config": {"mode": "frequentist"}, "summary": {"interactions_read": 0}, "metrics": {}}


def test_reused_folder_loses_every_earlier_output_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    for name in OUTPUT_FILES + STALE_OUTPUTS:
        if name.endswith("/") or name == "_parts":
            (out / name.rstrip("/")).mkdir(parents=True)
            (out / name.rstrip("/") / "part-0").write_text("old")
        else:
            out.mkdir(exist_ok=True)
            (out / name).write_text("old")
    (out / "mine.txt").write_text("keep")
    assert prepare_output_folder(str(out) + "/") == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_missing_folder_is_created_and_a_file_is_a_usage_error(tmp_path):
    assert prepare_output_folder(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="^--output must be a folder, but .* is a file$"):
        prepare_output_folder(str(tmp_path / "f"))
    with pytest.raises(ValueError, match="^--output: cannot create folder"):
        prepare_output_folder(str(tmp_path / "f" / "sub"))


def test_no_report_with_a_baseline_writes_the_comparison_only(tmp_path):
    written = write_launcher_reports(str(tmp_path), DOC, {}, DOC, no_report=True, inconclusive_width=0.2)
    assert written == ["results.json", "results.parquet/", "sessions/", "dead_letter/", "data_quality/",
                       "run_info.json", "comparison.json"]
    assert json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8")) == compare_runs(DOC, DOC)
    assert not (tmp_path / "report.html").exists()
    assert write_launcher_reports(str(tmp_path / "x"), DOC, {}, None, True, 0.2) == list(OUTPUT_FILES[:6])
