"""Issue 28, hostile trial 3 (trial28c): what the console shows and what is checked before a run.

Each class at its root: an OSError while checking or creating the output is a one-line usage error;
the machine's limits (EFBIG, EMFILE, ...) are environment failures said in one line, without Beam's
logged traceback; console output never fails a run nor stops publishing; every file the run writes
(the judge cache) is checked before it starts; Ctrl-C is one line, exit code 130; messages say what
is wrong in words (gate numbers, TOML values, templates, side files); the one-session marker holds
on the overall row too.
"""
from __future__ import annotations

import errno
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FNAPI, REPO

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"


def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}
    return env


# ----------------------------------------------------------------------------- 1. --output OSErrors
def test_an_output_name_or_path_too_long_is_a_usage_error(tmp_path):
    from fair_forge_beam.reports.output_folder import check_output_folder

    for out in (tmp_path / ("o_" + "d" * 300),  # a name over NAME_MAX
                tmp_path / ("o_" + "d" * 230),  # a name that fits, but not with its stage's suffix
                Path(str(tmp_path) + ("/" + "x" * 200) * 21)):  # a path over PATH_MAX
        with pytest.raises(ValueError, match="File name too long") as exc:
            check_output_folder(str(out))
        assert "\n" not in str(exc.value) and len(str(exc.value)) < 600  # one line, the path cut
    assert os.listdir(tmp_path) == []  # nothing was made


def test_an_oserror_creating_the_stage_is_a_usage_error(tmp_path, monkeypatch, capsys):
    from fair_forge_beam.console import guarded
    from fair_forge_beam.reports import output_folder

    def refuse(path, *a, **kw):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(output_folder.os, "makedirs", refuse)

    def run():
        with output_folder.staged_output(str(tmp_path / "out")):
            raise AssertionError("the block never runs")

    assert guarded(run, "audit") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fair-forge-beam: error: --output ") and "Permission denied" in err[0]


# ----------------------------------------------------------------------------- 2. environment failures
@pytest.mark.parametrize("code", [errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EIO, errno.ENOSPC])
def test_the_machines_limits_are_environment_failures(code):
    from fair_forge_beam.console import environment_failure

    assert environment_failure(OSError(code, os.strerror(code))).startswith(os.strerror(code))
    wrapped = RuntimeError(f"OSError: [Errno {code}] {os.strerror(code)} [while running 'WriteX/Write']")
    assert "in the pipeline's step WriteX/Write" in environment_failure(wrapped)
    assert environment_failure(OSError(errno.ENOENT, "No such file")) is None


def test_beams_logged_traceback_of_an_environment_failure_is_not_shown(capsys):
    from fair_forge_beam.progress import cli_logging

    root = logging.getLogger()
    before = list(root.handlers)
    handler = logging.StreamHandler(sys.stderr)
    root.handlers = [handler]
    try:
        cli_logging()
        beam_log = logging.getLogger("apache_beam.runners.common")
        try:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        except OSError:
            beam_log.exception("OSError: [Errno 27] File too large [while running 'WriteStats']")
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            beam_log.exception("KeyboardInterrupt [while running 'Read/ReadRange']")
        beam_log.error("another failure [while running 'Score']")
    finally:
        root.handlers = before
    err = capsys.readouterr().err
    assert "File too large" not in err and "KeyboardInterrupt" not in err and "Traceback" not in err
    assert "another failure" in err  # every other ERROR record is kept


@pytest.mark.slow
def test_a_file_size_limit_stops_the_run_in_one_line(tmp_path):
    import resource

    out = tmp_path / "out"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    # no bytecode written: under the limit, Python writes a module's .pyc cut at 8192 bytes into the checkout's
    # __pycache__ (importlib ignores the short write), and every later import of it fails with "EOFError: marshal
    # data too short" (flake45b: in a fresh worktree, 7 audits of 5 test modules failed after this test so)
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--input", str(HH), "--metrics", "humanity",
                           "--output", str(out), f"--runner={FNAPI}"], cwd=tmp_path,
                          env=_env(PYTHONDONTWRITEBYTECODE="1"), preexec_fn=limit, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fair-forge-beam: error: the audit stopped: File too large (the file size limit, ulimit -f)")
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1024, 8192])
def test_a_run_under_a_file_size_limit_leaves_no_cut_bytecode_for_the_next_run(tmp_path, limit):
    """trial46 B1: under ``ulimit -f`` CPython renamed each new ``.pyc`` into place cut at the limit (its one
    ``write`` came back short, unchecked), and every later run that imported such a module failed with
    ``EOFError: marshal data too short``. A fresh copy of the sources (no caches), bytecode writing on as for a
    user: the limited run writes no cut cache, and the next run, without the limit, works."""
    import marshal
    import resource
    import shutil

    tree = tmp_path / "tree"
    for pkg in ("fair_forge_beam", "pipelines"):
        shutil.copytree(REPO / pkg, tree / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(tree)
    args = [sys.executable, "-m", "pipelines.audit", "--input", str(HH), "--metrics", "humanity", "--no-report",
            f"--runner={FNAPI}"]

    def limited_files():  # trial46b B1: at 1 KB the package's own __init__ cache (2,146 bytes) was cut
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    limited = subprocess.run([*args, "--output", str(tmp_path / "o1")], cwd=tmp_path, env=env, preexec_fn=limited_files,
                             capture_output=True, text=True, timeout=600)
    assert limited.returncode == 1, limited.stderr[-3000:]
    cut = []
    for pyc in tree.rglob("*.pyc"):
        try:
            marshal.loads(pyc.read_bytes()[16:])
        except (EOFError, ValueError, TypeError):
            cut.append(str(pyc.relative_to(tree)))
    assert not cut, cut
    again = subprocess.run([*args, "--output", str(tmp_path / "o2")], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "o2" / "results.json").is_file()


# ----------------------------------------------------------------------------- 3. the console never fails a run
def test_say_escapes_what_the_console_cannot_show_and_survives_a_dead_console():
    from fair_forge_beam.console import say

    raw = io.BytesIO()
    ascii_stream = io.TextIOWrapper(raw, encoding="ascii")  # errors="strict", like PYTHONIOENCODING=ascii
    say("b\u00f8t-\u2713", file=ascii_stream)
    assert raw.getvalue() == b"b\\xf8t-\\u2713\n"

    class Full(io.StringIO):
        def write(self, s):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    say("anything", file=Full())  # no exception


@pytest.mark.slow
def test_an_ascii_console_and_a_full_stdout_still_publish(tmp_path):
    lines = HH.read_text(encoding="utf-8").splitlines()[:8]
    docs = [json.loads(line) for line in lines]
    for d in docs:
        d["assistant_id"] = "b\u00f8t-\u2713"
    src = tmp_path / "uni.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--input", str(src), "--metrics", "humanity",
                           "--output", str(out), f"--runner={FNAPI}"], cwd=tmp_path,
                          env=_env(PYTHONIOENCODING="ascii"), capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert b"b\\xf8t-\\u2713" in proc.stdout
    assert (out / "_SUCCESS").exists() and (out / "results.json").exists()
    if os.path.exists("/dev/full"):  # stdout on a full device: the run is published, exit code 0
        out2 = tmp_path / "out2"
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--input", str(src), "--metrics",
                                   "humanity", "--output", str(out2), f"--runner={FNAPI}"], cwd=tmp_path, env=_env(),
                                  stdout=full, stderr=subprocess.PIPE, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert b"Traceback" not in proc.stderr
        assert (out2 / "_SUCCESS").exists()


# ----------------------------------------------------------------------------- 4. every written path pre-flighted
def test_an_unusable_judge_cache_is_a_usage_error_before_the_run(tmp_path, monkeypatch, capsys):
    from pipelines import audit

    monkeypatch.delenv("FAIR_FORGE_JUDGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/x")  # nothing can be made under /proc
    out = tmp_path / "out"
    argv = ["--input", str(HH), "--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1",
            "--judge-model", "m", "--output", str(out), f"--runner={FNAPI}"]
    with pytest.raises(SystemExit) as exc:
        audit.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the judge cache" in err[0] and "/proc/x/fair_forge_beam/judge-cache.sqlite3" in err[0]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        audit.main(argv + ["--judge-cache", str(tmp_path / "afile" / "c.sqlite3")])
    assert exc.value.code == 2
    assert "--judge-cache" in capsys.readouterr().err and not out.exists()


def test_check_cache_file_writes_nothing(tmp_path):
    from fair_forge_beam.reports.output_folder import check_cache_file

    check_cache_file(str(tmp_path / "a" / "b" / "c.sqlite3"), "--judge-cache")  # creatable: passes
    check_cache_file(None, "--x")
    check_cache_file("none", "--x")
    with pytest.raises(ValueError, match="it is a folder"):
        check_cache_file(str(tmp_path), "--judge-cache")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- 5. Ctrl-C
def test_guarded_says_interrupted_in_one_line(capsys):
    from fair_forge_beam.console import guarded

    def ctrl_c():
        raise KeyboardInterrupt

    def beam_ctrl_c():  # how a runner re-raises it from a worker's step
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("KeyboardInterrupt [while running 'Read/ReadRange']")

    for run in (ctrl_c, beam_ctrl_c):  # a call from Python: the line said, Ctrl-C raised on (trial44 B5: returned 130)
        with pytest.raises(KeyboardInterrupt):
            guarded(run, "audit")
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("fair-forge-beam: interrupted")


@pytest.mark.slow
def test_sigint_mid_run_is_one_line_and_leaves_no_stage(tmp_path):
    lines = HH.read_text(encoding="utf-8").splitlines()
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(lines * 200) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.audit", "--input", str(src), "--metrics", "humanity",
                             "--output", str(out), f"--runner={FNAPI}", "--progress-interval", "1"], cwd=tmp_path,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(p.name.endswith(".lock") for p in tmp_path.iterdir()):
        time.sleep(0.2)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("fair-forge-beam: interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]  # no stage, no lock, no output


# ----------------------------------------------------------------------------- 6. messages
@pytest.mark.parametrize("threshold, words", [
    ("inf", "'inf' is not a finite number"), ("nan", "'nan' is not a finite number"),
    ("-inf", "'-inf' is not a finite number"), ("0.5%", "'0.5%' has a percent sign: write the fraction, without %: 0.5% is 0.005"),
    ("1/2", "'1/2' is not a number written with the digits 0-9")])
def test_a_gate_threshold_that_is_no_number_says_why(threshold, words):
    from fair_forge_beam.reports.gates import GateConfigError, parse_gate

    with pytest.raises(GateConfigError) as exc:
        parse_gate(f"humanity mean_entropy mean >= {threshold}")
    assert f"the threshold {words}" in str(exc.value) and "expected '" not in str(exc.value)
    with pytest.raises(GateConfigError, match="the margin"):
        parse_gate(f"regression humanity not worse by more than {threshold}")


@pytest.mark.parametrize("value, words", [
    ("1" + "0" * 400, "too large for a number (401 digits"), ("inf", "not a finite number"),
    ("true", "not a number but true"), ('"0.5"', "not a number but the text '0.5'"),
    ("1979-05-27", "not a number but 1979-05-27 (a TOML date)"), ("[0.5]", "not a number but a list"), ("{x = 1}", "not a number but a table")])
def test_a_toml_threshold_that_is_no_number_says_why(tmp_path, value, words):
    from fair_forge_beam.reports.gates import GateConfigError, make_gate

    import tomllib

    table = tomllib.loads(f'metric = "humanity"\nfield = "mean_entropy"\nstat = "mean"\nop = ">="\nthreshold = {value}\n')
    with pytest.raises(GateConfigError) as exc:
        make_gate(table)
    assert words in str(exc.value) and "Input should be" not in str(exc.value) and "Value error" not in str(exc.value)


@pytest.mark.parametrize("template, words", [
    ('{"m": {% include "x" %}}', "are not available: a template is one text"),
    ('{% macro f(n) %}{{ f(n)|tojson }}{% endmacro %}{"m": {{ f(1)|tojson }}}', "recursion deeper than"),
    ('{"m": {{ (query * 100000000)|tojson }}}', "would build a value over the template limit"),
    ('{"m": {{ query|tojson }}}{%- set _ = history.append(query) %}', "not allowed in a template")])
def test_request_template_errors_are_plain_words(template, words):
    from fair_forge_beam.assistants.assistant import render_request

    values = dict(query="hi", turn_index=0, history=[], messages=[], context="", assistant_id="a", session_id="s",
                  qa_id="q", language="en", agentic=None)
    with pytest.raises(ValueError) as exc:
        render_request(template, values)
    text = str(exc.value)
    assert words in text
    for name in ("TypeError", "RecursionError", "TemplateLimitError", "SecurityError"):
        assert name not in text


def test_a_side_file_too_large_is_said_once(tmp_path, monkeypatch):
    from fair_forge_beam.io import edge
    from fair_forge_beam.metrics.registry import preflight_side_file

    big = tmp_path / "lex.csv"
    big.write_text("word,emotion\n" * 100)
    monkeypatch.setattr(edge, "MAX_SIDE_FILE_BYTES", 10)
    with pytest.raises(ValueError) as exc:
        preflight_side_file(lambda: edge.read_side_file(str(big), "--emotion-lexicon-csv", limit=10),
                            "--emotion-lexicon-csv", str(big))
    text = str(exc.value)
    assert text.count("--emotion-lexicon-csv") == 1 and "SideFileTooLarge" not in text


def test_the_overall_row_of_one_session_is_marked():
    from fair_forge_beam.reports.summary import console_summary

    row = {"slice": "overall", "n_interactions": 5, "n_sessions": 1, "mean_entropy": {"mean": 2.5}}
    doc = {"config": {"mode": "frequentist"},
           "summary": {"interactions_read": 5, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"humanity": {"interactions_scored": 5, "interactions_not_scored": 0}}},
           "metrics": {"humanity": {"headline_columns": ["mean_entropy"], "slices": [row]}}}
    lines = console_summary(doc, "out", []).splitlines()
    overall = next(line for line in lines if line.strip().startswith("overall"))
    assert " 1* " in overall + " "
    assert any("fewer than 2 sessions" in line for line in lines)


def test_check_cache_file_refuses_a_file_that_is_not_a_cache(tmp_path):
    """Issue 28 B1: an existing cache file that is not an SQLite cache (a CSV, a gzip, another
    program's database) is a one-line usage error before the pipeline (was a 186-line
    sqlite3.DatabaseError traceback); an empty file or an earlier cache passes, and nothing is written."""
    import sqlite3

    from fair_forge_beam.components.judge.cache import SQLiteJudgeCache
    from fair_forge_beam.reports.output_folder import check_cache_file

    csv = tmp_path / "not_a_db.sqlite"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an SQLite database") as exc:
        check_cache_file(str(csv), "--judge-cache")
    assert "--judge-cache" in str(exc.value) and "\n" not in str(exc.value)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="not a cache.*'people'"):
        check_cache_file(str(other), "--assistant-cache")
    (tmp_path / "empty.sqlite3").write_bytes(b"")
    check_cache_file(str(tmp_path / "empty.sqlite3"), "--judge-cache")
    cache = SQLiteJudgeCache(str(tmp_path / "c.sqlite3"))
    cache.put("k", {"a": 1})
    cache.close()
    before = sorted(os.listdir(tmp_path))
    check_cache_file(str(tmp_path / "c.sqlite3"), "--judge-cache")
    assert sorted(os.listdir(tmp_path)) == before


def test_audit_refuses_a_judge_cache_that_is_not_a_cache(tmp_path, capsys):
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    data.write_text("")
    csv = tmp_path / "cache.csv"
    csv.write_text("a,b\n1,2\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        audit.main(["--input", str(data), "--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1",
                    "--judge-model", "m", "--judge-cache", str(csv), "--output", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--judge-cache" in err[0] and "not an SQLite database" in err[0]
    assert not out.exists()
