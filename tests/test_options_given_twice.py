"""Issue 28 (B11): an option given twice on the command line (``--mode frequentist --mode bayesian``,
``--output a --output b``) ran with the last one, without a word. Every single-valued option of
every command is now a one-line usage error (exit 2) naming the option and both values; options
meant to repeat stay repeatable; a ``--config`` file's value that the command line also gives is
replaced by it (never "given twice")."""
from __future__ import annotations

import argparse

import pytest

from fair_forge_beam.options import SINGLE_VALUED_ACTIONS


def _parsers() -> dict:
    from fair_forge_beam.rollup import build_parser as rollup
    from pipelines import audit, generate, loop, run_assistant, trend

    return {"audit": audit.build_parser(), "generate": generate.build_parser(), "run": run_assistant.build_parser(),
            "loop": loop.build_parser(), "rollup": rollup(), "trend": trend.build_parser()}


def _single_valued(parser) -> list[str]:
    return [a.option_strings[-1] for a in parser._actions
            if a.option_strings and a.nargs != 0 and a.dest != "help" and isinstance(a, SINGLE_VALUED_ACTIONS)]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("command", ["audit", "generate", "run", "loop", "rollup", "trend"])
def test_every_single_valued_option_of_every_command_given_twice_is_a_usage_error(command, capsys):
    parser = _parsers()[command]
    flags = _single_valued(parser)
    assert len(flags) >= 2, flags
    for flag in flags:
        for argv in ([flag, "v1", flag, "v2"], [f"{flag}=v1", flag, "v2"]):
            with pytest.raises(SystemExit) as exc:
                parser.parse_known_args(argv)
            line = _one_line(capsys)
            assert exc.value.code == 2, (flag, line)
            assert f"{flag} given twice: 'v1', then 'v2'; give it once" in line, line


def test_the_main_job_and_the_loop_refuse_it_through_their_real_parsing(tmp_path, capsys):
    from pipelines import audit, loop

    cases = {
        ("audit", "--mode"): lambda: audit.parse_args(["--mode", "frequentist", "--mode", "bayesian", "--output", "o"]),
        ("audit", "--output"): lambda: audit.parse_args(["--output", "a", "--output", "b"]),
        ("audit", "--runner"): lambda: audit.parse_args(["--runner", "DirectRunner", "--runner=FnApiRunner", "--output", "o"]),
        ("audit", "--config"): lambda: audit.parse_args(["--config", "a.toml", "--config", "b.toml"]),
        ("loop", "--mode"): lambda: loop.run(["--mode", "frequentist", "--mode", "bayesian", "--output", str(tmp_path)]),
        ("loop", "--corpus"): lambda: loop.run(["--corpus", "airline", "--corpus", "callcenter", "--output", str(tmp_path)]),
    }
    for (command, flag), call in cases.items():
        with pytest.raises(SystemExit) as exc:
            call()
        line = _one_line(capsys)
        assert exc.value.code == 2 and f"{flag} given twice: " in line and ", then " in line, (command, line)


@pytest.mark.parametrize("command,argv,flag", [
    ("optimize", ["--method", "gepa", "--method", "miprov2"], "--method"),
    ("explain", ["--model", "a", "--model", "b", "--input", "x", "--output", "y"], "--model"),
    ("compare", ["a", "b", "--json", "x.json", "--json", "y.json"], "--json"),
])
def test_commands_with_their_own_parsers_refuse_it_too(command, argv, flag, capsys):
    import importlib

    module = {"optimize": "pipelines.optimize", "explain": "pipelines.explain",
              "compare": "fair_forge_beam.reports.compare"}[command]
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(module).main(argv)
    line = _one_line(capsys)
    assert exc.value.code == 2 and f"{flag} given twice: " in line, line


def test_repeatable_options_and_repeated_flags_stay_accepted():
    from pipelines import audit

    parser = audit.build_parser()
    ok = ["--input", "a.jsonl", "--input", "b.jsonl", "--gate", "coverage dead_letter_share <= 0.5",
          "--gate", "coverage dead_letter_share <= 0.6", "--quiet", "--quiet", "--output", "o",
          "--experiments=a", "--experiments=b"]
    assert parser.given_twice(ok) is None
    args, beam_args, _ = audit.parse_args(ok, parser)
    assert args.input == ["a.jsonl", "b.jsonl"] and len(args.gate) == 2 and args.output == "o"
    # a value that looks like an option is a value, not the option again
    assert parser.given_twice(["--gate", "--mode x", "--mode", "bayesian"]) is None


def test_a_config_value_is_replaced_by_the_command_line_not_given_twice(tmp_path, capsys):
    from pipelines import audit

    cfg = tmp_path / "audit.toml"
    cfg.write_text('inputs = ["from_file.jsonl"]\nmode = "frequentist"\noutput = "file_out"\n'
                   '[options]\nmc_samples = 200\n[beam]\ndirect_num_workers = 1\n', encoding="utf-8")
    args, beam_args, _ = audit.parse_args(["--config", str(cfg), "--mode", "bayesian", "--input", "cli.jsonl",
                                           "--direct_num_workers=2"])
    assert args.mode == "bayesian" and args.input == ["cli.jsonl"] and args.mc_samples == 200
    assert args.output == str(tmp_path / "file_out") or args.output.endswith("file_out")
    assert beam_args == ["--direct_num_workers=2"], beam_args
    # the command line's own repeat is still an error, with or without a config
    with pytest.raises(SystemExit) as exc:
        audit.parse_args(["--config", str(cfg), "--mode", "bayesian", "--mode", "frequentist"])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "--mode given twice: 'bayesian', then 'frequentist'" in line, line


def test_help_and_docs_say_the_command_line_overrides_the_config():
    from pipelines import audit

    from helpers import REPO

    text = " ".join(audit.build_parser().format_help().split())
    assert "given twice on the command line is a usage error" in text and "replaces the file's value" in text
    data = " ".join((REPO / "docs" / "data.md").read_text(encoding="utf-8").split())
    assert "An option the command line also gives overrides the file" in data
    cli = " ".join((REPO / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert "given twice on the command line of any command" in cli


def _own_parser(monkeypatch, module: str):
    """The parser a command builds inside its ``main`` (optimize, explain, compare), caught as it parses."""
    import importlib

    from fair_forge_beam.options import OneLineErrorParser

    class Caught(Exception):
        pass

    def catch(self, args=None, namespace=None):
        raise Caught(self)

    with monkeypatch.context() as m:
        m.setattr(OneLineErrorParser, "parse_known_args", catch)
        with pytest.raises(Caught) as caught:
            importlib.import_module(module).main([])
    return caught.value.args[0]


@pytest.mark.parametrize("command", ["audit", "generate", "run", "loop", "rollup", "trend", "optimize", "explain", "compare"])
def test_every_option_given_twice_names_both_values_unless_its_declaration_says_they_may_be_secrets(command, capsys,
                                                                                                    monkeypatch):
    """trial48 B5: ``--metrics humanity --metrics toxicity`` said "a text of 8 characters (not shown: it may be a
    secret …), then …" while docs/cli.md says the error names both values. Hidden now only what the option's
    declaration says may be a secret (``Option.holds_secret``: an endpoint URL's option, the request template),
    and, by the one rule of a user's value (``choice_text``), a word far from a closed set's choices or in a
    number's place; every other value (names, lists of names, paths) is quoted."""
    from fair_forge_beam.options import TABLE

    modules = {"optimize": "pipelines.optimize", "explain": "pipelines.explain", "compare": "fair_forge_beam.reports.compare"}
    parser = _own_parser(monkeypatch, modules[command]) if command in modules else _parsers()[command]
    v1, v2 = "first-value.jsonl", "second-value.toml"
    counts = {"shown": 0, "hidden": 0}
    for action in parser._actions:
        if not (action.option_strings and action.nargs != 0 and action.dest != "help"
                and isinstance(action, SINGLE_VALUED_ACTIONS)):
            continue
        flag = action.option_strings[-1]
        with pytest.raises(SystemExit) as exc:
            parser.parse_known_args([flag, v1, flag, v2])
        line = _one_line(capsys)
        assert exc.value.code == 2, (flag, line)
        declared = TABLE.get(action.dest)
        numeric = (declared.type if declared is not None else action.type) in (int, float)
        if (declared is not None and declared.holds_secret) or action.choices or numeric:
            assert f"{flag} given twice: a text of 17 characters (not shown: it may be a secret given in the wrong " \
                   "place), then a text of 17 characters (not shown" in line, line
            counts["hidden"] += 1
        else:
            assert f"{flag} given twice: '{v1}', then '{v2}'; give it once" in line, line
            counts["shown"] += 1
    assert counts["shown"] >= 1, counts


def test_the_options_whose_values_may_be_secrets_are_those_that_carry_urls_or_templates():
    """The declaration decides (trial48 B5): every endpoint URL's option, and the request template (an
    Authorization header), and no other option of the table."""
    from fair_forge_beam.options import TABLE

    secret = sorted(o.flag for o in TABLE.values() if o.holds_secret)
    assert secret == ["--assistant-url", "--base-url", "--generator-base-url", "--guardian-base-url", "--judge-base-url",
                      "--request-template"], secret


def test_a_value_given_twice_is_shown_with_its_secret_shaped_parts_masked(capsys):
    from pipelines import audit

    key = "sk-" + "a1" * 12
    with pytest.raises(SystemExit):
        audit.build_parser().parse_known_args(["--metrics", "humanity", "--metrics", key])
    line = _one_line(capsys)
    assert "--metrics given twice: 'humanity', then '***'; give it once" in line and key not in line, line
