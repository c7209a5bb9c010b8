"""Throughput of the same audit on each runner (not a test).

Writes N interactions to a temporary JSONL file of sessions (1–6 turns, mean ≈ 2.5, answers and
questions drawn from the hh-rlhf slice shipped in the package, 20 assistants; deterministic),
then runs the main job on it — ``--metrics humanity,toxicity --group-extractor keyword --mode
bayesian --seed 7`` — once per runner, each in its own process, and reports wall time,
interactions/s, CPU seconds of the process tree and whether ``results.json`` is byte-identical
to the first runner's.

    python benchmarks/bench_runners.py --n 100000
    python benchmarks/bench_runners.py --n 20000 --runners in_memory prism --repeat 2

Runners (``--runners``; default the four of the identity suite, ``prism_workers`` on request):
see ``fair_forge_beam/testing/beam_runners.py`` (Flink and Prism need
``.ci/get_runners.sh`` first; a runner whose artifact is missing is reported and skipped).
``flink`` is a real local cluster — JobManager, 2 TaskManagers (parallelism 2), Beam's job
server, PROCESS workers — started once before its first run; its start-up is reported apart and
not timed, and the CPU of its JVMs and workers is not counted (only the submitting process's).
The last column gives each runner's wall time over the first runner's (the in-memory reference
by default), measured in the same run of this script.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fair_forge_beam.testing import beam_runners as rn

TURN_WEIGHTS = [30, 25, 20, 13, 8, 4]  # P(1..6 turns), as the hh-rlhf slice
AUDIT = ["--quiet", "--mode", "bayesian", "--seed", "7", "--metrics", "humanity,toxicity",
         "--group-extractor", "keyword"]


def turn_pool() -> list[tuple[str, str]]:
    path = importlib.resources.files("fair_forge_beam").joinpath("data/examples/hh_rlhf_harmless_test_slice.jsonl")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.extend((t["query"], t["assistant"]) for t in json.loads(line)["conversation"] if t.get("assistant"))
    return out


def write_sessions(path: Path, n: int, seed: int = 0) -> int:
    """Write sessions holding exactly ``n`` interactions to ``path`` (JSONL); returns the session count."""
    pool, rng = turn_pool(), random.Random(seed)
    made = s = 0
    with open(path, "w", encoding="utf-8") as f:
        while made < n:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], n - made)
            conv = []
            for t in range(turns):
                q, a = rng.choice(pool)
                conv.append({"qa_id": f"q{t}", "query": q, "assistant": a, "ground_truth_assistant": None})
            f.write(json.dumps({"session_id": f"bench-{s}", "assistant_id": f"assistant-{rng.randrange(20)}",
                                "language": "english", "context": "", "conversation": conv}) + "\n")
            made += turns
            s += 1
    return s


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(runner: str, data: Path, out: Path, mc_samples: int, flink=None) -> tuple[float, float, float, bytes]:
    cmd = [sys.executable, "-m", "pipelines.audit", *AUDIT, "--mc-samples", str(mc_samples),
           "--input", str(data), "--output", str(out)]
    if runner == "prism_workers":
        with rn.WorkerPool() as pool:  # its start-up is not timed; its workers' CPU is not counted
            cpu0, t0 = cpu_children(), time.perf_counter()
            proc = subprocess.run([*cmd, *rn.runner_args(runner, worker_pool=pool)], capture_output=True, text=True)
            wall, cpu = time.perf_counter() - t0, cpu_children() - cpu0
    else:
        cpu0, t0 = cpu_children(), time.perf_counter()
        proc = subprocess.run([*cmd, *rn.runner_args(runner, flink_cluster=flink)], capture_output=True, text=True)
        wall, cpu = time.perf_counter() - t0, cpu_children() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{runner} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    pipeline_s = json.loads((out / "run_info.json").read_text(encoding="utf-8"))["seconds"]
    return wall, pipeline_s, cpu, (out / "results.json").read_bytes()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--runners", nargs="+", default=list(rn.RUNNERS), choices=rn.RUNNERS + rn.EXTRA_RUNNERS)
    ap.add_argument("--mc-samples", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"Beam {rn.beam_version()}; cores {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; "
          f"mc_samples {args.mc_samples}")
    print(f"{'n':>8} {'runner':<14} {'wall s':>8} {'pipeline s':>10} {'interactions/s':>14} {'CPU s':>7}  identical  wall/ref")
    with tempfile.TemporaryDirectory(prefix="ffb-bench-runners-") as tmp, contextlib.ExitStack() as stack:
        flink = None
        for n in args.n:
            data = Path(tmp) / f"sessions-{n}.jsonl"
            write_sessions(data, n)
            ref = ref_wall = None
            for runner in args.runners:
                missing = rn.missing_reason(runner)
                if missing:
                    print(f"{n:>8} {runner:<14} skipped: {rn.unavailable_reason(runner) or missing}", flush=True)
                    continue
                if runner == "flink" and flink is None:
                    from fair_forge_beam.testing.flink_cluster import FlinkCluster

                    t0 = time.perf_counter()
                    flink = stack.enter_context(FlinkCluster(task_managers=2, workdir=Path(tmp) / "flink", ends_with_owner=True))
                    print(f"{'':>8} (Flink cluster: JobManager + 2 TaskManagers + job server up in "
                          f"{time.perf_counter() - t0:.1f} s, not timed)", flush=True)
                runs = [run_once(runner, data, Path(tmp) / f"out-{n}-{runner}-{i}", args.mc_samples, flink)
                        for i in range(args.repeat)]
                wall, pipe, cpu, res = min(runs, key=lambda r: r[0])
                ref = res if ref is None else ref
                ref_wall = wall if ref_wall is None else ref_wall
                same = all(r[3] == ref for r in runs)
                print(f"{n:>8} {runner:<14} {wall:>8.1f} {pipe:>10.1f} {n / wall:>14,.0f} {cpu:>7.1f}  "
                      f"{'yes' if same else 'NO':<9}  {wall / ref_wall:.2f}"
                      + (f"   (all wall: {', '.join(f'{r[0]:.1f}' for r in runs)})" if len(runs) > 1 else ""),
                      flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
