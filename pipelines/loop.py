"""One command for the loop: documents → questions → the assistant's answers → metrics → report.

    python -m pipelines.loop --corpus airline --assistant-url http://localhost:8080/v1 \
        --assistant-model my-bot --judge-base-url http://localhost:8000/v1 --judge-model judge \
        --metrics humanity,context --output loop_out/

Runs ``pipelines.generate`` into ``OUTPUT/generated/``, ``pipelines.run_assistant`` into
``OUTPUT/run/`` and ``pipelines.audit`` on ``OUTPUT/run/dataset.jsonl`` into ``OUTPUT/audit/``
(results.json, report.html, dead_letter/ — failed turns are dead letters there, stage "runner").
Options not declared here are the audit's (``--mode bayesian``, ``--judge-cache``, ``--config``, Beam
options, …), parsed once by the audit's parser; ``--seed``, ``--metrics`` and ``--judge-base-url`` /
``--judge-model`` are the same options for the loop and the audit, and the audit runs with these
typed values (:func:`pipelines.audit.run_parsed`). The generator defaults to the judge: endpoint,
model and API-key variable (``--judge-api-key-env``). Returns the audit's results.json.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("python -m pipelines.loop", "loop")  # named as its usage errors name it

import argparse
import contextlib
import json
import os
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.metrics.registry import METRICS
    from fair_forge_beam.options import add_arguments

    from fair_forge_beam.options import OneLineErrorParser
    from pipelines.audit import build_parser as audit_parser

    job = audit_parser()

    def audits(flag: str) -> bool:  # what the loop does not declare goes to the audit (its template spellings too)
        return job.knows(flag) or job.knows("--" + flag[2:].replace("_", "-"))

    p = OneLineErrorParser(prog="python -m pipelines.loop", allow_abbrev=False, passes_on=audits,
                                description="Generate a test set, run it against the assistant, audit the answers. "
                                            "Options not listed here go to the audit (see python -m pipelines.audit --help).")
    add_arguments(p, METRICS, command="loop")  # declared in fair_forge_beam.options
    return p


#: options of the loop that it also sets on the audit (the same declarations: one value for both)
SHARED_WITH_AUDIT = ("seed", "metrics", "judge_base_url", "judge_model", "endpoint_down_after")


def stop_empty(empty, what: str, root: str, prog: str) -> None:
    """A stage (``generate``, ``run``) that gave the next one nothing to work on
    (:class:`~fair_forge_beam.loop_jobs.EmptyStage`, :func:`~fair_forge_beam.loop_jobs.stage_empty_reason`):
    stop with that stage's own empty-run reason, the loop named, exit 4: the audit would go on and only
    say "no input record" (trial38 T3: every assistant call failed). The stage's folder keeps its last
    good run; its dead letters are pointed at in the stage kept beside it (trial48 B1: an empty stage
    replaced the last good one)."""
    from fair_forge_beam.reports.empty_run import fail_empty_run

    left = "is left as it was" if os.path.exists(empty.output) else "was not created"
    fail_empty_run(f"{what}: {empty.reason} (see {os.path.join(empty.kept_stage, 'dead_letter.jsonl')}: the stage's run, "
                   f"kept unpublished until the next run into {empty.output}, which {left})",
                   os.path.join(root, "audit"), prog=prog, allow_empty=False)


def run(argv: Optional[Sequence[str]] = None) -> dict:
    from pipelines import audit
    from fair_forge_beam.progress import QuietLogs
    from fair_forge_beam.run_scope import one_run

    argv = list(sys.argv[1:] if argv is None else argv)
    parser, args, audit_parser, audit_args, beam_args, config_gates = parse(argv)
    root = args.output
    audit_args.input, audit_args.output = [os.path.join(root, "run", "dataset.jsonl")], os.path.join(root, "audit")
    # what the stages register in the process is the run's (trial44)
    with one_run(), QuietLogs() as levels, _removed_if_left_empty(root):
        if audit_args.quiet:  # the loop's --quiet holds for every stage, not the audit's alone (trial46 B4)
            levels.quiet()
        return _stages_and_audit(parser, args, root, audit_parser, audit_args, beam_args, config_gates, argv)


def parse(argv: Sequence[str]) -> tuple:
    """The loop's options and the audit's from ``argv``: ``(parser, args, audit_parser, audit_args,
    beam_args, config_gates)``. The options both read (:data:`SHARED_WITH_AUDIT`) get one value: the
    one given on the loop's command line, else the audit's (its ``--config`` file's, else its
    default). Before, the loop's defaults replaced the config file's values: ``--config`` with
    ``metrics = "toxicity"`` and ``seed = 7`` audited Humanity with seed 42, without a word.

    Raises:
        SystemExit(2): a usage error (either parser's)."""
    from pipelines import audit

    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    from fair_forge_beam.console import expect_output

    expect_output(args.output)  # an interrupt before the first stage names it (untouched, or not created)
    # the rest is the audit's: parsed now, once, with the audit's own parser (a --config file too),
    # so what neither its options nor Beam's take is refused before any generation
    # named as the loop in every usage error (the audit's parser said "fair-forge-beam: error")
    audit_parser = audit.build_parser(prog=parser.prog)
    audit_args, beam_args, config_gates = audit.parse_args(rest, audit_parser)
    given = _given_on_the_command_line(parser, argv, SHARED_WITH_AUDIT)
    for d in SHARED_WITH_AUDIT:
        if d in given:
            setattr(audit_args, d, getattr(args, d))
        else:
            setattr(args, d, getattr(audit_args, d))
    return parser, args, audit_parser, audit_args, beam_args, config_gates


def _given_on_the_command_line(parser: argparse.ArgumentParser, argv: Sequence[str], dests: Sequence[str]) -> set:
    """Which of ``dests`` ``argv`` gives (a value equal to the default included): parsed again with
    a marker as their defaults (what is still the marker was not given), the defaults restored after."""
    absent = object()
    saved = {a.dest: a.default for a in parser._actions if a.dest in dests}
    parser.set_defaults(**{d: absent for d in saved})
    try:
        parsed, _ = parser.parse_known_args(list(argv))
    finally:
        parser.set_defaults(**saved)
    return {d for d in dests if getattr(parsed, d, absent) is not absent}


@contextlib.contextmanager
def _removed_if_left_empty(root: str):
    """``root``, the loop's output folder, removed when the loop made it and ends (a failure, Ctrl-C, an
    empty run) leaving it empty (trial38 T13: Ctrl-C during generation said "nothing was written" and left
    an empty folder). Only an empty folder is removed (``os.rmdir``); one that existed before is kept."""
    existed = os.path.lexists(root)
    try:
        yield
    except BaseException:
        if not existed:
            with contextlib.suppress(OSError):
                os.rmdir(root)
        raise


def _stages_and_audit(parser, args, root, audit_parser, audit_args, beam_args, config_gates, argv) -> dict:
    """The loop's three stages (generate, run, audit) into ``root``, then its ``loop_summary.json``."""
    from fair_forge_beam.reports.output_folder import published_together

    # the three stages publish together or not at all (trial48c F: an empty run stage left a new generated/ beside
    # the last good run/ and audit/): a later stage's empty run, failure or interrupt gives the earlier ones back
    with published_together():
        doc, failed_check = _stages_together(parser, args, root, audit_parser, audit_args, beam_args, config_gates, argv)
    if failed_check is not None:
        raise failed_check  # a published audit whose gate failed (exit 3), or whose report failed
    return doc


def _stages_together(parser, args, root, audit_parser, audit_args, beam_args, config_gates, argv) -> tuple:
    """:func:`_stages_and_audit`'s stages: ``(the audit's results, the exception of a published audit or None)``."""
    from fair_forge_beam.loop_jobs import EmptyStage, build_assistant_handler, run_assistant, run_generate
    from fair_forge_beam.options import validate
    from fair_forge_beam.reports.output_folder import check_no_other_run, check_output_folder
    from pipelines import audit

    stage_beam_args = list(beam_args)  # every stage runs where the audit runs (a runner's address, Prism's path: trial45 B1)
    try:
        validate(args, "loop")
        validate(audit_args)  # the audit's options too (--judge-api-key-env feeds the generator), before any stage
        if args.input:
            raise ValueError("--input is not a loop option: the loop runs the set it generates (use pipelines.run_assistant)")
        build_assistant_handler(args)  # a bad assistant configuration fails before any generation
        check_output_folder(root, staged=False, may_hold_reads=True)  # the root too (trial48 B3: it ran into /generated)
        check_no_other_run(root, "loop")  # another command's run there: the two runs' files would mix (trial37b B7)
        # the generator defaults to the audit's judge: its endpoint, model and API-key variable
        stage_args = {**vars(audit_args), **vars(args)}
        try:
            gen = run_generate(argparse.Namespace(**{**stage_args, "output": os.path.join(root, "generated")}), stage_beam_args)
        except EmptyStage as empty:
            stop_empty(empty, "the generator made no question", root, parser.prog)
        try:
            ran = run_assistant(argparse.Namespace(**{**stage_args, "output": os.path.join(root, "run")}), stage_beam_args,
                                inputs=[os.path.join(root, "generated", "dataset.jsonl")])
        except EmptyStage as empty:
            stop_empty(empty, "the assistant answered no question", root, parser.prog)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    from fair_forge_beam.options import OPTIONS

    # the generator and the assistant's stage read --seed, --endpoint-down-after and the judge's /
    # generator's options, whatever the audit's metrics
    from fair_forge_beam.console import is_published

    failed_check = None
    try:
        doc = audit.run_parsed(audit_args, beam_args, config_gates, argv=argv, parser=audit_parser,
                               read_elsewhere=[d for d in OPTIONS if d in SHARED_WITH_AUDIT or d.startswith(("judge_", "generator_"))])
    except Exception as exc:
        if not is_published(audit_args.output):
            raise  # nothing of the audit's published: every stage is given its previous content back
        failed_check, doc = exc, None  # a published audit whose gate failed (exit 3): the loop's run, published whole
    loop_doc = {"generated": gen, "run": ran, "audit_output": os.path.join(root, "audit")}
    from fair_forge_beam.io.secrets import scrub_known

    from fair_forge_beam.io.write import replace_files

    # whole or not at all (a kill mid-write left a truncated file); each stage's folder is published whole by its stage
    replace_files([(os.path.join(root, "loop_summary.json"), json.dumps(scrub_known(loop_doc), indent=2, sort_keys=True, allow_nan=False) + "\n")])
    return doc, failed_check


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    run(argv)
    return 0


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "loop", prog="python -m pipelines.loop"))
