"""The main job: read conversations, run metrics, write results.

    python -m pipelines.audit --output out/ --mode bayesian
    fair-forge-beam --input 'data/*.jsonl' --metrics humanity --mode frequentist --output out/

Without ``--input`` it reads the example data shipped inside the package (the original
library's MIT examples and a slice of Anthropic's MIT hh-rlhf harmless test conversations).
Unknown ``--flags`` are Beam pipeline options (``--runner``, ``--direct_num_workers``, ...);
the runner defaults to ``FnApiRunner`` in-memory.

Writes to ``--output``: ``results.json`` (summary, slice and session aggregates; identical for
the same input and seed on every runner), ``results.parquet`` (one row per scored
interaction), ``dead_letter.jsonl`` (every rejected record with stage, reason and the original
record), ``data_quality.jsonl`` (warnings), ``run_info.json`` (runner, versions, timing, judge
counters) and ``report.html`` (the self-contained audit report; ``--no-report`` skips it). With
``--compare RUN_DIR`` the report gets a comparison with that earlier run, also written as
``comparison.json``.
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import logging
import os
import sys
import time
from collections import Counter
from typing import Optional, Sequence

log = logging.getLogger("fair_forge_beam.audit")


class _LazyFileSystems:
    """Beam's FileSystems, imported on first use (keeps ``--help`` fast)."""

    def __getattr__(self, name):
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems as _fs

        return getattr(_fs, name)


FileSystems = _LazyFileSystems()


OUTPUT_FILES = ("results.json", "results.parquet", "dead_letter.jsonl", "data_quality.jsonl", "run_info.json",
                "report.html", "comparison.json")


def unknown_beam_options(args: Sequence[str]) -> list[str]:
    """The ``--flags`` in ``args`` that no Beam ``PipelineOptions`` class defines."""
    from apache_beam.options.pipeline_options import PipelineOptions

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    seen, stack = set(), list(PipelineOptions.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        try:
            cls._add_argparse_args(parser)
        except argparse.ArgumentError:
            pass  # an option registered twice by two classes
    _, rest = parser.parse_known_args(list(args))
    return [a for a in rest if a.startswith("-")]


def default_inputs() -> list[str]:
    base = importlib.resources.files("fair_forge_beam").joinpath("data/examples")
    return [str(base.joinpath("fair_forge_examples.json")), str(base.joinpath("hh_rlhf_harmless_test_slice.jsonl"))]


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.metrics.registry import METRICS

    p = argparse.ArgumentParser(
        prog="fair-forge-beam",
        description="Audit AI-assistant conversations (fairness, safety, quality metrics) as an Apache Beam pipeline. "
        "Unknown --options are passed to Beam (e.g. --runner, --direct_num_workers).",
        allow_abbrev=False,  # "--mod bayesian" is a usage error, not a silent "--mode"
    )
    p.add_argument("--input", action="append", metavar="GLOB",
                   help="input file pattern (.json, .jsonl, .ndjson, .parquet; .gz for JSON); repeatable. "
                        "Default: the example data shipped with the package")
    p.add_argument("--input-format", default="auto", choices=["auto", "json", "jsonl", "parquet"])
    p.add_argument("--metrics", default="humanity",
                   help=f"comma-separated metrics to run (available: {', '.join(sorted(METRICS))}; default humanity)")
    p.add_argument("--mode", default="frequentist", choices=["frequentist", "bayesian"], help="statistical mode")
    p.add_argument("--seed", type=int, default=42, help="seed of every keyed random stream (Bayesian mode)")
    p.add_argument("--mc-samples", type=int, default=5000, help="Monte-Carlo draws / bootstrap replicates")
    p.add_argument("--ci-level", type=float, default=0.95, help="credible-interval level")
    p.add_argument("--output", default="fair_forge_output", help="output folder (created if missing)")
    p.add_argument("--slice-bootstrap", default="buckets", choices=["buckets", "gamma"],
                   help="Bayesian slice intervals: sessions pooled in hash buckets (fast, default) or per-session "
                        "Gamma(1) weights (mc_samples draws per session)")
    p.add_argument("--emotion-lexicon-csv", help="NRC-format multi-language CSV for Humanity instead of the nrclex copy")
    p.add_argument("--group-extractor", default="embedding", choices=["embedding", "keyword"],
                   help="Toxicity group detection: MiniLM embeddings vs the shipped group prototypes (default) or "
                        "keyword lists (no embedder; no clustering)")
    p.add_argument("--toxicity-level", default="inclusive", choices=["inclusive", "conservative"],
                   help="HurtLex level filter for Toxicity (inclusive = all entries, as upstream)")
    p.add_argument("--no-clustering", action="store_true", help="skip Toxicity's UMAP + HDBSCAN cluster profiling")
    p.add_argument("--cluster-points", metavar="PATH",
                   help="write Toxicity's per-answer embeddings, 2-D coordinates and cluster labels to this Parquet file")
    j = p.add_argument_group("LLM judge and guardian (metrics context, conversational, bias)")
    j.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge, e.g. http://localhost:8000/v1")
    j.add_argument("--judge-model", help="judge model name as the endpoint knows it")
    j.add_argument("--judge-api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the judge's API key (never logged or written)")
    j.add_argument("--judge-cache", help="SQLite cache of judge/guardian answers (default $FAIR_FORGE_JUDGE_CACHE or "
                                         "the user cache folder); a re-run makes no repeated calls")
    j.add_argument("--judge-max-concurrency", type=int, help="concurrent requests per worker (16)")
    j.add_argument("--judge-requests-per-minute", type=float, help="request-rate limit per worker")
    j.add_argument("--guardian-base-url", help="OpenAI-compatible endpoint of the guardian model (metric bias)")
    j.add_argument("--guardian-model", help="guardian model name, e.g. llama-guard3:8b")
    j.add_argument("--guardian-kind", default="llama_guard", choices=["llama_guard", "granite_guardian"],
                   help="prompt convention of the guardian")
    j.add_argument("--guardian-api-key-env", default="OPENAI_API_KEY", help="environment variable holding its API key")
    r = p.add_argument_group("report")
    r.add_argument("--no-report", action="store_true", help="do not write report.html")
    r.add_argument("--compare", metavar="RUN_DIR",
                   help="compare this run with an earlier run's output folder (its results.json): a comparison "
                        "section in report.html and comparison.json")
    r.add_argument("--inconclusive-width", type=float, default=0.2,
                   help="flag estimates whose interval is wider than this (0-1 scale) as inconclusive (default 0.2)")
    p.add_argument("--quiet", action="store_true", help="do not print the summary table")
    return p


def _mode(args):
    from fair_forge_beam.statistical import BayesianMode, FrequentistMode

    if args.mode == "bayesian":
        return BayesianMode(mc_samples=args.mc_samples, ci_level=args.ci_level, rng_seed=args.seed)
    return FrequentistMode()


def _get(record: dict, path: str):
    """``record["a"]["b"]`` for the dotted column name ``"a.b"`` (``None`` when missing)."""
    for part in path.split("."):
        if not isinstance(record, dict):
            return None
        record = record.get(part)
    return record


def _fmt(est: Optional[dict]) -> str:
    if not est or est.get("mean") is None:
        return "n/a"
    if est.get("ci_low") is None:
        return f"{est['mean']:.4f}"
    return f"{est['mean']:.4f} [{est['ci_low']:.4f}, {est['ci_high']:.4f}]"


def run(argv: Optional[Sequence[str]] = None) -> dict:
    """Run the audit; returns the content of ``results.json``. Raises ``SystemExit(2)`` on bad arguments."""
    from fair_forge_beam._beam import beam
    from apache_beam.options.pipeline_options import StandardOptions

    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.metrics.registry import build_metric, interaction_parquet_fields
    from fair_forge_beam.reports.results import assemble_results, write_outputs
    from fair_forge_beam.runner import pipeline_options

    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    unknown = unknown_beam_options(beam_args)
    if unknown:
        parser.error(
            f"unrecognised option(s) {' '.join(unknown)}: not an option of this job (see --help) nor a Beam pipeline option"
        )
    if args.emotion_lexicon_csv and not FileSystems.exists(args.emotion_lexicon_csv):
        parser.error(f"--emotion-lexicon-csv: file not found: {args.emotion_lexicon_csv}")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not metrics:
        parser.error("--metrics is empty")
    inputs = args.input or default_inputs()
    if not 0 < args.inconclusive_width <= 1:
        parser.error(f"--inconclusive-width must be in (0, 1], got {args.inconclusive_width}")
    baseline = None
    if args.compare:
        from fair_forge_beam.reports.load import read_results

        try:  # read before this run's output folder is cleaned (it may be the same folder)
            baseline = read_results(args.compare)
        except (FileNotFoundError, ValueError) as exc:
            parser.error(f"--compare: {exc}")
    try:
        mode = _mode(args)
        metric_options = {
            "emotion_lexicon_csv": args.emotion_lexicon_csv,
            "slice_bootstrap": args.slice_bootstrap,
            "group_extractor": args.group_extractor,
            "toxicity_level": args.toxicity_level,
            "clustering": False if (args.no_clustering or args.group_extractor == "keyword") else None,
            "cluster_points_path": args.cluster_points,
            **{k: getattr(args, k) for k in (
                "judge_base_url", "judge_model", "judge_api_key_env", "judge_cache", "judge_max_concurrency",
                "judge_requests_per_minute", "guardian_base_url", "guardian_model", "guardian_kind", "guardian_api_key_env")},
        }
        transforms = {m: build_metric(m, mode, metric_options) for m in metrics}
        reader = ReadInteractions(inputs, file_format=args.input_format)
    except ValueError as exc:
        parser.error(str(exc))
    options = pipeline_options(beam_args)
    runner = options.view_as(StandardOptions).runner
    out = args.output.rstrip("/") or "."
    parts = f"{out}/_parts"
    if os.path.isfile(out):
        parser.error(f"--output must be a folder, but {out} is a file")
    if not FileSystems.exists(out):
        FileSystems.mkdirs(out)
    # never mix this run's outputs with a previous run's (a stale results.json, leftover parts)
    stale = [f"{out}/{n}" for n in OUTPUT_FILES if FileSystems.exists(f"{out}/{n}")]
    if FileSystems.exists(parts):
        stale.append(parts)
    if stale:
        FileSystems.delete(stale)
    started = time.time()
    log.info("reading %s; metrics %s; %s; runner %s", inputs, metrics, mode, runner)
    with beam.Pipeline(options=options) as p:
        read = p | "Read" >> reader
        results = {m: read["interactions"] | f"Metric_{m}" >> t for m, t in transforms.items()}
        write_outputs(read, results, out, parts, interaction_parquet_fields(metrics))
    elapsed = time.time() - started
    info = {"runner": str(runner), "seconds": round(elapsed, 3), "argv": list(argv or sys.argv[1:])}
    counters = _judge_counters(getattr(p, "result", None))
    if counters:
        info["judge_counters"] = counters
    doc = assemble_results(
        out, parts, metrics=metrics, mode=mode, inputs=inputs, transforms=transforms, run_info=info,
    )
    written = [n for n in OUTPUT_FILES if n not in ("report.html", "comparison.json")]
    if not args.no_report:
        from fair_forge_beam.reports.html import write_report

        write_report(out, compare_with=baseline, inconclusive_width=args.inconclusive_width, doc=doc)
        written += ["report.html"] + (["comparison.json"] if baseline is not None else [])
    elif baseline is not None:
        from fair_forge_beam.reports.compare import compare_runs

        with FileSystems.create(f"{out}/comparison.json") as f:
            f.write(json.dumps(compare_runs(doc, baseline), indent=2, ensure_ascii=False).encode("utf-8"))
        written.append("comparison.json")
    if not args.quiet:
        print(summary_table(doc, out, written))
    return doc


def _judge_counters(result) -> dict:
    """Judge and guardian Beam counters of the finished pipeline (only roles that were used)."""
    if result is None:
        return {}
    from fair_forge_beam.components.judge import judge_counters

    out = {}
    for role in ("judge", "guardian"):
        try:
            c = judge_counters(result, f"fair_forge_beam.{role}")
        except Exception:  # noqa: BLE001 - a runner without metrics support: counters not recorded
            continue
        if any(c.values()):
            out[role] = c
    return out


def summary_table(doc: dict, out: str, files: Sequence[str] = OUTPUT_FILES[:5]) -> str:
    s = doc["summary"]
    lines = [
        f"fair_forge_beam audit: mode {doc['config']['mode']}"
        + (f", seed {doc['config']['seed']}, {doc['config']['mc_samples']} draws" if doc["config"]["mode"] == "bayesian" else ""),
        f"records: {s['interactions_read']} interactions read, {s['rejected_at_read']} rejected at read, "
        f"{s['data_quality_warnings']} data-quality warnings",
    ]
    for name, m in doc["metrics"].items():
        ms = s["metrics"][name]
        reasons = "; ".join(f"{r}: {c}" for r, c in ms["not_scored_reasons"].items())
        lines.append(f"{name}: {ms['scored']} interactions scored, {ms['not_scored']} not scored" + (f" ({reasons})" if reasons else ""))
        heads = m.get("headline_columns", [])
        width = max([len(r["slice"]) for r in m["slices"]] + [10])
        lines.append(
            "  " + "slice".ljust(width) + "  " + "n".rjust(7) + "  " + "sessions".rjust(8) + "".join(f"  {h.rsplit('.', 1)[-1]:<34}" for h in heads)
        )
        for r in m["slices"]:
            vals = "".join(f"  {_fmt(_get(r, h)):<34}" for h in heads)
            lines.append(
                "  " + r["slice"].ljust(width) + "  " + str(r["n_interactions"]).rjust(7) + "  "
                + str(r.get("n_sessions", "")).rjust(8) + vals
            )
    lines.append("outputs: " + ", ".join(f"{out}/{n}" for n in files))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda r: "apitools not found" not in r.getMessage())
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
