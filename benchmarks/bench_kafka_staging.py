"""What one bounded Kafka job on Flink pays for the expansion service's staged classpath (not a test).

Beam's Java expansion service attaches its whole classpath (~190 jars, ~196 MB) to KafkaIO's
EMBEDDED environment unless it is started with ``--filesToStage``; the Python launcher then
uploads every one of those files to the job server's artifact store, for every job, and nothing
reads them (see :class:`fair_forge_beam.testing.kafka.ExpansionService`). This script starts one
broker, one :class:`~fair_forge_beam.testing.kafka.KafkaFlinkCluster` (2 TaskManagers) and two
expansion services, ``classpath`` (``stage_classpath=True``: the previous behaviour) and
``own-jar`` (the default now), and runs the bounded audit of ``tests/test_kafka_flink.py``
(200 sessions, 3 malformed messages, ``--kafka-max-records``) through each in turn, ``--rounds``
times, interleaved (the first to run alternates: the cluster's first job also warms it up). Per job:

* wall seconds of ``pipelines.audit.run`` (submission to results on disk);
* CPU seconds of the launcher (this process: the artifact upload happens here) and of the
  cluster's process groups (JVMs and their SDK workers), as deltas over the job;
* the largest size of the job server's artifact folder during the job (it removes a job's
  artifacts when the job ends), polled every 0.5 s (by this process: its CPU counts in the launcher's);
* whether ``windowed_results.json`` is byte-identical to the first job's.

Ratios compare the two services within this run; the machine's load moves absolute figures.

    python benchmarks/bench_kafka_staging.py [--rounds 2]

Needs ``.ci/get_runners.sh`` and ``.ci/get_kafka.sh``. Everything started is stopped at the end.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_flink_classpath import group_cpu, self_cpu  # noqa: E402
from fair_forge_beam.testing import kafka as kf  # noqa: E402
from fair_forge_beam.testing import beam_runners as rn  # noqa: E402
from pipelines import audit  # noqa: E402

AUDIT = ["--quiet", "--metrics", "toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex"]
SESSIONS = ROOT / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
BASE = 1767225600
BAD = (b"{not json", b"\xff\xfe not utf-8", b"[1, 2, 3]")


def _dir_bytes(path: Path) -> int:
    total = 0
    for f in path.rglob("*"):
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:  # removed meanwhile
            pass
    return total


class _Peak:
    """Largest size of ``path`` (bytes) seen by a background thread polling every 0.5 s."""

    def __init__(self, path: Path):
        import threading

        self.path, self.peak, self._stop = path, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.path.is_dir():
                self.peak = max(self.peak, _dir_bytes(self.path))
            self._stop.wait(0.5)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="jobs per expansion service (default 2)")
    a = ap.parse_args(argv)
    reasons = [r for r in (rn.missing_reason("flink"), kf.missing_reason()) if r]
    if reasons:
        print("; ".join(reasons), file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-staging-"))
    broker = kf.KafkaBroker(tmp / "broker", ends_with_owner=True)
    services = {"classpath": kf.ExpansionService(tmp / "exp-classpath", stage_classpath=True, ends_with_owner=True),
                "own-jar": kf.ExpansionService(tmp / "exp-own-jar", ends_with_owner=True)}
    cluster = kf.KafkaFlinkCluster(task_managers=2, workdir=tmp / "flink", ends_with_owner=True)
    started = [broker, *services.values(), cluster]
    rows, first = [], None
    try:
        for part in started:
            part.start()
        topic = "bench"
        broker.create_topic(topic, partitions=2)
        records = [json.loads(x) for x in SESSIONS.read_text(encoding="utf-8").splitlines()[:200]]
        values = [(json.dumps(dict(r, timestamp=BASE + 3 * i)).encode(), (BASE + 3 * i) * 1000)
                  for i, r in enumerate(records)] + [(b, BASE * 1000) for b in BAD]
        producer = broker.producer(linger_ms=5)
        for v, ts in values:
            producer.send(topic, v, timestamp_ms=ts)
        producer.flush(timeout=60)
        producer.close()
        for rnd in range(a.rounds):
            order = list(services.items())
            for name, service in (order if rnd % 2 == 0 else order[::-1]):  # alternate who runs first
                out = tmp / f"out-{name}-{rnd}"
                peak = _Peak(cluster.workdir / "artifacts")
                cpu0, me0 = group_cpu(cluster.pids), self_cpu()
                t0 = time.monotonic()
                audit.run([*AUDIT, "--window", "fixed:1m", "--kafka-bootstrap-servers", broker.bootstrap,
                           "--kafka-topic", topic, "--kafka-expansion-service", service.address,
                           "--kafka-max-records", str(len(values)), "--output", str(out), *cluster.runner_args()])
                wall = time.monotonic() - t0
                me, jvm = self_cpu() - me0, group_cpu(cluster.pids) - cpu0
                staged = peak.stop()
                got = (out / "windowed_results.json").read_bytes()
                first = first if first is not None else got
                rows.append((name, rnd + 1, wall, me, jvm, staged, got == first))
                print(f"{name:9s} job {rnd + 1}: {wall:6.1f} s wall, launcher {me:6.1f} s CPU, cluster {jvm:6.1f} s CPU, "
                      f"artifacts {staged / 1e6:7.1f} MB, results {'identical' if got == first else 'DIFFERENT'}",
                      flush=True)
    finally:
        try:
            kf.cancel_flink_jobs(cluster.rest_url)
        except (OSError, RuntimeError):
            pass
        for part in reversed(started):
            part.stop()
    for rnd in range(a.rounds):
        old = [r for r in rows if r[0] == "classpath" and r[1] == rnd + 1]
        new = [r for r in rows if r[0] == "own-jar" and r[1] == rnd + 1]
        if old and new:
            o, n = old[0], new[0]
            print(f"round {rnd + 1}: own-jar/classpath wall {n[2] / o[2]:.2f}x, launcher CPU {n[3] / o[3]:.2f}x, "
                  f"launcher + cluster CPU {(n[3] + n[4]) / (o[3] + o[4]):.2f}x")
    return 0 if rows and all(r[6] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
