"""Humanity throughput benchmark (not a test).

Generates N synthetic interactions *inside* the pipeline (no ``beam.Create`` of the data, no
file read), runs the Humanity metric (per-interaction scores, session and slice aggregates)
and reports interactions/s for the frequentist and Bayesian modes.

    python benchmarks/bench_humanity.py --n 10000 100000
    python benchmarks/bench_humanity.py --n 100000 --modes bayesian -- --direct_num_workers=2 --direct_running_mode=multi_processing --runner=DirectRunner

Synthetic sessions have 1-6 turns (mean 2.5, like the hh-rlhf slice), 20 assistants, answers of
12-60 words drawn from a vocabulary that is ~30 % emotion-lexicon words, and a reference answer
for half of the interactions (so Spearman is computed, not short-cut).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

import apache_beam as beam

from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.metrics.humanity import Humanity
from fair_forge_beam.beam_pipeline import pipeline_options
from fair_forge_beam.statistical import BayesianMode, FrequentistMode

EMOTIONAL = (
    "happy joy love trust hope angry hate fear afraid sad cry grief surprise shock disgust awful "
    "wonderful good bad terrible pleasant friend enemy danger safe calm worry".split()
)
NEUTRAL = (
    "the a of to and in is it you that for on with as this be are at or from by your can will "
    "account order number please help thanks information details question answer system time".split()
)
TURN_WEIGHTS = [30, 25, 20, 13, 8, 4]  # P(1..6 turns): mean ≈ 2.5


def _text(rng: random.Random) -> str:
    n = rng.randint(12, 60)
    return " ".join(rng.choice(EMOTIONAL) if rng.random() < 0.3 else rng.choice(NEUTRAL) for _ in range(n))


class GenerateShard(beam.DoFn):
    """Emit about ``per_shard`` interactions for one shard, deterministically from the shard id."""

    def __init__(self, per_shard: int):
        self.per_shard = per_shard

    def setup(self):
        pool_rng = random.Random(12345)
        self.pool = [_text(pool_rng) for _ in range(4096)]  # text generation is not what we measure

    def process(self, shard: int):
        rng = random.Random(shard)
        pool = self.pool
        made = 0
        s = 0
        while made < self.per_shard:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], self.per_shard - made)
            sid, aid = f"s{shard}-{s}", f"assistant-{rng.randrange(20)}"
            for t in range(turns):
                yield Interaction(
                    element_id=make_element_id(sid, aid, t), session_id=sid, assistant_id=aid,
                    language="english", context="", turn_index=t, qa_id=f"q{t}", query="hi",
                    assistant=rng.choice(pool), ground_truth_assistant=rng.choice(pool) if rng.random() < 0.5 else None,
                    observation=None, weight=None, agentic=None, ground_truth_agentic=None, logprobs=None,
                )
            made += turns
            s += 1


def run_once(n: int, mode, beam_args, slice_bootstrap: str = "buckets") -> float:
    shards = max(1, n // 2000)
    start = time.perf_counter()
    with beam.Pipeline(options=pipeline_options(beam_args)) as p:
        inter = p | beam.Create(range(shards)) | beam.Reshuffle() | beam.ParDo(GenerateShard(n // shards))
        res = inter | Humanity(statistical_mode=mode, slice_bootstrap=slice_bootstrap)
        for name in ("interactions", "sessions", "slices"):
            res[name] | f"Count{name}" >> beam.combiners.Count.Globally()
    return time.perf_counter() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--modes", nargs="+", default=["frequentist", "bayesian"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--slice-bootstrap", default="buckets", choices=["buckets", "gamma"])
    args, beam_args = ap.parse_known_args(argv)
    rows = []
    for n in args.n:
        times = {}
        for m in args.modes:
            mode = FrequentistMode() if m == "frequentist" else BayesianMode(rng_seed=42)
            best = min(run_once(n, mode, beam_args, args.slice_bootstrap) for _ in range(args.repeat))
            times[m] = best
            rows.append({"n": n, "mode": m, "slice_bootstrap": args.slice_bootstrap, "seconds": round(best, 2), "interactions_per_s": round(n / best)})
            print(json.dumps(rows[-1]), flush=True)
        if "frequentist" in times and "bayesian" in times:
            print(json.dumps({"n": n, "bayesian_over_frequentist": round(times["bayesian"] / times["frequentist"], 3)}), flush=True)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
