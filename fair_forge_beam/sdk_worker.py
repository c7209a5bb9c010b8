"""A multi-process SDK worker of the launcher's own runs (``--direct_running_mode=multi_processing``),
started as ``python -m fair_forge_beam.sdk_worker apache_beam.runners.worker.sdk_worker_main``
by :func:`fair_forge_beam.beam_pipeline.run_pipeline`'s worker start when the command runs with
``--quiet`` (:data:`QUIET_WORKERS` set in the environment the workers inherit).

A worker is a process of its own: the launcher's ``--quiet`` (:class:`fair_forge_beam.progress.QuietLogs`)
never reached it, and its root logger, given a stderr handler by the first warning Beam logs at import
(``apitools not found``) and set to INFO by Beam's harness, printed about 60 lines per judge run
(``Python sdk harness starting``, ``BatchElements statistics``: trial39 T13). Here the worker's stderr
handler is installed first, at ERROR, and Python warnings are ignored; its records still reach the
launcher through Beam's logging service, where ``--quiet`` holds. Then Beam's worker module runs as
``__main__``, as it would have."""
from __future__ import annotations

import logging
import os
import runpy
import sys

#: the environment variable that tells a worker its command runs with ``--quiet``
QUIET_WORKERS = "FAIR_FORGE_QUIET_WORKERS"


def quiet_worker_logging() -> None:
    """The worker's own stderr shows errors only (Beam's later ``basicConfig`` finds a handler and adds none)."""
    import warnings

    handler = logging.StreamHandler()
    handler.setLevel(logging.ERROR)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.getLogger().addHandler(handler)
    warnings.simplefilter("ignore")


def main() -> None:
    if os.environ.get(QUIET_WORKERS):
        quiet_worker_logging()
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
