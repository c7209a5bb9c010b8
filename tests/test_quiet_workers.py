"""``--quiet`` reaches the multi-process SDK workers (trial39 T13: a judge run with
``--direct_running_mode=multi_processing --quiet`` printed about 60 lines of the workers' own Beam
logs on stderr — ``Python sdk harness starting``, ``BatchElements statistics`` — into a cron job's mail)."""
from __future__ import annotations

import os

import pytest

from fair_forge_beam.sdk_worker import QUIET_WORKERS
from test_interrupts import MULTI_PROCESS, context_audit


def test_quiet_is_in_the_environment_the_workers_inherit_and_restored_after(monkeypatch):
    from fair_forge_beam.progress import QuietLogs

    monkeypatch.delenv(QUIET_WORKERS, raising=False)
    with QuietLogs() as levels:
        assert QUIET_WORKERS not in os.environ  # a run without --quiet: workers log as Beam makes them
        levels.quiet()
        assert os.environ[QUIET_WORKERS] == "1"
    assert QUIET_WORKERS not in os.environ


@pytest.mark.slow
def test_a_quiet_multi_process_judge_run_prints_nothing(tmp_path):
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    out = tmp_path / "out"
    with ScriptedOpenAIServer('{"score": 0.8, "insight": "fine"}') as srv:
        proc = context_audit(tmp_path, srv, out, *MULTI_PROCESS, "--quiet")
        stdout, stderr = proc.communicate(timeout=300)
        assert srv.count() > 0  # the workers called the judge
    assert proc.returncode == 0, stderr
    assert (stdout, stderr) == ("", ""), stderr[:2000]  # was 56 lines of the workers' logs
    assert (out / "results.json").exists()
