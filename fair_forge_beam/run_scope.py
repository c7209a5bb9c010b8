"""What a run keeps in the process ends with the run (trial44: a notebook or a service runs many).

A command run from Python (``pipelines.audit.run``, :func:`~fair_forge_beam.beam_pipeline.run_pipeline`,
``Metric.run``, the stage commands) is one :func:`one_run` block. What the run registers in the
process for its own use — the key variables its endpoints name (:func:`fair_forge_beam.io.secrets.register_secret_env`)
and the endpoint clients its in-process workers open (thread pool, HTTP connections, answer-cache
connections: :class:`fair_forge_beam.components.replies.EndpointClient`) — is handed to
:func:`at_run_end`, and undone or closed when the run ends, however it ends. Before (trial44 breaks
1 and 2), a judge run left its key variable registered for good, so a later run without any endpoint
masked that variable's value, and left its 16 judge threads, keep-alive sockets and about 17 SQLite
handles to ``__del__`` (never, for the first run's), the answers in the cache's ``-wal`` file.

Blocks nest (an audit's block holds its pipeline's) and may overlap in threads (two audits at once):
what is handed over while any block is open is undone when the last open block ends, so an overlapping
run never loses what another one registered. What is registered with no block open (a user's own
pipeline object, a worker process of another runner, which ends with the job) is kept, as before.

Beam's ``RunInference`` gives its model no teardown (its ``_RunInferenceDoFn`` has none: apache-beam
2.77), so a client it loads cannot be closed by Beam's lifecycle; the run that started the job closes
the clients opened in its process, after the job has finished.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable, Iterator

__all__ = ["one_run", "at_run_end", "run_open"]

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
