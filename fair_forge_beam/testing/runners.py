"""Where the real runners' artifacts live, and the Beam options that select each runner.

``.ci/get_runners.sh`` fetches the artifacts into one cache folder (default
``~/.cache/fair_forge_beam/runners``, or ``$FAIR_FORGE_RUNNERS_DIR``):

* ``prism-v<beam version>`` — Beam's Prism runner, built with ``go install`` from the Go module
  proxy (``github.com/apache/beam/sdks/v2/go/cmd/prism`` at the installed Beam's tag);
* ``beam-runners-flink-<flink>-job-server-<beam version>.jar`` — Beam's Flink job server from
  Maven Central (an embedded Flink cluster, ``--flink_master=[local]``);
* ``<name>.unavailable`` — written instead when the registry answered that it does not serve
  the artifact (a definitive "not found", not a time-out); its text is the registry's answer.

``$FAIR_FORGE_PRISM`` / ``$FAIR_FORGE_FLINK_JOB_SERVER_JAR`` point at artifacts obtained
elsewhere. Nothing here downloads anything: Prism is always given by path
(``--prism_location``), so Beam never tries its own download.

The four runners of the identity suite (``RUNNERS``):

* ``in_memory`` — FnApiRunner, one process;
* ``multi_process`` — FnApiRunner with 2 worker processes
  (``--direct_running_mode=multi_processing``; never ``multi_threading``, DESIGN §9);
* ``flink`` — ``FlinkRunner`` through Beam's job server, embedded cluster, LOOPBACK workers;
* ``prism`` — ``PrismRunner`` (Beam's Go runner), LOOPBACK workers.

LOOPBACK runs the Python SDK harness inside the submitting process, so user code is imported
from the same installed package as the driver's.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

__all__ = [
    "RUNNERS", "FNAPI", "cache_dir", "beam_version", "prism_binary", "flink_job_server_jar",
    "unavailable_reason", "missing_reason", "runner_args",
]

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
RUNNERS = ("in_memory", "multi_process", "flink", "prism")
_FLINK_JAR = re.compile(r"beam-runners-flink-(?P<flink>[0-9.]+)-job-server-(?P<beam>[0-9][^/]*)\.jar$")


def cache_dir() -> Path:
    """The runner artifact cache: ``$FAIR_FORGE_RUNNERS_DIR`` or ``~/.cache/fair_forge_beam/runners``."""
    env = os.environ.get("FAIR_FORGE_RUNNERS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fair_forge_beam" / "runners"


def beam_version() -> str:
    """The installed Apache Beam version, e.g. ``"2.77.0"``."""
    from apache_beam.version import __version__

    return __version__


def prism_binary() -> Optional[Path]:
    """Path of an executable Prism binary for the installed Beam version, or ``None``."""
    env = os.environ.get("FAIR_FORGE_PRISM")
    path = Path(env) if env else cache_dir() / f"prism-v{beam_version()}"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def flink_job_server_jar() -> Optional[Path]:
    """Path of Beam's Flink job-server jar for the installed Beam version, or ``None``."""
    env = os.environ.get("FAIR_FORGE_FLINK_JOB_SERVER_JAR")
    if env:
        return Path(env) if Path(env).is_file() else None
    jars = sorted(
        p for p in cache_dir().glob("beam-runners-flink-*-job-server-*.jar")
        if (m := _FLINK_JAR.search(p.name)) and m["beam"] == beam_version()
    )
    return jars[-1] if jars else None


def unavailable_reason(name: str) -> Optional[str]:
    """The registry's "not served" answer recorded by ``.ci/get_runners.sh`` for ``name``
    (``"flink"`` or ``"prism"``), or ``None`` when none was recorded."""
    path = cache_dir() / f"{name}.unavailable"
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8").strip() or "(no detail)"


def missing_reason(name: str) -> Optional[str]:
    """Why runner ``name`` cannot run here, or ``None`` when it can."""
    if name in ("in_memory", "multi_process"):
        return None
    if name == "prism":
        found = prism_binary()
    elif name == "flink":
        found = flink_job_server_jar()
    else:
        raise ValueError(f"unknown runner {name!r}; known: {', '.join(RUNNERS)}")
    if found is not None:
        return None
    return f"{name}: no artifact in {cache_dir()} (run .ci/get_runners.sh)"


def runner_args(name: str) -> list[str]:
    """Beam pipeline options selecting runner ``name`` (one of ``RUNNERS``).

    Raises ``ValueError`` for an unknown name and ``FileNotFoundError`` when the runner's
    artifact is missing (see :func:`missing_reason`).
    """
    if name == "in_memory":
        return [f"--runner={FNAPI}"]
    if name == "multi_process":
        return [f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    reason = missing_reason(name)
    if reason:
        raise FileNotFoundError(reason)
    if name == "prism":
        return ["--runner=PrismRunner", f"--prism_location={prism_binary()}", "--prism_log_level=warn"]
    jar = flink_job_server_jar()
    m = _FLINK_JAR.search(jar.name)
    flink = m["flink"] if m else None
    return [
        "--runner=FlinkRunner", "--flink_master=[local]", f"--flink_job_server_jar={jar}",
        *([f"--flink_version={flink}"] if flink else []),
        "--environment_type=LOOPBACK", "--parallelism=2",
    ]
