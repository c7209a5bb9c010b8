"""Progress of a running audit on stderr: interactions read and scored, judge calls, time left.

Counting: the DoFns count with :class:`ProgressCounter` — a Beam counter
(``Metrics.counter(NAMESPACE or the judge's namespace, name)``) plus a tally of the run (one per command's run,
:func:`fair_forge_beam.run_scope.per_run`; a process's two audits in two threads count apart). A
reporter thread in the launcher (:class:`ProgressReporter`) samples the tallies (and, for a
runner whose ``run()`` returns while the job runs, the Beam counters of its ``PipelineResult``)
every ``interval`` seconds and writes one line when something changed, or every
:data:`HEARTBEAT` seconds while nothing does — never a line per element. The run's tally sees the work of the in-memory FnApiRunner (the default), whose
``run()`` returns only at the end; workers in other processes are seen through the Beam counters
when the runner reports them while running, else not at all (no line is printed then).

Counter names (namespace :data:`NAMESPACE`): ``read`` (interactions parsed from the inputs),
``taken.<metric>`` (interactions a metric's scorer has taken) and ``scored.<metric>`` (those it
scored: a score came out, not a dead letter). The line shows ``scored``, the count the summary
and ``results.json`` call ``interactions_scored``, with the interactions taken and not scored so
far in brackets (issue 28, fresh-user trial: the line said "scored: humanity 2,042" — taken —
where the summary said "2016 scored, 26 not scored"); the time left extrapolates ``taken``. When
the run ends the reporter writes one last line if the counts changed since its last one, so the
last line agrees with the summary (the trial's last line was sampled mid-run: 1,792). Judge and guardian calls: the
handler's counters ``calls``, ``cache_hits``, ``results``, ``failures`` and ``submitted``
(elements handed to the endpoint) in ``fair_forge_beam.judge`` / ``fair_forge_beam.guardian``.

A line reads::

    progress: 1,024 interactions read, scored: humanity 1,000 (24 not scored), toxicity 512; judge: 40 done, 8 pending; 12 s elapsed, about 12 s of scoring left

Time left: the slowest metric's rate since its first taken interaction, applied to its
interactions not yet taken (``read − taken``); judge calls in flight count at the judge's rate.
No estimate ("time left unknown") until there is a rate, and none when every interaction read is
taken and no judge call with a rate is pending (reading, scoring in flight and writing may still
go on: the line never says "about 0 s left" while the run works; issue 28). An estimate under half
a second, which would print as "0 s", is shown as unknown too. It is an extrapolation of scoring
only, and says so ("of scoring left"): the combines, estimates and writing that follow are not in
it. Once every metric has taken every interaction read and no judge call is pending the line says
"scoring caught up with reading; combining and writing" (trial 10 T15: "about 4 s left" came
before 70 % of the run), and while no count moves a line still comes every :data:`HEARTBEAT`
seconds. It is not a promise: reading may not be finished (the total is not known before the
inputs are read).

A run whose SDK workers are processes of the launcher's own (``--direct_running_mode
multi_processing``) counts in them, and its ``run()`` returns only at the end: no count is seen
while it runs. Every :data:`HEARTBEAT` seconds the reporter then writes one line naming each worker
with its state and the CPU seconds it used since the line before (``SDK worker 1 of 2 (pid 4242)
sleeping, 0.0 CPU s in the last 30 s``, :func:`fair_forge_beam.worker_watch.worker_states`): a worker
that hangs (sleeping, no CPU), is stopped or spins is told from one that works; nothing is ended.
Any line of a run with such workers ends with them.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Callable, Mapping, Optional, Sequence, TextIO

from fair_forge_beam.run_scope import command_begins, current_run, per_run

__all__ = ["NAMESPACE", "JUDGE_NAMESPACES", "ProgressCounter", "snapshot", "reset", "format_progress",
           "eta_seconds", "ProgressReporter"]

NAMESPACE = "fair_forge_beam.progress"
#: seconds after which the reporter writes a line although no count changed (the run is alive)
HEARTBEAT = 30.0
JUDGE_NAMESPACES = ("fair_forge_beam.judge", "fair_forge_beam.guardian")

class _Tally:
    """The progress tallies of one run (:func:`fair_forge_beam.run_scope.per_run`: two audits in two threads
    of one process count apart, trial44 B7): ``{(namespace, name): count}`` and when each was first
    counted."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}
        self.first_seen: dict[tuple[str, str], float] = {}

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()
            self.first_seen.clear()

    def add(self, key: tuple[str, str], n: int) -> None:
        with self.lock:
            if key not in self.counts:
                self.first_seen[key] = time.monotonic()
            self.counts[key] = self.counts.get(key, 0) + n

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self.lock:
            return dict(self.counts)

    def firsts(self) -> dict[tuple[str, str], float]:
        with self.lock:
            return dict(self.first_seen)


def _tally() -> _Tally:
    """The tallies of the current run (:func:`fair_forge_beam.run_scope.per_run`)."""
    return per_run("progress.tally", _Tally)


def reset() -> None:
    """Forget the current run's tallies (the reporter does it as it starts)."""
    _tally().clear()


def snapshot() -> dict[tuple[str, str], int]:
    """A copy of the current run's tallies: ``{(namespace, name): count}``."""
    return _tally().snapshot()


class ProgressCounter:
    """A Beam counter that also adds to the progress tally of the run it counts in (the run of the
    thread that runs the bundle: the launcher's own for the in-memory runner).

    Picklable (the Beam counter is made on first use in the worker). ``inc(n)`` costs one Beam
    counter update and one locked dict update."""

    def __init__(self, name: str, namespace: str = NAMESPACE, beam_counter=None):
        self.namespace, self.name = namespace, name
        self._counter = beam_counter

    def __getstate__(self):
        return {"namespace": self.namespace, "name": self.name, "_counter": None}

    def inc(self, n: int = 1) -> None:
        if self._counter is None:
            import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
            from apache_beam.metrics import Metrics

            self._counter = Metrics.counter(self.namespace, self.name)
        self._counter.inc(n)
        # the tally of the run counting now, looked up again only when the run changes (per_run's lookup at
        # each call cost 1.5 µs an inc, 2.5x); one tuple, read once: a counter two runs' threads share is safe
        run, mine = current_run(), self.__dict__.get("_run_tally")
        if mine is None or mine[0] is not run:
            mine = self._run_tally = (run, _tally())
        mine[1].add((self.namespace, self.name), n)


def _n(x: int) -> str:
    return f"{x:,}"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _judge_totals(counts: Mapping[tuple[str, str], int]) -> tuple[int, int]:
    """``(done, pending)`` judge/guardian elements: done = results + failures; pending = submitted − done."""
    done = sum(counts.get((ns, n), 0) for ns in JUDGE_NAMESPACES for n in ("results", "failures"))
    submitted = sum(counts.get((ns, "submitted"), 0) for ns in JUDGE_NAMESPACES)
    return done, max(0, submitted - done)


def eta_seconds(counts: Mapping[tuple[str, str], int], started: Mapping[tuple[str, str], float],
                now: float) -> Optional[float]:
    """Seconds left by extrapolation, or ``None`` when there is no rate yet.

    For each metric: ``(read − scored) / rate`` with ``rate = scored / (now − its first scored
    interaction)``; judge calls pending: ``pending / (done / (now − first judge result))``. The
    largest of these (the stages run side by side). Units: seconds; always > 0. ``None`` also when
    no stage has work left to extrapolate (every interaction read is taken, no judge call pending
    with a rate): the run still reads, scores in flight or writes, and 0 would be a wrong number.
    """
    read = counts.get((NAMESPACE, "read"), 0)
    lefts = []
    for name, taken, key in _taken(counts):
        if taken <= 0:
            continue
        since = now - started.get(key, started.get((NAMESPACE, f"scored.{name}"), now))
        if since > 0 and read > taken:
            lefts.append((read - taken) * since / taken)
    done, pending = _judge_totals(counts)
    if done and pending:
        firsts = [started[(ns, n)] for ns in JUDGE_NAMESPACES for n in ("results", "failures") if (ns, n) in started]
        since = now - min(firsts) if firsts else 0.0
        if since > 0:
            lefts.append(pending * since / done)
    left = max(lefts, default=0.0)
    return left if left > 0 else None


def _taken(counts: Mapping[tuple[str, str], int]) -> list[tuple[str, int, tuple[str, str]]]:
    """``[(metric, interactions taken, its counter key)]``: ``taken.<metric>``, else (tallies
    without it) ``scored.<metric>``."""
    names = sorted({n.split(".", 1)[1] for ns, n in counts if ns == NAMESPACE and n.startswith(("scored.", "taken."))})
    out = []
    for m in names:
        key = (NAMESPACE, f"taken.{m}")
        if key not in counts:
            key = (NAMESPACE, f"scored.{m}")
        out.append((m, counts.get(key, 0), key))
    return out


def format_progress(counts: Mapping[tuple[str, str], int], elapsed: float, eta: Optional[float],
                    final: bool = False) -> str:
    """One progress line from the tallies ``{(namespace, name): count}`` (see the module docstring).

    ``elapsed``: seconds since the run started; ``eta``: seconds left or ``None`` (unknown). An
    ``eta`` that would print as "0 s" (under half a second, or not positive) is shown as unknown:
    the line is written while the run works, and "about 0 s left" would be wrong. ``final``: the
    run's last line, written once the pipeline finished: elapsed time only (nothing is left)."""
    read = counts.get((NAMESPACE, "read"), 0)
    parts = [f"{_n(read)} interactions read"]
    scored = []
    for m, taken, _ in _taken(counts):
        v = counts.get((NAMESPACE, f"scored.{m}"), 0)
        scored.append(f"{m} {_n(v)}" + (f" ({_n(taken - v)} not scored)" if taken > v else ""))
    if scored:
        parts[-1] += ", scored: " + ", ".join(scored)
    done, pending = _judge_totals(counts)
    if done or pending:
        parts.append(f"judge: {_n(done)} done, {_n(pending)} pending")
    if eta is not None and round(eta) >= 1:
        left = f"about {_duration(eta)} of scoring left"  # the stages after scoring are not extrapolated
    elif read and scored and all(t >= read for _m, t, _k in _taken(counts)) and not pending:
        left = "scoring caught up with reading; combining and writing"  # the rest of the run: no count moves
    else:
        left = "time left unknown"
    parts.append(f"{_duration(elapsed)} elapsed" if final else f"{_duration(elapsed)} elapsed, {left}")
    return "progress: " + "; ".join(parts)


def _result_counts(result) -> dict[tuple[str, str], int]:
    """Attempted values of the progress and judge counters of a running ``PipelineResult`` ({} if none)."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.metrics.metric import MetricsFilter

    out: dict[tuple[str, str], int] = {}
    for ns in (NAMESPACE, *JUDGE_NAMESPACES):
        try:
            counters = result.metrics().query(MetricsFilter().with_namespace(ns))["counters"]
        except Exception:  # noqa: BLE001 - a runner without live metrics: nothing to add
            return out
        for c in counters:
            key = (ns, c.key.metric.name)
            out[key] = out.get(key, 0) + int(c.attempted or c.committed or 0)
    return out


class ProgressReporter:
    """A daemon thread writing a progress line to ``stream`` at most every ``interval`` seconds,
    when the counts changed, or :data:`HEARTBEAT` seconds after the last line.

    Use as a context manager around the pipeline run; ``watch(result)`` adds a running
    ``PipelineResult`` whose Beam counters are polled too (the larger of the two counts wins).
    ``enabled=False`` (``--quiet``) makes it do nothing.

    Args:
        interval: seconds between two lines (> 0; default 5).
        stream: where lines go (default ``sys.stderr``).
        clock: monotonic clock (tests pass a fake one).
    """

    def __init__(self, interval: float = 5.0, stream: Optional[TextIO] = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.interval, self.stream, self.enabled, self.clock = interval, stream, enabled, clock
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._result = None
        self._last: Optional[dict] = None
        self._last_at = float("-inf")
        self.lines = 0
        self.started = clock()
        self._cpu: dict = {}  # CPU seconds of each SDK worker process at the last line
        self._cpu_at = self.started
        self._tally = _tally()  # its run's (the thread writing the lines has no run of its own)

    def watch(self, result) -> None:
        self._result = result

    def counts(self) -> dict[tuple[str, str], int]:
        counts = self._tally.snapshot()
        if self._result is not None:
            for k, v in _result_counts(self._result).items():
                counts[k] = max(counts.get(k, 0), v)
        return counts

    def tick(self, final: bool = False) -> Optional[str]:
        """Write a line if the counts changed since the last one, or if :data:`HEARTBEAT` seconds
        passed since it (the stages after scoring move no count: trial 10 T15 read "about 4 s
        left", then nothing for 3½ minutes); returns it (or ``None``). ``final``: the run's last
        line (no time left), written even when the counts did not change (the line before it still
        said the time left: fresh14 read "time left unknown" last)."""
        counts = self.counts()
        now = self.clock()
        from fair_forge_beam.worker_watch import worker_states

        workers = [] if final else worker_states()
        if not counts:  # the counts are in the workers' processes (multi_processing): a line of their states
            if not workers or now - max(self._last_at, self.started) < HEARTBEAT:
                return None
        elif counts == self._last and not final and now - self._last_at < HEARTBEAT:
            return None
        self._last, self._last_at = counts, now
        if counts:
            line = format_progress(counts, now - self.started, eta_seconds(counts, self._tally.firsts(), now), final=final)
        else:
            line = f"progress: {_duration(now - self.started)} elapsed; the counts are in the SDK worker processes"
        if workers:
            line += "; " + self._workers(workers, now)
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(line + "\n")
        stream.flush()
        self.lines += 1
        return line

    def _workers(self, workers: list, now: float) -> str:
        """``workers`` (:func:`~fair_forge_beam.worker_watch.worker_states`) in words, each with the CPU
        seconds it used since the last line (or since it started)."""
        parts, cpu = [], {}
        for name, state, seconds in workers:
            cpu[name] = seconds
            before = self._cpu.get(name)
            used = (f"{seconds - before:.1f} CPU s in the last {_duration(now - self._cpu_at)}" if before is not None
                    else f"{seconds:.1f} CPU s so far")
            parts.append(f"{name} {state}, {used}")
        self._cpu, self._cpu_at = cpu, now
        return "; ".join(parts)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - progress must never break a run
                pass

    def __enter__(self):
        if self.enabled:
            self._tally = _tally()  # the run entering it, which its pipeline counts in
            self._tally.clear()
            self.started = self.clock()
            self._thread = threading.Thread(target=self._loop, name="fair_forge_beam-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if exc[0] is None and self.lines:  # the last line agrees with the summary printed next
                try:
                    self.tick(final=True)
                except Exception:  # noqa: BLE001 - progress must never break a run
                    pass


class _ErrorsOnly(logging.Filter):
    """Lets through records of level ERROR and above only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


HTTP_CLIENT_LOGGERS = ("httpx2", "httpx", "httpcore", "openai")
"""The loggers of the HTTP clients a judge, guardian or assistant endpoint uses (the pinned openai
client logs through ``httpx2``, older ones through ``httpx``/``httpcore``/``openai``)."""


MODEL_LIBRARY_LOGGERS = ("sentence_transformers", "transformers", "huggingface_hub")
"""The loggers of the libraries that load a model (MiniLM through sentence-transformers): an INFO
line at each load (``Loading SentenceTransformer model from …``), a library's trace, not a run's
progress; printed under ``--quiet`` too (trial36 T8)."""


def _warning_level(names: Sequence[str]) -> None:
    """Each logger of ``names`` at WARNING unless a level was set on it before (a caller's own
    choice is kept)."""
    for name in names:
        lg = logging.getLogger(name)
        if lg.level == logging.NOTSET:  # never set: a caller's own choice is kept
            lg.setLevel(logging.WARNING)


def quiet_http_clients() -> None:
    """The HTTP clients' loggers (:data:`HTTP_CLIENT_LOGGERS`) at WARNING, each unless a level was
    set on it before (a caller's own choice is kept): by :func:`cli_logging` and where a client is
    made (``components.replies``), so that a Beam worker process, which never runs an entry point,
    does too (trial35b B4: ``--direct_running_mode multi_processing`` printed one line per request)."""
    _warning_level(HTTP_CLIENT_LOGGERS)


_NATIVE_EXIT_REPORT_DROPPED = False


def _drop_stderr_at_exit() -> None:
    """An ``atexit`` handler: stderr (file descriptor 2) to ``/dev/null`` once Python's exit has begun."""
    try:
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stderr closed or replaced: nothing to drop
        pass


def quiet_model_libraries() -> None:
    """Where a model is loaded (``components.embedder``), in the launcher and in every Beam worker
    process: the model libraries' loggers (:data:`MODEL_LIBRARY_LOGGERS`) at WARNING, each unless a
    level was set on it before; and, when the load imported triton (torch imports it through
    ``torch._dynamo`` wherever it is installed, GPU or not), the ~30 lines of
    ``nanobind: leaked … instances / types / functions`` that its C++ bindings print while the
    interpreter shuts down are dropped (trial36 T8): nanobind's own switch (``set_leak_warnings``) is not
    exported by triton, so, as triton does for its own compile workers
    (``triton/_compile_warmup_pool.py``), stderr goes to ``/dev/null`` at exit — registered after
    every handler the process had at the load, so only handlers registered before it (``logging``'s
    flush, which writes nothing new) and the interpreter's own finalisation run after it."""
    global _NATIVE_EXIT_REPORT_DROPPED
    _warning_level(MODEL_LIBRARY_LOGGERS)
    if "triton" in sys.modules and not _NATIVE_EXIT_REPORT_DROPPED:
        import atexit

        atexit.register(_drop_stderr_at_exit)
        _NATIVE_EXIT_REPORT_DROPPED = True


class QuietLogs:
    """``--quiet`` for one run (the audit's, a roll-up's): call :meth:`quiet` inside the block to
    print nothing but gate failures and errors. Raises to ERROR the
    ``fair_forge_beam`` and ``apache_beam`` loggers and the HTTP clients' (the judge's OpenAI client
    logs one INFO line per request through ``httpx2``, older clients through ``httpx``/``httpcore``/
    ``openai``); drops what Beam logs on the root logger itself below ERROR (``apitools not found``,
    ``Resource module is not available``: a filter on the root logger sees only records logged on
    it, never those of named loggers), and every other record of Beam's below ERROR at the root
    logger's handlers (:class:`_BeamBelowErrorsDropped`: the output of Prism's job service, logged on
    a logger Beam names and sets to INFO itself); ignores Python warnings. Everything is restored on exit (a
    caller running several audits in one process keeps its own settings). Worker processes of
    other runners (Flink, Prism) configure their own logging (what they send back through Beam is Beam's
    record, dropped below ERROR); the multi-processing runner's workers inherit it
    (:mod:`fair_forge_beam.sdk_worker`)."""

    NAMES = ("fair_forge_beam", "apache_beam") + HTTP_CLIENT_LOGGERS + MODEL_LIBRARY_LOGGERS

    def __enter__(self):
        self.loggers = [logging.getLogger(n) for n in self.NAMES]
        self.previous = [lg.level for lg in self.loggers]
        self.logger = self.loggers[0]
        self.root_filter = None
        self.warnings = None
        return self

    def quiet(self) -> None:
        import warnings

        for lg in self.loggers:
            if lg.getEffectiveLevel() < logging.ERROR:
                lg.setLevel(logging.ERROR)
        self.root_filter = _ErrorsOnly()
        logging.getLogger().addFilter(self.root_filter)
        # Beam's records below ERROR, whatever logger Beam logged them on (a job server's output: trial46 B3)
        self.handlers = [(h, _BeamBelowErrorsDropped()) for h in logging.getLogger().handlers]
        for handler, kind in self.handlers:
            handler.addFilter(kind)
        from fair_forge_beam.sdk_worker import QUIET_WORKERS

        # the multi-process SDK workers the run starts inherit it (fair_forge_beam.sdk_worker; trial39 T13)
        self.worker_env = os.environ.get(QUIET_WORKERS)
        os.environ[QUIET_WORKERS] = "1"
        self.warnings = warnings.catch_warnings()
        self.warnings.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        for lg, level in zip(self.loggers, self.previous):
            lg.setLevel(level)
        if self.root_filter is not None:
            logging.getLogger().removeFilter(self.root_filter)
            for handler, kind in self.handlers:
                handler.removeFilter(kind)
            from fair_forge_beam.sdk_worker import QUIET_WORKERS

            if self.worker_env is None:
                os.environ.pop(QUIET_WORKERS, None)
            else:
                os.environ[QUIET_WORKERS] = self.worker_env
        if self.warnings is not None:
            self.warnings.__exit__(None, None, None)
        return False


class _EnvironmentFailureShownOnce(logging.Filter):
    """A run stopped by its machine (a full disk, a quota, a read-only file system, ``ulimit -f`` or
    ``-n``, a failing device: :func:`~fair_forge_beam.console.environment_failure`)
    is said in one line by the entry point, with the errno's text and the file or pipeline step.
    The ERROR record Beam's runner logs for the same failure (about 15 lines of a worker's
    traceback) is dropped from the console: it says nothing the line does not (decision,
    docs/reliability.md). So is the one it logs for Ctrl-C reaching a worker's step (the entry
    point says 'interrupted'). Every other ERROR record is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.name.startswith("apache_beam"):
            return True
        from fair_forge_beam.console import environment_failure, interruption

        exc = record.exc_info[1] if record.exc_info else None
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is shown as logging shows it
            return True
        if exc is not None and interruption(exc) or text.startswith("KeyboardInterrupt"):
            return False  # Ctrl-C: the entry point says 'interrupted'
        return environment_failure(exc) is None and environment_failure(RuntimeError(text)) is None


class _OneLineRetries(logging.Filter):
    """Beam's retry decorator (``apache_beam.utils.retry``) logs each retry with the whole
    traceback of the exception it caught; a console shows it as one line instead (what was
    retried, when, after which error), since the failure it retries is reported where it ends."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "Traceback for above exception" in record.msg and len(record.args or ()) == 4:
            seconds, what, error, _trace = record.args
            record.msg, record.args = "retrying %s in %.1f s after: %s", (what, float(seconds), str(error).strip())
        return True


class _ServiceStartAndStopAreDebug(logging.Filter):
    """Beam's subprocess server logs every start and every stop of the service it started (the Prism
    runner's job service, a Java expansion or Flink job server) as a WARNING, ``Really starting service
    at localhost:54897 with cmd: (...)`` and ``Really destroying service at …``: the normal start and
    end of every Prism run, where a user reads them as faults (trial35 T11: the stop, printed after the
    summary; trial46 B3: the start, before every Prism run's first line). Each record is made a DEBUG
    one: shown only where that logger is enabled for DEBUG. Beam's other records of that logger (a
    failed start, a port in use, a gRPC channel that would not close) are left as they are."""

    ROUTINE = ("Really starting service", "Really destroying service")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not str(record.msg).startswith(self.ROUTINE):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_BEAM_DIR: Optional[str] = None

#: what Beam's Prism runner names the lines of the Go binary's output it relays
#: (``apache_beam.runners.portability.prism_runner.PrismRunnerLogFilter``)
PRISM_RELAYED_NAMES = ("PrismRunner", "SdkWorker@")


def _beams_record(record: logging.LogRecord) -> bool:
    """Whether ``record`` is Beam's: its logger is (``apache_beam.*``); Beam's own code logged it, on
    the root logger or on a logger Beam names otherwise (its file is under the ``apache_beam``
    package: a job server's output is logged on a logger named after the job server's class,
    ``PrismJobServer``, ``FlinkJarJobServer``, by ``apache_beam/utils/subprocess_server.py``); or it
    is a line of Prism's own output that Beam relays, renamed (:data:`PRISM_RELAYED_NAMES`) and
    given the Go source's file and line when Prism names them (its ``module``, set where the record
    was made, stays Beam's ``subprocess_server``)."""
    global _BEAM_DIR
    if record.name.startswith("apache_beam"):
        return True
    if _BEAM_DIR is None:
        import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
        import apache_beam

        _BEAM_DIR = os.path.dirname(os.path.abspath(apache_beam.__file__)) + os.sep
    return ((record.pathname or "").startswith(_BEAM_DIR) or record.module == "subprocess_server"
            or record.name.startswith(PRISM_RELAYED_NAMES))


class _BeamBelowErrorsDropped(logging.Filter):
    """``--quiet`` on a handler of the root logger (:meth:`QuietLogs.quiet`): Beam's records
    (:func:`_beams_record`) below ERROR are dropped where they are written, whichever logger they
    were logged on. A logger's level or filter holds only for the records logged on that logger,
    and Beam logs a service's output (Prism's ``Serving JobManagement``, ``pipeline done!``, a Flink job
    server's Java lines) on a logger of its own naming, set to INFO by Beam itself as the service
    starts (``SubprocessJobServer.start``): raising ``apache_beam`` to ERROR never reached it (trial46
    B3: two INFO lines on every quiet Prism run). A handler filter sees each record last, at the level
    Beam's own filter gave it: Prism's errors are still shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not _beams_record(record)


class _BeamWarningsOnce(logging.Filter):
    """A warning Beam logs again with the same text from the same line (below ERROR) is shown once
    a run: Beam logs some of them once per worker thread, DoFn instance or model load (fresh13:
    RunInference's "Resource module is not available for current platform" 2-4 times a judge run,
    once for each judge DoFn's model load, when Beam's optional ``model_manager`` import fails). A
    record is Beam's when its logger is (``apache_beam.*``) or when Beam's own code logged it on the
    root logger (its file is under the ``apache_beam`` package). Messages that differ (a retry's
    error, a step's name) are all shown; ERROR and above always are. What was shown is the run's
    (:func:`fair_forge_beam.run_scope.per_run`): the next audit of the process shows Beam's warning about
    its own options again (trial44 B4: kept for the process, only its first audit did)."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or not _beams_record(record):
            return True
        try:
            key = (id(self), record.pathname, record.lineno, record.getMessage())  # each handler shows it once
        except Exception:  # noqa: BLE001 - a malformed record is shown as logging shows it
            return True
        seen = per_run("progress.beam_warnings_shown", set)
        with self._lock:
            if key in seen:
                return False
            if len(seen) < 10_000:  # bounded: past it, new warnings are shown (never dropped unseen)
                seen.add(key)
        return True


class _StderrOfTheMoment(logging.StreamHandler):
    """The command's log handler: it writes to ``sys.stderr`` as it is when a record is written, as
    Python's last-resort handler does, not as it was when the handler was made (trial44 B3:
    ``basicConfig``'s handler kept the first call's stream, so a service that gives each ``main()`` call
    its own ``contextlib.redirect_stderr`` got every later call's log lines in the first call's buffer).
    A stream set on it (``handler.stream = f``, ``setStream``) is kept."""

    def __init__(self):
        logging.Handler.__init__(self)
        self._stream = None

    @property
    def stream(self):
        return sys.stderr if self._stream is None else self._stream

    @stream.setter
    def stream(self, value) -> None:
        self._stream = value


def _add_once(filterer, kind) -> None:
    """``kind()`` on ``filterer`` (a logger, a handler) unless one is there (each command adds its filters)."""
    if not any(isinstance(f, kind) for f in filterer.filters):
        filterer.addFilter(kind())


def cli_logging() -> None:
    """The logging of a command-line entry point: INFO lines with time and logger on stderr,
    Beam's own at WARNING, Beam's retries in one line each (:class:`_OneLineRetries`), and
    apitools' "not found" notice (a Google Cloud extra this package does not need) dropped, the
    start and stop of a service Beam started (Prism's job service) DEBUG records (:class:`_ServiceStartAndStopAreDebug`), and a
    warning Beam repeats (per worker thread, DoFn or model load) shown once (:class:`_BeamWarningsOnce`).
    The HTTP clients' loggers (:data:`HTTP_CLIENT_LOGGERS`) are at WARNING: their INFO lines are one
    per request (``HTTP Request: POST ... "HTTP/1.1 200 OK"``, 1,488 on a judge run of README's
    data), a client's debug trace, not a run's progress; their warnings and errors are kept. A
    level the caller set on one of them before is kept.
    ``--quiet`` narrows it further while a run lasts (:class:`RunLogging`).

    Called first by every command's ``main``, it begins the command's run
    (:func:`fair_forge_beam.run_scope.command_begins`), and it may be called any number of times in a
    process: the root handler (made only when the root logger has none: a caller's own is kept) writes to
    the ``sys.stderr`` of the moment (:class:`_StderrOfTheMoment`), and each filter is added once (trial44
    B8: one more apitools filter per call, 1,002 after 1,000 calls, 791 µs per log record instead of 31)."""
    from fair_forge_beam.sdk_worker import NoApitoolsNotice
    from fair_forge_beam.urls import install_log_masking

    command_begins()
    install_log_masking()  # every log line masked where it is made: URL credentials, key values
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=[_StderrOfTheMoment()])  # nothing done when the root logger has a handler
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    quiet_http_clients()
    _add_once(logging.getLogger("apache_beam.utils.retry"), _OneLineRetries)
    _add_once(logging.getLogger("apache_beam.utils.subprocess_server"), _ServiceStartAndStopAreDebug)
    for handler in logging.getLogger().handlers:
        for kind in (NoApitoolsNotice, _EnvironmentFailureShownOnce, _BeamWarningsOnce):
            _add_once(handler, kind)
