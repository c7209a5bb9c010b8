"""Typed options declared once (issue 14 item 3): ``fair_forge_beam.options`` generates the
argparse flags, the config-file keys, the Flex Template metadata and the metric constructors'
keyword arguments; the constructors' defaults equal the declared ones."""
from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from helpers import REPO
from fair_forge_beam import options as O
from fair_forge_beam.audit_config import ConfigError, config_to_argv
from fair_forge_beam.metrics.registry import METRICS
from pipelines import audit

PARSER = audit.build_parser()
ACTIONS = {a.dest: a for a in PARSER._actions if a.option_strings and a.dest != "help"}
FEEDS = sorted({f for o in O.OPTIONS.values() for f in o.feeds})


def test_checked_in_template_metadata_is_the_generated_one():
    text = (REPO / "templates" / "metadata.json").read_text(encoding="utf-8")
    assert text == O.template_metadata_text(METRICS), (
        "templates/metadata.json is stale: python -m fair_forge_beam.metrics.registry --write-template-metadata "
        "templates/metadata.json")


def test_parser_is_the_declarations():
    assert list(ACTIONS) == list(O.OPTIONS)
    for dest, o in O.OPTIONS.items():
        a = ACTIONS[dest]
        assert a.option_strings == [o.flag]
        if o.type is bool:
            assert a.nargs == 0 and a.default is False
            continue
        from fair_forge_beam.options import strict_float, strict_int, user_path

        # numbers: ASCII digits only; a file or folder: ~ expanded (fix28z, trial 28f B8)
        parse = o.parse or (user_path if o.path or o.file else {int: strict_int, float: strict_float}.get(o.type, o.type))
        assert a.default == o.default and (getattr(a.type, "base", a.type) or str) is parse, dest
        assert getattr(a.type, "valid", None) is o.valid, dest  # a numeric option's range is enforced by its parser
        assert list(a.choices or ()) == list(o.choices), dest


def _target(feed: str):
    owner, _, arg = feed.rpartition(".")
    module, _, name = owner.partition(":")
    return getattr(importlib.import_module(module), name), arg


@pytest.mark.parametrize("feed", FEEDS)
def test_constructor_default_equals_the_declared_default(feed):
    cls, arg = _target(feed)
    params = inspect.signature(cls).parameters
    assert arg in params, f"{feed}: no such argument"
    (o,) = [o for o in O.OPTIONS.values() if feed in o.feeds]
    declared = bool(o.default) if o.type is bool else o.default
    if feed in O.KNOWN_DEFAULT_MISMATCHES:
        pytest.skip(O.KNOWN_DEFAULT_MISMATCHES[feed])
    default = params[arg].default
    if o.default is None and o.type is not bool:  # unset: the constructor must accept "not given"
        assert default is None or default is inspect.Parameter.empty or default == "", feed
    else:
        assert default == declared, f"{feed}: constructor default {default!r}, declared {declared!r}"


def test_constructor_kwargs_use_the_declared_defaults():
    vision = "fair_forge_beam.metrics.vision:Vision"
    assert O.constructor_kwargs(vision, {}) == {"threshold": 0.75}
    assert O.constructor_kwargs(vision, {"vision_threshold": 0.5}) == {"threshold": 0.5}
    reg = O.constructor_kwargs("fair_forge_beam.metrics.regulatory:Regulatory", {"regulatory_top_k": 4})
    assert reg == {"chunk_size": 1000, "chunk_overlap": 100, "top_k": 4, "similarity_threshold": 0.3}
    assert O.value({"bestof_mode": ""}, "bestof_mode") == "king"  # empty = not given, as from a config file
    assert O.value({}, "guardian_logprobs") is False


def test_registry_has_no_second_default():
    src = (REPO / "fair_forge_beam" / "metrics" / "registry.py").read_text(encoding="utf-8")
    import re

    assert not re.search(r"options\.get\([^()]*,", src), "options.get(name, default): declare the default instead"
    for literal in ("0.75", "0.80", "0.7", '"king"', '"session"', '"airline"', '"inclusive"', '"declared"',
                    '"buckets"', '"agentic.reward"', '"llama_guard"', '"OPENAI_API_KEY"'):
        assert literal not in src.split("def build_metric")[0].split("_M = ")[1], literal


def test_help_shows_the_defaults():
    out = subprocess.run([sys.executable, "-m", "pipelines.audit", "--help"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    flat = " ".join(out.split())
    for text in ("Monte-Carlo draws / bootstrap replicates (default: 5000)", "(default: 0.75)",
                 "prompt_evaluator: generations per query (must be >= 1) (default: 10)",
                 "(default: judge when --judge-base-url is given, else label)",
                 "statistical mode (default: frequentist)"):
        assert text in flat, text


def test_validation_is_a_one_line_usage_error(capsys):
    # the declared range first (issue 28: every numeric option has one), then the option's own check
    with pytest.raises(ValueError, match=r"^--judge-timeout must be between 0.1 and 86,400 seconds, got 0.0$"):
        O.validate({"judge_timeout": 0.0})
    with pytest.raises(ValueError, match=r"^--judge-retries must be between 0 and 100, got -1$"):
        O.validate({"judge_retries": -1})
    O.validate(PARSER.parse_args([]))  # the defaults are valid
    with pytest.raises(SystemExit) as exc:
        audit.run(["--judge-retries", "-1", "--output", "unused"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--judge-retries: must be between 0 and 100, got -1" in err and len(err.strip().splitlines()) == 1


def _sample(o):
    if o.type is bool:
        return True
    if o.choices:
        return o.choices[-1]
    if o.type in (int, float):  # a value inside the option's declared range, not its default
        for v in ((1, 100, 5001) if o.type is int else (0.5, 1.5, 61.0)):
            if o.valid.problem(v) is None and v != o.default:
                return v
    return {int: 1, float: 0.5}.get(o.type, "x")


def test_every_declared_option_is_a_config_key(tmp_path, monkeypatch):
    for dest, o in O.OPTIONS.items():
        if o.name.endswith("api-key-env"):  # a variable named by a given --...-api-key-env must be set (issue 28)
            monkeypatch.setenv(str(_sample(o)), "sk-test-not-a-real-key")
        # a top-level option by its (first) top-level key, any other under [options]
        cfg = {o.config_keys[0]: _sample(o)} if o.config_keys else {"options": {o.name: _sample(o)}}
        if not o.in_config:
            with pytest.raises(ConfigError):
                config_to_argv(PARSER, cfg, str(tmp_path / "a.toml"))
            continue
        job, _, _ = config_to_argv(PARSER, cfg, str(tmp_path / "a.toml"))
        args, rest = PARSER.parse_known_args(job)
        assert rest == [], dest
        got = getattr(args, dest)
        assert (got[0] if o.repeatable else got) == (str(tmp_path / "x") if o.path else _sample(o)), dest
    top, paths, never = O.config_keys()
    assert top["inputs"] == "input" and "output" in paths and never == {"help", "config", "gate", "version"}


def _metric_parsers():
    from pipelines import audit as audit_job
    from pipelines import loop as loop_job

    return {"audit": audit_job.build_parser(), "loop": loop_job.build_parser()}


@pytest.mark.parametrize("command", ["audit", "loop"])
@pytest.mark.parametrize("given, problem", [
    ("humanity,humanity,toxicity", "names humanity more than once"),
    ("humanity,toxicity,", "has an empty entry"),
    ("humanity,,toxicity", "has an empty entry"),
    (",", "empty"),
    ("", "empty"),
])
def test_a_metric_list_with_an_empty_or_repeated_entry_is_refused_where_it_is_parsed(command, given, problem, capsys):
    """Trial 28 (B8): ``--metrics humanity,humanity,toxicity`` and ``humanity,toxicity,`` ran, then a
    roll-up refused them beside ``humanity,toxicity`` ("different settings"). Every command that
    takes --metrics normalises it once, where it is parsed: an empty entry or a repeated name is a
    one-line usage error."""
    parser = _metric_parsers()[command]
    with pytest.raises(SystemExit) as ei:
        parser.parse_known_args(["--metrics", given])
    assert ei.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "argument --metrics: " in lines[0] and problem in lines[0], lines


@pytest.mark.parametrize("command", ["audit", "loop"])
def test_a_metric_list_is_one_spelling_once_parsed(command):
    parser = _metric_parsers()[command]
    assert parser.parse_known_args(["--metrics", " humanity , toxicity"])[0].metrics == "humanity,toxicity"
    assert parser.parse_known_args([])[0].metrics == "humanity"


def test_a_rollup_reads_older_metric_lists_as_sets():
    """Runs written before the normalisation may hold a repeated or empty entry: the same metrics."""
    from fair_forge_beam.rollup import _settings

    def manifest(text):
        return {"config": {"metrics": [m for m in text.split(",")], "inputs": []}, "options": {"metrics": text}}

    base = _settings(manifest("humanity,toxicity"))
    for old in ("humanity,humanity,toxicity", "humanity,toxicity,", "toxicity, humanity"):
        assert _settings(manifest(old)) == base, old


ALL_OPTIONS = {d: o for c in ("audit", *O.COMMANDS) for d, o in O.command_options(c).items()}
URL_OPTIONS = sorted(d for d in ALL_OPTIONS if d.endswith("url"))


def test_every_url_option_is_checked_before_the_pipeline():
    """Issue 28 B5: ``--judge-base-url 'htp:/127.0.0.1:8000/v1'`` was retried as a connection error
    for minutes. Every endpoint option (judge, guardian, generator, assistant, optimizer) is an
    http(s) URL with a host, checked by the declared validation: a one-line usage error."""
    assert {"judge_base_url", "guardian_base_url", "generator_base_url", "assistant_url", "base_url"} <= set(URL_OPTIONS)
    for dest in URL_OPTIONS:
        flag = ALL_OPTIONS[dest].flag
        for bad, why in [("htp:/127.0.0.1:8000/v1", "the scheme is 'htp'"), ("127.0.0.1:8000/v1", "no scheme"),
                         ("http:///v1", "no host"), ("http://h:99999/v1", "Port out of range"),
                         ("file:///etc/passwd", "the scheme is 'file'"), (" http://h/v1", "")]:
            with pytest.raises(ValueError, match=f"^{flag} must be an http:// or https:// URL with a host") as ei:
                O.validate({dest: bad}, next(c for c in ("audit", *O.COMMANDS) if dest in O.command_options(c)))
            assert why in str(ei.value) and "\n" not in str(ei.value)
        for good in ("http://localhost:8000/v1", "https://api.example.com/v1", "http://[::1]:8080/v1", "HTTPS://h"):
            O.validate({dest: good}, next(c for c in ("audit", *O.COMMANDS) if dest in O.command_options(c)))


@pytest.mark.parametrize("argv", [
    ["--metrics", "context", "--judge-base-url", "htp:/127.0.0.1:1/v1", "--judge-model", "m"],
    ["--metrics", "bias", "--guardian-base-url", "localhost:1/v1", "--guardian-model", "m"],
])
def test_a_mistyped_endpoint_is_a_usage_error_in_the_audit(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        audit.run(argv + ["--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "must be an http:// or https:// URL" in err[0], err
    assert not (tmp_path / "out").exists()
