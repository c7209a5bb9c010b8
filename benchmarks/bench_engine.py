"""Main-job benchmark against Beam's own floor (issue 14's targets; not a test).

Builds a deterministic JSONL file of synthetic sessions (``--n`` interactions, default
100,000), then times, on the same runner (``FnApiRunner`` in-memory unless Beam options after
``--`` say otherwise), **each run in a process of its own, as a user runs it**:

(a) **floor** — the smallest Beam pipeline doing the same bulk work as the audit's reading:
    read the file line by line, ``json.loads`` each line, explode the conversation into
    interactions and count them per assistant (``CombinePerKey``); its process's CPU seconds
    (interpreter, Beam's import and the pipeline);
(w) **work alone** — the audit's work without Beam on the same file (:func:`run_work_alone`):
    the reader's parse and validation, Humanity's scorer and Toxicity's scorer (its classifier
    in calls of ``--work-batch`` texts), CPU seconds of those parts only (building the metrics
    and loading their models are left out; issue 26's "work alone"), in a process of its own;
(b) **frequentist** — the user's command ``python -m pipelines.audit --input FILE --metrics
    humanity,toxicity --group-extractor keyword --mode frequentist --no-report --quiet --output
    DIR``, its process's CPU seconds (``getrusage(RUSAGE_CHILDREN)``: the command and every
    process it waited for) from start to exit;
(c) **bayesian** — the same with ``--mode bayesian``.

Why processes (2026-12-06, docs/performance.md "2026-12-06 (later): in one process or one per
run"): this script used to run all of them in its own process, one after another, and the
later runs inherited what the earlier ones left: the imports and Beam's per-process memos paid,
and glibc's heap-trimming threshold raised by the floor and the work alone before
``fair_forge_beam._malloc.tune_malloc`` fixed the mmap threshold — which a user's command, where
``tune_malloc`` runs first, never had. ``--in-process`` keeps that old way, for comparison only.
Bytecode is written for every module before the timed runs (``PYTHONDONTWRITEBYTECODE`` is
dropped from the children's environment and one uncounted run of each on a small file compiles
what it imports), so every timed run imports alike.

It prints the absolute wall-clock seconds of each run, its CPU seconds (on a machine shared with
other jobs the wall clock follows the load, CPU time much less) and the ratios of issue 26, on
both clocks: audit/work alone (frequentist; target at most 1.5x CPU), bayesian/frequentist
(target at most 1.2x CPU) and, as before, audit/floor. With ``--repeat R`` each of (a)-(c) runs R
times, interleaved, and the ratios use the fastest run of each (the least disturbed by other
processes on a shared machine); every single time is printed too, and the load average.

    python benchmarks/bench_engine.py                       # 100k interactions, once
    python benchmarks/bench_engine.py --n 20000 --repeat 3
    python benchmarks/bench_engine.py --data /tmp/bench.jsonl --keep   # reuse / keep the file
    python benchmarks/bench_engine.py -- --direct_num_workers=2 --direct_running_mode=multi_processing

Synthetic data (seeded, ``--seed``): sessions of 1-6 turns (mean ~2.5, like the shipped hh-rlhf
slice), 20 assistants, two languages labels (all text English), queries of 5-15 words and
answers of 12-60 words drawn fresh per answer (so per-text caches get no unrealistic hits) from
a vocabulary of function words, NRC emotion words (as Humanity scores them), English HurtLex
lemmas (``fair_forge_beam/data/hurtlex/hurtlex_EN.tsv``, HurtLex, CC BY-SA 4.0: see the NOTICE
there) and group keywords (``fair_forge_beam/data/groups/group_keywords.json``, adapted from
HolisticBias, CC BY-SA 4.0); a reference answer for a third of the interactions. Word rates:
20 % emotion words, 4 % HurtLex lemmas, 0.35 % group keywords — so about 12 % of the answers
name a group (11 % of the answers of the shipped hh-rlhf slice do, by the keyword extractor),
and only those are given to VADER.
"""
from __future__ import annotations

import argparse
import csv
import resource
import importlib.resources
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: import this tree
    sys.path.insert(0, str(ROOT))

TURN_WEIGHTS = [30, 25, 20, 13, 8, 4]  # P(1..6 turns): mean ≈ 2.5
N_ASSISTANTS = 20

FUNCTION_WORDS = (
    "the a of to and in is it you that for on with as this be are at or from by your can will not "
    "we they he she was were have has had do does did but if so because about which who what when "
    "account order number please help thanks information details question answer system time".split()
)
EMOTION_WORDS = (
    "happy joy love trust hope angry hate fear afraid sad cry grief surprise shock disgust awful "
    "wonderful good bad terrible pleasant friend enemy danger safe calm worry glad upset proud".split()
)


def _data_file(rel: str):
    return importlib.resources.files("fair_forge_beam").joinpath(rel)


def vocabularies() -> tuple[list[str], list[str]]:
    """(English HurtLex single-word lemmas, group keywords), sorted: the same lists every run."""
    with _data_file("data/hurtlex/hurtlex_EN.tsv").open(encoding="utf-8") as f:
        hurt = sorted({r["lemma"] for r in csv.DictReader(f, delimiter="\t") if r["lemma"].isalpha()})
    groups = json.loads(_data_file("data/groups/group_keywords.json").read_text(encoding="utf-8"))["groups"]
    keywords = sorted({w for words in groups.values() for w in words})
    return hurt, keywords


def _sentence(rng: random.Random, lo: int, hi: int, hurt: list[str], keywords: list[str]) -> str:
    words = []
    for _ in range(rng.randint(lo, hi)):
        u = rng.random()
        if u < 0.20:
            words.append(rng.choice(EMOTION_WORDS))
        elif u < 0.24:
            words.append(rng.choice(hurt))
        elif u < 0.2435:
            words.append(rng.choice(keywords))
        else:
            words.append(rng.choice(FUNCTION_WORDS))
    return " ".join(words).capitalize() + rng.choice(".!?")


def write_sessions(path: str, n: int, seed: int = 0) -> tuple[int, int]:
    """Write ``n`` interactions as JSONL sessions to ``path``; returns (interactions, sessions)."""
    hurt, keywords = vocabularies()
    rng = random.Random(seed)
    made = s = 0
    with open(path, "w", encoding="utf-8") as f:
        while made < n:
            turns = min(rng.choices(range(1, 7), TURN_WEIGHTS)[0], n - made)
            conv = [{"qa_id": f"q{t:02d}", "query": _sentence(rng, 5, 15, hurt, keywords),
                     "assistant": _sentence(rng, 12, 60, hurt, keywords),
                     "ground_truth_assistant": _sentence(rng, 12, 60, hurt, keywords) if rng.random() < 1 / 3 else None}
                    for t in range(turns)]
            rec = {"session_id": f"bench-{s:07d}", "assistant_id": f"assistant-{rng.randrange(N_ASSISTANTS):02d}",
                   "language": "english", "context": "", "conversation": conv}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            made += turns
            s += 1
    return made, s


def _explode(line: str):
    rec = json.loads(line)
    aid = rec["assistant_id"]
    for _ in rec["conversation"]:
        yield aid, 1


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children (worker processes)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def run_floor(path: str, out: str, beam_args: list[str]) -> tuple[float, int]:
    """(seconds, interactions counted) of the floor pipeline (the count is written to ``out``)."""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.beam_pipeline import pipeline_options

    start = time.perf_counter()
    with beam.Pipeline(options=pipeline_options(beam_args)) as p:
        (p | "Read" >> beam.io.ReadFromText(path)
           | "Explode" >> beam.FlatMap(_explode)
           | "CountPerAssistant" >> beam.CombinePerKey(sum)
           | "Total" >> beam.Map(lambda kv: kv[1])
           | "Sum" >> beam.CombineGlobally(sum)
           | "Write" >> beam.io.WriteToText(out, num_shards=1, shard_name_template=""))
    seconds = time.perf_counter() - start
    return seconds, int(Path(out).read_text().strip() or -1)


def run_work_alone(path: str, batch: int) -> tuple[float, dict]:
    """The work of the frequentist audit without Beam, on the same file: (seconds, CPU seconds per part).

    Parts, each timed on its own (CPU seconds of this process):

    * ``read`` — every line through the reader's own parse and validation
      (``io.read._ParseRecord``: JSON edge checks, pydantic models of the session header and of
      each turn) and each session's turn numbering (``_OrderStreamed``, the reader's grouping
      done here with a dict);
    * ``humanity`` — Humanity's scorer (``spec().scorer``, NRC lexicon) on every interaction;
    * ``toxicity`` — Toxicity's scorer (HurtLex, keyword groups, VADER, the profanity-check
      classifier) on every interaction, in batches of ``batch`` (each library's batch API:
      the classifier scores ``batch`` texts per call).

    The metrics are built as the main job builds them (``--group-extractor keyword``).
    """
    from fair_forge_beam.io import read as rd
    from fair_forge_beam.metrics.registry import build_metric, statistical_mode
    from pipelines.audit import build_parser

    args = build_parser().parse_args(["--metrics", "humanity,toxicity", "--group-extractor", "keyword",
                                      "--mode", "frequentist"])
    mode = statistical_mode(args)
    options = {**vars(args), "clustering": False, "slices": None}
    scorers = {m: build_metric(m, mode, options).spec().scorer for m in ("humanity", "toxicity")}
    for s in scorers.values():
        s.setup()
    parts: dict = {}
    wall = time.perf_counter()  # from here: building the metrics and loading their models is not the work
    c0 = cpu_seconds()
    parse, order = rd._ParseRecord(), rd._OrderStreamed()
    groups: dict = {}
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            for out in parse.process((path, i, line)):
                if isinstance(out, beam_tagged()) and out.tag == rd._STREAMED:
                    key, value = out.value
                    groups.setdefault(key, []).append(value)
    interactions = [x for kv in groups.items() for x in order.process(kv) if not isinstance(x, beam_tagged())]
    del groups
    parts["read"] = cpu_seconds() - c0
    c0 = cpu_seconds()
    n_h = sum(1 for x in interactions for _ in scorers["humanity"].process(x))
    parts["humanity"] = cpu_seconds() - c0
    c0 = cpu_seconds()
    tox = scorers["toxicity"]
    n_t = sum(len(tox.process(interactions[i:i + batch])) for i in range(0, len(interactions), batch))
    parts["toxicity"] = cpu_seconds() - c0
    if not (n_h == n_t == len(interactions)):
        raise SystemExit(f"work alone: {len(interactions)} interactions, {n_h} humanity and {n_t} toxicity outputs")
    return time.perf_counter() - wall, parts


def beam_tagged():
    from fair_forge_beam._beam import beam

    return beam.pvalue.TaggedOutput


def audit_args(path: str, mode: str, out: str, beam_args: list[str]) -> list[str]:
    """The audit's arguments: ``pipelines.audit`` on ``path`` in ``mode``, outputs in ``out``."""
    return ["--input", path, "--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--mode", mode,
            "--no-report", "--quiet", "--output", out, *beam_args]


def audit_command(path: str, mode: str, out: str, beam_args: list[str]) -> list[str]:
    """The user's command for :func:`audit_args`: this interpreter running ``-m pipelines.audit``."""
    return [sys.executable, "-m", "pipelines.audit", *audit_args(path, mode, out, beam_args)]


def run_audit(path: str, mode: str, out: str, beam_args: list[str]) -> float:
    """One audit in this process (``--in-process`` only): its seconds."""
    from pipelines.audit import run

    start = time.perf_counter()
    run(audit_args(path, mode, out, beam_args))
    return time.perf_counter() - start


def child_env() -> dict:
    """The environment of a timed child: this checkout first on ``PYTHONPATH`` (its code is the one
    imported) and bytecode written (``PYTHONDONTWRITEBYTECODE`` dropped), so that after the warm-up
    every run imports compiled modules alike."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_child(cmd: list[str]) -> tuple[float, float, str]:
    """``(wall seconds, CPU seconds, stdout)`` of the process ``cmd`` run from this checkout: CPU is
    the growth of ``getrusage(RUSAGE_CHILDREN)`` (user + sys of it and of every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def _own_command(part: str, path: str, out: str, work_batch: int, beam_args: list[str]) -> list[str]:
    """This script run for one ``part`` (``floor`` or ``work``) in a process of its own."""
    return [sys.executable, str(Path(__file__).resolve()), "--part", part, "--data", path, "--part-output", out,
            "--work-batch", str(work_batch), "--", *beam_args]


def _last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def measure(part: str, path: str, work: str, work_batch: int, beam_args: list[str]) -> tuple[float, float, dict]:
    """``(wall seconds, CPU seconds, detail)`` of one run of ``part`` (``floor``, ``work alone``,
    ``frequentist`` or ``bayesian``), each in a process of its own: the audits are the user's
    command (:func:`audit_command`), the floor and the work alone this script with ``--part``.
    CPU seconds: the process's, but for the work alone the sum of its parts (building the
    scorers and loading the model are not the work)."""
    if part in ("frequentist", "bayesian"):
        out = os.path.join(work, f"out_{part}")
        shutil.rmtree(out, ignore_errors=True)  # every run writes a new folder (no replacing of a previous one)
        wall, cpu, _ = run_child(audit_command(path, part, out, beam_args))
        return wall, cpu, {}
    wall, cpu, stdout = run_child(_own_command("floor" if part == "floor" else "work", path,
                                               os.path.join(work, "floor_count.txt"), work_batch, beam_args))
    detail = _last_json(stdout)
    if part == "floor":
        return wall, cpu, detail
    return detail["seconds"], sum(detail["parts"].values()), detail


def _run_part(args, beam_args: list[str]) -> int:
    """``--part``: one floor or work-alone run in this process; prints its result as one JSON line."""
    import logging

    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    if args.part == "floor":
        seconds, counted = run_floor(args.data, args.part_output, beam_args)
        print(json.dumps({"seconds": seconds, "counted": counted}))
    else:
        seconds, parts = run_work_alone(args.data, args.work_batch)
        print(json.dumps({"seconds": seconds, "parts": parts}))
    return 0


PARTS = ("floor", "work alone", "frequentist", "bayesian")


def _in_process(path: str, work: str, work_batch: int, beam_args: list[str]):
    """The old way (``--in-process``): every part in this process, one after another; for comparison only."""
    def run(part: str) -> tuple[float, float, dict]:
        c0 = cpu_seconds()
        if part == "floor":
            t, counted = run_floor(path, os.path.join(work, "floor_count.txt"), beam_args)
            return t, cpu_seconds() - c0, {"counted": counted}
        if part == "work alone":
            t, parts = run_work_alone(path, work_batch)
            return t, sum(parts.values()), {"parts": parts}
        t = run_audit(path, part, os.path.join(work, f"out_{part}"), beam_args)
        return t, cpu_seconds() - c0, {}

    # imports outside the timings: every run pays the same pipeline start, none pays module loading
    import pipelines.audit  # noqa: F401
    import fair_forge_beam.metrics.humanity  # noqa: F401
    import fair_forge_beam.metrics.toxicity  # noqa: F401
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="interactions in the synthetic file (100000)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each pipeline, interleaved (1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (0)")
    ap.add_argument("--data", help="path of the JSONL file (default: a temporary file); reused when it exists "
                                   "and was made with the same --n and --seed")
    ap.add_argument("--work-batch", type=int, default=4096,
                    help="interactions per call of Toxicity's scorer in the work-alone figure (4096)")
    ap.add_argument("--keep", action="store_true", help="keep the data file and the audit outputs")
    ap.add_argument("--in-process", action="store_true",
                    help="run everything in this process, one after another (the old way: later runs inherit the "
                         "earlier ones' imports and heap; for comparison only)")
    ap.add_argument("--part", choices=("floor", "work"), help=argparse.SUPPRESS)  # one run in a child process
    ap.add_argument("--part-output", help=argparse.SUPPRESS)
    args, beam_args = ap.parse_known_args(argv)
    beam_args = [a for a in beam_args if a != "--"]
    if args.part:
        return _run_part(args, beam_args)

    import logging

    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    work = tempfile.mkdtemp(prefix="bench_engine_")
    path = args.data or os.path.join(work, f"sessions_{args.n}_{args.seed}.jsonl")
    stamp = Path(path + ".made")
    want = f"{args.n} {args.seed}"
    if not (os.path.exists(path) and stamp.exists() and stamp.read_text() == want):
        t0 = time.perf_counter()
        n_inter, n_sess = write_sessions(path, args.n, args.seed)
        stamp.write_text(want)
        print(f"data: {path}: {n_inter} interactions in {n_sess} sessions, written in {time.perf_counter() - t0:.1f} s")
    else:
        print(f"data: {path} (reused)")
    if args.in_process:
        run = _in_process(path, work, args.work_batch, beam_args)
        how = "all in this process, one after another (--in-process)"
    else:
        def run(part: str) -> tuple[float, float, dict]:
            return measure(part, path, work, args.work_batch, beam_args)

        # uncounted: every part once on a small file, so every module each imports is compiled and cached
        small = os.path.join(work, "warmup.jsonl")
        write_sessions(small, min(args.n, 300), args.seed)
        warm = sum(measure(part, small, work, args.work_batch, beam_args)[1] for part in PARTS)
        print(f"warm-up (each part once on {min(args.n, 300)} interactions, not counted): {warm:.2f} CPU s", flush=True)
        how = "each in a process of its own (the audits: python -m pipelines.audit)"

    times: dict[str, list[float]] = {k: [] for k in PARTS}
    cpu: dict[str, list[float]] = {k: [] for k in times}
    loads: list[float] = []
    work_parts: list[dict] = []
    for r in range(args.repeat):
        for part in PARTS:
            loads.append(os.getloadavg()[0])
            t, c, detail = run(part)
            if part == "floor" and detail["counted"] != args.n:
                raise SystemExit(f"floor counted {detail['counted']} interactions, expected {args.n}")
            if part == "work alone":
                work_parts.append(detail["parts"])
            times[part].append(t)
            cpu[part].append(c)
        print(f"run {r + 1}: " + ", ".join(f"{k} {times[k][-1]:.2f} s ({cpu[k][-1]:.2f} CPU s)" for k in times), flush=True)
    best = {k: min(v) for k, v in times.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    best_parts = {k: min(p[k] for p in work_parts) for k in work_parts[0]}
    per = 1e6 / args.n
    print(f"n = {args.n} interactions, runner args {beam_args or '(FnApiRunner in-memory)'}, "
          f"{args.repeat} run(s), {how}, fastest of each (wall clock; CPU seconds); "
          f"load average {min(loads):.2f}-{max(loads):.2f} at the runs' starts, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} now:")
    for k in PARTS:
        print(f"  {k:<12} {best[k]:8.2f} s  ({args.n / best[k]:,.0f} interactions/s)  {best_cpu[k]:8.2f} CPU s"
              f"  ({best_cpu[k] * per:,.1f} CPU µs per interaction)")
    print("  work alone, CPU µs per interaction: " + ", ".join(f"{k} {v * per:.1f}" for k, v in best_parts.items())
          + f" (toxicity in batches of {args.work_batch})")
    print(f"  audit / work alone (frequentist): {best_cpu['frequentist'] / best_cpu['work alone']:.2f}x CPU, "
          f"{best['frequentist'] / best['work alone']:.2f}x wall  (target: at most 1.5x CPU)")
    print(f"  bayesian / frequentist:           {best_cpu['bayesian'] / best_cpu['frequentist']:.2f}x CPU, "
          f"{best['bayesian'] / best['frequentist']:.2f}x wall  (target: at most 1.2x CPU)")
    print(f"  audit / floor (frequentist):      {best_cpu['frequentist'] / best_cpu['floor']:.2f}x CPU, "
          f"{best['frequentist'] / best['floor']:.2f}x wall")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)  # the data file too, unless --data put it elsewhere
    else:
        print(f"kept: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
