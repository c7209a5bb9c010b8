"""Progress lines on stderr: formatting, time left, rate limit, and the main job (with and without --quiet)."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time

import pytest

from helpers import FNAPI, REPO
from fair_forge_beam import progress as P

NS, J = P.NAMESPACE, "fair_forge_beam.judge"


def test_format_progress_exact():
    counts = {(NS, "read"): 1024, (NS, "scored.toxicity"): 512, (NS, "scored.humanity"): 1024,
              (J, "submitted"): 48, (J, "results"): 38, (J, "failures"): 2, (J, "calls"): 40}
    assert P.format_progress(counts, 12.4, 12.0) == (
        "progress: 1,024 interactions read, scored: humanity 1,024, toxicity 512; judge: 40 done, 8 pending; "
        "12 s elapsed, about 12 s of scoring left")
    assert P.format_progress({(NS, "read"): 3}, 75, None) == (
        "progress: 3 interactions read; 1 min 15 s elapsed, time left unknown")
    # an estimate that would print as "0 s" is no estimate: the line is written while the run works (issue 28)
    for eta in (0.0, 0.4, -1.0):
        assert P.format_progress({}, 3725, eta) == "progress: 0 interactions read; 1 h 02 min elapsed, time left unknown"
    assert P.format_progress({}, 3725, 0.6).endswith("about 1 s of scoring left")
    # the run's last line, written once the pipeline finished: nothing is left to estimate (a new
    # user read "5 s elapsed, time left unknown" under a finished run)
    for eta in (None, 0.0, 12.0):
        assert P.format_progress({(NS, "read"): 3}, 75, eta, final=True) == "progress: 3 interactions read; 1 min 15 s elapsed"


def test_eta_never_zero_while_work_remains():
    """Issue 28: a run's line said "about 0 s left" mid-run. Every metric has taken all that was
    read so far (reading goes on), interactions are in flight, a judge call is pending with no
    result yet: no stage has a rate to extrapolate, so there is no estimate, never 0."""
    started = {(NS, "taken.toxicity"): 0.0, (NS, "scored.toxicity"): 0.0}
    caught_up = {(NS, "read"): 500, (NS, "taken.toxicity"): 500, (NS, "scored.toxicity"): 480}
    assert P.eta_seconds(caught_up, started, now=10.0) is None
    pending = {**caught_up, (J, "submitted"): 20}
    assert P.eta_seconds(pending, started, now=10.0) is None
    done = {(NS, "read"): 500, (NS, "taken.toxicity"): 500, (NS, "scored.toxicity"): 500}
    assert P.eta_seconds(done, started, now=10.0) is None
    for counts in (caught_up, pending, done):
        assert "0 s left" not in P.format_progress(counts, 10.0, P.eta_seconds(counts, started, now=10.0))


def test_eta_is_the_slowest_stage_extrapolated():
    counts = {(NS, "read"): 1000, (NS, "scored.humanity"): 1000, (NS, "scored.toxicity"): 250}
    started = {(NS, "scored.humanity"): 0.0, (NS, "scored.toxicity"): 10.0}
    # toxicity: 250 in 10 s since its first → 750 left at 25/s = 30 s; humanity: done
    assert P.eta_seconds(counts, started, now=20.0) == pytest.approx(30.0)
    # judge: 10 done in 5 s since the first result, 20 pending → 10 s; toxicity's 30 s is larger
    counts.update({(J, "submitted"): 30, (J, "results"): 10})
    started[(J, "results")] = 15.0
    assert P.eta_seconds(counts, started, now=20.0) == pytest.approx(30.0)
    counts[(NS, "scored.toxicity")] = 1000
    assert P.eta_seconds(counts, started, now=20.0) == pytest.approx(10.0)
    assert P.eta_seconds({(NS, "read"): 5}, {}, now=1.0) is None  # nothing scored yet: no rate
    assert P.eta_seconds({}, {}, now=1.0) is None


def test_reporter_writes_only_changes_and_counts_through_progress_counters():
    now = [100.0]
    out = io.StringIO()
    rep = P.ProgressReporter(interval=5, stream=out, clock=lambda: now[0])
    P.reset()
    rep.started = now[0]
    assert rep.tick() is None and out.getvalue() == ""  # nothing counted: no line
    c = P.ProgressCounter("read", beam_counter=_NullCounter())
    c.inc(7)
    now[0] = 103.0
    assert rep.tick() == "progress: 7 interactions read; 3 s elapsed, time left unknown"
    assert rep.tick() is None  # unchanged: no second line
    c.inc()
    assert rep.tick().startswith("progress: 8 interactions read")
    assert out.getvalue().count("\n") == rep.lines == 2
    # the run's last line is written even when nothing changed since the line before, which still
    # said the time left (fresh14: the last line read "time left unknown" under a finished run)
    now[0] = 105.0
    assert rep.tick(final=True) == "progress: 8 interactions read; 5 s elapsed"
    assert rep.lines == 3
    P.reset()
    with pytest.raises(ValueError):
        P.ProgressReporter(interval=0)


def test_reporter_thread_is_rate_limited():
    out = io.StringIO()
    c = P.ProgressCounter("scored.x", beam_counter=_NullCounter())
    with P.ProgressReporter(interval=0.2, stream=out):
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:  # thousands of increments, a handful of lines
            c.inc()
            time.sleep(0.0005)
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) <= 6, lines
    P.reset()


def test_quiet_reporter_does_nothing():
    out = io.StringIO()
    with P.ProgressReporter(interval=0.05, stream=out, enabled=False) as rep:
        P.ProgressCounter("read", beam_counter=_NullCounter()).inc()
        time.sleep(0.2)
    assert out.getvalue() == "" and rep.lines == 0
    P.reset()


class _NullCounter:
    def inc(self, n=1):
        pass


def _main_job(tmp_path, *extra):
    argv = [sys.executable, "-m", "pipelines.audit", "--metrics", "humanity,toxicity", "--group-extractor", "keyword",
            "--no-report", "--output", str(tmp_path / "out"), f"--runner={FNAPI}", "--progress-interval", "0.5", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, time.monotonic() - t0


@pytest.mark.slow
def test_main_job_reports_progress_on_stderr_and_quiet_silences_it(tmp_path):
    proc, seconds = _main_job(tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("progress: ")]
    assert lines, proc.stderr[-3000:]
    # while the run works a line says the time left; the last one, written once the pipeline
    # finished (when the counts changed since the line before), says the elapsed time only
    assert all(re.fullmatch(r"progress: [\d,]+ interactions read(, scored: .+)?; .+ elapsed, "
                            r"(time left unknown|about .+ of scoring left|scoring caught up with reading; combining and "
                            r"writing)", ln) for ln in lines[:-1]), lines
    assert re.fullmatch(r"progress: [\d,]+ interactions read(, scored: .+)?; .+ elapsed", lines[-1]), lines
    assert any("scored: humanity" in ln for ln in lines) or any(" 2,042 interactions read" in ln for ln in lines)
    assert len(lines) <= seconds / 0.5 + 1  # at most one line per interval, never one per element (2,042)
    assert "progress:" not in proc.stdout  # stdout keeps the summary only
    quiet, _ = _main_job(tmp_path, "--quiet")
    assert "progress:" not in quiet.stderr and quiet.stdout == ""


def _judged_job(tmp_path, srv, name):
    data = [{"session_id": "s1", "assistant_id": "bot", "language": "english", "context": "You sell bread.",
             "conversation": [{"qa_id": str(i), "query": f"Question {i}?", "assistant": f"Answer {i}.",
                               "ground_truth_assistant": "Bread."} for i in range(3)]}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(data), encoding="utf-8")
    argv = [sys.executable, "-m", "pipelines.audit", "--input", str(inp), "--metrics", "context", "--no-report",
            "--output", str(tmp_path / name), f"--runner={FNAPI}", "--progress-interval", "0.2", "--allow-empty",
            "--judge-base-url", srv.base_url, "--judge-model", "m", "--judge-api-key-env", "FFB_TEST_PROGRESS_KEY"]
    env = {**os.environ, "FFB_TEST_PROGRESS_KEY": "sk-test-progress-not-a-key"}
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("progress: ")]
    return proc, lines


@pytest.mark.slow
@pytest.mark.parametrize("reply,scored", [({"score": 0.5, "insight": "ok"}, 3), ("no verdict here", 0)])
def test_a_judge_metrics_last_progress_line_counts_what_the_summary_counts(tmp_path, reply, scored):
    """Trial 28f B12: the last line said 'scored: context 6' for 3 scored turns (it counted the
    judge's session parts: one per turn and one per verdict) and 'context 3' when every answer
    was a dead letter (0 scored)."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(lambda req: reply) as srv:
        proc, lines = _judged_job(tmp_path, srv, "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert doc["summary"]["metrics"]["context"]["interactions_scored"] == scored
    counted = [ln for ln in lines if "scored: context" in ln]
    assert counted, lines
    assert re.search(rf"scored: context {scored}(;|,|$| )", counted[-1]), counted
    assert re.search(rf"scored: context {scored}(;|,|$| )", lines[-1]), lines


def test_after_scoring_the_line_says_what_runs_and_a_heartbeat_keeps_coming():
    """Trial 10 T15: "about 4 s left", then nothing for 3 1/2 minutes: the estimate covered scoring only
    and no count moves while the run combines, estimates and writes. The estimate now says it is of
    scoring; once scoring caught up with reading the line says what runs; and a line comes every
    HEARTBEAT seconds while no count moves."""
    now = [0.0]
    out = io.StringIO()
    P.reset()
    rep = P.ProgressReporter(interval=5, stream=out, clock=lambda: now[0])
    rep.started = 0.0
    P.ProgressCounter("read", beam_counter=_NullCounter()).inc(10)
    P.ProgressCounter("taken.humanity", beam_counter=_NullCounter()).inc(10)
    P.ProgressCounter("scored.humanity", beam_counter=_NullCounter()).inc(9)
    now[0] = 10.0
    assert rep.tick() == ("progress: 10 interactions read, scored: humanity 9 (1 not scored); 10 s elapsed, scoring "
                          "caught up with reading; combining and writing")
    now[0] = 10.0 + P.HEARTBEAT - 1
    assert rep.tick() is None  # nothing moved, within the heartbeat
    now[0] = 10.0 + P.HEARTBEAT
    assert rep.tick() == ("progress: 10 interactions read, scored: humanity 9 (1 not scored); 40 s elapsed, scoring "
                          "caught up with reading; combining and writing")
    P.reset()
