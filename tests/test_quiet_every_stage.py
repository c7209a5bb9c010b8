"""``--quiet`` means quiet on every runner and in every stage (trial46): a quiet Prism run printed
Prism's own ``INFO PrismRunner: Serving JobManagement`` and ``pipeline done!`` (Beam relays the Go
binary's output on a logger of its own naming, set to INFO by Beam itself as the job service starts),
every Prism run printed ``WARNING … Really starting service at …``, and ``python -m pipelines.loop --quiet``
silenced its audit only: the generate and run stages printed their INFO lines (2 lines on the in-memory
runner, 90-106 with ``--direct_running_mode=multi_processing --direct_num_workers=2``: the SDK workers'
own logs)."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from helpers import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_beams_relayed_service_output_is_dropped_below_error_by_quiet():
    """What Beam logs of a job service's output (``apache_beam/utils/subprocess_server.py``'s
    ``log_stdout``, on the logger ``PrismJobServer`` that Beam sets to INFO, renamed ``PrismRunner`` by
    Beam's Prism filter) is dropped by ``--quiet`` below ERROR, whatever logger carried it; Prism's
    errors and the caller's own lines on its own logger are kept; without ``--quiet`` all are shown.
    Fails before: ``QuietLogs`` raised the ``apache_beam`` logger, which that logger is not."""
    from apache_beam.runners.portability.prism_runner import PrismRunnerLogFilter
    from apache_beam.utils import subprocess_server

    from fair_forge_beam.progress import QuietLogs

    root = logging.getLogger()
    seen: list = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append((record.levelname, record.name, record.getMessage()))

    handler = Keep(logging.DEBUG)
    job_server = logging.getLogger("PrismJobServer")
    prism_filter = PrismRunnerLogFilter()
    before = (root.level, job_server.level)
    root.addHandler(handler)
    job_server.addFilter(prism_filter)
    job_server.setLevel(logging.INFO)  # as Beam's SubprocessJobServer.start does
    root.setLevel(logging.INFO)

    def relayed(line: str) -> None:  # a record as Beam's log_stdout makes it
        job_server.handle(job_server.makeRecord(job_server.name, logging.INFO, subprocess_server.__file__, 277,
                                                line, (), None, func="log_stdout"))

    def lines(quiet: bool) -> list:
        seen.clear()
        with QuietLogs() as levels:
            if quiet:
                levels.quiet()
            relayed('{"time":"2026-12-07T14:54:11.456Z","level":"INFO","msg":"Serving JobManagement","endpoint":"localhost:1"}')
            relayed('{"time":"2026-12-07T14:54:11.456Z","level":"ERROR","msg":"job failed","job":"job-001"}')
            logging.getLogger("a_callers_own").warning("the caller's own line")
        return [(level, name) for level, name, _ in seen]

    try:
        assert lines(quiet=True) == [("ERROR", "PrismRunner"), ("WARNING", "a_callers_own")]
        assert lines(quiet=False) == [("INFO", "PrismRunner"), ("ERROR", "PrismRunner"), ("WARNING", "a_callers_own")]
        assert not any(f for f in handler.filters)  # the run's filter is removed with it
    finally:
        root.removeHandler(handler)
        job_server.removeFilter(prism_filter)
        root.setLevel(before[0])
        job_server.setLevel(before[1])


def test_the_start_of_a_service_beam_started_is_not_a_warning(caplog):
    """trial46 B3: every Prism run began with ``WARNING apache_beam.utils.subprocess_server: Really
    starting service at localhost:34985 with cmd: (...)``: a DEBUG record now, as the stop's."""
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    log = logging.getLogger("apache_beam.utils.subprocess_server")
    with caplog.at_level(logging.INFO):
        log.warning("Really starting service at %s with cmd: %s", "localhost:34985", ("/x/prism-v2.77.0",))
        log.warning("Port %s already in use", 8099)
    assert "Really starting" not in caplog.text and "Port 8099 already in use" in caplog.text


@pytest.mark.slow  # Prism and a command end to end: 10.6-11.9 s in session 31's full runs (docs/testing.md: Tiers)
@pytest.mark.parametrize("quiet", [True, False])
def test_a_prism_run_prints_no_line_with_quiet_and_no_service_start_warning_without(quiet, tmp_path):
    """The real command on Prism (README's examples, Humanity): with ``--quiet`` nothing on stdout or
    stderr (was 2 INFO lines of Prism's); without, no ``Really starting service`` warning. 4-6 s each."""
    from fair_forge_beam.testing import beam_runners as rn
    from test_runners_integration import _require

    _require("prism")
    proc = subprocess.run([sys.executable, "-m", "pipelines.launcher", "--metrics", "humanity", "--no-report",
                           "--output", str(tmp_path / "out"), "--runner=PrismRunner",
                           f"--prism_location={rn.prism_binary()}", *(["--quiet"] if quiet else [])],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out" / "results.json").exists()
    if quiet:
        assert (proc.stdout, proc.stderr) == ("", ""), proc.stderr[-3000:]
    else:
        assert "PrismRunner: pipeline done!" in proc.stderr  # Prism's own lines are shown without --quiet
        assert "Really starting service" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr[-3000:]


def _quiet_loop(tmp_path, *beam_args: str) -> subprocess.CompletedProcess:
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    def generator(req):
        return {"queries": [{"query": "How many bags can a gold member check?"}], "chunk_summary": "baggage"}

    with ScriptedOpenAIServer(generator) as gen, ScriptedOpenAIServer("Two bags, glad to help.") as bot:
        proc = subprocess.run(
            [sys.executable, "-m", "pipelines.loop", "--corpus", "airline", "--num-samples", "1", "--chunks-per-sample",
             "1", "--num-queries", "1", "--generator-base-url", gen.base_url, "--generator-model", "gen",
             "--generator-cache", str(tmp_path / "gen.sqlite3"), "--assistant-url", bot.base_url,
             "--assistant-model", "bot", "--metrics", "humanity", "--no-report", "--quiet",
             "--output", str(tmp_path / "out"), *beam_args],
            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
        assert gen.count() > 0 and bot.count() > 0  # every stage ran
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out" / "audit" / "results.json").exists()
    return proc


@pytest.mark.slow  # the loop's three stages end to end: 14.8-15.8 s in session 31's full runs
def test_the_loops_quiet_silences_every_stage(tmp_path):
    """``python -m pipelines.loop … --quiet`` prints nothing (was 2 INFO lines of its generate stage). About 6 s."""
    proc = _quiet_loop(tmp_path)
    assert (proc.stdout, proc.stderr) == ("", ""), proc.stderr[-3000:]


@pytest.mark.slow
def test_the_loops_quiet_reaches_every_stages_multi_process_workers(tmp_path):
    """The same with ``--direct_running_mode=multi_processing --direct_num_workers=2``: nothing printed
    (was 90 lines, mostly the generate and run stages' SDK workers' own logs). 20-45 s."""
    proc = _quiet_loop(tmp_path, "--direct_running_mode=multi_processing", "--direct_num_workers=2")
    assert (proc.stdout, proc.stderr) == ("", ""), proc.stderr[-3000:]


def _refused_loop(tmp_path, *beam_args: str) -> subprocess.CompletedProcess:
    """The quiet loop whose generator's port is closed (every request refused): an empty run, exit code 4."""
    import socket

    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with ScriptedOpenAIServer("Two bags, glad to help.") as bot:
        proc = subprocess.run(
            [sys.executable, "-m", "pipelines.loop", "--corpus", "airline", "--num-samples", "1", "--chunks-per-sample",
             "1", "--num-queries", "1", "--generator-base-url", f"http://127.0.0.1:{port}/v1", "--generator-model", "gen",
             "--generator-retries", "1", "--generator-cache", str(tmp_path / "gen.sqlite3"), "--assistant-url",
             bot.base_url, "--assistant-model", "bot", "--metrics", "humanity", "--no-report", "--quiet",
             "--output", str(tmp_path / "out"), *beam_args],
            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
        assert bot.count() == 0  # no question, nothing asked
    assert proc.returncode == 4, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("beam_args", [(), ("--direct_running_mode=multi_processing", "--direct_num_workers=2")],
                         ids=["in-memory", "multi-process"])
def test_a_quiet_loop_whose_generator_is_refused_says_its_one_line_only(tmp_path, beam_args):
    """fix47b: each failed request of the generator's batches was an ERROR line of Beam's ``RemoteModelHandler``
    (``exception raised as part of request, got …``), printed under ``--quiet`` before the empty run's line, which
    says the same (one per attempt of the batch: 1 line in memory here, 3 with the default retries; with multi-process
    workers each twice, the worker's own line and the launcher's relay: 2, 6). They are warnings now, and a worker's
    record is shown by the launcher alone. 10-20 s in memory, 20-40 s with two worker processes."""
    proc = _refused_loop(tmp_path, *beam_args)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m pipelines.loop: empty run: the generator made no "
                                                   "question"), proc.stderr[-3000:]
    assert "the connection was refused" in lines[0] and proc.stdout == ""
