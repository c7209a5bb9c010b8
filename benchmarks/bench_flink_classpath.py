"""Per-job class loaders vs the shared classpath of the local Flink cluster (not a test).

For each mode (``--modes``, default ``per-job shared``) the script starts
:class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster` (2 TaskManagers) with
``share_classpath`` off or on, runs the keyword audit of ``tests/test_runners_integration.py``
on it ``--jobs`` times, and reports per job:

* wall seconds of ``pipelines.audit.run`` (submission to results on disk);
* CPU seconds of the cluster's process groups (JVMs and the SDK workers they started, live or
  reaped) plus the launcher's own CPU, both as deltas over the job;
* how many SDK environments the TaskManagers closed (``Closing environment`` in their logs:
  one per Python worker start that ended before the next task);
* whether ``results.json`` is byte-identical to the in-memory run of the same command.

Ratios compare modes of one run of this script; the machine's load moves the absolute figures.

    python benchmarks/bench_flink_classpath.py [--jobs 2] [--modes per-job shared]

Needs ``.ci/get_runners.sh`` (Flink). Every cluster is stopped at the end.
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fair_forge_beam import procfs  # noqa: E402
from fair_forge_beam.testing import beam_runners as rn  # noqa: E402
from fair_forge_beam.testing.flink_cluster import FlinkCluster  # noqa: E402
from pipelines import audit  # noqa: E402

ARGS = ["--quiet", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000",
        "--metrics", "humanity,toxicity", "--group-extractor", "keyword"]


def group_cpu(leaders: list[int]) -> float:
    """CPU seconds of every live process whose process group is one of ``leaders``, each with
    the CPU of the descendants it reaped (``cutime``/``cstime``)."""
    return sum(st.cpu_seconds + st.children_cpu_seconds for _, st in procfs.processes() if st.pgid in leaders)


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def closed_environments(cluster: FlinkCluster) -> int:
    return sum(f.read_text(errors="replace").count("Closing environment")
               for f in cluster.log_dir.glob("flink--taskexecutor-*.log"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="audits per cluster (default 2)")
    ap.add_argument("--modes", nargs="+", default=["per-job", "shared"], choices=["per-job", "shared"])
    a = ap.parse_args(argv)
    reason = rn.missing_reason("flink")
    if reason:
        print(reason, file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-flink-classpath-"))
    json_in, jsonl_in = audit.default_inputs()
    audit.run([*ARGS, "--output", str(tmp / "ref"), *rn.runner_args("in_memory")])
    ref = (tmp / "ref" / "results.json").read_bytes()
    rows = []
    for mode in a.modes:
        cluster = FlinkCluster(task_managers=2, workdir=tmp / f"flink-{mode}", share_classpath=(mode == "shared"),
                               ends_with_owner=True)
        t0 = time.monotonic()
        cluster.start()
        start_s = time.monotonic() - t0
        try:
            for job in range(a.jobs):
                out = tmp / f"out-{mode}-{job}"
                cpu0, me0, env0 = group_cpu(cluster.pids), self_cpu(), closed_environments(cluster)
                t0 = time.monotonic()
                audit.run([*ARGS, "--output", str(out), *cluster.runner_args()])
                wall = time.monotonic() - t0
                cpu = group_cpu(cluster.pids) - cpu0 + self_cpu() - me0
                same = (out / "results.json").read_bytes() == ref
                rows.append((mode, job + 1, start_s, wall, cpu, closed_environments(cluster) - env0, same))
                print(f"{mode:8s} job {job + 1}: cluster start {start_s:6.1f} s, job {wall:6.1f} s wall, "
                      f"{cpu:7.1f} s CPU, {rows[-1][5]:3d} SDK environments closed, "
                      f"results.json {'identical' if same else 'DIFFERENT'}", flush=True)
        finally:
            cluster.stop()
    if len(a.modes) == 2:
        for job in range(a.jobs):
            old = [r for r in rows if r[0] == a.modes[0] and r[1] == job + 1][0]
            new = [r for r in rows if r[0] == a.modes[1] and r[1] == job + 1][0]
            print(f"job {job + 1}: {a.modes[1]}/{a.modes[0]} wall {new[3] / old[3]:.2f}x, CPU {new[4] / old[4]:.2f}x")
    return 0 if all(r[6] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
