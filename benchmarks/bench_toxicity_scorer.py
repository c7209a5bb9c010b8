"""Toxicity's per-answer scorer outside Beam: this checkout against a baseline checkout (not a test).

Runs ``_ScoreToxicity.process`` (the DoFn body of the main job's toxicity scorer, keyword groups,
VADER, the HurtLex match and, by default, the profanity-check classifier) over every interaction
of a JSONL file in batches, once with this checkout's code and once with a baseline checkout's
(default: a ``git worktree`` of ``ec2b9ef`` under ``/tmp/toxfast_base``, made when missing), each
in its own Python process (two versions of one package cannot share a process: their
per-process caches have the same keys), interleaved ``--repeat`` times. Each process reports the
CPU seconds of the scoring loop only (reading the file, building and warming up the scorer are
outside; the parsed input is frozen for the garbage collector, as Beam would not hold it all),
the CPU seconds of each component over the same answers, and a BLAKE2b digest of
everything the scorer emitted (every score, dead letter and warning, ``repr`` of each, in order).
The script prints the baseline / new ratio and fails when the digests differ.

    python benchmarks/bench_toxicity_scorer.py                            # /tmp/bench_ab_100k.jsonl
    python benchmarks/bench_toxicity_scorer.py --scorer hurtlex --batch-size 7
    python benchmarks/bench_toxicity_scorer.py --data /tmp/x.jsonl --n 20000 --repeat 3

The data file is made by ``benchmarks/bench_engine.py``'s generator when missing (``--n``,
``--seed``).
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _interactions(path: str, limit: int):
    from fair_forge_beam.io.elements import Interaction, make_element_id

    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            for t, turn in enumerate(rec["conversation"]):
                out.append(Interaction(
                    element_id=make_element_id(rec["session_id"], rec["assistant_id"], t), session_id=rec["session_id"],
                    assistant_id=rec["assistant_id"], language=rec.get("language") or "english", context="",
                    turn_index=t, qa_id=turn.get("qa_id", ""), query=turn.get("query", ""),
                    assistant=turn.get("assistant"), ground_truth_assistant=turn.get("ground_truth_assistant"),
                    observation=None, weight=None, agentic=None, ground_truth_agentic=None, logprobs=None))
            if limit and len(out) >= limit:
                return out[:limit]
    return out


def child(args) -> None:
    """Score the file with the ``fair_forge_beam`` on ``sys.path``; print one JSON line."""
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from fair_forge_beam.components.toxicity_classifier import make_classifier
    from fair_forge_beam.metrics.toxicity import Toxicity

    xs = _interactions(args.data, args.limit)
    clf = make_classifier("profanity-check") if args.scorer == "classifier" else None
    metric = Toxicity(group_extractor=KeywordGroupExtractor(default_group_keywords()), clustering=False,
                      toxicity_classifier=clf)
    fn = metric.spec().scorer
    fn.setup()
    list(fn.process(xs[:64]))  # warm-up: lexicon index, VADER tables, the model's first call
    # the 100k parsed interactions stay in memory here (not in Beam, which streams bundles): frozen,
    # the garbage collector's full passes do not scan them again and again inside the timings
    gc.collect()
    gc.freeze()
    h = hashlib.blake2b(digest_size=16)
    n_out = 0
    scorer = 0.0
    # only the process() calls are timed; their outputs are digested and dropped outside the
    # timing (as Beam passes them on): kept, 100k outputs would make the garbage collector's
    # full passes part of the figure
    for i in range(0, len(xs), args.batch_size):
        c0 = time.process_time()
        batch = fn.process(xs[i:i + args.batch_size])
        scorer += time.process_time() - c0
        for o in batch:
            tag = getattr(o, "tag", None)
            h.update(repr((tag, o.value if tag else o)).encode("utf-8"))
            n_out += 1
        del batch
    texts = [x.assistant or "" for x in xs]
    comp = {}
    bs = args.batch_size
    c0 = time.process_time()
    n_matched = sum(fn.matcher.match(t, "english") is not None for t in texts)
    comp["hurtlex_match"] = time.process_time() - c0
    c0 = time.process_time()
    named = []
    for i in range(0, len(texts), bs):
        named += [t for t, d in zip(texts[i:i + bs], fn.extractor.detect_batch(texts[i:i + bs]))
                  if any(g.present for g in d.values())]
    comp["keyword_groups"] = time.process_time() - c0
    c0 = time.process_time()
    for i in range(0, len(named), bs):
        fn.sentiment.infer_batch(named[i:i + bs])
    comp["vader_on_group_answers"] = time.process_time() - c0
    if clf is not None:
        c0 = time.process_time()
        for i in range(0, len(texts), bs):
            clf.probabilities(texts[i:i + bs])
        comp["classifier"] = time.process_time() - c0
    print(json.dumps({"n": len(xs), "outputs": n_out, "digest": h.hexdigest(), "scorer_cpu": scorer,
                      "components_cpu": comp, "group_answers": len(named), "matched": n_matched}))


def _run(tree: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--data", args.data, "--scorer", args.scorer,
           "--batch-size", str(args.batch_size), "--limit", str(args.limit)]
    res = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"scorer run in {tree} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/tmp/bench_ab_100k.jsonl", help="JSONL sessions (made when missing)")
    ap.add_argument("--n", type=int, default=100_000, help="interactions when the file is made (100000)")
    ap.add_argument("--seed", type=int, default=0, help="seed when the file is made (0)")
    ap.add_argument("--limit", type=int, default=0, help="score only the first LIMIT interactions (0: all)")
    ap.add_argument("--scorer", choices=("classifier", "hurtlex"), default="classifier",
                    help="profanity-check decides is_toxic (the main job's default) or the HurtLex rule")
    ap.add_argument("--batch-size", type=int, default=256, help="answers per process() call (256, the metric's)")
    ap.add_argument("--base", default="/tmp/toxfast_base", help="baseline checkout (made with git worktree when missing)")
    ap.add_argument("--base-rev", default="ec2b9ef", help="commit of the baseline checkout when it is made (ec2b9ef)")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs of each version; the fastest is kept")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if not os.path.exists(args.data):
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_engine import write_sessions

        write_sessions(args.data, args.n, args.seed)
    if not os.path.exists(args.base):
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", args.base, args.base_rev], check=True)
    runs: dict[str, list[dict]] = {"baseline": [], "new": []}
    for r in range(args.repeat):
        for name, tree in (("baseline", args.base), ("new", str(ROOT))):
            runs[name].append(_run(tree, args))
            got = runs[name][-1]
            print(f"run {r + 1} {name:8s}: {got['n']} interactions, scorer {got['scorer_cpu']:.2f} CPU s; components "
                  + ", ".join(f"{k} {v:.2f}" for k, v in got["components_cpu"].items()), flush=True)
    best = {k: min(v, key=lambda d: d["scorer_cpu"]) for k, v in runs.items()}
    digests = {d["digest"] for v in runs.values() for d in v}
    print(f"scorer={args.scorer} batch_size={args.batch_size} interactions={best['new']['n']} "
          f"outputs={best['new']['outputs']} answers naming a group={best['new']['group_answers']}")
    print(f"scorer CPU s: baseline {best['baseline']['scorer_cpu']:.2f}, new {best['new']['scorer_cpu']:.2f}, "
          f"baseline/new {best['baseline']['scorer_cpu'] / best['new']['scorer_cpu']:.2f}x; "
          f"per answer {1e6 * best['baseline']['scorer_cpu'] / best['new']['n']:.0f} -> "
          f"{1e6 * best['new']['scorer_cpu'] / best['new']['n']:.0f} us")
    for k in best["new"]["components_cpu"]:
        b, n = best["baseline"]["components_cpu"][k], best["new"]["components_cpu"][k]
        print(f"  {k:24s} baseline {b:6.2f}  new {n:6.2f}  baseline/new {b / n:.2f}x")
    if len(digests) != 1:
        print(f"OUTPUTS DIFFER: digests {sorted(digests)}")
        return 1
    print(f"outputs identical (digest {digests.pop()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
