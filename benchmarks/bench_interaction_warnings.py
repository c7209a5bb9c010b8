"""Findings-per-answer benchmark (issue 28 fix28w, issue 27 roll36; not a test): the reader's
``empty_answer`` / ``numeric_id`` and Vision's ``empty_description``, one warning per session and
kind, measured on this tree and on baseline checkouts in one run.

Two inputs of ``--n`` interactions in sessions of ``--per-session``, every interaction with a finding:

* ``reader``: single-interaction records (``.jsonl``) whose ``session_id`` is a JSON number and whose
  answer is blank: ``ReadInteractions`` on FnApiRunner, its warnings counted;
* ``vision``: frames with an empty description through ``Vision`` (a marker scorer, never called):
  its warnings counted.

Each (tree, input) runs in a child of this interpreter (``sys.executable``; ``PYTHONPATH`` = the
tree), ``--repeats`` times in alternating order; the child reports its CPU seconds (user + system,
``getrusage``) and wall seconds. Prints each run and the ratios of the median CPU, this / baseline.

    python benchmarks/bench_interaction_warnings.py --baseline-tree /work/main --n 100000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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
what, path, report, n, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def count(ws):
    out = {}
    for w in ws:
        out[w.kind] = out.get(w.kind, 0) + 1
    return out
with beam.Pipeline(runner=FnApiRunner()) as p:
    if what == "reader":
        from fair_forge_beam.io.read import ReadInteractions
        quality = (p | ReadInteractions(path))["quality"]
    else:
        from fair_forge_beam.components.similarity import SimilarityScorer
        from fair_forge_beam.io.elements import Interaction, make_element_id
        from fair_forge_beam.metrics.vision import Vision

        class Marker(SimilarityScorer):
            def calculate(self, a, b):
                return float(a.split("[s=")[1].split("]")[0])

        frames = [Interaction(make_element_id(f"s{i // per}", "cam", i % per), f"s{i // per}", "cam", "english", "",
                              i % per, f"f{i}", "Describe.", "", "a red car", None, None, None, None, None)
                  for i in range(n)]
        quality = (p | beam.Create(frames) | Vision(scorer=Marker(), threshold=0.75))["quality"]
    _ = (quality | beam.combiners.ToList() | beam.Map(count)
         | beam.Map(lambda c: open(report, "w").write(json.dumps({"quality": c}))))
u = resource.getrusage(resource.RUSAGE_SELF)
res = json.load(open(report))
res.update(seconds=time.perf_counter() - t0, cpu=u.ru_utime + u.ru_stime)
json.dump(res, open(report, "w"))
"""


def write_reader_input(path: Path, n: int, per: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"metadata": {"session_id": i // per, "assistant_id": "bot", "language": "english"},
                                "turn_index": i % per, "batch": {"qa_id": f"q{i}", "query": "hi", "assistant": " "}})
                    + "\n")


def run(tree: Path, what: str, path: Path, work: Path, n: int, per: int) -> dict:
    report = work / "report.json"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", _CHILD, what, str(path), str(report), str(n), str(per)], check=True,
                   cwd=str(tree), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(report.read_text())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-tree", required=True, type=Path, action="append")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--per-session", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_findings_"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "reader.jsonl"
    write_reader_input(path, a.n, a.per_session)
    trees = [(f"baseline{i}", t.resolve()) for i, t in enumerate(a.baseline_tree)] + [("this", ROOT)]
    for what in ("reader", "vision"):
        cpu: dict = {name: [] for name, _ in trees}
        for rep in range(a.repeats):
            for name, tree in (trees if rep % 2 == 0 else trees[::-1]):
                r = run(tree, what, path, work, a.n, a.per_session)
                cpu[name].append(r["cpu"])
                print(f"{what:7s} {name:9s} {tree} warnings={sum(r['quality'].values())} {r['quality']} "
                      f"cpu={r['cpu']:.2f}s wall={r['seconds']:.2f}s", flush=True)
        this = statistics.median(cpu["this"])
        for name, _ in trees[:-1]:
            print(f"{what:7s} median CPU this/{name}: {this:.2f}/{statistics.median(cpu[name]):.2f} = "
                  f"{this / statistics.median(cpu[name]):.3f}", flush=True)


if __name__ == "__main__":
    main()
