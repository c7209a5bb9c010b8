"""Toxicity on the ToxiGen seed sentences (not a test): per-group counts, DIDT, group match rate.

Each of the 722 sentences (``{text, label, target_group}``, microsoft/TOXIGEN, MIT) becomes a
single-turn session whose ``assistant`` is the sentence and whose ``assistant_id`` is its label
(``hate`` / ``neutral``), so the per-assistant slices compare hateful and neutral text. Runs the
main job (``--metrics toxicity``) in both modes and prints, per slice, the toxic rate, N_i / K_i
and DR/DTO/ASB/DIDT, then how often the detected groups include the sentence's target group
(``TOXIGEN_GROUP_MAP``).

    python benchmarks/toxigen_toxicity.py [--seed-sentences PATH] [--group-extractor embedding|keyword]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from fair_forge_beam.components.group_extractor import TOXIGEN_GROUP_MAP
from pipelines import audit

DEFAULT = Path(os.environ.get("FAIR_FORGE_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data/toxigen/seed_sentences.jsonl"


def to_sessions(src: Path, dst: Path) -> list[dict]:
    rows = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    with dst.open("w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({
                "session_id": f"toxigen-{i:04d}", "assistant_id": r["label"], "language": "english", "context": "",
                "conversation": [{"qa_id": "0", "query": "", "assistant": r["text"], "ground_truth_assistant": ""}],
            }, ensure_ascii=False) + "\n")
    return rows


def _fmt(e) -> str:
    if e is None or e.get("mean") is None:
        return "n/a"
    if e.get("ci_low") is None:
        return f"{e['mean']:.4f}"
    return f"{e['mean']:.4f} [{e['ci_low']:.4f}, {e['ci_high']:.4f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed-sentences", type=Path, default=DEFAULT)
    ap.add_argument("--group-extractor", default="embedding", choices=["embedding", "keyword"])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "toxigen_sessions.jsonl"
        rows = to_sessions(args.seed_sentences, data)
        for mode in ("frequentist", "bayesian"):
            out = Path(tmp) / mode
            doc = audit.run(["--quiet", "--input", str(data), "--metrics", "toxicity", "--mode", mode,
                             "--group-extractor", args.group_extractor, "--no-clustering", "--output", str(out)])
            print(f"\n== {mode} ({args.group_extractor} groups) ==")
            for s in doc["metrics"]["toxicity"]["slices"]:
                gp = s["group_profiling"]
                est = s["estimates"]
                print(f"{s['slice']:<24} n={s['n_interactions']:<4} toxic_rate={_fmt(s['toxic_rate'])}")
                print("   " + "  ".join(f"{c}={_fmt(est[c])}" for c in ("DR", "DTO", "ASB", "DIDT")))
                print("   N_i " + ", ".join(f"{g}:{n}" for g, n in gp["N_i"].items() if n))
                print("   K_i " + ", ".join(f"{g}:{k}" for g, k in gp["K_i"].items() if k))
            if mode == "frequentist":
                table = pq.read_table(out / "results.parquet").to_pylist()
                detected = {r["session_id"]: set(r["toxicity_groups"] or []) for r in table if r["metric"] == "toxicity"}
                hits, none, per = 0, 0, Counter()
                for i, r in enumerate(rows):
                    got = detected.get(f"toxigen-{i:04d}", set())
                    want = set(TOXIGEN_GROUP_MAP.get(r["target_group"], ()))
                    ok = bool(got & want)
                    hits += ok
                    none += not got
                    per[(r["target_group"], ok)] += 1
                print(f"\ntarget group among detected groups: {hits}/{len(rows)} = {hits / len(rows):.1%}; "
                      f"no group detected: {none / len(rows):.1%}")
                for tg in sorted({r['target_group'] for r in rows}):
                    n = per[(tg, True)] + per[(tg, False)]
                    print(f"   {tg:<18} {per[(tg, True)]}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
