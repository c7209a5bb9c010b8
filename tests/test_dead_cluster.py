"""trial39 T6 + T10: a local Flink cluster that is not there never makes a run wait or run elsewhere.

* ``flink_cluster args`` (and :meth:`FlinkCluster.attach`) refuse a cluster whose recorded processes
  ended (killed, a restart without ``stop``): exit 1, one line. Before, it printed the options of the
  dead ports and the audit waited up to ``--job_server_timeout`` (86400 s on this cluster).
* With no live cluster, ``args`` prints an option every command refuses in one line, so
  ``fair-forge-beam … $(… args)`` never runs in memory and exits 0 as if it ran on Flink.
* The launcher checks that a ``--job_endpoint`` answers within seconds before it waits on the job
  (a dead endpoint took 303 s with Beam's default timeout)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from fair_forge_beam.testing import flink_cluster as fc
from helpers import REPO


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _record(folder, pids) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.json").write_text(json.dumps({
        "task_managers": 2, "pids": pids, "rest_port": 1, "job_port": 1, "artifact_port": 2, "parallelism": 2,
        "share_classpath": True, "stage_jars": True}), encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_args_refuses_a_cluster_whose_processes_ended(tmp_path, capsys):
    folder = tmp_path / "flink"
    _record(folder, [_dead_pid(), _dead_pid()])
    with pytest.raises(fc.ClusterGone):
        fc.FlinkCluster.attach(folder)
    assert fc.main(["args", "--dir", str(folder)]) == 1
    out, err = capsys.readouterr()
    assert out.split() == [f"--job_endpoint={fc.NO_CLUSTER_ENDPOINT}"]
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"no live cluster in {folder}"), err
    assert fc.main(["stop", "--dir", str(folder)]) == 0  # stop still cleans it up
    assert not (folder / "cluster.json").exists()


def test_args_without_a_cluster_prints_an_option_that_fails_the_run(tmp_path, capsys):
    assert fc.main(["args", "--dir", str(tmp_path / "none")]) == 1
    out, err = capsys.readouterr()
    assert out.split() == [f"--job_endpoint={fc.NO_CLUSTER_ENDPOINT}"] and "no cluster recorded" in err
    from pipelines import audit

    with pytest.raises(SystemExit) as exit_:
        audit.run(["--metrics", "humanity", "--output", str(tmp_path / "out"), *out.split()])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found no live cluster" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_dead_job_endpoint_is_told_in_seconds(monkeypatch):
    from fair_forge_beam import beam_pipeline as bp
    from fair_forge_beam.console import runner_start_failure

    options = bp.pipeline_options(["--runner=PortableRunner", f"--job_endpoint=127.0.0.1:{_free_port()}",
                                   "--job_server_timeout=86400"])
    t0 = time.monotonic()
    with pytest.raises(bp.JobEndpointUnanswered) as err:
        with bp.run_pipeline(options) as p:
            p | bp.beam.Create([1])
    assert time.monotonic() - t0 < bp.JOB_ENDPOINT_WAIT + 5
    line = runner_start_failure(err.value)
    assert line.startswith("no answer from the job service in time (--job_endpoint 127.0.0.1:") and "\n" not in line


@pytest.mark.slow
def test_the_audit_on_a_dead_endpoint_ends_in_one_line(tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pipelines.audit", "--metrics", "humanity", "--no-report", "--quiet",
                          "--output", str(out), "--runner", "PortableRunner", f"--job_endpoint=127.0.0.1:{_free_port()}",
                          "--job_server_timeout=86400"], cwd=REPO, capture_output=True, text=True, timeout=120)
    err = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.returncode == 1 and len(err) == 1, run.stderr[-3000:]
    assert "no answer from the job service in time (--job_endpoint 127.0.0.1:" in err[0], err
    assert err[0].endswith(f"nothing was written ({out} was not created)"), err  # docs/reliability.md's wording
    assert time.monotonic() - t0 < 60 and not out.exists()
