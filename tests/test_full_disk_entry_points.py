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

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FNAPI, REPO
from test_full_disk import _run  # a run folder of results.json and run_info.json

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
#: bytes any file of the child may hold: trend.json (4.3 KB), the comparison (1.8 KB), report.html (55 KB), a
#: roll-up's staged copies and the template metadata are larger
LIMIT = 1024


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


def _listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


#: the child: each call under the limit, what it raised (type, errno, filename, text) as one JSON line
CALLS = r"""
import gc, json, sys
calls = json.loads(sys.argv[1])
for name, module, function, argv in calls:
    import importlib
    try:
        got = {"returned": getattr(importlib.import_module(module), function)(*argv)}
    except BaseException as exc:
        got = {"type": type(exc).__module__ + "." + type(exc).__name__, "errno": getattr(exc, "errno", None),
               "filename": getattr(exc, "filename", None), "text": str(exc)}
    gc.collect()  # a failed bundle's writers collected now: nothing may be said of them (pyarrow's __del__)
    print("@" + json.dumps({"name": name, **got}), flush=True)  # a command's own lines (compare's table) apart
"""


def _calls(tmp_path: Path, calls: list, limit: int = LIMIT) -> tuple:
    proc = subprocess.run([sys.executable, "-c", CALLS, json.dumps(calls)], cwd=tmp_path, env=_env(),
                          preexec_fn=_limited(limit), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["name"]: r for r in (json.loads(line[1:]) for line in proc.stdout.splitlines() if line[:1] == "@")}, proc.stderr


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> Path:
    """An audit's run folder with its stored statistics (what a roll-up reads)."""
    from pipelines import audit

    out = tmp_path_factory.mktemp("disk46") / "a1"
    audit.run(["--input", str(HH), "--metrics", "humanity", "--output", str(out), f"--runner={FNAPI}", "--quiet"])
    return out


@pytest.mark.slow
def test_rollup_trend_compare_and_the_report_from_python_raise_the_one_error_naming_the_output(tmp_path, audited):
    """EFBIG from Python: rollup raised Beam's RuntimeError('OSError: [Errno 27] …'), trend and compare the raw
    OSError naming nothing, write_report left a report.html cut at 4096 bytes in the run folder."""
    a = _run(tmp_path / "runs" / "a", "2026-12-01T00:00:00Z")
    b = _run(tmp_path / "runs" / "b", "2026-12-02T00:00:00Z")
    tr, cmp_json, rolled = tmp_path / "tr", tmp_path / "cmp" / "c.json", tmp_path / "week"
    (tmp_path / "cmp").mkdir()
    tr.mkdir()
    (tr / "trend.json").write_text("the last good trend", encoding="utf-8")
    report = tmp_path / "run"
    shutil.copytree(audited, report)
    before = _listing(report)
    got, err = _calls(tmp_path, [
        ["trend", "pipelines.trend", "main", [[str(a), str(b), "--output", str(tr), "--no-plots", "--quiet"]]],
        ["trend_new", "pipelines.trend", "main", [[str(a), "--output", str(tmp_path / "new"), "--no-plots", "--quiet"]]],
        ["compare", "fair_forge_beam.reports.compare", "main", [[str(b), str(a), "--json", str(cmp_json)]]],
        ["rollup", "fair_forge_beam.rollup", "main", [["--from", str(audited), "--output", str(rolled), "--quiet",
                                                       f"--runner={FNAPI}"]]],
        ["report", "fair_forge_beam.reports.html", "write_report", [str(report)]],
    ])
    hint = "File too large (the file size limit, ulimit -f)"
    assert sorted(got) == ["compare", "report", "rollup", "trend", "trend_new"], got
    for name, output, state in (
            ("trend", tr, f"nothing was published; the output folder {tr} is untouched (as it was before the run)"),
            ("trend_new", tmp_path / "new", f"nothing was written ({tmp_path / 'new'} was not created)"),
            ("compare", cmp_json, f"nothing was written ({cmp_json} was not created)"),
            ("rollup", rolled, f"nothing was written ({rolled} was not created)"),
            ("report", report, f"nothing was published; the output folder {report} is untouched")):
        r = got[name]
        assert r.get("type") == "fair_forge_beam.console.OutputWriteError", (name, r)
        assert r["errno"] == 27 and r["filename"] == str(output), (name, r)
        assert r["text"].startswith(hint) and state in r["text"] and "\n" not in r["text"], (name, r)
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    # nothing half-written left: the trend's folder as it was, no folder made, no stage, no .partial
    assert _listing(tr) == {"trend.json": b"the last good trend"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp", "run", "runs", "tr"]
    assert not list((tmp_path / "cmp").iterdir())
    assert _listing(report) == before  # report.html whole, as it was (was cut at 4096 bytes)


@pytest.mark.slow
def test_the_command_lines_say_one_line_naming_the_output_and_exit_1(tmp_path):
    """trend's line said "nothing was published (the output folder, if any, is as it was)"; the template
    metadata and the converter called a full disk a usage error (exit code 2)."""
    a = _run(tmp_path / "a", "2026-12-01T00:00:00Z")
    b = _run(tmp_path / "b", "2026-12-02T00:00:00Z")
    tr, meta = tmp_path / "tr", tmp_path / "meta.json"
    for argv, prog, command, output in (
            (["pipelines.trend", str(a), str(b), "--output", str(tr), "--no-plots", "--quiet"],
             "fair-forge-beam trend", "trend", f"nothing was written ({tr} was not created)"),
            (["fair_forge_beam.reports.compare", str(b), str(a), "--json", str(tmp_path / "c.json")],
             "fair-forge-beam compare", "comparison", f"nothing was written ({tmp_path / 'c.json'} was not created)"),
            (["fair_forge_beam.metrics.registry", "--write-template-metadata", str(meta)],
             "python -m fair_forge_beam.metrics.registry", "template metadata", f"nothing was written ({meta} was not created)")):
        proc = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env=_env(), preexec_fn=_limited(),
                              capture_output=True, text=True, timeout=600)
        err = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(err) == 1, (argv[0], proc.returncode, proc.stderr[-3000:])
        assert err[0] == (f"{prog}: error: the {command} stopped: File too large (the file size limit, ulimit -f); "
                          f"{output}"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_stage_whose_marker_was_cut_short_is_never_published(tmp_path):
    """A full disk while the stage's _SUCCESS was written left it empty (the loop's generated/ stage on a 48 KB
    tmpfs) or half a JSON text; the next run into the folder took the stage for a complete run and published
    it, after the failed run had said nothing was published."""
    from fair_forge_beam.reports.output_folder import clean_stale_stages, mark_stage, new_stage_path

    out = tmp_path / "out"
    for marker in (b"", b'{"run": "2026'):
        stage = Path(new_stage_path(str(out)))
        stage.mkdir()
        mark_stage(str(stage))  # a run's stage: marked when made (trial48c D)
        (stage / "results.json").write_text("{}", encoding="utf-8")
        (stage / "_SUCCESS").write_bytes(marker)
        assert clean_stale_stages(str(out)) == [str(stage)]
        assert sorted(p.name for p in tmp_path.iterdir()) == []  # removed, not published as out


@pytest.mark.slow
def test_a_publication_the_disk_refuses_leaves_no_stage(tmp_path):
    """The stage's marker (45 bytes) over a 30-byte ``ulimit -f``: the raw OSError, and the stage left with a
    marker cut at 30 bytes, which the next run published."""
    script = r"""
import json, sys
from fair_forge_beam.reports.output_folder import staged_output
try:
    with staged_output(sys.argv[1]) as stage:
        open(stage + "/results.json", "w").write("{}")
except BaseException as exc:
    print(json.dumps({"type": type(exc).__name__, "errno": getattr(exc, "errno", None), "text": str(exc)}))
"""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", script, str(out)], cwd=tmp_path, env=_env(), preexec_fn=_limited(30),
                          capture_output=True, text=True, timeout=300)
    got = json.loads(proc.stdout)
    assert got == {"type": "OutputWriteError", "errno": 27, "text": "File too large (the file size limit, ulimit -f); "
                   f"nothing was written ({out} was not created)"}, (got, proc.stderr[-2000:])
    assert os.listdir(tmp_path) == []


def _read_only_mount_works(tmp_path: Path) -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {probe} {probe} && mount -o remount,bind,ro "
                           f"{probe} && ! touch {probe}/x 2>/dev/null"], capture_output=True, timeout=60)
    probe.rmdir()
    return proc.returncode == 0


@pytest.mark.slow
def test_a_read_only_folder_is_the_one_error_and_one_line(tmp_path, audited):
    """EROFS (a read-only bind mount in the child's own mount namespace; chmod does not stop root): compare
    --json said '(…/c.json.<hex>.partial)' and 'the output folder, if any, is as it was'; write_report raised
    the raw OSError."""
    if not _read_only_mount_works(tmp_path):
        pytest.skip("no read-only bind mount here (needs root and unshare -m)")
    a = _run(tmp_path / "a", "2026-12-01T00:00:00Z")
    b = _run(tmp_path / "b", "2026-12-02T00:00:00Z")
    ro = tmp_path / "ro"
    shutil.copytree(audited, ro)
    (ro / "c.json").write_text("the last comparison", encoding="utf-8")
    before = _listing(ro)

    def in_read_only(*argv):
        return subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} '
                               '&& exec "$@"', "sh", sys.executable, *argv], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=600)

    proc = in_read_only("-m", "fair_forge_beam.reports.compare", str(b), str(a), "--json", str(ro / "c.json"))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, proc.stderr[-3000:]
    assert err[0] == (f"fair-forge-beam compare: error: the comparison stopped: Read-only file system ({ro / 'c.json'}); "
                      f"nothing was published; the output file {ro / 'c.json'} is untouched (as it was before the run)")
    proc = in_read_only("-c", CALLS, json.dumps([["report", "fair_forge_beam.reports.html", "write_report", [str(ro)]]]))
    got = json.loads(proc.stdout.strip()[1:])
    assert got["type"] == "fair_forge_beam.console.OutputWriteError" and got["errno"] == 30, (got, proc.stderr[-2000:])
    assert got["filename"] == str(ro) and got["text"].startswith(f"Read-only file system ({ro / 'report.html'}); "
                                                                 f"nothing was published; the output folder {ro} is untouched")
    assert _listing(ro) == before


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
                           "ulimit -f) (in the pipeline's step ") and last.endswith(
        f"nothing was written ({out / 'audit'} was not created)"
    ), last
    # the loop's stages publish together or not at all (trial48c F; they were left published, "complete before
    # it"): generated/ and run/ are taken back, and the folder the loop made goes, nothing half-written left
    assert not out.exists(), sorted(p.name for p in out.iterdir())


def test_a_beam_copy_of_many_files_stopped_by_the_machine_is_the_one_error(tmp_path):
    """trial46b B3: a roll-up copies the runs' record outputs with Beam's ``FileSystems.copy``, which raises one
    ``BeamIOError`` holding each file's ``OSError`` in ``exception_details``; under ``ulimit -f`` or on a full disk
    the command printed Beam's 30-line traceback and Python callers got the ``BeamIOError``."""
    from apache_beam.io.filesystem import BeamIOError

    from fair_forge_beam.console import OutputWriteError, environment_failure, writing

    for err, said in ((OSError(OSError(27, "File too large")), "File too large (the file size limit, ulimit -f)"),
                      (OSError(28, "No space left on device"), "No space left on device")):
        exc = BeamIOError("Copy operation failed", {("a/part-0.parquet", "b/part-0.parquet"): err})
        assert environment_failure(exc) == said
        with pytest.raises(OutputWriteError) as got, writing(str(tmp_path / "out")):
            raise exc
        assert got.value.errno in (27, 28) and str(tmp_path / "out") in str(got.value)
    other = BeamIOError("Copy operation failed", {("a", "b"): ValueError("not the machine")})
    assert environment_failure(other) is None


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "verbose"])
def test_a_multi_process_run_whose_stderr_file_hits_the_size_limit_ends_with_its_status(tmp_path, quiet):
    """trial46b B4: a cron-style ``--direct_running_mode=multi_processing`` audit under ``ulimit -f`` with stderr in a
    file (``>> log 2>&1``) never ended: the workers' tracebacks filled the log to the limit, the next ``print`` of a
    failed bundle's traceback in Beam's harness raised ``OSError: [Errno 27] File too large`` before the bundle's
    answer was sent, and the launcher waited for it for ever (3 of 3). Now exit code 1 in seconds; with ``--quiet``
    the log holds the one line (was ~100 lines of the workers' tracebacks to a pipe)."""
    from test_interrupts import MULTI_PROCESS, _no_process_left, _tree

    out, log = tmp_path / "out", tmp_path / "log"
    with open(log, "ab") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.audit", "--input", str(HH), "--metrics", "humanity",
                                 "--output", str(out), f"--runner={FNAPI}", *MULTI_PROCESS, *(["--quiet"] if quiet else [])],
                                cwd=tmp_path, env=_env(), preexec_fn=_limited(8192), stdout=stderr, stderr=stderr)
    run = []
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            run = list(dict.fromkeys(run + _tree(proc.pid)))
            time.sleep(0.5)
        hung = proc.poll() is None
    finally:
        left = _no_process_left(_tree(proc.pid) + run)  # a hung run's workers are not left to the next test
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(encoding="utf-8", errors="replace")
    assert not hung, f"the run did not end in 240 s: {text[-2000:]}"
    assert left == [], f"{len(left)} process(es) of the run outlived it"
    assert proc.returncode == 1, text[-3000:]
    assert not out.exists()
    if quiet:
        assert text.splitlines() == [
            "fair-forge-beam: error: the audit stopped: File too large (the file size limit, ulimit -f) (in the "
            "pipeline's step WriteOutputs/WriteToFiles/ParDo(_WriteUnshardedRecordsFn)/ParDo(_WriteUnshardedRecordsFn)); "
            f"nothing was written ({out} was not created)"], text[-3000:]


#: a process that, with its streams made unfailing, writes more than any console takes, then exits with code 3
_WRITES_ON = ("import sys; from fair_forge_beam.console import unfailing_streams; unfailing_streams(); "
              "[print('x' * 1000, file=s, flush=True) for s in (sys.stdout, sys.stderr) for _ in range(100)]; "
              "print('no flush', file=sys.stderr); sys.stderr.write('pending'); sys.exit(3)")


@pytest.mark.parametrize("console", ["file size limit", "full device", "closed pipe"])
def test_unfailing_streams_drop_what_the_machine_refuses(tmp_path, console):
    """:func:`fair_forge_beam.console.unfailing_streams` (every multi-process SDK worker's, trial46b B4): a console
    that refuses writes (EFBIG, ENOSPC, EPIPE) raises nothing, and the interpreter's last flush fails nothing: the
    process ends with its own exit code (not 1 from the exception, nor 120 from a failed flush at exit)."""
    argv = [sys.executable, "-c", _WRITES_ON]
    if console == "closed pipe":
        proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        proc.stderr.close()
        assert proc.wait(timeout=60) == 3
        return
    target = tmp_path / "log" if console == "file size limit" else "/dev/full"
    if console == "full device" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open(target, "wb") as sink:
        proc = subprocess.run(argv, cwd=tmp_path, env=_env(), stdout=sink, stderr=sink, timeout=60,
                              preexec_fn=_limited(4096) if console == "file size limit" else None)
    assert proc.returncode == 3
