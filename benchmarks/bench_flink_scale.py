"""The keyword audit at scale on the local Flink cluster and on the in-memory runner (issue 26,
item 2; not a test).

For each size of ``--sizes`` (interactions; default 100,000 and 1,000,000) the script writes
``benchmarks/bench_engine.py``'s seeded synthetic sessions, then runs ``pipelines.audit
--metrics humanity,toxicity --group-extractor keyword`` (frequentist, report written) once per
runner of ``--runners``, each as a child process ``sys.executable -c WRAPPER`` (the wrapper calls
``pipelines.audit.main`` and notes when the pipeline starts running and when the launcher reads
``results.json`` back):

* ``in_memory`` — Beam's FnApiRunner in the launching process;
* ``flink`` — a fresh :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster` per run
  (JobManager, 2 TaskManagers of one slot, Beam's job server; PROCESS workers; parallelism 2, or one
  subtask per 22 MB of input: ``FlinkCluster.parallelism_for``, 20 at 1M, in waves over the 2 slots),
  so that each JVM's peak belongs to that run; stopped after it.

Per run it records:

* wall seconds of the launcher, and CPU seconds: the launcher's (``wait4`` rusage: the process
  and what it reaped) plus, on Flink, the cluster's (every process of the cluster's process
  groups — JVMs and SDK workers, live or reaped by them — as a delta over the run);
* start-up / processing / finish: launcher start → the pipeline starts executing (in memory: the
  wrapper's ``Pipeline.run``; on Flink: the job's ``start-time`` from the REST API, so start-up
  includes graph construction, submission, artifact staging and translation) → the job ends
  (Flink: ``end-time``; in memory: the launcher reads ``results.json``) → the launcher exits;
* peak RSS: the launcher (``ru_maxrss`` of ``wait4``); each TaskManager JVM, the JobManager and
  the job server (``VmHWM`` from ``/proc``, read every ``--interval`` seconds and at the end); the
  SDK workers (the boot binaries and ``python`` processes in a TaskManager's process group):
  the largest ``VmHWM`` of one worker process and the largest sum of the workers' RSS at one
  sample;
* Flink: the number of tasks (the job's ``tasks.total``), the bytes written to and read from
  result partitions (sum of the vertices' ``write-bytes``/``read-bytes``: the data exchanged
  between the job's tasks, "shuffled"), and the jars each job carried (files and MB in the
  JobManager's and TaskManagers' ``blobStorage/job_<id>`` folders, largest seen);
* the cluster's CPU split by kind of process, from the samples: the JVMs (``jvm_cpu_s``), the
  Python SDK workers (``python_cpu_s``; a worker's last interval before it ends is missed) and the
  rest (boot binaries, shells);
* the five vertices that wrote most, with each subtask's bytes, input records and seconds (how
  evenly the work is spread over the TaskManagers);
* the largest SDK worker's RSS over the run (``largest_worker_rss_mb``: about 40 samples), when it
  peaked and the vertices running then (``vertices_at_peak``): which stage a worker's peak belongs to;
* per TaskManager, what its JVM reports through Flink's REST API (``/taskmanagers/<id>/metrics``,
  every metric named ``Status.JVM.Memory.*``, ``Status.JVM.GarbageCollector.*``,
  ``Status.JVM.Threads.*``, ``Status.Flink.Memory.*`` and ``Status.Shuffle.Netty.*``, read at each
  sample): the peaks of the heap in use, the heap committed, the direct buffers' memory and the
  non-heap memory in use (``<role>_heap_used_peak_mb`` ...), and the collections and their seconds
  over the run (``<role>_gc_count``, ``<role>_gc_s``); ``<role>_jvm_metrics``: every such
  metric's first, peak and last value. The JobManager refreshes
  these values from the TaskManagers every ``metrics.fetcher.update-interval`` (Flink's default:
  10 s), so the peaks are those of 10-second snapshots: a peak of the heap in use between two
  snapshots is missed. A TaskManager's id (``host:port-suffix``) is matched to its JVM by the
  port its JVM listens on. And from ``/proc/<pid>/smaps`` at each sample: the peak of the heap's
  resident memory (``<role>_heap_rss_peak_mb``: the pages of the heap mapping the JVM has touched,
  in use or not) and of the rest of the JVM's RSS (``<role>_outside_heap_rss_peak_mb``: direct
  buffers, metaspace, code, thread stacks, native allocations, mapped files);
* whether ``results.json`` is byte-identical to the in-memory run of the same size (it is
  runner-independent by contract; no field is excluded).

``--staging-ab J`` first runs J jobs of ``--ab-size`` interactions on one cluster with the jars staged
(Beam's default) and J without (:class:`FlinkCluster`'s ``stage_jars=False``, this change),
alternately, and prints the start-up and the jars of each (one run of this script: the ratio is
what counts on a shared machine). On a given cluster (``main``'s ``cluster``), a Flink run of the
table whose size is ``--ab-size`` and whose runner arguments are the unstaged A/B jobs' is not run
again: the last unstaged A/B job is that run (same data, same command line), and its record and
output folder are the table's (the record says ``"reused": "ab-unstaged-<J-1>"``).

Each run's record is kept as ``<work>/runs/<runner>-<size>.json`` (``--work`` reuses a folder,
data included: a later invocation with other ``--runners`` adds to the same table).

``--variant "LABEL [ARG ...]"`` (repeatable) runs every size and runner once per variant, the
variants one after the other for each size and runner (an A/B within one invocation: on a shared
machine only those ratios count): each ``ARG`` is added to the audit's command line (e.g. Beam's
``--experiments=pre_optimize=pack_combiners``), except ``--code-root=PATH``, which puts that
checkout first on ``PYTHONPATH`` of the launcher and of the variant's fresh Flink cluster (its SDK
workers), and ``--env=NAME=VALUE``, which sets that variable there (e.g. ``MALLOC_ARENA_MAX=2``). A variant's record is ``<runner>-<size>-<LABEL>.json``, its output ``out-<runner>-<size>-<LABEL>``;
every ``results.json`` of a size is compared with the in-memory run of the first variant. Flink
records name the combines Beam's portable runner lifted into a pre-combine (``lifted_combines``,
from the launcher's ``PortableRunner._optimize_pipeline``; the table's "lifted" counts them).

    python benchmarks/bench_flink_scale.py                                  # 100k and 1M, both runners
    python benchmarks/bench_flink_scale.py --sizes 300 --staging-ab 2       # smoke test
    python benchmarks/bench_flink_scale.py --sizes 1000000 --runners flink --work /tmp/fs
    python benchmarks/bench_flink_scale.py --sizes 100000 --runners in_memory,flink --variant lifted \
        --variant "unlifted --experiments=pre_optimize=pack_combiners"     # Beam's combiner lifting A/B

Needs ``.ci/get_runners.sh flink`` for the Flink runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from unittest import mock
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import write_sessions  # noqa: E402
from fair_forge_beam import procfs  # noqa: E402

AUDIT = ["--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--quiet"]
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024

WRAPPER = """
import json, os, resource, sys, time
t0 = time.time()
marks = {"t_start": t0}
from apache_beam import pipeline as _pl
_run = _pl.Pipeline.run
def _marked_run(self, *a, **k):
    marks.setdefault("t_run", time.time())
    return _run(self, *a, **k)
_pl.Pipeline.run = _marked_run
from apache_beam.runners.portability import portable_runner as _pr
_optimize = _pr.PortableRunner._optimize_pipeline
def _noted_optimize(proto, options):  # the combines a portable runner lifts: their Precombine transforms
    out = _optimize(proto, options)
    marks["lifted_combines"] = sorted(t.unique_name.rsplit("/", 1)[0] for t in out.components.transforms.values()
                                      if t.unique_name.endswith("/Precombine"))
    return out
_pr.PortableRunner._optimize_pipeline = staticmethod(_noted_optimize)
import fair_forge_beam.reports.load as load
_read = load.read_results
def _marked_read(*a, **k):
    if "t_run" in marks:  # the job's results: not the earlier run's, read before (a replaced run is named)
        marks.setdefault("t_results", time.time())
        marks.setdefault("maxrss_kb_job_ended", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return _read(*a, **k)
load.read_results = _marked_read
import sys
sys.path.append(BENCHMARKS)  # last: a --code-root checkout or the installed package stays first
from launcher_marks import run_audit_and_write
run_audit_and_write(marks, "FFB_MARKS")
""".replace("BENCHMARKS", repr(str(Path(__file__).resolve().parent)))


# ---------------------------------------------------------------- /proc
def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def heap_rss_kb(pid: int, heap_bytes: int) -> Optional[int]:
    """Resident KB of the JVM's heap: the ``Rss`` in ``/proc/<pid>/smaps`` of the anonymous mapping
    whose size is within 1 % of ``heap_bytes`` (``-Xmx``; the JVM reserves its heap as one mapping),
    ``None`` when there is no single such mapping. The heap pages the JVM has touched so far, in use
    or not (Flink starts a TaskManager with ``-Xms`` = ``-Xmx``: the whole heap is committed from the
    start, and G1 gives no page back to the system)."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    found, anonymous, size = [], False, 0
    for line in text.splitlines():
        head = line.split()
        if not head:
            continue
        if "-" in head[0] and not head[0].endswith(":"):  # a mapping's first line: range perms offset dev inode [path]
            anonymous, size = len(head) == 5, 0
        elif head[0] == "Size:":
            size = int(head[1]) * 1024
        elif head[0] == "Rss:" and anonymous and abs(size - heap_bytes) <= heap_bytes / 100:
            found.append(int(head[1]))
    return found[0] if len(found) == 1 else None


def _xmx(cmd: str) -> Optional[int]:
    """``-Xmx`` of a java command line, in bytes (the last one counts)."""
    units = {"k": 1024, "m": MB, "g": 1024 * MB}
    out = None
    for w in cmd.split():
        if w.startswith("-Xmx"):
            v = w[4:].lower()
            out = int(v[:-1]) * units[v[-1]] if v[-1:] in units else int(v)
    return out


def processes(groups: list[int]) -> dict[int, tuple[int, procfs.Stat]]:
    """``pid -> (group, Stat)`` of every live process in the process groups ``groups`` or
    descended from one of their processes (a worker that made a group of its own still counts),
    ``group`` being the group it belongs to by that rule."""
    stats = dict(procfs.processes())
    owner = {pid: st.pgid for pid, st in stats.items() if st.pgid in groups}
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(st.ppid, []).append(pid)
    stack = list(owner)
    while stack:
        pid = stack.pop()
        for c in children.get(pid, []):
            if c not in owner:
                owner[c] = owner[pid]
                stack.append(c)
    return {pid: (g, stats[pid]) for pid, g in owner.items()}


def group_cpu(groups: list[int]) -> float:
    """CPU seconds of the live processes of :func:`processes` (``groups``), each with the CPU of the
    children it reaped (``utime + stime + cutime + cstime``)."""
    return sum(st.cpu_seconds + st.children_cpu_seconds for _, st in processes(groups).values())


class Sampler(threading.Thread):
    """Reads ``/proc`` every ``interval`` seconds until :meth:`finish`: per cluster role the peak
    ``VmHWM`` of its JVM, the SDK workers' peaks, and the jars in the blob stores."""

    def __init__(self, cluster=None, interval: float = 0.5):
        super().__init__(daemon=True)
        self.cluster, self.interval = cluster, interval
        self.done = threading.Event()
        self.jvm_hwm_kb: dict[str, int] = {}
        self.worker_hwm_kb: dict[int, int] = {}  # python worker pid -> largest VmHWM seen
        self.worker_cmd: dict[int, str] = {}
        self.worker_rss: dict[int, list[tuple[float, int]]] = {}  # python worker pid -> [(time, VmRSS KB)]
        self.cpu_first: dict[int, float] = {}  # pid -> its own CPU seconds (utime + stime) when first seen
        self.cpu_last: dict[int, float] = {}  # ... when last seen
        self.kind: dict[int, str] = {}  # pid -> "jvm", "python" (SDK worker) or "other" (boot, shells)
        self.workers_sum_kb = 0  # largest sum of the workers' VmRSS at one sample
        self.workers_seen = 0
        self.blobs: dict[Path, tuple[int, int]] = {}  # blob folder of a job -> largest (files, bytes) seen
        self.roles = {}
        self.jvm_pid: dict[str, int] = {}  # role -> its JVM's pid
        self.tm_ids: dict[str, str] = {}  # TaskManager role -> its id in Flink's REST API
        self.tm_metric_names: list[str] = []
        self.tm_metrics: dict[str, dict[str, list[float]]] = {}  # role -> metric -> [first, peak, last]
        self.heap_rss_kb: dict[str, int] = {}  # TaskManager role -> largest resident KB of its heap mapping
        self.outside_heap_kb: dict[str, int] = {}  # ... largest VmRSS minus the heap's resident KB
        if cluster is not None:
            names = ["jobmanager", *[f"taskmanager-{i}" for i in range(cluster.task_managers)], "job-server"]
            self.roles = dict(zip(cluster.pids, names))

    def sample(self) -> None:
        if not self.roles:
            return
        total = 0
        for pid, (group, st) in processes(list(self.roles)).items():
            role = self.roles[group]
            cmd = _cmdline(pid)
            exe = os.path.basename(cmd.split(" ", 1)[0])
            self.cpu_first.setdefault(pid, st.cpu_seconds)
            self.cpu_last[pid] = st.cpu_seconds
            self.kind[pid] = "jvm" if exe == "java" else "python" if exe.startswith("python") else "other"
            if exe == "java":
                self.jvm_pid[role] = pid
                self.jvm_hwm_kb[role] = max(self.jvm_hwm_kb.get(role, 0), _status_kb(pid, "VmHWM"))
                if role.startswith("taskmanager") and (xmx := _xmx(cmd)) and (heap := heap_rss_kb(pid, xmx)) is not None:
                    self.heap_rss_kb[role] = max(self.heap_rss_kb.get(role, 0), heap)
                    self.outside_heap_kb[role] = max(self.outside_heap_kb.get(role, 0), _status_kb(pid, "VmRSS") - heap)
            elif role.startswith("taskmanager") and cmd:  # the boot binary and its python worker
                total += _status_kb(pid, "VmRSS")
                if exe.startswith("python"):
                    self.worker_hwm_kb[pid] = max(self.worker_hwm_kb.get(pid, 0), _status_kb(pid, "VmHWM"))
                    self.worker_rss.setdefault(pid, []).append((time.time(), _status_kb(pid, "VmRSS")))
                    self.worker_cmd[pid] = cmd[:200]
        self.workers_sum_kb = max(self.workers_sum_kb, total)
        self.sample_jvm_metrics()
        for d in (self.cluster.workdir / "tmp").glob("*/blobStorage/job_*"):
            files = size = 0
            try:
                for j in d.iterdir():
                    size += j.stat().st_size
                    files += 1
            except OSError:
                pass
            old = self.blobs.get(d, (0, 0))
            self.blobs[d] = (max(old[0], files), max(old[1], size))

    def sample_jvm_metrics(self) -> None:
        """Each TaskManager's JVM memory and GC metrics from the REST API (first, peak and last value
        of each); nothing when the REST API does not answer (the cluster stopping)."""
        try:
            if len(self.tm_ids) < self.cluster.task_managers:
                self.tm_ids = match_task_managers(rest(self.cluster, "/taskmanagers", 5).get("taskmanagers", []),
                                                  {r: p for r, p in self.jvm_pid.items() if r.startswith("taskmanager")})
            if self.tm_ids and not self.tm_metric_names:
                listed = rest(self.cluster, f"/taskmanagers/{next(iter(self.tm_ids.values()))}/metrics", 5)
                self.tm_metric_names = sorted(m["id"] for m in listed if m["id"].startswith(JVM_METRICS))
            if not self.tm_metric_names:
                return
            for role, tm in self.tm_ids.items():
                got = rest(self.cluster, f"/taskmanagers/{tm}/metrics?get=" + ",".join(self.tm_metric_names), 5)
                table = self.tm_metrics.setdefault(role, {})
                for m in got:
                    try:
                        v = float(m["value"])
                    except (KeyError, TypeError, ValueError):
                        continue
                    old = table.get(m["id"])
                    table[m["id"]] = [v, v, v] if old is None else [old[0], max(old[1], v), v]
        except (OSError, ValueError, KeyError, StopIteration):
            pass

    def jvm_figures(self) -> dict:
        """Per TaskManager role: the peaks (MB) of the heap in use, the heap committed, the direct
        buffers and the non-heap memory in use, the collections and their seconds during the run, and
        every metric's ``[first, peak, last]``."""
        out = {}
        for role, table in self.tm_metrics.items():
            def peak(name):
                return table[name][1] / MB if name in table else None
            gcs = {n.rsplit(".", 2)[1] for n in table if n.startswith("Status.JVM.GarbageCollector.")} - {"All"}  # the sum
            out.update({f"{role}_heap_used_peak_mb": peak("Status.JVM.Memory.Heap.Used"),
                        f"{role}_heap_committed_peak_mb": peak("Status.JVM.Memory.Heap.Committed"),
                        f"{role}_heap_max_mb": peak("Status.JVM.Memory.Heap.Max"),
                        f"{role}_direct_used_peak_mb": peak("Status.JVM.Memory.Direct.MemoryUsed"),
                        f"{role}_nonheap_used_peak_mb": peak("Status.JVM.Memory.NonHeap.Used"),
                        f"{role}_metaspace_used_peak_mb": peak("Status.JVM.Memory.Metaspace.Used"),
                        f"{role}_network_used_peak_mb": peak("Status.Shuffle.Netty.UsedMemory"),
                        f"{role}_managed_used_peak_mb": peak("Status.Flink.Memory.Managed.Used"),
                        f"{role}_threads_peak": table.get("Status.JVM.Threads.Count", [None, None])[1],
                        f"{role}_gc_count": sum(table[f"Status.JVM.GarbageCollector.{g}.Count"][2]
                                                - table[f"Status.JVM.GarbageCollector.{g}.Count"][0]
                                                for g in gcs if f"Status.JVM.GarbageCollector.{g}.Count" in table),
                        f"{role}_gc_s": sum(table[f"Status.JVM.GarbageCollector.{g}.Time"][2]
                                            - table[f"Status.JVM.GarbageCollector.{g}.Time"][0]
                                            for g in gcs if f"Status.JVM.GarbageCollector.{g}.Time" in table) / 1000,
                        f"{role}_jvm_metrics": table, f"{role}_rest_id": self.tm_ids.get(role)})
        return out

    def largest_worker_timeline(self, vertices: list, points: int = 40) -> dict:
        """The worker with the largest peak: its RSS over the run (``points`` samples, MB, seconds
        from its first sample), when it peaked and the Flink vertices running then (``vertices``:
        ``(name, start, end)`` in epoch seconds): which stage a worker's peak belongs to."""
        if not self.worker_rss:
            return {}
        pid = max(self.worker_hwm_kb, key=self.worker_hwm_kb.get)
        series = self.worker_rss.get(pid) or [(0.0, 0)]
        t_peak, kb = max(series, key=lambda s: s[1])
        step = max(1, len(series) // points)
        return {"largest_worker_rss_mb": [(round(t - series[0][0], 1), round(k / 1024)) for t, k in series[::step]],
                "largest_worker_peak_at_s": round(t_peak - series[0][0], 1), "largest_worker_peak_rss_mb": round(kb / 1024),
                "vertices_at_peak": [n[:120] for n, a, b in vertices if a <= t_peak <= (b if b > 0 else float("inf"))]}

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds between the first and last sample, per kind of process (own CPU only, not
        what it reaped; a process's last interval before it ended is missed)."""
        out: dict[str, float] = {}
        for pid, last in self.cpu_last.items():
            out[self.kind[pid]] = out.get(self.kind[pid], 0.0) + (last - self.cpu_first[pid])
        return out

    def job_blobs(self, jid: str) -> tuple[int, float]:
        """(files, MB) of job ``jid`` in the JobManager's and the TaskManagers' blob stores, summed."""
        mine = [v for d, v in self.blobs.items() if d.name == f"job_{jid}"]
        return sum(f for f, _ in mine), sum(b for _, b in mine) / MB

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.sample()

    def finish(self) -> None:
        self.sample()
        self.done.set()
        self.join()


# ---------------------------------------------------------------- Flink REST
def rest(cluster, path: str, timeout: float = 30):
    with urllib.request.urlopen(cluster.rest_url + path, timeout=timeout) as r:
        return json.load(r)


JVM_METRICS = ("Status.JVM.Memory.", "Status.JVM.GarbageCollector.", "Status.JVM.Threads.", "Status.Flink.Memory.",
               "Status.Shuffle.Netty.")


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its socket inodes in ``/proc/<pid>/net/tcp*``)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def match_task_managers(listed: list[dict], jvms: dict[str, int]) -> dict[str, str]:
    """``role -> TaskManager id`` for the TaskManagers of ``/taskmanagers`` (``listed``) whose id's
    port (``host:port-suffix``) or data port is one their JVM of ``jvms`` (``role -> pid``) listens
    on; empty until every listed TaskManager is matched."""
    ports = {role: listening_ports(pid) for role, pid in jvms.items()}
    out = {}
    for tm in listed:
        tid = tm.get("id", "")
        mine = {tm.get("dataPort")}
        head = tid.split("-", 1)[0]
        if head.rpartition(":")[2].isdigit():
            mine.add(int(head.rpartition(":")[2]))
        roles = [r for r, p in ports.items() if p & mine]
        if len(roles) == 1:
            out[roles[0]] = tid
    return out if len(out) == len(listed) else {}


def flink_jobs(cluster) -> list[dict]:
    return rest(cluster, "/jobs/overview").get("jobs", [])


def flink_job_figures(cluster, jid: str) -> dict:
    job = rest(cluster, f"/jobs/{jid}")
    verts = job.get("vertices", [])
    m = [v.get("metrics", {}) for v in verts]
    top = sorted(verts, key=lambda v: -v.get("metrics", {}).get("write-bytes", 0))[:5]
    heavy = []  # the vertices that wrote most, with what each of their subtasks wrote (skew)
    for v in top:
        subtasks = rest(cluster, f"/jobs/{jid}/vertices/{v['id']}").get("subtasks", [])
        heavy.append({"name": v["name"][:160], "parallelism": v.get("parallelism"),
                      "subtask_write_bytes": [s.get("metrics", {}).get("write-bytes", 0) for s in subtasks],
                      "subtask_read_records": [s.get("metrics", {}).get("read-records", 0) for s in subtasks],
                      "subtask_seconds": [s.get("duration", 0) / 1000 for s in subtasks]})
    return {"heaviest_vertices": heavy, "job_state": job.get("state"), "job_start": job["start-time"] / 1000, "job_end": job["end-time"] / 1000,
            "tasks": sum(v.get("parallelism", 0) for v in verts), "vertices": len(verts),
            "write_bytes": sum(x.get("write-bytes", 0) for x in m),
            "read_bytes": sum(x.get("read-bytes", 0) for x in m),
            "write_records": sum(x.get("write-records", 0) for x in m),
            "vertex_times": [(v["name"], v.get("start-time", 0) / 1000, v.get("end-time", 0) / 1000) for v in verts]}


# ---------------------------------------------------------------- one run
def run_audit(data: Path, out: Path, runner_args: list[str], cluster=None, interval: float = 0.5,
              env: Optional[dict] = None) -> dict:
    """Run the audit as a child process on ``data`` into ``out`` and measure it (see the module
    docstring). Raises ``RuntimeError`` with the child's output tail when it fails."""
    marks_file = out.parent / f"{out.name}.marks.json"
    log = out.parent / f"{out.name}.log"
    cmd = [sys.executable, "-c", WRAPPER, *AUDIT, "--input", str(data), "--output", str(out), *runner_args]
    env = {**os.environ, **(env or {}), "FFB_MARKS": str(marks_file)}
    groups = list(cluster.pids) if cluster is not None else []
    before = {j["jid"] for j in flink_jobs(cluster)} if cluster is not None else set()
    sampler = Sampler(cluster, interval)
    sampler.sample()  # the JVMs' CPU baseline
    sampler.start()
    cpu0 = group_cpu(groups) if groups else 0.0
    t0 = time.time()
    with open(log, "w") as f:  # cwd: the run's folder (python -c puts it first on sys.path: never a checkout)
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=out.parent)
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: end the child too
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.time() - t0
    cluster_cpu = group_cpu(groups) - cpu0 if groups else 0.0
    sampler.finish()
    if proc.returncode != 0:
        raise RuntimeError(f"audit failed ({proc.returncode}); {log}:\n" + log.read_text(errors="replace")[-3000:])
    marks = json.loads(marks_file.read_text())
    rec = {"wall_s": wall, "launcher_cpu_s": ru.ru_utime + ru.ru_stime, "cluster_cpu_s": cluster_cpu,
           "launcher_peak_rss_mb": ru.ru_maxrss / 1024,
           "launcher_rss_job_ended_mb": marks.get("maxrss_kb_job_ended", 0) / 1024,
           "load_average": os.getloadavg()}
    rec["cpu_s"] = rec["launcher_cpu_s"] + cluster_cpu
    if cluster is not None:
        new = [j["jid"] for j in flink_jobs(cluster) if j["jid"] not in before]
        if len(new) != 1:
            raise RuntimeError(f"expected one new Flink job, found {new}")
        fig = flink_job_figures(cluster, new[0])
        rec.update(fig, jid=new[0], lifted_combines=marks.get("lifted_combines"))
        rec.update(sampler.largest_worker_timeline(fig.pop("vertex_times")))
        rec.pop("vertex_times", None)
        start, end = fig["job_start"], fig["job_end"]
        rec.update({f"{role}_peak_rss_mb": kb / 1024 for role, kb in sampler.jvm_hwm_kb.items()})
        rec.update(sampler.jvm_figures())
        rec.update({f"{role}_heap_rss_peak_mb": kb / 1024 for role, kb in sampler.heap_rss_kb.items()})
        rec.update({f"{role}_outside_heap_rss_peak_mb": kb / 1024 for role, kb in sampler.outside_heap_kb.items()})
        rec.update(worker_peak_rss_mb=max(sampler.worker_hwm_kb.values(), default=0) / 1024,
                   workers_sum_peak_rss_mb=sampler.workers_sum_kb / 1024, worker_processes=len(sampler.worker_hwm_kb),
                   worker_commands=sorted(set(sampler.worker_cmd.values()))[:3],
                   **{f"{kind}_cpu_s": v for kind, v in sampler.cpu_by_kind().items()},
                   staged_files=sampler.job_blobs(new[0])[0], staged_mb=sampler.job_blobs(new[0])[1])
    else:
        start, end = marks.get("t_run", t0), marks.get("t_results", marks["t_end"])
    rec.update(startup_s=start - t0, processing_s=end - start, finish_s=t0 + wall - end)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rec["interactions_read"] = doc["summary"]["interactions_read"]
    return rec


def start_cluster(workdir: Path, env: Optional[dict] = None, **kw):
    """A fresh 2-TaskManager cluster; ``env``: variables set while it starts (its JVMs and so its
    SDK workers inherit them, e.g. ``PYTHONPATH``)."""
    from fair_forge_beam.testing.flink_cluster import FlinkCluster

    cluster = FlinkCluster(task_managers=2, workdir=workdir, ends_with_owner=True, **kw)
    t0 = time.monotonic()
    with mock.patch.dict(os.environ, env or {}):  # the JVMs inherit it, then it is restored
        cluster.start()
    return cluster, time.monotonic() - t0


def parse_variant(text: str) -> tuple[str, list[str], dict]:
    """``"LABEL [ARG ...]"`` → ``(label, audit arguments, environment)`` (``--code-root=PATH``:
    ``PYTHONPATH`` with that checkout first; ``--env=NAME=VALUE``: that variable set)."""
    words = shlex.split(text)
    if not words or words[0].startswith("-") or "/" in words[0]:
        raise ValueError(f"a variant starts with its label (a name), got {text!r}")
    args, env = [], {}
    for w in words[1:]:
        if w.startswith("--code-root="):
            root = str(Path(w.split("=", 1)[1]).resolve())
            env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        elif w.startswith("--env="):  # NAME=VALUE for the launcher and the fresh cluster (its SDK workers)
            name, _, value = w.split("=", 1)[1].partition("=")
            env[name] = value
        else:
            args.append(w)
    return words[0], args, env


# ---------------------------------------------------------------- table
COLUMNS = [  # (header, key, format)
    ("runner", "runner", "{}"), ("variant", "variant", "{}"), ("interactions", "n", "{:,}"), ("wall s", "wall_s", "{:.1f}"),
    ("CPU s", "cpu_s", "{:.1f}"), ("start-up s", "startup_s", "{:.1f}"), ("processing s", "processing_s", "{:.1f}"),
    ("finish s", "finish_s", "{:.1f}"), ("launcher MB", "launcher_peak_rss_mb", "{:.0f}"),
    ("TM-0 MB", "taskmanager-0_peak_rss_mb", "{:.0f}"), ("TM-1 MB", "taskmanager-1_peak_rss_mb", "{:.0f}"),
    *[(f"TM-{i} {head}", f"taskmanager-{i}_{key}", f) for head, key, f in (  # the JVM's own figures, TM-0 then TM-1
        ("heap MB", "heap_used_peak_mb", "{:.0f}"), ("heap comm. MB", "heap_committed_peak_mb", "{:.0f}"),
        ("heap RSS MB", "heap_rss_peak_mb", "{:.0f}"), ("RSS outside heap MB", "outside_heap_rss_peak_mb", "{:.0f}"),
        ("direct MB", "direct_used_peak_mb", "{:.0f}"), ("non-heap MB", "nonheap_used_peak_mb", "{:.0f}"),
        ("GCs", "gc_count", "{:.0f}"), ("GC s", "gc_s", "{:.1f}")) for i in range(2)],
    ("worker MB", "worker_peak_rss_mb", "{:.0f}"), ("workers sum MB", "workers_sum_peak_rss_mb", "{:.0f}"),
    ("tasks", "tasks", "{}"), ("lifted", "lifted_combines", "{}"), ("shuffled MB", "write_bytes", "{}"), ("blob files", "staged_files", "{}"), ("blob MB", "staged_mb", "{:.0f}"),
    ("identical", "identical", "{}"),
]


def fmt(rec: dict, key: str, f: str) -> str:
    v = rec.get(key)
    if v is None:
        return "-"
    if key == "write_bytes":
        return f"{v / MB:.1f}"
    if isinstance(v, list):
        return str(len(v))
    return f.format(v)


def print_table(recs: list[dict]) -> None:
    rows = [[h for h, _, _ in COLUMNS]] + [[fmt(r, k, f) for _, k, f in COLUMNS] for r in recs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    for i, row in enumerate(rows):
        print(" | ".join(c.rjust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


# ---------------------------------------------------------------- main
def staging_ab(work: Path, data: Path, jobs: int, interval: float, cluster=None) -> list[dict]:
    """``jobs`` audits with the jars staged and ``jobs`` without, alternately, on one cluster
    (``cluster``, or a new one stopped at the end)."""
    own = cluster is None
    if own:
        cluster, boot_s = start_cluster(work / "cluster-ab")
        print(f"staging A/B: cluster started in {boot_s:.1f} s", flush=True)
    rows = []
    try:
        for j in range(jobs):
            for stage in (True, False):
                out = work / f"ab-{'staged' if stage else 'unstaged'}-{j}"
                rec = run_audit(data, out, cluster.runner_args(stage_jars=stage), cluster, interval)
                rec.update(stage_jars=stage, job=j + 1)
                rows.append(rec)
                print(f"  job {j + 1}, jars {'staged  ' if stage else 'unstaged'}: start-up {rec['startup_s']:6.1f} s, "
                      f"wall {rec['wall_s']:6.1f} s, {rec['staged_files']} blob files ({rec['staged_mb']:.0f} MB "
                      f"over JobManager + TaskManagers), CPU {rec['cpu_s']:.1f} s", flush=True)
    finally:
        if own:
            cluster.stop()
    for stage in (True, False):
        s = [r["startup_s"] for r in rows if r["stage_jars"] == stage]
        print(f"  {'staged' if stage else 'unstaged'}: start-up min {min(s):.1f} s, mean {sum(s) / len(s):.1f} s")
    mins = [min(r["startup_s"] for r in rows if r["stage_jars"] == st) for st in (True, False)]
    print(f"  start-up unstaged / staged (min / min): {mins[1] / mins[0]:.2f}", flush=True)
    return rows


def main(argv=None, cluster=None) -> int:
    """Command line (module docstring). ``cluster``: a started ``FlinkCluster`` to run every Flink
    job on instead of a fresh 2-TaskManager cluster per run (the test's shared cluster)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="interactions per run, comma-separated")
    ap.add_argument("--runners", default="in_memory,flink", help="comma-separated: in_memory, flink")
    ap.add_argument("--work", help="working folder, kept (default: a new temporary folder)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between /proc samples")
    ap.add_argument("--staging-ab", type=int, default=0, metavar="J",
                    help="first J Flink jobs of --ab-size interactions with the jars staged and J without")
    ap.add_argument("--ab-size", type=int, default=300, help="interactions of the --staging-ab jobs (300)")
    ap.add_argument("--stage-jars", action="store_true", help="stage the jars in the scale runs (Beam's default)")
    ap.add_argument("--variant", action="append", default=[], metavar='"LABEL [ARG ...]"',
                    help="run every size and runner once per variant, with these audit arguments "
                         "(--code-root=PATH: that checkout first on PYTHONPATH); see the docstring")
    a = ap.parse_args(argv)
    try:
        variants = [parse_variant(v) for v in a.variant] or [("", [], {})]
    except ValueError as e:
        ap.error(str(e))
    if len({v[0] for v in variants}) != len(variants):
        ap.error("variant labels must differ")
    if cluster is not None and any(v[2] for v in variants):
        ap.error("--code-root needs a fresh cluster per run (its SDK workers inherit PYTHONPATH)")
    sizes = [int(s) for s in a.sizes.split(",")]
    runners = [r.strip() for r in a.runners.split(",")]
    if bad := set(runners) - {"in_memory", "flink"}:
        ap.error(f"unknown runners {sorted(bad)}")
    if "flink" in runners or a.staging_ab:
        from fair_forge_beam.testing import beam_runners as rn

        if reason := rn.missing_reason("flink"):
            print(reason, file=sys.stderr)
            return 2
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="bench-flink-scale-"))
    (work / "runs").mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; cores {os.cpu_count()}; load average {os.getloadavg()}", flush=True)
    data = {}
    for n in sorted(set(sizes) | ({a.ab_size} if a.staging_ab else set())):
        data[n] = work / f"sessions-{n}-seed{a.seed}.jsonl"
        if not data[n].exists():
            tmp = data[n].with_suffix(".part")
            made, sessions = write_sessions(str(tmp), n, a.seed)
            tmp.rename(data[n])
            print(f"data: {made:,} interactions in {sessions:,} sessions -> {data[n]}", flush=True)
    ab = []
    if a.staging_ab:
        ab = staging_ab(work, data[a.ab_size], a.staging_ab, a.interval, cluster)
        (work / "runs" / "staging-ab.json").write_text(json.dumps(ab, indent=1))
    for n in sizes:
        for runner in runners:
            for label, extra, env in variants:
                tag = f"{runner}-{n}" + (f"-{label}" if label else "")
                out = work / f"out-{tag}"
                print(f"run {runner} {n:,}{f' ({label})' if label else ''} ...", flush=True)
                same_as_ab = (runner == "flink" and cluster is not None and ab and n == a.ab_size and not extra
                              and cluster.runner_args(stage_jars=a.stage_jars or None) == cluster.runner_args(stage_jars=False))
                if same_as_ab:  # the last unstaged A/B job was this very run: the same data and command line
                    last = [r for r in ab if not r["stage_jars"]][-1]
                    rec = {k: v for k, v in last.items() if k not in ("stage_jars", "job")}
                    rec["reused"] = f"ab-unstaged-{last['job'] - 1}"
                    if out.exists():
                        shutil.rmtree(out)
                    shutil.copytree(work / rec["reused"], out)
                    print(f"  the staging A/B's job {rec['reused']} (same data and runner arguments), not run again", flush=True)
                elif runner == "flink" and cluster is not None:
                    rec = run_audit(data[n], out, cluster.runner_args(stage_jars=a.stage_jars or None,
                                                                      input_bytes=data[n].stat().st_size) + extra,
                                    cluster, a.interval)
                elif runner == "flink":
                    fresh, boot_s = start_cluster(work / (f"cluster-{n}" + (f"-{label}" if label else "")), env,
                                                  stage_jars=a.stage_jars or None)
                    try:
                        rec = run_audit(data[n], out, fresh.runner_args(input_bytes=data[n].stat().st_size) + extra,
                                        fresh, a.interval, env)
                    finally:
                        fresh.stop()
                    rec["cluster_start_s"] = boot_s
                else:
                    from fair_forge_beam.testing import beam_runners as rn

                    rec = run_audit(data[n], out, rn.runner_args("in_memory") + extra, None, a.interval, env)
                rec.update(runner=runner, n=n, variant=label or None, variant_args=extra, variant_env=env)
                (work / "runs" / f"{tag}.json").write_text(json.dumps(rec, indent=1))
                print("  " + json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in rec.items()}),
                      flush=True)
    recs = []
    for n in sizes:
        first = f"-{variants[0][0]}" if variants[0][0] else ""
        ref = work / f"out-in_memory-{n}{first}" / "results.json"
        for runner in ("in_memory", "flink"):  # every run of these sizes and variants in the work folder
            for label, _, _ in variants:
                tag = f"{runner}-{n}" + (f"-{label}" if label else "")
                f = work / "runs" / f"{tag}.json"
                if not f.exists():
                    continue
                rec = json.loads(f.read_text())
                res = work / f"out-{tag}" / "results.json"
                rec["identical"] = ("reference" if res == ref else
                                    (res.read_bytes() == ref.read_bytes()) if ref.exists() else "no reference")
                recs.append(rec)
    print()
    print_table(recs)
    print(f"load average at the end {os.getloadavg()}")
    return 0 if all(r["identical"] in ("reference", True, "no reference") for r in recs) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks run: clusters stop
    sys.exit(main())
