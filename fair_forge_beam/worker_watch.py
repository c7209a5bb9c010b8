"""A multi-process run whose SDK worker dies ends at once, naming the death (trial38b B11).

Beam's ``--direct_running_mode=multi_processing`` starts each SDK worker as ``sh -c "python -m
apache_beam.runners.worker.sdk_worker_main"`` from a thread of its own
(``local_job_service.SubprocessSdkWorker``), and only raises, in that thread, "Worker subprocess
exited with return code 137" when one dies (the kernel's OOM killer, a ``kill -9``): the job itself
never learns of it. A bundle handed to the dead worker's connection after its death waits for its
output for ever (the main job with a worker SIGKILLed 3-9 s into scoring: 2 of 6 runs still waiting
60-90 s later; trial38b: 880 s until Ctrl-C); when the worker's data stream closes in the middle of a
bundle, the job fails with Beam's bare 268-line "RuntimeError: Channel closed prematurely." (4 of 6).

:func:`watching` watches the workers from outside, through the ``Popen`` the package already gives
Beam (:func:`fair_forge_beam.beam_pipeline._workers_leave_ctrl_c_to_the_command`): when one ends
with a non-zero code or by a signal while the job runs, the other workers are ended (they cannot
finish the job, and would go on calling a judge), and the main thread, which waits for the job, is
woken — a ``SIGCHLD`` sent to it, whose handler, installed for the run, raises :class:`WorkerDied`
there — so that the run fails within a second as any failed job does (6 of 6: 0.2-0.5 s): the stage
of its output removed, the output folder as it was, one line on the console
(:class:`fair_forge_beam.beam_pipeline.WorkerProcessError`). Beam's own thread tracebacks and log
records of the same death are not printed.

Limits: a job waited for in another thread than the main one cannot be woken so (Python runs signal
handlers in the main thread only): it fails, naming the death, only when Beam itself raises. A worker
that ends with code 0 before the job's end is not told from one told to stop. Workers started by
another process (a Flink TaskManager, Prism, a worker pool) are that runner's to watch.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

from fair_forge_beam.process_workers import pid_alive

__all__ = ["watching", "settle", "worker_started", "worker_ended", "WorkerDied", "exit_words"]

#: Beam's words when a worker started by ``SubprocessSdkWorker`` ends with a non-zero code
_BEAMS_WORDS = "Worker subprocess exited with return code"


class WorkerDied(RuntimeError):
    """Raised in the thread that waits for the job when one of its SDK workers ended (its words:
    :func:`exit_words`)."""


def exit_words(code: int, shell: bool = True) -> str:
    """How a worker process ended, from its exit status (``Popen.returncode``): ``-N`` killed by
    signal ``N``; through ``sh -c`` (``shell``) ``128 + N`` is the shell's report of the same;
    otherwise its exit code. A ``SIGKILL`` nobody asked for is most often the kernel's OOM killer."""
    sig = -code if code < 0 else code - 128 if shell and 128 < code < 128 + 65 else None
    if sig is None:
        return f"exited with code {code}"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    hint = ": out of memory?" if sig == signal.SIGKILL else ""  # what the kernel's OOM killer sends
    return f"was killed by signal {sig} ({name}{hint})"


class _Watch:
    """The workers started while one run's job runs, and the first death among them."""

    def __init__(self, main: bool):
        self.lock = threading.Lock()
        self.workers: list = []  # the Popen objects of the workers started during the run
        self.ended_by_us: set = set()  # pids of workers this watch ended after the first death
        self.death: Optional[str] = None  # the first unexpected death's words
        self.raised = False
        self.main = main  # the job is waited for in the main thread: it can be woken by a signal
        self.thread = threading.main_thread().ident

    def words(self, proc, code: int) -> str:
        with self.lock:
            n, i = len(self.workers), next((k for k, w in enumerate(self.workers) if w is proc), 0)
        shell = getattr(proc, "through_shell", True)
        return f"SDK worker {i + 1} of {n} ({'its shell, ' if shell else ''}pid {proc.pid}) {exit_words(code, shell)}"


_ACTIVE: list = []  # the watches of the runs in progress (one, normally)
_LOCK = threading.Lock()


def worker_started(proc) -> None:
    """Called by the package's ``Popen`` of Beam's worker command as the worker starts."""
    with _LOCK:
        watches = list(_ACTIVE)
    for w in watches:
        with w.lock:
            w.workers.append(proc)


def worker_ended(proc, code: Optional[int]) -> None:
    """Called by the package's ``Popen`` once the worker ``proc`` has ended with ``code``: the first
    non-zero end during a run is that run's failure (a zero one is a worker told to stop)."""
    if not code:
        return
    with _LOCK:
        watches = [w for w in _ACTIVE if any(p is proc for p in w.workers)]
    for w in watches:
        with w.lock:
            if proc.pid in w.ended_by_us or w.death is not None:
                continue
            others = [p for p in w.workers if p is not proc and p.returncode is None]
            w.ended_by_us.update(p.pid for p in others)
        w.death = w.words(proc, code)
        _end(others)
        if w.main:
            try:  # wakes the main thread from a wait on a lock: its handler raises WorkerDied there
                signal.pthread_kill(w.thread, signal.SIGCHLD)
            except (OSError, ValueError):
                pass


def _end(procs) -> None:
    """End the workers ``procs`` (each ``sh`` with its ``python``: a process group of its own)."""
    import os

    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            try:
                p.kill()
            except OSError:
                pass


#: Beam's threads that fail when a worker dies: the one that waits for it (its exit status, _BEAMS_WORDS)
#: and those that read its control and data streams (a gRPC error)
_WORKERS_THREADS = ("run_worker", "beam_control_read", "read_grpc_client_inputs")


def _is_beams_report(args, watch: _Watch) -> bool:
    """Whether a thread's uncaught exception is Beam's report of a worker's death, which the run's
    one line names: waited for (up to 2 s) when the exception came before the exit status."""
    exc, thread = args.exc_value, args.thread
    if thread is None or thread.name not in _WORKERS_THREADS:
        return False
    if not (isinstance(exc, RuntimeError) and str(exc).startswith(_BEAMS_WORDS)
            or type(exc).__module__.startswith("grpc")):
        return False
    return settle(watch) is not None


#: Beam's log records of the same death (logger, message start): the dead worker's data stream, and the
#: runner closing its workers as the job fails
_BEAMS_LOGS = (("apache_beam.runners.worker.data_plane", "Failed to read inputs in the data plane"),
               ("apache_beam.runners.portability.fn_api_runner.worker_handlers", "Error closing worker_handler"))


class _DeathLogs(logging.Filter):
    """Drops Beam's log records of a worker's death that the run's one line names."""

    def __init__(self, watch: _Watch, message: str):
        super().__init__()
        self.watch, self.message = watch, message

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith(self.message) and settle(self.watch) is not None)


@contextmanager
def watching() -> Iterator[_Watch]:
    """Watch the SDK workers Beam starts (multi-process direct runner) while the block runs the job;
    the block raises :class:`WorkerDied` (main thread) as soon as one dies. After the block, the
    watch's ``death`` names the first death (or ``None``)."""
    main = threading.current_thread() is threading.main_thread()
    watch = _Watch(main)
    previous_handler = None

    def on_child(signum, frame):
        if watch.death is not None and not watch.raised:
            watch.raised = True
            raise WorkerDied(watch.death)
        if callable(previous_handler):
            previous_handler(signum, frame)

    if main:
        try:
            previous_handler = signal.signal(signal.SIGCHLD, on_child)
        except (ValueError, OSError):
            watch.main = False
    previous_hook = threading.excepthook

    def hook(args):
        if not _is_beams_report(args, watch):
            previous_hook(args)

    threading.excepthook = hook
    filters = [(logging.getLogger(name), _DeathLogs(watch, message)) for name, message in _BEAMS_LOGS]
    for logger, f in filters:
        logger.addFilter(f)
    with _LOCK:
        _ACTIVE.append(watch)
    try:
        yield watch
    finally:
        with _LOCK:
            _ACTIVE.remove(watch)
        if watch.main:
            watch.raised = True  # a late signal raises nothing outside the block
            try:
                signal.signal(signal.SIGCHLD, previous_handler if previous_handler is not None else signal.SIG_DFL)
            except (ValueError, OSError):
                pass
        # after a death the broken streams of the dead and the ended workers are reported by Beam's threads
        # for a while longer: the filters stay (they drop only those reports); else they go
        if watch.death is None:
            for logger, f in filters:
                logger.removeFilter(f)
            if threading.excepthook is hook:  # else another hook was installed over ours: ours stays, passing all on
                threading.excepthook = previous_hook


def settle(watch: _Watch, seconds: float = 2.0) -> Optional[str]:
    """The watch's first death, waiting up to ``seconds`` for one still being reported (the job's own
    error can come a moment before the worker's exit status)."""
    deadline = time.monotonic() + seconds
    while watch.death is None and time.monotonic() < deadline:
        with watch.lock:
            workers = list(watch.workers)
        if not any(p.returncode or p.returncode is None and not pid_alive(p.pid) for p in workers):
            return None  # no worker ended unreported (or none but with 0): the job failed for another reason
        time.sleep(0.05)
    return watch.death
