"""Many-assistants benchmark (issue 28 item 3; not a test): do the outputs scale with assistants?

Builds a seeded JSONL file of ``--assistants`` assistants (default 10,000) with ``--sessions``
sessions each (default 2; sessions of 1-6 turns drawn as in :mod:`bench_engine`, whose sentence
generator it uses), then runs the main job on it as a subprocess under ``/usr/bin/time -v``
(Humanity + Toxicity, keyword groups, Bayesian, report on) and prints the four figures of the
issue's target:

* ``results.json`` size (target: under 25 MB),
* peak RSS of the whole run (``Maximum resident set size`` of ``/usr/bin/time -v``; under 1.5 GB),
* ``report.html`` size (under 3 MB),
* console lines printed by the job on stdout (under 100).

``--tree`` runs the job from other checkouts too (e.g. ``--tree /work/main``), one after the other
in the same invocation on the same file, so a before/after comparison is one run of this script.

    python benchmarks/bench_assistants.py                                  # 10,000 x 2, this tree
    python benchmarks/bench_assistants.py --assistants 300 --tree /work/main --tree .
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_engine import TURN_WEIGHTS, _sentence, vocabularies  # noqa: E402


def write_assistants(path: str, assistants: int, sessions: int, seed: int = 0) -> int:
    """Write ``assistants`` x ``sessions`` sessions as JSONL (assistant ids ``bot-00000``...);
    returns the number of interactions."""
    hurt, keywords = vocabularies()
    rng = random.Random(seed)
    made = 0
    with open(path, "w", encoding="utf-8") as f:
        for a in range(assistants):
            for s in range(sessions):
                turns = rng.choices(range(1, 7), TURN_WEIGHTS)[0]
                conv = [{"qa_id": f"q{t:02d}", "query": _sentence(rng, 5, 15, hurt, keywords),
                         "assistant": _sentence(rng, 12, 60, hurt, keywords),
                         "ground_truth_assistant": _sentence(rng, 12, 60, hurt, keywords) if rng.random() < 1 / 3 else None}
                        for t in range(turns)]
                rec = {"session_id": f"bot-{a:05d}-s{s}", "assistant_id": f"bot-{a:05d}", "language": "english",
                       "context": "", "conversation": conv}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                made += turns
    return made


def run_job(tree: str, data: str, out: str, extra: list[str]) -> dict:
    """Run the main job from checkout ``tree`` under ``/usr/bin/time -v``; the four figures."""
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "pipelines.audit", "--input", data,
            "--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--mode", "bayesian",
            "--output", out, *extra]
    env = {**os.environ, "PYTHONPATH": tree}
    p = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", p.stderr)

    def size(name):
        q = Path(out) / name
        return q.stat().st_size if q.exists() else None

    return {"tree": tree, "exit": p.returncode, "results_json_bytes": size("results.json"),
            "peak_rss_kb": int(m.group(1)) if m else None, "report_html_bytes": size("report.html"),
            "console_lines": len(p.stdout.splitlines()), "wall": wall.group(1) if wall else None,
            "stderr_tail": p.stderr.splitlines()[-40:-23] if p.returncode else []}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assistants", type=int, default=10_000, help="assistants (10000)")
    ap.add_argument("--sessions", type=int, default=2, help="sessions per assistant (2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (0)")
    ap.add_argument("--tree", action="append", help="checkout(s) to run the job from (default: this one)")
    ap.add_argument("--work", help="folder for the data and the outputs (default: a temporary folder)")
    args, extra = ap.parse_known_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="bench_assistants_")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, f"assistants_{args.assistants}x{args.sessions}_{args.seed}.jsonl")
    if not os.path.exists(data):
        n = write_assistants(data, args.assistants, args.sessions, args.seed)
        print(f"data: {data}: {args.assistants} assistants x {args.sessions} sessions, {n} interactions", flush=True)
    for i, tree in enumerate(args.tree or [str(ROOT)]):
        r = run_job(os.path.abspath(tree), data, os.path.join(work, f"out{i}"), [a for a in extra if a != "--"])
        mb = lambda b: "n/a" if b is None else f"{b / 1e6:.2f} MB"  # noqa: E731
        print(f"{r['tree']}: exit {r['exit']}, results.json {mb(r['results_json_bytes'])}, "
              f"peak RSS {mb(None if r['peak_rss_kb'] is None else r['peak_rss_kb'] * 1024)}, "
              f"report.html {mb(r['report_html_bytes'])}, console {r['console_lines']} lines, wall {r['wall']}",
              flush=True)
        for line in r["stderr_tail"]:
            print("   ", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
