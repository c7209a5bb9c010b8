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
import time

import pytest

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
    assert proc.returncode == 1, err[-3000:]
    assert took <= BOUND, f"the run ended {took:.1f} s after the kill"
    assert "Traceback" not in err, err[-3000:]
    lines = _one_line(err)
    assert len(lines) == 1 and re.fullmatch(re.escape(
        "fair-forge-beam: error: the audit stopped: an SDK worker process failed: SDK worker N of 2 "
        f"(pid {workers[0]}) was killed by signal 9 (SIGKILL: out of memory?) (all the workers wrote: this process's "
        f"stderr); nothing was published (the output folder {out} is untouched (as it was before the run; nothing "
        "published))").replace("N", "[12]", 1), lines[0]), err[-3000:]
    assert left == [], f"{len(left)} process(es) of the run outlived it"
    assert _leftovers(tmp_path, out) == []  # no stage, no lock
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == {"before": True}
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


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
