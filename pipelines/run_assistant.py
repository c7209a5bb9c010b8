"""Run a dataset against the assistant under test (spec §11).

    python -m pipelines.run_assistant --input gen_out/dataset.jsonl \
        --assistant-url http://localhost:8080/v1 --assistant-model my-bot --output run_out/

Writes ``dataset.jsonl`` (the sessions with their answers: the audit's input),
``session_summaries.jsonl``, ``dead_letter.jsonl`` and ``run_summary.json``. A failed turn is marked
(``[ERROR] …``, ``agentic.runner.ok`` false), dead-lettered, and never scored by the audit.
Options: :mod:`fair_forge_beam.options`; job: :mod:`fair_forge_beam.loop_jobs`.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("python -m pipelines.run_assistant", "run_assistant")  # named as its usage errors name it

import argparse
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.options import stage_parser

    return stage_parser("pipelines.run_assistant", "run", "Fill a dataset's answers by running it against an assistant endpoint.")


def run(argv: Optional[Sequence[str]] = None) -> dict:
    from fair_forge_beam.loop_jobs import run_assistant, run_stage

    return run_stage(build_parser(), argv, "run",
                     lambda args, beam_args: run_assistant(args, beam_args, assistant_id=args.assistant_id))


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.loop_jobs import stage_main

    return stage_main(run, "run", argv)


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "run", prog="python -m pipelines.run_assistant"))
