"""Peak memory of the launching process of the main job, against the number of interactions (not a test).

The question (issue 12, item 3): does the process that starts the audit hold more memory when
the data grow? It must not — every output is written by the pipeline, and the launcher reads
back only ``results.json`` (slices and counts) to print the summary and render the report.

Method. The in-memory FnApiRunner runs the workers and the shuffle inside the launching process,
so its memory grows with the data whatever the output stage does. The launcher is therefore
measured on a runner where it only submits: **Prism with EXTERNAL workers** — the Prism binary
runs the job (shuffle, state) in its own process, and the SDK workers are separate ``python``
processes started by Beam's worker pool (``fair_forge_beam.testing.beam_runners.WorkerPool``). The
main job runs in a child process through a small wrapper that calls ``pipelines.audit.main``
and records ``getrusage(RUSAGE_SELF).ru_maxrss``, the peak resident set of that one process (its
own pages only: not Prism's, not the workers'), twice: when the launcher starts reading
``results.json`` (the job has ended: building, submitting and waiting) and at exit (the whole
launcher). Everything the launcher does is
inside the measurement: building the graph, submitting, waiting, reading ``results.json``,
writing ``run_info.json`` and rendering ``report.html`` (which streams the session shards).

Data: sessions of 1–6 turns drawn from the shipped hh-rlhf slice (``bench_runners.write_sessions``,
deterministic). Audit: ``--metrics humanity,toxicity --group-extractor keyword --mode bayesian
--seed 7``.

    python benchmarks/bench_launcher_memory.py --n 100000 1000000
    python benchmarks/bench_launcher_memory.py --n 100000 --code-root /path/to/other/checkout   # a baseline

``--code-root`` puts another checkout first on ``PYTHONPATH`` of the launcher and the workers
(e.g. the code before outputs were written by the pipeline), to compare in the same script.
``--runner in_memory`` measures the in-memory FnApiRunner instead (workers inside the launcher).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runners import AUDIT, write_sessions  # noqa: E402

from fair_forge_beam.testing import beam_runners as rn  # noqa: E402

WRAPPER = """
import resource
import fair_forge_beam.reports.load as load
marks = {}
read_results = load.read_results
def _mark(path):  # the launcher reads results.json right after the pipeline ends
    marks.setdefault("after_pipeline_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return read_results(path)
load.read_results = _mark
import fair_forge_beam.reports.results as results
if hasattr(results, "assemble_results"):  # a baseline checkout whose launcher assembled results.json itself
    assemble = results.assemble_results
    def _mark_assemble(*a, **k):
        marks.setdefault("after_pipeline_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        return assemble(*a, **k)
    results.assemble_results = _mark_assemble
import sys
sys.path.append(BENCHMARKS)  # last: a --code-root checkout or the installed package stays first
from launcher_marks import run_audit_and_write
run_audit_and_write(marks, "FFB_RSS_OUT")
""".replace("BENCHMARKS", repr(str(Path(__file__).resolve().parent)))


def measure(data: Path, out: Path, runner: str, mc_samples: int, env: dict) -> dict:
    rss_file = out.with_suffix(".rss.json")
    cmd = [sys.executable, "-c", WRAPPER, *AUDIT, "--mc-samples", str(mc_samples), "--input", str(data),
           "--output", str(out)]
    env = {**env, "FFB_RSS_OUT": str(rss_file)}
    cwd = str(out.parent)  # ``python -c`` puts its working folder first on sys.path: never a checkout
    t0 = time.perf_counter()
    if runner == "prism_workers":
        with rn.WorkerPool() as pool:  # the pool inherits os.environ (PYTHONPATH set by main)
            # Beam's job-service timeout (300 s by default) also bounds the job's state stream: a longer
            # Prism job fails with DEADLINE_EXCEEDED unless it is raised
            proc = subprocess.run([*cmd, *rn.runner_args(runner, worker_pool=pool), "--job_server_timeout=86400"],
                                  capture_output=True, text=True, env=env, cwd=cwd)
    else:
        proc = subprocess.run([*cmd, *rn.runner_args(runner)], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"audit failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rss = json.loads(rss_file.read_text())
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    after = rss.get("after_pipeline_kb")
    return {"wall_s": wall, "maxrss_mb": rss["maxrss_kb"] / 1024, "read": doc["summary"]["interactions_read"],
            "pipeline_mb": after / 1024 if after else float("nan"),
            "results_json_kb": (out / "results.json").stat().st_size / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--runner", default="prism_workers", choices=["prism_workers", "in_memory", "multi_process"])
    ap.add_argument("--mc-samples", type=int, default=1000)
    ap.add_argument("--code-root", help="checkout put first on PYTHONPATH (launcher and workers); default: as installed")
    ap.add_argument("--tmp", help="folder for data and outputs (default: a temporary folder)")
    args = ap.parse_args(argv)
    if args.runner == "prism_workers" and rn.missing_reason("prism_workers"):
        print(f"prism missing: {rn.missing_reason('prism_workers')}")
        return 1
    env = dict(os.environ)
    if args.code_root:
        env["PYTHONPATH"] = os.pathsep.join([args.code_root] + [p for p in [env.get("PYTHONPATH")] if p])
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the worker pool's processes too
    print(f"Beam {rn.beam_version()}; cores {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}; runner "
          f"{args.runner}; code {args.code_root or 'installed / PYTHONPATH'}; mc_samples {args.mc_samples}")
    print(f"{'interactions':>12} {'sessions':>9} {'peak RSS until the job ended':>29} {'peak RSS, whole launcher':>25} "
          f"{'wall s':>8} {'results.json':>13}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ffb-bench-launcher-", dir=args.tmp) as tmp:
        for n in args.n:
            data = Path(tmp) / f"sessions-{n}.jsonl"
            n_sessions = write_sessions(data, n)
            r = measure(data, Path(tmp) / f"out-{n}", args.runner, args.mc_samples, env)
            assert r["read"] == n, r
            print(f"{n:>12,} {n_sessions:>9,} {r['pipeline_mb']:>26.1f} MB {r['maxrss_mb']:>22.1f} MB {r['wall_s']:>8.1f} "
                  f"{r['results_json_kb']:>10.1f} kB", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
