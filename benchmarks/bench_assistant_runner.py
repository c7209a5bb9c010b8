"""Assistant-runner throughput benchmark (not a test).

Starts the scripted OpenAI-compatible server on 127.0.0.1 as the assistant under test with a
fixed latency per answer (default 200 ms), writes a dataset of S sessions of T turns, and runs
``pipelines.run_assistant`` (FnApiRunner in-memory) at each concurrency (sessions in flight per
worker), then once more at the highest concurrency with the SQLite cache filled by the run before
(a cached re-run). Wall time is the whole job (pipeline construction, start-up, reading, writing);
a warm-up run first keeps one-off imports out of the figures. Ratios are to concurrency 1 in the
same run.

    python benchmarks/bench_assistant_runner.py                          # S=64, T=2, 200 ms, 1 16 64
    python benchmarks/bench_assistant_runner.py --sessions 128 --turns 3 --concurrency 64 16 1

A session's turns go out one after another (each turn carries the history), so the bound at
concurrency c is about ceil(S / c) · T · latency.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer


def write_dataset(path: Path, sessions: int, turns: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for s in range(sessions):
            conv = [{"qa_id": f"q{t}", "query": f"session {s} question {t}?", "assistant": ""} for t in range(turns)]
            f.write(json.dumps({"session_id": f"s{s:04d}", "assistant_id": "bench", "context": "", "conversation": conv}) + "\n")


def run_once(data: Path, out: Path, url: str, concurrency: int, cache: Path | None) -> tuple[float, dict]:
    from pipelines import run_assistant

    argv = ["--input", str(data), "--assistant-url", url, "--assistant-model", "bench", "--assistant-concurrency", str(concurrency),
            "--output", str(out)]
    if cache is not None:
        argv += ["--assistant-cache", str(cache)]
    t0 = time.perf_counter()
    doc = run_assistant.run(argv)
    return time.perf_counter() - t0, doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    args = ap.parse_args(argv)
    n_turns = args.sessions * args.turns
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_runner_") as tmp, ScriptedOpenAIServer("fine, thanks", latency=args.latency) as srv:
        tmp = Path(tmp)
        data = tmp / "set.jsonl"
        write_dataset(data, args.sessions, args.turns)
        warm = tmp / "warm.jsonl"
        write_dataset(warm, 2, 1)
        run_once(warm, tmp / "warm_out", srv.base_url, 2, None)
        cache = tmp / "cache.sqlite3"
        top = max(args.concurrency)
        for c in args.concurrency:
            srv.reset_counts()
            secs, doc = run_once(data, tmp / f"out_{c}", srv.base_url, c, cache if c == top else None)
            bound = math.ceil(args.sessions / c) * args.turns * args.latency
            rows.append({"run": f"concurrency {c}", "seconds": round(secs, 2), "turns_per_s": round(n_turns / secs, 1),
                         "requests": srv.count(), "successes": doc["successes"], "latency_bound_s": round(bound, 2)})
        srv.reset_counts()
        secs, doc = run_once(data, tmp / "out_cached", srv.base_url, top, cache)
        rows.append({"run": f"cached re-run (concurrency {top})", "seconds": round(secs, 2), "turns_per_s": round(n_turns / secs, 1),
                     "requests": srv.count(), "successes": doc["successes"], "latency_bound_s": 0.0})
    base = rows[0]["seconds"]
    print(f"# {args.sessions} sessions x {args.turns} turns = {n_turns} turns, assistant latency {args.latency * 1000:.0f} ms, "
          f"FnApiRunner in-memory, {os.cpu_count()} CPUs")
    print("| run | wall s | turns/s | speed-up vs concurrency 1 | HTTP requests | answered | latency bound s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['run']} | {r['seconds']} | {r['turns_per_s']} | {base / r['seconds']:.1f}x | {r['requests']} | "
              f"{r['successes']} | {r['latency_bound_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
