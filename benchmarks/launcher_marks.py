"""The end the benchmarks' launcher shims share (``bench_flink_scale.py``, ``bench_launcher_memory.py``):
each shim (``sys.executable -c WRAPPER``) patches the marks it records, then calls
:func:`run_audit_and_write`, which runs the audit's ``main`` in that process and writes the marks,
the exit code, the end time and the process's peak resident set (``getrusage(RUSAGE_SELF)``, in KB)
as JSON to the file named by an environment variable."""
from __future__ import annotations

import json
import os
import resource
import sys
import time


def run_audit_and_write(marks: dict, out_env: str) -> None:
    """``pipelines.audit.main(sys.argv[1:])``, then ``{**marks, "code", "t_end", "maxrss_kb"}`` to
    the file ``os.environ[out_env]`` (written when the audit raises too)."""
    from pipelines import audit

    code = 1
    try:
        code = audit.main(sys.argv[1:])
    finally:
        with open(os.environ[out_env], "w") as f:
            json.dump({**marks, "code": code, "t_end": time.time(),
                       "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, f)
