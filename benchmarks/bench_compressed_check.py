"""Cost of the check pass over a compressed input (not a test).

Before a compressed input gives any record, the reader decompresses it once and drops the data
(``io.edge.compressed_check``): a file whose data fails its check gives none of its records (trial
33 T6). This times the reader's read of one ``.jsonl.gz`` (default 100,000 sessions of 3 turns,
``_JsonLinesSource``: decompress, cut lines) with the check and without it (the check replaced by
``None``), interleaved, ``--rounds`` times each, and the same read followed by parsing each line
(``edge.loads``, what the read stage does next). Ratios are with / without, medians of the rounds,
in one run. Times are this process's CPU seconds (time.process_time: the machine is shared).

    python benchmarks/bench_compressed_check.py                 # 100,000 sessions, 5 rounds
    python benchmarks/bench_compressed_check.py --sessions 20000 --rounds 3
    python benchmarks/bench_compressed_check.py --audit --sessions 10000 --rounds 2   # whole audits

``--audit``: whole audits instead (``sys.executable -m pipelines.audit --metrics humanity,toxicity``,
the in-memory runner, so the reader runs in the audit's process), with and without the check,
interleaved; the children's CPU seconds (``RUSAGE_CHILDREN``).
"""
from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import json
import random
import statistics
import tempfile
import time
from pathlib import Path


def _write(path: Path, n: int) -> None:
    rng = random.Random(33)
    with gzip.open(path, "wb", compresslevel=6) as f:
        for i in range(n):
            f.write((json.dumps({"session_id": f"s{i}", "assistant_id": f"bot{i % 5}", "language": "english",
                                 "conversation": [{"qa_id": f"s{i}-{k}", "query": f"question {k} about {rng.randrange(10**6)}",
                                                   "assistant": f"I am glad to help with {rng.getrandbits(64):x}, thank you.",
                                                   "ground_truth_assistant": "Happy to help."} for k in range(3)]})
                     + "\n").encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--audit", action="store_true", help="time whole audits (children's CPU seconds)")
    args = ap.parse_args()
    if args.audit:
        return _audits(args)

    from apache_beam.io.range_trackers import OffsetRangeTracker

    from fair_forge_beam.io import edge, read

    with tempfile.TemporaryDirectory(prefix="bench-compressed-check-") as tmp:
        path = Path(tmp) / "in.jsonl.gz"
        _write(path, args.sessions)
        real = read.compressed_refusal

        def lines(check: bool, parse: bool) -> float:
            read.compressed_refusal = real if check else (lambda p: None)
            try:
                t = time.process_time()
                n = 0
                for _, _, line in read._JsonLinesSource(str(path)).read_records(str(path), OffsetRangeTracker(0, 2**62)):
                    if parse:
                        edge.loads(line.decode("utf-8"))
                    n += 1
                assert n == args.sessions, n
                return time.process_time() - t
            finally:
                read.compressed_refusal = real

        t = time.process_time()
        assert edge.compressed_check(str(path)) is None
        check_alone = time.process_time() - t
        lines(True, False)  # warm-up: imports, page cache
        times = {k: [] for k in ("read", "read+check", "parse", "parse+check")}
        for _ in range(args.rounds):
            for parse in (False, True):
                for check in (False, True):
                    times[("parse" if parse else "read") + ("+check" if check else "")].append(lines(check, parse))
        med = {k: statistics.median(v) for k, v in times.items()}
        size = path.stat().st_size
        print(f"{args.sessions:,} sessions, {size / 1e6:.1f} MB gzip; check pass alone {check_alone:.2f} s")
        for k, v in med.items():
            print(f"  {k:12s} median {v:.2f} s  (rounds: {', '.join(f'{x:.2f}' for x in times[k])})")
        print(f"ratio read with/without check: {med['read+check'] / med['read']:.3f}")
        print(f"ratio read+parse with/without check: {med['parse+check'] / med['parse']:.3f}")


#: the audit with the reader's check pass replaced by None (NOCHECK=1), run in the child process
_CHILD = ("import os, runpy, sys\n"
          "from fair_forge_beam.io import read\n"
          "if os.environ.get('NOCHECK') == '1':\n"
          "    read.compressed_refusal = lambda path: None\n"
          "sys.argv = ['pipelines.audit', *sys.argv[1:]]\n"
          "runpy.run_module('pipelines.audit', run_name='__main__')\n")


def _audits(args) -> None:
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="bench-compressed-check-") as tmp:
        path = Path(tmp) / "in.jsonl.gz"
        _write(path, args.sessions)
        times = {"audit": [], "audit+check": []}
        for r in range(args.rounds):
            for check in (False, True):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run(
                    [sys.executable, "-c", _CHILD, "--input", str(path), "--metrics", "humanity,toxicity", "--quiet",
                     "--no-report", "--output", str(Path(tmp) / f"out{r}{int(check)}")],
                    cwd=repo, env={**os.environ, "PYTHONPATH": str(repo), "NOCHECK": "0" if check else "1"},
                    capture_output=True, text=True)
                assert proc.returncode == 0, proc.stderr[-2000:]
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                times["audit+check" if check else "audit"].append(cpu)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{args.sessions:,} sessions, {path.stat().st_size / 1e6:.1f} MB gzip, whole audits (children's CPU s)")
        for k, v in med.items():
            print(f"  {k:12s} median {v:.2f} s  (rounds: {', '.join(f'{x:.2f}' for x in times[k])})")
        print(f"ratio audit with/without check: {med['audit+check'] / med['audit']:.3f}")


if __name__ == "__main__":
    main()
