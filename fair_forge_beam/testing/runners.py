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
from the same installed package as the driver's. ``EXTRA_RUNNERS`` adds ``prism_workers``:
Prism with an EXTERNAL environment served by :class:`WorkerPool` (Beam's
``worker_pool_main``), whose SDK workers are separate ``python`` processes importing the
installed package.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

__all__ = [
    "RUNNERS", "FNAPI", "cache_dir", "beam_version", "prism_binary", "flink_job_server_jar",
    "unavailable_reason", "missing_reason", "runner_args", "EXTRA_RUNNERS", "WorkerPool",
]

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
RUNNERS = ("in_memory", "multi_process", "flink", "prism")
EXTRA_RUNNERS = ("prism_workers",)
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
    (``"flink"`` or ``"prism"``; ``"prism_workers"`` reads Prism's), or ``None`` when none was recorded."""
    path = cache_dir() / f"{'prism' if name == 'prism_workers' else name}.unavailable"
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8").strip() or "(no detail)"


def missing_reason(name: str) -> Optional[str]:
    """Why runner ``name`` cannot run here, or ``None`` when it can."""
    if name in ("in_memory", "multi_process"):
        return None
    if name in ("prism", "prism_workers"):
        found = prism_binary()
    elif name == "flink":
        found = flink_job_server_jar()
    else:
        raise ValueError(f"unknown runner {name!r}; known: {', '.join(RUNNERS + EXTRA_RUNNERS)}")
    if found is not None:
        return None
    return f"{name}: no artifact in {cache_dir()} (run .ci/get_runners.sh)"


def runner_args(name: str, worker_pool: Optional[str] = None) -> list[str]:
    """Beam pipeline options selecting runner ``name`` (one of ``RUNNERS`` or ``EXTRA_RUNNERS``).

    ``worker_pool`` is the ``host:port`` of a running :class:`WorkerPool`, required for
    ``prism_workers``. Raises ``ValueError`` for an unknown name or a missing ``worker_pool``
    and ``FileNotFoundError`` when the runner's artifact is missing (see :func:`missing_reason`).
    """
    if name == "in_memory":
        return [f"--runner={FNAPI}"]
    if name == "multi_process":
        return [f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    reason = missing_reason(name)
    if reason:
        raise FileNotFoundError(reason)
    if name in ("prism", "prism_workers"):
        args = ["--runner=PrismRunner", f"--prism_location={prism_binary()}", "--prism_log_level=warn"]
        if name == "prism":
            return args
        if not worker_pool:
            raise ValueError("prism_workers needs the address of a running WorkerPool")
        return [*args, "--environment_type=EXTERNAL", f"--environment_config={worker_pool}"]
    jar = flink_job_server_jar()
    m = _FLINK_JAR.search(jar.name)
    flink = m["flink"] if m else None
    return [
        "--runner=FlinkRunner", "--flink_master=[local]", f"--flink_job_server_jar={jar}",
        *([f"--flink_version={flink}"] if flink else []),
        "--environment_type=LOOPBACK", "--parallelism=2",
    ]


class WorkerPool:
    """Beam's Python worker pool (``apache_beam.runners.worker.worker_pool_main``) on
    127.0.0.1, as a context manager whose value is its ``host:port``.

    A runner given ``--environment_type=EXTERNAL --environment_config=<address>`` asks it for
    SDK workers; each is a new ``python`` process (the one on ``PATH``) importing the installed
    package. Raises ``RuntimeError`` when the pool does not listen within ``timeout`` seconds.
    The pool process is ended on exit.
    """

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main", f"--service_port={port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker pool exited with code {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return f"localhost:{port}"
            except OSError:
                time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"worker pool did not listen on port {port} within {self.timeout} s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
