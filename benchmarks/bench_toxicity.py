"""Toxicity throughput and memory benchmark (not a test).

Generates N interactions *inside* the pipeline from a pool of real assistant answers (the
hh-rlhf slice shipped in the package: 1,982 answers, some naming demographic groups), runs the
Toxicity metric (HurtLex, group detection, VADER sentiment, per-slice DR/DTO/ASB/DIDT) and
reports interactions/s and the peak RSS of the process tree.

    python benchmarks/bench_toxicity.py --n 10000 100000 --extractor keyword
    python benchmarks/bench_toxicity.py --n 5000 --extractor embedding      # + pure-encode baseline
    python benchmarks/bench_toxicity.py --n 1000000 --extractor keyword --modes frequentist

With ``--extractor embedding`` it also times the embedder alone on the same texts (same batch
size, outside Beam): the "pure embedding time" the metric is compared with. Clustering is off
unless ``--clustering``. Extra arguments after ``--`` go to Beam.
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import random
import resource
import sys
import time

import apache_beam as beam

from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.metrics.toxicity import Toxicity
from fair_forge_beam.beam_pipeline import pipeline_options
from fair_forge_beam.statistical import BayesianMode, FrequentistMode

TURN_WEIGHTS = [30, 25, 20, 13, 8, 4]  # P(1..6 turns): mean ≈ 2.5, as the hh-rlhf slice


def answer_pool() -> list[str]:
    path = importlib.resources.files("fair_forge_beam").joinpath("data/examples/hh_rlhf_harmless_test_slice.jsonl")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.extend(t["assistant"] for t in json.loads(line)["conversation"] if t.get("assistant"))
    return out


class GenerateShard(beam.DoFn):
    """About ``per_shard`` interactions for one shard, deterministically from the shard id."""

    def __init__(self, per_shard: int):
        self.per_shard = per_shard

    def setup(self):
        self.pool = answer_pool()

    def process(self, shard: int):
        rng = random.Random(shard)
        made = s = 0
        while made < self.per_shard:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], self.per_shard - made)
            sid, aid = f"s{shard}-{s}", f"assistant-{rng.randrange(20)}"
            for t in range(turns):
                yield Interaction(
                    element_id=make_element_id(sid, aid, t), session_id=sid, assistant_id=aid,
                    language="english", context="", turn_index=t, qa_id=f"q{t}", query="hi",
                    assistant=rng.choice(self.pool), ground_truth_assistant=None,
                    observation=None, weight=None, agentic=None, ground_truth_agentic=None, logprobs=None,
                )
            made += turns
            s += 1


def _metric(mode, extractor: str, clustering: bool) -> Toxicity:
    if extractor == "keyword":
        from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords

        return Toxicity(statistical_mode=mode, group_extractor=KeywordGroupExtractor(default_group_keywords()), clustering=False)
    return Toxicity(statistical_mode=mode, clustering=clustering)


def run_once(n: int, mode, extractor: str, clustering: bool, beam_args) -> float:
    shards = max(1, n // 2000)
    start = time.perf_counter()
    with beam.Pipeline(options=pipeline_options(beam_args)) as p:
        inter = p | beam.Create(range(shards)) | beam.Reshuffle() | beam.ParDo(GenerateShard(n // shards))
        res = inter | _metric(mode, extractor, clustering)
        for name in ("interactions", "sessions", "slices"):
            _ = res[name] | f"Count{name}" >> beam.combiners.Count.Globally()
    return time.perf_counter() - start


def pure_encode_seconds(n: int, batch_size: int = 256) -> float:
    """The embedder alone on the same n texts (same generator, same batch size), model loaded first."""
    from fair_forge_beam.components.embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    emb.load()
    pool = answer_pool()
    texts = []
    shards = max(1, n // 2000)
    for shard in range(shards):
        rng = random.Random(shard)
        made = 0
        while made < n // shards:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], n // shards - made)
            rng.randrange(20)
            texts.extend(rng.choice(pool) for _ in range(turns))
            made += turns
    start = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        emb.encode(texts[i:i + batch_size])
    return time.perf_counter() - start


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[10_000])
    ap.add_argument("--modes", nargs="+", default=["frequentist", "bayesian"], choices=["frequentist", "bayesian"])
    ap.add_argument("--extractor", default="keyword", choices=["keyword", "embedding"])
    ap.add_argument("--clustering", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--mc-samples", type=int, default=5000)
    args, beam_args = ap.parse_known_args(argv)
    beam_args = [a for a in beam_args if a != "--"]
    print(f"extractor={args.extractor} clustering={args.clustering} beam_args={beam_args}")
    print(f"{'n':>9} {'mode':<12} {'seconds':>9} {'interactions/s':>15} {'peak RSS MB':>12}")
    for n in args.n:
        for m in args.modes:
            mode = BayesianMode(mc_samples=args.mc_samples) if m == "bayesian" else FrequentistMode()
            times = [run_once(n, mode, args.extractor, args.clustering, beam_args) for _ in range(args.repeat)]
            best = min(times)
            print(f"{n:>9} {m:<12} {best:>9.2f} {n / best:>15,.0f} {peak_rss_mb():>12.0f}"
                  + (f"   (all: {', '.join(f'{t:.2f}' for t in times)})" if len(times) > 1 else ""), flush=True)
        if args.extractor == "embedding":
            enc = pure_encode_seconds(n)
            print(f"{n:>9} {'encode only':<12} {enc:>9.2f} {n / enc:>15,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
