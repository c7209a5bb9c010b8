"""One command for the loop: documents → questions → the assistant's answers → metrics → report.

    python -m pipelines.loop --corpus airline --assistant-url http://localhost:8080/v1 \
        --assistant-model my-bot --judge-base-url http://localhost:8000/v1 --judge-model judge \
        --metrics humanity,context --output loop_out/

Runs ``pipelines.generate`` into ``OUTPUT/generated/``, ``pipelines.run_assistant`` into
``OUTPUT/run/`` and ``pipelines.audit`` on ``OUTPUT/run/dataset.jsonl`` into ``OUTPUT/audit/``
(results.json, report.html, dead_letter/ — failed turns are dead letters there, stage "runner").
Options not declared here are passed to the audit (``--mode bayesian``, ``--judge-cache``, Beam
options, …); ``--seed`` and ``--metrics`` are passed too. Returns the audit's results.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.loop_options import add_arguments

    p = argparse.ArgumentParser(prog="python -m pipelines.loop", allow_abbrev=False,
                                description="Generate a test set, run it against the assistant, audit the answers. "
                                            "Options not listed here go to the audit (see python -m pipelines.audit --help).")
    add_arguments(p, "loop")
    return p


def run(argv: Optional[Sequence[str]] = None) -> dict:
    from fair_forge_beam.loop_jobs import run_assistant, run_generate
    from fair_forge_beam.loop_options import validate
    from fair_forge_beam.options import reject_unknown_arguments
    from pipelines import audit

    parser = build_parser()
    args, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    # the rest goes to the audit stage: what neither its options nor Beam's take is refused now,
    # before any generation (the audit would refuse it only after the other stages ran)
    _, leftover = audit.build_parser().parse_known_args(list(rest))
    reject_unknown_arguments(parser, leftover)
    beam_args = [a for a in rest if a.startswith("--runner") or a.startswith("--direct_")]
    try:
        validate(args, "loop")
        if args.input:
            raise ValueError("--input is not a loop option: the loop runs the set it generates (use pipelines.run_assistant)")
        from fair_forge_beam.loop_jobs import build_assistant_handler

        build_assistant_handler(args)  # a bad assistant configuration fails before any generation
        root = args.output
        gen_args = argparse.Namespace(**{**vars(args), "output": os.path.join(root, "generated")})
        gen = run_generate(gen_args, beam_args)
        run_args = argparse.Namespace(**{**vars(args), "output": os.path.join(root, "run")})
        ran = run_assistant(run_args, beam_args, inputs=[os.path.join(root, "generated", "dataset.jsonl")])
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    audit_argv = ["--input", os.path.join(root, "run", "dataset.jsonl"), "--metrics", args.metrics, "--seed", str(args.seed),
                  "--output", os.path.join(root, "audit")]
    if args.judge_base_url:
        audit_argv += ["--judge-base-url", args.judge_base_url]
    if args.judge_model:
        audit_argv += ["--judge-model", args.judge_model]
    doc = audit.run(audit_argv + list(rest))
    loop_doc = {"generated": gen, "run": ran, "audit_output": os.path.join(root, "audit")}
    with open(os.path.join(root, "loop_summary.json"), "w", encoding="utf-8") as f:
        json.dump(loop_doc, f, indent=2, sort_keys=True)
        f.write("\n")
    return doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
