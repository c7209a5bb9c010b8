"""Interrupts end a command promptly and cleanly at any moment (issue 28, B2-B4).

SIGINT (Ctrl-C) and SIGTERM (schedulers, systemd, Kubernetes, ``timeout``) sent to the command line
while it reads, while its judge hangs, while it writes or after it published: exit code 130 / 143
within a few seconds, never death by the signal and never a traceback, one line saying what stopped
and what state the output folder is in, and no stage or lock left behind
(:mod:`fair_forge_beam.console`). The CLI runs as a subprocess (``sys.executable``), the judge is a
127.0.0.1 server that never finishes its replies.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fair_forge_beam import procfs
from helpers import FNAPI, REPO

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
#: sessions with a context (hh-rlhf has none: Context dead-letters a blank context before any judge call)
FF = REPO / "fair_forge_beam" / "data" / "examples" / "fair_forge_examples.json"
CODES = {"SIGINT": 130, "SIGTERM": 143}


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


#: Beam options of the FnApiRunner with two worker processes
MULTI_PROCESS = ("--direct_num_workers=2", "--direct_running_mode=multi_processing")


def context_audit(tmp_path: Path, srv, out: Path, *beam_args: str, **popen) -> subprocess.Popen:
    """The Context audit of ``FF`` into ``out`` on the FnApiRunner (and ``beam_args``), started as a
    subprocess whose judge is ``srv`` (a ScriptedOpenAIServer), its output and errors piped as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.audit", "--input", str(FF), "--metrics", "context",
         "--judge-base-url", srv.base_url, "--judge-model", "m", "--judge-cache", str(tmp_path / "c.sqlite"),
         "--output", str(out), f"--runner={FNAPI}", *beam_args],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _leftovers(folder: Path, out: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(out.name + "."))


def _one_line(err: str) -> list:
    """The lines of stderr that are not logging or progress."""
    return [line for line in err.splitlines() if line.startswith(("fair-forge-beam", "python -m pipelines."))]


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_judge_hangs_ends_the_run_in_seconds(tmp_path, sig):
    """B2 / B3: the first Ctrl-C was ignored for 10+ minutes (the process waited for the judge's
    threads at exit; the second printed a KeyboardInterrupt traceback); SIGTERM killed it (rc -15)
    and left ``<out>.staging-*`` and its ``.lock``."""
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{\"before\": true}", encoding="utf-8")  # an earlier run's output
    with ScriptedOpenAIServer(lambda req: Reply(content="{}", drip=30, drip_headers=True)) as srv:
        proc = context_audit(tmp_path, srv, out)
        deadline = time.time() + 180
        while time.time() < deadline and not srv.count():  # the judge has its first call: it hangs
            time.sleep(0.2)
        assert srv.count(), "the judge was never called"
        time.sleep(1)
        proc.send_signal(getattr(signal, sig))
        sent = time.monotonic()
        _, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    assert proc.returncode == CODES[sig], err[-3000:]
    assert took < 15, f"{sig} took {took:.1f} s to end the run"
    assert "Traceback" not in err, err[-3000:]
    lines = _one_line(err)
    how = "Ctrl-C" if sig == "SIGINT" else "SIGTERM"
    assert lines == [f"fair-forge-beam: interrupted ({how}): the audit stopped; the output folder {out} is untouched "
                     "(as it was before the run; nothing published)"], err[-3000:]
    assert _leftovers(tmp_path, out) == []  # no stage, no lock
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == {"before": True}


@pytest.mark.slow
def test_an_interrupt_after_publishing_leaves_the_outputs_complete(tmp_path):
    """B4: Ctrl-C right after the outputs were published killed the process by the signal (rc -2,
    no line). Here the run is held after publishing by a full stdout (the summary cannot be
    printed), then interrupted: exit code 130, one line saying the outputs are complete, and they
    are whole."""
    out = tmp_path / "out"
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.audit", "--input", str(HH), "--metrics", "humanity", "--output", str(out),
             f"--runner={FNAPI}"],
            cwd=tmp_path, env=_env(), stdout=write_end, stderr=subprocess.PIPE, text=True)
        os.close(write_end)
        deadline = time.time() + 240
        while time.time() < deadline and not ((out / "results.json").exists() and not _leftovers(tmp_path, out)):
            time.sleep(0.2)
        time.sleep(1)
        assert proc.poll() is None, "the run ended although its stdout is full"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(read_end)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert _one_line(err) == [f"fair-forge-beam: interrupted (Ctrl-C): the audit stopped; the output folder {out} is "
                              "complete (published before the interruption)"], err[-3000:]
    assert _leftovers(tmp_path, out) == []
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert "humanity" in doc["metrics"] and (out / "report.html").stat().st_size > 0 and (out / "run_info.json").exists()


GUARDED = textwrap.dedent(
    """
    import os, signal, sys, time
    from fair_forge_beam.console import guarded

    when = sys.argv[1]

    def command():
        if when == "during":
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
            time.sleep(30)
        return 0

    code = guarded(command, "rollup", "fair-forge-beam rollup", owns_process=True)
    if when == "after":  # the command returned: the interpreter is ending
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        time.sleep(30)
    sys.exit(code)
    """
)


@pytest.mark.parametrize("when", ["during", "after"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_or_after_a_command_is_its_exit_code_and_one_line(tmp_path, when, sig):
    """Every subcommand runs under console.guarded: an interrupt during it or after it returned (the
    interpreter ending) is exit code 130 / 143 and one line, never the signal's death (rc -2 / -15)."""
    script = tmp_path / "guarded.py"
    script.write_text(GUARDED, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script), when, sig], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == CODES[sig], proc.stderr
    how = "Ctrl-C" if sig == "SIGINT" else "SIGTERM"
    what = "stopped" if when == "during" else "had finished"
    assert proc.stderr.splitlines() == [f"fair-forge-beam rollup: interrupted ({how}): the rollup {what}; nothing was "
                                        "written"], proc.stderr


WEDGED = textwrap.dedent(
    """
    import os, signal, sys, time, threading
    from fair_forge_beam.console import guarded, note_stage

    stage = sys.argv[1]

    def command():
        os.makedirs(stage)
        open(stage + ".lock", "w").close()
        note_stage(stage, sys.argv[2])
        sent = False
        while True:  # a step that swallows the interrupt and goes on
            try:
                if not sent:
                    sent = True
                    os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(60)
            except KeyboardInterrupt:
                print("swallowed", flush=True)

    sys.exit(guarded(command, "audit", owns_process=True))
    """
)


@pytest.mark.slow
def test_a_run_that_swallows_the_interrupt_is_ended_by_the_watchdog(tmp_path):
    """A step that does not let the interrupt through (a library catching it, a call that cannot
    be interrupted) does not hold the process: after the grace period the stage and its lock are
    removed, the line is said and the process ends with 143."""
    from fair_forge_beam.console import GRACE_SECONDS

    script = tmp_path / "wedged.py"
    script.write_text(WEDGED, encoding="utf-8")
    stage, out = tmp_path / "out.staging-x", tmp_path / "out"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(script), str(stage), str(out)], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    assert proc.stdout == "swallowed\n"
    assert time.monotonic() - start < GRACE_SECONDS + 20
    # out never existed: "nothing was written (out was not created)", not "untouched" (fresh13)
    assert proc.stderr.splitlines() == [f"fair-forge-beam: interrupted (SIGTERM): the audit stopped; nothing was "
                                        f"written ({out} was not created)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wedged.py"]


def test_a_command_that_returns_ends_with_its_code_after_the_exit_handlers(tmp_path):
    """After the command returned, the process ends with its exit code once the threads are joined
    and EVERY exit handler ran — those registered before the command too (ending the process
    with os._exit in an exit handler skipped them: a coverage tool's, test_light_install's import
    report) — with SIGINT / SIGTERM ignored once the command's own exit handlers ran (through the
    earlier ones and the interpreter's teardown, where a signal killed the process, issue 28 B4): a
    SIGINT sent there changes nothing."""
    script = tmp_path / "returns.py"
    script.write_text(textwrap.dedent(
        """
        import atexit, os, signal, sys, time
        from fair_forge_beam.console import guarded

        def early():  # runs after the command's exit handlers: a SIGINT here is ignored
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            print("registered before the command", flush=True)

        atexit.register(early)

        def command():
            atexit.register(lambda: print("exit handler ran", flush=True))
            return 3

        sys.exit(guarded(command, "audit", owns_process=True))
        """), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "exit handler ran\nregistered before the command\n", "")


#: the command's first heavy import made slow (3 s) and announced on stderr, so that the signal
#: lands inside the command's imports whatever the machine's speed: the first package module
#: imported after fair_forge_beam.console (which the signals' handler lives in)
_SLOW_IMPORTS = """
import builtins, sys, time
_real = builtins.__import__
def _slow(name, *args, **kwargs):
    if (name.startswith(("fair_forge_beam.", "pipelines.")) and name != "fair_forge_beam.console"
            and "fair_forge_beam.console" in sys.modules and not getattr(_slow, "done", False)):
        _slow.done = True
        print("importing", file=sys.stderr, flush=True)
        time.sleep(3)
    return _real(name, *args, **kwargs)
builtins.__import__ = _slow
"""
_ENTRY = {
    "console_script": "from pipelines.launcher import main; sys.exit(main())",
    "python_m": "import runpy; runpy.run_module('pipelines.audit', run_name='__main__', alter_sys=True)",
}


@pytest.mark.parametrize("how", ["console_script", "python_m"])
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_command_still_imports_is_one_line(tmp_path, how, name):
    """A fresh user's Ctrl-C in a command's first second (issue 28): the signal landed inside Beam's
    imports, before the command took the signals, and printed a ``KeyboardInterrupt`` traceback
    (SIGINT at 0.3-0.9 s) or ended the process with no line (SIGTERM). The console script and
    every ``python -m pipelines.<command>`` now take them first (``console.starting``)."""
    args = (["trend"] if how == "console_script" else []) + [str(tmp_path / "no-run-*")]
    argv = [sys.executable, "-c", _SLOW_IMPORTS + _ENTRY[how], *args]
    if how == "python_m":
        argv = [sys.executable, "-c", _SLOW_IMPORTS + "sys.argv[1:] = " + repr(args) + "; " + _ENTRY[how]]
    # a terminal's Ctrl-C: SIGINT at its default disposition (a background job of a script ignores it)
    # (cwd: a folder without the audit's default output folder, which the python -m line names)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    assert first.strip() == "importing", first
    proc.send_signal(getattr(signal, name))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == CODES[name], (proc.returncode, err[-2000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    how_said = "Ctrl-C" if name == "SIGINT" else "SIGTERM"
    # trend has no output folder of its own; the audit's default one is named (fix28fresh)
    state = "nothing was written" + (" (fair_forge_output was not created)" if how == "python_m" else "")
    assert _one_line(err) == [f"fair-forge-beam: interrupted ({how_said}): stopped while starting; {state}"], err[-2000:]


def _python_m_commands() -> list:
    """The ``pipelines`` modules whose parser names them ``python -m pipelines.<module>`` (the stage commands)."""
    import importlib
    import pkgutil

    import pipelines

    found = []
    for m in pkgutil.iter_modules(pipelines.__path__):
        build = getattr(importlib.import_module(f"pipelines.{m.name}"), "build_parser", None)
        if build is not None and build().prog.startswith("python -m "):
            found.append(m.name)
    return found


@pytest.mark.parametrize("module", _python_m_commands())
def test_a_python_m_command_names_itself_one_way_in_its_interrupt_line(tmp_path, module):
    """trial38 T13: the loop's usage errors said ``python -m pipelines.loop:`` and its interrupt lines ``fair-forge-beam
    loop:`` (no such command: the console script runs the audit, rollup, trend and compare); generate and run_assistant
    the same. Each names itself as its parser does, in every line."""
    import importlib

    assert {"generate", "run_assistant", "loop"} <= set(_python_m_commands())
    prog = importlib.import_module(f"pipelines.{module}").build_parser().prog
    out = tmp_path / "out"
    argv = [sys.executable, "-c", _SLOW_IMPORTS + f"sys.argv[1:] = ['--output', {str(out)!r}]; import runpy; "
            f"runpy.run_module('pipelines.{module}', run_name='__main__', alter_sys=True)"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "importing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    lines = _one_line(err)  # stopped while it imports, or once it runs (console.guarded): the same name
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: interrupted (SIGTERM): "), err[-2000:]
    assert lines[0].endswith(f"nothing was written ({out} was not created)"), lines


@pytest.mark.parametrize("existed", [True, False])
@pytest.mark.parametrize("given", ["--output", "--output=", "--config", "rollup"])
def test_an_interrupt_before_the_stage_says_the_existing_output_folder_is_untouched(tmp_path, given, existed):
    """fresh14: a Ctrl-C in the first second of a run whose --output folder existed said "nothing was
    written" and not that the folder was untouched. While the command still imports
    (``console.starting``) and once it runs but has no stage yet (``console.guarded``), the line
    says both, naming the folder from the command line (``--output DIR``, ``--output=DIR``, a
    ``--config`` file's ``output``, a subcommand's); a folder that did not exist "was not created"."""
    out = tmp_path / "night"
    if existed:
        out.mkdir()
        (out / "results.json").write_text("{}", encoding="utf-8")
    cfg = tmp_path / "audit.toml"
    cfg.write_text('output = "night"\n', encoding="utf-8")
    args = {"--output": ["--output", str(out)], "--output=": [f"--output={out}"], "--config": ["--config", str(cfg)],
            "rollup": ["rollup", "--from", str(tmp_path / "no-run-*"), "--output", str(out)]}[given]
    state = (f"nothing was written; the output folder {out} is untouched (as it was before the run)" if existed
             else f"nothing was written ({out} was not created)")
    command = "rollup" if given == "rollup" else "audit"
    # 1. while the command still imports
    argv = [sys.executable, "-c", _SLOW_IMPORTS + "sys.argv[1:] = " + repr(args) + "; " + _ENTRY["console_script"]]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "importing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert _one_line(err) == [f"fair-forge-beam: interrupted (SIGTERM): stopped while starting; {state}"], err[-2000:]
    # 2. the command runs (console.guarded), before it parsed its options or made its stage
    script = tmp_path / "early.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        from fair_forge_beam.console import guarded
        sys.argv[1:] = {args!r}

        def command():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)

        sys.exit(guarded(command, {command!r}, owns_process=True))
        """), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == [f"fair-forge-beam: interrupted (Ctrl-C): the {command} stopped; {state}"]
    assert sorted(p.name for p in out.iterdir()) == ["results.json"] if existed else not out.exists()


def test_the_default_output_folders_the_interrupt_line_names_are_the_options():
    """console.DEFAULT_OUTPUTS (console imports nothing of the package) agrees with the --output
    declarations of the commands it names."""
    from fair_forge_beam.console import DEFAULT_OUTPUTS
    from pipelines import audit

    assert DEFAULT_OUTPUTS["audit"] == audit.build_parser().get_default("output")
    from fair_forge_beam.options import OPTIONS

    output = OPTIONS["output"]
    for command in ("loop", "generate", "run"):
        assert DEFAULT_OUTPUTS[command] == output.per_command[command]["default"], command


@pytest.mark.parametrize("existed", [False, True])
@pytest.mark.parametrize("failure", ["interrupt", "disk"])
def test_the_lines_say_a_folder_that_never_existed_was_not_created(tmp_path, capsys, monkeypatch, existed, failure):
    """Fresh-user trial (fresh13): an interrupted or failed run said "the output folder X is
    untouched" of a folder that never existed. Such a folder "was not created" and nothing was
    written; a folder that existed is still "untouched"."""
    import errno

    from fair_forge_beam import console
    from fair_forge_beam.console import guarded
    from fair_forge_beam.reports.output_folder import staged_output

    monkeypatch.setattr(console, "_STATE", console._Interrupts())  # this process's earlier runs are not this one

    out = tmp_path / "out"
    if existed:
        out.mkdir()

    def command():
        with staged_output(str(out)):
            raise KeyboardInterrupt if failure == "interrupt" else OSError(errno.ENOSPC, "No space left on device")

    if failure == "interrupt":  # a call from Python: the line said, Ctrl-C raised on (trial44 B5: returned 130)
        with pytest.raises(KeyboardInterrupt):
            guarded(command, "audit")
    else:
        assert guarded(command, "audit") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "untouched" in err[0] if existed else (f"nothing was written ({out} was not created)" in err[0]
                                                  and "untouched" not in err[0] and "is as it was" not in err[0]), err
    assert out.exists() == existed


def test_a_failed_line_names_no_folder_of_an_earlier_call(tmp_path, capsys, monkeypatch):
    """CI on befeab0 (test_full_disk): calls from Python share the console's state, and a trend that
    failed on a full disk said "nothing was written (…/r2 was not created)" of the folder an earlier
    test's audit had staged in the same process. Each call's line names only the folders it staged."""
    import errno

    from fair_forge_beam import console
    from fair_forge_beam.console import guarded
    from fair_forge_beam.reports.output_folder import staged_output

    monkeypatch.setattr(console, "_STATE", console._Interrupts())
    first = tmp_path / "first"

    def staged():
        with staged_output(str(first)):
            raise OSError(errno.ENOSPC, "No space left on device")

    def unstaged():
        raise OSError(errno.ENOSPC, "No space left on device")

    assert guarded(staged, "audit") == 1
    assert f"nothing was written ({first} was not created)" in capsys.readouterr().err
    assert guarded(unstaged, "trend") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(first) not in err[0], err
    assert err[0].endswith("nothing was published (the output folder, if any, is as it was)"), err


def test_a_failed_line_names_no_folder_of_a_call_in_another_thread(tmp_path, capsys, monkeypatch):
    """trial44b G5: two audits in two threads of one process, A on a full disk: A's failed line named B's
    folder ("nothing was written (…/B_out was not created)"), which B did create. Each call's line names
    only what that call staged."""
    import errno
    import threading

    from fair_forge_beam import console
    from fair_forge_beam.console import guarded, note_stage

    monkeypatch.setattr(console, "_STATE", console._Interrupts())
    a_out, b_out = tmp_path / "A_out", tmp_path / "B_out"
    b_began, a_staged, b_staged, a_done = (threading.Event() for _ in range(4))

    def audit_b():
        b_began.set()
        assert a_staged.wait(10)
        note_stage(str(tmp_path / "B_stage"), str(b_out), existed=False)
        b_staged.set()
        assert a_done.wait(10)
        return 0

    def audit_a():
        note_stage(str(tmp_path / "A_stage"), str(a_out), existed=False)
        a_staged.set()
        assert b_staged.wait(10)  # B staged after A: the folder staged last in the process is B's
        raise OSError(errno.ENOSPC, "No space left on device")

    b = threading.Thread(target=lambda: guarded(audit_b, "audit"))
    b.start()
    assert b_began.wait(10)  # both calls under way: B's began first
    try:
        assert guarded(audit_a, "audit") == 1
    finally:
        a_done.set()
        b.join(10)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"nothing was written ({a_out} was not created)"), err
    assert str(b_out) not in err[0], err


def _tree(root: int) -> list:
    """``root`` and its running descendants (zombies are not), whatever their process group:
    Beam's workers get a group of their own."""
    return _alive([root, *procfs.descendants(root)])


def _alive(pids) -> list:
    return [p for p in pids if procfs.alive(p)]


def _no_process_left(pids) -> list:
    deadline = time.time() + 10
    while time.time() < deadline and _alive(pids):
        time.sleep(0.2)
    left = _alive(pids)
    for pid in left:  # never leave them to the next test
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.slow
@pytest.mark.parametrize("sig,to", [("SIGINT", "group"), ("SIGTERM", "command")], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_of_a_multi_process_run_is_one_line_and_ends_its_workers(tmp_path, sig, to):
    """seal28 (issue 28): a Ctrl-C (SIGINT to the terminal's whole process group) of a
    ``--direct_running_mode=multi_processing`` run printed each worker's KeyboardInterrupt
    traceback, and the 4 worker processes (2 x sh + python) outlived the command (exit 130), still
    calling the judge; SIGTERM to the command alone left them too. Now: the same one line and exit
    code as the in-memory run, nothing staged, no process of the run left."""
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    out = tmp_path / "out"
    with ScriptedOpenAIServer(lambda req: Reply(content="{}", drip=30, drip_headers=True)) as srv:
        proc = context_audit(tmp_path, srv, out, *MULTI_PROCESS,
                             start_new_session=True)  # its own process group, as a terminal's foreground job
        run = []
        try:
            deadline = time.time() + 180
            while time.time() < deadline and not srv.count():
                time.sleep(0.2)
            assert srv.count(), "the judge was never called"
            time.sleep(1)
            run = _tree(proc.pid)
            assert len(run) > 1, "no worker process"
            (os.killpg if to == "group" else os.kill)(proc.pid, getattr(signal, sig))
            _, err = proc.communicate(timeout=60)  # a worker holding the pipes would time out here
        finally:
            left = _no_process_left(_tree(proc.pid) + run)
            if proc.poll() is None:
                proc.kill()
    assert left == [], f"{len(left)} process(es) of the run outlived it"
    assert proc.returncode == CODES[sig], err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    how = "Ctrl-C" if sig == "SIGINT" else "SIGTERM"
    assert _one_line(err) == [f"fair-forge-beam: interrupted ({how}): the audit stopped; nothing was written ({out} "
                              "was not created)"], err[-3000:]
    assert _leftovers(tmp_path, out) == [] and not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupt_of_the_loop_during_its_audit_names_the_folder_it_was_writing(tmp_path, sig):
    """seal28 (issue 28): a Ctrl-C of the loop during its audit (run_parsed) said 'the output folder
    OUT/run is complete (published before the interruption)' — the last stage published, not the
    audit it stopped. The line names the folder being written, untouched, then those complete."""
    import hashlib

    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    scored = []

    def judge(req):
        if '"queries"' in json.dumps(req.json_schema or {}):
            h = hashlib.blake2b(req.prompt.encode("utf-8"), digest_size=4).hexdigest()
            return {"queries": [{"query": f"What does the policy say ({h})?", "difficulty": "easy"}],
                    "chunk_summary": "policy"}
        scored.append(1)
        return Reply(content="{}", drip=30, drip_headers=True)  # the audit's judge hangs

    out = tmp_path / "out"
    with ScriptedOpenAIServer(judge) as j, ScriptedOpenAIServer(lambda req: "an answer") as bot:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.loop", "--corpus", "airline", "--strategy", "random", "--num-samples", "2",
             "--chunks-per-sample", "1", "--seed", "3", "--num-queries", "1", "--assistant-id", "bot-v1",
             "--judge-base-url", j.base_url, "--judge-model", "judge", "--judge-cache", str(tmp_path / "j.sqlite3"),
             "--generator-cache", str(tmp_path / "g.sqlite3"), "--assistant-url", bot.base_url, "--assistant-model",
             "bot", "--metrics", "context", "--output", str(out), f"--runner={FNAPI}"],
            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        run = []
        try:
            deadline = time.time() + 240
            while time.time() < deadline and not scored and proc.poll() is None:
                time.sleep(0.2)
            assert scored, "the audit's judge was never called"
            time.sleep(1)
            run = _tree(proc.pid)
            os.killpg(proc.pid, getattr(signal, sig))
            _, err = proc.communicate(timeout=60)
        finally:
            left = _no_process_left(_tree(proc.pid) + run)
            if proc.poll() is None:
                proc.kill()
    assert left == [] and proc.returncode == CODES[sig], err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    how = "Ctrl-C" if sig == "SIGINT" else "SIGTERM"
    assert _one_line(err) == [f"python -m pipelines.loop: interrupted ({how}): the loop stopped; nothing was written "
                              f"({out / 'audit'} was not created)"], err[-3000:]
    # the loop's stages publish together or not at all (trial48c F; generated/ and run/ were left, "complete before
    # it"): both taken back, and the folder the loop made goes (no stage, no lock, no loop_summary.json)
    assert not out.exists(), sorted(p.name for p in out.iterdir())


SLOW_UNWIND = textwrap.dedent(
    """
    import os, signal, sys, time
    from fair_forge_beam import console

    console.GRACE_SECONDS = 0.3

    class Slow:  # a plan of 1e9 calls: freeing it took seconds after the interrupt
        def __del__(self):
            time.sleep(2)

    def command():
        plan = [Slow()]
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        return len(plan)

    sys.exit(console.guarded(command, "generate", "gen", owns_process=True))
    """
)


def test_the_interrupt_line_is_said_once_while_the_command_unwinds_slowly(tmp_path):
    """Issue 28 (trial 28f B13): a SIGTERM while generate built a 5 GB plan printed 'the generate
    stopped' and, as the watchdog fired while the plan was being freed, 'the generate had finished'
    too (it never had). The line is said once, and it is the true one."""
    script = tmp_path / "slow_unwind.py"
    script.write_text(SLOW_UNWIND, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 143, proc.stderr
    # (its default output folder is named, fix28fresh)
    assert proc.stderr.splitlines() == ["gen: interrupted (SIGTERM): the generate stopped; nothing was written "
                                        "(fair_forge_generated was not created)"], proc.stderr


def _package_module_commands() -> list:
    """The package's own modules the docs run as commands (``python -m fair_forge_beam.<module>``), but the test
    tools of ``fair_forge_beam.testing`` (a local cluster's or a stub server's start is theirs to undo)."""
    import re

    found = set()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        found.update(re.findall(r"python -m (fair_forge_beam(?:\.[a-z_]+)+)", doc.read_text(encoding="utf-8")))
    found.add("fair_forge_beam.rollup")  # the roll-up's module runs its command too (session 30), undocumented
    return sorted(m for m in found if not m.startswith("fair_forge_beam.testing."))


@pytest.mark.parametrize("module", _package_module_commands())
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_package_module_command_takes_an_interrupt_while_it_imports_in_one_line(tmp_path, module, name):
    """trial46 B2: ``python -m fair_forge_beam.rollup`` imported Beam before it handed over to the command, and
    ``python -m fair_forge_beam.reports.compare`` never took the signals early: a Ctrl-C in their first seconds printed
    a ``KeyboardInterrupt`` traceback (7-55 lines), SIGTERM ended them with no line."""
    assert {"fair_forge_beam.rollup", "fair_forge_beam.reports.compare"} <= set(_package_module_commands())
    argv = [sys.executable, "-c", _SLOW_IMPORTS + f"sys.argv[1:] = [{str(tmp_path / 'no-run-*')!r}]; import runpy; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "importing"
    proc.send_signal(getattr(signal, name))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == CODES[name], (proc.returncode, err[-2000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]  # every line: their prog is python -m …, too
    how_said = "Ctrl-C" if name == "SIGINT" else "SIGTERM"
    assert len(lines) == 1 and f": interrupted ({how_said}): stopped while starting; nothing was written" in lines[0], lines


#: the test tools' commands (``python -m fair_forge_beam.testing.<module>``: their start is theirs to undo), each with
#: an argument list that starts it
_TEST_TOOLS = {"fair_forge_beam.testing.openai_server": ["--port", "0"],
               "fair_forge_beam.testing.flink_cluster": ["start", "--dir", "cluster"]}
#: the tool's own first ``import argparse`` (its first import after it takes the signals) says so and takes 3 s
_SLOW_ARGPARSE = """
import builtins, sys, time
_real = builtins.__import__
def _slow(name, *args, **kwargs):
    if (name == "argparse" and sys._getframe(1).f_globals.get("__name__") == "__main__"
            and not getattr(_slow, "done", False)):
        _slow.done = True
        print("importing", file=sys.stderr, flush=True)
        time.sleep(3)
    return _real(name, *args, **kwargs)
builtins.__import__ = _slow
"""


@pytest.mark.parametrize("module", sorted(_TEST_TOOLS))
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_test_tool_takes_an_interrupt_while_it_imports_in_one_line(tmp_path, module, name):
    """fix47b: ``python -m fair_forge_beam.testing.flink_cluster`` and ``.openai_server`` printed a
    ``KeyboardInterrupt`` traceback on a Ctrl-C in their first ~0.4 s (SIGTERM: no line at all, death by the signal).
    Now one line, exit code 130 / 143, and no process of theirs left."""
    argv = [sys.executable, "-c", _SLOW_ARGPARSE + f"sys.argv[1:] = {_TEST_TOOLS[module]!r}; import runpy; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline().strip() == "importing"
        run = _tree(proc.pid)
        proc.send_signal(getattr(signal, name))
        out, err = proc.communicate(timeout=60)
    finally:
        left = _no_process_left(_tree(proc.pid) + run if proc.poll() is None else run)
        if proc.poll() is None:
            proc.kill()
    assert left == []
    assert proc.returncode == CODES[name], (proc.returncode, err[-2000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    how_said = "Ctrl-C" if name == "SIGINT" else "SIGTERM"
    assert err.splitlines() == [f"python -m {module}: interrupted ({how_said}): stopped while starting; nothing was "
                                "written"], err[-2000:]
    assert out == "" and list(tmp_path.iterdir()) == []


#: the scripted server's socket, once bound, takes 3 s to listen (says so first)
_SLOW_BIND = """
import socketserver, sys, time
_bind = socketserver.TCPServer.server_bind
def _slow_bind(self):
    _bind(self)
    print("bound", self.server_address[1], file=sys.stderr, flush=True)
    time.sleep(3)
socketserver.TCPServer.server_bind = _slow_bind
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_the_scripted_server_interrupted_while_it_starts_closes_its_port_in_one_line(tmp_path, name):
    """fix47b: the server's start (its socket bound, not yet served) cut by Ctrl-C / SIGTERM undoes itself: one line,
    exit code 130 / 143, the port free again; a served server still stops on Ctrl-C as before (exit code 0)."""
    import socket

    module = "fair_forge_beam.testing.openai_server"
    argv = [sys.executable, "-c", _SLOW_BIND + "sys.argv[1:] = ['--port', '0']; import runpy; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = proc.stderr.readline().split()
        assert said[:1] == ["bound"], said
        port = int(said[1])
        proc.send_signal(getattr(signal, name))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == CODES[name], (proc.returncode, err[-2000:])
    how_said = "Ctrl-C" if name == "SIGINT" else "SIGTERM"
    assert err.splitlines() == [f"python -m {module}: interrupted ({how_said}): stopped while starting; nothing is "
                                "served"], err[-2000:]
    assert out == ""
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free again
    # served, Ctrl-C stops it as before
    proc = subprocess.Popen([sys.executable, "-m", module, "--port", "0"], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("serving http://127.0.0.1:")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err) == (0, "")
