"""Issue 26, item 2: an SDK worker's data-plane messages are about 1 MB, not Beam Python's 10 MiB
(docs/performance.md, "What the TaskManagers hold in the read stage").

A portable runner's Java side queues up to 100 messages per data stream of a bundle; with 10 MiB
messages the local Flink cluster's TaskManagers held 17-66 of them (up to 695 MB of a 1.1 GB heap) in
the 1M and 2M audits' read stage. Every run's SDK workers now import ``fair_forge_beam.worker_plugin``
(Beam's ``--beam_plugins``), which bounds the messages. That a Flink job's workers import it is checked
by tests/test_process_workers.py::test_flink_cluster_from_a_venv (slow); Beam's in-memory runner passes
elements in process, and its multi-process workers get no pipeline options (nor a Java queue).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import SetupOptions

from fair_forge_beam import _beam
from fair_forge_beam.beam_pipeline import WORKER_PLUGIN, pipeline_options

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_run_names_the_plugin_once_after_the_callers_own():
    opts = pipeline_options(["--runner=FlinkRunner", "--beam_plugins=my.plugin"])
    assert opts.view_as(SetupOptions).beam_plugins == ["my.plugin", WORKER_PLUGIN]
    assert opts.get_all_options(drop_default=True)["beam_plugins"] == ["my.plugin", WORKER_PLUGIN]
    again = pipeline_options([f"--beam_plugins={WORKER_PLUGIN}"])
    assert again.view_as(SetupOptions).beam_plugins == [WORKER_PLUGIN]
    assert pipeline_options([]).view_as(SetupOptions).beam_plugins == [WORKER_PLUGIN]
    assert (ROOT / (WORKER_PLUGIN.replace(".", "/") + ".py")).is_file()


def test_a_worker_that_imported_the_plugin_flushes_at_about_1_mb():
    # in a process of its own: the bound is process-wide, as in a worker
    out = _python("""
        from apache_beam.runners.worker import data_plane
        import fair_forge_beam.worker_plugin  # what Beam's worker does with --beam_plugins
        from fair_forge_beam._beam import DATA_MESSAGE_BYTES
        sizes = []
        stream = data_plane.ClosableOutputStream.create(None, lambda data: sizes.append(len(data)), 0)
        for _ in range(60):  # 6 MB of 100 kB elements, flushed between elements as Beam's coders do
            stream.write(b"x" * 100_000)
            stream.maybe_flush()
        big = []
        one = data_plane.ClosableOutputStream.create(None, lambda data: big.append(len(data)), 0)
        one.write(b"y" * 3_000_000)  # an element larger than the bound travels whole
        one.maybe_flush()
        import json
        print(json.dumps([DATA_MESSAGE_BYTES, data_plane._DEFAULT_SIZE_FLUSH_THRESHOLD, sizes, big]))
    """)
    limit, joined, sizes, big = json.loads(out)
    assert limit == 1_000_000 and joined == limit  # the sender joins messages up to the same bound
    assert len(sizes) == 5 and all(limit < s <= limit + 100_000 for s in sizes), sizes
    assert big == [3_000_000]


def test_a_beam_without_these_parts_keeps_its_own_size_and_says_so(monkeypatch, caplog):
    from apache_beam.runners.worker import data_plane

    monkeypatch.delattr(data_plane, "_DEFAULT_SIZE_FLUSH_THRESHOLD")
    before = data_plane.SizeBasedBufferingClosableOutputStream.__init__.__defaults__
    with caplog.at_level(logging.WARNING):
        assert _beam.bound_data_plane_messages() is False
    assert data_plane.SizeBasedBufferingClosableOutputStream.__init__.__defaults__ == before
    assert "messages of Beam's own size" in caplog.text


def test_this_beam_has_the_parts_the_bound_sets():
    # Beam's Python SDK names these in 2.77; a Beam that renames them fails here, not silently on a cluster
    from apache_beam.runners.worker import data_plane

    assert data_plane._DEFAULT_SIZE_FLUSH_THRESHOLD in (10 << 20, _beam.DATA_MESSAGE_BYTES)
    for stream in (data_plane.SizeBasedBufferingClosableOutputStream, data_plane.TimeBasedBufferingClosableOutputStream):
        code = stream.__init__.__code__
        assert "size_flush_threshold" in code.co_varnames[:code.co_argcount]
    with pytest.raises(ValueError, match="no default"):
        _beam._set_default(lambda a, b=1: None, "a", 2)
