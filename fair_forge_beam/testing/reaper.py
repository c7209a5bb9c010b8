"""Process groups that end with the process that started them, however it ends.

The local clusters of :mod:`fair_forge_beam.testing` (Flink's JVMs and job server, Kafka's broker
and expansion service, the worker pool) run in sessions of their own, so that a terminal's Ctrl-C
reaches the test run and not them, and their ``stop`` can end each group whole. A test run that is
killed (SIGKILL, the OOM killer, a CI timeout) runs no teardown, and its groups used to go on
holding gigabytes and ports until someone found them.

A :class:`Reaper` is a small process (the standard library only, ``sys.executable -I -S``) in a
session of its own, started by the owner — the process that starts the groups — and told their
ids through a pipe. It checks every :data:`TICK` seconds whether its parent is still the owner;
once the owner has ended, in any way, it ends every group it was given that still has a process:
SIGTERM, then SIGKILL after :data:`GRACE_SECONDS` (:func:`end_groups`). Watching the parent, not the
pipe, means that a child the owner forked (which holds the pipe too) never keeps the groups alive,
and a forked child never speaks for its parent. A group is withdrawn when its owner ended it, and
forgotten by the reaper as soon as it has no process left, so that its id, given later to another
process, is never signalled. One reaper serves every guarded object of a process (one at a time:
it exits when the last group is withdrawn, and when its owner has ended).

Run as a script, this file is the reaper: it imports nothing of the package, and reads the one
module it shares with it, :mod:`fair_forge_beam.procfs` (the standard library only), by its path."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Iterable, Optional, Sequence

if __package__:
    from fair_forge_beam import procfs
else:  # the reaper: ``python -I -S reaper.py`` puts neither the package nor this folder on sys.path
    import importlib.util

    _SPEC = importlib.util.spec_from_file_location(
        "fair_forge_beam.procfs", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "procfs.py"))
    procfs = importlib.util.module_from_spec(_SPEC)
    _SPEC.loader.exec_module(procfs)

__all__ = ["Reaper", "OwnedGroups", "end_groups", "live_groups", "GRACE_SECONDS", "TICK"]

#: seconds between a SIGTERM to a group and its SIGKILL
GRACE_SECONDS = 10.0
#: seconds between the reaper's looks at its owner and its groups
TICK = 0.5


def group_exists(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a process, a zombie included (while it has one, its
    id is not given to another process)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_groups(pgids: Sequence[int]) -> list[int]:
    """Those of ``pgids`` that have a process that has not ended, in their order (one read of
    ``/proc``). Zombies do not count: an orphan's zombie may stay for good where the system's first
    process does not reap them (this machine's does not), and it takes no signal. A group is kept
    when ``/proc`` cannot tell."""
    candidates = [g for g in pgids if group_exists(g)]
    if not candidates:
        return []
    try:
        stats = procfs.processes()
    except OSError:
        return candidates
    wanted, running = set(candidates), set()
    for _, st in stats:
        if st.pgid in wanted and not st.ended:
            running.add(st.pgid)
            if running == wanted:
                break
    return [g for g in candidates if g in running]


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_groups(pgids: Sequence[int], grace: float, children: Iterable = ()) -> None:
    """End process groups ``pgids``: SIGTERM to each that has a process (in the order given), then,
    once every group is empty or ``grace`` seconds have passed, SIGKILL to each that still has one.
    A group is ended whole, whether its leader still runs or not, and a group already empty is never
    signalled. ``children``: this process's ``subprocess.Popen`` objects among them, polled meanwhile
    (a leader ended but not yet waited for would count as a process of its group)."""
    children = list(children)
    live = live_groups(pgids)
    for g in live:
        _signal(g, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        for p in children:
            p.poll()
        live = live_groups(live)
        if live:
            time.sleep(0.1)
    for g in live:
        _signal(g, signal.SIGKILL)


class Reaper:
    """The owner's side of one reaper process: :meth:`watch` a group after starting it in a session of
    its own, :meth:`forget` it once the owner ended it, :meth:`close` when nothing is left to guard.
    Only the process that made it speaks to it (a forked child's calls do nothing), and every call is
    safe after the reaper has ended (the owner's own ``stop`` still works).

    Raises:
        OSError: the reaper process could not be started (``__init__``)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        read_end, self._write_end = os.pipe()  # not inherited by other children (PEP 446)
        try:
            self.proc: Optional[subprocess.Popen] = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(self.owner)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        finally:
            os.close(read_end)

    def _say(self, line: str) -> None:
        if self._write_end < 0 or os.getpid() != self.owner:
            return
        try:
            os.write(self._write_end, f"{line}\n".encode())
        except OSError:  # the reaper has ended: nothing guards the groups any more, the owner's stop still works
            pass

    def watch(self, pgid: int) -> None:
        """End group ``pgid`` (a process started with ``start_new_session=True``) with the owner."""
        self._say(str(int(pgid)))

    def forget(self, pgid: int) -> None:
        """The owner ended group ``pgid`` itself: never signal it."""
        self._say(str(-int(pgid)))

    def close(self) -> None:
        """Nothing left to guard: the reaper exits without signalling anything (idempotent)."""
        if os.getpid() != self.owner:
            return
        if self._write_end >= 0:
            self._say("done")
            os.close(self._write_end)
            self._write_end = -1
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def dropped_in_fork_child(self) -> None:
        """In a child forked from the owner: let go of the owner's end of the pipe, say nothing."""
        if self._write_end >= 0:
            try:
                os.close(self._write_end)
            except OSError:
                pass
            self._write_end = -1
        self.proc = None


_LOCK = threading.Lock()
_SHARED: Optional[Reaper] = None  # the process's one reaper, while it guards a group
_GUARDED: set = set()


def _after_fork_in_child() -> None:
    global _SHARED
    if _SHARED is not None:
        _SHARED.dropped_in_fork_child()
    _SHARED = None
    _GUARDED.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class OwnedGroups:
    """For a class that starts process groups (``start_new_session=True``) and ends them in its
    ``stop``: with ``ends_with_owner`` true, each group given to :meth:`_guard` is ended with the
    process that started it, should that process end before its ``stop`` ran (a killed test run);
    :meth:`_release` (at the end of ``stop``) withdraws them. Every object of a process shares one
    reaper, which exits when the last guarded group is withdrawn."""

    ends_with_owner: bool = False

    def _guard(self, pgid: int) -> None:
        global _SHARED
        if not self.ends_with_owner:
            return
        with _LOCK:
            if _SHARED is None:
                _SHARED = Reaper()
            _GUARDED.add(int(pgid))
            _SHARED.watch(pgid)

    def _release(self, pgids) -> None:
        global _SHARED
        with _LOCK:
            for pgid in pgids:
                if int(pgid) in _GUARDED:
                    _GUARDED.discard(int(pgid))
                    if _SHARED is not None:
                        _SHARED.forget(pgid)
            if _SHARED is not None and not _GUARDED:
                _SHARED.close()
                _SHARED = None


def _reap(owner: int) -> int:
    """The reaper's loop: group ids (``N``), withdrawals (``-N``) and ``done`` on stdin; every
    :data:`TICK`, groups without a process are forgotten, and once the parent is no longer ``owner``
    (it ended) the groups still given are ended (:func:`end_groups`)."""
    groups: list[int] = []
    pending = b""
    stdin = sys.stdin.fileno()
    reading = True

    def read(timeout: float) -> bool:
        """Reads what the owner wrote (waiting at most ``timeout``); ``True`` on "done"."""
        nonlocal pending, reading
        if not reading or not select.select([stdin], [], [], timeout)[0]:
            return False
        chunk = os.read(stdin, 4096)
        if not chunk:  # every holder of the pipe closed it: the owner has ended, or is ending
            reading = False
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for word in (ln.strip() for ln in lines):
            if word == b"done":
                return True
            try:
                pgid = int(word)
            except ValueError:
                continue
            if pgid > 0 and pgid not in groups:
                groups.append(pgid)
            elif pgid < 0 and -pgid in groups:
                groups.remove(-pgid)
        return False

    while os.getppid() == owner:
        if read(TICK):
            return 0
        if not reading:
            time.sleep(TICK)
        groups[:] = [g for g in groups if group_exists(g)]  # an empty group's id may be given to another process
    while reading:  # what the owner wrote before it ended
        if read(0.0):
            return 0
        if not select.select([stdin], [], [], 0.0)[0]:
            break
    end_groups(groups, GRACE_SECONDS)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the owner's to handle
    sys.exit(_reap(int(sys.argv[1])))
