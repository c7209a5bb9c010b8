"""The main job's output folder (``fair_forge_beam.reports.output_folder``, moved out of
``pipelines/audit.py``): a reused folder is cleaned, a file is a usage error, and the launcher's
comparison is written without the report when ``--no-report`` is given."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.reports.compare import compare_runs
from fair_forge_beam.reports.output_folder import OUTPUT_FILES, SHARD_PATTERNS, STALE_OUTPUTS, prepare_output_folder, write_launcher_reports

DOC = {"config": {"mode": "frequentist"}, "summary": {"interactions_read": 0}, "metrics": {}}


def test_reused_folder_loses_every_earlier_output_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    for name in OUTPUT_FILES + STALE_OUTPUTS:
        if name.endswith("/") or name == "_parts":
            (out / name.rstrip("/")).mkdir(parents=True)
            shard = SHARD_PATTERNS.get(name, ("part-*",))[0].replace("*", "0")  # a shard as the run names it
            (out / name.rstrip("/") / shard).write_text("old")
        else:
            out.mkdir(exist_ok=True)
            (out / name).write_text("old")
    (out / "mine.txt").write_text("keep")
    assert prepare_output_folder(str(out) + "/") == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_reused_folder_keeps_a_users_files_inside_the_shard_folders(tmp_path):
    out = tmp_path / "out"
    (out / "sessions" / "humanity").mkdir(parents=True)
    (out / "sessions" / "humanity" / "part-00000-of-00001.parquet").write_text("old")
    (out / "sessions" / "mine.txt").write_text("keep")
    (out / "dead_letter").mkdir()
    (out / "dead_letter" / "part-00000-of-00002.jsonl").write_text("old")
    (out / "dead_letter" / "notes.md").write_text("keep")
    (out / "windows").mkdir()
    (out / "windows" / "0-slices-00000.jsonl").write_text("old")
    (out / "windowed_results.json").write_text("old")
    (out / "results.json.bak").write_text("keep")
    prepare_output_folder(str(out))
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert left == ["dead_letter/notes.md", "results.json.bak", "sessions/mine.txt"]
    assert not (out / "sessions" / "humanity").exists() and not (out / "windows").exists()


def test_a_run_folder_named_like_a_json_file_is_read_as_a_folder(tmp_path):
    from fair_forge_beam.reports.load import read_results, results_path

    run = tmp_path / "audit.json"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(DOC))
    assert results_path(str(run)) == f"{run}/results.json"
    assert read_results(str(run)) == DOC
    assert results_path(str(tmp_path / "x.json")) == str(tmp_path / "x.json")  # a file path stays a file


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
                       "run_info.json", "stats/", "comparison.json"]
    assert json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8")) == compare_runs(DOC, DOC)
    assert not (tmp_path / "report.html").exists()
    assert write_launcher_reports(str(tmp_path / "x"), DOC, {}, None, True, 0.2) == list(OUTPUT_FILES[:7])
