"""The main job: read conversations, run metrics, write results.

    python -m pipelines.audit --output out/ --mode bayesian
    fair-forge-beam --input 'data/*.jsonl' --metrics humanity --mode frequentist --output out/

Without ``--input`` it reads the example data shipped inside the package (the original
library's MIT examples and a slice of Anthropic's MIT hh-rlhf harmless test conversations).
Unknown ``--flags`` are Beam pipeline options (``--runner``, ``--direct_num_workers``, ...);
the runner defaults to ``FnApiRunner`` in-memory.

Writes to ``--output``, from the pipeline itself (layout: ``fair_forge_beam.reports.results``):
``results.json`` (config, summary, slice aggregates; identical for the same input and seed on
every runner) and folders of shards: ``results.parquet/`` (one row per scored interaction),
``sessions/<metric>/`` (session aggregates, Parquet), ``dead_letter/`` (every rejected record
with stage, reason and the original record) and ``data_quality/`` (warnings). After a local run
the launcher reads back ``results.json`` only and writes ``run_info.json`` (runner, versions,
timing, judge counters) and ``report.html`` (the self-contained audit report; ``--no-report``
skips it). With
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

from fair_forge_beam.reports.output_folder import OUTPUT_FILES, STALE_OUTPUTS, prepare_output_folder  # noqa: F401
from fair_forge_beam.reports.summary import (  # noqa: F401 - names importable from here as before
    dotted_get as _get, format_estimate as _fmt, metric_summary_lines, printable as _printable, summary_table)

log = logging.getLogger("fair_forge_beam.audit")


class _LazyFileSystems:
    """Beam's FileSystems, imported on first use (keeps ``--help`` fast)."""

    def __getattr__(self, name):
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems as _fs

        return getattr(_fs, name)


FileSystems = _LazyFileSystems()


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
    p.add_argument("--input-format", default="auto", choices=["auto", "json", "jsonl", "parquet", "tau_bench", "bfcl"],
                   help="tau_bench / bfcl: read τ-bench trajectories or BFCL multi-turn files with the loaders of "
                        "fair_forge_beam.io.agentic_sources")
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
    p.add_argument("--toxicity-group-set", default="declared", choices=["declared", "observed"],
                   help="Toxicity DR's group set, in both modes: every declared group, zero counts included (default), "
                        "or only the groups detected (the original's Bayesian DR)")
    p.add_argument("--no-clustering", action="store_true", help="skip Toxicity's UMAP + HDBSCAN cluster profiling")
    p.add_argument("--cluster-points", metavar="PATH",
                   help="write Toxicity's per-answer embeddings, 2-D coordinates and cluster labels to this Parquet file")
    a = p.add_argument_group("Agentic (pass@k, pass^k, tool correctness)")
    a.add_argument("--agentic-k", type=int, default=3, help="attempts k of pass@k / pass^k (default 3)")
    a.add_argument("--agentic-correctness", choices=["judge", "label", "tools"],
                   help="correctness of an interaction: LLM judge, a label in the data, or tool correctness "
                        "(default: judge when --judge-base-url is given, else label)")
    a.add_argument("--agentic-label-field", default="agentic.reward",
                   help="dotted path of the correctness label (default agentic.reward: τ-bench's reward)")
    a.add_argument("--agentic-task-field", default="agentic.task_id",
                   help="dotted path of the task id grouping repeated trials (default agentic.task_id)")
    a.add_argument("--agentic-threshold", type=float, default=0.7, help="correct when score >= threshold (0.7)")
    j = p.add_argument_group("LLM judge and guardian (metrics context, conversational, bias)")
    j.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the judge, e.g. http://localhost:8000/v1")
    j.add_argument("--judge-model", help="judge model name as the endpoint knows it")
    j.add_argument("--judge-api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the judge's API key (never logged or written)")
    j.add_argument("--judge-cache", help="SQLite cache of judge/guardian answers (default $FAIR_FORGE_JUDGE_CACHE or "
                                         "the user cache folder); a re-run makes no repeated calls")
    j.add_argument("--judge-max-concurrency", type=int, help="concurrent requests per worker (16)")
    j.add_argument("--judge-requests-per-minute", type=float, help="request-rate limit per worker")
    j.add_argument("--judge-timeout", type=float, metavar="SECONDS",
                   help="seconds per HTTP request to the judge / generator (60); with --judge-retries it bounds "
                        "how long a hanging endpoint can hold a batch")
    j.add_argument("--judge-retries", type=int, metavar="N",
                   help="retries per HTTP request by the client, for 429/5xx/time-outs (3; 0 = none)")
    j.add_argument("--guardian-base-url", help="OpenAI-compatible endpoint of the guardian model (metric bias)")
    j.add_argument("--guardian-model", help="guardian model name, e.g. llama-guard3:8b")
    j.add_argument("--guardian-kind", default="llama_guard", choices=["llama_guard", "granite_guardian"],
                   help="prompt convention of the guardian")
    j.add_argument("--guardian-api-key-env", default="OPENAI_API_KEY", help="environment variable holding its API key")
    j.add_argument("--guardian-logprobs", action="store_true",
                   help="ask the guardian for log-probabilities: certainty = P(unsafe label); without them certainty is null "
                        "(not measured)")
    r = p.add_argument_group("Regulatory (uses the --judge-* options)")
    r.add_argument("--regulatory-corpus", metavar="PATH",
                   help="policy corpus: a folder of .md/.txt files, one file, or a shipped corpus name "
                        "('airline' = the tau-bench airline policy, default; 'callcenter')")
    r.add_argument("--chunk-size", type=int, help="corpus chunk size in characters (1000)")
    r.add_argument("--chunk-overlap", type=int, help="characters shared by neighbouring chunks (100; < chunk size)")
    r.add_argument("--regulatory-top-k", type=int, help="chunks kept per retrieval, for the query and the answer each (10)")
    r.add_argument("--regulatory-threshold", type=float, help="minimum cosine similarity of a retrieved chunk (0.3)")
    r.add_argument("--regulatory-embedder", default="minilm", choices=["minilm", "hashing"],
                   help="chunk/query embedder: all-MiniLM-L6-v2 (default) or the model-free hashing embedder")
    b = p.add_argument_group("BestOf (metric bestof; needs the --judge-* options)")
    b.add_argument("--bestof-mode", default="king", choices=["king", "all_pairs"],
                   help="king of the hill (N-1 sequential matches per block, as the original) or all pairs "
                        "(N(N-1)/2 parallel matches, Bradley-Terry ranking)")
    b.add_argument("--bestof-order", metavar="A,B,C",
                   help="declared contest order of assistant ids (others follow, sorted); default: sorted ids")
    b.add_argument("--bestof-block", default="session", choices=["session", "qa"],
                   help="compare whole conversations per session_id, or each question (session_id, qa_id)")
    b.add_argument("--bestof-criteria", help="extra judging criteria added to the BestOf rubric")
    v = p.add_argument_group("Vision and PromptEvaluator")
    v.add_argument("--similarity-embedder", default="minilm", choices=["minilm", "hashing"],
                   help="embedder of vision and prompt_evaluator: all-MiniLM-L6-v2 (default) or hashed tokens (no model)")
    v.add_argument("--vision-threshold", type=float, help="vision: similarity below which a frame is a hallucination (0.75)")
    v.add_argument("--seed-prompt", help="prompt_evaluator: the system prompt under test")
    v.add_argument("--seed-prompt-file", metavar="PATH", help="prompt_evaluator: read the system prompt from this file")
    v.add_argument("--prompt-k", type=int, help="prompt_evaluator: generations per query (10; must be >= 1)")
    v.add_argument("--prompt-tau", type=float, help="prompt_evaluator: cosine threshold for 'same meaning' (0.80)")
    v.add_argument("--prompt-jq-objective", help="prompt_evaluator: turn on judge quality (JQ) with these criteria; "
                                                 "the judge is --judge-* if given, else the generator")
    v.add_argument("--generator-base-url", help="prompt_evaluator: OpenAI-compatible endpoint that generates the answers "
                                                "(default: --judge-base-url)")
    v.add_argument("--generator-model", help="prompt_evaluator: generator model name (default: --judge-model)")
    v.add_argument("--generator-api-key-env", help="environment variable holding the generator's API key "
                                                   "(default: --judge-api-key-env)")
    s = p.add_argument_group("streaming sources and event-time windows (see fair_forge_beam.streaming)")
    s.add_argument("--window", metavar="SPEC",
                   help="per-window results: fixed:SIZE, sliding:SIZE,PERIOD or session:GAP (e.g. fixed:1h, "
                        "sliding:1h,5m, session:10m); writes <output>/windows/*.jsonl")
    s.add_argument("--early-firing", metavar="DURATION", help="early (speculative) panes every DURATION of processing time, e.g. 30s")
    s.add_argument("--allowed-lateness", metavar="DURATION", help="late elements update their window for DURATION after it closes, e.g. 10m")
    s.add_argument("--timestamp-field", default="timestamp",
                   help="interaction field holding the event time (epoch seconds or ISO 8601; default timestamp)")
    s.add_argument("--timestamp-policy", default="dead_letter", choices=["dead_letter", "processing_time"],
                   help="a record without a readable timestamp: reject it (default) or use the processing time")
    s.add_argument("--watch", metavar="GLOB", help="streaming: read new JSONL files appearing under GLOB")
    s.add_argument("--watch-interval", default="10s", metavar="DURATION", help="time between two matches of --watch")
    s.add_argument("--watch-stop-after", metavar="DURATION", help="stop watching after DURATION (default: never)")
    s.add_argument("--kafka-bootstrap-servers", metavar="HOST:PORT[,...]", help="streaming: Kafka brokers (ReadFromKafka)")
    s.add_argument("--kafka-topic", action="append", metavar="TOPIC", help="Kafka topic to read; repeatable")
    s.add_argument("--kafka-expansion-service", metavar="HOST:PORT", help="running Beam expansion service for ReadFromKafka")
    s.add_argument("--kafka-event-time", default="field", choices=["field", "message"],
                   help="Kafka event time: the payload's --timestamp-field (default) or the message timestamp")
    s.add_argument("--kafka-max-records", type=int, metavar="N",
                   help="read N Kafka records, then end (a bounded run: back-fills, tests)")
    s.add_argument("--pubsub-subscription", metavar="projects/P/subscriptions/S", help="streaming: Pub/Sub subscription")
    s.add_argument("--pubsub-topic", metavar="projects/P/topics/T", help="streaming: Pub/Sub topic")
    s.add_argument("--pubsub-timestamp-attribute", metavar="NAME", help="Pub/Sub attribute holding the event time")
    r = p.add_argument_group("report")
    r.add_argument("--no-report", action="store_true", help="do not write report.html")
    r.add_argument("--compare", metavar="RUN_DIR",
                   help="compare this run with an earlier run's output folder (its results.json): a comparison "
                        "section in report.html and comparison.json")
    r.add_argument("--inconclusive-width", type=float, default=0.2,
                   help="flag estimates whose interval is wider than this (0-1 scale) as inconclusive (default 0.2)")
    p.add_argument("--quiet", action="store_true", help="do not print the summary table")
    from fair_forge_beam.audit_config import add_audit_config_arguments

    add_audit_config_arguments(p)  # --config, --gate, --slices (scheduled audits)
    return p


def _mode(args):
    from fair_forge_beam.statistical import BayesianMode, FrequentistMode

    # built in both modes, so a bad --mc-samples / --ci-level / --seed is a usage error in either
    bayesian = BayesianMode(mc_samples=args.mc_samples, ci_level=args.ci_level, rng_seed=args.seed)
    return bayesian if args.mode == "bayesian" else FrequentistMode()


def run(argv: Optional[Sequence[str]] = None) -> dict:
    """Run the audit; returns the content of ``results.json``. Raises ``SystemExit(2)`` on bad arguments
    or config, :class:`~fair_forge_beam.reports.gates.GatesFailed` (``SystemExit(3)``) when a gate fails."""
    from fair_forge_beam._beam import beam
    from apache_beam.options.pipeline_options import StandardOptions

    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.metrics.registry import build_metric, interaction_parquet_fields
    from fair_forge_beam.reports.results import metric_static, results_config, write_outputs, write_run_info
    from fair_forge_beam.runner import pipeline_options

    from fair_forge_beam.audit_config import expand_argv, is_template_launch, parse_slices
    from fair_forge_beam.reports.gates import check_gates, resolve_gates

    parser = build_parser()
    try:  # --config file and template-style --name=value spellings
        effective_argv, config_gates = expand_argv(parser, list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        parser.error(str(exc))
    args, beam_args = parser.parse_known_args(effective_argv)
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
    from fair_forge_beam.streaming.job import is_windowed_run

    windowed = is_windowed_run(args)
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
        if not args.window and (args.early_firing or args.allowed_lateness):
            raise ValueError("--early-firing / --allowed-lateness shape the panes of --window: give --window too")
        options = pipeline_options(beam_args)
        runner = options.view_as(StandardOptions).runner
        if isinstance(runner, str):  # an unknown runner is a usage error, not a traceback from beam.Pipeline
            from apache_beam.runners.runner import create_runner

            create_runner(runner)
        mode = _mode(args)
        slice_dims = parse_slices(args.slices)
        gates = resolve_gates(config_gates + (args.gate or []), metrics, mode.is_bayesian, slice_dims)
        metric_options = {
            "emotion_lexicon_csv": args.emotion_lexicon_csv,
            "slice_bootstrap": args.slice_bootstrap,
            "group_extractor": args.group_extractor,
            "toxicity_level": args.toxicity_level,
            "toxicity_group_set": args.toxicity_group_set,
            "clustering": False if (args.no_clustering or args.group_extractor == "keyword" or windowed) else None,
            "cluster_points_path": args.cluster_points,
            "slices": slice_dims,
            **{k: getattr(args, k) for k in (
                "judge_base_url", "judge_model", "judge_api_key_env", "judge_cache", "judge_max_concurrency",
                "judge_requests_per_minute", "judge_timeout", "judge_retries",
                "guardian_base_url", "guardian_model", "guardian_kind", "guardian_api_key_env", "guardian_logprobs",
                "regulatory_corpus", "chunk_size", "chunk_overlap", "regulatory_top_k", "regulatory_threshold",
                "regulatory_embedder",
                "agentic_k", "agentic_correctness", "agentic_label_field", "agentic_task_field", "agentic_threshold",
                "bestof_mode", "bestof_order", "bestof_block", "bestof_criteria")},
            **{k: getattr(args, k) for k in (
                "similarity_embedder", "vision_threshold", "seed_prompt", "seed_prompt_file", "prompt_k", "prompt_tau",
                "prompt_jq_objective", "generator_base_url", "generator_model", "generator_api_key_env")},
        }
        transforms = {m: build_metric(m, mode, metric_options) for m in metrics}
        if args.input_format in ("tau_bench", "bfcl") and not windowed:
            from fair_forge_beam.io.agentic_sources import agentic_retriever

            if not args.input:
                raise ValueError(f"--input-format {args.input_format} needs --input (the benchmark's files)")
            retriever, retriever_kwargs = agentic_retriever(args.input_format, inputs)
            reader = ReadInteractions(retriever=retriever, retriever_kwargs=retriever_kwargs)
        elif windowed:
            from fair_forge_beam.streaming.job import build_source, run_windowed
            from fair_forge_beam.streaming.windows import WindowSpec

            if not args.window:
                raise ValueError("a streaming source needs --window (e.g. --window fixed:1h)")
            if gates:
                raise ValueError("gates apply to batch audits (results.json); a windowed run writes per-window "
                                 "results and evaluates no gate: drop --gate / the config's gates, or --window")
            WindowSpec.parse(args.window, args.early_firing, args.allowed_lateness)
            build_source(args, inputs)  # argument errors here, as usage errors
        else:
            reader = ReadInteractions(inputs, file_format=args.input_format)
    except ValueError as exc:
        parser.error(str(exc))
    if windowed:
        return run_windowed(args, beam_args, metrics, transforms, mode, inputs)
    try:  # never mix this run's outputs with a previous run's (a stale results.json, leftover shards)
        out = prepare_output_folder(args.output, FileSystems)
    except ValueError as exc:
        parser.error(str(exc))
    started = time.time()
    log.info("reading %s; metrics %s; %s; runner %s", inputs, metrics, mode, runner)
    with beam.Pipeline(options=options) as p:
        read = p | "Read" >> reader
        results = {m: read["interactions"] | f"Metric_{m}" >> t for m, t in transforms.items()}
        # every output, results.json included, is written by the pipeline (a Flex Template launch too)
        write_outputs(read, results, out, interaction_parquet_fields(metrics),
                      results_config(metrics, mode, inputs), metric_static(transforms))
    if is_template_launch(options):  # Flex Template launcher: the job runs after this process ends
        log.info("Flex Template launch: job graph written; the Dataflow job writes its outputs under %s", out)
        return {}
    elapsed = time.time() - started
    info = {"runner": str(runner), "seconds": round(elapsed, 3), "argv": list(argv or sys.argv[1:])}
    # the judge package imports torch (about 0.5 GB): only a run that called an endpoint has counters to read
    called = args.judge_base_url or args.guardian_base_url or args.generator_base_url
    counters = _judge_counters(getattr(p, "result", None)) if called else {}
    if counters:
        info["judge_counters"] = counters
    from fair_forge_beam.reports.load import read_results

    doc = read_results(out)  # the small results.json only: no record is read back here
    info = write_run_info(out, info)
    written = [n for n in OUTPUT_FILES if n not in ("report.html", "comparison.json")]
    if not args.no_report:
        from fair_forge_beam.reports.html import write_report

        write_report(out, compare_with=baseline, inconclusive_width=args.inconclusive_width, doc=doc, run_info=info)
        written += ["report.html"] + (["comparison.json"] if baseline is not None else [])
    elif baseline is not None:
        from fair_forge_beam.reports.compare import compare_runs

        with FileSystems.create(f"{out}/comparison.json") as f:
            f.write(json.dumps(compare_runs(doc, baseline), indent=2, ensure_ascii=False).encode("utf-8"))
        written.append("comparison.json")
    if not args.quiet:
        from fair_forge_beam.components.judge.secrets import scrub_known

        print(scrub_known(summary_table(doc, out, written)))
    if gates:  # writes gates.json; raises GatesFailed (exit code 3) when one fails
        check_gates(doc, gates, out, quiet=args.quiet)
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda r: "apitools not found" not in r.getMessage())
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
