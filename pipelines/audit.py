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
``comparison.json``. Everything is written into a stage beside ``--output`` and replaces the previous
outputs only when the run succeeds (or only a gate failed): a failed, killed or empty run leaves them
(:func:`fair_forge_beam.reports.output_folder.staged_output`). Exit codes: 0, 2 usage error, 3 a gate
failed, 4 an empty run (docs/cli.md).
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("fair-forge-beam")

import argparse
import importlib
import importlib.resources
import logging
import sys
import time
from typing import Optional, Sequence

from fair_forge_beam._gc import unscanned_imports

with unscanned_imports():  # pydantic and the schemas: never collected, never walked (docs/performance.md)
    from fair_forge_beam.reports.output_folder import (check_cache_file, check_no_other_run, check_output_folder,
                                                       output_option, run_id_of, staged_output)
    from fair_forge_beam.console import guarded, safe_streams, say
    from fair_forge_beam.reports.summary import console_summary, printable as _printable
    from fair_forge_beam.options import OPTIONS, reject_unknown_arguments

log = logging.getLogger("fair_forge_beam.audit")


class _LazyFileSystems:
    """Beam's FileSystems, imported on first use (keeps ``--help`` fast)."""

    def __getattr__(self, name):
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems as _fs

        return getattr(_fs, name)


FileSystems = _LazyFileSystems()


def default_inputs() -> list[str]:
    base = importlib.resources.files("fair_forge_beam").joinpath("data/examples")
    return [str(base.joinpath("fair_forge_examples.json")), str(base.joinpath("hh_rlhf_harmless_test_slice.jsonl"))]


def build_parser(prog: str = "fair-forge-beam") -> argparse.ArgumentParser:
    with unscanned_imports():  # Beam, pyarrow, pydantic: never collected, never walked (docs/performance.md)
        from fair_forge_beam.metrics.registry import METRICS

    from fair_forge_beam.options import OneLineErrorParser, add_arguments, beam_option

    p = OneLineErrorParser(  # a usage error is one line and a hint to --help
        prog=prog, passes_on=beam_option,
        description="Audit AI-assistant conversations (fairness, safety, quality metrics) as an Apache Beam pipeline. "
        "Unknown --options are passed to Beam (e.g. --runner, --direct_num_workers).",
        allow_abbrev=False,  # "--mod bayesian" is a usage error, not a silent "--mode"
        epilog="Other commands (each with its own --help): "
        + "; ".join(f"{prog} {name}" for name in COMMANDS) + " (docs/cli.md, docs/scheduled.md).",
    )
    add_arguments(p, METRICS)  # every option, declared once in fair_forge_beam.options
    return p


def run(argv: Optional[Sequence[str]] = None) -> dict:
    """Run the audit; returns the content of ``results.json``. Raises ``SystemExit(2)`` on bad arguments
    or config, :class:`~fair_forge_beam.reports.gates.GatesFailed` (``SystemExit(3)``) when a gate fails
    (after publishing the outputs), :class:`~fair_forge_beam.reports.empty_run.EmptyRun`
    (``SystemExit(4)``) for an empty run without ``--allow-empty`` (nothing published). The outputs are
    written into a stage and replace ``--output`` only when the run succeeds
    (:func:`~fair_forge_beam.reports.output_folder.staged_output`). With ``--quiet`` only errors and
    gate failures are printed. ``--version`` prints the version and raises ``SystemExit(0)``."""
    from fair_forge_beam.progress import QuietLogs
    from fair_forge_beam.run_scope import one_run

    argv = list(sys.argv[1:] if argv is None else argv)
    with one_run(), QuietLogs() as levels:  # what the run registers in the process is the run's (trial44)
        parser = build_parser()
        args, beam_args, config_gates = parse_args(argv, parser)
        if args.version:
            print_version()
            raise SystemExit(0)
        return _run(parser, args, beam_args, config_gates, argv, levels)


def parse_args(argv: Sequence[str], parser: Optional[argparse.ArgumentParser] = None):
    """The audit's typed options from ``argv`` (a ``--config`` file and template-style
    ``--name=value`` spellings expanded): ``(args, beam_args, config_gates)``, where ``args`` is
    the ``argparse.Namespace`` by ``dest``, ``beam_args`` what belongs to Beam and
    ``config_gates`` the config file's gates.

    Raises:
        SystemExit(2): a usage error (an unknown option, a bad value, an unreadable config file).
    """
    from fair_forge_beam.audit_config import expand_argv

    parser = parser or build_parser()
    try:  # --config file and template-style --name=value spellings
        effective_argv, config_gates = expand_argv(parser, list(argv))
    except ValueError as exc:
        parser.error(str(exc))
    args, beam_args = parser.parse_known_args(effective_argv)
    if not args.version:
        reject_unknown_arguments(parser, beam_args)
    return args, beam_args, config_gates


def run_parsed(args: argparse.Namespace, beam_args: Sequence[str] = (), config_gates: Sequence = (),
               argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
               read_elsewhere: Sequence[str] = ()) -> dict:
    """:func:`run` with options already parsed (:func:`parse_args`; the loop sets its own values on
    them; ``beam_args`` as :func:`parse_args` gives them, checked there: the runner and Beam's own
    validation); ``argv``: the command line recorded in ``run_info.json`` (default: ``sys.argv[1:]``);
    ``parser``: the one whose name usage errors give (the loop's: default the audit's);
    ``read_elsewhere``: options (by ``dest``) the caller's own stages read, never refused as options
    of a metric or mode the audit does not run (the loop's generator reads ``--seed`` and the
    ``--judge-*`` / ``--generator-*`` options). Returns and raises as :func:`run`."""
    from fair_forge_beam.progress import QuietLogs
    from fair_forge_beam.run_scope import one_run

    with one_run(), QuietLogs() as levels:  # what the run registers in the process is the run's (trial44)
        return _run(parser or build_parser(), args, list(beam_args), list(config_gates),
                    list(sys.argv[1:] if argv is None else argv), levels, read_elsewhere)


def command_line_options(parser, argv: Sequence[str], read_elsewhere: Sequence[str] = ()) -> set:
    """The options (by ``dest``) that ``argv``, the command line itself, gives (template-style
    spellings too), but those in ``read_elsewhere`` (the loop's: read by its other stages)."""
    from fair_forge_beam.audit_config import normalise_template_args
    from fair_forge_beam.options import options_given

    return {a.dest for a, _, _ in options_given(parser, normalise_template_args(parser, list(argv)))} - set(read_elsewhere)


def _run(parser, args, beam_args: list, config_gates: list, argv: list, levels,
         read_elsewhere: Sequence[str] = ()) -> dict:
    from fair_forge_beam._beam import beam
    from apache_beam.options.pipeline_options import StandardOptions

    from fair_forge_beam.io.read import NoRecords, ReadInteractions, unmatched_patterns, unmatched_reason
    from fair_forge_beam.io.session_stats import WriteSessionStats
    from fair_forge_beam.rollup import audit_manifest, input_fingerprints, seal_manifest
    from fair_forge_beam.metrics.registry import build_metric, interaction_parquet_fields, statistical_mode
    from fair_forge_beam.engine import apply_metrics, engine_spec, fields_read
    from fair_forge_beam.reports.results import metric_static, results_config, scored_tests, write_outputs
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

    from fair_forge_beam.audit_config import is_template_launch, parse_slices
    from fair_forge_beam.slices import metadata_dimensions
    from fair_forge_beam.extras import MissingExtraError
    from fair_forge_beam.reports.gates import counts_records, read_count_dimensions, resolve_gates, uses_baseline

    from fair_forge_beam.console import expect_output

    expect_output(args.output)  # an interrupt before the stage names it (untouched, or not created)
    if args.quiet:  # errors and gate failures only (docs/cli.md)
        levels.quiet()
    if args.emotion_lexicon_csv and not FileSystems.exists(args.emotion_lexicon_csv):
        parser.error(f"--emotion-lexicon-csv: file not found: {args.emotion_lexicon_csv}")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not metrics:
        parser.error("--metrics is empty")
    inputs = args.input or default_inputs()
    from fair_forge_beam.windowed import is_windowed_run

    windowed = is_windowed_run(args)
    nothing = None  # why the run reads nothing before it starts (every --input pattern matches no file)
    streaming_run = False  # a streaming source (--watch, Kafka, Pub/Sub): outputs written in place
    from fair_forge_beam.options import validate

    try:  # the declared validations (--judge-timeout > 0, --inconclusive-width in (0, 1], ...)
        validate(args)
    except ValueError as exc:
        parser.error(str(exc))
    baseline = baseline_info = None
    if args.compare:
        from fair_forge_beam.reports.load import read_results, read_run_info

        try:  # read before this run's output folder is cleaned (it may be the same folder)
            baseline = read_results(args.compare)
            baseline_info = read_run_info(args.compare.rsplit("/", 1)[0] if args.compare.endswith("results.json")
                                          else args.compare)
        except (FileNotFoundError, ValueError) as exc:
            from fair_forge_beam.plain import plain_reason

            parser.error(f"--compare: {plain_reason(exc)}")
    from fair_forge_beam.reports.load import read_baseline, read_run_info

    try:  # regression / coverage gates' baseline run, read before this run's output folder is replaced
        gate_baseline = read_baseline(args.baseline)
        # its settings (--toxicity-scorer …), told apart from this run's before a gate reads it (trial34 T1)
        gate_baseline_info = read_run_info(args.baseline) if gate_baseline is not None else None
    except ValueError as exc:
        parser.error(str(exc))
    try:
        from fair_forge_beam.options import ignored_option_problem, unread_config_lines

        # the options the command line itself gives (a --config file's are warned about, not refused)
        command_line = command_line_options(parser, argv, read_elsewhere)
        # an option (or the config's gates) this run does not read (trial 28g G5, trial34 T4/T5, trial39 T3), first
        problem = ignored_option_problem(args, command_line, beam_args, config_gates)
        if problem:
            raise ValueError(problem)
        for line in unread_config_lines(args, command_line, args.config, read_elsewhere):
            log.warning(line)
        # (the runner and Beam's own option checks ran in reject_unknown_arguments: beam_options_problem)
        options = pipeline_options(beam_args)
        runner = options.view_as(StandardOptions).runner
        mode = statistical_mode(args)
        slice_dims = parse_slices(args.slices)
        if config_gates:  # the file's gates alone first: an error names the file
            from fair_forge_beam.audit_config import check_file_gates

            check_file_gates(args.config, config_gates,
                             lambda gs: resolve_gates(gs, metrics, mode.is_bayesian, slice_dims, gate_baseline,
                                                      warn=False))  # said once, below
        gates = resolve_gates(config_gates + (args.gate or []), metrics, mode.is_bayesian, slice_dims, gate_baseline)
        if gate_baseline is not None and not uses_baseline(gates):
            raise ValueError("--baseline is read by regression gates ('regression <metric> [<field>] not worse') and "
                             "'coverage assistants_of_baseline'; no such gate is given: add one, or drop --baseline")
        from fair_forge_beam.options import absolute_paths, path_dests

        metric_options = {  # every option by its dest (local paths absolute: a worker's folder is not ours)
            **vars(absolute_paths(args)),
            "clustering": False if (args.no_clustering or args.group_extractor == "keyword" or windowed) else None,
            "slices": slice_dims,
        }
        if args.cluster_points and "toxicity" in metrics and metric_options["clustering"] is False:
            # (without toxicity among --metrics: ignored_option_problem, from its declaration)
            raise ValueError("--cluster-points writes the toxicity clustering's points, but clustering is off "
                             "(--no-clustering, --group-extractor keyword or a windowed run): drop --cluster-points, "
                             "or give --metrics toxicity --group-extractor embedding")
        transforms = {m: build_metric(m, mode, metric_options) for m in metrics}
        # the reader warns about a field of an interaction (an empty answer) only when a metric reads it
        read_fields = fields_read(engine_spec(t) for t in transforms.values())
        if args.early_firing or args.allowed_lateness:  # checked again by the engine; here as a usage error
            from fair_forge_beam.engine import panes_metadata_problem

            specs = [engine_spec(t) for t in transforms.values()]
            problem = panes_metadata_problem([s for s in specs if metadata_dimensions(s.slices)])
            if problem:
                raise ValueError(problem)
        if args.input_format in ("tau_bench", "bfcl") and not windowed:
            from fair_forge_beam.io.agentic_sources import agentic_retriever

            if not args.input:
                raise ValueError(f"--input-format {args.input_format} needs --input (the benchmark's files)")
            retriever, retriever_kwargs = agentic_retriever(args.input_format, inputs, args.max_record_bytes)
            reader = ReadInteractions(retriever=retriever, retriever_kwargs=retriever_kwargs,
                                      slice_fields=metadata_dimensions(slice_dims), fields_read=read_fields,
                                      max_id_chars=args.max_id_chars)
        elif windowed:
            from fair_forge_beam.windowed import build_source, run_windowed
            from fair_forge_beam.streaming.windows import WindowSpec

            if not args.window:
                raise ValueError("a streaming source needs --window (e.g. --window fixed:1h)")
            if args.input_format in ("tau_bench", "bfcl"):  # was the reader's "file_format must be …" (B15)
                raise ValueError(f"--input-format {args.input_format} is read by a batch audit only; a windowed or "
                                 "streaming run reads auto, json, jsonl or parquet: drop --window, or convert first "
                                 f"(python -m fair_forge_beam.io.agentic_sources {args.input_format} IN OUT.jsonl)")
            WindowSpec.parse(args.window, args.early_firing, args.allowed_lateness)
            streaming_run = build_source(args, inputs)[1]  # argument errors here, as usage errors
        elif args.input and unmatched_patterns(inputs) == list(inputs):  # a missing export: nothing to read
            nothing = f"no input record ({'; '.join(unmatched_reason(i) for i in inputs)})"
            reader = ReadInteractions(retriever=NoRecords, slice_fields=metadata_dimensions(slice_dims),
                                      fields_read=read_fields)
        else:  # a pattern of several that matches nothing is a usage error (an audit of part of the input)
            reader = ReadInteractions(inputs, file_format=args.input_format, slice_fields=metadata_dimensions(slice_dims),
                                      max_record_bytes=args.max_record_bytes, fields_read=read_fields,
                                      max_id_chars=args.max_id_chars)
    except (ValueError, MissingExtraError) as exc:  # MissingExtraError: e.g. MiniLM on the core install
        parser.error(str(exc))
    try:  # an unwritable or unusable --output is a usage error before any pipeline runs
        # "the default --output" when none was given (trial39b B10: the line named an option never typed)
        option = output_option(args.output != OPTIONS["output"].default)
        out = check_output_folder(args.output, reads=inputs, option=option)  # never over (or around) an --input
        check_no_other_run(out, "audit", option)  # a generate / run_assistant / loop run there: the two runs' files would mix
        if streaming_run:  # written in place as windows fire: never over a finished run's outputs
            from fair_forge_beam.reports.output_folder import finished_run_problem

            problem = finished_run_problem(args.output)
            if problem:
                raise ValueError(problem)
        from fair_forge_beam.components.judge.cache import cache_choice

        if args.cluster_points:  # a file the run writes: never an --input or a file the run reads
            from fair_forge_beam.io.paths import check_output_file

            check_output_file(args.cluster_points, list(inputs) + [f for f in (
                args.baseline, args.emotion_lexicon_csv, args.privacy_domain, args.seed_prompt_file, cache_choice(args.judge_cache, None)) if f],
                              "--cluster-points", stdout=False)  # a Parquet file: '-' is no file name here
        if (args.judge_base_url or args.guardian_base_url or args.generator_base_url) and _local_run(options, runner):
            # every file the run writes is checked before it starts: the endpoints' answer cache too
            check_cache_file(cache_choice(args.judge_cache),
                             "--judge-cache" if args.judge_cache else "the judge cache (--judge-cache; default "
                             "$FAIR_FORGE_JUDGE_CACHE or $XDG_CACHE_HOME/fair_forge_beam/judge-cache.sqlite3)")
    except ValueError as exc:
        parser.error(str(exc))
    if nothing and not args.allow_empty:
        from fair_forge_beam.reports.empty_run import fail_empty_run

        fail_empty_run(nothing, args.output)  # exit code 4, like an input that holds no record
    if windowed:
        return run_windowed(args, beam_args, metrics, transforms, mode, inputs)
    log.info("reading %s; metrics %s; %s; runner %s", inputs, metrics, mode, runner)

    config, static = results_config(metrics, mode, inputs, slice_dims), metric_static(transforms)
    input_files = input_fingerprints(inputs)  # in stats/manifest.json: a roll-up counts each input file once

    def build(p, folder: str) -> list:
        """The job graph, writing into ``folder``; returns every sink's result (for publish_after)."""
        # the engine's per-session accumulators, stored for roll-ups (stats/: fair_forge_beam.io.session_stats)
        # (the manifest records the paths as given, as before: a roll-up compares the runs' settings)
        typed = {**metric_options, **{d: getattr(args, d) for d in path_dests() if d in metric_options}}
        stats = WriteSessionStats(folder, audit_manifest(config, typed, static, run_id_of(folder),
                                                         input_files=input_files))
        read = p | "Read" >> reader
        # engine metrics share their shuffles
        results = apply_metrics(read["interactions"], transforms, on_session_accumulators=stats,
                                extra_session_inputs=stats.session_inputs(read["session_records"], read["reader_quality"]),
                                on_slice_accumulators=stats.slices)
        # every output, results.json included, is written by the pipeline (a Flex Template launch too)
        written = write_outputs(read, results, folder, interaction_parquet_fields(metrics), config, static,
                                stats=stats, read_slice_dims=read_count_dimensions(gates, slice_dims),
                                count_records=counts_records(gates),
                                scored_tests=scored_tests({n: engine_spec(t) for n, t in transforms.items()}))
        return written + stats.written

    if is_template_launch(options):  # Flex Template launcher: the job runs after this process ends
        from fair_forge_beam.reports.output_folder import new_stage_path, publish_after

        stage = new_stage_path(out)  # the job writes here and publishes it as --output itself, as its last step
        with run_pipeline(options) as p:
            # its publishing step first seals the manifest (every file a roll-up reads, hashed)
            publish_after(build(p, stage), stage, out, prepare=seal_manifest)
        log.info("Flex Template launch: job graph written; the Dataflow job writes its outputs under %s and "
                 "publishes them as %s when it succeeds", stage, out)
        return {}
    earlier = _earlier_run(out)  # read before it is replaced: the run says when its settings differed (T12)
    with staged_output(out) as stage:  # an exception below (an empty run too) leaves --output untouched
        doc, gate_failure, summary = _run_staged(args, argv, build, options, runner, stage, out, baseline,
                                                 baseline_info, gates, gate_baseline, beam_args, gate_baseline_info)
    if earlier is not None:
        _say_replaced(out, doc, earlier)
    _say_absent_slice_fields(out, doc)
    if summary is not None:
        say(summary)  # the paths the outputs have, now published
    if gate_failure is not None:
        raise gate_failure  # after publishing: a valid run that failed a check (or whose report failed)
    return doc


def _run_staged(args, argv, build, options, runner, stage: str, out: str, baseline, baseline_info, gates,
                gate_baseline=None, beam_args=(), gate_baseline_info=None):
    """The pipeline and the launcher's files, written into ``stage`` (published as ``out`` by the
    caller); returns ``(results.json's content, the GatesFailed — or, when report.html could not be
    written, the ReportFailed (exit code 1) — to raise after publishing or None, the
    console summary to print once published or None with --quiet)``.

    Raises:
        EmptyRun: an empty run without ``--allow-empty`` (one line printed on stderr).
    """
    from fair_forge_beam.progress import ProgressReporter
    from fair_forge_beam.reports.empty_run import empty_run_reason, fail_empty_run
    from fair_forge_beam.reports.gates import GatesFailed, baseline_and_checks, check_gates
    from fair_forge_beam.reports.results import utc_timestamp, write_run_info
    from fair_forge_beam.beam_pipeline import run_pipeline

    started = time.time()
    started_at = utc_timestamp(started)
    progress = ProgressReporter(args.progress_interval, enabled=not args.quiet)
    with progress, run_pipeline(options) as p:
        _watch_run(p, progress)  # a runner whose run() returns while the job runs: its counters are polled too
        build(p, stage)
    from fair_forge_beam.rollup import seal_manifest

    seal_manifest(stage)  # the size and hash of every file a roll-up reads (issue 28), once all are written
    elapsed = time.time() - started
    info = {"runner": str(runner), "started_at": started_at, "seconds": round(elapsed, 3), "argv": list(argv),
            "options": {d: getattr(args, d, None) for d in OPTIONS}, "beam_args": list(beam_args)}
    # the judge package imports torch (about 0.5 GB): only a run that called an endpoint has counters to read
    called = args.judge_base_url or args.guardian_base_url or args.generator_base_url
    counters = _judge_counters(getattr(p, "result", None)) if called else {}
    if counters:
        info["judge_counters"] = counters
    from fair_forge_beam.reports.load import read_results

    doc = read_results(stage)  # the small results.json only: no record is read back here
    reason = empty_run_reason(doc, coverage_gated=any(g.kind == "coverage" for g in gates or ()))
    if reason and not args.allow_empty:
        fail_empty_run(reason, out, stage=stage)  # the stage kept, unpublished, for its dead letters to be read
    info = write_run_info(stage, info)
    from fair_forge_beam.rollup import seal_more

    seal_more(stage, "run_info.json")  # sealed as results.json is: a trend, a comparison and a roll-up read it
    if baseline is not None:  # a comparison of unlike runs is allowed, but said (one line per difference)
        from fair_forge_beam.reports.compare import comparability, run_differences  # (scipy: only when comparing)

        for d in run_differences(doc, baseline, info, baseline_info):
            log.warning("--compare: the runs differ in %s", _printable(d["message"]))
        compared = comparability(doc, baseline, current_dir=stage, baseline_dir=args.compare, current_name=out)
        for line in compared["missing"]:  # an older layout: what is not checked (trial37 T9)
            log.warning("--compare: %s", line)
        if compared["shared_data"]:  # e.g. --compare with the week that holds this night (trial34 T3)
            log.warning("--compare: the runs share data: %s", _printable(compared["shared_data"]))
        if compared["possibly_shared_data"]:
            log.warning("--compare: the runs may share data: %s", _printable(compared["possibly_shared_data"]))
    # whether the --baseline run is like this one: settings (run_info.json's too, trial34 T1) and data they share
    comparable, checks = baseline_and_checks(doc, gates, gate_baseline, info, gate_baseline_info, current_dir=stage,
                                             baseline_dir=args.baseline, current_name=out, warn=log.warning)
    from fair_forge_beam.reports.launcher_reports import write_launcher_reports
    from fair_forge_beam.reports.load import dead_letter_summary

    # the dead letters read once, for the report and the console (the assistants nobody scored, trial30 T8)
    dead = dead_letter_summary(stage) if not (args.quiet and args.no_report) else None
    written, report_failure = write_launcher_reports(
        stage, doc, info, baseline, args.no_report, args.inconclusive_width, gates=gates, baseline_info=baseline_info,
        gate_checks=checks, dead_letters=dead, baseline_dir=args.compare if baseline is not None else None, shown=out)
    # printed once published (by the caller): the console can never stop the outputs from being published
    summary = None if args.quiet else console_summary(doc, out, written, gates, dead_letters=dead)
    if gates:  # writes gates.json; GatesFailed (exit code 3) is raised after the outputs are published
        try:
            check_gates(doc, gates, stage, quiet=args.quiet, shown=out, baseline=gate_baseline, checks=checks,
                        comparable=comparable)
        except GatesFailed as exc:
            return doc, exc, summary
    return doc, report_failure, summary  # a report that failed: exit code 1 once the rest is published


def _earlier_run(out: str):
    """``(results.json, run_info.json)`` contents of the run ``out`` holds, or ``None`` (no run there,
    or one that cannot be read: a damaged folder is replaced as before, with nothing to say)."""
    from fair_forge_beam.reports.load import read_results, read_run_info

    try:
        return read_results(out), read_run_info(out)
    except (OSError, ValueError):
        return None


def _say_replaced(out: str, doc: dict, earlier: tuple) -> None:
    """One warning line on stderr when this run replaced in ``out`` a run made with other settings
    (:func:`~fair_forge_beam.reports.compare.replaced_run_line`; trial33 T12); ``--quiet`` silences it
    as every warning."""
    from fair_forge_beam.io.secrets import scrub_known_text
    from fair_forge_beam.reports.compare import replaced_run_line
    from fair_forge_beam.reports.load import read_run_info

    try:
        line = replaced_run_line(out, doc, earlier[0], read_run_info(out), earlier[1] or None)
        line = scrub_known_text(line) if line else line  # settings are values from outside: key values masked
    except (OSError, ValueError):  # the comparison is a courtesy: never a reason to fail a published run
        return
    if line:
        log.warning("%s", _printable(line))


def _say_absent_slice_fields(out: str, doc: dict) -> None:
    """One warning line on stderr per ``--slices`` field no session carries (a mistyped name: every
    session in ``FIELD=(missing)``), with the data-quality warning's own words: it was a line in
    ``data_quality/`` only, the run exit 0 (trial38 T11). ``--quiet`` silences it as every warning.
    Reads ``data_quality/`` only when results.json counts such warnings, and stops at the last one."""
    from fair_forge_beam.reports.load import iter_quality_warnings

    kind = "slice_field_absent"
    left = int(((doc or {}).get("summary") or {}).get("data_quality_by_kind", {}).get(kind) or 0)
    if not left:
        return
    try:
        for w in iter_quality_warnings(out):
            if w.get("kind") == kind:
                log.warning("--slices %s: %s (data_quality/)", _printable(str(w.get("key"))), _printable(str(w.get("message"))))
                left -= 1
                if not left:
                    return
    except (OSError, ValueError):  # the line is a courtesy: never a reason to fail a published run
        return


def _local_run(options, runner) -> bool:
    """Whether the pipeline's workers run on this machine (FnApiRunner, DirectRunner, Prism...), so
    that the files they write (the judge cache) can be checked here; not a Flex Template launch nor
    a remote runner (Dataflow, a Flink or Spark cluster)."""
    from fair_forge_beam.audit_config import is_template_launch

    if is_template_launch(options):
        return False
    name = runner if isinstance(runner, str) else type(runner).__name__
    return not any(remote in str(name) for remote in ("Dataflow", "Flink", "Spark", "Portable"))


def print_version() -> None:
    """``fair-forge-beam <version>`` on stdout (:func:`fair_forge_beam.version.product_version`)."""
    from fair_forge_beam.version import product_version

    say(f"fair-forge-beam {product_version()}")


def _watch_run(pipeline, progress) -> None:
    """Make ``pipeline.run()`` (called by ``with beam.Pipeline(...)`` on exit) hand its result to ``progress``."""
    run = pipeline.run

    def run_and_watch(*a, **kw):
        result = run(*a, **kw)
        progress.watch(result)
        return result

    pipeline.run = run_and_watch


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


#: ``fair-forge-beam <command> …``: commands other than the audit (the default), by module of ``pipelines``
COMMANDS = {
    "rollup": "pipelines.rollup",  # merge stored statistics of earlier audits (docs/scheduled.md)
    "trend": "pipelines.trend",  # trend.html / trend.json over many runs (docs/scheduled.md)
    "compare": "fair_forge_beam.reports.compare",  # two runs' estimates, current − baseline (docs/cli.md)
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console script ``fair-forge-beam``: ``fair-forge-beam [audit options]`` runs the audit;
    ``fair-forge-beam <command> …`` runs one of :data:`COMMANDS` with the rest of the arguments."""
    safe_streams()  # a console that cannot show a character (PYTHONIOENCODING=ascii) shows it escaped
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in (args[:args.index("--")] if "--" in args else args):
        print_version()  # before anything heavy is imported (no Beam)
        return 0
    command = args[0] if args and args[0] in COMMANDS else "audit"
    # from the command line (argv None) the command is the process: SIGINT / SIGTERM end it in one line
    return guarded(lambda: (importlib.import_module(COMMANDS[command]).main(args[1:]) if command in COMMANDS
                            else _audit_main(args if argv is not None else None)), command,
                   # a named command says its own name (its usage, errors and interrupt line): fair-forge-beam trend
                   prog=f"fair-forge-beam {command}" if command in COMMANDS else "fair-forge-beam",
                   owns_process=argv is None)


def _audit_main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
