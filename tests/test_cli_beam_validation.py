"""Issue 28, trial 28f B7 (fix28z): Beam's pipeline-option validation, before any work starts, on
every command that passes options to Beam. Contract: a user's mistake is one line on stderr naming the
option and what to do, exit 2, before any work starts."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import FNAPI, REPO


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------ B7: Beam's own option validation
BEAM_SHAPES = {  # Beam options -> what the one line names
    "dataflow, nothing else": (["--runner", "DataflowRunner"], ["--project is missing", "--region is missing",
                                                               "--temp_location is missing"]),
    "dataflow without --temp_location": (["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1"],
                                         ["--temp_location is missing"]),
    "dataflow, a project description": (["--runner=DataflowRunner", "--project=My Project", "--region=europe-west1",
                                         "--temp_location=gs://my-bucket/tmp"], ["Invalid Project ID (My Project)"]),
    "dataflow, temp_location not on gs://": (["--runner=DataflowRunner", "--project=my-project", "--region=r",
                                              "--temp_location=/tmp/x"], ["Invalid GCS path (/tmp/x)"]),
    "flink, a port that is no number": (["--runner=FlinkRunner", "--flink_master=flink.example.com:80a81"],
                                        ["--flink_master 'flink.example.com:80a81'"]),
    "flink, another scheme": (["--runner=FlinkRunner", "--flink_master=ftp://flink.example.com:8081"],
                              ["--flink_master 'ftp://flink.example.com:8081'", "scheme 'ftp'"]),
    "portable, no port": (["--runner=PortableRunner", "--job_endpoint=localhost"], ["--job_endpoint 'localhost': no port"]),
    "PROCESS workers without a command": (["--runner=PortableRunner", "--job_endpoint=localhost:8099",
                                           "--environment_type=PROCESS"], ["process_command is required"]),
    "an unknown runner": (["--runner=FlinkRuner"], ["--runner", "FlinkRuner", "did you mean 'FlinkRunner'"]),
}


@pytest.mark.parametrize("shape", sorted(BEAM_SHAPES))
def test_beam_s_option_validation_is_one_line_before_any_work(shape, tmp_path, capsys, no_network):
    """B7: ``--runner DataflowRunner`` without ``--project``/``--region`` was a 40-line traceback from
    ``beam.Pipeline`` (and a Flink address Beam hands to its job server unchecked, after fetching a jar):
    now parsing the options refuses them, Beam's messages kept, the missing ones named by their flag."""
    from pipelines.audit import parse_args

    beam, words = BEAM_SHAPES[shape]
    with pytest.raises(SystemExit) as exc:
        parse_args(["--output", str(tmp_path / "out"), *beam])
    line = _one_line(capsys)
    assert exc.value.code == 2 and line.startswith("fair-forge-beam: error: ")
    for w in words:
        assert w in line, (w, line)
    assert not list(tmp_path.iterdir())


def test_a_config_file_s_beam_table_and_other_commands_are_checked_the_same_way(tmp_path, capsys, no_network):
    """The class: every command that passes options to Beam (the one place, ``reject_unknown_arguments``)."""
    from pipelines.audit import parse_args

    cfg = tmp_path / "a.toml"
    cfg.write_text('[beam]\nrunner = "DataflowRunner"\nproject = "my-project"\n')
    with pytest.raises(SystemExit) as exc:
        parse_args(["--config", str(cfg), "--output", str(tmp_path / "out")])
    assert exc.value.code == 2 and "--region is missing" in _one_line(capsys)
    from fair_forge_beam.rollup import main as rollup

    with pytest.raises(SystemExit) as exc:
        rollup(["--from", str(tmp_path / "r*"), "--output", str(tmp_path / "o"), "--runner=DataflowRunner"])
    line = _one_line(capsys)
    assert exc.value.code == 2 and line.startswith("fair-forge-beam rollup: error: ") and "--project is missing" in line


def test_options_beam_accepts_still_parse(tmp_path, no_network):
    from pipelines.audit import parse_args

    for beam in (["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
                  "--temp_location=gs://my-bucket/tmp"], ["--runner=FlinkRunner", "--flink_master=[local]"],
                 ["--runner=FlinkRunner", "--flink_master=http://flink.example.com:8081"],
                 ["--runner=PortableRunner", "--job_endpoint=localhost:8099"], [f"--runner={FNAPI}"], []):
        parse_args(["--output", str(tmp_path / "out"), *beam])


def test_dataflow_without_project_from_the_console_script_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipelines.launcher", "--runner", "DataflowRunner", "--output",
                           str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-3000:]
    assert "--project is missing" in err[0] and "--region is missing" in err[0]
