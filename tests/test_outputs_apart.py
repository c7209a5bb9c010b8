"""Every command's ``--output`` is checked in one place
(:func:`fair_forge_beam.reports.output_folder.check_output_folder`) before any work: a file, an
unwritable folder, or a folder that is, lies inside or (for commands that replace their folder
whole) holds one of the command's own inputs is a one-line usage error, exit 2, and nothing is
touched (issue 27's fresh-user trial, items 1 and 4).

Reached by any spelling: the same folder with a trailing slash, through ``..``, through a symlink,
or relative to another working directory. No pipeline runs here: the run folders are stand-ins
(the files the commands look for before they read anything). The refusals are asked of
``pipelines.audit.main`` in this process (the ``audit_command`` fixture), each family's one case
also of the process (``process=True``: the same answer, byte for byte) and the other working
directory's case of the process alone."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

from fair_forge_beam.io.session_stats import STATS_SCHEMA_VERSION
from fair_forge_beam.reports.output_folder import check_output_folder


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(root.rglob("*"))}


def _stand_in_run(folder: Path) -> Path:
    """What ``rollup`` and ``trend`` look for before reading: a manifest, ``_SUCCESS``, results.json."""
    (folder / "stats").mkdir(parents=True)
    (folder / "stats" / "manifest.json").write_text(json.dumps({"stats_schema_version": STATS_SCHEMA_VERSION}))
    (folder / "_SUCCESS").write_text('{"run": "x"}\n')
    (folder / "results.json").write_text('{"config": {}, "summary": {}, "metrics": {}}')
    return folder


@pytest.fixture()
def runs(tmp_path):
    for day in ("2026-12-01", "2026-12-02"):
        _stand_in_run(tmp_path / "audits" / day)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "d1.jsonl").write_text("{}\n")
    (tmp_path / "link").symlink_to(tmp_path / "audits" / "2026-12-01")
    (tmp_path / "a-file").write_text("mine")
    return tmp_path


def _run(argv: list, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.audit", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def _one_line_usage_error(proc, *expected):
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and len(err) <= 2 and err[0].count("error:") == 1, proc.stderr
    assert all(e in err[0] for e in expected), err[0]
    assert proc.stdout == ""


ROLLUP_OUTPUTS = {  # --output given -> what the message names
    "audits/2026-12-01": "is audits/2026-12-01",
    "audits/2026-12-01/": "is audits/2026-12-01",
    "audits/../audits/2026-12-02": "is audits/2026-12-02",
    "link": "is audits/2026-12-01",
    "audits/2026-12-01/stats": "inside audits/2026-12-01",
    "audits/2026-12-02/week/deeper": "inside audits/2026-12-02",
    "audits": "holds audits/2026-12-01",
    ".": "is the current folder",  # refused before what it holds (trial48c A: a run would replace the shell's folder)
    "a-file": "a-file is a file",
}


@pytest.mark.parametrize("output", sorted(ROLLUP_OUTPUTS))
def test_rollup_output_is_never_one_of_its_runs(runs, audit_command, output):
    before = _tree(runs)
    proc = audit_command(["rollup", "--quiet", "--from", "audits/2026-12-0*", "--output", output], runs,
                         process=output == "link")
    _one_line_usage_error(proc, "--output", ROLLUP_OUTPUTS[output])
    assert _tree(runs) == before


def test_the_same_checks_from_another_working_directory(runs):
    """Relative paths are resolved against the working directory: ``../audits/...`` from ``logs/``."""
    before = _tree(runs)
    proc = _run(["rollup", "--from", "../audits/*", "--output", "../audits/2026-12-02/"], runs / "logs")
    _one_line_usage_error(proc, "is ../audits/2026-12-02")
    assert _tree(runs) == before


@pytest.mark.parametrize("output, expected", [
    ("logs", "holds logs/d1.jsonl"), ("logs/", "holds logs/d1.jsonl"), (".", "is the current folder"),
    ("logs/d1.jsonl", "is a file"), ("logs/d1.jsonl/x", "inside logs/d1.jsonl"), ("a-file", "is a file"),
])
def test_audit_output_never_holds_or_is_an_input(runs, audit_command, output, expected):
    before = _tree(runs)
    proc = audit_command(["--quiet", "--metrics", "humanity", "--input", "logs/d1.jsonl", "--output", output], runs,
                         process=output == "logs")
    _one_line_usage_error(proc, expected)
    assert _tree(runs) == before


@pytest.mark.parametrize("output, expected", [
    ("audits/2026-12-01", "is audits/2026-12-01"), ("link/trend", "inside audits/2026-12-01"),
    ("audits/2026-12-02/t/", "inside audits/2026-12-02"), ("a-file", "a-file is a file"),
])
def test_trend_output_is_a_folder_outside_the_runs_it_reads(runs, audit_command, output, expected):
    """Not a FileExistsError traceback; and a trend may still be written into a parent of its runs
    (``--output .`` over ``audits/*``: it writes two files and replaces no folder)."""
    before = _tree(runs)
    proc = audit_command(["trend", "audits/2026-12-01", "audits/2026-12-02", "--output", output, "--no-plots"], runs,
                         process=output == "a-file")
    _one_line_usage_error(proc, expected)
    assert _tree(runs) == before


def test_the_folder_checks_are_one_function(tmp_path):
    """Every command calls ``check_output_folder``: its rules, directly."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds"):
        check_output_folder(str(tmp_path / "in"), reads=[str(tmp_path / "in" / "*.jsonl")])  # globs are expanded
    assert check_output_folder(str(tmp_path), reads=[str(tmp_path / "in")], staged=False,
                               may_hold_reads=True) == str(tmp_path)
    assert check_output_folder(str(tmp_path / "new"), reads=["broker:9092", "kafka://topic"]) == str(tmp_path / "new")
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the audit's read-only test covers root")
@pytest.mark.parametrize("command", [["trend", "audits/2026-12-01", "--no-plots"],
                                     ["rollup", "--from", "audits/2026-12-01"]])
def test_an_unwritable_output_is_a_usage_error(runs, command):
    ro = runs / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        proc = _run([*command, "--output", "ro/out"], runs)
    finally:
        ro.chmod(0o755)
    _one_line_usage_error(proc, "cannot write in")
    assert not (runs / "ro" / "out").exists()


@pytest.mark.slow
def test_a_stage_is_never_a_run_and_an_incomplete_run_is_named(runs, monkeypatch):
    """Globs skip the atomic writer's stages (a killed run's ``OUT.staging-<id>`` and its lock); a
    pattern that names only a stage says what it is; a run whose manifest is cut short is a usage
    error naming it, not a traceback (issue 27 trial, item 3)."""
    stage = runs / "audits" / "2026-12-03.staging-20261203T023000Z-0badf00d"
    _stand_in_run(stage)
    Path(f"{stage}.lock").write_text("")
    from fair_forge_beam.reports.trend import find_runs
    from fair_forge_beam.rollup import resolve_runs

    monkeypatch.chdir(runs)
    assert resolve_runs(["audits/*"]) == ["audits/2026-12-01", "audits/2026-12-02"]
    assert find_runs(["audits/*"]) == ["audits/2026-12-01", "audits/2026-12-02"]
    for argv in (["rollup", "--from", "audits/2026-12-03.staging-*", "--output", "r"],
                 ["trend", str(stage.relative_to(runs)), "--output", "t"]):
        _one_line_usage_error(_run(argv, runs), "2026-12-03.staging-20261203T023000Z-0badf00d is the stage of")
    (runs / "audits" / "2026-12-02" / "stats" / "manifest.json").write_text(f'{{"stats_schema_version": {STATS_SCHEMA_VERSION}, "con')
    _one_line_usage_error(_run(["rollup", "--from", "audits/2026-12-02", "--output", "r"], runs),
                          "audits/2026-12-02: stats/manifest.json cannot be read")
    _one_line_usage_error(_run(["rollup", "--from", "audits/*", "--output", "r"], runs),
                          "audits/2026-12-01: stats/manifest.json is incomplete (no config, options)")
    assert not (runs / "r").exists() and not (runs / "t").exists()


@pytest.mark.parametrize("fields, says", [
    ({"run_id": "r1", "audit_runs": "abc"}, "audit_runs must be"),  # the trial's double count: read as absent
    ({"run_id": "r1", "audit_runs": []}, "audit_runs must be"),
    ({"run_id": "r1", "audit_runs": [1]}, "audit_runs must be"),
    ({"run_id": "r1"}, "audit_runs must be"),
    ({"audit_runs": ["r1"]}, "run_id must be"),
    ({"run_id": 7, "audit_runs": ["r1"]}, "run_id must be"),
    ({"stats_schema_version": str(STATS_SCHEMA_VERSION)}, "schema version"),
    ({"stats_schema_version": float(STATS_SCHEMA_VERSION)}, "schema version"),
    ({"stats_schema_version": True}, "schema version"),
    ({"stats_schema_version": None}, "schema version"),
    # issue 28: the files a roll-up reads, each with its size and sha256 (hash28)
    ({"run_id": "r1", "audit_runs": ["r1"]}, "incomplete \\(no files\\)"),
    ({"run_id": "r1", "audit_runs": ["r1"], "files": ["stats/x"]}, "invalid \\(files is list, not an object\\)"),
    ({"run_id": "r1", "audit_runs": ["r1"], "files": {"stats/x": {"size": "1", "sha256": "0" * 64}}},
     'files\\["stats/x"\\] is not \\{size, sha256\\}'),
    ({"run_id": "r1", "audit_runs": ["r1"], "files": {"stats/x": {"size": 1, "sha256": "0" * 63}}}, "is not \\{size"),
    ({"run_id": "r1", "audit_runs": ["r1"], "files": {"stats/x": {"size": 1, "sha256": "0" * 64}}},
     "stats/x is missing \\(stats/manifest.json lists it, 1 bytes\\)"),
])
def test_a_malformed_manifest_field_is_refused_never_read_as_absent(tmp_path, fields, says):
    """A manifest field of the wrong shape is an invalid run (a usage error naming it), never read as
    a missing field: a fresh-user trial set ``audit_runs`` to ``"abc"`` and a roll-up of the run and
    its copy counted the same audit twice (exit 0, 28 interactions instead of 14)."""
    from fair_forge_beam.rollup import load_manifests

    run = tmp_path / "run"
    (run / "stats").mkdir(parents=True)
    manifest = {"stats_schema_version": STATS_SCHEMA_VERSION, "config": {}, "options": {}, **fields}
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=says):
        load_manifests([str(run)])
    del manifest["stats_schema_version"]
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="incomplete \\(no stats_schema_version\\)"):
        load_manifests([str(run)])


# Issue 28 (second hostile report), item 4.
@pytest.mark.slow
def test_an_output_where_nothing_can_be_created_is_a_usage_error(runs):
    """``--output /proc/h2out``: access(2) answers yes to root for /proc, so the check passed and the
    run died in a FileNotFoundError traceback (exit 1). The check now makes (and removes) a probe
    folder where the run will write: any refusal is the one-line usage error."""
    for output in ("/proc/h2out", "/proc/self/h2/out"):
        proc = _run(["--quiet", "--metrics", "humanity", "--input", "logs/d1.jsonl", "--output", output], runs)
        _one_line_usage_error(proc, "--output", "cannot ")
    with pytest.raises(ValueError, match="^--output: cannot write in the folder of /proc/x"):
        check_output_folder("/proc/x")
    before = _tree(runs)
    mtime = (runs / "logs").stat().st_mtime_ns
    assert check_output_folder(str(runs / "logs" / "out")) == str(runs / "logs" / "out")  # the probe leaves no trace
    assert _tree(runs) == before and (runs / "logs").stat().st_mtime_ns == mtime


@pytest.mark.parametrize("pattern, says", [
    ("logs/*", "can match the output folder itself"), ("logs/**/*.jsonl", "can match files inside it"),
    ("logs/o?t/*.jsonl", "can match files inside it"), ("*/out", "can match the output folder itself"),
])
def test_an_input_pattern_that_can_match_the_output_is_refused_on_the_first_run_too(runs, audit_command, pattern, says):
    """``--input 'io2/*' --output io2/out`` ran the first time (io2/out did not exist yet) and was a
    usage error the second ('is io2/out, which this command reads'): the pattern is judged by what
    it can match, so both runs are refused, naming it."""
    before = _tree(runs)
    proc = audit_command(["--quiet", "--metrics", "humanity", "--input", pattern, "--output", "logs/out"], runs,
                         process=pattern == "*/out")
    _one_line_usage_error(proc, "--output logs/out", f"the pattern {pattern!r}", says)
    assert _tree(runs) == before and not (runs / "logs" / "out").exists()
    with pytest.raises(ValueError, match="can match"):  # through a symlinked folder too
        check_output_folder(str(runs / "link" / "out"), reads=[str(runs / "audits" / "2026-12-01" / "*")])
    out = str(runs / "logs" / "out")
    assert check_output_folder(out, reads=[str(runs / "logs" / "*.jsonl"), str(runs / "logs" / "d?.jsonl")]) == out


@pytest.mark.slow
def test_a_narrow_pattern_beside_the_output_runs_twice(runs):
    data = runs / "io"
    data.mkdir()
    (data / "a.jsonl").write_text(json.dumps({"session_id": "s", "assistant_id": "bot", "conversation": [
        {"qa_id": "q", "query": "Can you help?", "assistant": "Glad to help, thank you."}]}) + "\n")
    for _ in range(2):
        proc = _run(["--quiet", "--no-report", "--metrics", "humanity", "--input", "io/*.jsonl", "--output", "io/out"],
                    runs)
        assert proc.returncode == 0, proc.stderr
        assert (data / "out" / "_SUCCESS").is_file()


def test_the_audits_default_output_is_named_as_the_default(tmp_path, capsys, monkeypatch):
    """trial39b B10: with no ``--output``, a refusal named "--output fair_forge_output", an option never typed:
    it says "the default --output"."""
    from pipelines import audit

    shutil.copy(REPO / "fair_forge_beam" / "data" / "examples" / "fair_forge_examples.json", tmp_path / "in.json")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        audit.main(["--input", "*", "--metrics", "humanity", "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: the default --output fair_forge_output: the pattern" in err, err
