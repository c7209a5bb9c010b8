"""A run, the one home of the idea: what a run keeps in the process ends with it (trial44: a notebook or a
service runs many), and what it says once or counts is its own. Two facets, two lifetimes:

**What a run registers, to undo** (:func:`one_run`, :func:`at_run_end`). A command run from Python
(``pipelines.audit.run``, :func:`~fair_forge_beam.beam_pipeline.run_pipeline`, ``Metric.run``, the stage
commands, loop, optimize) is one :func:`one_run` block. What the run registers in the process for its own
use — the key variables its endpoints name (:func:`fair_forge_beam.io.secrets.register_secret_env`) and the
endpoint clients its in-process workers open (thread pool, HTTP connections, answer-cache connections:
:class:`fair_forge_beam.components.replies.EndpointClient`) — is handed to :func:`at_run_end`, and undone
or closed when the run ends, however it ends (before, trial44 breaks 1 and 2: a judge run left its key
variable registered for good, so a later run without any endpoint masked its value, and left its 16 judge
threads, keep-alive sockets and about 17 SQLite handles to ``__del__``). Blocks nest (an audit's holds its
pipeline's) and may overlap in threads (two audits at once): a process-wide count, so what is handed
over while any block is open is undone when the last open block ends — an overlapping run never loses
what another registered, for what is registered is the process's (``os.environ``, a client a worker
thread of either run may hold). What is registered with no block open (a user's own pipeline object, a
worker process of another runner, which ends with the job) is kept, as before. Beam's ``RunInference``
gives its model no teardown (apache-beam 2.77), so the run that started the job closes the clients
opened in its process, after the job has finished.

**What a run says once or counts** (:func:`per_run`, :func:`current_run`, :func:`new_run`,
:func:`command_begins`): the unset-key and repeated-input warnings, Beam's repeated warnings, the
usage-count warning, the progress tallies — values of the current :class:`_Run`, never a module's
global (trial44 B2-B4, B7: kept per process, a second audit missed the first's warnings and two audits
in two threads merged their progress). A context variable: each command's run is its own, apart from
one in another thread, begun where a command begins (:func:`fair_forge_beam.console.guarded`,
:func:`command_begins` from every command's ``cli_logging``). Code in no command's context (a thread of
Beam's or of a pool, started with an empty context; a library call such as ``Metric.run``) uses the run
begun last.

How they relate: the same run, seen from two sides. A command's ``main`` begins its per-run values, then
its work opens :func:`one_run` blocks; a library call opens a block and uses the latest values. They are
not one lifetime: undoing must wait for every overlapping run (a count), while what is said once must
not be shared between two runs at once (a context) — merging them would either close one run's clients
under another or merge two runs' warnings and tallies.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from typing import Any, Callable, Iterator

__all__ = ["one_run", "at_run_end", "run_open", "per_run", "current_run", "new_run", "command_begins"]

_log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_OPEN = [0]  # blocks open now, in every thread of the process
_AT_END: list = []  # what the open runs handed over: called, newest first, when the last one ends


@contextlib.contextmanager
def one_run() -> Iterator[None]:
    """One run: what is handed to :func:`at_run_end` inside the block is undone when it ends (when the
    last block open in the process ends, if others are). The callables are told whether the block ended
    without an exception (``ended_well``: a client then waits for its idle threads to end)."""
    with _LOCK:
        _OPEN[0] += 1
    ended_well = False
    try:
        yield
        ended_well = True
    finally:
        with _LOCK:
            _OPEN[0] -= 1
            todo = _AT_END[::-1] if _OPEN[0] == 0 else []
            if todo:
                _AT_END.clear()
        for undo in todo:
            try:
                undo(ended_well)
            except Exception:  # noqa: BLE001 - one resource that cannot be released leaves the others to be
                _log.debug("releasing %r at the end of a run failed", undo, exc_info=True)


def at_run_end(undo: Callable[[bool], None]) -> bool:
    """Hand ``undo(ended_well)`` to the runs open now: it is called when the last of them ends. Returns
    False (``undo`` is not kept) when no run is open: what was registered is then the process's."""
    with _LOCK:
        if not _OPEN[0]:
            return False
        _AT_END.append(undo)
        return True


def run_open() -> bool:
    """Whether a run (a :func:`one_run` block) is open in this process."""
    with _LOCK:
        return bool(_OPEN[0])


# What a run says once or counts (the module docstring's second facet): a context variable, not the count.


class _Run:
    """What one run of a command says or counts once (:func:`per_run`): a warning said once a run, the
    progress tallies. Made new where a command begins (:func:`~fair_forge_beam.console.guarded`,
    :func:`command_begins`), so a later command in the same process (a notebook, a service calling
    ``main()`` again) or one in another thread starts from nothing (trial44 B2-B4, B7: kept per process,
    a second audit missed the first's warnings, and two audits in two threads merged their progress)."""

    def __init__(self, claimed: bool = False):
        self.values: dict = {}
        self.lock = threading.Lock()
        self.claimed = claimed  # a command's main began in it (command_begins): the next one gets a new run


#: the run of the code running in this context (a thread starts with none: the latest run below)
_RUN: contextvars.ContextVar = contextvars.ContextVar("fair_forge_beam_run", default=None)
#: [the run begun last in the process]: the run of code in no command's context — a thread of Beam's or
#: of a pool started by the run (a thread starts with an empty context), a library call after a command
_LATEST = [_Run()]


def current_run() -> _Run:
    """The run of the code running now (:func:`per_run`): an object to compare, nothing to read in it."""
    return _RUN.get() or _LATEST[0]


def per_run(name: str, factory: Callable[[], Any]) -> Any:
    """The object ``name`` of the current run, made by ``factory()`` at its first use in the run: the
    one home of what a command says once or counts (``per_run("options.warned_keys", set)``), never a
    module's global, which would hold it for the process's life. In no command's context (a thread the
    run started without its context: Beam's, a pool's; a library call), the run begun last."""
    run = current_run()
    value = run.values.get(name)
    if value is None:
        with run.lock:
            value = run.values.get(name)
            if value is None:
                value = run.values[name] = factory()
    return value


@contextlib.contextmanager
def new_run() -> Iterator[None]:
    """A new run for the block, in this context (thread) only; the caller's run is back after it."""
    run = _LATEST[0] = _Run()
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)


def command_begins() -> None:
    """A command's ``main`` begins (:func:`fair_forge_beam.progress.cli_logging`, first in every one): the
    run :func:`~fair_forge_beam.console.guarded` began for it is taken as it is; a ``main`` called from
    Python without it (``pipelines.loop.main([...])``), or a second one in the same run, gets a new run
    for this context."""
    run = _RUN.get()
    if run is None or run.claimed:
        _RUN.set(_Run(claimed=True))
        _LATEST[0] = _RUN.get()
    else:
        run.claimed = True
