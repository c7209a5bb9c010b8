"""Issue 28, trial 28f (fix28z): ``--config`` on a FIFO nobody writes to waited for ever. Every file
the command line reads before the pipeline starts is refused as a FIFO, socket or device before it
is opened (B11's check, :func:`fair_forge_beam.io.edge.check_regular_file`); a pipe the shell hands
the process (``--config <(...)``) is still read."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import FNAPI, REPO


def _audit(args, cwd, timeout=120):
    return subprocess.run([sys.executable, "-m", "pipelines.launcher", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_config_on_a_fifo_nobody_writes_to_is_one_line_not_a_wait(tmp_path):
    os.mkfifo(tmp_path / "audit.toml")
    proc = _audit(["--config", str(tmp_path / "audit.toml"), "--output", str(tmp_path / "out")], tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-2000:]
    assert "--config" in err[0] and "is a FIFO (named pipe), not a regular file; not read" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_config_from_the_shell_s_pipe_is_still_read(tmp_path):
    """``--config <(cat audit.toml)``: the shell hands ``/dev/fd/N``, a pipe whose writer it started."""
    from pipelines.audit import parse_args

    r, w = os.pipe()
    try:
        os.write(w, f'output = "{tmp_path / "nightly"}"\nmode = "bayesian"\n'.encode())
        os.close(w)
        args, _, _ = parse_args(["--config", f"/dev/fd/{r}"])
    finally:
        os.close(r)
    assert args.output == str(tmp_path / "nightly") and args.mode == "bayesian"


def test_is_process_pipe_tells_the_shell_s_pipe_from_a_named_fifo(tmp_path):
    from fair_forge_beam.io.edge import is_process_pipe

    os.mkfifo(tmp_path / "f")
    os.symlink(tmp_path / "f", tmp_path / "link")
    r, w = os.pipe()
    try:
        assert is_process_pipe(f"/dev/fd/{r}") and is_process_pipe(f"/proc/self/fd/{r}")
    finally:
        os.close(r), os.close(w)
    assert not is_process_pipe(tmp_path / "f") and not is_process_pipe(tmp_path / "link")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["baseline", "compare", "privacy-domain", "seed-prompt-file", "emotion-lexicon-csv",
                                  "input"])
def test_every_file_read_before_the_pipeline_is_refused_as_a_fifo(case, tmp_path):
    """The class: each file the audit opens before its pipeline starts, as a FIFO (a run folder's
    results.json for --baseline and --compare), is one line, exit 2, within the timeout."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "results.json")
    args = {"baseline": ["--baseline", str(run), "--gate", "regression humanity not worse"],
            "compare": ["--compare", str(run)],
            "privacy-domain": ["--metrics", "privacy", "--privacy-domain", str(fifo)],
            "seed-prompt-file": ["--metrics", "prompt_evaluator", "--seed-prompt-file", str(fifo),
                                 "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"],
            "emotion-lexicon-csv": ["--emotion-lexicon-csv", str(fifo)],
            "input": ["--input", str(fifo)]}[case]
    proc = _audit([*args, "--output", str(tmp_path / "out"), "--no-report", f"--runner={FNAPI}"], tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-2000:]
    assert "FIFO" in err[0] and "Traceback" not in proc.stderr
