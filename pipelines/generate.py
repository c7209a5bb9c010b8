"""Generate a test set from Markdown documents with an LLM (spec §10).

    python -m pipelines.generate --corpus airline --generator-base-url http://localhost:8000/v1 \
        --generator-model my-llm --output gen_out/

Writes ``dataset.jsonl`` (sessions the audit and ``pipelines.run_assistant`` read), ``dead_letter.jsonl``
and ``generation_summary.json`` (``--parquet``: also ``dataset.parquet``). Unknown ``--flags`` are
Beam pipeline options. Options: :mod:`fair_forge_beam.options`; job: :mod:`fair_forge_beam.loop_jobs`.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("python -m pipelines.generate", "generate")  # named as its usage errors name it

import argparse
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.options import stage_parser

    return stage_parser("pipelines.generate", "generate", "Generate evaluation questions or conversations from Markdown with an LLM.")


def run(argv: Optional[Sequence[str]] = None) -> dict:
    from fair_forge_beam.loop_jobs import run_generate, run_stage

    return run_stage(build_parser(), argv, "generate", run_generate)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.loop_jobs import stage_main

    return stage_main(run, "generate", argv)


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "generate", prog="python -m pipelines.generate"))
