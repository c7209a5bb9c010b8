"""The package's one reader of Linux's ``/proc/PID/stat`` (issue 29): a process's state letter,
parent, process group, CPU seconds and flags (:func:`stat`; :func:`processes`: all of them), the processes below one
(:func:`descendants`), whether one is alive (:func:`alive`: a zombie is not), and whether one has ended or
begun to (:func:`ending`: its exit under way, :data:`PF_EXITING`).

The second field of the file is the command's name in parentheses, and a process may name itself
anything of up to 15 bytes (``prctl(PR_SET_NAME)``, ``/proc/self/comm``), ``)``, ``(``, spaces and
bytes that are not UTF-8 included: the fields are read after the LAST ``)``, as bytes.

The standard library only, and nothing of the package: :mod:`fair_forge_beam.console` uses it
while it ends an interrupted command's processes, and :mod:`fair_forge_beam.testing.reaper`, run
as a script (``python -I -S``, the package not on ``sys.path``), loads this file by its path.
"""
from __future__ import annotations

import os
from typing import Iterator, NamedTuple, Optional

__all__ = ["Stat", "parse", "stat", "processes", "descendants", "alive", "ending", "ENDED", "PF_EXITING", "TICKS"]

#: the state letters of a process that has ended: ``Z`` a zombie (not yet reaped by its parent;
#: where the system's first process does not reap orphans, as on this machine, for good), ``X`` dead
ENDED = "ZX"

#: the flag (``include/linux/sched.h``) the kernel sets on a task as its exit begins (``do_exit`` → ``exit_signals``),
#: before it closes the task's files (``exit_files``: a killed process's sockets, whose peers then see their
#: streams break) and long before the task is a zombie (``exit_notify``); a zombie keeps it. Of a process of
#: several threads, its first thread's (the one ``/proc/PID/stat`` shows): their shared files close only when
#: the last thread exits, after the first has set it or become a zombie (flake45b)
PF_EXITING = 0x4

try:
    #: clock ticks a second, the unit of the CPU times in ``/proc/PID/stat``
    TICKS = float(os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):
    TICKS = 100.0


class Stat(NamedTuple):
    """What the package reads of ``/proc/PID/stat``."""

    state: str  #: ``R`` running, ``S`` sleeping, ``D`` waiting for a disk, ``T`` stopped, ``t`` traced, ``Z``, ``X``, ``I``
    ppid: int  #: the parent's process id
    pgid: int  #: the process group's id
    cpu_seconds: float  #: user + system CPU time of the process itself (``utime + stime``)
    children_cpu_seconds: float  #: ... of the children it waited for (``cutime + cstime``)
    flags: int = 0  #: the kernel's flags of the task (``PF_*``, field 9), e.g. :data:`PF_EXITING`

    @property
    def ended(self) -> bool:
        """A zombie or dead (:data:`ENDED`): it runs no more and takes no signal."""
        return self.state in ENDED

    @property
    def exiting(self) -> bool:
        """Its exit has begun (:data:`PF_EXITING`), whatever its state letter still says (``R``, ``S``,
        ``D``): its files, sockets included, are being or have been closed; a zombie is exiting too."""
        return bool(self.flags & PF_EXITING)

    @property
    def ending(self) -> bool:
        """It has ended or its exit has begun (:attr:`ended` or :attr:`exiting`): what it did, it does no more."""
        return self.ended or self.exiting


def parse(data: bytes) -> Optional[Stat]:
    """The :class:`Stat` of one ``/proc/PID/stat`` text; ``None`` when it is not one."""
    end = data.rfind(b")")
    fields = data[end + 1:].split() if end >= 0 else []
    try:
        return Stat(fields[0].decode("ascii"), int(fields[1]), int(fields[2]),
                    (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS,
                    int(fields[6]))
    except (IndexError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def stat(pid) -> Optional[Stat]:
    """The :class:`Stat` of process ``pid``; ``None`` when it is gone (or ``/proc`` cannot tell:
    not Linux, hidden)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return parse(f.read())
    except OSError:
        return None


def processes() -> Iterator[tuple[int, Stat]]:
    """``(pid, Stat)`` of every process in ``/proc``, read one at a time as iterated (one that
    ends meanwhile is left out).

    Raises:
        OSError: ``/proc`` cannot be listed (not Linux), at the call."""
    names = os.listdir("/proc")
    return ((int(name), st) for name in names if name.isdigit() and (st := stat(name)) is not None)


def descendants(pid: Optional[int] = None) -> list[int]:
    """The process ids of the children, grandchildren … of ``pid`` (default: this process), zombies
    included, each before its own children; ``[]`` where ``/proc`` cannot be listed."""
    try:
        parents: dict = {}
        for child, st in processes():
            parents.setdefault(st.ppid, []).append(child)
    except OSError:
        return []
    out, todo = [], [os.getpid() if pid is None else pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended: ``False`` when it is gone or a zombie.
    Where ``/proc`` cannot tell (not Linux, not mounted, hidden), whether it exists (``os.kill(pid,
    0)``): another user's process counts as alive."""
    st = stat(pid)
    if st is not None:
        return not st.ended
    return _exists(pid)


def ending(pid: int) -> bool:
    """Whether process ``pid`` has ended or begun to (:attr:`Stat.ending`): ``True`` when it is gone, a
    zombie, or exiting (:data:`PF_EXITING`: set before the kernel closes its sockets, so that whoever sees
    one of them close sees it ending). Where ``/proc`` cannot tell, whether it is gone (as :func:`alive`)."""
    st = stat(pid)
    if st is not None:
        return st.ending
    return not _exists(pid)


def _exists(pid: int) -> bool:
    """Whether process ``pid`` exists, asked by ``os.kill(pid, 0)``: another user's process does."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's (PermissionError); an id past C's int
        return True
    return True
