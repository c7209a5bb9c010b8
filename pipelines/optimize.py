"""Prompt optimizer job: improve a system prompt over a dataset with GEPA or MIPROv2.

    python -m pipelines.optimize --method gepa --input data.json --model gpt-4o-mini \\
        --seed-prompt "You are a support assistant." --objective "Correct and grounded" --output out/

Unknown ``--flags`` are Beam pipeline options for the candidate-evaluation pipelines (default
runner: FnApiRunner in-memory). Writes ``result.json``, ``dead_letter.jsonl`` and ``report.html``
(unless ``--no-report``; :mod:`fair_forge_beam.reports.tool_reports`) to ``--output``.
See docs/optimizer.md.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("fair-forge-beam optimize")

from fair_forge_beam.console import say  # console output never fails a run
from fair_forge_beam.plain import side_file_error

import json
import os
import sys
from typing import Optional, Sequence

#: what optimize writes in its --output, replaced whole by each run (published through a stage); anything else
#: there is the user's and stays
OPTIMIZE_OUTPUTS = ("result.json", "dead_letter.jsonl", "report.html", "work/")


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.run_scope import one_run

    with one_run():  # what the run registers in the process (its endpoints' key variables) is its own (trial44)
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    from fair_forge_beam.options import (OneLineErrorParser, add_arguments, beam_option, constructor_kwargs, reject_unknown_arguments,
                                         validate, value)
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    parser = OneLineErrorParser(prog="fair-forge-beam-optimize", passes_on=beam_option, description=__doc__.split("\n\n")[0])
    add_arguments(parser, command="optimize")  # options declared in fair_forge_beam.options
    args, beam_args = parser.parse_known_args(argv)
    from fair_forge_beam.console import expect_output

    expect_output(args.output)  # an interrupt before the stage names it (untouched, or not created)
    reject_unknown_arguments(parser, beam_args)
    try:
        validate(args, "optimize")
        if not args.input or not args.output or not args.model:
            raise ValueError("--input, --output and --model are required")
        if bool(args.seed_prompt) == bool(args.seed_prompt_file):
            raise ValueError("give exactly one of --seed-prompt and --seed-prompt-file")
    except ValueError as exc:
        parser.error(str(exc))
    from fair_forge_beam.io.edge import read_side_text, side_json_loads

    seed_prompt = args.seed_prompt
    if args.seed_prompt_file:
        try:
            seed_prompt = read_side_text(args.seed_prompt_file, "--seed-prompt-file").strip()
        except (OSError, ValueError) as exc:
            parser.error(side_file_error("--seed-prompt-file", args.seed_prompt_file, exc))
    from fair_forge_beam.reports.output_folder import check_no_other_run, check_output_folder

    try:  # before any work: an --output that is a file, unwritable, or is/holds an --input
        check_output_folder(args.output, reads=[args.input] if isinstance(args.input, str) else list(args.input or []))
        check_no_other_run(args.output, "optimize")  # another command's run there: the files would mix
    except ValueError as exc:
        parser.error(str(exc))
    from fair_forge_beam.io.read import InputFiles, file_identity, warn_repeated_inputs

    reached: dict = {}  # a file given twice (a link to it, ./a and a) is read once: its sessions are not doubled
    for path in dict.fromkeys(args.input):
        reached.setdefault(file_identity(path), []).append(path)
    repeated = InputFiles([], [(paths[0], paths) for paths in reached.values() if len(paths) > 1]).warning()
    if repeated:
        warn_repeated_inputs(repeated)
    datasets = []
    for path in [paths[0] for paths in reached.values()]:  # repeatable: the lists are joined
        try:
            part = side_json_loads(read_side_text(path, "--input"), f"--input {path}")
        except (OSError, ValueError) as exc:
            parser.error(side_file_error("--input", path, exc))
        if not isinstance(part, list):
            parser.error(f"--input must hold a JSON list of sessions: {path} does not")
        datasets.extend(part)

    from fair_forge_beam.components.judge.cache import cache_choice
    from fair_forge_beam.components.judge.handler import OpenAIJudgeHandler
    from fair_forge_beam.optimizer.optimizers import GEPAOptimizer, MIPROv2Optimizer

    cache = cache_choice(args.judge_cache)
    from fair_forge_beam.reports.output_folder import check_cache_file

    try:  # every file the run writes is checked before it starts (the cache, like --output)
        check_cache_file(cache, "--judge-cache" if args.judge_cache else "the judge cache (--judge-cache; default "
                         "$FAIR_FORGE_JUDGE_CACHE or $XDG_CACHE_HOME/fair_forge_beam/judge-cache.sqlite3)")
    except ValueError as exc:
        parser.error(str(exc))

    def handler(model):
        return OpenAIJudgeHandler(model, args.base_url, api_key_env=args.api_key_env, cache_path=cache)

    model = handler(args.model)
    executor = handler(args.executor_model) if args.executor_model else model  # --executor-model defaults to --model
    evaluator = handler(args.evaluator_model) if args.evaluator_model else model
    cls = GEPAOptimizer if args.method == "gepa" else MIPROv2Optimizer
    target = f"{cls.__module__}:{cls.__name__}"
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE, EmptyRun, fail_empty_run
    from fair_forge_beam.reports.output_folder import MARKER, staged_output

    def shown(score) -> str:
        return "none" if score is None else f"{score:.4f}"

    # written into a stage beside --output (its work/ folder too) and published only when the run scored something
    # (as the audit's and the stages': staged_output): a failed, killed or empty run leaves the last good one whole
    try:
        with staged_output(args.output, owned=OPTIMIZE_OUTPUTS + (MARKER,)) as stage:
            result = cls.run(datasets, model, seed_prompt, executor=executor, evaluator=evaluator,
                             workdir=os.path.join(stage, "work"), pipeline_args=beam_args, **constructor_kwargs(target, vars(args)))
            out = result.to_dict()
            dead = out.pop("dead_letters")
            out["method"] = args.method
            from fair_forge_beam.io.write import replace_files, to_json_line

            files = [(os.path.join(stage, "result.json"), to_json_line(out) + "\n"),
                     (os.path.join(stage, "dead_letter.jsonl"), "".join(to_json_line(d) + "\n" for d in dead))]
            if not args.no_report:
                from fair_forge_beam.reports.tool_reports import render_optimizer_report

                params = {"model": args.model, "executor_model": value(args, "executor_model"),
                          "evaluator_model": value(args, "evaluator_model"), **constructor_kwargs(target, vars(args))}
                files.append((os.path.join(stage, "report.html"), render_optimizer_report(out, dead, params, seed_prompt)))
            replace_files(files)
            first, last = out["initial_score"], out["final_score"]
            scores = ("no score (no example was scored)" if first is None and last is None
                      else f"score {shown(first)} -> {shown(last)}")
            if out["final_score"] is None:  # no prompt was scored: an empty run, as generate's and run_assistant's (trial48 B1)
                say(f"{args.method}: {scores}; stop: {out['stop_reason']}; dead letters: {out['n_dead']}")
                fail_empty_run(f"no example was scored ({out['n_dead']:,} dead letters)", args.output, prog="optimize",
                               allow_empty=False, stage=stage)
    except EmptyRun:  # its line said, the stage kept: main's exit code, as before
        return EMPTY_RUN_EXIT_CODE
    say(f"{args.method}: {scores}; stop: {out['stop_reason']}; dead letters: {out['n_dead']}; written to {args.output}")
    return 0


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "optimize"))
