"""Repeated-key warnings benchmark (issue 28; not a test): what the reader emits for one session
whose keys repeat, measured on this tree and on a baseline checkout in one run.

Two inputs, each one session record of ``--n`` interactions (``.jsonl``, one line):

* ``alternating``: qa_ids ``a``, ``b``, ``a``, ``b``, … (two keys, each repeated n/2 times);
* ``pairs``: n/2 distinct qa_ids, each given twice.

Each (tree, input) runs in a child of this interpreter (``sys.executable``; ``PYTHONPATH`` = the
tree): ``ReadInteractions`` on FnApiRunner in memory, the reader's data-quality warnings counted
(and their total message characters). The child reports its wall seconds and peak RSS
(``ru_maxrss``). Prints each run and the ratios this tree / baseline.

``--spanish N``: also one session of N Spanish answers through the audit (``-m pipelines.audit
--metrics toxicity --toxicity-scorer hurtlex --group-extractor keyword``), each tree in a child:
its ``english_only_parts`` warnings (``summary.data_quality_by_kind``), wall seconds and the
child's peak RSS.

    python benchmarks/bench_repeat_warnings.py --baseline-tree /work/main --n 1000000
    python benchmarks/bench_repeat_warnings.py --baseline-tree /work/main --n 0 --spanish 100000
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


_AUDIT = r"""
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_audit(tree: Path, path: Path, out: Path) -> dict:
    """The audit of ``path`` with ``tree``'s code, in a child of a child that reports the peak RSS
    of its own children (the audit and the processes it waited for)."""
    import shutil
    import time

    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    rss = subprocess.run([sys.executable, "-c", _AUDIT, sys.executable, "-m", "pipelines.audit", "--input", str(path),
                          "--output", str(out), "--quiet", "--no-report", "--metrics", "toxicity", "--toxicity-scorer",
                          "hurtlex", "--group-extractor", "keyword"],
                         cwd=str(tree), env=env, capture_output=True, text=True, check=True).stdout.split()[-1]
    seconds = time.perf_counter() - t0
    doc = json.loads((out / "results.json").read_text())
    return {"quality": doc["summary"].get("data_quality_by_kind", {}), "seconds": seconds,
            "peak_rss_mb": int(rss) / 1024}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-tree", required=True, type=Path)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--spanish", type=int, default=0)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_repeat_"))
    work.mkdir(parents=True, exist_ok=True)
    for kind in (("alternating", "pairs") if a.n else ()):
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

    if a.spanish:
        path = work / "spanish.jsonl"
        conv = [{"qa_id": f"q{i}", "query": "hola", "assistant": "eres un idiota y un burro"} for i in range(a.spanish)]
        path.write_text(json.dumps({"session_id": "es", "assistant_id": "bot", "language": "spanish", "context": "",
                                    "conversation": conv}) + "\n")
        res = {}
        for name, tree in (("baseline", a.baseline_tree.resolve()), ("this", ROOT)):
            res[name] = r = run_audit(tree, path, work / f"out_{name}")
            print(f"spanish      {name:8s} quality={r['quality']} seconds={r['seconds']:.1f} "
                  f"child_peak_rss_mb={r['peak_rss_mb']:.0f}", flush=True)
        b, t = res["baseline"], res["this"]
        print(f"spanish      ratio this/baseline: english_only_parts {t['quality'].get('english_only_parts')}/"
              f"{b['quality'].get('english_only_parts')}, seconds {t['seconds'] / b['seconds']:.3f}, "
              f"peak RSS {t['peak_rss_mb'] / b['peak_rss_mb']:.3f}", flush=True)


if __name__ == "__main__":
    main()
