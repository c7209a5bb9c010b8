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
