"""Repeated-key warnings benchmark (issue 28; not a test): what the reader emits for one session
whose keys repeat, measured on this tree and on a baseline checkout in one run.

Two inputs, each one session record of ``--n`` interactions (``.jsonl``, one line):

* ``alternating``: qa_ids ``a``, ``b``, ``a``, ``b``, … (two keys, each repeated n/2 times);
* ``pairs``: n/2 distinct qa_ids, each given twice.

Each (tree, input) runs in a child of this interpreter (``sys.executable``; ``PYTHONPATH`` = the
tree): ``ReadInteractions`` on FnApiRunner in memory, the reader's data-quality warnings counted
(and their total message characters). The child reports its wall seconds and peak RSS
(``ru_maxrss``). Prints each run and the ratios this tree / baseline.

    python benchmarks/bench_repeat_warnings.py --baseline-tree /work/main --n 1000000
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import apache_beam as beam
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from fair_forge_beam.io.read import ReadInteractions
path, report = sys.argv[1], sys.argv[2]
def kinds(ws):
    out = {}
    for w in ws:
        n, c = out.get(w.kind, (0, 0))
        out[w.kind] = (n + 1, c + len(w.message))
    return [out]
with beam.Pipeline(runner=FnApiRunner()) as p:
    out = p | ReadInteractions(path)
    counted = out["interactions"] | beam.combiners.Count.Globally()
    q = out["quality"] | beam.combiners.ToList() | beam.FlatMap(kinds)
    def write(n, qs):
        with open(report, "w") as f:
            json.dump({"interactions": n, "quality": {k: v for k, v in qs[0].items()} if qs else {}}, f)
    _ = counted | beam.Map(lambda n, qs: write(n, qs), beam.pvalue.AsList(q))
res = json.load(open(report))
res["seconds"] = time.perf_counter() - t0
res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(res, open(report, "w"))
"""


def write_input(path: Path, n: int, kind: str) -> None:
    conv = []
    for i in range(n):
        qa = ("a" if i % 2 == 0 else "b") if kind == "alternating" else f"q{i // 2}"
        conv.append({"qa_id": qa, "query": "hi", "assistant": "hello there"})
    with open(path, "w") as f:
        f.write(json.dumps({"session_id": "s", "assistant_id": "bot", "language": "english", "context": "",
                            "conversation": conv}) + "\n")


def run(tree: Path, path: Path, work: Path) -> dict:
    report = work / "report.json"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", _CHILD, str(path), str(report)], check=True, cwd=str(tree), env=env,
                   stdout=subprocess.DEVNULL)
    return json.loads(report.read_text())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-tree", required=True, type=Path)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_repeat_"))
    work.mkdir(parents=True, exist_ok=True)
    for kind in ("alternating", "pairs"):
        path = work / f"{kind}.jsonl"
        write_input(path, a.n, kind)
        res = {}
        for name, tree in (("baseline", a.baseline_tree.resolve()), ("this", ROOT)):
            res[name] = r = run(tree, path, work)
            nq = sum(v[0] for v in r["quality"].values())
            chars = sum(v[1] for v in r["quality"].values())
            print(f"{kind:12s} {name:8s} interactions={r['interactions']} warnings={nq} ({r['quality']}) "
                  f"message_chars={chars} seconds={r['seconds']:.1f} peak_rss_mb={r['peak_rss_mb']:.0f}", flush=True)
        b, t = res["baseline"], res["this"]
        nb = sum(v[0] for v in b["quality"].values())
        nt = sum(v[0] for v in t["quality"].values())
        print(f"{kind:12s} ratio this/baseline: warnings {nt}/{nb}, seconds {t['seconds'] / b['seconds']:.3f}, "
              f"peak RSS {t['peak_rss_mb'] / b['peak_rss_mb']:.3f}", flush=True)


if __name__ == "__main__":
    main()
