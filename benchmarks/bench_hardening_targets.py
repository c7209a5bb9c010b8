"""Issue 28's three measured targets, in one script (not a test; peak RSS by ``/usr/bin/time -v``).

* ``huge-record``: a ``.jsonl.gz`` holding two good sessions, one record of ``--huge-gb`` GB
  (default 2.5: one answer of that many ASCII letters) and a third good session; Humanity,
  frequentist. Target: exit 0, the 3 good sessions scored, 1 dead letter naming the record's size
  and the limit, peak RSS under 1 GB.
* ``long-session``: one session of ``--turns`` interactions (default 200,000; bench_engine's
  seeded sentences), Humanity, Bayesian, default draws. Target: exit 0, peak RSS under 1.5 GB.
* ``assistants``: ``bench_assistants.py``'s 10,000 assistants x 2 sessions, Humanity + Toxicity
  (keyword groups), Bayesian, report on. Targets: ``results.json`` under 25 MB, peak RSS under
  1.5 GB, ``report.html`` under 3 MB, console under 100 lines.

Each job runs from ``--tree`` (default: this checkout) as ``/usr/bin/time -v sys.executable -m
pipelines.audit ...``, one at a time; the data is written once into ``--work`` and reused.

    python benchmarks/bench_hardening_targets.py --work /tmp/targets
    python benchmarks/bench_hardening_targets.py --only long-session --turns 20000
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_assistants import run_job as run_assistants_job, write_assistants  # noqa: E402
from bench_engine import _sentence, vocabularies  # noqa: E402

GB = 1024 ** 3


def _session(sid: str, turns: int, rng: random.Random, hurt, keywords) -> dict:
    return {"session_id": sid, "assistant_id": "bot", "language": "english", "context": "",
            "conversation": [{"qa_id": f"q{t}", "query": _sentence(rng, 5, 15, hurt, keywords),
                              "assistant": _sentence(rng, 12, 60, hurt, keywords)} for t in range(turns)]}


def write_huge_record(path: str, gigabytes: float, seed: int = 0) -> None:
    """Good session ``g1``, ``g2``, the huge record ``huge``, good session ``g3``, gzip-compressed;
    the huge answer is written in 16 MiB pieces (the script never holds it whole)."""
    hurt, keywords = vocabularies()
    rng = random.Random(seed)
    piece = b"a" * (16 * 1024 * 1024)
    with gzip.open(path, "wb", compresslevel=1) as f:
        for sid in ("g1", "g2"):
            f.write(json.dumps(_session(sid, 3, rng, hurt, keywords)).encode() + b"\n")
        f.write(b'{"session_id": "huge", "assistant_id": "bot", "language": "english", "context": "", '
                b'"conversation": [{"qa_id": "q0", "query": "hello", "assistant": "')
        left = int(gigabytes * GB)
        while left > 0:
            f.write(piece[:min(left, len(piece))])
            left -= len(piece)
        f.write(b'"}]}\n')
        f.write(json.dumps(_session("g3", 3, rng, hurt, keywords)).encode() + b"\n")


def write_long_session(path: str, turns: int, seed: int = 0) -> None:
    hurt, keywords = vocabularies()
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(_session("long", turns, random.Random(seed), hurt, keywords), ensure_ascii=False) + "\n")


def run_audit(tree: str, argv: list) -> dict:
    """``/usr/bin/time -v`` of the main job from ``tree``: exit code, peak RSS (bytes), stdout, stderr."""
    p = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "pipelines.audit", *argv], cwd=tree,
                       env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return {"exit": p.returncode, "peak": int(m.group(1)) * 1024 if m else None, "stdout": p.stdout, "stderr": p.stderr}


def _summary(out: str, metric: str) -> dict:
    return json.loads((Path(out) / "results.json").read_text(encoding="utf-8"))["summary"]["metrics"][metric]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", default=str(ROOT), help="checkout to run the jobs from (default: this one)")
    ap.add_argument("--work", help="folder for the data and the outputs (default: a temporary folder)")
    ap.add_argument("--only", choices=("huge-record", "long-session", "assistants"), action="append",
                    help="run only these targets (repeatable; default: all three)")
    ap.add_argument("--huge-gb", type=float, default=2.5, help="size of the huge record in GB (2.5)")
    ap.add_argument("--turns", type=int, default=200_000, help="interactions of the long session (200000)")
    args = ap.parse_args(argv)
    tree = os.path.abspath(args.tree)
    work = args.work or tempfile.mkdtemp(prefix="bench_targets_")
    os.makedirs(work, exist_ok=True)
    only = set(args.only or ("huge-record", "long-session", "assistants"))
    gb = lambda b: "n/a" if b is None else f"{b / GB:.2f} GB"  # noqa: E731
    failed = 0

    if "huge-record" in only:
        data = os.path.join(work, f"huge_{args.huge_gb}gb.jsonl.gz")
        if not os.path.exists(data):
            write_huge_record(data, args.huge_gb)
        out = os.path.join(work, "out-huge")
        r = run_audit(tree, ["--input", data, "--metrics", "humanity", "--output", out, "--no-report", "--quiet"])
        s = _summary(out, "humanity") if r["exit"] == 0 else {}
        doc = json.loads((Path(out) / "results.json").read_text(encoding="utf-8"))["summary"] if r["exit"] == 0 else {}
        ok = (r["exit"] == 0 and r["peak"] < GB and s.get("interactions_scored") == 9
              and doc.get("rejected_at_read") == 1)
        failed += not ok
        print(f"huge-record ({os.path.getsize(data) / 1e6:.1f} MB .gz, one {args.huge_gb} GB record): exit {r['exit']}, "
              f"scored {s.get('interactions_scored')} of 9 good interactions, dead letters "
              f"{doc.get('rejected_at_read_reasons')}, peak RSS {gb(r['peak'])} (target < 1 GB): "
              f"{'met' if ok else 'MISSED'}", flush=True)

    if "long-session" in only:
        data = os.path.join(work, f"long_{args.turns}.jsonl")
        if not os.path.exists(data):
            write_long_session(data, args.turns)
        out = os.path.join(work, "out-long")
        r = run_audit(tree, ["--input", data, "--metrics", "humanity", "--mode", "bayesian", "--output", out,
                             "--no-report", "--quiet"])
        s = _summary(out, "humanity") if r["exit"] == 0 else {}
        ok = r["exit"] == 0 and r["peak"] < 1.5 * GB
        failed += not ok
        print(f"long-session ({args.turns} interactions, Humanity, Bayesian): exit {r['exit']}, scored "
              f"{s.get('interactions_scored')}, peak RSS {gb(r['peak'])} (target < 1.5 GB): {'met' if ok else 'MISSED'}",
              flush=True)

    if "assistants" in only:
        data = os.path.join(work, "assistants_10000x2_0.jsonl")
        if not os.path.exists(data):
            write_assistants(data, 10_000, 2, 0)
        r = run_assistants_job(tree, data, os.path.join(work, "out-assistants"), [])
        peak = None if r["peak_rss_kb"] is None else r["peak_rss_kb"] * 1024
        ok = (r["exit"] == 0 and r["results_json_bytes"] < 25e6 and peak < 1.5 * GB
              and r["report_html_bytes"] < 3e6 and r["console_lines"] < 100)
        failed += not ok
        mb = lambda b: "n/a" if b is None else f"{b / 1e6:.2f} MB"  # noqa: E731
        print(f"assistants (10,000 x 2 sessions, Humanity + Toxicity, Bayesian): exit {r['exit']}, results.json "
              f"{mb(r['results_json_bytes'])} (< 25), peak RSS {gb(peak)} (< 1.5), report.html "
              f"{mb(r['report_html_bytes'])} (< 3), console {r['console_lines']} lines (< 100): "
              f"{'met' if ok else 'MISSED'}", flush=True)
        for line in r["stderr_tail"]:
            print("   ", line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
