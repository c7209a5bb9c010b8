"""The main job's output folder (``fair_forge_beam.reports.output_folder``, moved out of
``pipelines/audit.py``): a reused folder is cleaned, a file is a usage error, and the launcher's
comparison is written without the report when ``--no-report`` is given. ``staged_output`` (issue
27): a run is written beside the folder and swapped in only when it succeeds — user files kept,
stale outputs of other run kinds and Beam's temporaries dropped, killed runs' stages cleaned, and on
an object store (``memstore://``, :mod:`fair_forge_beam.testing.object_store`) a copy with the
marker written last that the next run completes when it was cut short."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fair_forge_beam.reports.compare import compare_runs
from fair_forge_beam.reports.layout import OUTPUT_FILES
from fair_forge_beam.reports.launcher_reports import write_launcher_reports
from fair_forge_beam.console import OutputFolderError
from fair_forge_beam.reports.output_folder import (STALE_OUTPUTS, check_output_folder,
                                                   prepare_output_folder, staged_output)

DOC = {"config": {"mode": "frequentist"}, "summary": {"interactions_read": 0}, "metrics": {}}


def test_reused_folder_loses_every_earlier_output_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    for name in OUTPUT_FILES + STALE_OUTPUTS:
        if name.endswith("/") or name == "_parts":
            (out / name.rstrip("/")).mkdir(parents=True)
            (out / name.rstrip("/") / "part-0").write_text("old")  # a shard as the run names it
        else:
            out.mkdir(exist_ok=True)
            (out / name).write_text("old")
    (out / "mine.txt").write_text("keep")
    assert prepare_output_folder(str(out) + "/") == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_reused_folder_replaces_the_runs_own_folders_whole_and_keeps_top_level_files(tmp_path):
    """Hostile-tester trial (issue 28): files planted inside the shard folders survived a run, and a
    stray .parquet in results.parquet/ broke pandas.read_parquet("OUT/results.parquet"). Decision
    (docs/data.md): the run's own folders are replaced whole; the user's top-level files stay."""
    out = tmp_path / "out"
    (out / "sessions" / "humanity").mkdir(parents=True)
    (out / "sessions" / "humanity" / "part-00000-of-00001.parquet").write_text("old")
    (out / "sessions" / "mine.txt").write_text("planted")
    (out / "dead_letter").mkdir()
    (out / "dead_letter" / "part-00000-of-00002.jsonl").write_text("old")
    (out / "dead_letter" / "notes.md").write_text("planted")
    (out / "results.parquet").mkdir()
    (out / "results.parquet" / "stray.parquet").write_text("planted")
    (out / "stats" / "humanity").mkdir(parents=True)
    (out / "stats" / "humanity" / "extra.bin").write_text("planted")
    (out / "windows").mkdir()
    (out / "windows" / "0-slices-00000.jsonl").write_text("old")
    (out / "windowed_results.json").write_text("old")
    (out / "results.json.bak").write_text("keep")
    (out / "notes" / "deep").mkdir(parents=True)
    (out / "notes" / "deep" / "file.txt").write_text("keep")
    prepare_output_folder(str(out))
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert left == ["notes/deep/file.txt", "results.json.bak"]
    assert sorted(p.name for p in out.iterdir()) == ["notes", "results.json.bak"]


def test_a_run_folder_named_like_a_json_file_is_read_as_a_folder(tmp_path):
    from fair_forge_beam.reports.load import read_results, results_path

    run = tmp_path / "audit.json"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(DOC))
    assert results_path(str(run)) == f"{run}/results.json"
    assert read_results(str(run)) == DOC
    assert results_path(str(tmp_path / "x.json")) == str(tmp_path / "x.json")  # a file path stays a file


def test_missing_folder_is_created_and_a_file_is_a_usage_error(tmp_path):
    assert prepare_output_folder(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="^--output must be a folder, but .* is a file$"):
        prepare_output_folder(str(tmp_path / "f"))
    with pytest.raises(ValueError, match="^--output: cannot create folder"):
        prepare_output_folder(str(tmp_path / "f" / "sub"))


def test_no_report_with_a_baseline_writes_the_comparison_only(tmp_path):
    written, failure = write_launcher_reports(str(tmp_path), DOC, {}, DOC, no_report=True, inconclusive_width=0.2)
    assert failure is None
    assert written == ["results.json", "results.parquet/", "sessions/", "slices/", "dead_letter/", "data_quality/",
                       "run_info.json", "stats/", "comparison.json"]
    assert json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8")) == compare_runs(DOC, DOC)
    assert not (tmp_path / "report.html").exists()
    assert write_launcher_reports(str(tmp_path / "x"), DOC, {}, None, True, 0.2) == (list(OUTPUT_FILES[:8]), None)


@pytest.fixture
def store():
    from fair_forge_beam.testing.object_store import MemoryObjectStore

    MemoryObjectStore.clear()
    yield MemoryObjectStore
    MemoryObjectStore.clear()


# ------------------------------------------------------------------ staged_output (issue 27: never destroy the last good run)
def _tree(root) -> dict:
    """Every file under ``root`` by relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _siblings(out) -> list:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name + "."))


def _previous_run(out):
    """A previous run's folder with the user's own files and leftovers of killed and other runs."""
    files = {
        "results.json": "old", "run_info.json": "old", "gates.json": "old", "_SUCCESS": '{"run": "old"}\n',
        "results.parquet/part-00000-of-00002.parquet": "old",
        "results.parquet/beam-temp-part-1f2e/0c9d.parquet": "partial",  # a killed run's (issue 28)
        "beam-temp-results.json-77aa/x": "partial",
        "sessions/humanity/part-00000-of-00001.parquet": "old",
        "windows/humanity-slices-2024-05-01T10-2024-05-01T11-0-00000-of-00001.jsonl": "old",  # another run kind
        "windows/.temp5e1c/shard": "partial",  # fileio's temporary folder kept windows/ alive
        "windowed_results.json": "old",
        "mine.txt": "keep", "sessions/notes.md": "planted", "notes/deep/file.txt": "keep",
    }
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return files


def _write(stage, rel, text):
    path = Path(stage) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_staged_output_replaces_the_outputs_and_keeps_the_users_files(tmp_path):
    out = tmp_path / "out"
    _previous_run(out)
    with staged_output(str(out) + "/") as stage:
        assert Path(stage).parent == tmp_path and Path(stage).name.startswith("out.staging-")
        _write(stage, "results.json", "new")
        _write(stage, "results.parquet/part-00000-of-00001.parquet", "new")
        _write(stage, "results.parquet/beam-temp-part-9a/x.parquet", "tmp")  # Beam's, never published
        assert _tree(out)["results.json"] == b"old"  # nothing changes while the run writes
    tree = _tree(out)
    marker = json.loads(tree.pop("_SUCCESS"))
    assert marker["run"] == Path(stage).name.split(".staging-")[1]
    assert tree == {"results.json": b"new", "results.parquet/part-00000-of-00001.parquet": b"new",
                    "mine.txt": b"keep", "notes/deep/file.txt": b"keep"}  # sessions/notes.md: the run's folder is replaced
    assert _siblings(out) == []
    assert not (out / "windows").exists()  # a stale folder of another run kind goes, its temporaries too


def test_an_exception_in_the_block_leaves_the_folder_byte_identical(tmp_path):
    from fair_forge_beam.reports.empty_run import EmptyRun

    out = tmp_path / "out"
    _previous_run(out)
    before = _tree(out)
    for exc in (RuntimeError("pipeline failed"), EmptyRun("no input record")):
        with pytest.raises(type(exc)):
            with staged_output(str(out)) as stage:
                _write(stage, "results.json", "new")
                raise exc
        assert _tree(out) == before
        assert _siblings(out) == []  # the stage and its lock are gone


def test_a_killed_runs_stage_goes_but_a_running_runs_stage_stays(tmp_path):
    import fcntl

    from fair_forge_beam.reports import output_folder

    out = tmp_path / "out"
    killed = tmp_path / "out.staging-20260101T000000Z-0badc0de"
    _write(killed, "results.parquet/beam-temp-part-1/x.parquet", "partial")
    output_folder.mark_stage(str(killed))  # made by a run of ours: marked when made (trial48c D)
    (tmp_path / "out.staging-20260101T000000Z-0badc0de.lock").write_text("")  # nobody holds it: its run died
    running = tmp_path / "out.staging-20260101T000001Z-00c0ffee"
    _write(running, "results.json", "being written")
    output_folder.mark_stage(str(running))
    with open(str(running) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run, still going
        # trial35 T8: a second run into a folder a live run writes is refused (both published, one
        # after the other, and the first one's results vanished with no warning)
        with pytest.raises(OutputFolderError, match="is being written by another run"):
            with staged_output(str(out)):
                pytest.fail("the block ran")
        assert not killed.exists() and not Path(str(killed) + ".lock").exists()
        assert (running / "results.json").read_text() == "being written"
        assert not out.exists()
    with staged_output(str(out)) as stage:  # the other run gone (its lock released): the folder is free
        _write(stage, "results.json", "new")
    assert (out / "results.json").read_text() == "new"


def _live_run(out: Path, then: str = ""):
    """Another process running into ``out``: it holds its stage (printed on its stdout) until a line
    comes on its stdin, then runs ``then`` (code with ``stage`` in scope) and publishes."""
    import os
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", "import sys\n"
         "from fair_forge_beam.reports.output_folder import staged_output\n"
         "with staged_output(sys.argv[1]) as stage:\n"
         "    print(stage, flush=True)\n"
         "    sys.stdin.readline()\n" + then, str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def test_a_second_run_into_a_folder_a_live_run_writes_is_refused_naming_it(tmp_path):
    """trial35 T8: two runs into the same --output at once both exited 0 and one's results vanished.
    A run holding its stage (another process) makes a second one refuse at start in one line that
    names the holder's pid and host; once the first ends, the folder is free again."""
    import socket

    out = tmp_path / "out"
    holder = _live_run(out)
    try:
        stage = holder.stdout.readline().strip()
        assert stage, "the holder made no stage"
        with pytest.raises(OutputFolderError) as exc:
            with staged_output(str(out)):
                pytest.fail("the block ran")
        line = str(exc.value)
        assert "\n" not in line and f"pid {holder.pid} on host {socket.gethostname()}" in line and stage in line
        assert Path(stage).is_dir()  # the live run's stage is left alone
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0 and out.is_dir()
    with staged_output(str(out)) as stage:
        _write(stage, "results.json", "second")
    assert (out / "results.json").read_text() == "second"


def test_without_an_atomic_exchange_two_renames_and_a_kill_between_them_is_repaired(tmp_path, monkeypatch):
    import errno

    from fair_forge_beam.reports import output_folder

    def no_exchange(a, b):
        raise OSError(errno.ENOSYS, "renameat2 is not available")

    monkeypatch.setattr(output_folder, "_exchange", no_exchange)
    out = tmp_path / "out"
    _previous_run(out)
    with staged_output(str(out)) as stage:
        _write(stage, "results.json", "new")
    assert (out / "results.json").read_text() == "new" and (out / "mine.txt").read_text() == "keep"
    assert _siblings(out) == []
    # killed between the renames: the folder is missing, the previous run is beside it
    before = _tree(out)
    previous = tmp_path / "out.previous-20260101T000000Z-12345678"
    out.rename(previous)
    output_folder.mark_stage(str(previous))  # as the swap marks the previous run after its first rename
    assert output_folder.clean_stale_stages(str(out)) == [str(previous)]
    assert _tree(out) == before and _siblings(out) == []


def test_a_stage_inside_a_mount_point_is_published_by_copy(tmp_path, monkeypatch):
    """A mount point (a Docker volume as --output) cannot be renamed over: the stage lives inside it
    and is copied in, the marker removed first and written last."""
    import os

    from fair_forge_beam.reports import output_folder

    out = tmp_path / "out"
    _previous_run(out)
    real_ismount = os.path.ismount
    monkeypatch.setattr(output_folder.os.path, "ismount", lambda p: str(p) == str(out) or real_ismount(p))
    with staged_output(str(out)) as stage:
        assert Path(stage).parent == out and Path(stage).name.startswith(".staging-")
        _write(stage, "results.json", "new")
        _write(stage, "sessions/humanity/part-00000-of-00001.parquet", "new")
    tree = _tree(out)
    assert json.loads(tree.pop("_SUCCESS"))["run"] == Path(stage).name.split(".staging-")[1]
    assert tree == {"results.json": b"new", "sessions/humanity/part-00000-of-00001.parquet": b"new",
                    "mine.txt": b"keep", "notes/deep/file.txt": b"keep"}  # sessions/notes.md: the run's folder is replaced


def test_usage_errors_of_the_output_folder(tmp_path, store):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="^--output must be a folder, but .* is a file$"):
        check_output_folder(str(tmp_path / "f"))
    with pytest.raises(ValueError, match="^--output: cannot create folder"):
        check_output_folder(str(tmp_path / "f" / "sub" / "out"))
    with pytest.raises(ValueError, match="^--output memstore://bucket: give a folder inside the bucket"):
        check_output_folder("memstore://bucket/")
    with pytest.raises(ValueError, match="^Unable to get filesystem"):  # e.g. gs:// without Beam's gcp extra
        check_output_folder("nosuchscheme://bucket/out")
    assert check_output_folder(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()  # created with the stage, when the run starts


def test_the_check_writes_nothing_so_a_later_usage_error_leaves_no_trace(tmp_path):
    """A command checks its output first and may still refuse its other arguments: the check
    neither creates a missing parent nor touches an existing folder (its entries and modification
    time stay as they were; a nightly job's monitoring may watch both)."""
    (tmp_path / "audits").mkdir()
    (tmp_path / "audits" / "mon").mkdir()
    before = {p: p.stat().st_mtime_ns for p in (tmp_path, tmp_path / "audits", tmp_path / "audits" / "mon")}
    time.sleep(0.02)
    for out, staged in ((tmp_path / "audits" / "tue", True), (tmp_path / "audits" / "mon", True),
                        (tmp_path / "audits" / "mon", False), (tmp_path / "new" / "deep" / "out", True)):
        check_output_folder(str(out), staged=staged)
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audits"]
    assert sorted(p.name for p in (tmp_path / "audits").iterdir()) == ["mon"]
    with staged_output(str(tmp_path / "new" / "deep" / "out")) as stage:  # a run makes the parents it needs
        Path(stage, "results.json").write_text("{}")
    assert (tmp_path / "new" / "deep" / "out" / "results.json").is_file()


# ------------------------------------------------------------------ object stores
def _put_previous(store, out):
    for rel in ("results.json", "results.parquet/part-00000-of-00002.parquet", "results.parquet/beam-temp-p-1/x",
                "windows/a-b-c.jsonl", "mine.txt", "_SUCCESS"):
        store.put(f"{out}/{rel}", b"keep" if rel == "mine.txt" else b"old")


def _stage_write(stage, rel, data=b"new"):
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(f"{stage}/{rel}") as f:
        f.write(data)


def test_object_store_copies_the_stage_in_and_writes_the_marker_last(store):
    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    seen = []

    def on_write(path):
        if path.startswith(out + "/"):
            seen.append((path[len(out) + 1:], store.keys(f"{out}/_SUCCESS") != []))

    with staged_output(out) as stage:
        assert stage.startswith(out + ".staging-")
        _stage_write(stage, "results.json")
        _stage_write(stage, "results.parquet/part-00000-of-00001.parquet")
        assert store.get(f"{out}/results.json") == b"old"
        store.on_write = on_write
    assert seen[-1] == ("_SUCCESS", False)  # the marker is written last
    assert all(not had_marker for _, had_marker in seen)  # no reader sees a marker while the folder is mixed
    assert store.keys("memstore://bucket/") == [f"{out}/{n}" for n in (
        "_SUCCESS", "mine.txt", "results.json", "results.parquet/part-00000-of-00001.parquet")]
    assert store.get(f"{out}/results.json") == b"new" and store.get(f"{out}/mine.txt") == b"keep"


def test_object_store_failed_run_leaves_the_folder_and_a_cut_publication_is_completed(store):
    from fair_forge_beam.reports.output_folder import clean_stale_stages

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    before = store.snapshot(out + "/")
    with pytest.raises(RuntimeError):
        with staged_output(out) as stage:
            _stage_write(stage, "results.json")
            raise RuntimeError("pipeline failed")
    assert store.snapshot("memstore://bucket/") == before

    def die_in_the_middle(path):
        if path == f"{out}/results.parquet/part-00000-of-00001.parquet":
            raise OSError("killed")

    with pytest.raises(OSError):
        with staged_output(out) as stage:
            _stage_write(stage, "results.json")
            _stage_write(stage, "results.parquet/part-00000-of-00001.parquet")
            store.on_write = die_in_the_middle
    store.on_write = None
    assert store.keys(f"{out}/_SUCCESS") == []  # cut short: readers see an unfinished folder
    assert clean_stale_stages(out) == [stage]  # the next run completes it from the stage
    assert store.get(f"{out}/results.parquet/part-00000-of-00001.parquet") == b"new"
    assert store.keys(f"{out}/_SUCCESS") and store.keys(stage) == []


def test_a_failed_run_into_an_object_store_folder_says_the_previous_run_is_untouched(store, capsys):
    """An object store has no folders: ``exists`` of the prefix is false beside the previous run's objects, and a
    run failing there said "nothing was written (memstore://…/today was not created)"."""
    import errno

    from fair_forge_beam import console

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    before = store.snapshot("memstore://bucket/")

    def run():
        with staged_output(out) as stage:
            _stage_write(stage, "results.json")
            raise OSError(errno.ENOSPC, "No space left on device", f"{stage}/results.json")

    assert console.guarded(run, "audit") == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.endswith(f"nothing was published; the output folder {out} is untouched (as it was before the run)"), line
    assert store.snapshot("memstore://bucket/") == before


def _publish_failing(store, capsys, out, hook: str, fail, before: bool = False) -> tuple:
    """A run into ``out`` whose store calls ``fail`` from its ``hook`` (``"on_write"``, ``"on_delete"``) once the
    stage is written (``before``: from the start, the stale stages' settling included): ``(exit code, the last
    line on stderr, the run's stage)``."""
    from fair_forge_beam import console

    seen = {}

    def run():
        with staged_output(out) as stage:
            seen["stage"] = stage
            _stage_write(stage, "results.json")
            _stage_write(stage, "results.parquet/part-00000-of-00001.parquet")
            setattr(store, hook, fail)
        return 0

    if before:
        setattr(store, hook, fail)
    try:
        code = console.guarded(run, "audit")
    finally:
        setattr(store, hook, None)
    return code, capsys.readouterr().err.strip().splitlines()[-1], seen.get("stage")


def test_a_publication_cut_short_by_the_machine_says_so_and_keeps_its_stage(store, capsys):
    """A full disk (quota) half-way through an object store's copy-based publication: the previous run's
    outputs were removed and this run's partly copied, yet the line said the folder was "untouched (as it was
    before the run)" (disk46's leftover). Now the line and the error say it holds a publication cut short and
    name the stage the next run completes it from; an interrupt's watchdog no longer removes that stage."""
    import errno

    from fair_forge_beam import console
    from fair_forge_beam.reports.output_folder import clean_stale_stages

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    seen = {}

    def quota_in_the_middle(path):
        if path == f"{out}/results.parquet/part-00000-of-00001.parquet":
            seen["kept for the watchdog"] = [s for s in console._STATE.stages if s.startswith(out)]
            raise OSError(errno.EDQUOT, "Disk quota exceeded", path)

    code, line, stage = _publish_failing(store, capsys, out, "on_write", quota_in_the_middle)
    assert code == 1
    assert "untouched" not in line and "nothing was published" not in line, line
    assert line.endswith(f"the output folder {out} holds a publication cut short (its earlier outputs removed, this "
                         f"run's partly copied, no _SUCCESS marker: readers see an unfinished folder); the next run "
                         f"into it completes this run's publication from {stage}"), line
    assert seen["kept for the watchdog"] == []  # an interrupt's watchdog would have removed the only whole copy
    assert store.keys(f"{out}/_SUCCESS") == [] and store.keys(f"{stage}/_SUCCESS")
    # the next run's completion of it cut again (trial47b B3: its line said "nothing was published (the output
    # folder, if any, is as it was)"): the same words, the stage kept for the run after
    code, line, _ = _publish_failing(store, capsys, out, "on_write", quota_in_the_middle, before=True)
    assert code == 1 and line.endswith(f"holds a publication cut short (its earlier outputs removed, this run's partly "
                                       f"copied, no _SUCCESS marker: readers see an unfinished folder); the next run "
                                       f"into it completes this run's publication from {stage}"), line
    assert store.keys(f"{stage}/_SUCCESS")
    assert clean_stale_stages(out) == [stage]  # as the line says: the next run completes it
    assert store.get(f"{out}/results.parquet/part-00000-of-00001.parquet") == b"new" and store.keys(f"{out}/_SUCCESS")
    assert console.cut_state(out) is None  # the completed publication is no longer cut short


def _delete_failing_once(store, fails):
    """A hook for ``store.on_delete``: the deletion of each path in ``fails`` fails once with EIO, ``fails[path]``
    saying when: ``"before"`` (nothing deleted) or ``"after"`` (deleted, then the error)."""
    import errno

    done = set()

    def eio_once(path):
        if path in fails and path not in done:
            done.add(path)
            if fails[path] == "after":
                store.drop(path)
            raise OSError(errno.EIO, "Input/output error", path)

    return eio_once


def test_a_refused_removal_of_the_old_marker_says_the_earlier_run_is_whole(store, capsys):
    """trial48b L2: the removal of the previous run's ``_SUCCESS``, a copy-based publication's first change, failed
    (EIO) and the line said the folder "holds a publication cut short (its earlier outputs removed, this run's
    partly copied ...); the next run into it completes this run's publication from <stage>", while the previous
    marker and outputs were whole, and the next run removed that stage. What is said is now what was done: nothing
    of the folder changed, nothing of this run published, the stage gone."""
    from fair_forge_beam import console
    from fair_forge_beam.reports.output_folder import clean_stale_stages

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    before = store.snapshot("memstore://bucket/")
    eio = _delete_failing_once(store, {f"{out}/_SUCCESS": "before"})
    code, line, stage = _publish_failing(store, capsys, out, "on_delete", eio)
    assert code == 1 and "Input/output error" in line, line
    assert line.endswith(f"nothing was published; the output folder {out} is untouched (as it was before the run)"), line
    assert "cut short" not in line and console.cut_state(out) is None
    assert store.snapshot("memstore://bucket/") == before and store.keys(stage) == []  # the stage removed
    assert clean_stale_stages(out) == [] and store.snapshot("memstore://bucket/") == before


@pytest.mark.parametrize("fails, said", [
    ("_SUCCESS", "(its _SUCCESS marker removed, its earlier outputs not yet, nothing of this run's copied: readers "
                 "see an unfinished folder)"),
    ("results.json", "(some or all of its earlier outputs removed, nothing of this run's copied, no _SUCCESS marker: "
                     "readers see an unfinished folder)"),
])
def test_a_publication_cut_short_says_what_it_had_done(fails, said, store, capsys):
    """trial48b L2's class: each step of a copy-based publication that fails says what it had done to the folder
    (the marker removed though its removal failed; the earlier outputs partly removed), not one wording for all,
    and the next run completes the publication, as the line says."""
    from fair_forge_beam import console
    from fair_forge_beam.reports.output_folder import clean_stale_stages

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)
    eio = _delete_failing_once(store, {f"{out}/{fails}": "after"})
    code, line, stage = _publish_failing(store, capsys, out, "on_delete", eio)
    assert code == 1 and line.endswith(f"the output folder {out} holds a publication cut short {said}; the next run "
                                       f"into it completes this run's publication from {stage}"), line
    assert store.keys(f"{out}/_SUCCESS") == [] and store.keys(f"{stage}/_SUCCESS")
    assert clean_stale_stages(out) == [stage]  # as the line says
    assert store.get(f"{out}/results.json") == b"new" and store.keys(f"{out}/_SUCCESS") and store.keys(stage) == []
    assert console.cut_state(out) is None


def test_a_publication_cut_at_its_marker_says_this_runs_outputs_are_copied(store, capsys):
    """The last step of a copy-based publication, the new ``_SUCCESS``, refused: every output copied, no marker
    (it said "this run's partly copied"); the next run completes it."""
    import errno

    from fair_forge_beam.reports.output_folder import clean_stale_stages

    out = "memstore://bucket/audits/today"
    _put_previous(store, out)

    def no_marker(path):
        if path == f"{out}/_SUCCESS":
            raise OSError(errno.EIO, "Input/output error", path)

    code, line, stage = _publish_failing(store, capsys, out, "on_write", no_marker)
    assert code == 1 and line.endswith(f"holds a publication cut short (its earlier outputs removed, this run's "
                                       f"copied, no _SUCCESS marker: readers see an unfinished folder); the next run "
                                       f"into it completes this run's publication from {stage}"), line
    assert store.get(f"{out}/results.parquet/part-00000-of-00001.parquet") == b"new"
    assert clean_stale_stages(out) == [stage] and store.keys(f"{out}/_SUCCESS") and store.keys(stage) == []


def test_object_store_unfinished_stage_is_left_while_young(store, caplog):
    from fair_forge_beam.reports.output_folder import STALE_STAGE_HOURS, clean_stale_stages, mark_stage

    out = "memstore://bucket/audits/today"
    young = f"{out}.staging-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-0000abcd"
    old = f"{out}.staging-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(time.time() - 3600 * (STALE_STAGE_HOURS + 1)))}-1111abcd"
    for stage in (young, old):
        store.put(f"{stage}/results.parquet/beam-temp-x/y", b"partial")
        mark_stage(stage)
    assert clean_stale_stages(out) == [old]
    assert store.keys(young) != [] and store.keys(old) == []
    assert "perhaps by a job still running" in caplog.text


def test_beam_temporaries_anywhere_under_the_output_are_not_kept(tmp_path):
    """Hostile-tester trial (issue 28): a ``sub/beam-temp-*`` folder inside --output survived a run:
    the user's folder ``sub/`` was carried whole. Beam's temporaries go at any depth; the user's
    files around them stay."""
    out = tmp_path / "out"
    for rel in ("sub/keep.txt", "sub/beam-temp-results-1a2b/x.parquet", "sub/deeper/.temp9f8e", "sub/deeper/mine.md",
                "beam-temp-top-3c/y"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x")
    with staged_output(str(out)) as stage:
        Path(stage, "results.json").write_text("{}")
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == ["_SUCCESS", "results.json", "sub", "sub/deeper", "sub/deeper/mine.md", "sub/keep.txt"], left


def test_an_output_that_is_no_folder_is_named_for_what_it_is(tmp_path):
    """Trial 28: a dangling symbolic link given as --output was "is a file"; a FIFO too."""
    import os

    link, fifo = tmp_path / "link", tmp_path / "fifo"
    os.symlink(tmp_path / "gone" / "away", link)
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"is a symbolic link to .*gone/away, which does not exist \(a dangling link\)$"):
        check_output_folder(str(link))
    with pytest.raises(ValueError, match=r"fifo is a FIFO \(named pipe\)$"):
        check_output_folder(str(fifo))


def test_an_output_that_is_a_loop_of_links_is_no_dangling_link(tmp_path):
    """Trial 28h H13: `--output loopy` (a link to itself) was called "a dangling link"."""
    import os

    loopy, a, b = tmp_path / "loopy", tmp_path / "a", tmp_path / "b"
    os.symlink(loopy, loopy)
    os.symlink(b, a)
    os.symlink(a, b)
    for link in (loopy, a):
        with pytest.raises(ValueError, match=r"is a symbolic link loop \(its links lead back to themselves") as exc:
            check_output_folder(str(link))
        assert "dangling" not in str(exc.value)


def test_two_runs_that_both_passed_the_start_check_do_not_both_publish(tmp_path, monkeypatch):
    """trial35 T8, the same instant (two scheduled jobs): both runs check the folder before either
    has locked its stage, so the check at start lets both through. The run that locks second finds
    the other's lock once its own is held and refuses, removing its stage; the first publishes."""
    from fair_forge_beam.reports import output_folder

    out = tmp_path / "out"
    holder = _live_run(out, "    open(stage + '/results.json', 'w').write('first')\n")
    real = output_folder._busy_problem
    calls = []

    def raced(folder, own=None):  # the check at start ran before the other run locked its stage
        calls.append(own)
        return None if own is None else real(folder, own=own)

    monkeypatch.setattr(output_folder, "_busy_problem", raced)
    try:
        stage = holder.stdout.readline().strip()
        assert stage, "the holder made no stage"
        with pytest.raises(OutputFolderError, match="is being written by another run") as exc:
            with staged_output(str(out)):
                pytest.fail("the block ran")
        assert stage in str(exc.value) and calls[0] is None and calls[1] is not None
        assert not Path(calls[1]).exists()  # its own stage removed; the other run's left alone
        assert Path(stage).is_dir()
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0 and (out / "results.json").read_text() == "first"


def _other_group() -> int:
    """A group id the folder can be given that is not the process's own (as root: any)."""
    import os

    if os.geteuid() == 0:
        return 100 if os.getegid() != 100 else 101
    others = [g for g in os.getgroups() if g != os.getegid()]
    if not others:
        pytest.skip("this user belongs to no second group to give the folder")
    return others[0]


def test_a_run_keeps_the_folders_mode_setgid_group_and_xattrs(tmp_path):
    """trial37 T4: a shared ``chmod 2775; chgrp users`` folder came back ``drwxr-xr-x root:root``
    (the stage, made with the process's defaults, was exchanged in). The folder keeps its mode with
    the setgid bit, its group and its extended attributes (ACLs are xattrs), and what the run created
    inside is made as in the folder itself: the folder's group, sub-folders setgid."""
    import os
    import stat

    out = tmp_path / "team"
    out.mkdir()
    gid = _other_group()
    os.chown(out, -1, gid)
    os.chmod(out, 0o2775)
    try:
        os.setxattr(out, "user.team", b"audits")
        xattr = True
    except OSError:  # a filesystem without user xattrs
        xattr = False
    (out / "keep.txt").write_text("mine")
    for _ in range(2):  # a first run into it, then a run that replaces one
        with staged_output(str(out)) as stage:
            assert os.stat(stage).st_gid == gid and os.stat(stage).st_mode & stat.S_ISGID  # before anything is written
            os.makedirs(os.path.join(stage, "results.parquet"))
            Path(stage, "results.parquet", "part-0.parquet").write_text("x")
            Path(stage, "results.json").write_text("{}")
        st = os.stat(out)
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o2775, gid), (oct(st.st_mode), st.st_gid)
        assert not xattr or os.getxattr(out, "user.team") == b"audits"
        sub = os.stat(out / "results.parquet")
        assert sub.st_gid == gid and sub.st_mode & stat.S_ISGID
        assert os.stat(out / "results.json").st_gid == gid and os.stat(out / "results.parquet" / "part-0.parquet").st_gid == gid
        assert (out / "keep.txt").read_text() == "mine"


def test_a_read_only_folder_stays_read_only_and_is_written_all_the_same(tmp_path):
    import os
    import stat

    out = tmp_path / "ro"
    out.mkdir()
    Path(out, "results.json").write_text("old")
    os.chmod(out, 0o555)
    try:
        with staged_output(str(out)) as stage:
            assert os.stat(stage).st_mode & stat.S_IWUSR  # the run can write its stage
            Path(stage, "results.json").write_text("new")
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o555 and (out / "results.json").read_text() == "new"
    finally:
        os.chmod(out, 0o755)


def test_a_file_replaced_whole_keeps_its_mode_and_group(tmp_path):
    """The files the commands replace by a rename (compare's --json, trend.json / trend.html, the
    optimizer's report, a roll-up's merged Parquet: io/write.replace_file(s)) keep the mode and group
    of the file they replace; a new file gets the defaults."""
    import os
    import stat

    from fair_forge_beam.io.write import replace_file, replace_files

    gid = _other_group()
    a, b = tmp_path / "cmp.json", tmp_path / "trend.json"
    for f in (a, b):
        f.write_text("old")
        os.chown(f, -1, gid)
        os.chmod(f, 0o640)
    replace_files([(str(a), "new")])
    replace_file(str(b), lambda fh: fh.write(b"new"))
    for f in (a, b):
        st = os.stat(f)
        assert (f.read_text(), stat.S_IMODE(st.st_mode), st.st_gid) == ("new", 0o640, gid)
    replace_files([(str(tmp_path / "fresh.json"), "x")])
    assert os.stat(tmp_path / "fresh.json").st_gid == os.getegid()


def test_an_empty_runs_stage_is_kept_and_removed_by_the_next_run_on_an_object_store_too(store, caplog):
    """trial48 B1: an empty run (EmptyRun naming its stage) publishes nothing and keeps its stage for its
    dead letters to be read; marked ``_EMPTY_RUN``, the next run removes it at once — not left 24 hours
    as a stage perhaps of a job still running."""
    from fair_forge_beam.reports.empty_run import EmptyRun
    from fair_forge_beam.reports.output_folder import KEPT_MARK, clean_stale_stages, staged_output

    out = "memstore://bucket/audits/today"
    store.put(f"{out}/results.json", b"good")
    store.put(f"{out}/_SUCCESS", b'{"run": "x"}')
    with pytest.raises(EmptyRun):
        with staged_output(out) as stage:
            store.put(f"{stage}/dead_letter/part-00000-of-00001.jsonl", b'{"reason": "bad"}\n')
            raise EmptyRun("humanity scored nothing", stage)
    assert store.get(f"{out}/results.json") == b"good"
    assert store.get(f"{stage}/dead_letter/part-00000-of-00001.jsonl") == b'{"reason": "bad"}\n'
    assert store.get(f"{stage}/{KEPT_MARK}") == b"humanity scored nothing\n"
    assert clean_stale_stages(out) == [stage] and store.keys(stage) == []
    assert "perhaps by a job still running" not in caplog.text
    with pytest.raises(EmptyRun):  # another stage named: this one is removed as before
        with staged_output(out) as other:
            raise EmptyRun("nothing", "memstore://bucket/audits/today.staging-else")
    assert store.keys(other) == []
