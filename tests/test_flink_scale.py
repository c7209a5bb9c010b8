"""``benchmarks/bench_flink_scale.py`` end to end at a small size on the session's Flink cluster
(issue 26, item 2), so that the script cannot rot; and the cluster's jobs carry no jars.

The fast tests check the pieces of "no jars staged" without a cluster: the launcher passes
``--pipeline_resources_detector_factory_class`` on to the job server (before, it refused the
option as unknown, and Beam's Python SDK would have dropped it), and ``FlinkCluster`` asks for it
only when its JVMs have the jars.

Runs the benchmark's ``main`` with ``--sizes 300 --staging-ab 1`` on the session's cluster
(``flink_cluster`` in tests/conftest.py): one job with the job server's jars staged (Beam's
default), one without (the cluster's default since issue 26), then the in-memory run; the
unstaged job, run with the cluster's default arguments, is the Flink run of the table, whose
``results.json`` must be byte-identical to the in-memory run's. Flink artifacts missing:
skipped locally, a failure under ``CI=true`` (as tests/test_runners_integration.py).
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from fair_forge_beam.testing import beam_runners as rn

from fair_forge_beam.testing.flink_cluster import NOTHING_TO_STAGE, FlinkCluster

NO_STAGING = f"--pipeline_resources_detector_factory_class={NOTHING_TO_STAGE}"

IN_CI = os.environ.get("CI", "").lower() == "true"


def _require() -> None:
    reason = rn.missing_reason("flink")
    if reason is None:
        return
    refused = rn.unavailable_reason("flink")
    if refused:
        pytest.skip(f"flink: the registry does not serve its artifact: {refused}")
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def test_the_detector_option_reaches_the_job_server():
    """The option is a Beam pipeline option for the launcher (no usage error) and is in what the
    Python SDK sends to a job server (``get_all_options``, which encodes the job's options)."""
    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.options import unknown_beam_options

    assert unknown_beam_options([NO_STAGING]) == []
    sent = pipeline_options([NO_STAGING, "--runner=PortableRunner"]).get_all_options()
    assert sent["pipeline_resources_detector_factory_class"] == NOTHING_TO_STAGE


def test_runner_args_stage_jars_only_without_the_shared_classpath(tmp_path):
    shared = FlinkCluster(workdir=tmp_path / "shared")
    assert not shared.stage_jars
    shared.detector_jar.parent.mkdir(parents=True)
    shared.detector_jar.write_bytes(b"")  # as start() leaves it after compiling NothingToStage
    assert NO_STAGING in shared.runner_args()
    assert NO_STAGING not in shared.runner_args(stage_jars=True)
    per_job = FlinkCluster(workdir=tmp_path / "per-job", share_classpath=False)
    assert per_job.stage_jars and NO_STAGING not in per_job.runner_args()
    with pytest.raises(ValueError, match="share_classpath"):
        FlinkCluster(workdir=tmp_path / "x", share_classpath=False, stage_jars=False)
    with pytest.raises(ValueError, match="without the job server's jars"):
        per_job.runner_args(stage_jars=False)
    # a cluster whose detector did not compile (no javac) stages, and says so when asked not to
    shared.detector_jar.unlink()
    with pytest.raises(ValueError, match="NothingToStage not compiled"):
        shared.runner_args()


def test_shared_classpath_config_is_parent_first_without_the_leaked_loader_check(tmp_path):
    """With Beam's classes in the TaskManager's loader, a pooled thread that a finished job started
    keeps that job's (closed) context class loader and may serve the next job: Flink's leak check
    failed a Kafka job's EMBEDDED Java harness on such a thread (CI, 2026-12-06), so the shared
    classpath turns the check off; per-job class loaders keep Flink's defaults."""
    import yaml

    home = tmp_path / "flink-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "config.yaml").write_text("classloader:\n  resolve-order: child-first\n", encoding="utf-8")
    shared = FlinkCluster(workdir=tmp_path / "shared")._write_config(home)
    doc = yaml.safe_load((shared / "config.yaml").read_text(encoding="utf-8"))
    assert doc["classloader"] == {"resolve-order": "parent-first", "check-leaked-classloader": False}
    per_job = FlinkCluster(workdir=tmp_path / "per-job", share_classpath=False)._write_config(home)
    doc = yaml.safe_load((per_job / "config.yaml").read_text(encoding="utf-8"))
    assert doc["classloader"] == {"resolve-order": "child-first"}


def test_a_jobs_parallelism_grows_with_its_input_and_its_exchanges_block(tmp_path):
    """Beam's Flink batch runner hands a subtask's stage output to Flink only when the subtask's one bundle
    ends, so a TaskManager held 1.27-1.31x at 1M what it held at 100k (session 30). The local cluster's jobs
    now take one subtask per SUBTASK_INPUT_BYTES of input (the benchmark's 100k: 2, its 1M: 20) and blocking
    exchanges, so that more subtasks than slots run in waves; the option reaches the job server."""
    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.options import unknown_beam_options
    from fair_forge_beam.testing.flink_cluster import SUBTASK_INPUT_BYTES

    cluster = FlinkCluster(workdir=tmp_path, stage_jars=True)
    assert cluster.parallelism == 2 and SUBTASK_INPUT_BYTES == 22_000_000
    for input_bytes, want in ((None, 2), (0, 2), (1, 2), (42_795_241, 2), (44_000_001, 3), (427_617_312, 20)):
        args = cluster.runner_args(input_bytes=input_bytes)
        assert f"--parallelism={want}" in args and cluster.parallelism_for(input_bytes) == want, (input_bytes, args)
        assert "--execution_mode_for_batch=BATCH_FORCED" in args
    assert "--parallelism=7" in cluster.runner_args(parallelism=7, input_bytes=427_617_312)
    # a job sized by its input: its workers end idle bundle processors early (fair_forge_beam.worker_plugin)
    assert "--beam_plugins=fair_forge_beam.worker_plugin" in cluster.runner_args(input_bytes=42_795_241)
    assert not any(a.startswith("--beam_plugins") for a in cluster.runner_args())
    assert unknown_beam_options(["--execution_mode_for_batch=BATCH_FORCED"]) == []
    sent = pipeline_options(["--execution_mode_for_batch=BATCH_FORCED", "--runner=PortableRunner"]).get_all_options()
    assert sent["execution_mode_for_batch"] == "BATCH_FORCED"


@pytest.mark.slow
def test_the_worker_plugin_ends_idle_bundle_processors_after_seconds():
    """Beam's Flink runner gives each task's stage a bundle descriptor of its own, and Beam's Python SDK kept each
    idle processor 60 s: at 1M interactions in 20 subtasks the largest worker grew to 608 / 714 MB (1.21x / 1.42x
    of 100k); with the plugin, 520 MB (1.04x). A worker imports the plugin (Beam's --beam_plugins) before it makes
    its harness, whose processor cache reads the constant."""
    import subprocess
    import sys

    code = ("from apache_beam.runners.worker import sdk_worker as w; before = w.DEFAULT_BUNDLE_PROCESSOR_CACHE_SHUTDOWN_THRESHOLD_S; "
            "import fair_forge_beam.worker_plugin; print(before, w.DEFAULT_BUNDLE_PROCESSOR_CACHE_SHUTDOWN_THRESHOLD_S)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["60", "5"], out.stdout


@pytest.mark.runners
@pytest.mark.slow
def test_a_job_of_more_subtasks_than_slots_runs_in_waves_with_the_same_results(flink_cluster, tmp_path):
    """A job of 5 subtasks on the session's cluster of 3 one-slot TaskManagers (one of them may hold the Kafka
    panes job) completes, and its results.json is the in-memory run's, byte for byte."""
    _require()
    from fair_forge_beam.testing.flink_cluster import SUBTASK_INPUT_BYTES
    from pipelines import audit

    cluster = flink_cluster()
    args = ["--metrics", "humanity", "--no-report", "--quiet"]
    audit.run([*args, "--output", str(tmp_path / "mem"), *rn.runner_args("in_memory")])
    audit.run([*args, "--output", str(tmp_path / "flink"),
               *cluster.runner_args(parallelism=5, input_bytes=5 * SUBTASK_INPUT_BYTES)])
    assert (tmp_path / "mem" / "results.json").read_bytes() == (tmp_path / "flink" / "results.json").read_bytes()


@pytest.mark.runners
@pytest.mark.slow
def test_bench_flink_scale_smallest_size_on_flink(flink_cluster, tmp_path, capsys):
    _require()
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_flink_scale.py"
    spec = importlib.util.spec_from_file_location("bench_flink_scale", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    cluster = flink_cluster()
    code = bench.main(["--sizes", "300", "--runners", "in_memory,flink", "--staging-ab", "1",
                       "--work", str(tmp_path)], cluster=cluster)
    printed = capsys.readouterr().out
    assert code == 0, printed
    runs = tmp_path / "runs"
    mem = json.loads((runs / "in_memory-300.json").read_text())
    flink = json.loads((runs / "flink-300.json").read_text())
    assert mem["interactions_read"] == flink["interactions_read"] == 300
    assert (tmp_path / "out-in_memory-300" / "results.json").read_bytes() == \
        (tmp_path / "out-flink-300" / "results.json").read_bytes()
    # every figure of the table was measured
    for key in ("wall_s", "cpu_s", "startup_s", "processing_s", "launcher_peak_rss_mb", "taskmanager-0_peak_rss_mb",
                "taskmanager-1_peak_rss_mb", "worker_peak_rss_mb", "workers_sum_peak_rss_mb"):
        assert flink[key] > 0, (key, flink)
    # each TaskManager's JVM as the REST API reports it, matched to its process by its port
    ids = set()
    for tm in ("taskmanager-0", "taskmanager-1"):
        assert 0 < flink[f"{tm}_heap_used_peak_mb"] <= flink[f"{tm}_heap_committed_peak_mb"], (tm, flink)
        assert flink[f"{tm}_heap_committed_peak_mb"] <= flink[f"{tm}_heap_max_mb"] < flink[f"{tm}_peak_rss_mb"] * 4
        assert flink[f"{tm}_direct_used_peak_mb"] > 0 and flink[f"{tm}_nonheap_used_peak_mb"] > 0, (tm, flink)
        assert flink[f"{tm}_gc_count"] >= 0 and flink[f"{tm}_gc_s"] >= 0, (tm, flink)
        # the heap's resident pages (smaps) and the rest of the RSS
        assert 0 < flink[f"{tm}_heap_rss_peak_mb"] <= flink[f"{tm}_heap_max_mb"], (tm, flink)
        assert 0 < flink[f"{tm}_outside_heap_rss_peak_mb"] < flink[f"{tm}_peak_rss_mb"], (tm, flink)
        ids.add(flink[f"{tm}_rest_id"])
    assert len(ids) == 2 and "TM-0 heap MB" in printed, ids
    assert flink["cluster_cpu_s"] > 0 and flink["worker_processes"] > 0
    assert flink["tasks"] >= flink["vertices"] > 0 and flink["write_bytes"] > 0, flink
    assert mem["startup_s"] > 0 and mem["processing_s"] > 0
    # the cluster has the job server's jars: a job stages them only when asked to
    ab = {r["stage_jars"]: r for r in json.loads((runs / "staging-ab.json").read_text())}
    lib_jars = len(list(cluster.job_server_lib().glob("*.jar")))
    assert ab[True]["staged_files"] >= lib_jars, ab[True]  # at least the JobManager's copy
    assert ab[False]["staged_files"] < lib_jars / 10, ab[False]
    assert flink["staged_files"] == ab[False]["staged_files"], flink
    # the shared cluster's default runner arguments are the unstaged A/B job's: that job is the
    # table's Flink run (the same data and command line), not run a third time
    assert flink["reused"] == "ab-unstaged-0" and "run flink 300" in printed, flink
    assert "identical" in printed


@pytest.mark.runners
@pytest.mark.slow
def test_every_jvm_of_the_cluster_exits_on_out_of_memory(flink_cluster):
    """An OutOfMemoryError on a gRPC thread of a TaskManager killed only that thread and the 1M job
    hung (docs/performance.md): every JVM of the cluster (JobManager, TaskManagers, job server)
    starts with ``-XX:+ExitOnOutOfMemoryError``, so the job fails instead."""
    from fair_forge_beam.testing.flink_cluster import EXIT_ON_OOM

    _require()
    cluster = flink_cluster()

    def tree(pid: int) -> list[int]:
        out = [pid]
        try:
            for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
                out += tree(int(child))
        except OSError:
            pass
        return out

    jvms = {}
    for pid in cluster.pids:
        for p in tree(pid):
            try:
                args = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"java"):
                jvms[p] = [a.decode() for a in args]
    assert len(jvms) >= cluster.task_managers + 2, jvms.keys()  # JobManager, TaskManagers, job server
    for pid, args in jvms.items():
        assert EXIT_ON_OOM in args, (pid, args[-3:])
