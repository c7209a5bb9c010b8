"""A real Kafka broker and Beam's Java expansion service for KafkaIO, on this machine, for tests.

Built from the artifacts ``.ci/get_kafka.sh`` caches next to the runners of
``.ci/get_runners.sh`` (:func:`fair_forge_beam.testing.beam_runners.cache_dir`):

* ``kafka-broker/lib/`` — Apache Kafka 4.1 (``kafka_2.13`` + ``kafka-tools`` from Maven
  Central, ``.ci/kafka/broker-pom.xml``). :class:`KafkaBroker` formats a one-node KRaft
  storage (``kafka.tools.StorageTool format``) and runs ``kafka.Kafka`` as broker and
  controller, both listeners on 127.0.0.1 only, free ports.
* ``kafka-expansion/lib/`` — Beam 2.70's Java expansion service, KafkaIO (``io.confluent:*``
  excluded: not served), the Java SDK harness, jamm and ``kafka-clients`` 3.9.1, on one classpath
  with Beam's Flink job server (``.ci/kafka/expansion-pom.xml``), and ``kafka-expansion/classes/``:
  ``.ci/kafka/LoopbackExpansionService.java`` compiled, which binds the service to 127.0.0.1.
  :class:`ExpansionService` starts it with ``--defaultEnvironmentType=EMBEDDED
  --experiments=use_deprecated_read``: KafkaIO then runs inside the Flink TaskManager JVMs (no
  Docker, no Java boot binary), and unbounded reads advance the watermark (without
  ``use_deprecated_read`` no window fired and no message reached the first ``GroupByKey``:
  ``benchmarks/bench_kafka_flink.py --probe-watermark``).
* :class:`KafkaFlinkCluster` — :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster` whose
  job server runs on the expansion service's classpath, with 1 GB of metaspace per TaskManager
  (each Kafka job loads ~200 jars into a new class loader; with Flink's default a TaskManager
  died of ``OutOfMemoryError: Metaspace`` after a few jobs), and :func:`cancel_flink_jobs` (Flink's REST API: cancelling through Beam's ``PortableRunner``
  leaves the job running on the cluster).

Every process is started in its own session and ended, with its children, by ``stop()``.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from fair_forge_beam.testing.flink_cluster import FlinkCluster, free_port
from fair_forge_beam.testing.reaper import OwnedGroups, end_groups

__all__ = [
    "kafka_artifacts", "missing_reason", "unavailable_reason", "KafkaBroker", "ExpansionService",
    "KafkaFlinkCluster", "cancel_flink_jobs", "running_flink_jobs",
]

LAUNCHER = "LoopbackExpansionService"


def kafka_artifacts() -> dict[str, Optional[Path]]:
    """The cached Kafka artifacts, each a path or ``None`` when missing or incomplete:
    ``broker_lib``, ``expansion_lib`` (jar folders) and ``expansion_classes`` (the compiled
    loopback launcher)."""
    from fair_forge_beam.testing.beam_runners import cache_dir

    d = cache_dir()
    broker, exp = d / "kafka-broker" / "lib", d / "kafka-expansion" / "lib"
    classes = d / "kafka-expansion" / "classes"
    return {
        "broker_lib": broker if (broker / ".complete").is_file() else None,
        "expansion_lib": exp if (exp / ".complete").is_file() else None,
        "expansion_classes": classes if (classes / f"{LAUNCHER}.class").is_file() else None,
    }


def unavailable_reason() -> Optional[str]:
    """The registry's "not served" answer recorded by ``.ci/get_kafka.sh``, or ``None``."""
    from fair_forge_beam.testing.beam_runners import cache_dir

    path = cache_dir() / "kafka.unavailable"
    return (path.read_text(encoding="utf-8").strip() or "(no detail)") if path.is_file() else None


def missing_reason() -> Optional[str]:
    """Why the Kafka parts cannot run here (missing artifacts or ``java``), or ``None``."""
    from fair_forge_beam.testing.beam_runners import cache_dir

    missing = [k for k, v in kafka_artifacts().items() if v is None]
    if not shutil.which("java"):
        missing.append("java on PATH")
    return f"kafka: missing {', '.join(missing)} in {cache_dir()} (run .ci/get_kafka.sh)" if missing else None


def _java() -> str:
    java = shutil.which("java")
    if not java:
        raise FileNotFoundError("no java on PATH (Kafka and the expansion service need a JDK 17)")
    return java


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class _JavaProcesses(OwnedGroups):
    """Processes started in their own sessions, logs in ``workdir/log``; ``stop`` ends each
    process group (SIGTERM, then SIGKILL after ``timeout``). ``ends_with_owner``: as
    :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster`'s."""

    def __init__(self, workdir: Optional[os.PathLike], timeout: float, prefix: str, ends_with_owner: bool = False):
        self.ends_with_owner = bool(ends_with_owner)
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=prefix))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.procs: list[subprocess.Popen] = []

    @property
    def log_dir(self) -> Path:
        return self.workdir / "log"

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.out", "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.workdir, start_new_session=True)
        self.procs.append(proc)
        self._guard(proc.pid)
        return proc

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{what}: a process exited with code {p.returncode}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out after {self.timeout:.0f} s waiting for {what}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of each log (for failure messages)."""
        out = []
        if self.log_dir.is_dir():
            for f in sorted(self.log_dir.iterdir()):
                text = f.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
                out.append(f"--- {f}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self, timeout: float = 20.0) -> None:
        """End every process this object started, each one's process group whole (its children too,
        whether the leader still runs or not: SIGTERM, SIGKILL after ``timeout``). Idempotent; logs kept."""
        end_groups([p.pid for p in self.procs], timeout, self.procs)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._release([p.pid for p in self.procs])
        self.procs = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class KafkaBroker(_JavaProcesses):
    """A one-node Kafka 4.1 cluster in KRaft mode (broker and controller in one JVM) on
    127.0.0.1, as a context manager whose value is itself.

    ``workdir``: configuration, data and logs (a new temporary folder when ``None``; kept after
    :meth:`stop`). ``partitions``: default partitions of a new topic. ``heap``: the JVM's
    ``-Xmx``. :meth:`start` raises ``FileNotFoundError`` when an artifact or ``java`` is missing
    and ``RuntimeError`` (with the log tail) when the storage format fails or the broker does
    not listen within ``timeout`` seconds; it stops what it started before raising.
    """

    def __init__(self, workdir: Optional[os.PathLike] = None, timeout: float = 120.0, partitions: int = 2,
                 heap: str = "512m", ends_with_owner: bool = False):
        super().__init__(workdir, timeout, "ffb-kafka-", ends_with_owner)
        self.partitions, self.heap = int(partitions), heap
        self.port = self.controller_port = 0

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the broker's listener."""
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> Path:
        self.port, self.controller_port = free_port(), free_port()
        conf = {
            "process.roles": "broker,controller", "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"), "num.partitions": self.partitions,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
            # Retention counts from the messages' timestamps: with the default (7 days) the broker
            # deleted, minutes after start, a topic whose messages carried older event times.
            "log.retention.ms": -1,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
        return path

    def start(self) -> "KafkaBroker":
        lib = kafka_artifacts()["broker_lib"]
        if lib is None:
            raise FileNotFoundError(missing_reason() or "kafka-broker/lib missing (run .ci/get_kafka.sh)")
        java = _java()
        if (self.workdir / "data").exists():
            shutil.rmtree(self.workdir / "data")
        props = self._properties()
        # A cluster id is 16 bytes in URL-safe base64 without padding; derived from the folder.
        cid = base64.urlsafe_b64encode(hashlib.blake2b(str(self.workdir).encode(), digest_size=16).digest()).decode().rstrip("=")
        base = [java, f"-Xmx{self.heap}", "-cp", f"{lib}/*"]
        # given as --cluster-id=ID: an id that starts with '-' (a fifth of them) is read as an option after "-t"
        fmt = subprocess.run([*base, "kafka.tools.StorageTool", "format", f"--cluster-id={cid}", "-c", str(props)],
                             capture_output=True, text=True, timeout=self.timeout, stdin=subprocess.DEVNULL)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format failed ({fmt.returncode}):\n{fmt.stdout[-2000:]}{fmt.stderr[-2000:]}")
        try:
            self._spawn("kafka", [*base, "kafka.Kafka", str(props)])
            self._wait(lambda: _listens(self.port), "the Kafka broker to listen")
            self._wait(self._ready, "the Kafka broker to answer")
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
        except (KafkaError, OSError, ValueError):
            return False
        try:
            admin.list_topics()
            return True
        except (KafkaError, OSError):
            return False
        finally:
            admin.close()

    def create_topic(self, name: str, partitions: Optional[int] = None) -> None:
        """Create topic ``name`` (replication 1) and wait until it is usable."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(name, partitions or self.partitions, 1)])
            deadline = time.monotonic() + self.timeout
            while name not in admin.list_topics():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {name!r} was not created within {self.timeout:.0f} s")
                time.sleep(0.2)
        finally:
            admin.close()

    def producer(self, **config):
        """A ``kafka.KafkaProducer`` for this broker (``acks=all``); close it after use."""
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", **config)


class ExpansionService(_JavaProcesses):
    """Beam's Java expansion service with KafkaIO on 127.0.0.1 (see the module docstring), as a
    context manager whose value is itself; :attr:`address` (``localhost:PORT``) is what
    ``ReadFromKafka(expansion_service=...)`` / ``--kafka-expansion-service`` take.

    ``options``: the service's pipeline options (default ``--defaultEnvironmentType=EMBEDDED
    --experiments=use_deprecated_read``). Raises as :meth:`KafkaBroker.start` does.

    ``stage_classpath=False`` (the default) adds ``--filesToStage=<Beam's expansion-service jar>``
    (unless ``options`` name ``--filesToStage``): without it the service attaches its whole
    classpath (~190 jars, ~196 MB) to KafkaIO's EMBEDDED environment, which the Python launcher
    then uploads to the job server's artifact store for every job. Nothing reads those
    artifacts: an EMBEDDED environment runs inside the TaskManager with the job's class loader,
    whose classes come from the job's own jars (the job server's classpath, which is this
    service's, :class:`KafkaFlinkCluster`) or, with ``share_classpath``, from the TaskManager's
    classpath.
    """

    DEFAULT_OPTIONS = ("--defaultEnvironmentType=EMBEDDED", "--experiments=use_deprecated_read")

    def __init__(self, workdir: Optional[os.PathLike] = None, timeout: float = 120.0, options=DEFAULT_OPTIONS,
                 heap: str = "512m", stage_classpath: bool = False, ends_with_owner: bool = False):
        super().__init__(workdir, timeout, "ffb-expansion-", ends_with_owner)
        self.options, self.heap = list(options), heap
        self.stage_classpath = bool(stage_classpath)
        self.port = 0

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def command(self) -> list[str]:
        """The command line (after :meth:`start` has chosen the port)."""
        art = kafka_artifacts()
        options = list(self.options)
        if not self.stage_classpath and not any(o.startswith("--filesToStage") for o in options):
            own = sorted(art["expansion_lib"].glob("beam-sdks-java-expansion-service-*.jar"))
            if own:
                options.append(f"--filesToStage={own[0]}")
        return [_java(), f"-Xmx{self.heap}", "-cp", f"{art['expansion_classes']}:{art['expansion_lib']}/*",
                LAUNCHER, str(self.port), *options]

    def start(self) -> "ExpansionService":
        art = kafka_artifacts()
        if art["expansion_lib"] is None or art["expansion_classes"] is None:
            raise FileNotFoundError(missing_reason() or "kafka-expansion missing (run .ci/get_kafka.sh)")
        self.port = free_port()
        try:
            self._spawn("expansion-service", self.command())
            self._wait(lambda: _listens(self.port), "the expansion service to listen")
        except BaseException:
            self.stop()
            raise
        return self


class KafkaFlinkCluster(FlinkCluster):
    """:class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster` for KafkaIO jobs.

    * Beam's job server runs on the ``kafka-expansion/lib`` classpath (the job server's own plus
      the expansion service, KafkaIO, the Java harness, jamm and kafka-clients): a job submitted to
      the cluster carries the job server's classpath as its user jars, and the EMBEDDED Java
      environment of KafkaIO runs from them inside the TaskManagers (with the job server's own
      classpath: ``NoClassDefFoundError: org/apache/beam/fn/harness/Caches``). With
      ``share_classpath`` (the default, see :mod:`~fair_forge_beam.testing.flink_cluster`) the
      TaskManagers have that classpath too and load its classes once, parent-first.
    * Each TaskManager has ``metaspace_mb`` of metaspace (default 1 GB; each job loads ~200 jars
      into a new class loader) on top of the same heap and network memory (the process size grows
      by the difference to Flink's default, 256 MB).

    Raises ``FileNotFoundError`` from :meth:`start` when the Kafka artifacts are missing.
    """

    def __init__(self, *args, metaspace_mb: int = 1024, **kwargs):
        super().__init__(*args, **kwargs)
        self.metaspace_mb = int(metaspace_mb)
        if self.tm_memory.endswith("m"):
            self.tm_memory = f"{int(self.tm_memory[:-1]) + max(0, self.metaspace_mb - 256)}m"

    def start(self) -> "KafkaFlinkCluster":
        if kafka_artifacts()["expansion_lib"] is None:
            raise FileNotFoundError(missing_reason() or "kafka-expansion/lib missing (run .ci/get_kafka.sh)")
        return super().start()

    def job_server_lib(self) -> Path:
        """``kafka-expansion/lib``: the job server's classpath, and with ``share_classpath`` the
        cluster's (KafkaIO and kafka-clients then load once per TaskManager, not once per job)."""
        lib = kafka_artifacts()["expansion_lib"]
        if lib is None:
            raise FileNotFoundError(missing_reason() or "kafka-expansion/lib missing (run .ci/get_kafka.sh)")
        return lib

    def _write_config(self, home: Path) -> Path:
        import yaml

        conf = super()._write_config(home)
        doc = yaml.safe_load((conf / "config.yaml").read_text(encoding="utf-8")) or {}
        doc.setdefault("taskmanager", {}).setdefault("memory", {}).setdefault("jvm-metaspace", {})["size"] = \
            f"{self.metaspace_mb}m"
        (conf / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=True), encoding="utf-8")
        return conf


def _rest(url: str, method: str = "GET", timeout: float = 10.0):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
    return json.loads(body) if body.strip() else None


def running_flink_jobs(rest_url: str, name: Optional[str] = None) -> list[str]:
    """Ids of the cluster's jobs that are not in a terminal state (Flink REST ``/jobs/overview``).
    ``name``: only the jobs of that Beam ``--job_name`` (the Flink job's name), so that a test
    running beside other jobs on the cluster sees its own."""
    jobs = (_rest(f"{rest_url}/jobs/overview") or {}).get("jobs", [])
    return [j["jid"] for j in jobs if j.get("state") not in ("FINISHED", "CANCELED", "FAILED")
            and (name is None or j.get("name") == name)]


def cancel_flink_jobs(rest_url: str, timeout: float = 60.0, name: Optional[str] = None) -> list[str]:
    """Cancel every running job of the cluster at ``rest_url`` (``PATCH /jobs/<id>?mode=cancel``;
    ``name``: only the jobs of that Beam ``--job_name``) and wait up to ``timeout`` seconds until
    none of them runs; returns the ids cancelled. Raises ``RuntimeError`` when a job is still
    running after ``timeout``."""
    ids = running_flink_jobs(rest_url, name)
    for jid in ids:
        try:
            _rest(f"{rest_url}/jobs/{jid}?mode=cancel", method="PATCH")
        except urllib.error.HTTPError:
            pass  # finished meanwhile: checked below
    deadline = time.monotonic() + timeout
    while True:
        left = running_flink_jobs(rest_url, name)
        if not left:
            return ids
        if time.monotonic() > deadline:
            raise RuntimeError(f"Flink jobs still running {timeout:.0f} s after cancel: {left}")
        time.sleep(0.5)


def flink_job_running(rest_url: str, allow_finished_vertices: bool = False, name: Optional[str] = None) -> bool:
    """Whether the cluster's first running job (``name``: of that Beam ``--job_name``) has all
    its tasks RUNNING (Flink REST); with ``allow_finished_vertices`` one-shot steps (Impulse,
    Create) that already FINISHED count too."""
    ids = running_flink_jobs(rest_url, name)
    if not ids:
        return False
    doc = _rest(f"{rest_url}/jobs/{ids[0]}") or {}
    ok = ("RUNNING", "FINISHED") if allow_finished_vertices else ("RUNNING",)
    return doc.get("state") == "RUNNING" and all(v.get("status") in ok for v in doc.get("vertices", []))


def wait_until(predicate, timeout: float, proc=None, poll: float = 0.5):
    """The first truthy value of ``predicate()`` within ``timeout`` seconds, else ``None``.
    A poll that raises ``OSError`` (a Flink REST call that timed out or was refused while the
    JobManager was busy, e.g. receiving a job's jars on a loaded machine) counts as "not yet".

    Raises:
        ChildProcessError: ``proc`` (a ``subprocess.Popen``) exited while waiting.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:  # urllib's URLError and socket time-outs are OSErrors
            value = None
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise ChildProcessError(f"the streaming job exited ({proc.returncode})")
        time.sleep(poll)
    return None


def stop_streaming_job(proc, rest_url: str, name: Optional[str] = None) -> list[str]:
    """Cancel every running job of the cluster (``name``: only the jobs of that Beam
    ``--job_name``; a Python launcher that stops leaves its job running), then stop the launcher
    ``proc`` (terminate; kill after 30 s). Returns the ids cancelled."""
    try:
        return cancel_flink_jobs(rest_url, name=name)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
