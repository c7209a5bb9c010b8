"""A full disk (issue 28, trial 28e B3 and B10): every command's publication is all or nothing, and
the disk filling is exit code 1 with one line, never a dead letter of the data nor exit code 4.

The disk is simulated: Beam's ``FileSystems.create`` hands out files that raise ``ENOSPC`` once a
file passes a byte budget (as a 100 KB tmpfs did in the trial)."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from pipelines import audit
from test_trend import doc, tox


class _FullFile:
    def __init__(self, f, budget):
        self._f, self._left = f, budget

    def write(self, data):
        if len(data) > self._left:
            self._f.write(data[:self._left])
            self._left = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._left -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.fixture
def disk_full_for(monkeypatch):
    """``disk_full_for(suffix, budget)``: files whose name ends with ``suffix`` (partial names
    included) fill the disk after ``budget`` bytes."""
    from apache_beam.io.filesystems import FileSystems

    real = FileSystems.create

    def arm(suffix: str, budget: int = 1000):
        def create(path, *a, **kw):
            f = real(path, *a, **kw)
            name = path[:-len(".partial")].rsplit(".", 1)[0] if path.endswith(".partial") else path
            return _FullFile(f, budget) if name.endswith(suffix) else f
        monkeypatch.setattr(FileSystems, "create", staticmethod(create))
    return arm


def _run(folder: Path, started: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc("bayesian", [tox("overall", 1, 10, 3)])), encoding="utf-8")
    (folder / "run_info.json").write_text(json.dumps({"started_at": started}), encoding="utf-8")
    return folder


def test_trend_on_a_full_disk_publishes_nothing(tmp_path, capsys, disk_full_for):
    """B10: 'nothing was published' while a truncated trend.html and a new trend.json stayed."""
    a = _run(tmp_path / "audits" / "a", "2026-12-01T00:00:00Z")
    out = tmp_path / "tr"
    assert audit.main(["trend", str(a), "--output", str(out), "--no-plots", "--quiet"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["trend.html", "trend.json"]
    _run(tmp_path / "audits" / "b", "2026-12-02T00:00:00Z")
    capsys.readouterr()
    disk_full_for("trend.html")
    assert audit.main(["trend", str(tmp_path / "audits" / "*"), "--output", str(out), "--no-plots", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "nothing was published" in err[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no new trend.json, no .partial, no half page
    # a folder made for the trend goes with it
    assert audit.main(["trend", str(a), "--output", str(tmp_path / "new"), "--no-plots", "--quiet"]) == 1
    assert not (tmp_path / "new").exists()


def test_compare_json_and_tool_reports_on_a_full_disk_keep_the_old_file(tmp_path, capsys, disk_full_for):
    """compare --json was opened in place (a truncated file, and exit code 2 as if a usage error);
    explain's and optimize's report.html too."""
    from fair_forge_beam.console import guarded
    from fair_forge_beam.reports import compare
    from fair_forge_beam.reports.tool_reports import write_explain_report

    a = _run(tmp_path / "a", "2026-12-01T00:00:00Z")
    b = _run(tmp_path / "b", "2026-12-02T00:00:00Z")
    old = tmp_path / "cmp.json"
    old.write_text("old", encoding="utf-8")
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "report.html").write_text("old page", encoding="utf-8")
    disk_full_for("", budget=10)
    capsys.readouterr()
    assert guarded(lambda: compare.main([str(b), str(a), "--json", str(old)]), "comparison", "compare") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compare: error: the comparison stopped: No space left on device"), err
    with pytest.raises(OSError):
        write_explain_report(str(tmp_path / "rep"), [], [], {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "cmp.json", "rep"]
    assert old.read_text() == "old" and [p.name for p in (tmp_path / "rep").iterdir()] == ["report.html"]
    assert (tmp_path / "rep" / "report.html").read_text() == "old page"


@pytest.fixture
def small_sqlite(monkeypatch):
    """Every SQLite file the answer cache opens holds at most 3 pages (its schema and table): the
    first stored answer fills it ('database or disk is full', SQLITE_FULL) as a full disk does."""
    from fair_forge_beam.components.judge import cache

    real = cache.sqlite3.connect

    def connect(*a, **kw):
        conn = real(*a, **kw)
        conn.execute("PRAGMA max_page_count=3")
        return conn
    monkeypatch.setattr(cache.sqlite3, "connect", connect)


def test_a_full_judge_cache_keeps_every_answer(tmp_path, small_sqlite, caplog):
    """B3: --judge-cache on a full disk dead-lettered every valid answer ('judge: batch failed:
    database or disk is full'), and the run ended as an empty run (exit code 4)."""
    from helpers import run_judge
    from test_judge_pipeline import ScriptedOpenAIServer, echo_verdict, handler_for, make_requests

    reqs = make_requests([f"answer {i} " + "x" * 3000 for i in range(6)])
    with ScriptedOpenAIServer(echo_verdict) as srv:
        handler = handler_for(srv, tmp_path, cache_path=str(tmp_path / "c.sqlite3"))
        with caplog.at_level("WARNING"):
            results, dead, counters = run_judge(handler, reqs, tmp_path)
    assert not dead and sorted(r["key"] for r in results) == sorted(r.key for r in reqs)
    warnings = [r.getMessage() for r in caplog.records if "answer cache" in r.getMessage()]
    assert warnings and all("database or disk is full; going on without it" in w for w in warnings)


def test_a_full_disk_in_sqlite_is_one_line_exit_code_1():
    import sqlite3

    from fair_forge_beam.console import environment_failure

    assert environment_failure(sqlite3.OperationalError("database or disk is full")) == \
        "No space left on device (SQLite: database or disk is full)"
    wrapped = RuntimeError("sqlite3.OperationalError: database or disk is full [while running 'Judge/Call']")
    assert environment_failure(wrapped).endswith("(in the pipeline's step Judge/Call)")
    assert environment_failure(sqlite3.OperationalError("no such table: answers")) is None


def test_a_full_disk_in_a_scorer_stops_the_run_instead_of_dead_lettering_the_data():
    """The class of B3: a step that dead-letters what it cannot score turned the machine's ENOSPC
    into one dead letter per record (then an 'empty run', exit code 4)."""
    from types import SimpleNamespace

    from fair_forge_beam.assistants.assistant import _FailedBatch
    from fair_forge_beam.metrics.toxicity import _ScoreToxicity

    class Matcher:
        def __init__(self, exc):
            self.exc = exc

        def match(self, text, language):
            raise self.exc

    x = SimpleNamespace(assistant="hi", language="english", element_id="s/a/0", _asdict=lambda: {"assistant": "hi"})
    for exc, stops in ((OSError(errno.ENOSPC, "No space left on device"), True), (ValueError("bad text"), False)):
        fn = _ScoreToxicity(Matcher(exc), None, None, None, 0.5, False, False)
        fn._covered = {}
        if stops:
            with pytest.raises(OSError):
                fn.process([x])
        else:
            out = fn.process([x])
            assert len(out) == 1 and "lexicon match failed: bad text" in out[0].value.reason
    with pytest.raises(RuntimeError, match="Errno 28"):
        list(_FailedBatch().process((['{"session_id": "s", "assistant_id": "a"}'],
                                     ("OSError", "OSError(28, '[Errno 28] No space left on device')", []))))
