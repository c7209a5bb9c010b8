"""Kafka on Flink: sustained read throughput, per-window latency, and two probes (not a test).

Starts the stack of ``tests/test_kafka_flink.py`` once (:mod:`fair_forge_beam.testing.kafka`: a
KRaft Kafka 4.1 broker, Beam's KafkaIO expansion service, a Flink 1.19 cluster with 2
TaskManagers and Beam's job server), then, each audit a ``python -m pipelines.audit`` process
(``--metrics toxicity --group-extractor keyword --window fixed:1m``):

* **throughput** — for each ``--n`` (default 20000 and 100000): N small flat-interaction messages
  (one turn each, text from the shipped hh-rlhf slice cut to 160 characters, payload timestamps
  spread over 10 minutes, 2 partitions) read with ``--kafka-max-records N`` on the cluster, and,
  as the baseline, the same records from a JSONL file on the same cluster. Wall time is
  submission to exit. With two N the slope ``(N2 - N1) / (t2 - t1)`` is the steady-state rate
  (messages/s) and the intercept the fixed cost of a job (start-up, graph, teardown);
* **latency** — a streaming job (``--kafka-event-time message``, ``fixed:10s``): ``--batch``
  messages stamped "now" are produced in each of ``--windows`` consecutive windows; for each
  window, the time from the window's end to its ON_TIME results on disk;
* ``--probe-watermark`` — the claim that the expansion service needs ``use_deprecated_read`` for
  unbounded reads to advance the watermark: the same streaming job through a second expansion
  service started without it; reports whether a window fired within ``--probe-wait`` seconds
  and how many records the job's vertices had passed on (Flink REST);
* ``--probe-metaspace K`` — the claim that TaskManagers need more metaspace: a second cluster with
  Flink's default metaspace (256 MB) runs up to K small bounded Kafka jobs one after another and
  reports after how many a TaskManager died (``OutOfMemoryError: Metaspace`` in its log) or that
  all K passed.

    python benchmarks/bench_kafka_flink.py                       # 20k and 100k, latency
    python benchmarks/bench_kafka_flink.py --n 2000 10000 --probe-watermark --probe-metaspace 8

Needs ``.ci/get_runners.sh flink`` and ``.ci/get_kafka.sh``. Every job is cancelled and every
process stopped at the end. Ratios compare runs of this script only.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fair_forge_beam.windowed import read_windowed  # noqa: E402
from fair_forge_beam.testing import kafka as kf  # noqa: E402

AUDIT = ["--quiet", "--metrics", "toxicity", "--group-extractor", "keyword"]
BASE = 1767225600  # 2026-01-01T00:00:00Z: payload times of the bounded topics
SPAN_S = 600


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def turns() -> list[tuple[str, str]]:
    path = ROOT / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.extend((t["query"][:160], t["assistant"][:160]) for t in json.loads(line)["conversation"] if t.get("assistant"))
    return out


def flat_records(n: int, stamp=None) -> list[dict]:
    """``n`` one-turn flat interactions (deterministic), payload ``timestamp`` spread over SPAN_S
    seconds from BASE unless ``stamp`` (a function of the index) is given."""
    pool = turns()
    recs = []
    for i in range(n):
        q, a = pool[i % len(pool)]
        recs.append({"session_id": f"s{i:07d}", "assistant_id": f"a{i % 20:02d}", "qa_id": f"s{i:07d}-0",
                     "query": q, "assistant": a, "turn_index": 0,
                     "timestamp": stamp(i) if stamp else BASE + SPAN_S * i / n})
    return recs


def produce(broker, topic: str, recs: list[dict], partitions: int = 2) -> float:
    """Send ``recs`` (message timestamp = payload ``timestamp``), round robin over partitions; seconds taken."""
    t = time.monotonic()
    producer = broker.producer(linger_ms=20, batch_size=256 * 1024)
    try:
        for i, r in enumerate(recs):
            producer.send(topic, json.dumps(r).encode(), timestamp_ms=int(r["timestamp"] * 1000), partition=i % partitions)
        producer.flush(timeout=300)
    finally:
        producer.close()
    return time.monotonic() - t


def run_audit(args: list[str], log: Path, timeout: float = 3600) -> float:
    """Run the main job in its own process; wall seconds. Raises with the log tail when it fails."""
    t = time.monotonic()
    with open(log, "wb") as f:
        rc = subprocess.run([sys.executable, "-m", "pipelines.audit", *AUDIT, *args], stdout=f, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=_env(), cwd=ROOT, timeout=timeout).returncode
    seconds = time.monotonic() - t
    if rc != 0:
        raise RuntimeError(f"audit failed ({rc}):\n{log.read_text(errors='replace')[-3000:]}")
    return seconds


def overall_count(out: Path) -> int:
    doc = json.loads((out / "windowed_results.json").read_text(encoding="utf-8"))
    last = {}
    for r in doc["slices"]:
        if r["slice"] == "overall":
            last[r["window_start_s"]] = r["n_interactions"]
    return sum(last.values())


def throughput(stack, ns: list[int], tmp: Path) -> list[dict]:
    rows = []
    for n in ns:
        topic = f"bench-{n}"
        stack.broker.create_topic(topic, partitions=2)
        recs = flat_records(n)
        produced = produce(stack.broker, topic, recs)
        path = tmp / f"flat-{n}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        common = ["--window", "fixed:1m", *stack.cluster.runner_args()]
        k_out, f_out = tmp / f"kafka-{n}", tmp / f"file-{n}"
        tk = run_audit(["--kafka-bootstrap-servers", stack.broker.bootstrap, "--kafka-topic", topic,
                        "--kafka-expansion-service", stack.expansion.address, "--kafka-max-records", str(n),
                        "--output", str(k_out), *common], tmp / f"kafka-{n}.log")
        tf = run_audit(["--input", str(path), "--output", str(f_out), *common], tmp / f"file-{n}.log")
        ck, cf = overall_count(k_out), overall_count(f_out)
        same = json.loads((k_out / "windowed_results.json").read_text())["slices"] == \
            json.loads((f_out / "windowed_results.json").read_text())["slices"]
        rows.append({"n": n, "produce_s": produced, "kafka_s": tk, "file_s": tf, "kafka_n": ck, "file_n": cf, "same": same})
        print(f"  n={n}: produced in {produced:.1f} s; Kafka {tk:.1f} s ({ck} read), file {tf:.1f} s ({cf} read), "
              f"results identical: {same}", flush=True)
    return rows


def _streaming_job(stack, expansion, topic: str, out: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pipelines.audit", *AUDIT, "--window", "fixed:10s",
           "--kafka-bootstrap-servers", stack.broker.bootstrap, "--kafka-topic", topic,
           "--kafka-expansion-service", expansion.address, "--kafka-event-time", "message",
           "--output", str(out), *stack.cluster.runner_args()]
    with open(log, "wb") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(), cwd=ROOT)


def _on_time_windows(out: Path) -> set:
    if not (out / "windows").is_dir():
        return set()
    return {r["window_start_s"] for r in read_windowed(str(out), "slices")
            if r["slice"] == "overall" and r["pane"]["timing"] == "ON_TIME"}


def latency(stack, batch: int, windows: int, tmp: Path) -> dict:
    topic = "latency"
    stack.broker.create_topic(topic, partitions=2)
    out = tmp / "latency"
    submitted = time.monotonic()
    proc = _streaming_job(stack, stack.expansion, topic, out, tmp / "latency.log")
    proc.rest_url = stack.cluster.rest_url
    rows = []
    try:
        if not kf.wait_until(lambda: kf.flink_job_running(stack.cluster.rest_url, allow_finished_vertices=True), 900, proc):
            raise RuntimeError("the streaming job did not run within 900 s")
        start_s = time.monotonic() - submitted
        sent = []
        for _ in range(windows):
            while True:  # the start of a window, with its 10 s ahead
                now = time.time()
                if 0.5 <= now % 10 < 1.5:
                    break
                time.sleep(0.05)
            w = now - now % 10
            t0 = time.time()
            produce(stack.broker, topic, flat_records(batch, stamp=lambda i: time.time()))
            t1 = time.time()
            assert t1 < w + 10, "a batch did not fit in its window"
            sent.append((w, t0, t1))
            time.sleep(2)
        seen = {}
        deadline = time.monotonic() + 600
        while len(seen) < windows and time.monotonic() < deadline:
            have = _on_time_windows(out)
            for w, _, _ in sent:
                if w in have and w not in seen:
                    seen[w] = time.time()
            time.sleep(0.25)
        for w, t0, t1 in sent:
            rows.append({"window": w, "sent_s": t1 - t0, "after_end": seen[w] - (w + 10) if w in seen else None,
                         "after_first": seen[w] - t0 if w in seen else None})
    finally:
        kf.stop_streaming_job(proc, proc.rest_url)
    return {"start_s": start_s, "rows": rows}


def probe_watermark(stack, wait_s: float, tmp: Path) -> dict:
    """A streaming job through an expansion service without ``use_deprecated_read``."""
    exp = kf.ExpansionService(tmp / "expansion-sdf", options=("--defaultEnvironmentType=EMBEDDED",),
                              ends_with_owner=True).start()
    topic = "probe-sdf"
    stack.broker.create_topic(topic, partitions=2)
    out = tmp / "probe-sdf"
    proc = _streaming_job(stack, exp, topic, out, tmp / "probe-sdf.log")
    proc.rest_url = stack.cluster.rest_url
    try:
        if not kf.wait_until(lambda: kf.flink_job_running(stack.cluster.rest_url, allow_finished_vertices=True), 900, proc):
            raise RuntimeError("the probe job did not run within 900 s")
        t0 = time.time()
        produce(stack.broker, topic, flat_records(200, stamp=lambda i: time.time()))
        fired = kf.wait_until(lambda: _on_time_windows(out), wait_s, proc)
        waited = time.time() - t0
        records = 0
        for jid in kf.running_flink_jobs(stack.cluster.rest_url):
            for v in kf._rest(f"{stack.cluster.rest_url}/jobs/{jid}").get("vertices", []):
                records += int(v.get("metrics", {}).get("write-records", 0))
    finally:
        kf.stop_streaming_job(proc, proc.rest_url)
        exp.stop()
    return {"fired": bool(fired), "waited_s": waited, "records_passed_on": records}


def probe_metaspace(stack, jobs: int, tmp: Path) -> dict:
    """Up to ``jobs`` bounded Kafka jobs on a cluster with Flink's default 256 MB metaspace and
    per-job class loaders (``share_classpath=False``: the condition the claim was made under;
    with the shared classpath no job loads the jars again)."""
    cluster = kf.KafkaFlinkCluster(task_managers=2, workdir=tmp / "flink-256", metaspace_mb=256, ends_with_owner=True,
                                   share_classpath=False).start()
    topic = "probe-meta"
    stack.broker.create_topic(topic, partitions=2)
    recs = flat_records(20)
    produce(stack.broker, topic, recs)
    done, error = 0, None
    try:
        for k in range(jobs):
            try:
                run_audit(["--window", "fixed:1m", "--kafka-bootstrap-servers", stack.broker.bootstrap,
                           "--kafka-topic", topic, "--kafka-expansion-service", stack.expansion.address,
                           "--kafka-max-records", "20", "--output", str(tmp / f"meta-{k}"), *cluster.runner_args()],
                          tmp / f"meta-{k}.log", timeout=1200)
                done += 1
                print(f"  metaspace 256 MB: job {k + 1} passed", flush=True)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                error = str(e)[-400:]
                break
        oom = [f.name for f in cluster.log_dir.glob("*") if f.is_file()
               and "OutOfMemoryError: Metaspace" in f.read_text(errors="replace")]
        alive = all(p.poll() is None for p in cluster.procs)
    finally:
        try:
            kf.cancel_flink_jobs(cluster.rest_url)
        except (OSError, RuntimeError):
            pass
        cluster.stop()
    return {"jobs_passed": done, "asked": jobs, "oom_logs": oom, "cluster_alive": alive, "error": error}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="*", default=[20000, 100000], help="bounded read sizes (none: skip)")
    ap.add_argument("--batch", type=int, default=500, help="messages per streamed window")
    ap.add_argument("--windows", type=int, default=3, help="streamed windows (0: skip the latency run)")
    ap.add_argument("--probe-watermark", action="store_true")
    ap.add_argument("--probe-wait", type=float, default=180.0)
    ap.add_argument("--probe-metaspace", type=int, default=0, metavar="K")
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    a = ap.parse_args(argv)
    for reason in (kf.missing_reason(),):
        if reason:
            print(reason, file=sys.stderr)
            return 2
    tmp = Path(tempfile.mkdtemp(prefix="ffb-bench-kafka-"))
    t = time.monotonic()
    parts = [kf.KafkaBroker(tmp / "broker", ends_with_owner=True),
             kf.ExpansionService(tmp / "expansion", ends_with_owner=True),
             kf.KafkaFlinkCluster(task_managers=2, workdir=tmp / "flink", ends_with_owner=True)]
    started = []
    load = os.getloadavg()
    try:
        for p in parts:
            started.append(p.start())
        from types import SimpleNamespace

        stack = SimpleNamespace(broker=parts[0], expansion=parts[1], cluster=parts[2])
        print(f"stack up in {time.monotonic() - t:.0f} s (load average {load[0]:.1f}); work folder {tmp}", flush=True)
        rows = throughput(stack, a.n, tmp) if a.n else []
        lat = latency(stack, a.batch, a.windows, tmp) if a.windows else None
        if lat:
            print(f"  latency: {json.dumps(lat)}", flush=True)
        wm = probe_watermark(stack, a.probe_wait, tmp) if a.probe_watermark else None
        if wm:
            print(f"  without use_deprecated_read: {json.dumps(wm)}", flush=True)
        if a.probe_metaspace:
            # the main cluster's TaskManagers would compete for the 2 cores: stop it first
            parts[2].stop()
        meta = probe_metaspace(stack, a.probe_metaspace, tmp) if a.probe_metaspace else None
    finally:
        try:
            if parts[2].procs:
                kf.cancel_flink_jobs(parts[2].rest_url)
        except (OSError, RuntimeError):
            pass
        for p in reversed(started):
            p.stop()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average at start {load[0]:.1f}, at end {os.getloadavg()[0]:.1f} (2 cores)")
    if rows:
        print("\n| messages | produce (s) | Kafka read on Flink (s) | msg/s | JSONL file on Flink (s) | msg/s | Kafka / file time | same results |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['n']:,} | {r['produce_s']:.1f} | {r['kafka_s']:.1f} | {r['n'] / r['kafka_s']:.0f} | {r['file_s']:.1f} "
                  f"| {r['n'] / r['file_s']:.0f} | {r['kafka_s'] / r['file_s']:.2f} | {r['same']} |")
        if len(rows) >= 2:
            a0, a1 = rows[0], rows[-1]
            dn = a1["n"] - a0["n"]
            sk, sf = dn / (a1["kafka_s"] - a0["kafka_s"]), dn / (a1["file_s"] - a0["file_s"])
            ik, i_f = a0["kafka_s"] - a0["n"] / sk, a0["file_s"] - a0["n"] / sf
            print(f"\nsteady state (slope between {a0['n']:,} and {a1['n']:,}): Kafka {sk:.0f} msg/s, file {sf:.0f} msg/s "
                  f"(Kafka/file rate {sk / sf:.2f}); fixed cost per job (intercept): Kafka {ik:.0f} s, file {i_f:.0f} s")
    if lat:
        print(f"\nstreaming job: all tasks running {lat['start_s']:.0f} s after submission")
        print("| window | produce (s) | results after window end (s) | results after first message (s) |")
        print("|---:|---:|---:|---:|")
        for i, r in enumerate(lat["rows"]):
            f = (lambda v: "not seen" if v is None else f"{v:.1f}")
            print(f"| {i + 1} ({a.batch} msgs) | {r['sent_s']:.1f} | {f(r['after_end'])} | {f(r['after_first'])} |")
    if wm:
        print(f"\nwithout use_deprecated_read: window fired: {wm['fired']} (waited {wm['waited_s']:.0f} s); "
              f"records passed on by the job's vertices: {wm['records_passed_on']}")
    if meta:
        print(f"\nmetaspace 256 MB (Flink default): {meta['jobs_passed']} of {meta['asked']} jobs passed; "
              f"OOM Metaspace in {meta['oom_logs'] or 'no log'}; cluster alive: {meta['cluster_alive']}; "
              f"error: {meta['error'] or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
