"""HTML report benchmark (not a test): size and time of report.html for a large run.

Writes N synthetic interactions (sessions of 1–6 turns drawn from the shipped hh-rlhf answers,
20 assistants, seeded) to a JSONL file, runs the main job on it (Humanity + Toxicity with keyword
groups, no clustering, ``--no-report``), then times ``write_report`` on the run folder (Beam and
the report libraries already imported, as in the main job), reports the file size and, when
Debian's chromium and playwright are installed, the time Chromium takes to load and lay out the
page.

    python benchmarks/bench_report.py --n 100000 --mode bayesian
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

TURN_WEIGHTS = [30, 25, 20, 13, 8, 4]  # P(1..6 turns): mean ≈ 2.5


def write_input(path: Path, n: int, seed: int = 0) -> int:
    """N interactions as sessions (one JSON object per line); returns the number of sessions."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_toxicity import answer_pool

    pool = answer_pool()
    rng = random.Random(seed)
    made = s = 0
    with path.open("w", encoding="utf-8") as f:
        while made < n:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], n - made)
            conv = [{"qa_id": f"q{t}", "query": "question", "assistant": rng.choice(pool),
                     "ground_truth_assistant": rng.choice(pool) if rng.random() < 0.5 else None} for t in range(turns)]
            f.write(json.dumps({"session_id": f"s{s}", "assistant_id": f"assistant-{rng.randrange(20)}",
                                "language": "english", "conversation": conv}) + "\n")
            made += turns
            s += 1
    return s


def chromium_load_seconds(path: str) -> float | None:
    if not os.path.exists("/usr/bin/chromium"):
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium", headless=True,
                                                    args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = ctx.new_page()
        t0 = time.perf_counter()
        page.goto(Path(path).resolve().as_uri(), wait_until="load")
        page.evaluate("document.body.getBoundingClientRect().height")  # force layout
        seconds = time.perf_counter() - t0
        ctx.close()
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--mode", default="bayesian", choices=["bayesian", "frequentist"])
    p.add_argument("--workdir", help="keep the input and run here (default: a temporary folder)")
    p.add_argument("--repeat", type=int, default=3, help="report renders to time (best is reported)")
    p.add_argument("--run-dir", help="render an existing run folder instead of generating and running one")
    args = p.parse_args(argv)

    from pipelines import audit

    with tempfile.TemporaryDirectory() as tmp:
        if args.run_dir:
            out = Path(args.run_dir)
        else:
            work = Path(args.workdir or tmp)
            work.mkdir(parents=True, exist_ok=True)
            data, out = work / f"bench_{args.n}.jsonl", work / f"run_{args.n}_{args.mode}"
            t0 = time.perf_counter()
            sessions = write_input(data, args.n)
            print(f"input: {args.n} interactions in {sessions} sessions ({time.perf_counter() - t0:.1f} s)")
            t0 = time.perf_counter()
            audit.run(["--quiet", "--no-report", "--input", str(data), "--metrics", "humanity,toxicity",
                       "--group-extractor", "keyword", "--mode", args.mode, "--output", str(out)])
            print(f"main job without report: {time.perf_counter() - t0:.1f} s")
        print(f"results.json {os.path.getsize(out / 'results.json') / 1e6:.1f} MB")
        from fair_forge_beam.reports.html import write_report
        from fair_forge_beam.reports.load import read_results

        t0, c0 = time.perf_counter(), time.process_time()
        doc = read_results(str(out))
        print(f"read results.json: {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU")
        for label, kw in (("from the folder (reads results.json)", {}), ("from the loaded results (as the main job)", {"doc": doc})):
            walls, cpus = [], []
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                path = write_report(str(out), **kw)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            print(f"render {label}: best {min(walls):.2f} s wall / {min(cpus):.2f} s CPU "
                  f"(all wall: {', '.join(f'{t:.2f}' for t in walls)})")
        print(f"report.html: {os.path.getsize(path) / 1e6:.3f} MB")
        load = chromium_load_seconds(path)
        if load is not None:
            print(f"chromium load + layout: {load:.2f} s")
        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
