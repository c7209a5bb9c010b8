"""Acceptance (issue 18): audits read from a real Kafka topic on a real Flink cluster.

One stack per module (:mod:`fair_forge_beam.testing.kafka`): a Kafka 4.1 broker in KRaft mode
on 127.0.0.1, Beam's Java expansion service with KafkaIO (EMBEDDED environment: KafkaIO runs in
the TaskManagers), and the session's Flink 1.19 cluster (``flink_cluster`` in tests/conftest.py,
shared with the runner suite: JobManager + 3 TaskManagers (jobs of parallelism 2), 1 GB metaspace each, Beam's job server
on KafkaIO's classpath, PROCESS Python workers). Messages are sessions of the shipped hh-rlhf slice
as JSON values, written by kafka-python; the audit is the main job
(``--metrics toxicity --group-extractor keyword``; the identity suite of
``tests/test_runners_integration.py`` covers more metrics on Flink).

* bounded: ``--kafka-max-records`` reads every message of a 2-partition topic (sessions with a
  payload ``timestamp``, plus malformed messages) on Flink; the per-window results equal the
  in-memory run over a JSONL file of the same sessions, and every malformed message is a dead
  letter naming its topic, partition and offset;
* unbounded: ``python -m pipelines.audit`` runs a streaming job (message timestamps as event
  time, ``--window fixed:10s``) on the cluster; a batch of 40 sessions produced while it runs
  appears in its window's results, then a second batch (200), produced after the first window's
  results were written, appears in a later window; the final pane of each window equals the in-memory run
  over the same records. The job is cancelled through Flink's REST API.
* panes: a streaming job with ``--early-firing 1s --allowed-lateness 60s`` (fixed 20 s windows)
  writes early, on-time and late (accumulating) panes of a window; messages beyond the allowed
  lateness reach no pane; the final panes equal the in-memory run over the accepted records
  (:func:`test_early_on_time_late_panes_on_flink` says how event time is driven). Its job waits
  for event time most of its 2-3 minutes, so it starts first (fixture ``panes_run``, a background
  thread) and the bounded and streaming jobs run meanwhile on the cluster's other TaskManagers (the
  panes job has parallelism 1, the others 2, on 3 one-slot TaskManagers);
  each streaming test finds and cancels its own job by its Beam ``--job_name``.

Printed (``-s``): throughput of the bounded read (messages/s, whole job, start-up included) and
the latency of each streamed window (window end → its results on disk; first message → results).

Teardown cancels every job and stops every process the module started, and fails if one
survives (the shared cluster is checked likewise when the session ends). Artifacts come from ``.ci/get_runners.sh`` and ``.ci/get_kafka.sh``; missing here:
skipped; missing under ``CI=true``: failed — unless a script recorded the registry's "not
served" answer, which the skip quotes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import alive
from fair_forge_beam.windowed import read_windowed
from fair_forge_beam.testing import kafka as kf
from fair_forge_beam.testing import beam_runners as rn
from pipelines import audit

pytestmark = [pytest.mark.runners, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
AUDIT = ["--quiet", "--metrics", "toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex"]  # one metric: half the Flink graph
IN_CI = os.environ.get("CI", "").lower() == "true"
BASE = 1767225600  # 2026-01-01T00:00:00Z: payload times of the bounded topic
BAD = (b"{not json", b"\xff\xfe not utf-8", b"[1, 2, 3]")
WINDOW_S = 10
PANES_JOB, STREAM_JOB = "ffb-kafka-panes", "ffb-kafka-stream"  # Beam --job_name: each test finds and cancels its own job


def _require() -> None:
    reasons = [r for r in (rn.missing_reason("flink"), kf.missing_reason()) if r]
    if not reasons:
        return
    refused = [r for r in (rn.unavailable_reason("flink"), kf.unavailable_reason()) if r]
    if refused:
        pytest.skip(f"the registry does not serve an artifact: {'; '.join(refused)}")
    if IN_CI:
        pytest.fail(f"CI=true and {'; '.join(reasons)}")
    pytest.skip("; ".join(reasons))


def _sessions(start: int, n: int) -> list[dict]:
    lines = SESSIONS.read_text(encoding="utf-8").splitlines()[start:start + n]
    assert len(lines) == n
    return [json.loads(ln) for ln in lines]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, flink_cluster):
    """Broker and expansion service, started at the same time (they do not depend on each other
    until a job runs) while the session's Flink cluster boots (``flink_cluster`` in
    tests/conftest.py, shared with the runner suite); teardown cancels the jobs, stops the broker
    and the expansion service and checks that none of their processes is left (the cluster's own
    check runs when the session ends)."""
    from concurrent.futures import ThreadPoolExecutor

    _require()
    root = tmp_path_factory.mktemp("kafka-flink")
    parts = [kf.KafkaBroker(root / "broker", ends_with_owner=True),
             kf.ExpansionService(root / "expansion", ends_with_owner=True)]
    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="kafka-stack") as pool:
        starting = [pool.submit(part.start) for part in parts]
    errors = [e for e in (f.exception() for f in starting) if e is not None]
    if errors:
        for part in reversed(parts):
            part.stop()  # idempotent; a part whose start failed has stopped what it began
        if all(isinstance(e, (RuntimeError, FileNotFoundError)) for e in errors):
            pytest.fail("the Kafka/Flink stack did not start: " + "; ".join(map(str, errors)))
        raise errors[0]
    broker, expansion = parts
    try:
        cluster = flink_cluster()
    except BaseException:
        for part in reversed(parts):
            part.stop()
        raise
    assert isinstance(cluster, kf.KafkaFlinkCluster), "the session's cluster lacks KafkaIO's classpath"
    yield SimpleNamespace(broker=broker, expansion=expansion, cluster=cluster)
    pids = [p.pid for p in broker.procs + expansion.procs]
    try:
        kf.cancel_flink_jobs(cluster.rest_url)
    finally:
        for part in reversed(parts):
            part.stop()
    left = [pid for pid in pids if alive(pid)]
    assert not left, f"processes still running after cleanup: {left}"


def _produce(broker, topic: str, values: list[tuple[bytes, int]]) -> list:
    """Send ``(value, timestamp ms)`` pairs; the brokers' acknowledgements, in order."""
    producer = broker.producer(linger_ms=5)
    try:
        futures = [producer.send(topic, value, timestamp_ms=ts) for value, ts in values]
        producer.flush(timeout=60)
        return [f.get(timeout=60) for f in futures]
    finally:
        producer.close()


def _reference(tmp: Path, records: list[dict], window: str) -> list[dict]:
    """Slice records of the in-memory windowed run over a JSONL file of ``records``."""
    path = tmp / "reference.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp / "reference"
    audit.run([*AUDIT, "--input", str(path), "--window", window, "--output", str(out),
               f"--runner={rn.FNAPI}"])
    return json.loads((out / "windowed_results.json").read_text(encoding="utf-8"))["slices"]


def _dead_letters(out: Path) -> list[dict]:
    return [json.loads(ln) for f in sorted((out / "windows").glob("dead_letter-*.jsonl"))
            for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _final_panes(slices: list[dict]) -> dict:
    """``(metric, window start, slice) -> record without pane`` of each window's last pane."""
    last: dict = {}
    for r in slices:
        key = (r["metric"], r["window_start_s"], json.dumps(r.get("slice"), sort_keys=True), r.get("assistant_id"))
        if key not in last or r["pane"]["index"] > last[key]["pane"]["index"]:
            last[key] = r
    return {k: {f: v for f, v in r.items() if f != "pane"} for k, r in last.items()}


def test_bounded_read_on_flink_equals_file_run(stack, panes_run, tmp_path):
    """Every message of a 2-partition topic read on Flink (``--kafka-max-records``): per-window
    results equal the in-memory run over the same sessions; malformed messages are dead
    letters naming topic, partition and offset. (``panes_run``: the panes job runs meanwhile.)"""
    topic = "bounded"
    stack.broker.create_topic(topic, partitions=2)
    records = _sessions(0, 200)
    for i, r in enumerate(records):
        r["timestamp"] = BASE + 3 * i  # 200 sessions over 10 one-minute windows
    values = [(json.dumps(r).encode(), int(r["timestamp"] * 1000)) for r in records]
    values += [(b, BASE * 1000) for b in BAD]
    acks = _produce(stack.broker, topic, values)
    assert {a.partition for a in acks} == {0, 1}
    out = tmp_path / "flink"
    started = time.monotonic()
    try:
        audit.run([*AUDIT, "--window", "fixed:1m", "--kafka-bootstrap-servers", stack.broker.bootstrap,
                   "--kafka-topic", topic, "--kafka-expansion-service", stack.expansion.address,
                   "--kafka-max-records", str(len(values)), "--output", str(out), *stack.cluster.runner_args()])
    except Exception as e:
        raise AssertionError(f"the bounded Kafka audit failed on Flink: {e}\n{stack.cluster.log_tail()}") from e
    seconds = time.monotonic() - started
    print(f"\nbounded Kafka read on Flink: {len(values)} messages in {seconds:.1f} s "
          f"({len(values) / seconds:.1f} messages/s, job start-up included)")
    got = json.loads((out / "windowed_results.json").read_text(encoding="utf-8"))["slices"]
    ref = _reference(tmp_path, records, "fixed:1m")
    assert len({r["window_start_s"] for r in ref}) == 10
    assert got == ref
    dead = _dead_letters(out)
    expected = {f"kafka:{topic}/{a.partition}:{a.offset}" for a in acks[-len(BAD):]}
    assert {d["source"] for d in dead} == expected, dead
    assert len(dead) == len(BAD) and all(d["stage"] == "read" for d in dead)
    reasons = sorted(d["reason"].split(":")[0] for d in dead)
    assert reasons == ["invalid JSON", "line is not valid UTF-8", "record is a list, not an object"]


def _wait_for(predicate, timeout: float, what: str, proc=None, log: Path = None, cluster=None):
    tail = lambda: log.read_text(errors="replace")[-3000:] if log else ""
    try:
        value = kf.wait_until(predicate, timeout, proc)
    except ChildProcessError as e:
        raise AssertionError(f"{e} while waiting for {what}:\n{tail()}") from None
    if value:
        return value
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tail()}\n"
                         f"{cluster.log_tail(15) if cluster else ''}")


def _windows_written(out: Path) -> dict:
    """``window start -> set of metrics`` with slice results on disk."""
    seen = defaultdict(set)
    if (out / "windows").is_dir():
        for r in read_windowed(str(out), "slices"):
            seen[r["window_start_s"]].add(r["metric"])
    return seen


def _produce_in_one_window(broker, topic: str, records: list[dict]) -> tuple[float, list]:
    """Wait until at least 4 s are left in the current window, then send ``records`` stamped
    (message timestamp and payload ``timestamp``) with the current time; returns the window's start."""
    while True:
        now = time.time()
        start = now - now % WINDOW_S
        if now - start >= 0.5 and start + WINDOW_S - now >= 4:
            break
        time.sleep(0.1)
    values = []
    for r in records:
        ts_ms = int(time.time() * 1000)
        r["timestamp"] = ts_ms / 1000
        values.append((json.dumps(r).encode(), ts_ms))
    acks = _produce(broker, topic, values)
    assert all(r["timestamp"] < start + WINDOW_S for r in records), "the batch did not fit in one window"
    return start, acks


def test_streaming_audit_on_flink(stack, panes_run, tmp_path):
    """An unbounded read on Flink: batches produced while the job runs appear in their
    window's results; each window's final pane equals the in-memory run over the same records.
    (``panes_run``: the panes job runs meanwhile, on another TaskManager.)"""
    topic = "live"
    stack.broker.create_topic(topic, partitions=2)
    out = tmp_path / "stream"
    log = tmp_path / "stream.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, "-m", "pipelines.audit", *AUDIT, "--window", f"fixed:{WINDOW_S}s",
           "--kafka-bootstrap-servers", stack.broker.bootstrap, "--kafka-topic", topic,
           "--kafka-expansion-service", stack.expansion.address, "--kafka-event-time", "message",
           "--output", str(out), f"--job_name={STREAM_JOB}", *stack.cluster.runner_args()]
    rest = stack.cluster.rest_url
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        submitted = time.monotonic()
        _wait_for(lambda: kf.running_flink_jobs(rest, STREAM_JOB), 600, "the job to be submitted", proc, log)
        _wait_for(lambda: kf.flink_job_running(rest, name=STREAM_JOB), 300, "the job's tasks to run", proc, log, stack.cluster)
        print(f"\nstreaming job running {time.monotonic() - submitted:.1f} s after submission")
        batches, timings = [_sessions(200, 40), _sessions(240, 200)], []
        for batch in batches:
            start, _ = _produce_in_one_window(stack.broker, topic, batch)
            sent = time.time()
            _wait_for(lambda: _windows_written(out).get(start) == {"toxicity"}, 240,
                      f"the results of window {start}", proc, log, stack.cluster)
            done = time.time()
            timings.append((start, done - (start + WINDOW_S), done - sent))
        for batch, (start, after_end, after_send) in zip(batches, timings):
            print(f"window {start:.0f}: {len(batch)} messages, results {after_end:.1f} s after the window's end, "
                  f"{after_send:.1f} s after its messages were sent ({len(batch) / after_send:.1f} messages/s at least)")
        assert timings[1][0] > timings[0][0], "the second batch must land in a later window"
        # a moment for any further pane, then compare every window written
        time.sleep(2)
        got = _final_panes(read_windowed(str(out), "slices"))
    finally:
        cancelled = kf.stop_streaming_job(proc, rest, name=STREAM_JOB)
    assert cancelled, "the streaming job was not running at cleanup"
    ref = _final_panes(_reference(tmp_path, batches[0] + batches[1], f"fixed:{WINDOW_S}s"))
    assert {k[1] for k in ref} == {t[0] for t in timings}
    assert got == ref
    panes = {r["pane"]["timing"] for r in read_windowed(str(out), "slices")}
    assert panes == {"ON_TIME"}


def _one_turn(rec: dict) -> dict:
    """``rec`` with its first turn only: a session then lies in one pane, so ``n_sessions`` of an
    accumulated pane equals the bounded run's (see :mod:`fair_forge_beam.streaming.windows`)."""
    return {**rec, "conversation": rec["conversation"][:1]}


def _produce_to(broker, topic: str, values: list[tuple[bytes, int, int]]) -> list:
    """Send ``(value, timestamp ms, partition)`` triples; the acknowledgements, in order."""
    producer = broker.producer(linger_ms=5)
    try:
        futures = [producer.send(topic, value, timestamp_ms=ts, partition=part) for value, ts, part in values]
        producer.flush(timeout=60)
        return [f.get(timeout=60) for f in futures]
    finally:
        producer.close()


def _panes(out: Path, start: float) -> list[dict]:
    """The ``overall`` slice record of every pane of the window starting at ``start``, by pane index."""
    if not (out / "windows").is_dir():
        return []
    recs = [r for r in read_windowed(str(out), "slices") if r["window_start_s"] == start and r["slice"] == "overall"]
    return sorted(recs, key=lambda r: r["pane"]["index"])


PANE_WINDOW_S, LATENESS_S = 20, 60


def _panes_scenario(stack, tmp_path: Path, stop) -> SimpleNamespace:
    """Drive the streaming job of :func:`test_early_on_time_late_panes_on_flink` through its six
    steps (its docstring); runs in a background thread (fixture ``panes_run``) while the other
    tests of this module run their jobs on the cluster's other slots. Returns what the test
    asserts on; raises ``AssertionError`` when a step times out, the machine was too slow, or
    ``stop`` (a ``threading.Event``) is set (the module's tests ended first)."""
    topic = "panes"
    stack.broker.create_topic(topic, partitions=2)
    out = tmp_path / "panes"
    log = tmp_path / "panes.log"
    size = PANE_WINDOW_S
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, "-m", "pipelines.audit", *AUDIT, "--window", f"fixed:{size}s",
           "--early-firing", "1s", "--allowed-lateness", f"{LATENESS_S}s",
           "--kafka-bootstrap-servers", stack.broker.bootstrap, "--kafka-topic", topic,
           "--kafka-expansion-service", stack.expansion.address, "--kafka-event-time", "message",
           # parallelism 1: the job gets the cluster's third TaskManager, the other tests' jobs the other two
           "--output", str(out), f"--job_name={PANES_JOB}", *stack.cluster.runner_args(parallelism=1)]
    pool = [_one_turn(r) for r in _sessions(440, 15)]
    accepted: list[dict] = []
    rest = stack.cluster.rest_url

    def send(times: list[float], partitions: list[int], keep: bool = True) -> None:
        values = []
        for ts, part in zip(times, partitions):
            r = dict(pool.pop(0), timestamp=ts)
            if keep:
                accepted.append(r)
            values.append((json.dumps(r).encode(), int(round(ts * 1000)), part))
        _produce_to(stack.broker, topic, values)

    def wait(pred, what):
        def check():
            if stop.is_set():
                raise AssertionError(f"stopped while waiting for {what}: the module's other tests ended first")
            return pred()
        return _wait_for(check, 300, what, proc, log, stack.cluster)

    def on_time(start):
        return [p for p in _panes(out, start) if p["pane"]["timing"] == "ON_TIME"]

    def window_start_ahead(after: float, room: float = 3.0) -> float:
        """Wait for the first window starting at or after ``after`` (+0.5 s); its start."""
        start = -(-after // size) * size
        while time.time() < start + 0.5:
            time.sleep(0.1)
        assert time.time() < start + size - room, "missed the window's start"
        return start

    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        wait(lambda: kf.running_flink_jobs(rest, PANES_JOB), "the job to be submitted")
        wait(lambda: kf.flink_job_running(rest, name=PANES_JOB), "the job's tasks to run")
        # 1. on time, at W's start: an early pane
        t0 = window_start_ahead(time.time())
        send([time.time()] * 6, [0, 1, 0, 1, 0, 1])
        first = wait(lambda: _panes(out, t0), "a first pane of W")
        assert first[0]["pane"]["timing"] == "EARLY", first[0]["pane"]
        # 2. the on-time pane
        wait(lambda: on_time(t0), "W's on-time pane")
        # 3. late, within the allowed lateness
        lag = time.time() - (t0 + size)
        assert lag < LATENESS_S - 15, f"W's on-time pane came {lag:.0f} s after its end: too slow to test lateness"
        send([t0 + 5, t0 + 10, t0 + 15], [0, 1, 0])
        wait(lambda: [p for p in _panes(out, t0) if p["pane"]["timing"] == "LATE" and p["n_interactions"] == 9],
             "a late pane of W with the 3 late sessions")
        # 4. the watermark passes W's end + allowed lateness at every stage
        v = window_start_ahead(t0 + size + LATENESS_S)
        send([time.time()] * 2, [0, 1])
        wait(lambda: on_time(v), "V's on-time pane")
        # 5. too late for W; 6. then a later window U (the one of "now": V's on-time pane came
        # after V's end, and a message stamped "now" is never behind the watermark) closes behind them
        send([t0 + 4, t0 + 8], [0, 1], keep=False)
        now = time.time()
        u = now - now % size
        send([now] * 2, [0, 1])
        wait(lambda: on_time(u), "U's on-time pane")
        time.sleep(3)  # a moment for any further pane of W
        # the too-late sessions are dead letters (written in 1-minute windows of their arrival)
        def too_late():
            found = [d for d in _dead_letters(out) if d["reason"].startswith("late: ")]
            return found if len(found) >= 2 else None
        late_dead = wait(too_late, "the too-late sessions' dead letters")
        panes_w = _panes(out, t0)
        all_panes = read_windowed(str(out), "slices")
    finally:
        cancelled = kf.stop_streaming_job(proc, rest, name=PANES_JOB)
    assert cancelled, "the streaming job was not running at cleanup"
    return SimpleNamespace(t0=t0, v=v, u=u, lag=lag, panes_w=panes_w, all_panes=all_panes, accepted=accepted,
                           late_dead=late_dead)


@pytest.fixture(scope="module")
def panes_run(request, stack, tmp_path_factory):
    """The scenario of :func:`test_early_on_time_late_panes_on_flink`, started in a background
    thread as soon as the first test of the module asks for this fixture (the job mostly waits
    for event time and lateness: 2 minutes and more), so that the bounded and streaming tests run
    their jobs meanwhile on the cluster's other TaskManagers (``flink_cluster``: 3 TaskManagers,
    jobs of parallelism 2; this one has parallelism 1). ``None`` when that test is not selected.
    Teardown stops a scenario still running (its test was not reached) and waits until it has
    cancelled its job."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if not any(item.name == "test_early_on_time_late_panes_on_flink" for item in request.session.items):
        yield None
        return
    tmp = tmp_path_factory.mktemp("panes")
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-panes")
    try:
        yield SimpleNamespace(future=pool.submit(_panes_scenario, stack, tmp, stop), tmp=tmp)
    finally:
        stop.set()  # a scenario still running (its test was not reached) cancels its job and ends
        pool.shutdown(wait=True)


def test_early_on_time_late_panes_on_flink(panes_run):
    """Early, on-time and late panes of a streaming audit on Flink: ``--window fixed:20s
    --early-firing 1s --allowed-lateness 60s --kafka-event-time message``.

    How event time moves (KafkaIO 2.70's create-time policy, ``CustomTimestampPolicyWithLimitedDelay``,
    read through ``use_deprecated_read``): a partition's watermark is the highest message
    timestamp read so far, except that it is capped at the wall clock (messages stamped in the
    future do not move it past "now") and that, once the partition is caught up (no backlog),
    it advances to the wall clock. A partition that never received a message holds the
    watermark back. So the watermark cannot be driven past the wall clock by message
    timestamps; this test sends every message to an explicit partition (both partitions get
    messages from the start), stamps late messages inside an already closed window, and uses the
    panes written on disk, never sleeps, as the evidence that the watermark passed a point.
    Window W = [t0, t0 + 20 s):

    1. 6 sessions stamped "now" at W's start → an EARLY pane of W (watermark before W's end);
    2. W's ON_TIME pane (6 interactions) once the watermark passes W's end;
    3. at once, 3 sessions stamped inside W (the watermark is past W's end, but less than 60 s
       past: checked against the wall clock, the test fails if the machine was too slow) → a
       LATE pane with 9 interactions (accumulating: on-time 6 + late 3);
    4. one session stamped "now" in the first window V starting at or after W's end + 60 s; V's
       ON_TIME pane shows the watermark passed W's end + 60 s at every stage: W has expired;
    5. 2 sessions stamped inside W: too late. They are routed to the dead letter before the
       runner's ``GroupByKey`` would drop them (:mod:`fair_forge_beam.streaming.late`: W had
       earlier records, so its expiry timer had fired), each with the reason ``late: event time
       … is behind the watermark by more than the allowed lateness 60s …`` (issue 28: they were
       dropped with no count);
    6. one more session stamped "now" in a later window U; once U's ON_TIME pane is written, W
       has received no further pane: the too-late sessions are in no pane.

    The final pane of W, V and U equals the in-memory bounded windowed run over the records they
    accepted (on-time, late and the two later sessions; not the too-late ones).
    """
    run = panes_run.future.result()
    t0, v, u, panes_w, all_panes = run.t0, run.v, run.u, run.panes_w, run.all_panes
    print(f"\npanes of W on Flink: {[(p['pane']['timing'], p['n_interactions']) for p in panes_w]}; "
          f"late sessions sent {run.lag:.1f} s after W's end")
    timings = [p["pane"]["timing"] for p in panes_w]
    assert timings[0] == "EARLY" and timings.count("ON_TIME") == 1 and timings[-1] == "LATE", timings
    assert [p["pane"]["index"] for p in panes_w] == list(range(len(panes_w)))
    at = timings.index("ON_TIME")
    assert set(timings[:at]) == {"EARLY"} and all(p["n_interactions"] <= 6 for p in panes_w[:at])
    assert panes_w[at]["n_interactions"] == 6
    late = panes_w[at + 1:]
    assert late and set(p["pane"]["timing"] for p in late) == {"LATE"}
    counts = [p["n_interactions"] for p in late]
    # accumulating: never below the on-time pane, growing with each late session. A late session
    # reaches the final combine as more than one upstream pane (its session record and its cell
    # values come out of the engine's session stage as separate elements), each firing a LATE pane
    # of its own in whichever order they arrive: a late pane may repeat the previous count
    assert counts == sorted(counts) and 6 <= counts[0] and 6 < counts[-1]
    assert counts[-1] == 9, "the too-late sessions must not reach any pane"
    late_dead = run.late_dead
    assert len(late_dead) == 2 and all(d["stage"] == "window" for d in late_dead), late_dead
    assert all("behind the watermark by more than the allowed lateness 60s" in d["reason"] for d in late_dead)
    assert late[-1]["pane"]["is_last"]  # W expired (watermark past its end + allowed lateness)
    assert all(r["pane"]["timing"] in ("EARLY", "ON_TIME") for r in all_panes if r["window_start_s"] != t0)
    got = _final_panes(all_panes)
    ref = _final_panes(_reference(panes_run.tmp, run.accepted, f"fixed:{PANE_WINDOW_S}s"))
    assert {k[1] for k in ref} == {t0, v, u}
    assert got == ref


def test_missing_artifacts_fail_under_ci(monkeypatch, tmp_path):
    """An empty artifact cache: skip locally, fail under CI=true, skip with the registry's
    answer when .ci/get_kafka.sh recorded one."""
    import _pytest.outcomes as outcomes

    monkeypatch.setenv("FAIR_FORGE_RUNNERS_DIR", str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", True)
    with pytest.raises(outcomes.Failed, match="CI=true.*broker_lib, expansion_lib, expansion_classes"):
        _require()
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", False)
    with pytest.raises(outcomes.Skipped, match="get_kafka.sh"):
        _require()
    (tmp_path / "kafka.unavailable").write_text("kafka-broker: Could not find artifact x:y:4.1.0\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "IN_CI", True)
    with pytest.raises(outcomes.Skipped, match="Could not find artifact x:y:4.1.0"):
        _require()


def test_message_time_and_dead_letters_in_process():
    """Without a broker: KafkaIO's records (as ``ReadFromKafka`` yields them, element timestamp
    = message timestamp) → interactions whose event time is the message timestamp with
    ``--kafka-event-time message``; malformed values are dead letters naming topic, partition
    and offset."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to
    from apache_beam.transforms.window import TimestampedValue

    from fair_forge_beam.windowed import _ParseStream
    from fair_forge_beam.io.stream_sources import _kafka_record

    session = {"session_id": "s1", "assistant_id": "a", "language": "english", "context": "",
               "conversation": [{"qa_id": "q0", "query": "hi", "assistant": "hello"},
                                {"qa_id": "q1", "query": "bye", "assistant": "goodbye"}]}
    rows = [("live", 0, 7, json.dumps(session).encode(), 1700000000.25), ("live", 1, 3, b"{oops", 1700000001.0),
            ("live", 1, 4, None, 1700000002.0), ("live", 0, 8, b"\xff", 1700000003.0)]

    class FakeKafka(beam.PTransform):
        def expand(self, pbegin):
            return (pbegin | beam.Create(rows)
                    | beam.Map(lambda r: TimestampedValue(beam.Row(topic=r[0], partition=r[1], offset=r[2], value=r[3]), r[4]))
                    | beam.Map(_kafka_record))

    with TestPipeline(runner=rn.FNAPI) as p:
        out = p | _ParseStream(FakeKafka(), None, "dead_letter", message_time=True)
        assert_that(out["interactions"] | beam.Map(lambda x: (x.element_id, x.event_time)),
                    equal_to([("s1/a/0", 1700000000.25), ("s1/a/1", 1700000000.25)]), label="times")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (d.source, d.reason.split(":")[0])),
                    equal_to([("kafka:live/1:3", "invalid JSON"), ("kafka:live/1:4", "record is null, not an object"),
                              ("kafka:live/0:8", "line is not valid UTF-8")]), label="dead")


def test_a_broker_whose_cluster_id_starts_with_a_dash_starts(tmp_path):
    """The broker's cluster id is derived from its folder (URL-safe base64, so a fifth of them start with
    '-'); given as ``-t ID``, Kafka's storage tool read such an id as an option ("argument --cluster-id/-t:
    expected one argument") and the whole Kafka/Flink group failed at setup, depending on the random name
    of the test session's temporary folder. Fails before (a folder chosen so that its id starts with '-')."""
    import base64
    import hashlib

    if kf.missing_reason():
        _require()
    workdir = next(p for p in (tmp_path / f"k{i}" for i in range(10_000))
                   if base64.urlsafe_b64encode(hashlib.blake2b(str(p).encode(), digest_size=16).digest()).startswith(b"-"))
    workdir.mkdir()
    broker = kf.KafkaBroker(workdir=workdir, ends_with_owner=True)
    try:
        broker.start()
        assert broker.port
    finally:
        broker.stop()
