"""Issue 26, item 1: SDK worker processes run the launcher's interpreter, venv included.

A user installs into a venv and starts a local Flink cluster from it. The TaskManagers start each
SDK worker through Beam's boot binary, which runs ``python`` from ``PATH``. Before the fix the
cluster put a symlink ``<workdir>/bin/python -> sys.executable`` there: started through a symlink
in another folder, a venv's interpreter does not find its ``pyvenv.cfg``, runs as the base Python,
and every worker died at ``import apache_beam`` ("Process died with exit code 1", the worker's
own error in no log). CI installed into the machine's own interpreter, where the symlink happened
to work.

Each test here makes a venv of its own (without pip): its
``site-packages`` holds a ``.pth`` that adds this interpreter's packages and a marker module that
only the venv can import, so a worker that runs as the base Python fails here whatever the base
has installed. The fast test runs the worker command alone; the Flink test starts a one-TaskManager
cluster from the venv's interpreter (the worker command in the cluster's folder, not the venv's),
runs a job whose workers report their ``sys.prefix`` and the marker, then breaks the venv for new
workers and checks that the failed job's error carries the worker's own stderr.
"""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import REPO

MARKER = "ffb_venv_marker"


def make_venv(root: Path, pip: bool = False) -> tuple[Path, Path]:
    """A venv at ``root`` (with its own pip when ``pip``) seeing this interpreter's packages through
    a ``.pth`` (processed only when Python runs as that venv) and a marker module of its own.
    Returns ``(its python, the .pth)``."""
    subprocess.run([sys.executable, "-m", "venv", *([] if pip else ["--without-pip"]), str(root)], check=True,
                   timeout=300)
    python = root / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    marker_dir = root / "marker"
    marker_dir.mkdir()
    (marker_dir / f"{MARKER}.py").write_text(f"PREFIX = {str(root)!r}\n", encoding="utf-8")
    # this interpreter's site dirs, with their own .pth files (an editable install's finder), and the checkout
    dirs = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], site.getusersitepackages()])
    lines = [str(marker_dir), str(REPO)] + [f"import site; site.addsitedir({d!r})" for d in dirs if Path(d).is_dir()]
    pth = purelib / "ffb_test_parent.pth"
    pth.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return python, pth


def test_worker_command_runs_the_launchers_venv(tmp_path):
    """The cluster's worker command, written by a venv's interpreter into a folder outside the venv,
    runs that venv (its prefix, its packages), is no symlink, and keeps an SDK worker's stderr
    where :func:`~fair_forge_beam.process_workers.worker_stderr` reads it. Fails on the symlink."""
    python, _ = make_venv(tmp_path / "venv")
    work = tmp_path / "cluster"
    code = ("import sys; from pathlib import Path; from fair_forge_beam.testing.flink_cluster import FlinkCluster; "
            "c = FlinkCluster(workdir=Path(sys.argv[1])); c._write_worker_command(Path('/bin/true'))")
    subprocess.run([str(python), "-c", code, str(work)], check=True, cwd=tmp_path, timeout=120)
    worker_python = work / "bin" / "python"
    assert not worker_python.is_symlink()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    probe = f"import sys, {MARKER}; print(sys.prefix); print({MARKER}.PREFIX)"
    run = subprocess.run([str(worker_python), "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    prefix, marker = run.stdout.split()
    assert Path(prefix) == tmp_path / "venv" == Path(marker)

    # the stderr of what the boot binary runs through the wrapper (pip, the SDK worker) is kept
    from fair_forge_beam.process_workers import worker_stderr

    command = work / "bin" / "beam-boot"
    opts = ["--environment_type=PROCESS", "--environment_config=" + json.dumps({"command": str(command)})]
    import time

    before = time.time()
    crash = "import sys; sys.stderr.write('ModuleNotFoundError: no module named nowhere\\n'); sys.exit(1)"
    failed = subprocess.run([str(worker_python), "-c", crash], env=env, timeout=60)
    assert failed.returncode == 1
    report = worker_stderr(opts, before)
    assert "no module named nowhere" in report and "python-" in report
    assert worker_stderr(["--environment_type=LOOPBACK"], before) == ""  # not a PROCESS command of ours


def test_worker_command_answers_the_boot_binarys_pip_questions_without_pip(tmp_path):
    """Beam's boot binary runs ``python -m pip freeze --all`` twice (a log of the packages) and
    ``python -m pip show apache-beam`` (is Beam installed?) at every SDK worker start: about 3 CPU s
    and 5-20 s of a Flink job's start here (pip's own imports). The wrapper answers both from
    ``importlib.metadata``: the same exit status, the packages listed, pip's words when Beam is
    missing (what a failed job's error shows, see the Flink test below); any other pip command is
    pip's. Fails before: a ``pip`` that records each run (first on ``PYTHONPATH``) ran."""
    import apache_beam

    from fair_forge_beam.process_workers import worker_stderr, write_python_wrapper

    fake = tmp_path / "fake"
    (fake / "pip").mkdir(parents=True)
    (fake / "pip" / "__init__.py").write_text("", encoding="utf-8")
    (fake / "pip" / "__main__.py").write_text(
        "import os, sys\nopen(os.environ['PIP_RAN'], 'a').write(' '.join(sys.argv[1:]) + '\\n')\nsys.exit(3)\n",
        encoding="utf-8")
    ran = tmp_path / "pip-ran.txt"
    python = write_python_wrapper(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": str(fake), "PIP_RAN": str(ran)}

    def run(*args):
        return subprocess.run([str(python), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)

    show = run("-m", "pip", "show", "apache-beam")
    assert show.returncode == 0 and f"Version: {apache_beam.__version__}" in show.stdout, show
    freeze = run("-m", "pip", "freeze", "--all")
    assert freeze.returncode == 0 and f"apache-beam=={apache_beam.__version__}" in freeze.stdout.splitlines(), freeze
    import time

    before = time.time() - 1
    missing = run("-m", "pip", "show", "no-such-distribution-ffb")
    assert missing.returncode == 1
    opts = ["--environment_type=PROCESS",
            "--environment_config=" + json.dumps({"command": str(tmp_path / "bin" / "beam-boot")})]
    assert "Package(s) not found: no-such-distribution-ffb" in worker_stderr(opts, before)
    assert not ran.exists(), ran.read_text()
    # anything else still runs pip (here the recording one), and Python as such
    assert run("-m", "pip", "install", "x").returncode == 3 and ran.read_text() == "install x\n"
    assert run("-c", "print(6 * 7)").stdout == "42\n"
    # only the boot binary's exact argument lists, compared one by one (trial36b B7): the same words
    # split otherwise, or more names, are Python's (here: no such module, or the recording pip)
    assert run("-m pip freeze --all").returncode != 0
    assert run("-m", "pip freeze", "--all").returncode == 1
    assert run("-m", "pip", "show", "x", "apache-beam").returncode == 3
    assert run("-m", "pip", "freeze").returncode == 3
    assert ran.read_text() == "install x\nshow x apache-beam\nfreeze\n"


def test_a_worker_that_failed_is_one_line_with_its_own_words(tmp_path, capsys):
    """A job whose SDK worker could not start (here: no Beam in its venv) ends the command with one
    line holding the worker's last words and where all the workers wrote, exit 1, as other runner
    failures do (trial36b B9: a 50-line traceback). Fails before (the error was re-raised)."""
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
    from fair_forge_beam.console import guarded
    from fair_forge_beam.process_workers import write_worker_command

    command = write_worker_command(tmp_path / "bin", Path("/bin/true"), tmp_path / "w")
    opts = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1", "--environment_type=PROCESS",
                             "--environment_config=" + json.dumps({"command": str(command)})])
    crash = ("import sys; sys.stderr.write('Traceback (most recent call last):\\n  File x\\n"
             "ModuleNotFoundError: No module named apache_beam\\n'); sys.exit(1)")

    def job():
        with run_pipeline(opts):
            # a worker started through the wrapper, as the boot binary does, then the runner's failure
            subprocess.run([str(tmp_path / "bin" / "python"), "-c", crash], timeout=60)
            raise RuntimeError("java.lang.IllegalStateException: Process died with exit code 1\n" + "\tat x.y(Z)\n" * 50)

    assert guarded(job, "audit") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "ModuleNotFoundError: No module named apache_beam" in err[0] and str(tmp_path / "bin" / "stderr") in err[0]


def test_a_step_that_failed_in_a_worker_names_the_workers_exception(tmp_path, capsys):
    """trial37 T3: a worker that started (the boot binary logged the pipeline options to stderr) and
    then failed a step: the runner's error carries the worker's Python traceback; the one line named
    the boot log's first line (a protobuf dump of the options) and the exception was 95 lines up.
    Now the line names the exception of the last traceback in the job's error; the stderr's own
    traceback, then its last line, only when the job's error holds none."""
    from fair_forge_beam.beam_pipeline import last_words, pipeline_options, run_pipeline
    from fair_forge_beam.console import guarded
    from fair_forge_beam.process_workers import write_worker_command

    command = write_worker_command(tmp_path / "bin", Path("/bin/true"), tmp_path / "w")
    opts = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1", "--environment_type=PROCESS",
                             "--environment_config=" + json.dumps({"command": str(command)})])
    boot = ("import sys; sys.stderr.write('pipeline_options:{fields:{key:\"beam:option:x:v1\" value:{bool_value:false}}}' * 40 "
            "+ '\\n2026/12/06 20:42:58 Executing: python -m apache_beam.runners.worker.sdk_worker_main\\n')")
    harness = ("java.lang.RuntimeException: Error received from SDK harness for instruction 3: Traceback (most recent "
               "call last):\n  File \"sdk_worker.py\", line 310, in _execute\n    response = task()\n"
               "ModuleNotFoundError: No module named 'oddnum'\n\n\tat org.apache.beam.X.y(X.java:1)\n" * 1
               + "\tat org.apache.beam.X.z(X.java:2)\n" * 40)

    def job():
        with run_pipeline(opts):
            subprocess.run([str(tmp_path / "bin" / "python"), "-c", boot], timeout=60)
            raise RuntimeError(harness)

    assert guarded(job, "audit") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "an SDK worker process failed: ModuleNotFoundError: No module named 'oddnum' (all the workers wrote: " in err[0], err
    assert "pipeline_options" not in err[0]
    # the order of the evidence; a long line is cut
    died = "java.lang.IllegalStateException: Process died with exit code 1"
    assert last_words(died, ["boot says: stopping\n\n"]) == ("boot says: stopping", True)
    assert last_words("", ['Traceback (most recent call last):\n  File "x"\nImportError: no beam\nexit 1']) == \
        ("ImportError: no beam", True)
    assert last_words(died, ["y" * 5000])[0].endswith("… (5,000 characters)")
    assert last_words(died, []) == ("", True)
    # trial37b B2: the runner's first traceback names the cause; text after it (a message) cannot replace it
    chained = ("Traceback (most recent call last):\n  File a\nKeyError: 'k'\n\nDuring handling of the above "
               "exception, another exception occurred:\n\nTraceback (most recent call last):\n  File b\n"
               "apache_beam.runners.common.UserCodeError: bad\n")
    assert last_words(chained, ["x"]) == ("KeyError: 'k'", True)
    forged = ('Traceback (most recent call last):\n  File "m.py", line 1, in f\nValueError: bad row\n'
              'Traceback (most recent call last):\nAllGood: the job finished\n')
    assert last_words(forged, []) == ("ValueError: bad row", True)
    assert last_words('Traceback (most recent call last):\n  File "m.py"\nValueError: \nthe real reason\n', []) == \
        ("ValueError: the real reason", True)
    coloured = 'Traceback (most recent call last):\n  File "m.py"\n\x1b[1;35mValueError\x1b[0m: \x1b[35mbad\x1b[0m\n'
    assert last_words("", [coloured]) == ("ValueError: bad", True)
    # trial37b B2: an exception group's traceback (every line behind a margin) names the group and its
    # first sub-exception, nested groups looked into; the parts' own tracebacks are not top-level ones
    group = subprocess.run([sys.executable, "-c", (
        "def f():\n try: raise KeyError('inner')\n except KeyError as e: raise ValueError('a') from e\n"
        "errs = []\ntry: f()\nexcept Exception as e: errs.append(e)\n"
        "raise ExceptionGroup('outer', [ExceptionGroup('nested', errs + [TypeError('b')]), OSError('c')])\n")],
        capture_output=True, text=True, timeout=60).stderr
    assert "Exception Group Traceback" in group and "  | " in group
    assert last_words("", ["Traceback (most recent call last):\n  File \"x\"\nKeyError: 'logged'\n" + group]) == \
        ("ExceptionGroup: outer (2 sub-exceptions); the first: ValueError: a", True)
    assert last_words("java.lang.RuntimeException: Error received from SDK harness for instruction 3: " + group, []) \
        == ("ExceptionGroup: outer (2 sub-exceptions); the first: KeyError: 'inner'", True)
    # a runner's own failure (no worker traceback, no worker death) is named as the runner's
    assert last_words("java.lang.IllegalStateException: no slot\n\tat x.y(Z)", ["Exiting: exit status 1"]) == \
        ("java.lang.IllegalStateException: no slot", False)


def test_a_worker_traceback_longer_than_the_shown_lines_is_still_named(tmp_path, capsys):
    """trial37b B1: a worker that died at start with a 38-line traceback: the 25 lines kept for the
    error's text lost its header, and the console named the boot binary's 'Python exited' line."""
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
    from fair_forge_beam.console import guarded
    from fair_forge_beam.process_workers import write_worker_command

    import time

    command = write_worker_command(tmp_path / "bin", Path("/bin/true"), tmp_path / "w")
    opts = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1", "--environment_type=PROCESS",
                             "--environment_config=" + json.dumps({"command": str(command)})])
    frames = "".join(f'  File "/v/lib/m{i}.py", line {i}, in f{i}\\n    g{i}()\\n    ^^^^\\n' for i in range(12))
    crash = (f"import sys; sys.stderr.write('Traceback (most recent call last):\\n{frames}"
             "ModuleNotFoundError: No module named oddnum\\n'); sys.exit(1)")

    boot = "import sys; sys.stderr.write('2026/12/06 21:00:01 Python exited: exit status 1\\n')"

    def job():
        with run_pipeline(opts):
            # the boot binary's own file (older: the newest file, the worker's, comes first)
            subprocess.run([str(tmp_path / "bin" / "python"), "-c", boot], timeout=60)
            time.sleep(1.1)  # the files are named by the second their process started
            subprocess.run([str(tmp_path / "bin" / "python"), "-c", crash], timeout=60)
            raise RuntimeError("java.lang.IllegalStateException: Process died with exit code 1")

    assert guarded(job, "audit") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "an SDK worker process failed: ModuleNotFoundError: No module named oddnum" in err[0], err


def _stderr_of(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stderr


def test_a_worker_traceback_followed_by_shutdown_noise_is_named():
    """trial38b B7: a worker's fatal traceback followed by what Python prints at shutdown and goes on
    ("Exception ignored in …", an atexit function's error) named the noise. Rule (beam_pipeline._raised):
    a traceback Python printed as ignored is named only when the text holds no other."""
    from fair_forge_beam.beam_pipeline import last_words

    err = _stderr_of("import atexit\n"
                     "class P:\n def __del__(self): raise AttributeError(\"'NoneType' object has no attribute 'Empty'\")\n"
                     "p = P()\n"
                     "def bye():\n try: raise KeyError('inner')\n except KeyError as e: raise RuntimeError('atexit noise') from e\n"
                     "atexit.register(bye)\nimport oddnum\n")
    assert "Exception ignored in" in err and "atexit noise" in err and err.rstrip().endswith("'Empty'"), err
    assert last_words("", [err]) == ("ModuleNotFoundError: No module named 'oddnum'", True)
    atexit = ("Error in atexit._run_exitfuncs:\nTraceback (most recent call last):\n  File \"q.py\", line 2\n"
              "queue.Empty: gone\n")
    assert last_words("", [err.split("Exception ignored")[0] + atexit]) == \
        ("ModuleNotFoundError: No module named 'oddnum'", True)
    # nothing but noise: it is named (better than nothing)
    assert last_words("", [atexit]) == ("queue.Empty: gone", True)


def _headers(size: int) -> str:
    unit = 'Traceback (most recent call last):\n  File "a"\n'
    return unit * (size // len(unit))


def test_naming_the_exception_reads_the_text_once_and_a_bounded_part_of_it(monkeypatch):
    """trial38b B8: headers without an exception line made each header re-read the rest of the text
    (1.6 s at 64 KB, 10.8 s at 256 KB of job error). Counted: the lines matched against the exception
    pattern grow as the text (4x the text: at most 4.5x the matches; were 16x), and last_words reads
    at most TEXT_READ characters of each text."""
    from fair_forge_beam import beam_pipeline

    pattern = beam_pipeline._EXCEPTION_LINE
    count = [0]

    class Counting:
        def match(self, line):
            count[0] += 1
            return pattern.match(line)

    monkeypatch.setattr(beam_pipeline, "_EXCEPTION_LINE", Counting())

    def matches(text, first):
        count[0] = 0
        assert beam_pipeline._raised(text, first) is None
        return count[0]

    for first in (True, False):
        small, large = matches(_headers(16 * 1024), first), matches(_headers(64 * 1024), first)
        assert 0 < large <= 4.5 * small, (first, small, large)
    count[0] = 0
    beam_pipeline.last_words(_headers(4 * 1024 * 1024) + "x", [_headers(4 * 1024 * 1024)])
    assert count[0] <= 2 * beam_pipeline.TEXT_READ // 40, count[0]


def test_deep_groups_messages_with_line_breaks_and_terminal_codes_are_read():
    """trial38b B9: a group nested past Python's depth cut named a sibling of the hidden first
    sub-exception; a chain of 11 groups or a group message with a line break named none; OSC and
    private-mode terminal codes hid the traceback."""
    from fair_forge_beam.beam_pipeline import last_words

    cut = "not shown: max_group_depth is 10, nested deeper than Python prints"
    siblings = _stderr_of("e = ValueError('true first')\n"
                          "for i in range(11): e = ExceptionGroup(f'g{i}', [e, TypeError(f't{i}')])\nraise e\n")
    assert "max_group_depth is 10" in siblings
    assert last_words("", [siblings]) == (f"ExceptionGroup: g10 (2 sub-exceptions); the first: {cut}", True)
    chain = _stderr_of("e = ValueError('leaf')\nfor i in range(11): e = ExceptionGroup(f'g{i}', [e])\nraise e\n")
    assert last_words("", [chain]) == (f"ExceptionGroup: g10 (1 sub-exception); the first: {cut}", True)
    assert last_words("Error received from SDK harness for instruction 3: " + chain, [])[0].endswith(cut)
    broken = _stderr_of("raise ExceptionGroup('line1\\nline2', [ValueError('first\\nsecond'), TypeError('t')])\n")
    assert "line2 (2 sub-exceptions)" in broken
    assert last_words("", [broken]) == ("ExceptionGroup: line1 line2 (2 sub-exceptions); the first: ValueError: first",
                                        True)
    nested = _stderr_of("raise ExceptionGroup('outer', [ExceptionGroup('in\\nner', [KeyError('k')]), TypeError('t')])\n")
    assert last_words("", [nested]) == ("ExceptionGroup: outer (2 sub-exceptions); the first: KeyError: 'k'", True)
    coded = ('\x1b[?25lTraceback (most recent call last):\n  File "m.py"\n'
             '\x1b]8;;file:///m.py\x1b\\\x1b[1;35mValueError\x1b[0m\x1b]8;;\x07: bad\x1b[?25h\n')
    assert last_words("", [coded]) == ("ValueError: bad", True)


def test_local_runners_skip_the_launchers_pip_freeze():
    """Beam's stager runs ``pip freeze`` in the launcher at each portable job's submission, for a
    comparison with the workers' packages; Prism's own workers and this package's PROCESS workers run
    the launcher's interpreter, so those runs skip it (Beam's experiment); Dataflow-like runs keep it."""
    from apache_beam.options.pipeline_options import DebugOptions

    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.process_workers import write_worker_command

    def experiments(*argv):
        return pipeline_options(list(argv)).view_as(DebugOptions).experiments or []

    skip = "disable_logging_submission_environment"
    assert skip in experiments("--runner=PrismRunner")
    assert skip in experiments("--runner=PrismRunner", "--environment_type=LOOPBACK")
    assert experiments("--runner=PrismRunner", f"--experiments={skip}").count(skip) == 1
    assert skip not in experiments("--runner=PrismRunner", "--environment_type=DOCKER")
    # a worker pool's or a user's own command's interpreter is not known here (trial36b B8)
    assert skip not in experiments("--runner=PrismRunner", "--environment_type=EXTERNAL",
                                   "--environment_config=otherhost:50000")
    assert skip not in experiments("--runner=PrismRunner", "--environment_type=PROCESS",
                                   "--environment_config=" + json.dumps({"command": "/opt/boot"}))
    assert skip not in experiments()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ours = write_worker_command(Path(tmp) / "bin", Path("/bin/true"), Path(tmp) / "w")
        process = ["--runner=PortableRunner", "--environment_type=PROCESS"]
        assert skip in experiments(*process, "--environment_config=" + json.dumps({"command": str(ours)}))
        assert skip not in experiments(*process, "--environment_config=" + json.dumps({"command": "/opt/boot"}))


_FLINK_SCRIPT = r"""
import json, sys
from pathlib import Path
from fair_forge_beam._beam import beam
from fair_forge_beam.beam_pipeline import pipeline_options
from fair_forge_beam.testing.flink_cluster import FlinkCluster

work, out, pth = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
res = {"launcher": sys.prefix}


def where(_):
    import sys
    import ffb_venv_marker
    return sys.prefix + "|" + ffb_venv_marker.PREFIX


with FlinkCluster(task_managers=1, workdir=work, ends_with_owner=True) as cluster:
    with beam.Pipeline(options=pipeline_options(cluster.runner_args())) as p:
        p | beam.Create([0, 1]) | beam.Map(where) | beam.io.WriteToText(str(out / "where"), num_shards=1)
    res["workers"] = sorted(set((out / "where-00000-of-00001").read_text().split()))
    pth.rename(pth.with_name(pth.name + ".off"))  # new workers of the venv no longer find Beam
    from fair_forge_beam.beam_pipeline import WorkerProcessError, run_pipeline

    try:
        with run_pipeline(pipeline_options(cluster.runner_args())) as p:
            p | beam.Create([0]) | beam.Map(where) | beam.io.WriteToText(str(out / "second"))
        res["second"] = "succeeded"
    except WorkerProcessError as e:
        res["second"] = "WorkerProcessError: " + str(e)
    except Exception as e:
        res["second"] = f"{type(e).__name__}: {e}"
print("RESULT " + json.dumps(res))
"""


@pytest.mark.slow
def test_flink_cluster_from_a_venv(tmp_path):
    """A Flink cluster started by a venv's interpreter (worker command in the cluster's folder, a
    folder whose name has a space): its SDK workers run in that venv; a worker that cannot start
    fails the job with its own stderr in the error. Fails on the symlink (the workers ran the base
    Python), and on the job server's options written as "--name=value" (the space)."""
    from test_runners_integration import _require

    _require("flink")
    python, pth = make_venv(tmp_path / "venv", pip=True)  # the boot binary asks pip whether Beam is installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    out = tmp_path / "out"
    out.mkdir()
    # the cluster's folder has a space (trial36b B6: the job server refused "--flink-conf-dir=<it>")
    proc = subprocess.run([str(python), "-c", _FLINK_SCRIPT, str(tmp_path / "flink cluster"), str(out), str(pth)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    res = json.loads(lines[-1][len("RESULT "):])
    venv = str(tmp_path / "venv")
    assert res["launcher"] == venv
    assert res["workers"] == [f"{venv}|{venv}"], res
    assert res["second"].startswith("WorkerProcessError"), res["second"]
    # the worker's own words: pip finds no Beam, and the boot binary says why it stopped
    assert "Package(s) not found: apache-beam" in res["second"], res["second"]
    assert "Apache Beam is not installed in the runtime environment" in res["second"], res["second"]


_PRISM_SCRIPT = r"""
import json, sys
from pathlib import Path
from fair_forge_beam._beam import beam
from fair_forge_beam.beam_pipeline import pipeline_options
from fair_forge_beam.testing import beam_runners as rn

out = Path(sys.argv[1])


def where(_):
    import sys
    import ffb_venv_marker
    return sys.prefix + "|" + ffb_venv_marker.PREFIX


pool = rn.WorkerPool()
with pool as address:
    with beam.Pipeline(options=pipeline_options(rn.runner_args("prism_workers", worker_pool=address))) as p:
        p | beam.Create([0, 1]) | beam.Map(where) | beam.io.WriteToText(str(out / "where"), num_shards=1)
print("RESULT " + json.dumps(sorted(set((out / "where-00000-of-00001").read_text().split()))))
"""


@pytest.mark.slow
def test_prism_worker_pool_from_a_venv(tmp_path):
    """Beam's worker pool starts its SDK workers as ``python`` from ``PATH``: started from a venv's
    interpreter with another ``python`` first on ``PATH`` (here one that only fails), the workers
    still run the venv. Fails when the pool's workers take ``python`` from the user's ``PATH``."""
    from test_runners_integration import _require

    _require("prism_workers")
    python, _ = make_venv(tmp_path / "venv")
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    for name in ("python", "python3"):
        (decoy / name).write_text("#!/bin/sh\necho 'the python on PATH ran' >&2\nexit 3\n", encoding="utf-8")
        (decoy / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(decoy), env.get("PATH", "")])
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([str(python), "-c", _PRISM_SCRIPT, str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    venv = str(tmp_path / "venv")
    assert json.loads(lines[-1][len("RESULT "):]) == [f"{venv}|{venv}"]


def test_the_sdk_worker_the_boot_binary_starts_runs_through_the_packages_worker_start(tmp_path):
    """fix47b (trial46b B4's class): a PROCESS worker's stderr is a file of its own (``stderr/python-….stderr``); under
    ``ulimit -f`` the harness's ``print`` of a failed bundle's traceback into it raised, and the bundle's answer was
    never sent. The boot binary's ``python -m apache_beam.runners.worker.sdk_worker_main`` now runs through
    :mod:`fair_forge_beam.sdk_worker` (streams that drop what the machine refuses); any other module is Python's."""
    from fair_forge_beam.process_workers import write_python_wrapper

    python = write_python_wrapper(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CONTROL_API_SERVICE_DESCRIPTOR", None)  # the worker fails at once, its traceback in its stderr file
    proc = subprocess.run([str(python), "-m", "apache_beam.runners.worker.sdk_worker_main"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    [err] = (tmp_path / "bin" / "stderr").glob("python-*.stderr")
    text = err.read_text(encoding="utf-8")
    assert "KeyError: 'CONTROL_API_SERVICE_DESCRIPTOR'" in text and "fair_forge_beam/sdk_worker.py" in text, text[-2000:]
