"""The package's one reader of ``/proc/PID/stat`` (issue 29: fair_forge_beam/procfs.py), which
console, process_workers, worker_watch and testing/reaper used to parse each its own way.

A process names itself as it likes (up to 15 bytes, ``/proc/self/comm``): ``)``, ``(``, spaces and
bytes that are not UTF-8 (a name cut in the middle of a character) stand in the second field, so a
parser that reads after the first ``)``, splits the line on spaces, or decodes it as UTF-8 (the
old ``process_workers.pid_alive``: ``UnicodeDecodeError``) reads another process than there is."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fair_forge_beam import console, procfs, process_workers
from fair_forge_beam.testing import reaper

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux /proc")

#: a name whose first ')' is followed by what reads as a zombie of parent 1 in group 1, with a ') ('
#: inside and a byte that is not UTF-8 (the first of a 2-byte character, cut): 12 bytes
NAME = b"\xc3) Z 1 1) (q"


def _named(name: bytes, *more: str, last: str = "import time; time.sleep(60)", **kw) -> subprocess.Popen:
    """A child that names itself ``name``, says so on stdout and runs ``last`` (``more``: code run first)."""
    code = "; ".join([*more, f"open('/proc/self/comm', 'wb').write({name!r})", "print('named', flush=True)", last])
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, **kw)
    assert proc.stdout.readline().strip() == b"named"
    return proc


@pytest.fixture
def named():
    procs = []

    def start(*a, **kw):
        procs.append(_named(*a, **kw))
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


def test_parse_reads_after_the_last_parenthesis():
    line = b"4242 (" + NAME + b") S 77 88 88 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 123 4096 10\n"
    st = procfs.parse(line)
    assert st == procfs.Stat("S", 77, 88, 300 / procfs.TICKS, 10 / procfs.TICKS, 4194560) and not st.ended
    assert procfs.parse(line.replace(b") S 77", b") Z 77")).ended
    assert not st.exiting and not st.ending
    exiting = procfs.parse(line.replace(b" 4194560 ", b" 4194564 "))  # PF_EXITING: its exit has begun, still S
    assert exiting.exiting and exiting.ending and not exiting.ended and exiting.state == "S"
    for broken in (b"", b"4242 (sh", b"4242 (sh) S 77", line.replace(b" 88 88", b" x 88")):
        assert procfs.parse(broken) is None, broken


def test_a_process_named_with_parentheses_spaces_and_no_utf8(named):
    proc = named(NAME)
    assert Path(f"/proc/{proc.pid}/comm").read_bytes() == NAME + b"\n"  # the kernel kept the name as given
    st = procfs.stat(proc.pid)
    assert st.state in "SR" and (st.ppid, st.pgid) == (os.getpid(), os.getpgid(proc.pid)), st
    assert 0 <= st.cpu_seconds < 60
    assert procfs.alive(proc.pid) and console._running(proc.pid)
    assert proc.pid in procfs.descendants()


def test_every_user_reads_a_so_named_process_as_alive(named, tmp_path):
    """The old process_workers.pid_alive decoded the file as UTF-8: ``stderr_files`` raised
    ``UnicodeDecodeError`` for a worker whose name was cut in the middle of a character."""
    proc = named(NAME, start_new_session=True)
    assert reaper.live_groups([proc.pid]) == [proc.pid]
    errors = tmp_path / process_workers.STDERR_DIR
    errors.mkdir()
    name = f"python-{int(time.time())}-{proc.pid}.stderr"
    (errors / name).write_text("a line\n")
    files, folder = process_workers.stderr_files(tmp_path, time.time() - 5)
    assert [f.name for f in files] == [name] and folder == errors


def test_a_zombie_has_ended(named):
    proc = named(b"z) R 1 1) (", start_new_session=True)
    proc.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (st := procfs.stat(proc.pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert st.state == "Z" and st.ended and st.ppid == os.getpid()  # not reaped: proc.wait() is not called yet
    assert not procfs.alive(proc.pid)
    assert reaper.live_groups([proc.pid]) == []  # its group still exists (os.killpg(pgid, 0) succeeds)
    assert proc.pid in procfs.descendants()  # a zombie is still a child (console ends and reaps it)
    assert not console._running(proc.pid)  # reaped here
    assert procfs.stat(proc.pid) is None and proc.pid not in procfs.descendants()


def test_a_running_process_is_not_exiting_and_its_zombie_is(named):
    """flake45b: ``PF_EXITING`` (field 9's 0x4), set by the kernel as a process's exit begins, before it closes
    its files (a killed SDK worker's sockets); read here on real processes: clear while a child runs, set on
    its zombie (the kernel leaves it), and :func:`procfs.ending` says so by the pid as it does of a gone one."""
    proc = named(b"running", start_new_session=True)
    st = procfs.stat(proc.pid)
    assert st.state in "SR" and st.flags and not st.exiting and not st.ending, st  # a user process has flags
    assert not procfs.ending(proc.pid) and procfs.alive(proc.pid)
    proc.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (st := procfs.stat(proc.pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert st.state == "Z" and st.flags & procfs.PF_EXITING and st.exiting and st.ending, st
    assert procfs.ending(proc.pid) and not procfs.alive(proc.pid)
    proc.wait()
    assert procfs.stat(proc.pid) is None and procfs.ending(proc.pid)


def test_a_vanished_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert procfs.stat(proc.pid) is None
    assert not procfs.alive(proc.pid) and not console._running(proc.pid)
    assert reaper.live_groups([proc.pid]) == []


def test_descendants_come_after_their_parent(named):
    proc = named(b"child) S 1 (", "import subprocess, sys",
                 "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])", last="g.wait()")
    below = procfs.descendants()
    assert proc.pid in below
    mine = procfs.descendants(proc.pid)
    assert len(mine) == 1 and below.index(mine[0]) > below.index(proc.pid)
    os.kill(mine[0], signal.SIGKILL)  # the child reaps it and ends (an orphan's zombie would stay: PID 1 reaps none)
    assert proc.wait(timeout=30) == 0


def test_the_reaper_script_loads_it_by_path_without_the_package(tmp_path):
    """testing/reaper.py runs as ``python -I -S reaper.py OWNER``: neither the package nor its own
    folder is on sys.path; it reads procfs.py beside the package's testing folder."""
    # owner 1 is not its parent: it ends at once, with no group to end
    proc = subprocess.run([sys.executable, "-I", "-S", reaper.__file__, "1"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    code = ("import runpy, sys; g = runpy.run_path(sys.argv[1]); p = g['procfs']; "
            "print(p.__file__, 'fair_forge_beam' in sys.modules, p.alive(1))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, reaper.__file__], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, check=True).stdout.split()
    assert out == [procfs.__file__, "False", "True"]
