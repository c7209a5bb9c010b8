"""The generate and run jobs behind ``pipelines.generate``, ``pipelines.run_assistant`` and
``pipelines.loop`` (the entry points only parse arguments and call these).

Output folders:

* generate → ``dataset.jsonl`` (+ ``dataset.parquet`` with ``--parquet``), ``dead_letter.jsonl``,
  ``generation_summary.json``;
* run → ``dataset.jsonl`` (answered; the audit's input), ``session_summaries.jsonl``,
  ``dead_letter.jsonl``, ``run_summary.json``;
* loop → ``generated/``, ``run/``, ``audit/`` (the audit's usual layout and report).
"""
from __future__ import annotations

from fair_forge_beam.console import say  # console output never fails a run

import contextlib
import json
import logging
import sys
from typing import Any, Optional, Sequence

from fair_forge_beam.io.edge import read_side_text
from fair_forge_beam.reports.empty_run import EmptyRun

log = logging.getLogger("fair_forge_beam.loop")

__all__ = ["GENERATE_FILES", "RUN_FILES", "run_generate", "run_assistant", "build_assistant_handler", "corpus_source",
           "run_stage", "EmptyStage"]

GENERATE_FILES = ("dataset.jsonl", "dataset.parquet", "dead_letter.jsonl", "generation_summary.json")
RUN_FILES = ("dataset.jsonl", "session_summaries.jsonl", "dead_letter.jsonl", "run_summary.json")


def corpus_source(corpus: str) -> str:
    """A shipped corpus name → its folder; anything else is a path or glob, as given."""
    from fair_forge_beam.generators.loader import CORPORA, packaged_corpus_path

    return packaged_corpus_path(corpus) if corpus in CORPORA else corpus


@contextlib.contextmanager
def _staged(command: str, out: str, names: Sequence[str], reads: Sequence[str] = ()):
    """``out`` checked (:func:`~fair_forge_beam.reports.output_folder.check_output_folder`: a file, an
    unwritable folder, or one that is or holds an input is a ``ValueError``), then a stage beside it
    to write the run into, published as ``out`` only when the block ends normally
    (:func:`~fair_forge_beam.reports.output_folder.staged_output`, as the audit's): a failing or
    killed run leaves the previous run's ``names`` whole (they were deleted before the run started:
    a killed generate left a folder without its dataset). A folder holding another command's run is
    refused (:func:`~fair_forge_beam.reports.output_folder.check_no_other_run`). Yields the stage's path."""
    from fair_forge_beam.reports.output_folder import MARKER, check_no_other_run, check_output_folder, staged_output

    check_output_folder(out, reads=reads)  # the inputs too (staged_output checks the folder alone)
    check_no_other_run(out, command)  # its files would mix with another command's run
    with staged_output(out, owned=(*names, MARKER)) as stage:
        yield stage


def _read_json(path: str) -> dict:
    from fair_forge_beam.io.edge import read_side_json

    return read_side_json(path, "a stage's file")


def generated_assistant_id(args: Any) -> str:
    """The ``assistant_id`` the generated sessions carry: ``--assistant-id``; else, in the loop (which
    runs them against ``--assistant-model``), that model's name (trial37 T8: a loop against ``my-bot``
    audited its answers as ``assistant``); else ``"assistant"``.

    Raises:
        ValueError: the chosen id is one the reader would reject in every session (trial37b B6: a model
            name over ``--max-id-chars`` made every session a dead letter and the audit an empty run, exit 4):
            one line naming the option it came from (:func:`~fair_forge_beam.io.read.header_id_problem`,
            with the smaller of ``--max-id-chars`` and the run stage's default limit).
    """
    chosen = args.assistant_id or getattr(args, "assistant_model", None)
    if not chosen:
        return "assistant"
    from fair_forge_beam.io.read import MAX_ID_CHARS, header_id_problem
    from fair_forge_beam.quoting import quoted

    limit = min(MAX_ID_CHARS, int(getattr(args, "max_id_chars", None) or MAX_ID_CHARS))  # run_assistant reads with the default
    problem = header_id_problem("assistant_id", chosen, limit)
    if problem:
        if args.assistant_id:
            raise ValueError(f"--assistant-id {quoted(chosen)} cannot label the generated sessions: {problem}")
        raise ValueError(f"--assistant-model {quoted(chosen)} cannot label the generated sessions (their assistant_id is the "
                         f"model's name): {problem}; give --assistant-id NAME to label them")
    return chosen


def run_generate(args: Any, beam_args: Sequence[str]) -> dict:
    """Generate a test set (``args``: the generate options). Returns ``generation_summary.json``
    (``calls_planned``: one per chunk group, whether the cache answers it or not) plus the generator's Beam counters under ``counters``
    (:data:`~fair_forge_beam.components.judge.handler.COUNTER_NAMES`: ``cache_hits``, ``calls``
    asked, HTTP ``requests`` with retries, ``failures``, tokens), also logged.
    Raises ``ValueError`` on a bad configuration, ``FileNotFoundError`` when the corpus is missing."""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.components.judge.cache import cache_choice
    from fair_forge_beam.generators.generate import (GenerateDataset, WriteGenerated, generation_warnings,
                                                     generator_handler, plan_requests)
    from fair_forge_beam.generators.loader import LocalMarkdownLoader
    from fair_forge_beam.generators.strategies import RandomSamplingStrategy, SequentialStrategy
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

    from fair_forge_beam.options import absolute_paths, value

    # each --generator-* defaults to its --judge-* (the loop's; pipelines.generate has none, so the
    # declared defaults: no endpoint, no model, OPENAI_API_KEY)
    base_url, model, key_env = (value(args, f"generator_{k}") for k in ("base_url", "model", "api_key_env"))
    if not base_url or not model:
        raise ValueError("the generator needs --generator-base-url and --generator-model (or --judge-base-url / --judge-model)")
    loader = LocalMarkdownLoader(args.max_chunk_size, args.min_chunk_size, args.markdown_overlap,
                                 [int(x) for x in args.header_levels.split(",") if x.strip()])
    chunks = loader.load(corpus_source(args.corpus))
    strategy = (RandomSamplingStrategy(args.num_samples, args.chunks_per_sample, args.seed, args.with_replacement)
                if args.strategy == "random" else SequentialStrategy())
    calls, product = strategy.planned_calls(len(chunks))
    cap = getattr(args, "max_generator_calls", None) or 100_000
    if calls > cap:  # before the plan is built: 1e9 planned calls held 5 GB after 150 s (issue 28, trial 28f B13)
        raise ValueError(f"the plan is {calls:,} generator calls ({product}), above --max-generator-calls {cap:,}: "
                         "lower --num-samples or --chunks-per-sample (or use larger chunks, --max-chunk-size), or "
                         "raise --max-generator-calls")
    custom = None
    if args.system_prompt_file:
        custom = read_side_text(args.system_prompt_file, "--system-prompt-file")
    from fair_forge_beam.components.judge.prompts import TemplateRenderError

    try:
        plan = plan_requests(chunks, generated_assistant_id(args), num_queries_per_chunk=args.num_queries,
                             language=args.language, seed_examples=args.seed_example, custom_system_prompt=custom,
                             selection_strategy=strategy, conversation_mode=args.conversation, seed=args.seed)
    except TemplateRenderError as exc:  # the one user template rendered here
        from fair_forge_beam.plain import plain_reason

        raise ValueError(f"--system-prompt-file {args.system_prompt_file}: {plain_reason(exc)}") from None
    handler = generator_handler(model, base_url, use_structured_output=not args.no_structured_output,
                                api_key_env=key_env, cache_path=cache_choice(absolute_paths(args).generator_cache),
                                request_timeout=args.generator_timeout, client_retries=args.generator_retries,
                                # and the batch's retries: --generator-retries 0 is one attempt (it made 4)
                                num_retries=min(args.generator_retries, 3),
                                max_concurrency=args.generator_max_concurrency,
                                max_reply_bytes=args.generator_max_reply_bytes, max_reply_option="--generator-max-reply-bytes",
                                endpoint_down_after=args.endpoint_down_after)
    from fair_forge_beam.reports.output_folder import check_cache_file

    check_cache_file(cache_choice(args.generator_cache), "--generator-cache" if args.generator_cache else
                     "the generator cache (--generator-cache; default $FAIR_FORGE_JUDGE_CACHE or "
                     "$XDG_CACHE_HOME/fair_forge_beam/judge-cache.sqlite3)")
    reads = [corpus_source(args.corpus)] + ([args.system_prompt_file] if args.system_prompt_file else [])
    with _staged("generate", args.output, GENERATE_FILES, reads) as out:  # the previous run's files stay whole until this one's are
        counts = {"chunks": len(chunks), "groups": len(plan.groups), "calls_planned": len(plan.requests)}
        log.info("generating from %d chunks in %d group(s): %d call(s) planned to %s (answers in the cache are not asked "
                 "again)", len(chunks), len(plan.groups), len(plan.requests), base_url)
        with run_pipeline(pipeline_options(beam_args)) as p:
            outs = p | "Generate" >> GenerateDataset(handler, plan)
            outs | "WriteGenerated" >> WriteGenerated(out, args.parquet, counts, requested_per_chunk=plan.num)
        from apache_beam.io.filesystems import FileSystems

        doc = _read_json(FileSystems.join(out, "generation_summary.json"))
        # what the run cost (not in the file, which is the same bytes whether answers came from the cache or not)
        from fair_forge_beam.components.judge.handler import judge_counters
        from fair_forge_beam.generators.generate import GENERATOR_NAMESPACE

        try:
            c = doc["counters"] = judge_counters(p.result, GENERATOR_NAMESPACE)
        except Exception:  # noqa: BLE001 - a runner without metrics
            c = None
        if c is not None:
            log.info("generator calls: %d planned — %d from the cache, %d asked (%d HTTP request(s), retries included), "
                     "%d failed", len(plan.requests), c["cache_hits"], c["calls"], c["requests"], c["failures"])
        for warning in generation_warnings(doc):
            log.warning("%s", warning)
        doc["dead_letter_reasons"] = dead_letter_reasons(out)
        _stop_if_empty("generate", doc, out, args.output)
        return doc


class EmptyStage(EmptyRun):
    """A stage command's empty run (:func:`stage_empty_reason`), raised inside its stage: the previous
    outputs stay whole and the stage is kept unpublished (``kept_stage``) for its dead letters to be read
    (:func:`~fair_forge_beam.reports.output_folder.staged_output`). ``doc``: the run's summary, printed
    all the same; ``output``: the ``--output`` left as it was. Raised without a line: the command
    (:func:`stage_main`) or the loop says it."""

    def __init__(self, reason: str, doc: dict, kept_stage: str, output: str):
        super().__init__(reason, kept_stage)
        self.doc, self.output = doc, output


def _stop_if_empty(command: str, doc: dict, stage: str, output: str) -> None:
    """Raise :class:`EmptyStage` when the stage ``command`` wrote into ``stage`` is empty: never published
    over the last good run (trial48 B1: an empty generate left the folder's dataset.jsonl 0 lines)."""
    reason = stage_empty_reason(command, doc)
    if reason is not None:
        raise EmptyStage(reason, doc, stage, output)


def dead_letter_reasons(out: str, top: int = 3, most_lines: int = 100_000) -> dict:
    """The ``top`` most common reasons of a stage's ``dead_letter.jsonl`` in ``out`` (``{reason:
    count}``, most frequent first, reasons grouped as results.json's are: :mod:`~fair_forge_beam.reasons`; the first ``most_lines`` lines, each read bounded), ``{}`` when it
    has none: what an empty stage's one line names (the generator's failure, not the audit's "no
    input record")."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.reasons import add_reason, shown_reasons

    path = FileSystems.join(out, "dead_letter.jsonl")
    groups: dict = {}
    if not FileSystems.exists(path):
        return {}
    with FileSystems.open(path) as f:
        for i, line in enumerate(f):
            if i >= most_lines:
                break
            try:
                reason = json.loads(line[:65536]).get("reason")
            except (ValueError, AttributeError):
                continue
            if isinstance(reason, str) and reason:
                add_reason(groups, "", reason)
    ranked = sorted(((r, n) for (_, r), n in shown_reasons(groups).items()), key=lambda rn: (-rn[1], rn[0]))
    return dict(ranked[:top])


def build_assistant_handler(args: Any):
    """The :class:`~fair_forge_beam.assistants.assistant.AssistantHandler` from the run options.
    Raises ``ValueError`` on a missing URL / model / template."""
    from fair_forge_beam.assistants.assistant import AssistantHandler

    if not args.assistant_url:
        raise ValueError("--assistant-url is required (the assistant under test)")
    template = args.request_template
    if args.request_template_file:
        template = read_side_text(args.request_template_file, "--request-template-file")
    from fair_forge_beam.reports.output_folder import check_cache_file

    from fair_forge_beam.components.judge.cache import cache_choice

    check_cache_file(cache_choice(args.assistant_cache, None), "--assistant-cache")
    from fair_forge_beam.options import absolute_paths

    common = dict(api_key_env=args.assistant_api_key_env, cache_path=cache_choice(absolute_paths(args).assistant_cache, None), request_timeout=args.assistant_timeout,
                  client_retries=args.assistant_retries, max_concurrency=args.assistant_concurrency,
                  requests_per_minute=args.assistant_requests_per_minute, max_reply_bytes=args.assistant_max_reply_bytes,
                  endpoint_down_after=args.endpoint_down_after)
    if args.assistant_kind == "openai":
        if not args.assistant_model:
            raise ValueError("--assistant-model is required for an OpenAI-compatible assistant")
        return AssistantHandler("openai", model=args.assistant_model, base_url=args.assistant_url, send_context=args.send_context,
                                **common)
    if not template:
        raise ValueError("an http assistant needs --request-template or --request-template-file")
    return AssistantHandler("http", url=args.assistant_url, request_template=template, response_path=args.response_path, **common)


def run_assistant(args: Any, beam_args: Sequence[str], inputs: Optional[Sequence[str]] = None, assistant_id: Optional[str] = None) -> dict:
    """Run the dataset files against the assistant. Returns ``run_summary.json`` (plus the
    runner's counters under ``counters``)."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
    from fair_forge_beam.assistants.assistant import RunAssistant, WriteRunOutputs, assistant_counters

    inputs = list(inputs or args.input or [])
    if not inputs:
        raise ValueError("--input is required (the dataset files to run)")
    handler = build_assistant_handler(args)
    from fair_forge_beam.io.read import unmatched_patterns, unmatched_reason

    if unmatched_patterns(inputs) == inputs:  # a missing export: an empty run, exit 4, as the audit's (docs/cli.md)
        from fair_forge_beam.reports.empty_run import fail_empty_run

        fail_empty_run(f"no input record ({'; '.join(unmatched_reason(i) for i in inputs)})", args.output,
                       prog="run", allow_empty=False)
    with _staged("run", args.output, RUN_FILES, reads=inputs) as out:  # the previous run's files stay whole until this one's are
        with run_pipeline(pipeline_options(beam_args)) as p:
            read = p | "Read" >> ReadInteractions(inputs)
            outs = read["interactions"] | "RunAssistant" >> RunAssistant(handler, assistant_id)
            outs | "WriteRun" >> WriteRunOutputs(out, [read["dead_letter"]])
        doc = _read_json(FileSystems.join(out, "run_summary.json"))
        doc["dead_letter_reasons"] = dead_letter_reasons(out)
        warning = failed_turns_warning(doc, args.output)
        if warning:
            log.warning("%s", warning)
        if "counters" not in doc:  # written from the results themselves; Beam's counters are the fallback
            try:
                doc["counters"] = assistant_counters(p.result)
            except Exception:  # noqa: BLE001 - a runner without metrics
                pass
        _stop_if_empty("run", doc, out, args.output)
        return doc


def failed_turns_warning(doc: dict, out: str) -> Optional[str]:
    """The one line of a run stage (``run_assistant``, the loop's run) in which the assistant failed
    some turns and answered others: ``"the assistant failed 10 of 12 turns (HTTP 500: …): see
    OUT/dead_letter.jsonl; …"`` (trial40 J3: the loop audited the 2 survivors of 12 turns without a
    word); ``None`` when no turn failed, or none was answered (then the stage is an empty run:
    :func:`stage_empty_reason`)."""
    failed, answered = int(doc.get("failures") or 0), int(doc.get("successes") or 0)
    if not failed or not answered:
        return None
    reasons = doc.get("dead_letter_reasons") or {}
    top = next(iter(reasons), "")
    top = top[len("assistant call failed: "):] if top.startswith("assistant call failed: ") else top
    turns = int(doc.get("turns") or failed + answered)
    from fair_forge_beam._beam import beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.reports.summary import printable

    return printable(f"the assistant failed {failed} of {turns} turns" + (f" ({top})" if top else "")
            + f": see {FileSystems.join(out, 'dead_letter.jsonl')}; the audit scores the {answered} answered, "
            "and counts the failed ones as read and scored by no metric (results.json: summary.assistant_failed)")


def stage_empty_reason(command: str, doc: dict) -> Optional[str]:
    """Why a stage's run produced nothing a later stage can use, or ``None``: ``generate`` wrote
    no interaction, ``run`` got no answer (every turn failed, or none was read). The commands
    then exit with the empty-run code (:data:`~fair_forge_beam.reports.empty_run.EMPTY_RUN_EXIT_CODE`),
    as the audit does: a scheduled chain must not go on with an empty dataset."""
    dead = int(doc.get("dead_letters") or 0)
    reasons = doc.get("dead_letter_reasons") or {}
    top = "; most common: {} ({})".format(*next(iter(reasons.items()))) if reasons else ""
    if command == "generate" and not doc.get("interactions"):
        c = doc.get("counters") or {}
        return (f"no interaction was generated ({doc.get('calls_planned', 0)} call(s) planned, {c.get('failures', '?')} "
                f"failed, {dead} dead letters{top})")
    if command == "run" and not doc.get("successes"):
        sent = (doc.get("counters") or {}).get("requests")  # a dead endpoint's later turns are never sent
        return (f"no turn was answered ({doc.get('turns', 0)} turn(s), {'?' if sent is None else sent} request(s) "
                f"sent, {doc.get('failures', 0)} failed, {dead} dead letters{top})")
    return None


def stage_main(run, command: str, argv: Optional[Sequence[str]] = None) -> int:
    """A stage command's ``main``: logging, ``run(argv)``, its summary printed as JSON on stdout;
    exit code 0, or for an empty run (:class:`EmptyStage`) the empty-run code with one line on stderr
    naming the reason, ``--output`` left as it was and the kept stage where the run's outputs are read::

        generate: empty run: no interaction was generated (…); OUT is left as it was; this run's outputs (its
        dead letters) are kept unpublished in OUT.staging-… until the next run into OUT (exit code 4)"""
    from fair_forge_beam.progress import cli_logging
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE, fail_empty_run

    cli_logging()
    try:
        doc = run(argv)
    except EmptyStage as empty:
        say(json.dumps(empty.doc, indent=2, sort_keys=True))
        try:
            fail_empty_run(empty.reason, empty.output, prog=command, allow_empty=False, stage=empty.kept_stage)
        except EmptyRun:
            return EMPTY_RUN_EXIT_CODE
    say(json.dumps(doc, indent=2, sort_keys=True))
    return 0


def run_stage(parser, argv: Optional[Sequence[str]], command: str, job) -> dict:
    """Parse ``argv`` (``sys.argv[1:]`` when ``None``) for a stage command (``"generate"`` or
    ``"run"``), validate it and return ``job(args, beam_args)``. An option that is neither the
    stage's nor Beam's, a failed validation, a ``ValueError`` or a missing file is a one-line
    usage error (``parser.error``, exit status 2)."""

    from fair_forge_beam.options import reject_unknown_arguments, validate

    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    from fair_forge_beam.console import expect_output

    expect_output(getattr(args, "output", None))  # an interrupt before the stage names it
    reject_unknown_arguments(parser, beam_args)
    from fair_forge_beam.run_scope import one_run

    try:
        validate(args, command)
        with one_run():  # what the stage registers in the process (its endpoint's key variable) is its own (trial44)
            return job(args, beam_args)
    except (ValueError, FileNotFoundError) as exc:
        from fair_forge_beam.plain import plain_reason

        parser.error(plain_reason(exc))
