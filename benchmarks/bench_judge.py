"""LLM-judge throughput benchmark (not a test).

Starts the scripted OpenAI-compatible server on 127.0.0.1 with a fixed latency per call (default
20 ms), runs ``RunJudge`` over N requests on FnApiRunner and reports interactions/s for each
request concurrency (calls in flight per worker), plus a re-run served from the SQLite cache.
Wall time includes pipeline construction and start-up (about 1 s on FnApiRunner); a small warm-up
run first keeps one-off imports out of the figures.

    python benchmarks/bench_judge.py                       # N=500, latency 20 ms, concurrency 16 and 1
    python benchmarks/bench_judge.py --n 2000 --concurrency 32 16 4 1 --repeats 3

Every answer is validated against a two-field pydantic schema, so the figures include
structured-output parsing; the server also does real HTTP (keep-alive) and JSON work.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge import OpenAIJudgeHandler, RunJudge, judge_counters, judge_request
from fair_forge_beam.beam_pipeline import pipeline_options
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer


class BenchVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float = Field(ge=0, le=1)
    insight: str


def answer(req):
    return {"score": (req.number % 11) / 10, "insight": "consistent with the context"}


def make_request(i: int):
    return judge_request(
        f"bench/{i}",
        [("system", "You grade an assistant answer against its context."), ("user", f"Context: item {i}. Answer: reply {i}.")],
        element_id=f"bench/a/{i}",
    )


FIXED_ANSWER = {"score": 0.5, "insight": "consistent with the context"}


@contextlib.contextmanager
def server_in_subprocess(latency_s: float):
    """The scripted server in its own process (``python -m …openai_server``), as a remote
    endpoint would be: its CPU work does not compete with the client for the GIL."""
    cmd = [sys.executable, "-m", "fair_forge_beam.testing.openai_server", "--port", "0",
           "--latency", str(latency_s), "--answer", json.dumps(FIXED_ANSWER)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = proc.stdout.readline()
        if not line.startswith("serving "):
            raise RuntimeError(f"server did not start: {line!r}")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def server_in_process(latency_s: float):
    with ScriptedOpenAIServer(answer, latency=latency_s) as srv:
        yield srv.base_url


def run_once(base_url: str, n: int, concurrency: int, cache_path) -> tuple[float, dict]:
    handler = OpenAIJudgeHandler(
        "bench-model", base_url, output_schema=BenchVerdict, cache_path=cache_path, max_concurrency=concurrency,
        api_key_env="FAIR_FORGE_BENCH_KEY",
    )
    t0 = time.perf_counter()
    p = beam.Pipeline(options=pipeline_options())
    out = p | beam.Create(list(range(n))) | beam.Map(make_request) | RunJudge(handler)
    _ = out.results | "CountResults" >> beam.combiners.Count.Globally()
    result = p.run()
    result.wait_until_finish()
    elapsed = time.perf_counter() - t0
    return elapsed, judge_counters(result)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500, help="judge requests per run")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="server latency per call")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 1], help="max_concurrency values to compare")
    ap.add_argument("--repeats", type=int, default=1, help="runs per setting (best and spread reported)")
    ap.add_argument("--server", choices=["subprocess", "in-process"], default="subprocess",
                    help="where the scripted server runs (in-process shares the GIL with the client)")
    args = ap.parse_args(argv)

    # Beam's adaptive BatchElements warns on near-constant timings (numpy polyfit); harmless here
    warnings.filterwarnings("ignore", module=r"apache_beam\.transforms\.util")
    latency_s = args.latency_ms / 1000.0
    if args.server == "subprocess":
        server = server_in_subprocess(latency_s)
    else:
        server = server_in_process(latency_s)
    rows = []
    with server as base_url:
        run_once(base_url, 16, 16, None)  # warm-up: imports (openai), first pipeline
        for conc in args.concurrency:
            times = []
            for _ in range(args.repeats):
                elapsed, counters = run_once(base_url, args.n, conc, None)
                assert counters["results"] == args.n == counters["requests"], counters
                times.append(elapsed)
            rows.append((f"concurrency {conc}", times, counters["requests"]))
        with tempfile.TemporaryDirectory() as tmp:
            cache = str(Path(tmp) / "bench-cache.sqlite3")
            run_once(base_url, args.n, max(args.concurrency), cache)  # fill the cache
            times = []
            for _ in range(args.repeats):
                elapsed, counters = run_once(base_url, args.n, max(args.concurrency), cache)
                assert counters["cache_hits"] == args.n and counters["requests"] == 0, counters
                times.append(elapsed)
            rows.append(("cached re-run", times, 0))

    print(f"LLM judge via RunInference, FnApiRunner, n={args.n}, server latency {args.latency_ms:g} ms/call ({args.server} server)")
    print(f"{'setting':<18} {'best s':>8} {'interactions/s':>15} {'spread s':>9} {'HTTP calls':>11}")
    base = None
    for name, times, sent in rows:
        best = min(times)
        spread = (max(times) - min(times)) if len(times) > 1 else 0.0
        rate = args.n / best
        print(f"{name:<18} {best:8.2f} {rate:15.1f} {spread:9.2f} {sent:11d}")
        if name == f"concurrency {args.concurrency[-1]}":
            base = rate
    if base:
        first = args.n / min(rows[0][1])
        print(f"speed-up {rows[0][0]} vs {rows[len(args.concurrency) - 1][0]}: {first / base:.1f}x "
              f"(ideal for latency-bound calls: {args.concurrency[0] / args.concurrency[-1]:g}x minus start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
