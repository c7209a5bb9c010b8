"""Process groups that end with the process that started them, however it ends.

The local clusters of :mod:`fair_forge_beam.testing` (Flink's JVMs and job server, Kafka's broker
and expansion service, the worker pool) run in sessions of their own, so that a terminal's Ctrl-C
reaches the test run and not them, and their ``stop`` can end each group whole. A test run that is
killed (SIGKILL, the OOM killer, a CI timeout) runs no teardown, and its groups used to go on
holding gigabytes and ports until someone found them.

A :class:`Reaper` is a small process (the standard library only, ``sys.executable -I -S``) in a
session of its own, reading group ids from a pipe whose write end only its owner holds. When the
owner ends, in any way, the kernel closes that end; the reaper reads end-of-file and ends every
group it was given and not told about again: SIGTERM, then SIGKILL after
:data:`GRACE_SECONDS`. A group its owner stopped itself is withdrawn first (``forget``), so that a
group id the system later gives to another process is never signalled. The reaper exits by itself
once its owner said :meth:`Reaper.close` (nothing left to guard) or after reaping.

Run as a script, this file is the reaper (it imports nothing of the package)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Optional

__all__ = ["Reaper", "OwnedGroups", "GRACE_SECONDS"]

#: seconds between the reaper's SIGTERM to a group and its SIGKILL
GRACE_SECONDS = 10.0


class Reaper:
    """The owner's side: ``watch(pgid)`` after starting a group in a session of its own,
    ``forget(pgid)`` once the owner ended it itself, ``close()`` when nothing is left to guard.
    Every call is safe after the reaper ended (the owner's own ``stop`` still works).

    Raises:
        OSError: the reaper process could not be started (``__init__``)."""

    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()  # neither end is inherited by other children (PEP 446)
        try:
            self.proc: Optional[subprocess.Popen] = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        finally:
            os.close(read_end)

    def _say(self, line: str) -> None:
        if self._write_end < 0:
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


class OwnedGroups:
    """For a class that starts process groups (``start_new_session=True``) and ends them in its
    ``stop``: with ``ends_with_owner`` true, each group given to :meth:`_guard` is ended with the
    process that started it, should that process end before its ``stop`` ran (a killed test run);
    :meth:`_release` (at the end of ``stop``) withdraws them."""

    ends_with_owner: bool = False
    _reaper: Optional[Reaper] = None

    def _guard(self, pgid: int) -> None:
        if not self.ends_with_owner:
            return
        if self._reaper is None:
            self._reaper = Reaper()
        self._reaper.watch(pgid)

    def _release(self, pgids) -> None:
        if self._reaper is None:
            return
        for pgid in pgids:
            self._reaper.forget(pgid)
        self._reaper.close()
        self._reaper = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap() -> int:
    """The reaper's loop: group ids (``N``), withdrawals (``-N``) and ``done`` on stdin; end of
    file without ``done``: the owner is gone, end the groups still given."""
    groups: list[int] = []
    for raw in sys.stdin.buffer:
        word = raw.strip()
        if word == b"done":
            return 0
        try:
            pgid = int(word)
        except ValueError:
            continue
        if pgid > 0 and pgid not in groups:
            groups.append(pgid)
        elif pgid < 0 and -pgid in groups:
            groups.remove(-pgid)
    for pgid in groups:
        _signal(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        time.sleep(0.2)
    for pgid in groups:
        _signal(pgid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the owner's to handle
    sys.exit(_reap())
