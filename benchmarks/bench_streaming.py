"""Windowed-audit throughput with 1-minute windows (Humanity + Toxicity with keyword groups).

    PYTHONPATH=. python benchmarks/bench_streaming.py --n 100000 --mode bounded
    PYTHONPATH=. python benchmarks/bench_streaming.py --n 10000 --mode teststream

* ``bounded``: FnApiRunner, interactions generated inside the pipeline (one timestamp per
  interaction, spread over ``n / rate`` minutes), ``WindowInto(FixedWindows(60))``;
* ``teststream``: the same elements pushed through ``TestStream`` in 1-minute event-time steps
  (watermark advanced after each minute) on the streaming BundleBasedDirectRunner, with 30 s
  early firings and 10 minutes of allowed lateness.

Prints interactions/s (wall time of the whole run, pipeline start included) and the number of
slice records written.
"""
from __future__ import annotations

import argparse
import time

from fair_forge_beam._beam import beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.transforms import window

from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.streaming.windows import WindowSpec

WORDS = ["happy", "sad", "idiot", "women", "men", "trust", "fear", "joy", "answer", "the", "calm", "angry", "muslim"]


def interaction(i: int, per_minute: int) -> Interaction:
    sid = f"s{i // 4}"
    text = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9))
    return Interaction(make_element_id(sid, "a", i % 4), sid, f"a{i % 3}", "english", "", i % 4, f"q{i}", "q", text,
                       None, None, None, None, None, None, 60.0 * (i // per_minute) + (i % per_minute) * 60.0 / per_minute)


def metrics():
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from fair_forge_beam.metrics.humanity import Humanity
    from fair_forge_beam.metrics.toxicity import Toxicity
    from fair_forge_beam.statistical import BayesianMode

    mode = BayesianMode(mc_samples=1000, rng_seed=42)
    return {"humanity": Humanity(statistical_mode=mode),
            "toxicity": Toxicity(statistical_mode=mode, clustering=False,
                                 group_extractor=KeywordGroupExtractor(default_group_keywords()))}


def run(n: int, per_minute: int, mode: str) -> None:
    from apache_beam.testing.test_stream import TestStream

    counts = {}
    if mode == "bounded":
        opts = PipelineOptions(["--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner"])
        spec = WindowSpec.parse("fixed:1m")
    else:
        opts = PipelineOptions(["--streaming"])
        opts.view_as(StandardOptions).runner = "BundleBasedDirectRunner"
        spec = WindowSpec.parse("fixed:1m", "30s", "10m")
    t0 = time.time()
    with beam.Pipeline(options=opts) as p:
        if mode == "bounded":
            chunks = list(range(0, n, 1000))
            src = (p | beam.Create(chunks) | beam.Reshuffle()
                   | beam.FlatMap(lambda s: [interaction(i, per_minute) for i in range(s, min(s + 1000, n))])
                   | beam.Map(lambda x: window.TimestampedValue(x, x.event_time)))
        else:
            ts = TestStream().advance_watermark_to(0)
            for m0 in range(0, n, per_minute):
                ts = ts.add_elements([window.TimestampedValue(x, x.event_time)
                                      for x in (interaction(i, per_minute) for i in range(m0, min(m0 + per_minute, n)))])
                ts = ts.advance_watermark_to(60.0 * (m0 // per_minute + 1)).advance_processing_time(30)
            src = p | ts.advance_watermark_to_infinity()
        windowed = src | spec.window_into()
        for name, m in metrics().items():
            (windowed | f"M_{name}" >> m)["slices"] | f"C_{name}" >> beam.combiners.Count.Globally().without_defaults() \
                | f"P_{name}" >> beam.Map(lambda c, name=name: print(f"{name}: {c} slice records", flush=True))
    dt = time.time() - t0
    print(f"{mode}: {n} interactions, {per_minute}/minute ({-(-n // per_minute)} windows): {dt:.1f} s, {n / dt:,.0f} interactions/s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--per-minute", type=int, default=2000)
    ap.add_argument("--mode", choices=["bounded", "teststream"], default="bounded")
    a = ap.parse_args()
    run(a.n, a.per_minute, a.mode)
