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
there — so that the run fails as any failed job does (6 of 6: 0.2-0.5 s after the kill; under load 5-15,
4 of 14 late kills 1.03-1.72 s after it, trial46 B5): the stage
of its output removed, the output folder as it was, one line on the console
(:class:`fair_forge_beam.beam_pipeline.WorkerProcessError`). Beam's own thread tracebacks and log
records of the same death are not printed.

A worker that ends with code 0 is a death too unless Beam told it to stop: Beam ends a worker by
closing its handler (the job's end or its failure), which :func:`worker_told_to_stop` hears
(trial39b B7: ``os._exit(0)`` in a step waited for ever). A worker that is stopped (``SIGSTOP``, state
``T`` in ``/proc/PID/stat``) is named in one warning, with how to resume it, and its resumption in one
more (``stopped for at least N s``: counted from the look that saw the stop); the run waits for it (a user
may have stopped it on purpose). One still stopped :data:`STOPPED_TOO_LONG` seconds later is named once
more in an ERROR line, which ``--quiet`` shows: the run waits silently otherwise. A thread of the watch looks at
the workers' states every :data:`CHECK_EVERY` seconds (two small ``/proc`` reads a look), from the first
worker's start to the run's end. :func:`worker_states` tells the progress reporter how each worker is
(a run whose counts are in the workers, where nothing else shows that the run lives).

Each worker is watched by the run that started it, and by no other: several runs at once in one process (a
program's threads, each calling the Python API) each see their own workers, their own death and Beam's closing of
their own handlers only (session 30: every worker was every run's, so one run's death ended the other run's workers
and both calls hung, 150 s+, with their hooks, filters and claims left installed). Beam starts a worker from a thread
of its own, which knows no run: :func:`fair_forge_beam.beam_pipeline._workers_belong_to_the_run_that_starts_them`
carries the run, from the thread of the run's :func:`watching` block (:func:`this_threads_run`), along Beam's
``WorkerHandlerManager`` and handler to the worker's ``Popen``, found by its control address and id. A worker that
cannot be attributed so (a pipeline run outside :func:`fair_forge_beam.beam_pipeline.run_pipeline`, or one whose
job runs in a job service's thread) is watched by no run: its death is Beam's to report, as before this module (the
job fails with Beam's error, or waits).

A job waited for in another thread than the main one cannot be woken so (Python runs signal handlers in the main
thread only): there, the run's death calls what the run registered (:func:`when_dead`), which fails the run's own
waits on Beam — its pending requests, its data channels (:func:`fair_forge_beam.beam_pipeline._fail_the_waits_of`) —
so that Beam raises in the run's thread and the run fails as above (trial46b B2: a plain audit in a thread, a worker
killed before it had connected, waited for ever: no stream of it broke for Beam to see).

Limits: a worker that hangs alive (a step that sleeps, a call that never returns) is not a failure: only its state
and CPU time say it (:func:`worker_states`). What the watch installs for a run (the ``SIGCHLD`` handler, a thread
exception hook, two log filters) is removed when the run's block ends, however it ends; after a death, the hook and
the filters stay until the run's own Beam stream threads have ended (however late they report: flake45), dropping
only those threads' reports. Workers started by another process (a Flink TaskManager, Prism, a worker pool) are
that runner's to watch.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

from fair_forge_beam import procfs

__all__ = ["watching", "settle", "worker_started", "worker_ended", "worker_told_to_stop", "worker_states",
           "when_dead", "this_threads_run", "working_for", "wait_for_late_reports", "WorkerDied", "exit_words",
           "CHECK_EVERY", "STOPPED_TOO_LONG"]

log = logging.getLogger(__name__)

#: seconds between two looks at the workers' states (a stopped worker is named within about this long)
CHECK_EVERY = 2.0

#: seconds a worker stays stopped before it is named again in an ERROR line, which ``--quiet`` shows: the
#: run waits for it, a hang the user must know of (trial40b B5: under --quiet a stopped worker was silent)
STOPPED_TOO_LONG = 30.0

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
        self.told_to_stop: set = set()  # worker ids whose handler Beam closed: their exit with code 0 is asked for
        self.stopped: dict = {}  # pid: when a worker was said to be stopped (state T), until it resumes
        self.stopped_too_long: set = set()  # pids of stopped workers said in an ERROR line (STOPPED_TOO_LONG)
        self.before = frozenset(threading.enumerate())  # the threads alive as the run began: none of them is its
        # the run's Beam stream threads still alive as its block ended (None: it has not ended); their reports, however
        # late, are the only ones its hook and filters drop from then on, until they have all ended (``released``)
        self.late: Optional[frozenset] = None
        self.late_idents: frozenset = frozenset()
        self.released = threading.Event()  # what the run installed is gone: its hook and filters pass all on
        self.done = threading.Event()  # the run's block ended: the state checks end
        self.checks: Optional[threading.Thread] = None
        self.on_death: list = []  # called with the first death's words (when_dead): what fails the run's own waits

    def name(self, proc) -> str:
        with self.lock:
            n, i = len(self.workers), next((k for k, w in enumerate(self.workers) if w is proc), 0)
        shell = getattr(proc, "through_shell", True)
        return f"SDK worker {i + 1} of {n} ({'its shell, ' if shell else ''}pid {proc.pid})"

    def words(self, proc, code: int) -> str:
        shell = getattr(proc, "through_shell", True)
        return f"{self.name(proc)} {exit_words(code, shell)}{'' if code else ' before the job ended'}"

    def asked_to_end(self, proc) -> bool:
        """Whether Beam told ``proc`` to stop (its exit with code 0 is then the end it asked for); a
        worker whose id is not known cannot be told from one told to stop."""
        worker_id = getattr(proc, "worker_id", None)
        with self.lock:
            return worker_id is None or worker_id in self.told_to_stop

    def owns(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is one of Beam's threads of this run's workers (:data:`_WORKERS_THREADS`, by name):
        one started while the run was on, and once it has ended, one still alive then (:attr:`late`). Told
        by the ``Thread`` object, never by name alone: another run's thread of the same name is not this one's."""
        if self.released.is_set() or thread.name not in _WORKERS_THREADS:
            return False
        late = self.late
        return thread not in self.before if late is None else thread in late

    def unexpected_end(self, proc) -> bool:
        """Whether ``proc`` ended, or is ending, as no worker of a running job should. Not yet waited for, a
        worker whose exit has begun (:func:`fair_forge_beam.procfs.ending`: ``PF_EXITING``, set before the kernel
        closes its sockets) counts: Beam's threads that read its streams report their break before it is a zombie
        (flake45b: a SIGKILLed worker's tracebacks printed above the one line, :func:`settle` saw it alive)."""
        code = proc.returncode
        if code is None:
            return procfs.ending(proc.pid)
        return bool(code) or not self.asked_to_end(proc)


_ACTIVE: list = []  # the watches of the runs in progress (one, normally; one a thread when a program runs several)
_LOCK = threading.Lock()
_HERE = threading.local()  # ``run``: the watch of the run this thread works for (:func:`working_for`)
_THIS_THREADS = object()  # the default ``run`` of the calls below: this thread's (:func:`this_threads_run`)


def this_threads_run() -> Optional[_Watch]:
    """The watch of the run this thread works for: the thread whose :func:`watching` block runs the job, or one
    inside :func:`working_for`; ``None`` elsewhere (a thread Beam started knows no run)."""
    return getattr(_HERE, "run", None)


@contextmanager
def working_for(run: Optional[_Watch]) -> Iterator[None]:
    """The block's thread works for ``run`` (``None``: for no run): Beam's code that starts a run's workers, run in
    a thread of Beam's, is told whose they are so (:mod:`fair_forge_beam.beam_pipeline`)."""
    before = getattr(_HERE, "run", None)
    _HERE.run = run
    try:
        yield
    finally:
        _HERE.run = before


def _owner(run) -> Optional[_Watch]:
    """``run`` (this thread's when not given), if it is still in progress: a worker is never another run's."""
    w = this_threads_run() if run is _THIS_THREADS else run
    return w if w is not None and not w.done.is_set() else None


def worker_started(proc, run=_THIS_THREADS) -> None:
    """Called by the package's ``Popen`` of Beam's worker command as the worker starts: ``proc`` is watched by
    ``run`` only, the run that started it (default: the run this thread works for). ``None``, or a run that has
    ended: a worker no run is known to have started is watched by none (its death is Beam's to report). One started
    after its run's death is ended at once, as the run's other workers were."""
    w = _owner(run)
    if w is None:
        return
    with w.lock:
        w.workers.append(proc)
        late = w.death is not None  # started after the run's death: it cannot help the run either
        if late:
            w.ended_by_us.add(proc.pid)
        start = w.checks is None and not late
        if start:
            w.checks = threading.Thread(target=_check_states, args=(w,), name="fair_forge_beam-worker-states",
                                        daemon=True)
    if late:  # fix47a: under load Beam started a run's second worker after its first was killed; left, it waited 60 s
        _end([proc])  # for the run's closed control address and printed grpc's FutureTimeoutError traceback
    if start:
        w.checks.start()


def when_dead(run: Optional[_Watch], callback) -> None:
    """``callback(words)`` is called once ``run`` (``None``: no run, nothing is called) has a death, with its words:
    at once if it has one already, else by the thread that learns of it (:func:`worker_ended`, Beam's ``run_worker``).
    What fails the run's own waits wherever its thread is (:mod:`fair_forge_beam.beam_pipeline`: its Beam requests and
    data channels), since only the main thread can be woken by a signal. An exception of ``callback`` is logged."""
    if run is None:
        return
    with run.lock:
        words = run.death
        if words is None:
            run.on_death.append(callback)
    if words is not None:
        _call(callback, words)


def _call(callback, words: str) -> None:
    try:
        callback(words)
    except Exception:  # noqa: BLE001 - one failing callback must not keep the others (or Beam's thread) from going on
        log.debug("a callback on a worker's death failed", exc_info=True)


def worker_told_to_stop(worker_id: Optional[str], run=_THIS_THREADS) -> None:
    """Called as Beam closes the handler of the worker ``worker_id`` of ``run`` (default: the run this thread works
    for; the job ended or failed): that worker's exit with code 0 from then on is the end Beam asked for. Told to
    that run only: another run's worker of the same id is not asked to end."""
    w = _owner(run)
    if w is None:
        return
    with w.lock:
        w.told_to_stop.add(worker_id)


def worker_ended(proc, code: Optional[int]) -> None:
    """Called by the package's ``Popen`` once the worker ``proc`` has ended with ``code``: the first
    end during a run that Beam did not ask for (a non-zero code, or code 0 before Beam told the worker
    to stop: :func:`worker_told_to_stop`) is that run's failure."""
    if code is None:
        return
    with _LOCK:
        watches = [w for w in _ACTIVE if any(p is proc for p in w.workers)]
    for w in watches:
        if not code and w.asked_to_end(proc):
            continue
        words = w.words(proc, code)
        with w.lock:
            if proc.pid in w.ended_by_us or w.death is not None:
                continue
            others = [p for p in w.workers if p is not proc and p.returncode is None]
            w.ended_by_us.update(p.pid for p in others)
            w.death = words  # under the lock: a callback added from now on is called at once (when_dead)
            callbacks, w.on_death = w.on_death, []
        _end(others)
        if w.main:
            try:  # wakes the main thread from a wait on a lock: its handler raises WorkerDied there
                signal.pthread_kill(w.thread, signal.SIGCHLD)
            except (OSError, ValueError):
                pass
        for callback in callbacks:  # and the run's own waits end, in whatever thread they are (trial46b B2)
            _call(callback, words)


#: the states of ``/proc/PID/stat`` in words
_STATES = {"R": "running", "S": "sleeping", "D": "waiting for a disk", "T": "stopped", "t": "stopped by a debugger",
           "Z": "ended", "X": "ended", "I": "idle"}


def _check_states(watch: _Watch) -> None:
    """The watch's thread: every :data:`CHECK_EVERY` seconds, a worker newly stopped is named in one
    warning, and one that resumed in one more; the run waits for it."""
    while not watch.done.wait(CHECK_EVERY):
        _look(watch)


def _look(watch: _Watch, resumes_only: bool = False) -> None:
    """One look at the watch's workers' states (:func:`_check_states`); ``resumes_only``: at the run's
    end, a stopped worker that resumed since the last look (and may have ended since) is said to."""
    with watch.lock:
        workers = [p for p in watch.workers if p.returncode is None or resumes_only and p.pid in watch.stopped]
    for proc in workers:
        st = procfs.stat(proc.pid) if proc.returncode is None else None
        stopped = st is not None and st.state in "Tt"
        if stopped and proc.pid in watch.stopped and proc.pid not in watch.stopped_too_long and not resumes_only \
                and watch.death is None and time.monotonic() - watch.stopped[proc.pid] >= STOPPED_TOO_LONG:
            watch.stopped_too_long.add(proc.pid)
            log.error("%s has been stopped for at least %d s (state %s in /proc/%d/stat): the run waits for it; "
                      "`kill -CONT %d` resumes it", watch.name(proc), time.monotonic() - watch.stopped[proc.pid], st.state,
                      proc.pid, proc.pid)
        if stopped == (proc.pid in watch.stopped) or watch.death is not None:
            continue
        if stopped and not resumes_only:
            watch.stopped[proc.pid] = time.monotonic()
            log.warning("%s is %s (state %s in /proc/%d/stat): the run waits for it; `kill -CONT %d` resumes it",
                        watch.name(proc), _STATES[st.state], st.state, proc.pid, proc.pid)
        elif not stopped:
            since = watch.stopped.pop(proc.pid)
            watch.stopped_too_long.discard(proc.pid)
            # counted from the look that saw the stop, up to CHECK_EVERY after it: /proc/PID/stat holds no time of it
            if st is not None or proc.returncode == 0:  # not a worker that ended otherwise
                log.warning("%s resumed (stopped for at least %d s)", watch.name(proc), time.monotonic() - since)


def worker_states() -> list:
    """``[(name, state in words, CPU seconds)]`` of the SDK workers of the runs in progress that have
    not ended (``[]``: none, e.g. the in-memory runner's): ``name`` as ``SDK worker 1 of 2 (pid P)``."""
    with _LOCK:
        watches = list(_ACTIVE)
    out = []
    for w in watches:
        with w.lock:
            workers = [p for p in w.workers if p.returncode is None]
        for proc in workers:
            st = procfs.stat(proc.pid)
            if st is not None and not st.ended:
                out.append((w.name(proc), _STATES.get(st.state, f"state {st.state}"), st.cpu_seconds))
    return out


def _end(procs) -> None:
    """End the workers ``procs`` (each ``sh`` with its ``python``: a process group of its own)."""
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
    one line names, raised in one of the run's own Beam threads (:meth:`_Watch.owns`): waited for (up
    to 2 s) when the exception came before the exit status."""
    exc, thread = args.exc_value, args.thread
    if thread is None or not watch.owns(thread):
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
    """Drops Beam's log records of a worker's death that the run's one line names: while the run is on,
    any; once it has ended, those of its Beam stream threads still alive then (:attr:`_Watch.late`)."""

    def __init__(self, watch: _Watch, message: str):
        super().__init__()
        self.watch, self.message = watch, message

    def filter(self, record: logging.LogRecord) -> bool:
        watch = self.watch
        if watch.released.is_set() or not str(record.msg).startswith(self.message):
            return True
        if watch.late is not None and record.thread not in watch.late_idents:
            return True
        return settle(watch) is None


#: the watches whose Beam reports the thread exception hook drops (:func:`_claim`): the runs in progress, and
#: the ended runs a death failed until their own Beam stream threads have ended
_CLAIMS: list = []
_HOOK_LOCK = threading.Lock()
_hook = None  # the hook installed for them (its ``below``: the hook it replaced), or None


def _claim(watch: _Watch) -> None:
    """The thread exception hook drops ``watch``'s Beam reports (:func:`_is_beams_report`) until
    :func:`_unclaim`; one hook for all the claims, so that runs whose ends overlap remove it in any order."""
    global _hook
    with _HOOK_LOCK:
        _CLAIMS.append(watch)
        if _hook is None or threading.excepthook is not _hook:  # a hook installed over ours since: one more above it
            below = threading.excepthook

            def hook(args):
                with _HOOK_LOCK:
                    claims = list(_CLAIMS)
                if not any(_is_beams_report(args, w) for w in claims):
                    below(args)

            hook.below = below
            _hook = threading.excepthook = hook


def _unclaim(watch: _Watch) -> None:
    """The end of :func:`_claim`: with the last claim gone, the hook it replaced is back (unless another hook
    was installed over ours since: ours stays under it, passing all on)."""
    global _hook
    with _HOOK_LOCK:
        if watch in _CLAIMS:
            _CLAIMS.remove(watch)
        if not _CLAIMS and _hook is not None:
            if threading.excepthook is _hook:
                threading.excepthook = _hook.below
            _hook = None


def _release(watch: _Watch, filters: list) -> None:
    """What the run of ``watch`` installed goes: its log filters and its claim on the thread exception hook."""
    try:
        for logger, f in filters:
            logger.removeFilter(f)
        _unclaim(watch)
    finally:
        watch.released.set()


def _release_when_ended(watch: _Watch, filters: list) -> None:
    """A thread's: waits for the run's Beam stream threads still alive at its end (:attr:`_Watch.late`) to end
    (their reports, which come before, dropped), however long they take, then releases the run's hook and filters."""
    for t in watch.late:
        t.join()
    _release(watch, filters)


def wait_for_late_reports(timeout: Optional[float] = None) -> bool:
    """Wait until every ended run a death failed has seen its Beam stream threads end and what it installed
    is gone; ``False`` when ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _HOOK_LOCK:
        ended = [w for w in _CLAIMS if w.late is not None]
    for w in ended:
        if not w.released.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            return False
    return True


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
    _claim(watch)
    filters = [(logging.getLogger(name), _DeathLogs(watch, message)) for name, message in _BEAMS_LOGS]
    for logger, f in filters:
        logger.addFilter(f)
    with _LOCK:
        _ACTIVE.append(watch)
    this_thread = getattr(_HERE, "run", None)
    _HERE.run = watch  # the workers this thread's job starts are this run's (this_threads_run)
    try:
        yield watch
    finally:
        _HERE.run = this_thread
        try:
            watch.done.set()  # the state checks end
            if watch.checks is not None:
                watch.checks.join(1.0)
                _look(watch, resumes_only=True)  # a worker resumed since the last look is said to have
        finally:
            with _LOCK:
                _ACTIVE.remove(watch)
            if watch.main:
                watch.raised = True  # a late signal raises nothing outside the block
                try:
                    signal.signal(signal.SIGCHLD, previous_handler if previous_handler is not None else signal.SIG_DFL)
                except (ValueError, OSError):
                    pass
        # whatever the run installed goes with it, however it ended (trial40b B4: after a death the filters and the
        # hook stayed for the process's life, dropping a later run's real reports, a layer a failed run). After a
        # death, the dead and the ended workers' broken streams are reported by Beam's threads of the run, as late as
        # they come (flake45: a fixed wait of 2 s for them was exceeded under load, and the traceback printed): the
        # hook and filters stay, dropping those threads' reports only, until they have all ended
        late = frozenset(t for t in threading.enumerate() if watch.owns(t) and t is not threading.current_thread()) \
            if watch.death is not None else frozenset()
        watch.late_idents = frozenset(t.ident for t in late)
        watch.late = late
        if not late:
            _release(watch, filters)
        else:
            try:
                threading.Thread(target=_release_when_ended, args=(watch, filters), daemon=True,
                                 name="fair_forge_beam-late-reports").start()
            except BaseException:
                _release(watch, filters)
                raise


def settle(watch: _Watch, seconds: float = 2.0) -> Optional[str]:
    """The watch's first death, waiting up to ``seconds`` for one still being reported (the job's own
    error, and Beam's threads' reports of a dying worker's broken streams, can come a moment before the
    worker's exit status): while a worker has ended or is ending unreported (:meth:`_Watch.unexpected_end`)."""
    deadline = time.monotonic() + seconds
    while watch.death is None and time.monotonic() < deadline:
        with watch.lock:
            workers = list(watch.workers)
        if not any(watch.unexpected_end(p) for p in workers):
            return None  # none ended or is ending unreported (but as Beam asked): the job failed for another reason
        time.sleep(0.05)
    return watch.death
