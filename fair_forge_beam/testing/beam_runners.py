"""Where the real runners' artifacts live, and the Beam options that select each runner.

``.ci/get_runners.sh`` fetches the artifacts into one cache folder (default
``~/.cache/fair_forge_beam/runners``, or ``$FAIR_FORGE_RUNNERS_DIR``):

* ``prism-v<beam version>`` — Beam's Prism runner, built with ``go install`` from the Go module
  proxy (``github.com/apache/beam/sdks/v2/go/cmd/prism`` at the installed Beam's tag);
* ``flink-<version>/`` — a standalone Flink distribution (1.19.3), unpacked from the
  ``apache-flink-libraries`` sdist and the ``apache-flink`` wheel of the Python package registry
  (downloaded with ``pip download --no-deps``, never installed: apache-flink pins apache-beam<2.49);
* ``flink-job-server/lib/`` — the classpath of Beam's Flink job server, assembled by
  ``mvn dependency:copy-dependencies`` over ``.ci/flink/pom.xml`` (beam-runners-flink-1.19 2.70.0
  plus beam-runners-java-job-service 2.65.0; Beam's prebuilt job-server jar is not served);
* ``beam-python-boot-v<beam version>`` — Beam's Python SDK boot binary (``go install
  github.com/apache/beam/sdks/v2/python/container@v<beam>``), the PROCESS workers' command;
* ``<name>.unavailable`` — written instead when the registry answered that it does not serve
  the artifact (a definitive "not found", not a time-out); its text is the registry's answer.

``$FAIR_FORGE_PRISM`` points at a Prism binary obtained elsewhere. Nothing here downloads anything: Prism is always given by path
(``--prism_location``), so Beam never tries its own download.

The four runners of the identity suite (``RUNNERS``):

* ``in_memory`` — FnApiRunner, one process;
* ``multi_process`` — FnApiRunner with 2 worker processes
  (``--direct_running_mode=multi_processing``; never ``multi_threading``, DESIGN §9);
* ``flink`` — a real Flink cluster (JobManager + 2 TaskManagers, :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster`)
  reached with ``PortableRunner`` through Beam's job server, parallelism 2, PROCESS workers
  (separate ``python`` processes started by the TaskManagers, importing the installed package);
* ``prism`` — ``PrismRunner`` (Beam's Go runner), LOOPBACK workers.

Prism's LOOPBACK runs the Python SDK harness inside the submitting process, so user code is
imported from the same installed package as the driver's. ``EXTRA_RUNNERS`` adds ``prism_workers``:
Prism with an EXTERNAL environment served by :class:`WorkerPool` (Beam's
``worker_pool_main``), whose SDK workers are separate processes of the launching interpreter
(``sys.executable``, through a wrapper first on the pool's ``PATH``) importing the installed
package.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from fair_forge_beam.testing.reaper import OwnedGroups, end_groups

__all__ = [
    "RUNNERS", "FNAPI", "cache_dir", "beam_version", "prism_binary", "flink_artifacts", "FLINK_VERSION",
    "unavailable_reason", "missing_reason", "runner_args", "EXTRA_RUNNERS", "WorkerPool",
]

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
RUNNERS = ("in_memory", "multi_process", "flink", "prism")
EXTRA_RUNNERS = ("prism_workers",)
FLINK_VERSION = "1.19.3"  # the distribution .ci/get_runners.sh unpacks ($FAIR_FORGE_FLINK_DIST_VERSION)


def cache_dir() -> Path:
    """The runner artifact cache: ``$FAIR_FORGE_RUNNERS_DIR`` or ``~/.cache/fair_forge_beam/runners``."""
    env = os.environ.get("FAIR_FORGE_RUNNERS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fair_forge_beam" / "runners"


def beam_version() -> str:
    """The installed Apache Beam version, e.g. ``"2.77.0"``."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.version import __version__

    return __version__


def prism_binary() -> Optional[Path]:
    """Path of an executable Prism binary for the installed Beam version, or ``None``."""
    env = os.environ.get("FAIR_FORGE_PRISM")
    path = Path(env) if env else cache_dir() / f"prism-v{beam_version()}"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def flink_artifacts() -> dict[str, Optional[Path]]:
    """The three Flink artifacts in the cache, each a path or ``None`` when missing (incomplete):
    ``flink_home`` (the distribution), ``job_server_lib`` (the job server's jar folder) and
    ``boot`` (Beam's Python boot binary for the installed Beam version)."""
    d = cache_dir()
    home = d / f"flink-{os.environ.get('FAIR_FORGE_FLINK_DIST_VERSION', FLINK_VERSION)}"
    lib = d / "flink-job-server" / "lib"
    boot = d / f"beam-python-boot-v{beam_version()}"
    return {
        "flink_home": home if (home / ".complete").is_file() else None,
        "job_server_lib": lib if (lib / ".complete").is_file() else None,
        "boot": boot if boot.is_file() and os.access(boot, os.X_OK) else None,
    }


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
        missing = [k for k, v in flink_artifacts().items() if v is None]
        if not missing and shutil.which("java"):
            return None
        what = ", ".join(missing) if missing else "java on PATH"
        return f"{name}: missing {what} in {cache_dir()} (run .ci/get_runners.sh)"
    else:
        raise ValueError(f"unknown runner {name!r}; known: {', '.join(RUNNERS + EXTRA_RUNNERS)}")
    if found is not None:
        return None
    return f"{name}: no artifact in {cache_dir()} (run .ci/get_runners.sh)"


def runner_args(name: str, worker_pool: Optional[str] = None, flink_cluster=None) -> list[str]:
    """Beam pipeline options selecting runner ``name`` (one of ``RUNNERS`` or ``EXTRA_RUNNERS``).

    ``worker_pool`` is the ``host:port`` of a running :class:`WorkerPool`, required for
    ``prism_workers``; ``flink_cluster`` a started
    :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster`, required for ``flink``.
    Raises ``ValueError`` for an unknown name or a missing ``worker_pool``/``flink_cluster``
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
    if flink_cluster is None:
        raise ValueError("flink needs a started FlinkCluster (fair_forge_beam.testing.flink_cluster)")
    return flink_cluster.runner_args()


class WorkerPool(OwnedGroups):
    """Beam's Python worker pool (``apache_beam.runners.worker.worker_pool_main``) on
    127.0.0.1, as a context manager whose value is its ``host:port``.

    A runner given ``--environment_type=EXTERNAL --environment_config=<address>`` asks it for
    SDK workers; Beam's pool starts each as ``python`` from its ``PATH``, so the pool runs with
    the wrappers of :func:`~fair_forge_beam.process_workers.write_python_wrapper` first on it:
    every worker is ``python`` (default ``sys.executable``, the launching interpreter, venv
    included) importing the installed package, whatever ``python`` the user's ``PATH`` holds.
    Their stderr and the pool's are kept in a temporary folder (:meth:`stderr_report`), removed on
    exit. Raises ``RuntimeError`` (with the pool's stderr) when the pool does not listen within
    ``timeout`` seconds. The pool runs in a process group of its own with the workers it starts;
    the group is ended on exit, and with the process that entered the pool should that process end
    first (:class:`~fair_forge_beam.testing.reaper.Reaper`: a killed test run).
    """

    ends_with_owner = True

    def __init__(self, timeout: float = 60.0, python: Optional[str] = None):
        self.timeout = timeout
        self.python = python or sys.executable  # as it is: resolving it would lose a venv
        self.proc: Optional[subprocess.Popen] = None
        self.folder: Optional[Path] = None
        self.started = 0.0

    def stderr_report(self) -> str:
        """What the pool and its workers wrote to stderr since the pool started (``""``: nothing)."""
        from fair_forge_beam.process_workers import stderr_report

        return stderr_report(self.folder, self.started) if self.folder is not None else ""

    def __enter__(self) -> str:
        import tempfile

        from fair_forge_beam.process_workers import STDERR_DIR, write_python_wrapper

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.started = time.time()
        self.folder = Path(tempfile.mkdtemp(prefix="ffb-worker-pool-"))
        write_python_wrapper(self.folder, self.python)
        env = {**os.environ, "PATH": os.pathsep.join([str(self.folder), os.environ.get("PATH", "")])}
        with open(self.folder / STDERR_DIR / f"pool-{int(self.started)}-{os.getpid()}.stderr", "ab") as err:
            self.proc = subprocess.Popen(
                [self.python, "-m", "apache_beam.runners.worker.worker_pool_main", f"--service_port={port}"],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            )
        self._guard(self.proc.pid)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                report = self.stderr_report()
                self.__exit__(None, None, None)
                raise RuntimeError(f"worker pool exited with code {self.proc.returncode}\n{report}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return f"localhost:{port}"
            except OSError:
                time.sleep(0.2)
        report = self.stderr_report()
        self.__exit__(None, None, None)
        raise RuntimeError(f"worker pool did not listen on port {port} within {self.timeout} s\n{report}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            end_groups([self.proc.pid], 10.0, [self.proc])  # the pool and the workers it started
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._release([self.proc.pid])
        self.proc = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
