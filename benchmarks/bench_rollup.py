"""Roll-up benchmark (issue 27's target; not a test): a roll-up of D daily audits against one
audit of the D days' raw files, CPU seconds measured in one run.

Writes D days of synthetic sessions (``benchmarks/bench_engine.py``'s generator: seeded, sessions
of 1-6 turns, 20 assistants, English HurtLex lemmas, emotion words and group keywords) of about
``--per-day`` interactions each; ``--split`` of each day's sessions continue on the next day (the
conversation cut in two, as a nightly export cuts a conversation that spans midnight). Then, each
as a subprocess of this interpreter (``sys.executable -m pipelines.audit``, CPU seconds of the
finished child):

1. one audit per day (``--metrics humanity,toxicity --group-extractor keyword``, the mode of
   ``--mode``), each into its own folder (its ``stats/`` stored);
2. **union**: one audit over all the days' files;
3. **rollup**: ``fair-forge-beam rollup --from <the daily audits>``.

Prints each run's CPU and wall seconds, the ratio rollup / union (the target: at most 0.1) and
whether the two ``results.json`` are byte-identical apart from ``config.inputs`` (they must be;
the roll-up's inputs are the days' files in day order, so they are identical outright).

``--baseline-tree PATH``: the roll-up also from another checkout (its child run with ``PYTHONPATH`` and
working folder ``PATH``, e.g. the main branch), ``--rounds`` times each, alternating baseline / this tree
(A/B/A/B) after the one union audit; prints each roll-up's CPU, both trees' mean ratio rollup / union,
this tree's mean CPU / the baseline's, and whether every roll-up's ``results.json`` equals the union's.

``--hash-cost`` (issue 28): also the roll-up without its runs' file hashes — the same command in
a child whose ``rollup.check_sealed`` (hashing every file of every run before the pipeline) and
``rollup.seal_manifest`` (hashing its own outputs) do nothing — and the ratio of the two, then
``seal_manifest`` alone on each daily audit (what sealing adds to an audit).

    python benchmarks/bench_rollup.py                          # 7 days x 100,000 interactions
    python benchmarks/bench_rollup.py --days 3 --per-day 20000 --mode frequentist
    python benchmarks/bench_rollup.py --work W --reuse      # again on W's audits: the union and the roll-up only
    python benchmarks/bench_rollup.py --work W --reuse --hash-cost
    python benchmarks/bench_rollup.py --work W --reuse --baseline-tree ../main --rounds 2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import write_sessions  # noqa: E402


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def write_days(work: Path, days: int, per_day: int, split: float, seed: int) -> list[Path]:
    """``days`` JSONL files; ``split`` of a day's sessions of 2+ turns are cut, their second part
    opening the next day's file under the same session and assistant."""
    rng = random.Random(seed)
    files, carry = [], []
    for d in range(days):
        raw = work / f"raw{d}.jsonl"
        write_sessions(str(raw), per_day, seed + d)
        out = work / f"day{d}.jsonl"
        keep, nxt = [], []
        for line in raw.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            rec["session_id"] = f"d{d}-{rec['session_id']}"
            conv = rec["conversation"]
            if d + 1 < days and len(conv) > 1 and rng.random() < split:
                cut = rng.randrange(1, len(conv))
                keep.append({**rec, "conversation": conv[:cut]})
                nxt.append({**rec, "conversation": conv[cut:]})
            else:
                keep.append(rec)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in carry + keep), encoding="utf-8")
        raw.unlink()
        carry = nxt
        files.append(out)
    return files


def timed(cmd: list[str], log: Path, tree: Path = ROOT) -> tuple[float, float]:
    """CPU and wall seconds of the child ``cmd``, run from the checkout ``tree`` (its working folder and
    ``PYTHONPATH``: ``-m`` puts the working folder first on ``sys.path``)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    c0, t0 = children_cpu(), time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=tree, env=env).returncode
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} … failed ({rc}); see {log}")
    return children_cpu() - c0, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--per-day", type=int, default=100_000, help="interactions per day (100000)")
    ap.add_argument("--split", type=float, default=0.1, help="share of a day's sessions that span midnight (0.1)")
    ap.add_argument("--mode", default="bayesian", choices=["bayesian", "frequentist"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="working folder (default: a new temporary folder)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the days' files and daily audits already in --work (made by an earlier run with the same "
                         "--days, --per-day, --split, --mode and --seed) and time the union audit and the roll-up again")
    ap.add_argument("--hash-cost", action="store_true",
                    help="also time the roll-up without its file hashes (check and seal), and sealing alone")
    ap.add_argument("--baseline-tree", metavar="PATH",
                    help="also time the roll-up from this checkout (e.g. the main branch), alternating with this tree")
    ap.add_argument("--rounds", type=int, default=2, help="with --baseline-tree: roll-ups per tree (2)")
    args, beam_args = ap.parse_known_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_rollup_"))
    work.mkdir(parents=True, exist_ok=True)
    reuse = args.reuse and all((work / f"audit{d}" / "results.json").exists() for d in range(args.days))
    if args.reuse and not reuse:
        print("--reuse: no complete set of daily audits in --work; making them", flush=True)
    files = ([work / f"day{d}.jsonl" for d in range(args.days)] if reuse
             else write_days(work, args.days, args.per_day, args.split, args.seed))
    print(f"data: {args.days} days in {work}")
    common = [sys.executable, "-m", "pipelines.audit", "--metrics", "humanity,toxicity", "--group-extractor",
              "keyword", "--mode", args.mode, "--no-report", "--quiet", *beam_args]
    audits_cpu_list = []
    for d, f in enumerate(files if not reuse else ()):
        cpu, wall = timed([*common, "--input", str(f), "--output", str(work / f"audit{d}")], work / f"audit{d}.log")
        audits_cpu_list.append(cpu)
        print(f"day {d}: audit {cpu:.1f} CPU s ({wall:.1f} s)", flush=True)
    union_cpu, union_wall = timed([*common, *[a for f in files for a in ("--input", str(f))], "--output",
                                   str(work / "union")], work / "union.log")
    print(f"union audit of {args.days} days: {union_cpu:.1f} CPU s ({union_wall:.1f} s)", flush=True)

    def rollup(name: str, tree: Path = ROOT) -> tuple[float, float]:
        return timed([sys.executable, "-m", "pipelines.audit", "rollup", "--quiet", "--no-report",
                      *[a for d in range(args.days) for a in ("--from", str(work / f"audit{d}"))],
                      "--output", str(work / name), *beam_args], work / f"{name}.log", tree)

    def identical(name: str) -> bool:
        return (work / "union" / "results.json").read_bytes() == (work / name / "results.json").read_bytes()

    if args.baseline_tree:
        base = Path(args.baseline_tree).resolve()
        cpu: dict = {"baseline": [], "this": []}
        same = True
        for i in range(args.rounds):
            for who, tree in (("baseline", base), ("this", ROOT)):
                name = f"rollup-{who}-{i}"
                c, w = rollup(name, tree)
                cpu[who].append(c)
                same = identical(name) and same
                print(f"round {i}: rollup from {tree} ({who}): {c:.1f} CPU s ({w:.1f} s); results.json identical: "
                      f"{identical(name)}; load average {os.getloadavg()[0]:.2f}", flush=True)
        mean = {k: sum(v) / len(v) for k, v in cpu.items()}
        print(f"rollup / union CPU: baseline {mean['baseline'] / union_cpu:.3f}, this tree {mean['this'] / union_cpu:.3f} "
              f"(target <= 0.1; means of {args.rounds}); this / baseline {mean['this'] / mean['baseline']:.3f}; "
              f"every results.json identical: {same}")
        return 0 if same else 1
    roll_cpu, roll_wall = rollup("rollup")
    print(f"rollup of {args.days} audits: {roll_cpu:.1f} CPU s ({roll_wall:.1f} s)")
    same = identical("rollup")
    print(f"rollup / union CPU: {roll_cpu / union_cpu:.3f} (target <= 0.1); results.json identical: {same}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if args.hash_cost:
        # the same roll-up, its runs' files not hashed before the pipeline nor its own after it
        off = ("import sys; import fair_forge_beam.rollup as r; r.check_sealed = lambda *a: None; "
               "r.seal_manifest = lambda *a: None; sys.exit(r.main(sys.argv[1:]))")
        bare_cpu, bare_wall = timed([sys.executable, "-c", off, "--quiet", "--no-report",
                                     *[a for d in range(args.days) for a in ("--from", str(work / f"audit{d}"))],
                                     "--output", str(work / "rollup-unhashed"), *beam_args], work / "rollup-unhashed.log")
        same_bare = (work / "rollup-unhashed" / "results.json").read_bytes() == (work / "rollup" / "results.json").read_bytes()
        mb = sum(p.stat().st_size for d in range(args.days) for sub in ("stats", "sessions", "results.parquet", "dead_letter")
                 for p in (work / f"audit{d}" / sub).rglob("*") if p.is_file()) / 1e6
        print(f"rollup without hashes: {bare_cpu:.1f} CPU s ({bare_wall:.1f} s); with / without: "
              f"{roll_cpu / bare_cpu:.3f} CPU, {roll_wall / bare_wall:.3f} wall; {mb:.1f} MB of run files hashed; "
              f"results.json identical: {same_bare}", flush=True)
        # the hashing alone, not a child's imports: the roll-up's check of the daily audits, then sealing them again
        alone = ("import sys, time; from fair_forge_beam.rollup import check_sealed, load_manifests, seal_manifest; "
                 "ms = load_manifests(sys.argv[1:]); t = time.process_time(); "
                 "[check_sealed(d, m) for d, m in zip(sys.argv[1:], ms)]; c = time.process_time(); "
                 "[seal_manifest(d) for d in sys.argv[1:]]; print(c - t, time.process_time() - c)")
        timed([sys.executable, "-c", alone, *[str(work / f"audit{d}") for d in range(args.days)]], work / "hashes.log")
        check_cpu, seal_cpu = map(float, (work / "hashes.log").read_text().split()[-2:])
        print(f"the check of the {args.days} daily audits alone: {check_cpu:.2f} CPU s ({check_cpu / roll_cpu:.3f} of the "
              f"roll-up's CPU); sealing them again: {seal_cpu:.2f} CPU s ({seal_cpu / args.days:.2f} per audit; a daily "
              f"audit took {sum(audits_cpu_list) / len(audits_cpu_list) if audits_cpu_list else float('nan'):.1f} CPU s); "
              f"load average {os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
