"""``--quiet`` reaches the multi-process SDK workers (trial39 T13: a judge run with
``--direct_running_mode=multi_processing --quiet`` printed about 60 lines of the workers' own Beam
logs on stderr — ``Python sdk harness starting``, ``BatchElements statistics`` — into a cron job's mail)."""
from __future__ import annotations

import os
import re

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


def _lines_without_times(err: str) -> list:
    return sorted(re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", line) for line in err.splitlines())


@pytest.mark.slow
def test_a_multi_process_run_without_quiet_prints_what_the_in_memory_run_prints(tmp_path):
    """trial49: without ``--quiet`` each multi-process worker printed Beam's INFO records on its own stderr
    (``Python sdk harness starting``, ``BatchElements statistics``, ``Moving 2 temporary files``, the apitools
    notice, the relayed "No semi_persistent_directory found": 59 lines beside the launcher's one) where the
    in-memory run of the same command prints the launcher's line alone."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    got = {}
    with ScriptedOpenAIServer('{"score": 0.8, "insight": "fine"}') as srv:
        for name, beam_args in (("in memory", ()), ("two processes", MULTI_PROCESS)):
            proc = context_audit(tmp_path, srv, tmp_path / name.replace(" ", "_"), *beam_args)
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr
            got[name] = _lines_without_times(stderr)
    assert got["in memory"] and all(" fair_forge_beam." in line for line in got["in memory"]), got["in memory"]
    assert got["two processes"] == got["in memory"], "\n".join(got["two processes"])[:3000]
