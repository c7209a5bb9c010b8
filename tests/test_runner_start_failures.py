"""A run whose runner cannot start ends in one line with Beam's own reason and exit 1, nothing
published (trial 28f: ``--runner FlinkRunner`` with a job-server jar the repository answers 404 for
printed a 190-line traceback; a ``--job_endpoint`` nobody answers at, 62 lines). The failure is
told by where it was raised — Beam starting a job server or connecting to its job service — never
by its text; any other failure keeps its traceback."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from fair_forge_beam.console import runner_start_failure
from helpers import REPO

JAR = ("Unable to fetch remote job server jar at https://repo.example/beam-runners-flink-job-server.jar: "
       "HTTP Error 404: Not Found. If no Internet access at runtime, stage the jar at /cache/jars/x.jar")


def _raised_in(path: str, function: str, exc: BaseException) -> BaseException:
    """``exc`` as raised by ``function`` of a module whose file is ``path`` (Beam's, by its name)."""
    code = compile(f"def {function}(e):\n    raise e\n", path, "exec")
    scope: dict = {}
    exec(code, scope)  # noqa: S102 - a function whose frame names Beam's file, for the classifier
    try:
        scope[function](exc)
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("not raised")


def test_it_is_told_by_the_frames_beam_raised_it_through():
    site = "/venv/lib/python3.11/site-packages/apache_beam/"
    jar = _raised_in(site + "utils/subprocess_server.py", "local_jar", RuntimeError(JAR + "\nsecond line"))
    assert runner_start_failure(jar) == JAR
    timeout = type("FutureTimeoutError", (Exception,), {})
    waited = _raised_in(site + "runners/portability/job_server.py", "start", timeout())
    assert runner_start_failure(waited) == "no answer from the job service in time (--job_server_timeout)"
    created = _raised_in(site + "runners/portability/portable_runner.py", "create_job_service", ValueError("refused"))
    assert runner_start_failure(created) == "refused"
    try:  # in a cause, as a command re-raises it
        try:
            raise jar
        except RuntimeError as inner:
            raise ValueError("the audit failed") from inner
    except ValueError as outer:
        assert runner_start_failure(outer) == JAR
    # the same text raised anywhere else, or another function of portable_runner.py: not this class
    assert runner_start_failure(RuntimeError(JAR)) is None
    assert runner_start_failure(_raised_in(site + "runners/portability/portable_runner.py", "wait_until_finish",
                                           RuntimeError("Pipeline failed"))) is None


@pytest.mark.slow
def test_an_unanswered_job_endpoint_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as s:  # a port nobody listens at
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "pipelines.audit", "--metrics", "humanity", "--no-report", "--quiet",
                          "--output", str(out), "--runner", "PortableRunner", f"--job_endpoint=127.0.0.1:{port}",
                          "--job_server_timeout=3"], cwd=REPO, capture_output=True, text=True, timeout=300)
    err = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.returncode == 1, run.stderr[-3000:]
    assert len(err) == 1, err
    assert err[0].startswith("fair-forge-beam: error: the audit stopped: Beam could not start the runner's job server "
                             "or a service the run needs: no answer from the job service in time"), err
    assert err[0].endswith(f"nothing was written ({out} was not created)") and not out.exists(), err
