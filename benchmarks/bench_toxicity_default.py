"""The main job's toxicity defaults before and after issue 15, on the shipped examples, in one run.

    PYTHONPATH=. python benchmarks/bench_toxicity_default.py [--repeats 1]

Runs ``--metrics toxicity --mode bayesian --seed 7 --mc-samples 1000`` twice per repeat, each in
a fresh subprocess (interleaved): with the earlier defaults pinned (``--toxicity-scorer hurtlex
--group-extractor embedding``: HurtLex rule, MiniLM groups, cluster profiling) and with today's
defaults (no flag: alt-profanity-check, keyword groups). Prints wall seconds (median), their
ratio, and the overall toxic rate, interactions scored and dead letters of each.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["--quiet", "--no-report", "--metrics", "toxicity", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000"]
RUNS = {"before (hurtlex + embedding)": ["--toxicity-scorer", "hurtlex", "--group-extractor", "embedding"],
        "after (defaults)": []}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    secs = {k: [] for k in RUNS}
    docs = {}
    with tempfile.TemporaryDirectory(prefix="toxdefault-") as tmp:
        for r in range(a.repeats):
            for name, extra in RUNS.items():
                out = Path(tmp) / f"{len(docs)}-{r}"
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "pipelines.audit", *COMMON, *extra, "--output", str(out)],
                               cwd=ROOT, env=env, check=True, capture_output=True)
                secs[name].append(time.perf_counter() - t0)
                docs[name] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    base = statistics.median(secs["before (hurtlex + embedding)"])
    print("| run | seconds (median) | ratio to before | overall toxic rate | interactions | toxicity dead letters |")
    print("|---|---|---|---|---|---|")
    for name in RUNS:
        tox = docs[name]["metrics"]["toxicity"]
        overall = next(s for s in tox["slices"] if s["slice"] == "overall")
        dead = docs[name]["summary"]["metrics"]["toxicity"]["dead_letters"]
        s = statistics.median(secs[name])
        print(f"| {name} | {s:.1f} | {s / base:.2f} | {overall['toxic_rate']['mean']:.3f} | "
              f"{overall['n_interactions']} | {dead} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
