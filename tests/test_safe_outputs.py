"""Runs that never destroy the last good one (issue 27) and the output hardening of issue 28, end to end.

* A run killed with SIGKILL while its pipeline runs leaves the previous folder byte-identical and
  readable by ``pandas.read_parquet``; the next run into it removes the killed run's stage and
  publishes a folder without any ``beam-temp-*``.
* Empty runs (no input record, every record rejected, a metric that scored nothing) exit 4 with one
  line and leave the previous folder; ``--allow-empty`` publishes them and exits 0.
* A read-only ``--output`` is a usage error (exit 2) before the pipeline; leftovers of earlier runs
  (Beam's temporaries anywhere, another run kind's folders) are gone; a failed gate still publishes.
* ``--version``; ``results.json`` records the versions; ``--quiet`` prints nothing on a 19-request
  Context run (the openai client's ``httpx2`` INFO lines, Beam's resource-module warning).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FNAPI, REPO
from test_output_folder import _previous_run, _siblings, _tree

from pipelines import audit

HINT = " (every option: fair-forge-beam --help)"
EXAMPLES = REPO / "fair_forge_beam" / "data" / "examples" / "fair_forge_examples.json"


def _session(sid, language="english", turns=2, assistant="I am glad to help, thank you for asking."):
    return {"session_id": sid, "assistant_id": "bot", "language": language,
            "conversation": [{"qa_id": f"{sid}-{i}", "query": f"Can you help me with ticket {sid}-{i}?", "assistant": assistant,
                              "ground_truth_assistant": "Happy to help."} for i in range(turns)]}


def _jsonl(path: Path, records) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _cli(*argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.audit", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=600, **kw)


# ------------------------------------------------------------------ SIGKILL
def _writing(out: Path) -> bool:
    """Whether a run into ``out`` has written a file into its stage (a folder beside ``out``): its
    sharded outputs' temporary files (fileio's ``.temp<uuid>/``) come first, then its shards."""
    stages = [p for p in out.parent.iterdir() if p.name.startswith(out.name + ".") and p.is_dir()]
    return any(f.is_file() for stage in stages for f in stage.rglob("*"))


@pytest.mark.slow
def test_sigkill_during_a_run_leaves_the_previous_run_and_the_next_run_is_clean(tmp_path):
    import pandas

    out = tmp_path / "out"
    argv = ["--quiet", "--no-report", "--metrics", "humanity", f"--runner={FNAPI}", "--output", str(out)]  # the shipped examples
    first = _cli(*argv)
    assert first.returncode == 0, first.stderr
    before = _tree(out)
    table = pandas.read_parquet(out / "results.parquet")
    assert len(table) == 2_016

    proc = subprocess.Popen([sys.executable, "-m", "pipelines.audit", *argv], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not _writing(out):  # the pipeline is writing into its stage
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert _tree(out) == before  # byte for byte
    assert pandas.read_parquet(out / "results.parquet").equals(table)
    assert len(_siblings(out)) >= 1  # the killed run's stage (and its lock file)

    again = _cli(*argv)  # the next run into the same folder
    assert again.returncode == 0, again.stderr
    assert _siblings(out) == [] and list(tmp_path.rglob("beam-temp-*")) == list(tmp_path.rglob(".temp*")) == []

    after = _tree(out)
    assert set(after) == set(before)
    # (stats/run_ids.json, seal28: the manifest's run id, audit runs and input files, sealed: a new run's own)
    for name in sorted(set(before) - {"_SUCCESS", "run_info.json", "stats/manifest.json", "stats/run_ids.json"}):
        assert _rows(out / name, after[name]) == _rows(out / name, before[name]), name
    # the stored statistics' manifest names its run (the id _SUCCESS holds) and hashes the files it
    # wrote (issue 28: a shard whose rows came in another order has another hash): all else is the same
    import hashlib

    manifests = [json.loads(t["stats/manifest.json"]) for t in (before, after)]
    for t, m in zip((before, after), manifests):
        run_id = m.pop("run_id")
        assert run_id == json.loads(t["_SUCCESS"])["run"] and m.pop("audit_runs") == [run_id]
        files = m.pop("files")
        # results.json is sealed too (issue 28, trial 28e B4: an edited results.json was read by trend)
        assert files == {name: {"size": len(t[name]), "sha256": hashlib.sha256(t[name]).hexdigest()} for name in t
                         if (name.split("/")[0] in ("stats", "sessions", "results.parquet", "dead_letter")
                             or name in ("results.json", "run_info.json")) and name != "stats/manifest.json"}
    assert manifests[0] == manifests[1]


def _rows(path: Path, data: bytes):
    """A file's content with the row order of a shard taken out (the runner's choice, docs/data.md):
    Parquet as its schema and sorted rows, JSON Lines as its sorted lines, anything else as its bytes."""
    import io

    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        table = pq.read_table(io.BytesIO(data))
        return [str(table.schema), *sorted(json.dumps(row, sort_keys=True, default=repr) for row in table.to_pylist())]
    if path.suffix == ".jsonl":
        return sorted(data.splitlines())
    return data


# ------------------------------------------------------------------ empty runs
EMPTY_CASES = {
    "no input record": ([], "no input record (the inputs hold no interaction)"),
    "every record rejected": (["this is not json", json.dumps({"session_id": "s1", "conversation": "not a list"})],
                              "every record was rejected at read (2 dead letters; most common: "),
    "a metric scored nothing": ([_session("s1", language="spanish", assistant="Hola, con mucho gusto.")],
                                "humanity scored nothing of 2 interactions read (2 dead letters; most common: "
                                "no emotion lexicon for language 'spanish'"),
}


@pytest.mark.parametrize("case", sorted(EMPTY_CASES))
def test_an_empty_run_exits_4_with_one_line_and_leaves_the_previous_folder(case, tmp_path, capsys):
    records, reason = EMPTY_CASES[case]
    out = tmp_path / "out"
    _previous_run(out)
    before = _tree(out)
    data = _jsonl(tmp_path / "in.jsonl", records)
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--metrics", "humanity", "--input", data, f"--runner={FNAPI}", "--output", str(out)])
    assert exc.value.code == 4
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"fair-forge-beam: empty run: {reason}"), err[0]
    # the run's stage is kept unpublished beside, named, for its dead letters to be read (trial48 B1)
    (stage,) = _siblings(out)
    assert stage.startswith("out.staging-") and (out.parent / stage / "results.json").exists()
    assert err[0].endswith(f"; {out} is left as it was; this run's outputs (its dead letters) are kept unpublished in "
                           f"{out.parent / stage} until the next run into {out} (exit code 4; --allow-empty publishes such a run)")
    assert _tree(out) == before


@pytest.mark.slow
def test_a_run_no_metric_could_score_is_judged_by_its_coverage_gates(tmp_path, capsys):
    """A night whose answers are all in a language no metric covers is what a coverage gate is
    for: with one, the run is published and the gate fails it (exit 3), never an empty run (exit 4)
    that a nightly job skips — the day would vanish from its roll-up and trend (fresh-user trial).
    Records rejected at read, or no record at all, stay empty runs."""
    records, _ = EMPTY_CASES["a metric scored nothing"]
    out = tmp_path / "out"
    gate = ["--gate", "coverage dead_letter_share <= 0.05 in every assistant_id"]
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--metrics", "humanity", "--input", _jsonl(tmp_path / "in.jsonl", records),
                   f"--runner={FNAPI}", "--output", str(out), *gate])
    assert exc.value.code == 3
    checks = json.loads((out / "gates.json").read_text(encoding="utf-8"))
    assert checks["n_failed"] == 1 and json.loads((out / "results.json").read_text())["summary"]["interactions_read"] == 2
    assert "empty run" not in capsys.readouterr().err
    for case in ("no input record", "every record rejected"):
        with pytest.raises(SystemExit) as exc:
            audit.run(["--quiet", "--metrics", "humanity", "--input", _jsonl(tmp_path / "e.jsonl", EMPTY_CASES[case][0]),
                       f"--runner={FNAPI}", "--output", str(tmp_path / "empty"), *gate])
        assert exc.value.code == 4, case


@pytest.mark.slow
def test_an_empty_run_from_the_command_line(tmp_path):
    out = tmp_path / "new"
    proc = _cli("--quiet", "--metrics", "humanity", "--input", _jsonl(tmp_path / "in.jsonl", []), f"--runner={FNAPI}",
                "--output", str(out))
    assert proc.returncode == 4 and proc.stdout == ""
    # a folder that does not exist yet was not created, not "left as it was" (issue 27, fresh-user trial;
    # fresh13: one wording with the interrupt's and the failure's lines)
    (stage,) = _siblings(out)  # the run's stage, kept unpublished to be read (trial48 B1)
    assert proc.stderr.splitlines() == [f"fair-forge-beam: empty run: no input record (the inputs hold no interaction); "
                                        f"{out} was not created; this run's outputs (its dead letters) are kept unpublished "
                                        f"in {out.parent / stage} until the next run into {out} (exit code 4; --allow-empty "
                                        "publishes such a run)"]
    assert not out.exists()


@pytest.mark.slow
def test_allow_empty_publishes_the_empty_run(tmp_path, capsys):
    out = tmp_path / "out"
    _previous_run(out)
    doc = audit.run(["--quiet", "--allow-empty", "--metrics", "humanity", "--input", _jsonl(tmp_path / "in.jsonl", []),
                     f"--runner={FNAPI}", "--output", str(out)])
    assert doc["summary"]["interactions_read"] == 0 and capsys.readouterr().err == ""
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == doc
    assert (out / "mine.txt").read_text() == "keep" and not (out / "windows").exists()


def test_an_empty_windowed_run_leaves_the_previous_folder(tmp_path, capsys):
    out = tmp_path / "out"
    _previous_run(out)
    before = _tree(out)
    with pytest.raises(SystemExit) as exc:  # no timestamp: the interactions are dead-lettered, no window scores
        audit.run(["--quiet", "--metrics", "humanity", "--input", _jsonl(tmp_path / "in.jsonl", [_session("s1")]),
                   "--window", "fixed:1h", f"--runner={FNAPI}", "--output", str(out)])
    assert exc.value.code == 4
    err = capsys.readouterr().err.splitlines()
    (stage,) = _siblings(out)  # the run's stage, kept unpublished to be read (trial48 B1)
    assert err == [f"fair-forge-beam: empty run: no interaction was scored in any window (1 dead letter); {out} is "
                   f"left as it was; this run's outputs (its dead letters) are kept unpublished in {out.parent / stage} "
                   f"until the next run into {out} (exit code 4; --allow-empty publishes such a run)"]
    assert _tree(out) == before


# ------------------------------------------------------------------ leftovers, gates, versions
@pytest.mark.slow
def test_a_run_removes_every_leftover_and_a_failed_gate_still_publishes(tmp_path, capsys):
    """Beam's temporaries of a killed run (a partial Parquet inside results.parquet/, issue 28), a
    windowed run's windows/ (kept alive by fileio's .temp folder) and windowed_results.json go, and the
    run's own folders are replaced whole (a stray .parquet planted in results.parquet/ broke
    pandas.read_parquet); the user's top-level files stay; a failing gate exits 3 after publishing, gates.json included."""
    import pandas

    out = tmp_path / "out"
    _previous_run(out)
    (out / "results.parquet" / "beam-temp-part-1f2e" / "0c9d.parquet").write_bytes(b"PAR1" + b"\0" * 6_000_000)
    (out / "results.parquet" / "stray.parquet").write_bytes(b"planted")  # the run's folder is replaced whole
    (out / "stats" / "extra").mkdir(parents=True)
    (out / "stats" / "extra" / "x.parquet").write_bytes(b"planted")
    data = _jsonl(tmp_path / "in.jsonl", [_session("s1"), _session("s2", turns=3)])
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", data, f"--runner={FNAPI}",
                   "--gate", "humanity mean_entropy mean >= 3", "--output", str(out)])
    assert exc.value.code == 3
    assert f"details in {out}/gates.json" in capsys.readouterr().err
    files = set(_tree(out))
    assert {f for f in files if "beam-temp" in f or ".temp" in f or f.startswith("windows")} == set()
    assert files == {"_SUCCESS", "results.json", "run_info.json", "gates.json", "mine.txt",
                     "notes/deep/file.txt", "results.parquet/part-00000-of-00001.parquet",
                     "sessions/humanity/part-00000-of-00001.parquet", "slices/humanity/part-00000-of-00001.parquet",
                     "dead_letter/part-00000-of-00001.jsonl",
                     "data_quality/part-00000-of-00001.jsonl", "stats/manifest.json",
                     "stats/sessions/part-00000-of-00001.parquet",
                     "stats/slices/part-00000-of-00001.parquet",  # stored slice accumulators (schema v4)
                     "stats/quality_counts.json",  # the manifest's quality counts, sealed (issue 28)
                     "stats/settings.json",  # the manifest's settings, sealed (issue 28, trial 28e B6)
                     "stats/run_ids.json"}  # the manifest's run id, audit runs, input files, sealed (seal28)
    assert len(pandas.read_parquet(out / "results.parquet")) == 5
    assert json.loads((out / "gates.json").read_text())["n_failed"] == 1
    from fair_forge_beam.io.session_stats import STATS_SCHEMA_VERSION
    from fair_forge_beam.reports.results import RESULTS_SCHEMA_VERSION
    from fair_forge_beam.version import product_version

    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["versions"] == {"fair_forge_beam": product_version(), "statistics_schema": STATS_SCHEMA_VERSION,
                                         "results_schema": RESULTS_SCHEMA_VERSION}
    assert _siblings(out) == []


def test_version_is_printed_fast_without_beam():
    from importlib import metadata

    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"fair-forge-beam {metadata.version('fair_forge_beam')}\n"
    probe = subprocess.run([sys.executable, "-c", "import sys\nfrom pipelines import audit\nrc = audit.main(['--version', "
                            "'--metrics', 'humanity'])\nprint(rc, 'apache_beam' in sys.modules)"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert probe.stdout.splitlines()[1] == "0 False", probe.stdout + probe.stderr


#: what the Flex Template launcher passes besides the parameters (Beam's validation accepts these offline)
DATAFLOW = ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1", "--temp_location=gs://my-bucket/tmp"]


def test_a_template_launch_leaves_the_previous_run_to_the_job(tmp_path, monkeypatch):
    """A Flex Template launcher only builds the job graph: it must not clean the folder (the job may
    fail) nor write anything; the job writes a stage and publishes it (tests/test_pipeline_outputs.py)."""
    import apache_beam as beam

    out = tmp_path / "out"
    _previous_run(out)
    before = _tree(out)
    graphs = []

    class Launched:  # what a template launch's runner returns: the job has not run here
        def wait_until_finish(self, duration=None):
            return "DONE"

    monkeypatch.setattr(beam.Pipeline, "run", lambda self, *a, **kw: graphs.append(self.to_runner_api()) or Launched())
    data = _jsonl(tmp_path / "in.jsonl", [_session("s1")])
    assert audit.run(["--quiet", "--metrics", "humanity", "--input", data, *DATAFLOW, "--output", str(out),
                      f"--template_location={tmp_path / 'template.json'}"]) == {}
    assert len(graphs) == 1
    assert _tree(out) == before and _siblings(out) == []
    assert "Publish" in {t.unique_name for t in graphs[0].components.transforms.values()}


# ------------------------------------------------------------------ read-only output
def _read_only_run(tmp_path: Path, *argv) -> subprocess.CompletedProcess:
    """The main job with ``--output <tmp>/ro/out`` on a read-only filesystem (as root: a tmpfs
    remounted read-only in a user and mount namespace; otherwise a folder without write permission)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    cmd = [sys.executable, "-m", "pipelines.audit", *argv, "--output", str(ro / "out")]
    if os.geteuid() != 0:
        (ro / "out").mkdir()
        (ro / "out" / "results.json").write_text("old")
        ro.chmod(0o555), (ro / "out").chmod(0o555)
        try:
            return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
        finally:
            ro.chmod(0o755), (ro / "out").chmod(0o755)
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without user namespaces: no read-only filesystem to test on")
    script = ('mount -t tmpfs tmpfs "$1" && mkdir "$1/out" && echo old > "$1/out/results.json" && '
              'mount -o remount,ro "$1" && shift && exec "$@"')
    return subprocess.run([unshare, "-rm", "sh", "-c", script, "sh", str(ro), *cmd], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_a_read_only_output_is_a_usage_error_before_the_pipeline(tmp_path):
    proc = _read_only_run(tmp_path, "--metrics", "humanity", "--input", str(EXAMPLES), f"--runner={FNAPI}")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()  # not --quiet: no "reading ..." line, the pipeline never started
    assert len(lines) == 1 and lines[0].endswith(HINT), proc.stderr
    line = lines[0][:-len(HINT)]
    assert line.startswith(f"fair-forge-beam: error: --output: cannot write in folder {tmp_path}/ro/out: "), line
    assert line.endswith(("Read-only file system", "Permission denied")), line
    assert proc.stdout == ""


# ------------------------------------------------------------------ --quiet
@pytest.mark.slow
def test_quiet_prints_nothing_on_a_context_run(tmp_path):
    """19 Context requests to a scripted server: without --quiet no ``httpx2`` INFO line (trial35 T9:
    they were one a request; the client's debug trace, off by default) and
    Beam's resource-module warning (a platform without the ``resource`` module, emulated by a module
    that fails to import); with --quiet stdout and stderr are empty."""
    from test_main_job_judges import answer

    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    sessions = [{**_session(f"s{i}", turns=n), "context": "You sell train tickets."} for i, n in enumerate((5, 5, 5, 4))]
    data = _jsonl(tmp_path / "in.jsonl", sessions)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "resource.py").write_text('raise ImportError("no resource module on this platform (test)")\n')
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "PYTHONPATH": os.pathsep.join([str(shim), str(REPO)])}
    got = {}
    with ScriptedOpenAIServer(answer) as srv:
        for quiet in (False, True):
            srv.reset_counts()
            proc = _cli(*(["--quiet"] if quiet else []), "--metrics", "context", "--input", data, "--no-report",
                        "--judge-base-url", srv.base_url, "--judge-model", "judge", "--judge-cache",
                        str(tmp_path / f"cache{quiet}.sqlite"), f"--runner={FNAPI}", "--output", str(tmp_path / "out"),
                        env=env)
            assert proc.returncode == 0, proc.stderr
            assert srv.count() == 19
            got[quiet] = proc
    loud = got[False].stderr
    assert "HTTP Request" not in loud, loud
    assert "Resource module is not available" in loud
    assert (got[True].stdout, got[True].stderr) == ("", "")


def test_the_stop_of_a_service_beam_started_is_not_a_warning(caplog):
    """trial35 T11: every Prism run ended with ``WARNING apache_beam.utils.subprocess_server: Really
    destroying service at localhost:54897 with cmd: (...)`` after the summary (Beam logs each normal
    stop of its job service so). It is a DEBUG record now: hidden at an entry point's levels, shown
    where that logger is enabled for DEBUG; the logger's other warnings are kept."""
    import logging

    from fair_forge_beam.progress import cli_logging

    cli_logging()
    log = logging.getLogger("apache_beam.utils.subprocess_server")
    before = log.level
    try:
        with caplog.at_level(logging.INFO):
            log.warning("Really destroying service at %s with cmd: %s", "localhost:54897", ("/x/prism-v2.77.0",))
            log.warning("Port %s already in use", 8099)
        assert "Really destroying" not in caplog.text and "Port 8099 already in use" in caplog.text
        caplog.clear()
        log.setLevel(logging.DEBUG)
        with caplog.at_level(logging.DEBUG):
            log.warning("Really destroying service at %s with cmd: %s", "localhost:1", ("/x/prism",))
        assert [(r.levelname, r.getMessage()[:26]) for r in caplog.records] == [("DEBUG", "Really destroying service ")]
    finally:
        log.setLevel(before)


def test_beam_retries_are_one_line_on_the_console(caplog):
    """Hostile-tester trial: a hanging judge printed three 'Traceback for above exception' blocks
    (Beam's retry decorator logs the whole traceback of each retried failure)."""
    import logging

    from apache_beam.utils import retry

    from fair_forge_beam.progress import cli_logging

    cli_logging()
    calls = []

    @retry.with_exponential_backoff(num_retries=1, initial_delay_secs=0.01, retry_filter=lambda e: True)
    def judge_batch():
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("the reply did not arrive whole within the time-out")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="apache_beam.utils.retry"):
        assert judge_batch() == "ok"
    (record,) = [r for r in caplog.records if r.name == "apache_beam.utils.retry"]
    line = record.getMessage()
    assert "Traceback" not in line and "\n" not in line
    assert line.startswith("retrying judge_batch in ") and "TimeoutError: the reply did not arrive whole" in line


_REPEATED_BEAM_WARNING = """
import logging, sys, threading
import apache_beam.ml.inference.base as base
from fair_forge_beam.progress import QuietLogs, cli_logging

cli_logging()
base.resource = None  # as when Beam's optional model_manager import fails (no torch): one warning per call
with QuietLogs() as q:
    if sys.argv[1] == "quiet":
        q.quiet()
    threads = [threading.Thread(target=base._get_current_process_memory_in_bytes) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    base._get_current_process_memory_in_bytes()
    logging.getLogger("apache_beam.x").warning("step %s failed", "A")  # different texts: each shown
    logging.getLogger("apache_beam.x").warning("step %s failed", "B")
"""


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_a_warning_beam_repeats_is_shown_once_and_never_with_quiet(quiet):
    """Fresh-user trial (fresh13): Beam's "Resource module is not available" appeared 4 times on
    a judge run (Beam logs it on each model load: each judge DoFn instance, each worker thread).
    A warning Beam repeats word for word is shown once a process, none with --quiet; Beam's
    warnings that differ are all shown."""
    proc = subprocess.run([sys.executable, "-c", _REPEATED_BEAM_WARNING, "quiet" if quiet else "loud"], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Resource module is not available") == (0 if quiet else 1), proc.stderr
    assert [proc.stderr.count(f"step {s} failed") for s in "AB"] == ([0, 0] if quiet else [1, 1]), proc.stderr


_NO_MODEL_MANAGER = """
import io, logging, sys
sys.modules["apache_beam.ml.inference.model_manager"] = None  # as without torch: Beam's import of it fails
import apache_beam.ml.inference.base as base
assert base.resource is None  # Beam's try binds resource with model_manager: both lost
shown = io.StringIO()
logging.getLogger().addHandler(logging.StreamHandler(shown))
if sys.argv[1] == "judge":
    import fair_forge_beam.components.judge.handler
elif sys.argv[1] == "assistant":
    import fair_forge_beam.assistants.assistant
else:
    from fair_forge_beam.components.embedder import _build_handler_class
    _build_handler_class()
print(base._get_current_process_memory_in_bytes() > 0, repr(shown.getvalue()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("importer", ["judge", "assistant", "embedder"])
def test_beams_memory_measure_is_bound_without_torch_and_says_no_warning(importer):
    """trial47 B8: every judged run on Linux printed ``WARNING root: Resource module is not available
    for current platform`` (once, after fresh13): Beam's ``apache_beam.ml.inference.base`` imports
    ``resource`` in one ``try`` with its ``model_manager``, which needs torch, so a base install lost
    both, and each model load said so and measured 0 bytes. Each of our importers of that module binds
    the standard library's ``resource`` again: the measure works, and nothing is logged."""
    proc = subprocess.run([sys.executable, "-c", _NO_MODEL_MANAGER, importer], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "True ''", proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_a_judge_run_without_beams_model_manager_says_no_resource_warning(tmp_path, quiet):
    """The same on a whole judge run (Beam's optional ``model_manager`` import failing, as without
    torch: a light install): on main the warning was said once per judge DoFn's model load, then
    once a run (fresh13); none now, as ``resource`` is bound again (trial47 B8). A platform truly
    without ``resource``: test_quiet_prints_nothing_on_a_context_run."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    hh = REPO / "fair_forge_beam" / "data" / "examples" / "fair_forge_examples.json"  # sessions with a context
    pre = ("import sys, runpy; sys.modules['apache_beam.ml.inference.model_manager'] = None; sys.argv[0] = 'audit'; "
           "runpy.run_module('pipelines.audit', run_name='__main__')")
    with ScriptedOpenAIServer(lambda req: {"score": 1.0, "insight": "ok"}) as srv:
        proc = subprocess.run(
            [sys.executable, "-c", pre, "--input", str(hh), "--metrics", "context", "--judge-base-url", srv.base_url,
             "--judge-model", "m", "--judge-cache", str(tmp_path / "c.sqlite"), "--output", str(tmp_path / "out"),
             f"--runner={FNAPI}", *(["--quiet"] if quiet else [])],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "x"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Resource module is not available") == 0, proc.stderr[-3000:]


# ------------------------------------------------------------------ every command stages (seal28 item 2)
@pytest.mark.slow
def test_a_failing_run_assistant_leaves_the_previous_folder_whole(tmp_path, monkeypatch):
    """``run_assistant`` (and ``generate``, and the loop's stages: loop_jobs) deleted the previous
    run's files before the pipeline started, then wrote each file in place: a run failing while it
    wrote (a full disk here, after dataset.jsonl) left the folder with half of a new run and none of
    the old one. It writes into a stage now, published only when the run succeeded."""
    from test_assistant_runner import SESSIONS, echo, run_http

    from fair_forge_beam.assistants import assistant
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS), encoding="utf-8")
    out = tmp_path / "run"
    with ScriptedOpenAIServer(echo) as srv:
        run_http(data, out, srv)
        before = _tree(out)
        assert {"dataset.jsonl", "run_summary.json", "dead_letter.jsonl"} <= set(before)
        (out / "mine.txt").write_text("the user's", encoding="utf-8")
        written = assistant._write_run

        def full_disk(folder, *a, **kw):
            written(folder, *a, **kw)  # every file written, then the disk is full
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(assistant, "_write_run", full_disk)
        data.write_text(json.dumps(SESSIONS[0]) + "\n", encoding="utf-8")  # another run: other files
        with pytest.raises(Exception):
            run_http(data, out, srv)
        assert _tree(out) == {**before, "mine.txt": b"the user's"}
        assert _siblings(out) == []
        monkeypatch.setattr(assistant, "_write_run", written)
        summary = run_http(data, out, srv)  # a run that succeeds replaces it, the user's file kept
    assert summary["sessions"] == 1 and json.loads((out / "run_summary.json").read_text())["sessions"] == 1
    assert (out / "mine.txt").read_text() == "the user's" and _siblings(out) == []
