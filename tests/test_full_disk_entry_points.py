"""The machine refusing a command's writes (disk46): every entry point, from the command line and from Python,
fails with the package's one error, :class:`~fair_forge_beam.console.OutputWriteError`, naming its output
folder (or file) with the errno's hint; the command line says it in one line, exit code 1; nothing it left
looks complete to a later run or a reader (docs/reliability.md, "What each command does on a full disk").

Real failures, nothing of ``open`` replaced: a child process under ``RLIMIT_FSIZE`` (``ulimit -f``: EFBIG),
and a read-only bind mount in a mount namespace of the child's own (``unshare -m``: EROFS; root writes into a
``chmod 555`` folder, so a mode stops nothing here). Session 30 left the class open: ``rollup``, ``trend`` and
``compare`` called from Python raised the raw ``OSError`` (or Beam's ``RuntimeError``), and trend's line
said "the output folder, if any, is as it was" instead of naming it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FNAPI, REPO

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
#: bytes any file of the child may hold
LIMIT = 4096


def _env() -> dict:
    # no bytecode written under the limit: a .pyc cut at LIMIT bytes breaks every later import of the module
    # (test_console_preflight.test_a_file_size_limit_stops_the_run_in_one_line)
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "PYTHONDONTWRITEBYTECODE": "1"}


def _limited(limit: int = LIMIT):
    def preexec():
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


@pytest.mark.slow
def test_the_loop_under_a_file_size_limit_says_one_line_and_no_writer_traceback(tmp_path):
    """``ulimit -f 4096`` failing the loop's audit stage: its line was followed by two ``Exception ignored in:
    <function ParquetWriter.__del__>`` tracebacks (OSError: [Errno 27]), the failed bundle's Parquet writers
    closed again, into the full file, when they were collected."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    def generator(req):
        return {"queries": [{"query": "How many bags can a gold member check?"}], "chunk_summary": "baggage"}

    out = tmp_path / "out"
    with ScriptedOpenAIServer(generator) as gen, ScriptedOpenAIServer(lambda req: "Three bags, free.") as bot:
        proc = subprocess.run(
            [sys.executable, "-m", "pipelines.loop", "--corpus", "airline", "--strategy", "random", "--num-samples", "2",
             "--chunks-per-sample", "1", "--seed", "3", "--num-queries", "1", "--generator-base-url", gen.base_url,
             "--generator-model", "gen", "--generator-cache", str(tmp_path / "g.sqlite3"), "--assistant-url",
             bot.base_url, "--assistant-model", "bot", "--metrics", "humanity", "--output", str(out), f"--runner={FNAPI}",
             "--quiet"], cwd=tmp_path, env=_env(), preexec_fn=_limited(4096), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m pipelines.loop: error: the loop stopped: File too large (the file size limit, "
                           "ulimit -f) (in the pipeline's step ") and last.endswith(f"nothing was written ({out / 'audit'} "
                                                                                    "was not created)"), last
    # the stages published before it are whole runs; no stage, no half-written file beside them
    assert sorted(p.name for p in out.iterdir()) == ["generated", "run"]
    for stage in ("generated", "run"):
        assert (out / stage / "_SUCCESS").read_text().startswith('{"run": ')
