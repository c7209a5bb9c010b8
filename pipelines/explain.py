"""Explainability job: token attributions of a Hugging Face causal LM for a file of items.

    python -m pipelines.explain --input items.jsonl --model ./my-model --method Lime \\
        --granularity word --output out/

``--input``: JSON Lines, one ``{"id", "prompt", "target"[, "method", "granularity"]}`` per line
(prompts used as given: apply a chat template yourself). ``--model``: a local folder or hub
name for ``AutoModelForCausalLM`` / ``AutoTokenizer`` (``tiny-random`` = the built-in 2-layer
random GPT-2, for trying the job offline). Unknown ``--flags`` are Beam options. Writes
``attributions-*.jsonl`` and ``dead_letter-*.jsonl`` shards and ``report.html`` (unless
``--no-report``; :mod:`fair_forge_beam.reports.tool_reports`). Needs the ``[explain]`` extra.
See docs/explainability.md.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("fair-forge-beam explain")

from fair_forge_beam.console import say  # console output never fails a run
from fair_forge_beam.plain import side_file_error

import functools
import os
import sys
from typing import Optional, Sequence

METHODS = ("Saliency", "IntegratedGradients", "GradientShap", "SmoothGrad", "SquareGrad", "VarGrad", "InputXGradient",
           "Lime", "KernelShap", "Occlusion", "Sobol")


#: what explain writes in its --output (shards at the top level, by pattern: their count may change
#: between runs), replaced whole by each run; anything else there is the user's and stays
EXPLAIN_OUTPUTS = ("attributions-*-of-*.jsonl", "dead_letter-*-of-*.jsonl", "report.html")


def load_hf(name: str, seed: int = 0):
    """``(model, tokenizer)`` from a folder / hub name; ``"tiny-random"`` → :func:`~fair_forge_beam.testing.tiny_lm.tiny_gpt2`."""
    if name == "tiny-random":
        from fair_forge_beam.testing.tiny_lm import tiny_gpt2

        return tiny_gpt2(seed)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(name).eval(), AutoTokenizer.from_pretrained(name)


def _id_counts(items) -> dict:
    """``{id: items given it}`` of the input's items (an item without a usable id is the pipeline's dead
    letter and counts here as none)."""
    from fair_forge_beam.explainability.attributions import read_item_id

    counts: dict = {}
    for item in items:
        iid = read_item_id(item)[0]
        if iid is not None:
            counts[iid] = counts.get(iid, 0) + 1
    return counts


def read_items(path: str) -> tuple[list, list]:
    """``(items, dead letters)`` of the JSON Lines file ``path``, read as the audit reads its input, by
    its reader (:func:`~fair_forge_beam.io.read.jsonl_file_lines`): in any encoding its first bytes
    tell (a BOM; UTF-16, UTF-32), compressed or not (a compressed file cut short: its items before the
    cut and the audit's dead letter saying the rest is missing; one of 0 bytes: that dead letter), no
    line held over the record limit, each line parsed and checked as the audit's
    (:func:`~fair_forge_beam.io.read.line_record`: the same dead letters, with the same reasons); blank
    lines are no item. A dead letter's ``source`` is the audit's: the absolute path and the line's byte
    offset.

    Raises:
        OSError: the file cannot be opened or read."""
    from fair_forge_beam.io.elements import dead_letter
    from fair_forge_beam.io.read import MAX_RECORD_BYTES, ReadError, jsonl_file_lines, line_record

    items, dead = [], []
    for source, position, payload in jsonl_file_lines(path, MAX_RECORD_BYTES):
        line = payload if isinstance(payload, ReadError) else line_record(payload, MAX_RECORD_BYTES)
        if line is None:
            continue
        if line.reason is None:
            items.append(line.record)
        else:
            dead.append(dead_letter("explain.read", line.reason, line.raw, source=f"{source}:{position}"))
    return items, dead


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.options import OneLineErrorParser, beam_option, user_path
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    parser = OneLineErrorParser(prog="fair-forge-beam-explain", passes_on=beam_option, description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, metavar="FILE", type=user_path, help="JSON Lines of {id, prompt, target[, method, granularity]}")
    parser.add_argument("--output", required=True, metavar="DIR", type=user_path, help="output folder")
    parser.add_argument("--model", required=True, type=user_path, help="local folder or hub name of a causal LM ('tiny-random': built-in test model)")
    parser.add_argument("--method", default="Lime", choices=METHODS, help="attribution method (default: Lime)")
    parser.add_argument("--granularity", default="word", choices=("token", "word", "sentence"), help="(default: word)")
    from fair_forge_beam.options import Range, number_type, option

    parser.add_argument("--seed", type=number_type(int, option("seed").valid), default=0,
                        help=f"base seed of the per-item seeds, {option('seed').valid.text()} (default: 0)")
    parser.add_argument("--max-length", type=number_type(int, Range(1, 1_000_000, unit="tokens")), default=512,
                        help="maximum tokens of prompt + target, between 1 and 1,000,000 (default: 512)")
    parser.add_argument("--no-report", action="store_true", help="do not write report.html")
    args, beam_args = parser.parse_known_args(argv)
    from fair_forge_beam.console import expect_output
    from fair_forge_beam.options import reject_unknown_arguments

    expect_output(args.output)  # an interrupt before the stage names it (untouched, or not created)

    reject_unknown_arguments(parser, beam_args)
    if args.max_length < 1:
        parser.error("--max-length must be >= 1")

    from fair_forge_beam.explainability.attributions import ExplainAttributions, repeated_ids_warning, require_interpreto

    try:
        require_interpreto()
    except ImportError as exc:
        parser.error(str(exc))
    from fair_forge_beam._beam import beam
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    from fair_forge_beam.reports.output_folder import MARKER, check_no_other_run, check_output_folder, staged_output

    try:  # before any work: an --output that is a file, unwritable, or is/holds an --input
        check_output_folder(args.output, reads=[args.input] if isinstance(args.input, str) else list(args.input or []))
        check_no_other_run(args.output, "explain")  # another command's run there: the files would mix
    except ValueError as exc:
        parser.error(str(exc))
    try:  # as the audit reads its input (the --max-record-bytes default): the same dead letters
        items, unread = read_items(args.input)
    except OSError as exc:
        parser.error(side_file_error("--input", args.input, exc))
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE, EmptyRun, fail_empty_run

    if not items and not unread:  # told before the model is loaded: an input with no item is an empty run (exit 4)
        fail_empty_run(f"no input record ({args.input} holds no item)", args.output, prog="explain", allow_empty=False)
    repeated = repeated_ids_warning(_id_counts(items), args.input)  # trial40 J7: said without a word before
    if repeated:
        import logging

        logging.getLogger("fair_forge_beam.explain").warning(repeated)
    loader = functools.partial(load_hf, args.model, args.seed)
    # written into a stage beside --output and swapped into place only when every file is (as the audit's):
    # a killed or failing run leaves the previous folder whole (its shards were overwritten in place)
    try:
        with staged_output(args.output, owned=EXPLAIN_OUTPUTS + (MARKER,)) as stage:
            with run_pipeline(pipeline_options(beam_args)) as p:
                out = p | "Items" >> beam.Create(items) | "Explain" >> ExplainAttributions(
                    loader, args.method, args.granularity, args.seed, args.max_length)
                write_jsonl(out["results"], os.path.join(stage, "attributions"), "Results")
                write_jsonl((out["dead_letter"], p | "Unread" >> beam.Create(unread)) | "Dead" >> beam.Flatten(),
                            os.path.join(stage, "dead_letter"), "DeadLetters")
            n_done = len(read_jsonl_shards(os.path.join(stage, "attributions")))
            from fair_forge_beam.reasons import add_reason, shown_reasons
            from fair_forge_beam.reports.summary import printable

            # the audit's way: the dead letters counted beside the explained items, with their most common
            # reason (trial35 T6: "1 item(s) explained" was the whole output when 2 of 3 items were dead letters)
            dead, groups = read_jsonl_shards(os.path.join(stage, "dead_letter")), {}
            for d in dead:
                add_reason(groups, "", str(d.get("reason")))
            ranked = sorted(((r, n) for (_, r), n in shown_reasons(groups).items()), key=lambda rn: (-rn[1], rn[0]))
            top = f"; most common: {printable(ranked[0][0])} ({ranked[0][1]:,})" if ranked else ""
            letters = f"{len(dead):,} dead letter{'' if len(dead) == 1 else 's'}"
            if not n_done:  # an empty run: --output keeps the last good run, the stage is kept to be read (trial48 B1)
                fail_empty_run(f"no item was explained ({letters}{top})", args.output, prog="explain", allow_empty=False,
                               stage=stage)
            if not args.no_report:
                from fair_forge_beam.reports.tool_reports import write_explain_report

                write_explain_report(stage, read_jsonl_shards(os.path.join(stage, "attributions")), dead,
                                     {"model": args.model, "method (default)": args.method, "granularity (default)": args.granularity,
                                      "seed": args.seed, "max length": args.max_length})
    except EmptyRun:  # its line said, the stage kept: main's exit code, as before
        return EMPTY_RUN_EXIT_CODE
    say(f"attributions written to {args.output}: {n_done:,} item(s) explained, {letters}"
        + (f" (every one in {os.path.join(args.output, 'dead_letter')}-*.jsonl{top})" if dead else ""))
    return 0


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "explain"))
