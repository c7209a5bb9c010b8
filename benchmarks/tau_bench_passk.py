"""pass^k and pass@k, k = 1..4, on the τ-bench airline trajectories (gpt-4o, 50 tasks × 4 trials),
with τ-bench's reward as the correctness label (no judge).

    PYTHONPATH=. python benchmarks/tau_bench_passk.py [--data ../shared/data/tau_bench/gpt-4o-airline.json.gz]

Runs the Agentic PTransform twice on FnApiRunner (frequentist: unbiased per-task estimators,
Yao et al. 2024; Bayesian: the same task average's posterior, a Bayesian bootstrap over the
tasks with weights seeded by key: its mean is the unbiased value, its 95 % interval resamples tasks) and prints one table. Data: τ-bench
(sierra-research/tau-bench, MIT), historical_trajectories/gpt-4o-airline.json.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"


def overall(mode, data: str) -> tuple[dict, float]:
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.agentic_sources import TauBenchRetriever
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.metrics.agentic import Agentic
    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(options=pipeline_options([f"--runner={FNAPI}"])) as p:
            read = p | ReadInteractions(retriever=TauBenchRetriever, retriever_kwargs={"path": data})
            res = read["interactions"] | Agentic(k=4, correctness_source="label", statistical_mode=mode, slices=("overall",))
            write_jsonl(res["slices"], f"{tmp}/slices", "W")
        (rec,) = read_jsonl_shards(f"{tmp}/slices")
    return rec, time.perf_counter() - t0


def main(argv=None) -> int:
    from fair_forge_beam.statistical import BayesianMode, FrequentistMode

    default = Path(os.environ.get("FAIR_FORGE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(default / "data" / "tau_bench" / "gpt-4o-airline.json.gz"))
    ap.add_argument("--mc-samples", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    freq, t_f = overall(FrequentistMode(), args.data)
    bayes, t_b = overall(BayesianMode(mc_samples=args.mc_samples, rng_seed=args.seed), args.data)
    print(f"τ-bench airline, gpt-4o: {freq['n_tasks']} tasks, {freq['n_sessions']} trajectories, "
          f"{freq['n_fully_correct']} with reward 1 (label = reward)")
    print(f"{'k':>2}  {'pass^k unbiased':>15}  {'pass^k Bayesian [95% CI]':>32}  {'pass@k unbiased':>15}  {'pass@k Bayesian [95% CI]':>32}")
    for f, b in zip(freq["curve"], bayes["curve"]):
        def ci(e):
            return f"{e['mean']:.4f} [{e['ci_low']:.4f}, {e['ci_high']:.4f}]"

        print(f"{f['k']:>2}  {f['pass_pow_k']['mean']:>15.4f}  {ci(b['pass_pow_k']):>32}  "
              f"{f['pass_at_k']['mean']:>15.4f}  {ci(b['pass_at_k']):>32}")
    print(f"wall time: frequentist {t_f:.1f} s, Bayesian {t_b:.1f} s (mc_samples {args.mc_samples}, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
