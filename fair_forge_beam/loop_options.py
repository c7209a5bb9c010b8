"""Options of the generate → run → audit commands, declared once (as :mod:`fair_forge_beam.options`
does for the audit): ``pipelines.generate``, ``pipelines.run_assistant`` and ``pipelines.loop``
build their parsers from these :class:`~fair_forge_beam.options.Option` declarations, so
``--help`` shows every default, and :func:`template_metadata` derives Flex Template parameters
from the same declarations.
"""
from __future__ import annotations

import argparse
from typing import Any, Optional, Sequence

from fair_forge_beam.options import Group, Option, Template, _non_negative, _positive

__all__ = ["GENERATE", "RUN", "LOOP", "COMMON", "add_arguments", "validate", "template_metadata", "groups_for"]

_URL = "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/%+-]*)?$"
_NAME = "^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$"
_ADV = "advanced: set it on the command line of a custom launcher"


def _levels(v: str) -> Optional[str]:
    try:
        levels = [int(x) for x in v.split(",") if x.strip()]
    except ValueError:
        return f"--header-levels must be comma-separated numbers 1-6, got {v!r}"
    return None if levels and all(1 <= x <= 6 for x in levels) else f"--header-levels must be numbers 1-6, got {v!r}"


COMMON = Group("Common", (
    Option("assistant-id", help="assistant_id of the sessions (generate: the label written; run: replaces the input's)",
           default_note="generate: 'assistant'; run: keep the input's",
           template=Template("Assistant id", "TEXT", _NAME, "assistant_id of the generated / answered sessions. Example: my-bot-v2")),
    Option("seed", type=int, default=42, validate=_non_negative("--seed"),
           help="seed of chunk sampling and session ids (and of the audit in the loop)",
           template=Template("Seed", "NUMBER", "^[0-9]{1,18}$", "Seed of sampling and session ids. Example: 42")),
))

GENERATE = Group("Generate (test sets from Markdown, spec §10)", (
    Option("corpus", default="airline", path=True,
           help="shipped corpus (airline, callcenter) or a Markdown file, folder or glob",
           template=Template("Corpus", "TEXT", "^[^\\n\\r]+$", "airline, callcenter or a Markdown file/folder/glob. Example: airline")),
    Option("language", default="english", help="language label of the generated sessions (not sent to the LLM)", template=_ADV),
    Option("num-queries", type=int, default=3, validate=_positive("--num-queries"),
           help="questions (or turns with --conversation) per chunk",
           template=Template("Questions per chunk", "NUMBER", "^[1-9][0-9]{0,3}$", "Questions (or turns) per chunk. Example: 3")),
    Option("conversation", type=bool, help="generate multi-turn conversations instead of single questions", template=_ADV),
    Option("strategy", default="sequential", choices=("sequential", "random"),
           help="chunk selection: all chunks in one session, or random samples",
           template=Template("Strategy", "ENUM", "^(sequential|random)$", "Chunk selection strategy. Example: random")),
    Option("num-samples", type=int, default=5, validate=_positive("--num-samples"), help="sessions drawn (--strategy random)",
           template=_ADV),
    Option("chunks-per-sample", type=int, default=3, validate=_positive("--chunks-per-sample"),
           help="chunks per drawn session (--strategy random)", template=_ADV),
    Option("with-replacement", type=bool, help="sample chunks with replacement (--strategy random)", template=_ADV),
    Option("max-chunk-size", type=int, default=2000, validate=_positive("--max-chunk-size"), help="characters per chunk",
           template=_ADV),
    Option("min-chunk-size", type=int, default=200, validate=_non_negative("--min-chunk-size"),
           help="a size split ends at a paragraph or sentence only beyond this many characters", template=_ADV),
    Option("markdown-overlap", type=int, default=100, validate=_non_negative("--markdown-overlap"),
           help="characters shared by consecutive size-split chunks", template=_ADV),
    Option("header-levels", default="1,2,3", validate=_levels, help="Markdown header levels that start a chunk", template=_ADV),
    Option("seed-example", repeatable=True, metavar="QUESTION", help="example question whose style to match; repeatable",
           template=_ADV),
    Option("system-prompt-file", metavar="PATH", path=True,
           help="custom system prompt (jinja2; slots context, num_queries / num_turns, seed_examples_section)",
           template=_ADV),
    Option("generator-base-url", default_note="--judge-base-url",
           help="OpenAI-compatible endpoint of the generating LLM",
           template=Template("Generator endpoint", "TEXT", _URL, "Endpoint of the generating LLM. Example: http://localhost:8000/v1")),
    Option("generator-model", default_note="--judge-model", help="generating model name",
           template=Template("Generator model", "TEXT", _NAME, "Generating model name. Example: gpt-4o-mini")),
    Option("generator-api-key-env", default="OPENAI_API_KEY", help="environment variable with the generator's API key",
           template=_ADV),
    Option("generator-cache", path=True, default_note="$FAIR_FORGE_JUDGE_CACHE or the user cache folder",
           help="SQLite cache of generator answers (a re-run with the same corpus and seed makes no call)", template=_ADV),
    Option("generator-timeout", type=float, default=60.0, validate=_positive("--generator-timeout", " seconds"),
           help="seconds per generator request", template=_ADV),
    Option("generator-retries", type=int, default=3, validate=_non_negative("--generator-retries"),
           help="client retries per generator request (429/5xx/time-outs)", template=_ADV),
    Option("generator-max-concurrency", type=int, default=16, validate=_positive("--generator-max-concurrency"),
           help="concurrent generator requests per worker", template=_ADV),
    Option("no-structured-output", type=bool, help="ask for JSON in the prompt instead of a JSON-schema response_format",
           template=_ADV),
    Option("parquet", type=bool, help="also write dataset.parquet", template=_ADV),
))

RUN = Group("Run the assistant under test (spec §11)", (
    Option("input", metavar="GLOB", repeatable=True, path=True, help="dataset files to run (JSON, JSONL, Parquet); repeatable",
           default_note="required by run_assistant; the loop uses the generated set",
           template=Template("Input files", "GCS_READ_FILE", "^gs://[^\\n\\r]+$", "Dataset files. Example: gs://b/sets/*.jsonl")),
    Option("assistant-kind", default="openai", choices=("openai", "http"),
           help="OpenAI-compatible chat endpoint, or a generic HTTP JSON endpoint (--request-template, --response-path)",
           template=Template("Assistant kind", "ENUM", "^(openai|http)$", "Kind of endpoint. Example: openai")),
    Option("assistant-url", help="base URL (openai, e.g. http://localhost:8000/v1) or endpoint URL (http)",
           template=Template("Assistant endpoint", "TEXT", _URL, "Endpoint of the assistant under test. Example: http://bot:8080/v1")),
    Option("assistant-model", help="model name of the assistant (openai)",
           template=Template("Assistant model", "TEXT", _NAME, "Model name of the assistant. Example: my-bot")),
    Option("assistant-api-key-env", default="ASSISTANT_API_KEY", help="environment variable with the assistant's API key",
           template=_ADV),
    Option("request-template", metavar="JINJA_JSON",
           help="JSON body template of an http assistant, e.g. '{\"q\": {{ query | tojson }}}'", template=_ADV),
    Option("request-template-file", metavar="PATH", path=True, help="the request template from a file", template=_ADV),
    Option("response-path", default="answer", help="dotted path of the answer in an http assistant's JSON response",
           template=_ADV),
    Option("send-context", type=bool, help="send the session context as system message (openai)", template=_ADV),
    Option("assistant-cache", metavar="PATH", path=True, default_note="no cache",
           help="SQLite cache of the assistant's answers (a re-run makes no call for answered turns)", template=_ADV),
    Option("assistant-timeout", type=float, default=60.0, validate=_positive("--assistant-timeout", " seconds"),
           help="seconds per assistant request", template=_ADV),
    Option("assistant-retries", type=int, default=3, validate=_non_negative("--assistant-retries"),
           help="client retries per assistant request (429/5xx/time-outs)", template=_ADV),
    Option("assistant-concurrency", type=int, default=16, validate=_positive("--assistant-concurrency"),
           help="sessions in flight per worker", template=_ADV),
    Option("assistant-requests-per-minute", type=float, validate=_positive("--assistant-requests-per-minute"),
           default_note="no limit", help="request-rate limit per worker", template=_ADV),
))

LOOP = Group("Loop (generate → run → audit)", (
    Option("output", default="fair_forge_loop", path=True,
           help="output folder (generate: the files; loop: generated/, run/, audit/)",
           template=Template("Output folder", "GCS_WRITE_FOLDER", "^gs://[^\\n\\r]+$", "Output folder. Example: gs://b/loop",
                             required=True)),
    Option("metrics", default="humanity", help="metrics of the audit (loop)", template=_ADV),
    Option("judge-base-url", help="judge endpoint of the audit (loop); also the generator's default", template=_ADV),
    Option("judge-model", help="judge model of the audit (loop); also the generator's default", template=_ADV),
))


def groups_for(command: str) -> tuple[Group, ...]:
    """The option groups of ``"generate"``, ``"run"`` or ``"loop"``."""
    out_only = Group(LOOP.title, (LOOP.options[0],))
    return {"generate": (COMMON, GENERATE, out_only), "run": (COMMON, RUN, out_only),
            "loop": (COMMON, GENERATE, RUN, LOOP)}[command]


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the options of ``command`` to ``parser`` (help text with defaults, as the audit's)."""
    for g in groups_for(command):
        target = parser.add_argument_group(g.title)
        for o in g.options:
            if command == "run" and o.name == "input":
                o = Option(**{**o.__dict__, "default_note": None})
            o.add_to(target)


def validate(args: Any, command: str) -> None:
    """The declared validations; raises ``ValueError`` with the first failing option's message."""
    for g in groups_for(command):
        for o in g.options:
            v = getattr(args, o.dest, None)
            if o.validate is not None and v is not None:
                msg = o.validate(v)
                if msg:
                    raise ValueError(msg)


def template_metadata(command: str) -> dict:
    """Flex Template parameters of ``command`` from the declarations (options with a
    :class:`~fair_forge_beam.options.Template`)."""
    params = []
    for g in groups_for(command):
        for o in g.options:
            t = o.template
            if not isinstance(t, Template):
                continue
            p: dict[str, Any] = {"name": o.dest, "label": t.label, "helpText": t.help, "isOptional": not t.required,
                                 "paramType": t.param_type, "regexes": [t.regex]}
            if o.choices:
                p["enumOptions"] = [{"value": c, "label": c} for c in o.choices]
            if o.default is not None and not t.required and o.type is not bool:
                p["defaultValue"] = str(o.default)
            params.append(p)
    return {"name": f"fair-forge-beam {command}", "description": f"fair_forge_beam {command} pipeline", "streaming": False,
            "parameters": params}


def run_stage(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]], command: str, job) -> dict:
    """Parse ``argv`` (``sys.argv[1:]`` when ``None``) for a stage command (``"generate"`` or
    ``"run"``), validate it and return ``job(args, beam_args)``. An option that is neither the
    stage's nor Beam's, a failed validation, a ``ValueError`` or a missing file is a one-line
    usage error (``parser.error``, exit status 2)."""
    import sys

    from fair_forge_beam.options import reject_unknown_arguments

    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    reject_unknown_arguments(parser, beam_args)
    try:
        validate(args, command)
        return job(args, beam_args)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
