"""What one run of a command says once or counts is the run's, not the process's (trial44 B2-B8).

A notebook or a service calls ``pipelines.audit.main([...])`` again and again in one process, or in two
threads at once: each call must behave as the same call alone. Before, the process kept the first
call's log stream, the warnings it had said (an unset key variable, an input file matched twice, Beam's
own), its progress tallies and one more log filter per call; and Ctrl-C inside a loop of calls was
returned as 130, so the loop went on. Each test makes two calls in a row (or at once) in this process.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import threading

import pytest


def _session(sid: str, n: int = 2) -> dict:
    return {"session_id": sid, "assistant_id": "bot", "language": "english",
            "conversation": [{"qa_id": f"{sid}-q{i}", "query": f"question {i}", "assistant": f"Glad to help ({i})."}
                             for i in range(n)]}


@contextlib.contextmanager
def bare_root():
    """The root logger as a process that configured no logging has it (pytest's capture handlers taken
    off for the block): the command makes its handler. Restored after."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    root.handlers[:] = []
    try:
        yield root
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.slow
def test_two_audits_in_a_row_each_say_their_own_lines_on_their_own_stderr(tmp_path):
    """trial44 B3 (capture.py), B2 (once.py), B4 (beamonce.py): a service that captures each call's stderr
    (``contextlib.redirect_stderr``) found call 2's log lines in call 1's buffer (``basicConfig`` bound the
    handler to the stream of call 1), and call 2 said neither 'matched by 2 --input patterns' nor Beam's
    warning about ``--direct_num_workers`` (said once a process). Each buffer has its call's lines, each
    once."""
    from pipelines.audit import main

    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps(_session(f"s{i}")) + "\n" for i in range(3)), encoding="utf-8")
    bufs = []
    with bare_root():
        for i in (1, 2):
            buf = io.StringIO()
            with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
                assert main(["--metrics", "humanity", "--no-report", "--input", str(tmp_path / "a.json*"), "--input",
                             str(data), "--direct_num_workers", "2", "--output", str(tmp_path / f"out{i}")]) == 0
            bufs.append(buf.getvalue())
    for i, text in enumerate(bufs, 1):
        assert text.count("fair_forge_beam.audit: reading") == 1, (i, text)
        assert text.count("is matched by 2 --input patterns") == 1, (i, text)
        assert text.count("direct_num_workers is not equal to 1") == 1, (i, text)
        assert str(tmp_path / f"out{3 - i}") not in text, (i, text)  # nothing of the other call


def test_an_unset_key_variable_is_warned_about_by_each_audit_of_the_process(tmp_path, caplog, monkeypatch):
    """trial44 B3 (once.py): the remote runner's 'unset or empty here' warning was said by the first audit
    of a process only (``options._WARNED_KEYS``); each audit says it once."""
    from fair_forge_beam.reports.empty_run import EmptyRun
    from pipelines.audit import main

    monkeypatch.delenv("FFB_T44_KEY", raising=False)
    remote = ["--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
              "--judge-api-key-env", "FFB_T44_KEY", "--runner", "FlinkRunner", "--flink_master", "flink.example.invalid:8081",
              "--input", str(tmp_path / "none" / "*.jsonl")]  # matches nothing: the run ends before Beam starts
    said = []
    for i in (1, 2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fair_forge_beam.options"), pytest.raises(EmptyRun):
            main(remote + ["--output", str(tmp_path / f"k{i}")])
        said.append([r.getMessage() for r in caplog.records if r.name == "fair_forge_beam.options"])
    for warned in said:
        assert len(warned) == 1 and "'FFB_T44_KEY' is unset or empty here" in warned[0], said


def test_a_repeated_input_warning_is_said_once_a_run_and_in_each_run(caplog):
    """trial44 B2: ``read.warn_repeated_inputs`` was cached for the process (said by the first audit only).
    A command that builds its reader twice (a check, then the run) still says it once."""
    from fair_forge_beam.console import guarded
    from fair_forge_beam.io.read import warn_repeated_inputs

    def command():
        warn_repeated_inputs("input file x is matched by 2 --input patterns")
        warn_repeated_inputs("input file x is matched by 2 --input patterns")
        return 0

    counts = []
    for _ in (1, 2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fair_forge_beam.io.read"):
            assert guarded(command, "audit") == 0
        counts.append(sum("matched by 2" in r.getMessage() for r in caplog.records))
    assert counts == [1, 1]


def test_beams_repeated_warning_is_shown_once_a_run_and_in_each_run(monkeypatch):
    """trial44 B4: ``progress._BeamWarningsOnce`` kept what it had shown for the process: Beam's warning
    about the user's own option was shown by the first audit only. Shown once in each run."""
    from fair_forge_beam.console import guarded
    from fair_forge_beam.progress import cli_logging

    buf = io.StringIO()
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.StreamHandler(buf)])
    beam_log = logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner")

    def command():
        cli_logging()
        for _ in range(3):  # as Beam logs it per worker thread, DoFn or model load
            beam_log.warning("If direct_num_workers is not equal to 1, direct_running_mode should be ...")
        return 0

    counts = []
    for _ in (1, 2):
        assert guarded(command, "audit") == 0
        counts.append(buf.getvalue().count("direct_num_workers is not equal to 1"))
        buf.seek(0), buf.truncate()
    assert counts == [1, 1]


def test_two_audits_in_two_threads_count_their_progress_apart():
    """trial44 B7 (threads.py): two audits at once in one process (a service's two threads) merged their
    progress lines (one tally for the process). Each run's reporter counts its own run."""
    from fair_forge_beam.console import guarded
    from fair_forge_beam.progress import NAMESPACE, ProgressCounter, ProgressReporter

    both = threading.Barrier(2, timeout=30)
    seen = {}

    def audit(name: str, n: int) -> None:
        def command():
            with ProgressReporter(interval=60) as reporter:
                ProgressCounter("read").inc(n)  # as the reader counts, in the thread that runs the bundle
                both.wait()  # the other audit has counted too
                seen[name] = reporter.counts().get((NAMESPACE, "read"))
                both.wait()
            return 0

        guarded(command, "audit")

    threads = [threading.Thread(target=audit, args=(name, n)) for name, n in (("A", 3), ("B", 5))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert seen == {"A": 3, "B": 5}


def test_each_call_logs_to_the_stderr_of_that_call():
    """trial44 B3 (capture.py): the root handler the first ``main()`` call made (``basicConfig``) wrote to
    that call's stderr for the life of the process: a service capturing each call's stderr found call 2's
    log lines in call 1's buffer, and none in call 2's."""
    from pipelines.audit import main

    bufs = []
    with bare_root():
        for _ in (1, 2):
            buf = io.StringIO()
            with contextlib.redirect_stderr(buf):
                with pytest.raises(SystemExit):
                    main(["--mode", "bogus"])  # a usage error: the command's logging is made, nothing runs
                logging.getLogger("fair_forge_beam.audit").warning("a line of this call")
            bufs.append(buf.getvalue())
    assert [b.count("a line of this call") for b in bufs] == [1, 1], bufs


def test_each_call_adds_no_log_filter():
    """trial44 B8 (filters.py): each ``main()`` call added one more 'apitools' filter to the root handler
    (1,002 after 1,000 calls; 791 µs per log record instead of 31)."""
    from pipelines.audit import main

    filters = []
    with bare_root() as root:
        for _ in (1, 2):
            with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
                main(["--mode", "bogus"])
            filters.append([[type(f).__name__ for f in h.filters] for h in root.handlers])
    assert len(filters[0]) == 1 and filters[0] == filters[1] and len(filters[0][0]) == 3, filters


def test_ctrl_c_stops_a_loop_of_audits_called_from_python(tmp_path, capsys, monkeypatch):
    """trial44 B5 (replaced.py): ``main()`` called from Python turned Ctrl-C into ``return 130``, so a
    notebook's ``for …: main(…)`` went on with the next audit. The call says its one line, removes its
    stage, and raises ``KeyboardInterrupt`` on (also as Beam re-raises it from a worker's step)."""
    from fair_forge_beam.reports.output_folder import staged_output
    from pipelines import audit

    def interrupted(argv):
        output = argv[argv.index("--output") + 1]
        with staged_output(output):
            raise KeyboardInterrupt

    def beam_interrupted(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("KeyboardInterrupt [while running 'Read/ReadRange']")

    for run in (interrupted, beam_interrupted):
        monkeypatch.setattr(audit, "run", run)
        done = []
        with pytest.raises(KeyboardInterrupt):
            for i in range(3):
                done.append(audit.main(["--metrics", "humanity", "--output", str(tmp_path / f"loop{i}")]))
        assert done == []
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("fair-forge-beam: interrupted (Ctrl-C): the audit stopped"), err
        if run is interrupted:
            assert err[0].endswith(f"nothing was written ({tmp_path / 'loop0'} was not created)"), err
        assert not os.listdir(tmp_path), os.listdir(tmp_path)  # no folder, no stage left
