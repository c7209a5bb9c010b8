"""Cost of reading a normal Parquet file through ``io.read._ReadParquetRowGroup`` (row sizing in
Arrow, then conversion to Python), this tree against a baseline tree, in one script.

    python benchmarks/bench_parquet_sizing.py --baseline-tree /path/to/main/checkout

Writes a 20,000-session Parquet file (4 turns each, 2,000 rows per row group) once, then reads every
row group in alternating subprocesses (3 rounds × best of 3 per tree) and prints the best times
and their ratio (this tree / baseline) as JSON. Issue 28, trial 28 B2: sizing counts 8 bytes per
value and sizes lists of fixed-width items from their offsets. Measured against main (be5baf6) on
the shared 2-core machine: ratio 0.99 (0.470 s baseline, 0.465 s); an earlier run under load, 1.04
(2.88 s, 3.00 s).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_READ = r'''
import sys, time
import pyarrow.parquet as pq
from fair_forge_beam.io.read import _ReadParquetRowGroup
n = pq.ParquetFile(sys.argv[1]).num_row_groups
best = 1e9
for _ in range(3):
    t = time.perf_counter(); k = 0
    for rg in range(n):
        for _x in _ReadParquetRowGroup().process((sys.argv[1], rg)):
            k += 1
    best = min(best, time.perf_counter() - t)
print(best, k)
'''


def _write(path: str, sessions: int = 20_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"session_id": f"s{i}", "assistant_id": f"bot{i % 7}", "language": "english",
             "conversation": [{"qa_id": f"s{i}-{j}", "query": "Can you help me with my order? " * 3,
                               "assistant": "Of course, I am glad to help you with that. " * 5,
                               "ground_truth_assistant": "Happy to help.", "scores": [0.1, 0.2, 0.3]} for j in range(4)]}
            for i in range(sessions)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-tree", required=True, help="a checkout of the baseline (e.g. main)")
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="the tree measured (default: this one)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sessions.parquet")
        _write(path)
        best = {"baseline": [], "tree": []}
        for _ in range(args.rounds):
            for name, tree in (("baseline", args.baseline_tree), ("tree", args.tree)):
                out = subprocess.run([sys.executable, "-c", _READ, path], env={**os.environ, "PYTHONPATH": tree},
                                     capture_output=True, text=True, check=True).stdout.split()
                best[name].append(float(out[0]))
        b, t = min(best["baseline"]), min(best["tree"])
        print(json.dumps({"rows": int(out[1]), "baseline_s": round(b, 3), "tree_s": round(t, 3), "ratio": round(t / b, 3)}))


if __name__ == "__main__":
    main()
