"""A real standalone Flink cluster on this machine, with Beam's Flink job server in front of it.

Built from the artifacts ``.ci/get_runners.sh`` caches (see :mod:`fair_forge_beam.testing.beam_runners`):

* ``flink-<version>/`` — a Flink 1.19 distribution (``bin/``, ``conf/``, ``lib/``), unpacked from
  the ``apache-flink-libraries`` sdist and the ``apache-flink`` wheel (downloaded, never installed);
* ``flink-job-server/lib/`` — the classpath of ``org.apache.beam.runners.flink.FlinkJobServerDriver``
  (``.ci/flink/pom.xml``);
* ``beam-python-boot-v<beam>`` — Beam's Python SDK boot binary, the command of
  ``--environment_type=PROCESS`` workers.

:class:`FlinkCluster` starts one JobManager, ``task_managers`` TaskManagers (one slot each, so
that a TaskManager never runs tasks of two jobs at once; the default parallelism is their number,
or ``parallelism``) and the job server, all bound to 127.0.0.1 on free
ports, with their configuration, logs, pid files, artifact staging and worker scratch space in
one working folder. A pipeline submits to it with the options
of :meth:`FlinkCluster.runner_args` (``PortableRunner`` to the job server, PROCESS workers). Each
TaskManager starts its SDK workers through the command of
:func:`fair_forge_beam.process_workers.write_worker_command` in ``<workdir>/bin``: Beam's boot
binary with a ``python`` wrapper that execs the launching interpreter (``sys.executable``)
by the path it was started with, so workers run in the launcher's venv and import the installed
package (and ``PYTHONPATH`` when the cluster was started with one), with
``RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1`` (no per-worker virtualenv). A worker's stderr is kept
in ``<workdir>/bin/stderr/`` (:meth:`FlinkCluster.log_tail` shows it; a failed job's error too,
through :func:`fair_forge_beam.beam_pipeline.run_pipeline`).

PROCESS is the environment that works with more than one TaskManager JVM: with LOOPBACK or
EXTERNAL each TaskManager names its first worker ``1-1`` and they stop each other's workers.

Shared classpath (``share_classpath=True``, the default): the JobManager and TaskManagers start
with the job server's jars on their own classpath (after Flink's, through the launch scripts'
``HADOOP_CLASSPATH`` hook; SLF4J/Log4j jars left out so that Flink's logging stays as it is) and
``classloader.resolve-order: parent-first``. Beam's job server still attaches its classpath to
every job, but the classes then come from the TaskManager's own class loader. Two effects,
measured by ``benchmarks/bench_flink_classpath.py``:

* SDK workers are reused within a job. Beam's Flink runner keeps a job's SDK environments for
  ``--environment_cache_millis`` only when its classes live in Flink's parent class loader
  (``FlinkExecutableStageContextFactory`` releases the environment at once otherwise), so with
  per-job class loaders every Flink task that finished tore down its ``python`` workers and the
  next one booted new ones;
* no job loads Beam's ~200 jars into a new class loader, so metaspace does not grow per job.

A thread of a pool that Beam's classes keep (gRPC's shared executor) holds the context class
loader of the job that started it, and may serve a later job in the same TaskManager: with
``share_classpath`` Flink's check of leaked class loaders is off
(``classloader.check-leaked-classloader: false``), since the ended job's loader resolves every
class from the TaskManager's own; with the check on, a Kafka job's EMBEDDED Java harness failed
with "Trying to access closed classloader" when it followed another job.

``share_classpath=False`` gives the previous behaviour (child-first per-job class loaders).

No jars staged (``stage_jars=False``, the default with ``share_classpath``). Beam's Flink job
server attaches every jar of its own classpath to each job (``FlinkJobInvoker``: the
``ClasspathScanningResourcesDetector`` of ``PipelineResourcesOptions``), and Flink uploads them
(160 jars, 156 MB here) to the JobManager's blob server and into every TaskManager's blob store
at each submission, although with ``share_classpath`` the cluster has them on its classpath.
:meth:`FlinkCluster.start` compiles ``java/NothingToStage.java`` (a detector factory that finds
nothing; ``javac`` from the JDK) into ``<workdir>/nothing-to-stage.jar`` (a jar: a folder on the
job server's classpath fails a job that stages), puts it on the job server's and the cluster's
classpath, and :meth:`FlinkCluster.runner_args` adds
``--pipeline_resources_detector_factory_class=fair_forge_beam.flink.NothingToStage`` (declared for
the Python SDK by :class:`fair_forge_beam.beam_pipeline.JavaJobServerOptions`): the job carries
no jars. ``runner_args(stage_jars=True)`` stages them for one job (Beam's default, for a
comparison: ``benchmarks/bench_flink_scale.py --staging-ab``). Without ``javac`` the jars are
staged, as before.

Command line (the cluster outlives the command; ``stop`` ends exactly the processes ``start`` began)::

    python -m fair_forge_beam.testing.flink_cluster start --dir /tmp/ffb-flink
    python -m pipelines.audit ... $(python -m fair_forge_beam.testing.flink_cluster args --dir /tmp/ffb-flink)
    python -m fair_forge_beam.testing.flink_cluster stop --dir /tmp/ffb-flink
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: a Ctrl-C while it still imports is one line (fix47b)
    from fair_forge_beam.console import starting

    starting("python -m fair_forge_beam.testing.flink_cluster", "cluster")

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from fair_forge_beam import procfs
from fair_forge_beam.options import NO_CLUSTER_ENDPOINT
from fair_forge_beam.process_workers import BOOT_SCRIPT, STDERR_DIR, write_worker_command
from fair_forge_beam.testing.reaper import OwnedGroups, end_groups

__all__ = ["FlinkCluster", "free_port", "main"]

_JOB_SERVER_MAIN = "org.apache.beam.runners.flink.FlinkJobServerDriver"
#: the detector factory of java/NothingToStage.java (binary name)
NOTHING_TO_STAGE = "fair_forge_beam.flink.NothingToStage"
_STATE = "cluster.json"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS's choice for port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the JVM option every process of the cluster starts with
EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"


def _set(doc: dict, dotted: str, value) -> None:
    """Set ``doc["a"]["b"]["c"] = value`` for ``dotted = "a.b.c"``, creating the nested maps
    (Flink 1.19's ``config.yaml`` nests its keys)."""
    *parents, leaf = dotted.split(".")
    for p in parents:
        doc = doc.setdefault(p, {})
    doc[leaf] = value


#: The input bytes one subtask of a batch job reads at most when :meth:`FlinkCluster.runner_args` sizes the
#: job's parallelism by its input. Beam's Flink batch runner hands a subtask's stage output to Flink only
#: when the subtask's one bundle ends, so a TaskManager holds about 1.2x its subtask's input meanwhile (the
#: audit's read stage; docs/performance.md, "what the TaskManagers hold in the read stage"): with shares of
#: this size a TaskManager holds at 1M interactions what it holds at 100k. 22 MB is the share of each of 2
#: subtasks at the benchmark's 100k interactions (42.8 MB of JSONL).
SUBTASK_INPUT_BYTES = 22_000_000

#: the module the SDK workers of a job sized by its input import (Beam's ``--beam_plugins``)
WORKER_PLUGIN = "fair_forge_beam.worker_plugin"


class FlinkCluster(OwnedGroups):
    """JobManager + ``task_managers`` TaskManagers + Beam's Flink job server, as a context manager.

    ``workdir``: folder for configuration, logs and scratch (a new temporary folder when ``None``;
    kept after :meth:`stop` so that logs survive failures — :attr:`log_dir`). ``timeout``: seconds
    to wait for the cluster and the job server. ``tm_memory``/``jm_memory``: each process's total
    memory; ``tm_network``: a TaskManager's network buffer memory; ``tm_managed``: its managed
    memory (Flink's batch sorters); ``tm_off_heap``: its task off-heap (direct) memory; Flink sizes.
    What is left of ``tm_memory`` after these, the JVM's metaspace and overhead and Flink's
    framework memory is the task heap: about 1 GB with the defaults. Both are sized for Beam's
    data plane, not for the data: Beam's runner side queues up to 100 data messages per stream
    from a Python SDK worker, each up to about 10 MB (the SDK's flush size), and gRPC's Netty
    buffers them in direct memory first. With the earlier 1600m (115 MB of task heap, 128 MB of
    framework off-heap for all of gRPC) a 1M-interaction audit ran a TaskManager out of heap on
    its first stage (the job then hung), and with 1 GB of heap out of direct memory on the
    scoring stage (``benchmarks/bench_flink_scale.py``, docs/performance.md). Artifacts default to the runner cache
    (:func:`fair_forge_beam.testing.beam_runners.flink_artifacts`). :meth:`start` raises
    ``FileNotFoundError`` when an artifact is missing and ``RuntimeError`` (with the log tail) when
    a process exits or the cluster is not ready in time; it stops what it started before raising.
    ``share_classpath``: put the job server's jars on the cluster's own classpath, parent-first
    (see the module docstring; ``False``: per-job class loaders, Flink's default).
    ``parallelism``: the jobs' default parallelism (1 <= ``parallelism`` <= ``task_managers``;
    default ``task_managers``). With more TaskManagers than that, a second job runs beside the
    first on TaskManagers of its own (e.g. a long streaming job of parallelism 1 beside batch jobs
    of parallelism 2 on 3 TaskManagers). One slot per TaskManager on purpose: two jobs in one
    TaskManager share its parent-first classes (``share_classpath``), among them Beam's
    per-process worker bookkeeping, and two streaming jobs side by side in two 2-slot
    TaskManagers wrote no pane at all.
    ``ends_with_owner``: end the cluster's processes when the process that started it ends before
    :meth:`stop` (killed: no teardown ran), through a :class:`~fair_forge_beam.testing.reaper.Reaper`;
    ``False`` (the default) for a cluster that outlives its command (``flink_cluster start``).
    ``python``: the interpreter the SDK workers run (default ``sys.executable``, the launching
    interpreter, by the path it was started with; see :mod:`fair_forge_beam.process_workers`).
    ``stage_jars``: whether jobs carry the job server's jars (default: ``not share_classpath``;
    see the module docstring). ``stage_jars=False`` needs ``share_classpath`` (``ValueError``
    otherwise: the tasks would find no Beam classes); :meth:`start` turns it on, with a warning,
    when there is no ``javac`` to compile the detector.
    """

    def __init__(self, task_managers: int = 2, workdir: Optional[os.PathLike] = None, timeout: float = 240.0,
                 tm_memory: str = "3100m", jm_memory: str = "1024m", tm_managed: str = "460m",
                 tm_off_heap: str = "512m",
                 tm_network: str = "320m", share_classpath: bool = True, parallelism: Optional[int] = None,
                 python: Optional[str] = None, stage_jars: Optional[bool] = None, ends_with_owner: bool = False):
        self.ends_with_owner = bool(ends_with_owner)
        self.stage_jars = (not share_classpath) if stage_jars is None else bool(stage_jars)
        if not self.stage_jars and not share_classpath:
            raise ValueError("stage_jars=False needs share_classpath=True (the tasks load Beam's classes from the "
                             "cluster's classpath)")
        self.parallelism = task_managers if parallelism is None else int(parallelism)
        if not 1 <= self.parallelism <= task_managers:
            raise ValueError(f"parallelism must be between 1 and task_managers={task_managers}, got {parallelism}")
        self.task_managers = task_managers
        self.python = python or sys.executable  # as it is: resolving it would lose a venv (process_workers)
        self.share_classpath = bool(share_classpath)
        self.workdir = Path(workdir) if workdir else None
        self.timeout = timeout
        self.tm_memory, self.jm_memory, self.tm_network, self.tm_managed = tm_memory, jm_memory, tm_network, tm_managed
        self.tm_off_heap = tm_off_heap
        self.procs: list[subprocess.Popen] = []
        self.pids: list[int] = []
        self.rest_port = self.job_port = self.artifact_port = 0

    # ---- paths
    @property
    def log_dir(self) -> Path:
        return self.workdir / "log"

    @property
    def job_endpoint(self) -> str:
        return f"localhost:{self.job_port}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def parallelism_for(self, input_bytes: Optional[int] = None) -> int:
        """The parallelism of a batch job that reads ``input_bytes``: the cluster's (see the class
        docstring), or more, so that no subtask reads more than :data:`SUBTASK_INPUT_BYTES`
        (``ceil(input_bytes / SUBTASK_INPUT_BYTES)``); ``None`` or 0: the cluster's."""
        if not input_bytes:
            return self.parallelism
        return max(self.parallelism, -(-int(input_bytes) // SUBTASK_INPUT_BYTES))

    def runner_args(self, parallelism: Optional[int] = None, stage_jars: Optional[bool] = None,
                    input_bytes: Optional[int] = None) -> list[str]:
        """Beam pipeline options that run a pipeline on this cluster with ``parallelism`` (default:
        :meth:`parallelism_for` ``input_bytes``, the bytes of the job's input files; with them, the SDK workers
        import :mod:`fair_forge_beam.worker_plugin`, which ends idle bundle processors early). Every job's
        exchanges are written in full before they are read (``--execution_mode_for_batch=BATCH_FORCED``),
        so a job may have more subtasks than the cluster has slots: Flink runs them in waves.
        ``stage_jars`` (default: the cluster's): whether
        the job carries the job server's jars; ``False`` raises ``ValueError`` on a cluster that
        stages them (no shared classpath, or no ``javac``)."""
        stage = self.stage_jars if stage_jars is None else bool(stage_jars)
        if not stage and not self._detector_ready():
            raise ValueError("this cluster cannot run jobs without the job server's jars (share_classpath off, "
                             "or NothingToStage not compiled)")
        return [
            "--runner=PortableRunner", f"--job_endpoint={self.job_endpoint}",
            "--environment_type=PROCESS",
            "--environment_config=" + json.dumps({"command": str(self.workdir / "bin" / BOOT_SCRIPT)}, separators=(",", ":")),
            f"--parallelism={self.parallelism_for(input_bytes) if parallelism is None else int(parallelism)}",
            # Beam's Flink batch runner runs a subtask's whole share of a stage as one bundle and hands its output
            # to Flink only when the bundle ends: a TaskManager holds that output meanwhile (about 1.2x the
            # subtask's input in the audit's read stage). Blocking exchanges let a large input take more
            # subtasks than slots, each holding its smaller share (SUBTASK_INPUT_BYTES; docs/performance.md)
            "--execution_mode_for_batch=BATCH_FORCED",
            # Keep a TaskManager's SDK workers for the next task for a minute: without it each of
            # the audit's ~140 tasks per TaskManager starts (and tears down) its own boot + python
            # worker, re-importing the package and reloading models every time.
            "--environment_cache_millis=60000",
            # Beam's job-service timeout (300 s by default) is also the deadline of the state
            # stream the launcher waits on: a longer job would fail with DEADLINE_EXCEEDED.
            "--job_server_timeout=86400",
        ] + ([] if stage else [f"--pipeline_resources_detector_factory_class={NOTHING_TO_STAGE}"]) + (
            # a job sized by its input runs many tasks of a stage in turn on each worker: their idle bundle
            # processors end after seconds, not Beam's minute (fair_forge_beam.worker_plugin)
            [f"--beam_plugins={WORKER_PLUGIN}"] if input_bytes else [])

    @property
    def detector_jar(self) -> Path:
        """``<workdir>/nothing-to-stage.jar``: the compiled ``NothingToStage`` (on the job server's
        and, with ``share_classpath``, the cluster's classpath)."""
        return self.workdir / "nothing-to-stage.jar"

    def _detector_ready(self) -> bool:
        return self.share_classpath and self.workdir is not None and self.detector_jar.is_file()

    def _compile_detector(self) -> None:
        """Compile ``java/NothingToStage.java`` against the job server's jars into
        :attr:`detector_jar`; without ``javac`` (a JRE) or when it fails, jobs stage their jars
        (``stage_jars`` turned on, with a warning on stderr)."""
        import importlib.resources
        import zipfile

        javac = shutil.which("javac")
        source = importlib.resources.files("fair_forge_beam.testing").joinpath("java/NothingToStage.java")
        self.detector_jar.unlink(missing_ok=True)
        err = "no javac on PATH" if javac is None else None
        if javac is not None:
            classes = self.workdir / "tmp" / "nothing-to-stage"
            shutil.rmtree(classes, ignore_errors=True)
            with importlib.resources.as_file(source) as src:
                proc = subprocess.run([javac, "-nowarn", "-cp", f"{self.job_server_lib()}/*", "-d", str(classes),
                                       str(src)], capture_output=True, text=True)
            if proc.returncode != 0:
                err = f"javac failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}"
            else:
                with zipfile.ZipFile(self.detector_jar, "w") as jar:
                    for f in sorted(classes.rglob("*.class")):
                        jar.write(f, f.relative_to(classes).as_posix())
        if err:
            if not self.stage_jars:
                print(f"flink_cluster: {err}; jobs will stage the job server's jars", file=sys.stderr)
            self.stage_jars = True

    # ---- start
    def _write_config(self, home: Path) -> Path:
        import yaml

        conf = self.workdir / "conf"
        if conf.exists():
            shutil.rmtree(conf)
        shutil.copytree(home / "conf", conf)
        doc = yaml.safe_load((conf / "config.yaml").read_text(encoding="utf-8")) or {}
        self.rest_port, rpc_port = free_port(), free_port()
        for key, value in {
            "jobmanager.bind-host": "127.0.0.1", "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": rpc_port, "jobmanager.memory.process.size": self.jm_memory,
            "taskmanager.bind-host": "127.0.0.1", "taskmanager.host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": 1, "taskmanager.memory.process.size": self.tm_memory,
            "taskmanager.memory.managed.size": self.tm_managed,
            "taskmanager.memory.task.off-heap.size": self.tm_off_heap,
            # Beam's batch translation writes blocking (sort-shuffle) partitions, each of which
            # takes taskmanager.network.sort-shuffle.min-buffers (default 512) network buffers:
            # with the defaults the audit failed with "Insufficient number of network buffers:
            # required 512" (also with 320 MB of network memory). 64 buffers per partition and a
            # fixed network memory make room for all of the job's partitions.
            "taskmanager.network.sort-shuffle.min-buffers": 64,
            "taskmanager.memory.network.min": self.tm_network, "taskmanager.memory.network.max": self.tm_network,
            "parallelism.default": self.parallelism,
            "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1", "rest.port": self.rest_port,
            # A loaded 2-core machine (CI, six engineers) answered a submitTask call after more
            # than the default 10 s ask timeout, failing the job: allow minutes, not seconds.
            "pekko.ask.timeout": "120 s", "heartbeat.timeout": 180000,
            "io.tmp.dirs": str(self.workdir / "tmp"), "web.tmpdir": str(self.workdir / "tmp"),
            "env.pid.dir": str(self.workdir / "pid"), "env.log.dir": str(self.log_dir),
        }.items():
            _set(doc, key, value)
        # An OutOfMemoryError on any thread ends the JVM: on a gRPC thread of the data plane it
        # killed only that thread, and the job hung instead of failing (docs/performance.md); the
        # job server reads these options too.
        opts = doc.setdefault("env", {}).setdefault("java", {}).setdefault("opts", {})
        if EXIT_ON_OOM not in str(opts.get("all", "")).split():
            opts["all"] = f"{opts.get('all', '')} {EXIT_ON_OOM}".strip()
        if self.share_classpath:
            # Every job carries the job server's jars, which are also on the cluster's classpath
            # (cluster_jars): parent-first makes Beam's classes the TaskManager's, shared by all tasks and jobs.
            _set(doc, "classloader.resolve-order", "parent-first")
            # Beam's classes are then the TaskManager's, and so are their thread pools (the vendored
            # gRPC's shared executor, kept alive by a finished job's SDK environments for
            # --environment_cache_millis): a pooled thread keeps the context class loader of the job
            # that created it. When a later job's EMBEDDED Java harness (KafkaIO) deserialised a
            # coder on such a thread, Flink's leak check failed the job ("Trying to access closed
            # classloader", CI of 2026-12-06). The ended job's loader holds no class of its own (no
            # jars staged; parent-first), so it resolves every class from the parent: Flink's check
            # is the one thing that fails, and its documentation says to disable it for such a leak.
            _set(doc, "classloader.check-leaked-classloader", False)
        (conf / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=True), encoding="utf-8")
        return conf

    def _write_worker_command(self, boot: Path) -> None:
        write_worker_command(self.workdir / "bin", boot, self.workdir / "worker", python=self.python)

    def _spawn(self, name: str, cmd: list[str], env: dict) -> None:
        log = open(self.log_dir / f"{name}.out", "ab")
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True)
        finally:
            log.close()
        self.procs.append(proc)
        self.pids.append(proc.pid)
        self._guard(proc.pid)

    def _check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"a cluster process exited with code {p.returncode} ({p.args[0]}):\n{self.log_tail()}")

    def _get_json(self, path: str):
        with urllib.request.urlopen(self.rest_url + path, timeout=5) as r:
            return json.load(r)

    def start(self) -> "FlinkCluster":
        from fair_forge_beam.testing import beam_runners as rn

        art = rn.flink_artifacts()
        missing = [k for k, v in art.items() if v is None]
        if missing:
            raise FileNotFoundError(f"Flink artifacts missing ({', '.join(missing)}) in {rn.cache_dir()} "
                                    f"(run .ci/get_runners.sh)")
        java = shutil.which("java")
        if not java:
            raise FileNotFoundError("no java on PATH (Flink needs a JDK 11 or 17)")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="ffb-flink-"))
        for sub in ("log", "tmp", "pid", "worker", "artifacts"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        home = art["flink_home"]
        conf = self._write_config(home)
        self._write_worker_command(art["boot"])
        if self.share_classpath:
            self._compile_detector()
        env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_LOG_DIR": str(self.log_dir),
               "FLINK_PID_DIR": str(self.workdir / "pid")}
        if self.share_classpath:
            # Flink's launch scripts append $HADOOP_CLASSPATH after Flink's own jars.
            env["HADOOP_CLASSPATH"] = os.pathsep.join(
                [str(j) for j in self.cluster_jars()] + ([str(self.detector_jar)] if self._detector_ready() else [])
                + ([env["HADOOP_CLASSPATH"]] if env.get("HADOOP_CLASSPATH") else []))
        try:
            self._spawn("jobmanager", [str(home / "bin" / "jobmanager.sh"), "start-foreground"], env)
            for i in range(self.task_managers):
                self._spawn(f"taskmanager-{i}", [str(home / "bin" / "taskmanager.sh"), "start-foreground"], env)
            self._wait(self._task_managers_registered, "TaskManagers to register")
            self.job_port, self.artifact_port = free_port(), free_port()
            import yaml

            java_opts = yaml.safe_load((conf / "config.yaml").read_text())["env"]["java"]["opts"]["all"].split()
            self._spawn("job-server", [
                java, "-Xmx512m", *java_opts, "-cp", os.pathsep.join(
                    ([str(self.detector_jar)] if self._detector_ready() else []) + [f"{self.job_server_lib()}/*"]),
                _JOB_SERVER_MAIN,
                # each value its own argument: the job server's parser (args4j) refuses
                # "--flink-conf-dir=<a path with a space>" as an unknown option (trial36b B6)
                "--flink-master", f"127.0.0.1:{self.rest_port}", "--flink-conf-dir", str(conf),
                "--job-host", "localhost", "--job-port", str(self.job_port), "--artifact-port", str(self.artifact_port),
                "--expansion-port", "-1", "--artifacts-dir", str(self.workdir / "artifacts"),
            ], env)
            self._wait(self._job_server_listens, "the job server to listen")
        except BaseException:
            self.stop()
            raise
        self._save_state()
        return self

    def job_server_lib(self) -> Path:
        """The folder of the job server's jars (its classpath)."""
        from fair_forge_beam.testing import beam_runners as rn

        lib = rn.flink_artifacts()["job_server_lib"]
        if lib is None:
            raise FileNotFoundError(f"flink-job-server/lib missing in {rn.cache_dir()} (run .ci/get_runners.sh)")
        return lib

    def cluster_jars(self) -> list[Path]:
        """The job server's jars that the JobManager and TaskManagers get on their own classpath
        with ``share_classpath`` (sorted by name): all but the SLF4J and Log4j jars (Flink brings
        its own logging; an extra SLF4J binding would replace it)."""
        return sorted(j for j in self.job_server_lib().glob("*.jar")
                      if not j.name.startswith(("slf4j-", "log4j-")))

    def _task_managers_registered(self) -> bool:
        try:
            return len(self._get_json("/taskmanagers").get("taskmanagers", [])) >= self.task_managers
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def _job_server_listens(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.job_port), timeout=1):
                return True
        except OSError:
            return False

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {self.timeout:.0f} s waiting for {what}:\n{self.log_tail()}")

    # ---- state (for the command line)
    def _save_state(self) -> None:
        (self.workdir / _STATE).write_text(json.dumps({
            "pids": self.pids, "task_managers": self.task_managers, "rest_port": self.rest_port,
            "job_port": self.job_port, "artifact_port": self.artifact_port,
            "parallelism": self.parallelism, "share_classpath": self.share_classpath,
            "stage_jars": self.stage_jars}, allow_nan=False), encoding="utf-8")

    @classmethod
    def attach(cls, workdir: os.PathLike, live: bool = True) -> "FlinkCluster":
        """The cluster recorded in ``workdir`` by a :meth:`start` of another process.

        Raises:
            FileNotFoundError: no cluster is recorded there.
            ClusterGone: (``live``) one of its recorded processes has ended — killed by the OOM killer or a
                restart without ``stop`` (trial39 T6: its options were handed out, and an audit waited on
                the dead job port for up to ``--job_server_timeout``, a day). ``stop`` attaches with
                ``live=False``, to clean up."""
        state = json.loads((Path(workdir) / _STATE).read_text(encoding="utf-8"))
        c = cls(task_managers=state["task_managers"], workdir=workdir, parallelism=state.get("parallelism"),
                share_classpath=state.get("share_classpath", True), stage_jars=state.get("stage_jars", True))
        c.pids, c.rest_port = state["pids"], state["rest_port"]
        c.job_port, c.artifact_port = state["job_port"], state["artifact_port"]
        dead = [pid for pid in c.pids if not _alive(pid, [])]
        if live and dead:
            raise ClusterGone(f"no live cluster in {workdir}: {len(dead)} of its {len(c.pids)} processes have ended "
                              f"(pid {dead[0]}; killed, or the machine restarted): stop it and start it again "
                              f"(python -m fair_forge_beam.testing.flink_cluster stop --dir {workdir}, then start)")
        return c

    # ---- stop
    def stop(self, timeout: float = 30.0) -> None:
        """End the processes this cluster started (each one's process group: the JVM, and the SDK
        workers a TaskManager started), job server first; a group is ended whole, whether its leader
        still runs or not (SIGTERM, SIGKILL after ``timeout``). Idempotent; logs are kept."""
        end_groups(list(reversed(self.pids)), timeout, self.procs)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._release(self.pids)
        self.procs, self.pids = [], []
        if self.workdir is not None and (self.workdir / _STATE).exists():
            (self.workdir / _STATE).unlink()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of each non-empty log file of the cluster and of each SDK worker's
        stderr (for failure messages)."""
        if self.workdir is None or not self.log_dir.is_dir():
            return ""
        out = []
        stderr = self.workdir / "bin" / STDERR_DIR
        files = sorted(self.log_dir.iterdir()) + (sorted(stderr.iterdir()) if stderr.is_dir() else [])
        for f in files:
            if f.is_file() and f.suffix in (".out", ".log", ".stderr") and f.stat().st_size:
                text = f.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
                out.append(f"--- {f}\n" + "\n".join(text))
        return "\n".join(out)

    def __enter__(self) -> "FlinkCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ClusterGone(RuntimeError):
    """The cluster recorded in a folder has a process that ended (:meth:`FlinkCluster.attach`)."""


def _alive(pid: int, procs: list[subprocess.Popen]) -> bool:
    for p in procs:
        if p.pid == pid:
            return p.poll() is None
    return procfs.alive(pid)  # a zombie of another parent counts as ended


def main(argv=None) -> int:
    from fair_forge_beam.console import start_undone_on_interrupt

    ap = argparse.ArgumentParser(
        prog="python -m fair_forge_beam.testing.flink_cluster",
        description="Start or stop a local Flink cluster (JobManager, TaskManagers, Beam job server) "
                    "from the artifacts of .ci/get_runners.sh.")
    ap.add_argument("action", choices=["start", "stop", "args"])
    ap.add_argument("--dir", required=True, help="working folder: configuration, logs, state")
    ap.add_argument("--task-managers", type=int, default=2)
    ap.add_argument("--input", action="append", default=[], metavar="PATTERN",
                    help="args: the job's input files (a glob; repeatable): the parallelism grows with their bytes, "
                         f"one subtask per {SUBTASK_INPUT_BYTES:,} bytes at least (a compressed file counts its own "
                         "size: give --parallelism yourself then)")
    a = ap.parse_args(argv)
    if a.action == "start":
        if (Path(a.dir) / _STATE).exists():
            print(f"a cluster is already recorded in {a.dir}; stop it first", file=sys.stderr)
            return 2
        try:
            # a Ctrl-C / SIGTERM while it starts: its start stops what it started (FlinkCluster.start), then one line,
            # exit code 130 / 143 (fix47b: a traceback)
            with start_undone_on_interrupt(ap.prog, lambda: f"stopped while starting; the cluster's processes were "
                                                            f"stopped, none is recorded in {a.dir}"):
                c = FlinkCluster(task_managers=a.task_managers, workdir=a.dir).start()
        except (FileNotFoundError, RuntimeError) as e:
            print(f"could not start the cluster: {e}", file=sys.stderr)
            return 1
        c.procs = []  # the processes outlive this command
        print(f"Flink cluster up: web UI {c.rest_url}, job server {c.job_endpoint}, logs {c.log_dir}")
        print("pipeline options: " + " ".join(c.runner_args()))
        return 0
    try:
        c = FlinkCluster.attach(a.dir, live=a.action == "args")
    except (FileNotFoundError, ClusterGone) as e:
        print(str(e) if isinstance(e, ClusterGone) else f"no cluster recorded in {a.dir}", file=sys.stderr)
        if a.action == "args":  # an option every command refuses in one line: $(… args) never runs in memory
            print(f"--job_endpoint={NO_CLUSTER_ENDPOINT}")
        return 1
    if a.action == "args":
        import glob

        files = {f for pattern in a.input for f in glob.glob(os.path.expanduser(pattern), recursive=True)}
        print(" ".join(c.runner_args(input_bytes=sum(os.path.getsize(f) for f in files if os.path.isfile(f)))))
    else:
        c.stop()
        print(f"stopped; logs kept in {c.log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
