"""BestOf cost: king of the hill (sequential matches in a DoFn) vs all pairs (RunJudge, concurrent)
on hh-rlhf chosen/rejected pairs and on a synthetic N-assistant set, against the scripted server
with a fixed latency per request (FnApiRunner in-memory, one worker).

    PYTHONPATH=. python benchmarks/bench_bestof.py --pairs 200 --latency 0.05

Prints, per run: blocks, judge requests, wall time, and the overall ranking.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _sides(req):
    case = req.messages[-1]["content"]
    a, b = case.split("=== ASSISTANT B ===")
    return a, b


def shorter_last_answer(req):
    a, b = (s.rsplit("ANSWER:", 1)[1].strip() for s in _sides(req))
    w = "A" if len(a) < len(b) else "B" if len(b) < len(a) else "tie"
    return {"winner": w, "verdict": "shorter final answer", "confidence": 0.6, "reasoning": {}}


def marker(req):
    a, b = (sum(float(x) for x in re.findall(r"\[q=([0-9.]+)\]", s)) for s in _sides(req))
    w = "A" if a > b else "B" if b > a else "tie"
    return {"winner": w, "verdict": f"{a} vs {b}", "confidence": 0.6, "reasoning": {}}


def main() -> None:
    from helpers import handler_for
    from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
    from fair_forge_beam.metrics.best_of import BestOf
    from fair_forge_beam.statistical import BayesianMode
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--assistants", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--shared", default=os.environ.get("FAIR_FORGE_SHARED", "../shared"))
    args = ap.parse_args()
    path = Path(args.shared) / "data" / "hh_rlhf" / "harmless-base_test.jsonl.gz"
    for mode in ("king", "all_pairs"):
        with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(shorter_last_answer, latency=args.latency) as srv:
            t = time.perf_counter()
            res = BestOf.run(HHRLHFPairs, path=str(path), limit=args.pairs, judge=handler_for(srv, Path(tmp)), mode=mode,
                             statistical_mode=BayesianMode(mc_samples=2000), slices=("overall",))
            dt = time.perf_counter() - t
            top = res.slices[0]
            print(f"hh-rlhf {mode:9s}: {len(res)} blocks, {srv.count()} requests, {dt:.1f} s wall; "
                  + ", ".join(f"{r.assistant_id} W{r.wins}/L{r.losses}/T{r.ties} β={r.strength.mean:+.3f} "
                              f"[{r.strength.ci_low:+.3f}, {r.strength.ci_high:+.3f}] P(best)={r.prob_best:.3f}"
                              for r in top.ranking))
    # synthetic: --assistants assistants × --blocks blocks, quality marker = index (+ noise by block)
    from helpers import run_metric
    from fair_forge_beam.io.elements import Interaction, make_element_id

    data = []
    for blk in range(args.blocks):
        for k in range(args.assistants):
            q = k + ((blk * 7 + k * 3) % 5)  # not transitive everywhere: some upsets
            aid = f"bot{k:02d}"
            data.append(Interaction(make_element_id(f"s{blk}", aid, 0), f"s{blk}", aid, "english", "", 0, "q0",
                                    f"question {blk}", f"{aid} answer [q={q}]", None, None, None, None, None, None))
    for mode in ("king", "all_pairs"):
        with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(marker, latency=args.latency) as srv:
            t = time.perf_counter()
            res = run_metric(BestOf(judge=handler_for(srv, Path(tmp)), mode=mode, statistical_mode=BayesianMode(mc_samples=2000),
                                    slices=("overall",)), data, Path(tmp) / "out")
            dt = time.perf_counter() - t
            (top,) = res["slices"]
            print(f"synthetic {args.assistants}x{args.blocks} {mode:9s}: {srv.count()} requests, {dt:.1f} s wall; top 3: "
                  + ", ".join(f"{r['assistant_id']} β={r['strength']['mean']:+.2f} P(best)={r['prob_best']:.2f}" for r in top["ranking"][:3]))


if __name__ == "__main__":
    main()
