"""Garbage-collector benchmark (not a test): one ``fair-forge-beam`` command run with CPython's
default collector thresholds and with :func:`fair_forge_beam._beam.tune_gc`'s, interleaved, CPU
seconds of each finished child measured in one run.

Each run is a subprocess of this interpreter (``sys.executable``) running the command's module
in-process; the baseline's child replaces ``tune_gc`` by a no-op before the command starts, so
the only difference is the generation-0 threshold. The child reports its collections per
generation and the CPU seconds they took (``gc.callbacks``).

    python benchmarks/bench_gc.py --rounds 2 -- --input data.jsonl --output /tmp/out --no-report
    python benchmarks/bench_gc.py -- rollup --from W/audit0 --from W/audit1 --output /tmp/r --no-report

Prints per round and variant: CPU seconds, peak RSS, collections and their CPU seconds; then the
ratio tuned / default of the CPU seconds summed over rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import gc, json, resource, runpy, sys, time
variant, report = sys.argv[1], sys.argv[2]
spent, started = {}, {}
def on_gc(phase, info):
    if phase == "start":
        started["t"] = time.thread_time()
    else:
        g = info["generation"]
        n, s = spent.get(g, (0, 0.0))
        spent[g] = (n + 1, s + time.thread_time() - started["t"])
gc.callbacks.append(on_gc)
if variant == "default":
    import fair_forge_beam._beam as fb
    import fair_forge_beam._gc as fg
    fb.tune_gc = fg.tune_gc = lambda: None
sys.argv = ["fair-forge-beam", *sys.argv[3:]]
code = 0
try:
    runpy.run_module("pipelines.audit", run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
r = resource.getrusage(resource.RUSAGE_SELF)
with open(report, "w") as f:
    json.dump({"cpu": r.ru_utime + r.ru_stime, "rss_mb": r.ru_maxrss / 1024, "exit": code,
               "threshold": gc.get_threshold(), "gc": {str(g): v for g, v in sorted(spent.items())}}, f)
"""


def _output_of(argv: list) -> str | None:
    for i, a in enumerate(argv):
        if a == "--output" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--output="):
            return a.split("=", 1)[1]
    return None


def run(variant: str, argv: list, work: Path) -> dict:
    out = _output_of(argv)
    if out and os.path.isdir(out):
        shutil.rmtree(out)  # each run writes a fresh output folder
    report = work / f"{variant}.json"
    with open(work / f"{variant}.log", "w") as log:
        subprocess.run([sys.executable, "-c", _CHILD, variant, str(report), *argv],
                       cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    return json.loads(report.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the fair-forge-beam arguments")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command's arguments after --")
    work = Path(tempfile.mkdtemp(prefix="bench_gc_"))
    total = {"default": 0.0, "tuned": 0.0}
    for r in range(args.rounds):
        for variant in (("default", "tuned") if r % 2 == 0 else ("tuned", "default")):
            res = run(variant, command, work)
            total[variant] += res["cpu"]
            collections = ", ".join(f"gen{g}: {n} in {s:.2f} s" for g, (n, s) in res["gc"].items())
            print(f"round {r + 1} {variant:8s} {res['cpu']:7.2f} CPU s, peak RSS {res['rss_mb']:.0f} MB, exit "
                  f"{res['exit']}, threshold {tuple(res['threshold'])}; collections {collections}", flush=True)
    print(f"tuned / default CPU: {total['tuned'] / total['default']:.3f} ({total['tuned']:.1f} / "
          f"{total['default']:.1f} CPU s over {args.rounds} rounds); load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
