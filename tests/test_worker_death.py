"""A multi-process run whose SDK worker dies ends at once with one line (trial38b B11).

SIGKILL of one of the two ``--direct_running_mode=multi_processing`` workers (what the kernel's OOM
killer sends) left the audit waiting for the dead worker's bundle for ever (880 s until Ctrl-C in the
trial; 2 of 6 tries on the old code still waiting 60-90 s after the kill), or ended it with Beam's bare
268-line "RuntimeError: Channel closed prematurely." traceback (4 of 6, 1.2-2.4 s after the kill). Now the run fails within a second or
two of the death, naming it (:mod:`fair_forge_beam.worker_watch`), with the exit code of a failed job,
the output folder as it was, nothing staged and no worker left.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from fair_forge_beam import procfs
from helpers import FNAPI
from test_interrupts import MULTI_PROCESS, _leftovers, _no_process_left, _one_line, _tree, context_audit

#: how long after a worker's death the run must have ended (the brief's bound: 30 s)
BOUND = 30


def test_exit_words_name_the_signal_and_the_oom_killer():
    from fair_forge_beam.worker_watch import exit_words

    assert exit_words(-9, shell=False) == "was killed by signal 9 (SIGKILL: out of memory?)"
    assert exit_words(137) == "was killed by signal 9 (SIGKILL: out of memory?)"  # a shell's report of the same
    assert exit_words(-15, shell=False) == "was killed by signal 15 (SIGTERM)"
    assert exit_words(137, shell=False) == "exited with code 137"
    assert exit_words(3) == "exited with code 3"


def _workers(root: int) -> list:
    """The SDK worker processes (the Python ones, not a shell running them) under ``root``."""
    found = []
    for pid in _tree(root):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"apache_beam.runners.worker.sdk_worker_main" in argv and not argv[0].endswith(b"sh"):
            found.append(pid)
    return found


@pytest.mark.slow
def test_a_killed_worker_ends_the_audit_with_one_line(tmp_path):
    """B11: a worker SIGKILLed while it scores (here in a judge call that never finishes): exit code 1
    within BOUND seconds of the kill, one line naming the worker's end, no traceback, the output folder
    as it was, no stage, no process of the run left. The old code was still waiting at BOUND + 30 s."""
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{\"before\": true}", encoding="utf-8")  # an earlier run's output
    with ScriptedOpenAIServer(lambda req: Reply(content="{}", drip=30, drip_headers=True)) as srv:
        proc = context_audit(tmp_path, srv, out, *MULTI_PROCESS)
        run = []
        try:
            deadline = time.time() + 180
            while time.time() < deadline and not srv.count():  # a worker is scoring: its judge call hangs
                time.sleep(0.2)
            assert srv.count(), "the judge was never called"
            time.sleep(1)
            run = _tree(proc.pid)
            workers = _workers(proc.pid)
            assert len(workers) == 2, f"workers: {workers}"
            os.kill(workers[0], signal.SIGKILL)
            killed = time.monotonic()
            try:
                _, err = proc.communicate(timeout=BOUND + 30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the run still waited {BOUND + 30} s after a worker was killed")
            took = time.monotonic() - killed
        finally:
            left = _no_process_left(_tree(proc.pid) + run)
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    _failed_with_one_line(proc, err, out, f"(pid {workers[0]}) was killed by signal 9 (SIGKILL: out of memory?)")
    assert took <= BOUND, f"the run ended {took:.1f} s after the kill"
    assert left == [], f"{len(left)} process(es) of the run outlived it"
    assert _leftovers(tmp_path, out) == []  # no stage, no lock
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == {"before": True}
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


def _failed_with_one_line(proc, err: str, out, end: str) -> None:
    """The audit failed (exit code 1) without a traceback, saying one line: an SDK worker (1 or 2 of 2)
    ``end`` (``(pid P) was killed by …``), nothing published, the output folder ``out`` untouched; each
    said once (trial40b B7)."""
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = _one_line(err)
    assert len(lines) == 1 and re.fullmatch(re.escape(
        f"fair-forge-beam: error: the audit stopped: SDK worker N of 2 {end}; nothing was published; the output "
        f"folder {out} is untouched (as it was before the run)").replace("N", "[12]", 1), lines[0]), err[-3000:]


class _DieOnce:
    """A step that ends the worker process it runs in (never the launcher) by ``how``."""

    def __init__(self, launcher: int, how: str):
        self.launcher, self.how = launcher, how

    def __call__(self, x):
        if os.getpid() != self.launcher:
            if self.how == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)
        return x


@pytest.mark.slow
@pytest.mark.parametrize("how,words", [("kill", "was killed by signal 9 (SIGKILL: out of memory?)"),
                                       ("exit", "exited with code 3")])
def test_run_pipeline_raises_the_workers_end(how, words, monkeypatch):
    """The Python API: ``run_pipeline`` raises ``WorkerProcessError`` naming the death, within BOUND
    seconds, instead of waiting for the dead worker for ever."""
    import apache_beam as beam

    here = os.path.dirname(os.path.abspath(__file__))  # the workers import _DieOnce from this module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))

    from fair_forge_beam.beam_pipeline import WorkerProcessError, pipeline_options, run_pipeline

    opts = pipeline_options([f"--runner={FNAPI}", *MULTI_PROCESS])
    limit = BOUND + 20  # the workers' start-up (6 s) included

    def too_long(signum, frame):  # the old code waited for the dead worker for ever
        raise TimeoutError(f"run_pipeline still waited {limit} s after it started")

    before = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(limit)
    try:
        with pytest.raises(WorkerProcessError) as info:
            with run_pipeline(opts) as p:
                _ = p | beam.Create(list(range(20))) | beam.Map(_DieOnce(os.getpid(), how))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert info.value.last_words.startswith("SDK worker ") and info.value.last_words.endswith(words), info.value.last_words


# --- trial39b B7: a worker that exits with code 0, is stopped or hangs mid-job -----------------------------------


class _Fault:
    """A step that, in a worker process (never the launcher), at the element ``at`` only: records its
    pid and the time in ``marker``, then ends its process with code 0 (``exit0``), stops it (``stop``:
    SIGSTOP) or sleeps an hour (``hang``)."""

    def __init__(self, launcher: int, how: str, marker: str, at: int = 7):
        self.launcher, self.how, self.marker, self.at = launcher, how, marker, at

    def __call__(self, x):
        if os.getpid() != self.launcher and x == self.at:
            _record(self.marker)
            if self.how == "exit0":
                os._exit(0)
            if self.how == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            if self.how == "hang":
                time.sleep(3600)
        return x


def _record(marker: str) -> None:
    with open(marker, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {time.time()}")


def _marked(marker, wait: float = 60.0):
    """``(pid, time)`` the fault recorded in ``marker``, waiting up to ``wait`` seconds for it."""
    deadline = time.time() + wait
    while True:
        try:
            pid, at = open(marker, encoding="utf-8").read().split()
            return int(pid), float(at)
        except (OSError, ValueError):
            if time.time() >= deadline:
                break
            time.sleep(0.1)
    raise AssertionError(f"the fault never happened ({marker})")


@pytest.fixture
def faults_import(monkeypatch):
    """The worker processes import ``_Fault`` from this module."""
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))


def _api_run(how: str, marker, limit: int = 60, **run):
    """``run_pipeline`` of 20 elements through ``_Fault`` on two multi-process workers (an alarm at
    ``limit`` seconds: the old code waited for ever); returns the exception it raised, or None."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

    opts = pipeline_options([f"--runner={FNAPI}", *MULTI_PROCESS])

    def too_long(signum, frame):
        raise TimeoutError(f"run_pipeline still waited {limit} s after it started")

    before = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(limit)
    try:
        with run_pipeline(opts) as p:
            out = p | beam.Create(list(range(20))) | beam.Map(_Fault(os.getpid(), how, str(marker)))
            assert_that(out, equal_to(list(range(20))))
    except Exception as exc:  # noqa: BLE001 - the test reads it
        return exc
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    return None


@pytest.mark.slow
def test_a_worker_that_exits_with_code_0_mid_job_ends_the_run(tmp_path, faults_import):
    """B7: ``os._exit(0)`` in a step left ``run_pipeline`` waiting for ever (a 0 was taken for a worker
    told to stop). Now it raises ``WorkerProcessError`` naming the worker and its exit, within 2 s."""
    from fair_forge_beam.beam_pipeline import WorkerProcessError

    exc = _api_run("exit0", tmp_path / "fault")
    ended = time.time()
    pid, at = _marked(tmp_path / "fault", wait=0)
    assert isinstance(exc, WorkerProcessError), repr(exc)
    assert re.fullmatch(rf"SDK worker [12] of 2 \(pid {pid}\) exited with code 0 before the job ended",
                        exc.last_words), exc.last_words
    assert ended - at < 2, f"the run ended {ended - at:.1f} s after the worker's exit"


def _watch_log(caplog):
    import logging

    caplog.set_level(logging.INFO, logger="fair_forge_beam.worker_watch")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "fair_forge_beam.worker_watch"]


@pytest.mark.slow
def test_a_stopped_worker_is_named_and_the_run_goes_on_when_it_resumes(tmp_path, faults_import, caplog):
    """B7: a worker stopped by SIGSTOP left the run waiting without a word. Now one warning names it
    within a few seconds, with how to resume it; the run waits (nothing is ended) and, once the worker
    is resumed, says so once and finishes with every element."""
    import threading

    from fair_forge_beam.worker_watch import CHECK_EVERY

    said = _watch_log(caplog)
    seen = {}

    def resume():
        pid, at = _marked(tmp_path / "fault")
        deadline = time.time() + CHECK_EVERY + 10
        while time.time() < deadline and not any("kill -CONT" in m for m in said()):
            time.sleep(0.1)
        seen.update(pid=pid, after=time.time() - at, said=said(), state=procfs.stat(pid).state)
        time.sleep(1)
        os.kill(pid, signal.SIGCONT)

    helper = threading.Thread(target=resume, daemon=True)
    helper.start()
    exc = _api_run("stop", tmp_path / "fault")
    helper.join(10)
    assert exc is None, repr(exc)
    pid = seen["pid"]
    assert seen["state"] == "T" and seen["after"] < CHECK_EVERY + 5, seen
    assert len(seen["said"]) == 1 and re.fullmatch(
        rf"SDK worker [12] of 2 \(pid {pid}\) is stopped \(state T in /proc/{pid}/stat\): the run waits for it; "
        rf"`kill -CONT {pid}` resumes it", seen["said"][0]), seen
    assert len(said()) == 2 and re.fullmatch(rf"{re.escape(seen['said'][0].split(' is stopped')[0])} resumed \(stopped "
                                             r"for at least \d+ s\)", said()[1]), said()


@pytest.mark.slow
def test_a_hanging_worker_is_shown_by_the_progress_line_and_nothing_is_ended(tmp_path, faults_import, monkeypatch):
    """B7: a worker hanging in a step (here ``time.sleep(3600)``) left a multi-process run silent: the
    progress reporter sees no count there (they are in the workers) and wrote nothing. Now its heartbeat
    names each worker with its state and CPU time; nothing is ended by it (the test ends the run by
    killing the hanging worker)."""
    import io
    import threading

    from fair_forge_beam import progress
    from fair_forge_beam.beam_pipeline import WorkerProcessError

    monkeypatch.setattr(progress, "HEARTBEAT", 1.0)
    stream = io.StringIO()
    seen = {}

    def look_then_kill():
        pid, _ = _marked(tmp_path / "fault")
        before = len(stream.getvalue().splitlines())  # the lines written once the step hangs
        deadline = time.time() + 15
        while time.time() < deadline and not any(f"(pid {pid}) sleeping" in ln
                                                 for ln in stream.getvalue().splitlines()[before:]):
            time.sleep(0.2)
        seen.update(pid=pid, lines=stream.getvalue().splitlines()[before:], alive=os.path.exists(f"/proc/{pid}"))
        os.kill(pid, signal.SIGKILL)

    helper = threading.Thread(target=look_then_kill, daemon=True)
    helper.start()
    with progress.ProgressReporter(0.5, stream=stream):
        exc = _api_run("hang", tmp_path / "fault")
    helper.join(10)
    pid = seen["pid"]
    assert seen["alive"], seen
    line = next((ln for ln in seen["lines"] if f"(pid {pid}) sleeping" in ln), None)
    assert line is not None, seen["lines"]
    assert re.fullmatch(r"progress: \d+ s elapsed; the counts are in the SDK worker processes; "
                        r"SDK worker 1 of 2 \(pid \d+\) \w[\w ]*, \d+\.\d CPU s (so far|in the last \d+ s); "
                        r"SDK worker 2 of 2 \(pid \d+\) \w[\w ]*, \d+\.\d CPU s (so far|in the last \d+ s)", line), line
    assert isinstance(exc, WorkerProcessError) and exc.last_words.endswith("was killed by signal 9 (SIGKILL: out of "
                                                                           "memory?)"), repr(exc)


#: an installed metric (docs/engine.md; test_engine's refusal rate) whose scorer, in a worker process, at the interaction s1/a/2 only,
#: records its pid and time in $FFB_FAULT_MARKER and does $FFB_FAULT (exit0, stop or hang: see _Fault)
_FAULT_METRIC = """
import dataclasses
import os

from fair_forge_beam.engine import Scored
from refusal_metric import Refusal
from test_worker_death import _Fault


def score(x):  # runs in the workers only (multi_processing): no launcher's pid to spare
    if x.element_id == "s1/a/2":
        _Fault(-1, os.environ["FFB_FAULT"], os.environ["FFB_FAULT_MARKER"], at=x.element_id)(x.element_id)
    return Scored.of(x, int(x.assistant.startswith("Sorry")))


class Fault(Refusal):
    name = "fault"
    info = dataclasses.replace(Refusal.info, name="fault")

    def spec(self, windowed=False):
        return dataclasses.replace(super().spec(windowed), scorer=score)
"""


def _fault_audit(tmp_path, how: str):
    """The audit of ``--metrics fault`` (:data:`_FAULT_METRIC`, installed under ``tmp_path``) on two
    multi-process workers into ``tmp_path/out``, which holds an earlier run's ``results.json``; returns
    ``(process, its stderr lines as they come, the output folder)``."""
    import sys
    import threading

    site = tmp_path / "site"
    site.mkdir()
    from test_engine import _REFUSAL

    (site / "refusal_metric.py").write_text(_REFUSAL, encoding="utf-8")
    (site / "fault_metric.py").write_text(_FAULT_METRIC, encoding="utf-8")
    info = site / "fault_metric-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fault-metric\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[fair_forge_beam.metrics]\nfault = fault_metric:Fault\n", encoding="utf-8")
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps({"session_id": f"s{i}", "assistant_id": "a", "language": "english",
                                          "conversation": [{"qa_id": f"s{i}-{j}", "query": "q", "assistant": "ok"}
                                                           for j in range(5)]}) for i in range(4)), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{\"before\": true}", encoding="utf-8")  # an earlier run's output
    here = os.path.dirname(os.path.abspath(__file__))
    from helpers import REPO

    env = {**os.environ, "FFB_FAULT": how, "FFB_FAULT_MARKER": str(tmp_path / "fault"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(site), here, str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.audit", "--input", str(data), "--metrics", "fault",
                             "--no-report", "--output", str(out), f"--runner={FNAPI}", *MULTI_PROCESS],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
    return proc, lines, out


def _ended(proc, limit: float) -> float:
    """Wait up to ``limit`` s for ``proc`` (killed, with its workers, if it still runs); its end's time."""
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        for pid in _tree(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the run still waited {limit} s")
    return time.time()


@pytest.mark.slow
def test_the_audit_of_a_worker_that_exits_with_code_0_stops_with_one_line(tmp_path):
    """B7 (CLI): a scorer's ``os._exit(0)`` left the audit waiting for ever. Now exit code 1 within 2 s
    of it, one line naming the worker's exit, the output folder as it was, nothing staged."""
    proc, lines, out = _fault_audit(tmp_path, "exit0")
    ended = _ended(proc, 120)
    pid, at = _marked(tmp_path / "fault", wait=0)
    _failed_with_one_line(proc, "".join(lines), out, f"(pid {pid}) exited with code 0 before the job ended")
    assert ended - at < 2, f"the run ended {ended - at:.1f} s after the worker's exit"
    assert _leftovers(tmp_path, out) == []
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == {"before": True}


@pytest.mark.slow
def test_the_audit_names_a_stopped_worker_and_goes_on_when_it_resumes(tmp_path):
    """B7 (CLI): a worker stopped by SIGSTOP left the audit silent until Ctrl-C. Now one warning line
    names it within a few seconds with ``kill -CONT P``; once resumed, one line says so and the audit
    publishes its run."""
    from fair_forge_beam.worker_watch import CHECK_EVERY

    proc, lines, out = _fault_audit(tmp_path, "stop")
    pid, at = _marked(tmp_path / "fault", wait=120)
    deadline = time.time() + CHECK_EVERY + 10
    while time.time() < deadline and not any("kill -CONT" in ln for ln in lines):
        time.sleep(0.1)
    named = time.time() - at
    os.kill(pid, signal.SIGCONT)
    _ended(proc, 120)
    err = "".join(lines)
    assert proc.returncode == 0, err[-3000:]
    assert named < CHECK_EVERY + 5, err[-3000:]
    watch = [ln.split("fair_forge_beam.worker_watch: ", 1)[1].rstrip("\n") for ln in lines
             if "fair_forge_beam.worker_watch: " in ln]
    name = re.match(rf"SDK worker [12] of 2 \(pid {pid}\)", watch[0] if watch else "")
    assert name and len(watch) == 2 and watch[0] == (f"{name.group(0)} is stopped (state T in /proc/{pid}/stat): the "
                                                     f"run waits for it; `kill -CONT {pid}` resumes it"), err[-3000:]
    assert re.fullmatch(rf"{re.escape(name.group(0))} resumed \(stopped for at least \d+ s\)", watch[1]), err[-3000:]
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) != {"before": True}


@pytest.mark.slow
def test_the_audit_of_a_hanging_worker_shows_the_workers_states(tmp_path):
    """B7 (CLI): a scorer hanging in ``time.sleep(3600)`` left the audit silent (a multi-process run's
    counts are in its workers: no progress line at all). Now a line every HEARTBEAT (30 s) names each
    worker with its state and CPU time, and nothing is ended by it (the test kills the hanging worker:
    the run stops with one line naming that death)."""
    from fair_forge_beam.progress import HEARTBEAT

    proc, lines, out = _fault_audit(tmp_path, "hang")
    pid, at = _marked(tmp_path / "fault", wait=120)
    deadline = at + HEARTBEAT + 30
    while time.time() < deadline and not any(f"(pid {pid}) sleeping" in ln for ln in lines):
        time.sleep(0.2)
    alive = proc.poll() is None and os.path.exists(f"/proc/{pid}")
    os.kill(pid, signal.SIGKILL)
    _ended(proc, 60)
    err = "".join(lines)
    states = [ln for ln in lines if ln.startswith("progress: ")]
    assert alive and any(f"(pid {pid}) sleeping" in ln for ln in states), err[-3000:]
    assert all(re.fullmatch(r"progress: \d+ s elapsed; the counts are in the SDK worker processes; SDK worker 1 of 2 "
                            r"\(pid \d+\) \w[\w ]*, \d+\.\d CPU s (so far|in the last \d+ s); SDK worker 2 of 2 "
                            r"\(pid \d+\) \w[\w ]*, \d+\.\d CPU s (so far|in the last \d+ s)\n", ln) for ln in states), states
    assert proc.returncode == 1 and f"(pid {pid}) was killed by signal 9" in _one_line(err)[0], err[-3000:]


# --- trial40b B4-B7: what a run's watch leaves behind, a stop's words, the one line ----------------------------------


class _FakeWorker:
    """A stand-in for the package's ``Popen`` of a worker (what the watch reads of it)."""

    through_shell = False
    worker_id = "worker_1"

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None


def _installed(names=("apache_beam.runners.worker.data_plane",
                      "apache_beam.runners.portability.fn_api_runner.worker_handlers")) -> tuple:
    """What a run's watch may install: the two loggers' filters, the thread exception hook, SIGCHLD's handler."""
    import logging
    import threading

    return ([list(logging.getLogger(n).filters) for n in names], threading.excepthook, signal.getsignal(signal.SIGCHLD))


def _later_reports_reach_the_user() -> list:
    """An error Beam's data plane logs, and a gRPC exception in a thread named as Beam's stream reader,
    after the runs: ``[log records seen, exceptions the hook installed before the runs saw]``."""
    import logging
    import threading

    records = []
    logger = logging.getLogger("apache_beam.runners.worker.data_plane")

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep(logging.ERROR)
    logger.addHandler(handler)
    try:
        logger.error("Failed to read inputs in the data plane.")
    finally:
        logger.removeHandler(handler)
    rpc_error = type("RpcError", (Exception,), {"__module__": "grpc"})

    def fail():
        raise rpc_error("a later run's real failure")

    t = threading.Thread(target=fail, name="read_grpc_client_inputs")
    t.start()
    t.join()
    return records


def test_a_run_with_a_worker_death_leaves_nothing_installed(monkeypatch):
    """trial40b B4: after a run in which a worker died (here an exit with code 0 mid-job), the watch's log
    filters and thread exception hook stayed for the process's life, one more layer a failed run: a later
    job's data-plane error and gRPC thread exception printed nothing. Now whatever the run installed goes
    when it ends, however it ends (a worker's death, Ctrl-C, a clean end), and the later reports print."""
    import threading

    from fair_forge_beam.worker_watch import WorkerDied, watching, worker_ended, worker_started

    hooked = []
    monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append(args.exc_value))
    before = _installed()
    sleeper = subprocess.Popen(["sleep", "30"])  # a live process for the watch's look at its state
    try:
        for end in ("death", "interrupt", "death", "clean"):
            with pytest.raises((WorkerDied, RuntimeError, KeyboardInterrupt)) if end != "clean" else _nothing():
                with watching():
                    worker = _FakeWorker(sleeper.pid)
                    worker_started(worker)
                    if end == "death":
                        worker.returncode = 0
                        worker_ended(worker, 0)  # code 0 before Beam told it to stop: the run's failure
                        raise RuntimeError("the job failed")  # as Beam's job does (or WorkerDied, from SIGCHLD, first)
                    if end == "interrupt":
                        raise KeyboardInterrupt
            assert _installed() == before, end
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _later_reports_reach_the_user() == ["Failed to read inputs in the data plane."]
    assert [str(e) for e in hooked] == ["a later run's real failure"]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def reports(monkeypatch):
    """What of Beam's reports reaches the user during a test: ``hooked``, the ``(thread name, exception)`` the thread
    exception hook installed before the test sees; ``records``, the ``(thread name, message)`` of the error records
    of Beam's data plane logger (``data_plane``); ``rpc_error``, an exception class of gRPC's module."""
    import logging
    import threading
    import types

    seen = types.SimpleNamespace(hooked=[], records=[],
                                 data_plane=logging.getLogger("apache_beam.runners.worker.data_plane"),
                                 rpc_error=type("RpcError", (Exception,), {"__module__": "grpc"}))
    monkeypatch.setattr(threading, "excepthook",
                        lambda args: seen.hooked.append((args.thread.name, str(args.exc_value))))

    class Keep(logging.Handler):
        def emit(self, record):
            seen.records.append((record.threadName, record.getMessage()))

    handler = Keep(logging.ERROR)
    seen.data_plane.addHandler(handler)
    yield seen
    seen.data_plane.removeHandler(handler)


def test_a_dead_workers_stream_threads_reporting_after_the_run_print_nothing(reports):
    """flake45: after a run a death failed, the end waited a fixed 2 s (REPORTS_WAIT) for Beam's threads of
    the dead worker's streams, then removed the hook and filters: a thread that reported later (a loaded CI
    machine) printed its traceback and data-plane error under the one line (test_a_killed_worker_ends_the_
    audit_with_one_line failed so once). Now the run's own stream threads (here two that report when the test
    lets them, after the run) are dropped however late they report, while a thread of the same name that is
    not the run's, reporting meanwhile, reaches the user; once the run's threads have ended, nothing is
    installed."""
    import threading

    from fair_forge_beam import worker_watch
    from fair_forge_beam.worker_watch import watching, worker_ended, worker_started

    hooked, records, data_plane, rpc_error = reports.hooked, reports.records, reports.data_plane, reports.rpc_error
    before = _installed()
    go = threading.Event()

    def broken_stream(why, wait=None):  # as Beam's reader of a dead worker's data stream: logs, then raises
        if wait is not None:
            wait.wait(60)
        try:
            raise rpc_error(why)
        except rpc_error:
            data_plane.exception("Failed to read inputs in the data plane.")
            raise

    sleeper = subprocess.Popen(["sleep", "30"])  # a live process for the watch's look at its state
    runs = []
    try:
        with pytest.raises(RuntimeError):
            with watching():
                worker = _FakeWorker(sleeper.pid)
                worker_started(worker)
                runs += _beams_stream_threads(broken_stream, lambda name: ("the dead worker's stream", go))
                worker.returncode = 0
                worker_ended(worker, 0)  # code 0 before Beam told it to stop: the run's failure
                raise RuntimeError("the job failed")
        # the run has ended, its threads still live: a thread named as Beam's that is not the run's reports
        other = threading.Thread(target=broken_stream, args=("not the run's",), name="read_grpc_client_inputs")
        other.start()
        other.join(30)
        go.set()  # the run's threads report now, later than any wait of its end
        for t in runs:
            t.join(30)
    finally:
        go.set()
        sleeper.kill()
        sleeper.wait()
    assert hooked == [("read_grpc_client_inputs", "not the run's")]
    assert records == [("read_grpc_client_inputs", "Failed to read inputs in the data plane.")]
    assert worker_watch.wait_for_late_reports(30)
    assert _installed() == before
    assert _later_reports_reach_the_user() == ["Failed to read inputs in the data plane."]
    assert hooked[1:] == [("read_grpc_client_inputs", "a later run's real failure")]


def _exiting(pid: int):
    """``procfs.stat`` as it reads a worker ``pid`` whose exit has begun (``PF_EXITING`` in field 9) while it
    is not yet a zombie: the real ``/proc`` line of a live process, the flag set. ``looked``: the names of the
    threads that read it so."""
    real = procfs.stat
    looked = []

    def stat(p):
        if p != pid:
            return real(p)
        import threading

        looked.append(threading.current_thread().name)
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        end = data.rfind(b")")
        fields = data[end + 1:].split()
        fields[6] = str(int(fields[6]) | 0x4).encode()  # PF_EXITING, as include/linux/sched.h has it
        return procfs.parse(data[:end + 1] + b" " + b" ".join(fields))

    return stat, looked


def test_a_dying_workers_stream_threads_reporting_before_its_exit_status_print_nothing(reports, monkeypatch):
    """flake45b: a SIGKILLed worker's sockets close as the kernel begins its exit (``PF_EXITING`` set), before
    it is a zombie, and Beam's threads that read its streams report their break in that gap; under load (2 of
    48 CLI runs beside a CPU burner) its ``beam_control_read`` and ``read_grpc_client_inputs`` tracebacks and
    the data plane's error printed above the one line: the watch's hook and filter asked ``settle()``, which
    saw every worker alive and answered "no death" at once. Here a worker that is exiting, not yet waited
    for: the two threads' reports (a gRPC error each, one after the data plane's error) wait for its exit
    status, which comes after both have looked at it, and print nothing; the run fails; nothing stays."""
    import threading

    from fair_forge_beam import worker_watch
    from fair_forge_beam.worker_watch import watching, worker_ended, worker_started

    hooked, records, data_plane, rpc_error = reports.hooked, reports.records, reports.data_plane, reports.rpc_error
    before = _installed()

    def broken_stream(log_first):  # as Beam's readers of a dying worker's streams
        try:
            raise rpc_error("Socket closed")
        except rpc_error:
            if log_first:
                data_plane.exception("Failed to read inputs in the data plane.")
            raise

    sleeper = subprocess.Popen(["sleep", "30"])  # the worker: alive, its exit begun (as procfs.stat reads it)
    stat, looked = _exiting(sleeper.pid)
    monkeypatch.setattr(procfs, "stat", stat)
    names = ("beam_control_read", "read_grpc_client_inputs")
    threads = []
    try:
        with pytest.raises(RuntimeError):
            with watching():
                worker = _FakeWorker(sleeper.pid)
                worker_started(worker)
                threads += _beams_stream_threads(broken_stream, lambda name: (name == names[1],), names)
                deadline = time.monotonic() + 30
                while not set(names) <= set(looked) and time.monotonic() < deadline:  # both asked of the worker
                    time.sleep(0.01)
                assert set(names) <= set(looked), looked
                worker.returncode = -9  # its exit status, as Beam's run_worker thread waits for it
                worker_ended(worker, -9)
                raise RuntimeError("the job failed")  # as Beam's job does (or WorkerDied, from SIGCHLD, first)
        for t in threads:
            t.join(30)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (hooked, records) == ([], [])
    assert worker_watch.wait_for_late_reports(30)
    assert _installed() == before


def test_settle_waits_for_the_exit_status_of_a_worker_whose_exit_has_begun(monkeypatch):
    """flake45b: ``run_pipeline``'s ``except`` asks ``settle()`` whether the job's own error is a worker's death;
    when the job failed as a worker's exit had begun (``PF_EXITING``), before its exit status, it answered
    "no death" at once, and the run ended in Beam's traceback, not the one line. It waits for the status now."""
    import threading

    from fair_forge_beam.worker_watch import settle, watching, worker_ended, worker_started

    sleeper = subprocess.Popen(["sleep", "30"])
    stat, _ = _exiting(sleeper.pid)
    monkeypatch.setattr(procfs, "stat", stat)
    said = []

    def run():  # not the main thread: the death raises no WorkerDied here, settle() alone says it
        with watching() as watch:
            worker = _FakeWorker(sleeper.pid)
            worker_started(worker)

            def status():
                worker.returncode = -9
                worker_ended(worker, -9)

            timer = threading.Timer(0.5, status)
            timer.start()
            said.append(settle(watch))
            timer.join()

    try:
        t = threading.Thread(target=run)
        t.start()
        t.join(30)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert said == [f"SDK worker 1 of 1 (pid {sleeper.pid}) was killed by signal 9 (SIGKILL: out of memory?)"]


@pytest.mark.slow
def test_two_runs_with_a_worker_exit_0_then_a_clean_one_leave_the_process_as_it_was(tmp_path, faults_import,
                                                                                      monkeypatch):
    """trial40b B4, end to end: run 1 with ``os._exit(0)`` in a step (WorkerProcessError), run 2 clean; once
    run 1's Beam stream threads have ended, and again after run 2, the log filters, the thread exception hook
    and the SIGCHLD handler are those of before run 1, and a later data-plane error and a gRPC thread
    exception reach the user (before: both dropped)."""
    import threading

    from fair_forge_beam.beam_pipeline import WorkerProcessError

    hooked = []
    monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append(args.exc_value))
    from fair_forge_beam.worker_watch import wait_for_late_reports

    before = _installed()
    assert isinstance(_api_run("exit0", tmp_path / "fault1"), WorkerProcessError)
    assert wait_for_late_reports(60)  # run 1's Beam stream threads have ended, their reports dropped (flake45)
    assert _installed() == before
    assert _api_run("none", tmp_path / "fault2") is None
    assert _installed() == before
    assert _later_reports_reach_the_user() == ["Failed to read inputs in the data plane."]
    assert [str(e) for e in hooked] == ["a later run's real failure"]


@pytest.fixture
def stopped_worker():
    """``(watch, worker)``: a watch of one live worker process, which the test stops and resumes."""
    import sys

    from fair_forge_beam.worker_watch import _Watch

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.through_shell, proc.worker_id = False, "worker_1"
    watch = _Watch(main=False)
    watch.workers.append(proc)
    try:
        yield watch, proc
    finally:
        proc.kill()
        proc.wait()


def _state(pid: int, want: str) -> None:
    deadline = time.time() + 10
    while (st := procfs.stat(pid)) is None or st.state != want:
        assert time.time() < deadline, f"pid {pid} never reached state {want}"
        time.sleep(0.02)


def test_a_worker_stopped_too_long_is_said_in_an_error_line(stopped_worker, caplog, monkeypatch):
    """trial40b B5: under ``--quiet`` (errors only) a stopped worker gave no line at all, the run waiting
    silently. One still stopped STOPPED_TOO_LONG seconds after the first warning is named once more, in
    an ERROR line (which --quiet shows), with how to resume it; once."""
    import logging

    from fair_forge_beam import worker_watch

    monkeypatch.setattr(worker_watch, "STOPPED_TOO_LONG", 0.5, raising=False)
    caplog.set_level(logging.INFO, logger="fair_forge_beam.worker_watch")
    watch, proc = stopped_worker
    os.kill(proc.pid, signal.SIGSTOP)
    _state(proc.pid, "T")
    worker_watch._look(watch)
    time.sleep(0.7)
    worker_watch._look(watch)
    worker_watch._look(watch)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [f"SDK worker 1 of 1 (pid {proc.pid}) has been stopped for at least 0 s (state T in "
                      f"/proc/{proc.pid}/stat): the run waits for it; `kill -CONT {proc.pid}` resumes it"], caplog.text


@pytest.mark.slow
def test_a_resumed_worker_says_its_stop_lasted_at_least_the_time_since_it_was_seen(stopped_worker, caplog):
    """trial40b B6: "resumed (stopped for about N s)" counted from the look that saw the stop, up to
    CHECK_EVERY after it (stopped 2.7 s: "about 1 s"). /proc keeps no time of a stop: the line says
    "at least N s", N never more than the stop lasted."""
    import logging

    from fair_forge_beam import worker_watch

    caplog.set_level(logging.INFO, logger="fair_forge_beam.worker_watch")
    watch, proc = stopped_worker
    os.kill(proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    _state(proc.pid, "T")
    time.sleep(1.5)  # the stop is seen at the next look, up to CHECK_EVERY later
    worker_watch._look(watch)
    time.sleep(1.6)
    os.kill(proc.pid, signal.SIGCONT)
    lasted = time.monotonic() - stopped
    _state(proc.pid, "S")
    worker_watch._look(watch)
    said = [r.getMessage() for r in caplog.records]
    m = re.fullmatch(rf"SDK worker 1 of 1 \(pid {proc.pid}\) resumed \(stopped for at least (\d+) s\)", said[-1])
    assert m and 1 <= int(m.group(1)) <= lasted, (said, lasted)


def test_a_workers_death_is_one_line_saying_each_thing_once(tmp_path, capsys):
    """trial40b B7: the failed run's line said "nothing was published (the output folder … is untouched (as
    it was before the run; nothing published))" and, of a worker's death, "(all the workers wrote: this
    process's stderr)", also under --quiet where nothing was written. Now each thing once, only what is true."""
    from fair_forge_beam.beam_pipeline import WorkerProcessError
    from fair_forge_beam.console import guarded, note_stage

    import errno

    out = tmp_path / "out"
    out.mkdir()

    def full_disk():  # each call stages its folder, as a command does (a call's line names only its own: 11e39df)
        note_stage(str(tmp_path / "stage"), str(out), existed=True)
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "stage" / "results.json"))

    assert guarded(full_disk, "audit") == 1
    line = capsys.readouterr().err.splitlines()
    assert len(line) == 1 and line[0].endswith(f"; nothing was published; the output folder {out} is untouched (as it "
                                               "was before the run)"), line
    words = "SDK worker 1 of 2 (pid 4242) exited with code 0 before the job ended"

    def death():
        note_stage(str(tmp_path / "stage"), str(out), existed=True)
        raise WorkerProcessError(f"{words}, so the job cannot finish (WorkerDied: {words})", words, death=True)

    assert guarded(death, "audit") == 1
    assert capsys.readouterr().err.splitlines() == [
        f"fair-forge-beam: error: the audit stopped: {words}; nothing was published; the output folder {out} is "
        "untouched (as it was before the run)"]


def _beams_stream_threads(target, args_of, names=("beam_control_read", "read_grpc_client_inputs")) -> list:
    """Started daemon threads named as Beam's readers of a worker's streams, each running ``target(*args_of(name))``."""
    import threading

    threads = [threading.Thread(target=target, args=args_of(name), name=name, daemon=True) for name in names]
    for t in threads:
        t.start()
    return threads


# --- session 30: each SDK worker is watched by the run that started it --------------------------------------------

#: a Python program that runs two audits in two threads of its process (``main(argv)`` each): A at once, B once a line
#: comes on stdin; then, both ended, B's audit alone again (the lone run to compare with) and what stays installed
_TWO_AUDITS = r"""
import json, logging, signal, sys, threading, time
from fair_forge_beam import worker_watch
from pipelines.audit import main

names = ("apache_beam.runners.worker.data_plane", "apache_beam.runners.portability.fn_api_runner.worker_handlers")
def installed():
    return ([list(logging.getLogger(n).filters) for n in names], threading.excepthook, signal.getsignal(signal.SIGCHLD))

a_argv, b_argv, lone_argv = (json.loads(a) for a in sys.argv[1:4])
before, codes, ended = installed(), {}, {}
def call(name, argv):
    codes[name] = main(argv)
    ended[name] = time.time()
a = threading.Thread(target=call, args=("A", a_argv))
a.start()
sys.stdin.readline()  # the test has seen A's two workers
b = threading.Thread(target=call, args=("B", b_argv))
b.start()
b.join()
a.join()
codes["lone"] = main(lone_argv)
released = worker_watch.wait_for_late_reports(60)
print(json.dumps({"codes": codes, "ended": ended, "released": released, "as_before": installed() == before,
                  "claims": len(worker_watch._CLAIMS), "runs": len(worker_watch._ACTIVE)}), flush=True)
"""


def _three_runs(tmp_path, text: str) -> tuple:
    """``(outs, script, lone)`` of a program ``text`` that runs audits A, B and B alone again: their output folders
    (A's holds an earlier run's ``results.json``), the program's file, and the argv of B's plain audit, less
    ``--output``."""
    from test_interrupts import FF

    outs = {name: tmp_path / name for name in ("A", "B", "lone")}
    script = tmp_path / "audits.py"
    script.write_text(text, encoding="utf-8")
    outs["A"].mkdir()
    (outs["A"] / "results.json").write_text("{\"before\": true}", encoding="utf-8")  # an earlier run's output
    lone = ["--input", str(FF), "--metrics", "humanity", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000",
            "--quiet", f"--runner={FNAPI}", *MULTI_PROCESS]
    return outs, script, lone


@pytest.mark.slow
def test_a_workers_death_ends_its_own_run_only_when_two_runs_share_the_process(tmp_path):
    """Session 30: two audits in two threads of one process (the Python API, two multi-process workers each), one
    worker of audit A SIGKILLed while audit B runs: every worker was every run's, so A's death ended B's workers too,
    and both calls hung (150 s+) with the hook, the log filters and the claims left installed. Now A fails with its
    one line naming its own worker, B finishes with the results of a lone run of it, and nothing stays installed.
    The old code was still waiting at LIMIT s."""
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer
    from test_interrupts import FF, _env

    limit = 180  # three audits on a loaded 2-core machine (40 s on a quiet one); the old code waited for ever
    outs, script, lone = _three_runs(tmp_path, _TWO_AUDITS)
    with ScriptedOpenAIServer(lambda req: Reply(content="{}", drip=30, drip_headers=True)) as srv, \
            open(tmp_path / "stdout", "w+", encoding="utf-8") as said_to, \
            open(tmp_path / "stderr", "w+", encoding="utf-8") as err_to:  # files: the workers' logs fill a pipe
        a = ["--input", str(FF), "--metrics", "context", "--judge-base-url", srv.base_url, "--judge-model", "m",
             "--judge-cache", str(tmp_path / "c.sqlite"), "--output", str(outs["A"]), f"--runner={FNAPI}",
             *MULTI_PROCESS]
        proc = subprocess.Popen([sys.executable, str(script), json.dumps(a),
                                 json.dumps([*lone, "--output", str(outs["B"])]),
                                 json.dumps([*lone, "--output", str(outs["lone"])])], cwd=tmp_path, env=_env(),
                                stdin=subprocess.PIPE, stdout=said_to, stderr=err_to, text=True)
        run = []
        try:
            deadline = time.time() + 180
            while time.time() < deadline and not srv.count():  # a worker of A is scoring: its judge call hangs
                time.sleep(0.2)
            assert srv.count(), "A's judge was never called"
            a_workers = _workers(proc.pid)
            assert len(a_workers) == 2, f"A's workers: {a_workers}"
            proc.stdin.write("B\n")
            proc.stdin.flush()
            deadline = time.time() + 120
            while time.time() < deadline and len(_workers(proc.pid)) < 4:  # B's two workers too: B runs
                time.sleep(0.1)
            b_workers = sorted(set(_workers(proc.pid)) - set(a_workers))
            assert len(b_workers) == 2, f"B's workers: {b_workers}"
            run = _tree(proc.pid)
            os.kill(a_workers[0], signal.SIGKILL)
            killed = time.time()
            try:
                proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the audits still ran {limit} s after A's worker was killed")
        finally:
            left = _no_process_left(_tree(proc.pid) + run)
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        said_to.seek(0), err_to.seek(0)
        out, err = said_to.read(), err_to.read()
    said = json.loads(out.strip().splitlines()[-1])
    took = {name: round(at - killed, 1) for name, at in said.pop("ended").items()}
    lines = _one_line(err)
    assert said["codes"] == {"A": 1, "B": 0, "lone": 0}, err[-3000:]
    assert len(lines) == 1 and re.fullmatch(re.escape(
        f"fair-forge-beam: error: the audit stopped: SDK worker N of 2 (pid {a_workers[0]}) was killed by signal 9 "
        f"(SIGKILL: out of memory?); nothing was published; the output folder {outs['A']} is untouched (as it was "
        "before the run)").replace("N", "[12]", 1), lines[0]), err[-3000:]
    assert sorted(p.name for p in outs["A"].iterdir()) == ["results.json"]
    assert json.loads((outs["A"] / "results.json").read_text(encoding="utf-8")) == {"before": True}
    assert (outs["B"] / "results.json").read_bytes() == (outs["lone"] / "results.json").read_bytes()
    assert said == {"codes": {"A": 1, "B": 0, "lone": 0}, "released": True, "as_before": True, "claims": 0, "runs": 0}
    assert took["A"] <= BOUND and took["B"] <= BOUND, took  # neither waits: A is not the main thread, Beam fails it
    assert left == [], f"{len(left)} process(es) of the runs outlived them"


def _two_runs(run, sleepers) -> None:
    """``run(name, sleeper)`` in two threads, A's with ``sleepers[0]`` and B's with ``sleepers[1]`` (processes for the
    watches' looks), up to 30 s each; then every sleeper is ended."""
    import threading

    threads = [threading.Thread(target=run, args=(name, s)) for name, s in (("A", sleepers[0]), ("B", sleepers[1]))]
    try:
        [t.start() for t in threads]
        [t.join(30) for t in threads]
    finally:
        for s in sleepers:
            s.kill()
            s.wait()


def test_two_runs_in_two_threads_each_watch_their_own_workers_only():
    """Session 30, the watch's part: each call reaches the run it is made for (by default the run whose thread makes
    it) and no other. Before, every worker started was every run's, and Beam's closing of one run's handler
    ``worker_1`` marked the other run's ``worker_1`` too (Beam's worker ids repeat across runs) as asked to end: its
    exit with code 0 mid-job went unseen. A worker no run is known to have started is watched by none."""
    import threading

    from fair_forge_beam import worker_watch
    from fair_forge_beam.worker_watch import watching, worker_ended, worker_started, worker_told_to_stop

    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]  # live processes for the watches' looks
    both = threading.Barrier(2, timeout=30)
    seen = {}

    def run(name: str, sleeper) -> None:
        with watching() as watch:
            worker = _FakeWorker(sleeper.pid)  # both named worker_1
            worker_started(worker)
            both.wait()  # both runs' workers have started
            if name == "A":
                worker_told_to_stop("worker_1")  # Beam closes A's handler: A's job ends
                worker_started(_FakeWorker(sleepers[2].pid), None)  # a worker of no known run
            both.wait()
            if name == "B":
                worker.returncode = 0
                worker_ended(worker, 0)  # B's worker_1 exits with code 0 though B never told it to stop
            both.wait()
            seen[name] = ([w.pid for w in watch.workers], watch.death)

    _two_runs(run, sleepers)
    assert seen == {"A": ([sleepers[0].pid], None),
                    "B": ([sleepers[1].pid], f"SDK worker 1 of 1 (pid {sleepers[1].pid}) exited with code 0 before the "
                                             "job ended")}
    assert worker_watch.wait_for_late_reports(30) and worker_watch._CLAIMS == [] and worker_watch._ACTIVE == []


# --- trial46b B2: a run outside the main thread whose worker dies fails, wherever it waits ----------------------------

#: a Python program that runs plain audits in threads of its process (``main(argv)`` each): B (when given) first, then,
#: once B's two workers run, A, one of whose workers it SIGKILLs as soon as it appears (before it has connected to the
#: run: what no stream's end can tell Beam); then, both ended, B's audit alone again (a next run in the same process,
#: and the lone run to compare with) and what stays installed. A call still running LIMIT s after the kill is said, not
#: waited for: the old code's A waited in Beam's ``input_elements`` for ever
_PLAIN_AUDITS = r"""
import json, logging, os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])  # the tests' folder
from fair_forge_beam import worker_watch
from pipelines.audit import main
from test_worker_death import _workers

names = ("apache_beam.runners.worker.data_plane", "apache_beam.runners.portability.fn_api_runner.worker_handlers")
def installed():
    return ([list(logging.getLogger(n).filters) for n in names], threading.excepthook, signal.getsignal(signal.SIGCHLD))

def workers():
    return set(_workers(os.getpid()))

def until(what, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.005)
    raise SystemExit(f"not seen in {seconds} s")

limit, a_argv, b_argv, lone_argv = float(sys.argv[2]), *(json.loads(a) for a in sys.argv[3:6])
before, codes, ended = installed(), {}, {}
def call(name, argv):
    codes[name] = main(argv)
    ended[name] = time.time()
threads = {}
if b_argv:
    threads["B"] = threading.Thread(target=call, args=("B", b_argv))
    threads["B"].start()
    until(lambda: len(workers()) >= 2)
others = workers()
threads["A"] = threading.Thread(target=call, args=("A", a_argv))
threads["A"].start()
killed_worker = min(until(lambda: workers() - others))
os.kill(killed_worker, signal.SIGKILL)
killed = time.time()
b_ran = "B" in threads and threads["B"].is_alive()
seen = workers() | others | {killed_worker}
for name, t in sorted(threads.items()):
    t.join(max(0.0, killed + limit - time.time()))
    seen |= workers()  # a worker Beam started late too
hung = sorted(name for name, t in threads.items() if t.is_alive())
if hung:
    print(json.dumps({"hung": hung, "codes": codes, "seen": sorted(seen)}), flush=True)
    os._exit(3)
codes["lone"] = main(lone_argv)
released = worker_watch.wait_for_late_reports(60)
print(json.dumps({"codes": codes, "took": {n: round(at - killed, 2) for n, at in ended.items()}, "b_ran": b_ran,
                  "seen": sorted(seen),
                  "killed": killed_worker, "released": released, "as_before": installed() == before,
                  "claims": len(worker_watch._CLAIMS), "runs": len(worker_watch._ACTIVE)}), flush=True)
"""


def _plain_audits(tmp_path, with_b: bool, limit: float = 30) -> tuple:
    """Runs :data:`_PLAIN_AUDITS` (A, and B when ``with_b``): what it said, A's one-line stderr, and the outputs."""
    from test_interrupts import _env

    outs, script, audit = _three_runs(tmp_path, _PLAIN_AUDITS)
    argv = [[*audit, "--output", str(outs[name])] for name in ("A", "B", "lone")]
    if not with_b:
        argv[1] = None
    with open(tmp_path / "stdout", "w+", encoding="utf-8") as said_to, \
            open(tmp_path / "stderr", "w+", encoding="utf-8") as err_to:  # files: the workers' logs fill a pipe
        try:  # the script gives up on a hung call itself, LIMIT s after the kill
            subprocess.run([sys.executable, str(script), os.path.dirname(__file__), str(limit),
                            *(json.dumps(a) for a in argv)], cwd=tmp_path, env=_env(), stdout=said_to, stderr=err_to,
                           text=True, timeout=limit + 240)
        except subprocess.TimeoutExpired:
            pytest.fail("the script did not end")
        said_to.seek(0), err_to.seek(0)
        out, err = said_to.read(), err_to.read()
    assert out.strip(), err[-3000:]
    said = json.loads(out.strip().splitlines()[-1])
    left = _no_process_left(said["seen"])  # A's and B's workers (Beam gives each a process group of its own)
    assert "hung" not in said, f"{said['hung']} still ran {limit} s after A's worker was killed: {err[-3000:]}"
    assert left == [], f"{len(left)} worker(s) of the runs outlived them"
    return said, _one_line(err), err, outs


def _a_failed_with_its_line(said, lines, err, outs, limit: float) -> None:
    assert len(lines) == 1 and re.fullmatch(  # 1 of 1: killed before Beam started A's second worker (under load)
        re.escape("fair-forge-beam: error: the audit stopped: SDK worker ") + "[12] of [12]" + re.escape(
            f" (pid {said['killed']}) was killed by signal 9 (SIGKILL: out of memory?); nothing was published; the "
            f"output folder {outs['A']} is untouched (as it was before the run)"), lines[0]), err[-3000:]
    assert sorted(p.name for p in outs["A"].iterdir()) == ["results.json"]
    assert json.loads((outs["A"] / "results.json").read_text(encoding="utf-8")) == {"before": True}
    assert said["took"]["A"] <= limit, said
    assert "Traceback" not in err, err[-3000:]  # fix47a: a worker started after the death printed one 60 s later


@pytest.mark.slow
def test_a_plain_audit_in_a_thread_whose_worker_dies_fails_with_its_line_beside_another_run(tmp_path):
    """trial46b B2: two plain audits (no judge) in two threads of one process, one worker of A SIGKILLed as it starts,
    while B runs: A waited for ever in Beam's ``input_elements`` for the bundle of a worker that never connected (5 of
    5), nothing printed — no signal wakes a thread other than the main one, and no stream of the dead worker had
    broken. Now A fails with its one line within LIMIT s of the kill, B's ``results.json`` is the lone run's, the next
    run in the same process works, and nothing stays installed. The old code's A still waited at LIMIT s."""
    limit = 30
    said, lines, err, outs = _plain_audits(tmp_path, with_b=True, limit=limit)
    assert said["codes"] == {"A": 1, "B": 0, "lone": 0}, err[-3000:]
    assert said["b_ran"], "B had ended before A's worker was killed: not two runs at once"
    _a_failed_with_its_line(said, lines, err, outs, limit)
    assert (outs["B"] / "results.json").read_bytes() == (outs["lone"] / "results.json").read_bytes()
    assert {k: said[k] for k in ("released", "as_before", "claims", "runs")} == \
        {"released": True, "as_before": True, "claims": 0, "runs": 0}


@pytest.mark.slow
def test_a_plain_audit_alone_in_a_thread_whose_worker_dies_fails_with_its_line(tmp_path):
    """trial46b B2, the killed run alone in a thread other than the main one (a service's worker thread): it waited for
    ever; now it fails with its one line within LIMIT s, and the next run in the same process works."""
    limit = 30
    said, lines, err, outs = _plain_audits(tmp_path, with_b=False, limit=limit)
    assert said["codes"] == {"A": 1, "lone": 0}, err[-3000:]
    _a_failed_with_its_line(said, lines, err, outs, limit)
    assert json.loads((outs["lone"] / "results.json").read_text(encoding="utf-8"))
    assert {k: said[k] for k in ("released", "as_before", "claims", "runs")} == \
        {"released": True, "as_before": True, "claims": 0, "runs": 0}


def test_a_dead_workers_handler_fails_every_wait_of_its_run():
    """trial46b B2, the class: once a worker of a run dies, each wait of the run on a handler of it ends, in whatever
    thread it is, with the death's words (``WorkerDied``): an answer pending on its control connection and one asked
    later (the next bundle, a progress request; Beam would wait for ever), its data channel's wait for a bundle's
    output (``input_elements``: within its 1-s look), a send to its full queues (20,000 elements) and the channel's
    close. Beam's real objects; nothing connects to them, as to a worker killed before it connected."""
    import threading
    import weakref

    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.portability.fn_api_runner import worker_handlers
    from apache_beam.runners.worker import data_plane

    from fair_forge_beam.beam_pipeline import _fail_the_waits_of, _workers_leave_ctrl_c_to_the_command
    from fair_forge_beam.worker_watch import WorkerDied

    _workers_leave_ctrl_c_to_the_command()  # what the package installs for a run
    class Handler:  # a worker handler's two connections (a weak reference is what the run keeps of it)
        control_conn, data_conn = worker_handlers.ControlConnection(), data_plane._GrpcDataChannel()

    handler = Handler()
    control, data = handler.control_conn, handler.data_conn
    raised = {}

    def waits(name, wait):
        try:
            wait()
            raised[name] = None
        except Exception as exc:  # noqa: BLE001 - what each wait raises is the test's
            raised[name] = exc

    def send():  # more than the two send queues hold (10,000 elements each): the last puts wait for a reader
        for i in range(20_100):
            data._enqueue_to_send(beam_fn_api_pb2.Elements.Data(instruction_id="b1", transform_id="t", data=b"x"))

    pending = control.push(beam_fn_api_pb2.InstructionRequest(instruction_id="b1"))
    threads = [threading.Thread(target=waits, args=args, daemon=True) for args in (
        ("answer", pending.get), ("output", lambda: list(data.input_elements("b1", ["t"]))), ("send", send))]
    [t.start() for t in threads]
    time.sleep(0.5)
    assert all(t.is_alive() for t in threads), raised  # each waits
    words = "SDK worker 1 of 2 (pid 4242) was killed by signal 9 (SIGKILL: out of memory?)"
    failed = time.monotonic()
    _fail_the_waits_of(weakref.ref(handler), words)
    [t.join(5) for t in threads]
    took = time.monotonic() - failed
    assert not any(t.is_alive() for t in threads), f"still waiting: {sorted({'answer', 'output', 'send'} - set(raised))}"
    assert took < 2.5, took  # input_elements looks every second
    assert raised["send"] is None  # what the run sends a dead worker is dropped
    for name in ("answer", "output"):
        assert isinstance(raised[name], WorkerDied) and str(raised[name]) == words, raised
    later = control.push(beam_fn_api_pb2.InstructionRequest(instruction_id="b2"))  # a request after the death
    with pytest.raises(WorkerDied, match=re.escape(words)):
        later.get(5)
    with pytest.raises(WorkerDied, match=re.escape(words)):  # Beam's close of the handler (logged; the run goes on)
        data.close()
    control.close()  # never started: nothing to wait for


def test_a_runs_death_calls_what_waits_on_it_once_and_no_other_runs():
    """The watch's part of trial46b B2 (:func:`~fair_forge_beam.worker_watch.when_dead`): a run's first death calls each
    of its callbacks once with its words, a callback added after it at once; another run's are not called."""
    import threading

    from fair_forge_beam import worker_watch
    from fair_forge_beam.worker_watch import watching, when_dead, worker_ended, worker_started

    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
    called = []
    both = threading.Barrier(2, timeout=30)

    def run(name: str, sleeper) -> None:
        with watching() as watch:
            worker = _FakeWorker(sleeper.pid)
            worker_started(worker)
            when_dead(watch, lambda words: called.append((name, "before", words)))
            both.wait()
            if name == "A":
                worker.returncode = -9
                worker_ended(worker, -9)
                worker_ended(worker, -9)  # said twice: one death
                when_dead(watch, lambda words: called.append((name, "after", words)))
            both.wait()

    _two_runs(run, sleepers)
    words = f"SDK worker 1 of 1 (pid {sleepers[0].pid}) was killed by signal 9 (SIGKILL: out of memory?)"
    assert called == [("A", "before", words), ("A", "after", words)]
    assert worker_watch.wait_for_late_reports(30) and worker_watch._CLAIMS == [] and worker_watch._ACTIVE == []


def test_a_worker_started_after_its_runs_death_is_ended_at_once():
    """fix47a, seen in 2 of 14 tries under load: Beam started a run's second worker after its first had been killed;
    nothing ended it, and 60 s later it gave up on the run's closed control address with grpc's FutureTimeoutError
    traceback on the run's stderr. A worker its run starts after the run's death is ended at once, as the others were;
    its end is no second death."""
    import threading

    from fair_forge_beam import worker_watch
    from fair_forge_beam.worker_watch import watching, worker_ended, worker_started

    first, second = (subprocess.Popen(["sleep", "30"], process_group=0) for _ in range(2))
    seen = {}

    def run() -> None:  # not the main thread: no signal
        with watching() as watch:
            worker = _FakeWorker(first.pid)
            worker_started(worker)
            first.kill()
            worker.returncode = first.wait()
            worker_ended(worker, worker.returncode)
            late = _FakeWorker(second.pid)
            worker_started(late)
            try:
                late.returncode = second.wait(10)
            except subprocess.TimeoutExpired:
                late.returncode = None
            worker_ended(late, late.returncode)
            seen.update(code=late.returncode, death=watch.death)

    t = threading.Thread(target=run)
    try:
        t.start()
        t.join(30)
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
    assert seen == {"code": -9, "death": f"SDK worker 1 of 1 (pid {first.pid}) was killed by signal 9 (SIGKILL: out of "
                                         "memory?)"}
    assert worker_watch.wait_for_late_reports(30) and worker_watch._CLAIMS == [] and worker_watch._ACTIVE == []
