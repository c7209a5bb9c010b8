"""A multi-process SDK worker of the launcher's own runs (``--direct_running_mode=multi_processing``),
started as ``python -m fair_forge_beam.sdk_worker apache_beam.runners.worker.sdk_worker_main``
by :func:`fair_forge_beam.beam_pipeline.run_pipeline`'s worker start (every such worker, ``--quiet`` or not).

**A console that refuses writes never stops it** (trial46b B4): its ``sys.stdout`` and ``sys.stderr`` drop what
the machine refuses (:func:`fair_forge_beam.console.unfailing_streams`). Beam's harness prints a failed
bundle's traceback to stderr before it answers the launcher (``SdkHarness._execute``); under ``ulimit -f`` with
stderr in a file (a cron job's ``>> log 2>&1``) that ``print`` raised ``OSError: [Errno 27] File too large``,
the bundle's answer was never sent, and the launcher waited for it for ever.

**The worker's own stderr shows what the launcher would show of an in-memory run** (every such worker,
``--quiet`` or not): a worker is a process of its own, and its root logger, given a stderr handler by the first
warning Beam logs at import (``apitools not found``) and set to INFO by Beam's harness, printed about 60 lines
per run of Beam's INFO records (``Python sdk harness starting``, ``BatchElements statistics``, ``Moving 2
temporary files``: trial39 T13 under ``--quiet``; trial49 without it, where the in-memory run of the same
command prints one line). Here the worker's stderr handler is installed first, at WARNING (at ERROR under the
launcher's ``--quiet``, :data:`QUIET_WORKERS` set in the environment the workers inherit, where Python warnings
are ignored too), and Beam is imported under the package's logging guard (case-006). Its records reach the
launcher through Beam's logging service, where the launcher's own levels and ``--quiet``
(:class:`fair_forge_beam.progress.QuietLogs`) hold: while that service carries them, the worker's own stderr
shows none of them, nor the traceback Beam's harness prints beside the record it logs of a failed bundle
(fix47b: each ERROR was printed twice, the worker's line and the launcher's relay, and a failed write's
traceback about 100 lines in all). What a worker logs before the service is connected or after it is closed (a
worker that cannot start, its last words) is still shown on its stderr. Then Beam's worker module
runs as ``__main__``, as it would have."""
from __future__ import annotations

import logging
import os
import runpy
import sys

#: the environment variable that tells a worker its command runs with ``--quiet``
QUIET_WORKERS = "FAIR_FORGE_QUIET_WORKERS"


def relayed() -> bool:
    """Whether this worker's log records reach the launcher now: Beam's logging service handler
    (``FnApiLogRecordHandler``) is on the root logger and not closed."""
    service = sys.modules.get("apache_beam.runners.worker.log_handler")
    if service is None:
        return False
    return any(isinstance(h, service.FnApiLogRecordHandler) and getattr(h, "_alive", False)
               for h in logging.getLogger().handlers)


class _NotRelayed(logging.Filter):
    """The worker's own stderr handler under ``--quiet``: a record the launcher receives is not shown here too."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not relayed()


class NoApitoolsNotice(logging.Filter):
    """Beam's "apitools not found" notice (a Google Cloud extra this package does not need) dropped: on a
    worker's own stderr here, on the launcher's log handler (:func:`fair_forge_beam.progress.cli_logging`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


class _NoMainSessionNotice(logging.Filter):
    """Beam's "No semi_persistent_directory found" notice at a worker's start dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No semi_persistent_directory found")


def _print_unless_relayed(*args, **kwargs) -> None:
    """``print`` for Beam's harness module under ``--quiet``: what it prints to stderr (a failed bundle's traceback,
    which it logs too, as an ERROR record) is dropped while the launcher receives the worker's records."""
    if kwargs.get("file") in (sys.stderr, sys.__stderr__) and relayed():
        return
    print(*args, **kwargs)


def worker_logging(quiet: bool) -> None:
    """The worker's own stderr shows warnings and errors (``quiet``: errors only, and no Python warnings), and
    none the launcher receives (Beam's later ``basicConfig`` finds a handler and adds none)."""
    import warnings

    handler = logging.StreamHandler()
    handler.setLevel(logging.ERROR if quiet else logging.WARNING)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    handler.addFilter(_NotRelayed())
    handler.addFilter(NoApitoolsNotice())
    logging.getLogger().addHandler(handler)
    # Beam's harness notes at every worker's start that no main session was staged: this package's DoFns
    # are pickled by reference to its modules and need none (relayed, it was one WARN line per worker); the
    # harness's module logs as ``__main__``, the name it runs under here (:func:`main`)
    logging.getLogger("__main__").addFilter(_NoMainSessionNotice())
    if quiet:
        warnings.simplefilter("ignore")
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.runners.worker import sdk_worker

    sdk_worker.print = _print_unless_relayed  # the module's one print: SdkHarness._execute's traceback


def main() -> None:
    from fair_forge_beam.console import unfailing_streams

    unfailing_streams()  # first: every handler and print of the worker writes through them
    worker_logging(quiet=bool(os.environ.get(QUIET_WORKERS)))
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
