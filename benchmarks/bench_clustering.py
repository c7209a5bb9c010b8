"""Benchmark of the cluster profiling stage (fair_forge_beam.components.cluster_profile.ClusterProfile).

For each n, one fresh Python process runs a FnApiRunner (in-memory) pipeline that generates n
synthetic 384-d embeddings *inside* the pipeline (20 Gaussian blobs on the unit sphere, seeded per
chunk), runs ``ClusterProfile`` with its defaults (cap = 50,000, so n = 200,000 takes the sample +
assignment path) and records:

* wall time of the whole pipeline, and a baseline pipeline that only generates and counts the
  same points (the difference is the stage's own cost);
* the stage's Beam metrics: ``fit_ms`` (UMAP + HDBSCAN on the sample, one worker),
  ``assign_batch_ms`` (sum over the canonical assignment batches: UMAP transform + kNN vote);
* CPU seconds of the process (user + system; less sensitive than wall time to other jobs on a
  shared machine) and the 1-minute load average at the end;
* peak RSS of the process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), which includes the
  in-memory runner's buffered PCollections.

Usage: ``python benchmarks/bench_clustering.py [--sizes 10000 50000 200000] [--json out.json]``.
Figures measured on the development machine (2 cores) are in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
DIM = 384
CHUNK = 5_000
N_BLOBS = 20


def _chunk(i: int, n: int):
    """Points ``i*CHUNK .. min(n, (i+1)*CHUNK)-1``: unit vectors around one of N_BLOBS centres."""
    import numpy as np

    from fair_forge_beam.components.clustering import ClusterInput

    centres = np.random.default_rng(12345).normal(size=(N_BLOBS, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng([2024, i])
    lo, hi = i * CHUNK, min(n, (i + 1) * CHUNK)
    m = hi - lo
    which = rng.integers(0, N_BLOBS, m)
    x = centres[which] + rng.normal(scale=0.6 / np.sqrt(DIM), size=(m, DIM))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    total = rng.integers(5, 60, m)
    toxic = rng.binomial(total, (which % 5) / 20.0)
    for j in range(m):
        yield ClusterInput(f"s{(lo + j) // 7}/{(lo + j) % 7}", x[j], int(toxic[j]), int(total[j]))


def run_one(n: int, baseline: bool) -> dict:
    from fair_forge_beam._beam import beam
    from fair_forge_beam.components.cluster_profile import ClusterProfile

    t0 = time.perf_counter()
    c0 = time.process_time()
    p = beam.Pipeline(runner=FNAPI)
    pts = p | "Chunks" >> beam.Create(list(range((n + CHUNK - 1) // CHUNK))) | "Generate" >> beam.FlatMap(_chunk, n)
    if baseline:
        pts | beam.combiners.Count.Globally()
    else:
        out = pts | ClusterProfile()
        out["profile"] | beam.Map(lambda r: print("PROFILE " + json.dumps({k: r[k] for k in ("status", "n_points", "n_fitted", "n_assigned", "n_clusters")}), flush=True))
    result = p.run()
    result.wait_until_finish()
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    rec = {
        "n": n,
        "baseline": baseline,
        "seconds": round(secs, 1),
        "cpu_seconds": round(cpu, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }
    if not baseline:
        from apache_beam.metrics.metric import MetricsFilter

        for d in result.metrics().query(MetricsFilter().with_namespace("cluster_profile"))["distributions"]:
            rec[d.key.metric.name + "_sum"] = d.committed.sum
            rec[d.key.metric.name + "_count"] = d.committed.count
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print("RESULT " + json.dumps(run_one(args.one, args.baseline)), flush=True)
        return 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    rows = []
    for n in args.sizes:
        for baseline in (True, False):
            cmd = [sys.executable, __file__, "--one", str(n)] + (["--baseline"] if baseline else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("RESULT ", "PROFILE "))]
            if proc.returncode != 0 or not any(ln.startswith("RESULT ") for ln in lines):
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            rec = json.loads(next(ln for ln in lines if ln.startswith("RESULT "))[7:])
            prof = [json.loads(ln[8:]) for ln in lines if ln.startswith("PROFILE ")]
            if prof:
                rec["profile"] = prof[0]
            rows.append(rec)
            print(json.dumps(rec), file=sys.stderr, flush=True)
    print(f"{'n':>8} {'stage s':>8} {'total s':>8} {'CPU s':>7} {'fit s':>7} {'assign s':>8} {'batches':>7} {'peak RSS MB':>11} {'base RSS MB':>11} {'load':>5}  profile")
    by = {(r["n"], r["baseline"]): r for r in rows}
    for n in args.sizes:
        b, r = by[(n, True)], by[(n, False)]
        prof = r.get("profile", {})
        print(
            f"{n:>8} {r['seconds'] - b['seconds']:>8.1f} {r['seconds']:>8.1f} {r['cpu_seconds']:>7.1f} "
            f"{r.get('fit_ms_sum', 0) / 1000:>7.1f} {r.get('assign_batch_ms_sum', 0) / 1000:>8.1f} {r.get('assign_batch_ms_count', 0):>7} "
            f"{r['peak_rss_mb']:>11.0f} {b['peak_rss_mb']:>11.0f} {r['load_avg_1m']:>5.1f}  "
            f"{prof.get('status')} fitted={prof.get('n_fitted')} assigned={prof.get('n_assigned')} clusters={prof.get('n_clusters')}"
        )
    print("stage s = total minus a baseline pipeline that only generates and counts the points; "
          "fit/assign s = the stage's Beam timing metrics (wall time inside the DoFns)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
