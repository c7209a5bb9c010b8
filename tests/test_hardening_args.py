"""Hostile arguments and traces: each case below crashed a run with a traceback, hung, or was
ignored silently. Now a bad argument is a usage error (exit code 2, a clear message, no
traceback) and a bad trace a dead letter. All cases fail before any pipeline runs (fast)."""
from __future__ import annotations

import argparse
import json

import pytest

from fair_forge_beam.components.tool_correctness import ToolTraceError, tool_calls, tool_correctness
from pipelines import audit


@pytest.fixture
def small_input(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "conversation": [
        {"qa_id": "1", "query": "What is the refund policy?", "assistant": "24 hours.", "agentic": {"reward": 1}}]}) + "\n",
        encoding="utf-8")
    return p


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        audit.run(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------- tool traces
@pytest.mark.parametrize("step", [10**400, -(10**400)])
def test_huge_integer_step_is_a_trace_error_not_an_overflow(step):
    with pytest.raises(ToolTraceError, match="step"):
        tool_calls([{"tool_name": "calc", "step": step}], "agentic.tools_used")
    with pytest.raises(ToolTraceError):
        tool_correctness({"tools_used": [{"tool_name": "calc", "step": step}]}, {"expected_tools": [{"tool_name": "calc"}]})


# ---------------------------------------------------------------- main-job arguments
@pytest.mark.parametrize("runner", ["--runner=Bogus", "--runner=5"])
def test_unknown_runner_is_a_usage_error(small_input, tmp_path, capsys, runner):
    err = _usage_error(["--quiet", runner, "--input", str(small_input), "--output", str(tmp_path / "o")], capsys)
    assert "runner" in err


def test_unknown_runner_in_config_is_a_usage_error(small_input, tmp_path, capsys):
    cfg = tmp_path / "audit.toml"
    cfg.write_text('[beam]\nrunner = "NoSuchRunner"\n', encoding="utf-8")
    err = _usage_error(["--quiet", "--config", str(cfg), "--input", str(small_input), "--output", str(tmp_path / "o")], capsys)
    assert "NoSuchRunner" in err


@pytest.mark.parametrize("spec", ["fixed:99999999999999999999h", "sliding:99999999999999999999d,1h", "session:1e15d"])
def test_window_beyond_beam_timestamps_is_a_usage_error(small_input, tmp_path, capsys, spec):
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o"), "--window", spec], capsys)
    assert "--window" in err


@pytest.mark.parametrize("flag", [["--early-firing", "5s"], ["--allowed-lateness", "10m"]])
def test_window_options_without_window_are_a_usage_error(small_input, tmp_path, capsys, flag):
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o"), *flag], capsys)
    assert flag[0] in err and "--window" in err


def test_output_under_a_file_is_a_usage_error(small_input, tmp_path, capsys):
    """A parent of --output is a file (fresh-clone trial: was an OSError traceback, exit 1)."""
    (tmp_path / "outfile").write_text("x", encoding="utf-8")
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "outfile" / "sub")], capsys)
    assert "--output" in err and "cannot create folder" in err


def test_huge_agentic_k_is_a_usage_error(small_input, tmp_path, capsys):
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o"), "--metrics", "agentic",
                        "--agentic-k", "100000000"], capsys)
    assert "k" in err and "1000" in err


def test_huge_prompt_k_is_a_usage_error(small_input, tmp_path, capsys):
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o"), "--metrics",
                        "prompt_evaluator", "--seed-prompt", "x", "--prompt-k", "100000000", "--similarity-embedder", "hashing",
                        "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"], capsys)
    assert "k" in err and "1000" in err


def test_agentic_and_prompt_evaluator_reject_huge_k_in_the_python_api():
    from fair_forge_beam.metrics.agentic import Agentic
    from fair_forge_beam.metrics.prompt_evaluator import check_k

    with pytest.raises(ValueError, match="1000"):
        Agentic(k=10**8, correctness_source="label")
    assert Agentic(k=1000, correctness_source="label").k == 1000
    with pytest.raises(ValueError, match="1000"):
        check_k(10**8)
    assert check_k(1000) == 1000 and check_k(1) == 1


# ---------------------------------------------------------------- Regulatory corpus
@pytest.fixture
def binary_corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a-policy.md").write_text("Refunds are possible within 24 hours of booking.\n", encoding="utf-8")
    (d / "b-scan.md").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00binary")
    return d


def test_binary_corpus_file_is_a_usage_error(small_input, tmp_path, capsys, binary_corpus):
    err = _usage_error(["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o"), "--metrics", "regulatory",
                        "--regulatory-corpus", str(binary_corpus), "--regulatory-embedder", "hashing",
                        "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"], capsys)
    assert "b-scan.md" in err


def test_binary_corpus_file_fails_at_construction(binary_corpus):
    from fair_forge_beam.components.embedder import HashingEmbedder
    from fair_forge_beam.metrics.regulatory import Regulatory

    with pytest.raises(ValueError, match="b-scan.md"):
        Regulatory(corpus=str(binary_corpus), embedder=HashingEmbedder(), judge={"model": "m", "base_url": "http://127.0.0.1:9/v1"})


@pytest.mark.parametrize("bad", [["--ci-level", "1.5"], ["--ci-level", "0"], ["--mc-samples", "-5"], ["--mc-samples", "10"]])
def test_statistical_options_are_checked_in_frequentist_mode_too(bad, tmp_path):
    """A bad --ci-level or --mc-samples was silently accepted with --mode frequentist (a fresh-user
    trial); it is the same usage error in both modes."""
    from pipelines import audit

    with pytest.raises(SystemExit) as e:
        audit.run(["--mode", "frequentist", "--metrics", "humanity", "--output", str(tmp_path / "o"), *bad])
    assert e.value.code == 2


@pytest.mark.parametrize("module, argv", [
    ("pipelines.audit", ["--input", "a.jsonl", "b.jsonl", "--output", "o"]),  # an unquoted glob the shell expanded
    ("pipelines.audit", ["--output", "o", "--slices", "overall,", "region"]),  # a list written with a space
    ("pipelines.optimize", ["--output", "o", "--model", "m", "stray"]),
    ("pipelines.explain", ["--input", "x", "--output", "o", "--model", "tiny-random", "stray"]),
    ("pipelines.generate", ["--output", "o", "stray"]),
    ("pipelines.run_assistant", ["--output", "o", "stray"]),
    ("pipelines.loop", ["--output", "o", "stray"]),
])
def test_a_value_of_no_option_is_a_usage_error_in_every_entry_point(module, argv, tmp_path, capsys, monkeypatch):
    """What ``parse_known_args`` leaves over goes to Beam, which ignores a value of no option with
    a warning: the second file of ``--input a b`` was silently not read (a gate then passed on
    part of the data). Every command-line entry point refuses it (exit 2), before reading."""
    import importlib

    monkeypatch.chdir(tmp_path)
    entry = importlib.import_module(module)
    with pytest.raises(SystemExit) as exc:
        (entry.run if hasattr(entry, "run") else entry.main)(argv)
    assert exc.value.code == 2 and "unexpected argument(s)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_quiet_also_silences_the_http_clients_info_lines_for_one_run():
    """A judge run with --quiet printed one INFO line per request (httpx's logger; the pinned openai
    client's is httpx2); --quiet (issue 27: nothing but gate failures and errors) raises the HTTP
    clients' loggers to ERROR for the run and restores them after."""
    import logging

    from fair_forge_beam.progress import QuietLogs

    for name in ("httpx", "httpx2"):
        httpx_log = logging.getLogger(name)
        before = httpx_log.level
        httpx_log.setLevel(logging.INFO)
        try:
            with QuietLogs() as levels:
                levels.quiet()
                assert not httpx_log.isEnabledFor(logging.WARNING)
                assert not logging.getLogger("fair_forge_beam").isEnabledFor(logging.WARNING)
                assert httpx_log.isEnabledFor(logging.ERROR)
            assert httpx_log.level == logging.INFO  # restored
        finally:
            httpx_log.setLevel(before)


def test_the_http_clients_per_request_lines_are_off_by_default_and_a_callers_level_is_kept():
    """trial35 T9: a judge run printed one ``INFO httpx2: HTTP Request`` line per call (1,488 on
    README's data) between the progress lines; only --quiet removed them, and with them the progress
    and the summary. An entry point's logging puts the HTTP clients' loggers at WARNING (their
    warnings and errors are kept); a level a caller set before is left as it is."""
    import logging

    from fair_forge_beam.progress import HTTP_CLIENT_LOGGERS, cli_logging

    assert {"httpx2", "httpx", "httpcore", "openai"} <= set(HTTP_CLIENT_LOGGERS)
    loggers = [logging.getLogger(n) for n in HTTP_CLIENT_LOGGERS]
    before = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.NOTSET)
        logging.getLogger("openai").setLevel(logging.DEBUG)  # the caller's own choice
        cli_logging()
        for lg in loggers[:-1]:
            assert not lg.isEnabledFor(logging.INFO) and lg.isEnabledFor(logging.WARNING), lg.name
        assert logging.getLogger("openai").level == logging.DEBUG
        assert logging.getLogger("fair_forge_beam").level == logging.NOTSET  # our progress lines untouched
    finally:
        for lg, level in zip(loggers, before):
            lg.setLevel(level)


def _numeric_options():
    from fair_forge_beam.options import command_options

    return [o for o in command_options("audit").values() if o.type in (int, float)]


@pytest.mark.parametrize("text", ["\uff11\uff10", "1_0", " 7", "\u0661", "0x1"])
def test_every_numeric_option_takes_ascii_digits_only(text, capsys):
    """Hostile-tester trial: --max-record-bytes took full-width digits and '1_000' (Python's int and
    float take every Unicode digit, underscores and spaces). The class: every int and float option."""
    from pipelines.audit import build_parser

    options = _numeric_options()
    assert len(options) > 20
    for o in options:
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args([f"{o.flag}={text}"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {o.flag}: {text!r} is not a" in err and "digits 0-9" in err, (o.flag, err)


def test_every_numeric_config_option_must_be_a_toml_number(tmp_path):
    """A quoted number in a --config file ('ci-level = "0.9"') ran as if unquoted."""
    from fair_forge_beam.audit_config import NOT_IN_CONFIG, TOP_LEVEL, ConfigError, config_to_argv
    from pipelines.audit import build_parser

    parser = build_parser()
    top = {v: k for k, v in TOP_LEVEL.items()}  # option name -> its top-level key (seed)
    for o in _numeric_options():
        name = o.flag[2:]
        if name in NOT_IN_CONFIG:
            continue

        def doc(v):
            return {top[name]: v} if name in top else {"options": {name: v}}

        for bad in ("1", True) + ((1.5,) if o.type is int else ()):
            with pytest.raises(ConfigError, match=f"{name}: expected a (whole )?number"):
                config_to_argv(parser, doc(bad), str(tmp_path / "c.toml"))
        job, _, _ = config_to_argv(parser, doc(2), str(tmp_path / "c.toml"))
        assert job == [f"--{name}=2"]


def _every_commands_parser():
    from fair_forge_beam.options import OneLineErrorParser, add_arguments
    from fair_forge_beam.rollup import build_parser as rollup
    from pipelines import audit, generate, loop, run_assistant, trend

    optimize = OneLineErrorParser(prog="optimize")
    add_arguments(optimize, command="optimize")
    return {"audit": audit.build_parser(), "rollup": rollup(), "trend": trend.build_parser(), "loop": loop.build_parser(),
            "generate": generate.build_parser(), "run": run_assistant.build_parser(), "optimize": optimize}


def test_every_numeric_option_takes_a_sign_and_says_so():
    """Issue 28 leftover: ``+1000`` was accepted while the message said "digits 0-9". The rule (a sign,
    then ASCII digits) and every refusal's words agree, on every numeric option of every command; no
    option reads numbers with Python's int or float (they take '1_000' and full-width digits)."""
    from fair_forge_beam.options import NUMBER_RULE, strict_float, strict_int

    seen = 0
    for command, parser in _every_commands_parser().items():
        for action in parser._actions:
            assert action.type not in (int, float), (command, action.option_strings)
            base = getattr(action.type, "base", action.type)  # a ranged number type (options.number_type)
            if base not in (strict_int, strict_float):
                continue
            seen += 1
            assert base("+7") == 7 and base("-7") == -7 and base("7") == 7
            for bad in ("\uff17", "7 ", "+-7", "0x7"):
                with pytest.raises(argparse.ArgumentTypeError) as exc:
                    action.type(bad)
                assert NUMBER_RULE in str(exc.value) and "digits 0-9" in str(exc.value), (command, action.dest, exc.value)
    assert seen > 25
    assert "sign" in NUMBER_RULE


def test_every_numeric_option_of_every_command_declares_and_enforces_its_range(capsys):
    """Issue 28, hostile-tester trial 3: ``--mc-samples 9999999999999999999999`` (and TOML 2^63-1) ended
    in a traceback, ``--progress-interval 1e300`` in a thread's traceback, ``--assistant-timeout
    1e300`` / ``--*-requests-per-minute 1e-300`` / ``--assistant-retries 10^20`` were accepted and made
    every call fail (exit 4). Every numeric option of every command declares a range (options.Range)
    and its parser refuses a value outside it in one line naming the range."""
    from fair_forge_beam.options import TABLE, Range

    assert all(o.valid is not None for o in TABLE.values() if o.type in (int, float))
    seen = 0
    for command, parser in _every_commands_parser().items():
        for action in parser._actions:
            if getattr(action.type, "base", action.type) not in (strict_int_, strict_float_):
                continue
            valid = getattr(action.type, "valid", None)
            assert isinstance(valid, Range), (command, action.option_strings)
            seen += 1
            for bad in ("9" * 25, "-" + "9" * 25) + (("1e300", "1e-300") if action.type.base is strict_float_ else ()):
                if valid.problem(float(bad)) is None:
                    continue
                with pytest.raises(SystemExit) as exc:
                    parser.parse_args([action.option_strings[0], bad] + _required(command))
                assert exc.value.code == 2
                err = capsys.readouterr().err.strip()
                assert len(err.splitlines()) == 1 and valid.text() in err and "Traceback" not in err, (command, err)
    assert seen > 40


strict_int_ = __import__("fair_forge_beam.options", fromlist=["strict_int"]).strict_int
strict_float_ = __import__("fair_forge_beam.options", fromlist=["strict_float"]).strict_float


def _required(command):
    return {"rollup": ["--from", "x", "--output", "y"], "trend": []}.get(command, [])


@pytest.mark.parametrize("argv", [
    ["--mc-samples", "9999999999999999999999"], ["--mc-samples", "10000000"], ["--progress-interval", "1e300"],
    ["--judge-timeout", "1e300"], ["--judge-requests-per-minute", "1e-300"], ["--judge-retries", "100000000000000000000"],
])
def test_the_audit_refuses_numbers_out_of_range_in_one_line(argv, capsys, tmp_path):
    from pipelines import audit

    with pytest.raises(SystemExit) as exc:
        audit.run(argv + ["--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "must be" in err[0] and argv[0] in err[0], err


def test_a_config_number_out_of_range_is_a_usage_error(capsys, tmp_path):
    from pipelines import audit

    cfg = tmp_path / "a.toml"
    cfg.write_text(f"[options]\nmc-samples = {2**63 - 1}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.run(["--config", str(cfg), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "between 100 and 1,000,000" in err[0], err


def test_every_numeric_beam_option_has_a_range():
    from fair_forge_beam.options import BEAM_RANGES, _beam_parser

    numeric = {a.dest for a in _beam_parser()._actions if a.type in (int, float)}
    assert numeric <= set(BEAM_RANGES), numeric - set(BEAM_RANGES)


@pytest.mark.parametrize("bad", ["--direct_num_workers=two", "--direct_num_workers=-3", "config"])
def test_a_bad_beam_option_value_is_one_line(bad, capsys, tmp_path):
    """Hostile-tester trial 3: ``--direct_num_workers=two`` (also in a config's [beam]) printed argparse's
    129-line usage block; ``=-3`` ended in an IndexError traceback (audit and rollup)."""
    from fair_forge_beam.rollup import run as rollup
    from pipelines import audit

    if bad == "config":
        cfg = tmp_path / "b.toml"
        cfg.write_text('[beam]\ndirect_num_workers = "two"\n', encoding="utf-8")
        argv = ["--config", str(cfg)]
    else:
        argv = [bad]
    for run, rest in ((audit.run, ["--output", str(tmp_path / "o")]),
                      (rollup, ["--from", str(tmp_path), "--output", str(tmp_path / "r")])):
        if bad == "config" and run is rollup:
            continue
        with pytest.raises(SystemExit) as exc:
            run(argv + rest)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and "--direct_num_workers" in err[0] and "Traceback" not in err[0], err


def test_docs_cli_lists_every_numeric_option_s_range():
    """docs/cli.md's Valid ranges table is the declarations' (a changed bound fails here)."""
    from helpers import REPO
    from fair_forge_beam.options import TABLE

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for o in TABLE.values():
        if o.type in (int, float):
            assert f"| `--{o.name}` | {o.valid.text()} |" in text, o.name


def test_a_config_number_is_toml_s_own_integer_syntax(tmp_path):
    """Trial 28b B8: ``seed = 0x10`` in a --config file runs with seed 16. That is TOML's own integer
    syntax (hexadecimal, octal, binary, underscores between digits): the file holds the integer 16,
    so strict typing holds and it is accepted, in options and [[gates]] thresholds alike; the same
    spellings as text (on the command line, quoted in the file, in a gate's text) are refused."""
    from fair_forge_beam.audit_config import ConfigError, expand_argv
    from fair_forge_beam.reports.gates import GateConfigError, make_gate

    parser = audit.build_parser()
    cfg = tmp_path / "c.toml"
    for spelled, value in (("0x1000", 4096), ("0o10000", 4096), ("0b1000000000000", 4096), ("4_096", 4096), ("+4_096", 4096)):
        cfg.write_text(f"seed = {spelled}\n[options]\nmc-samples = {spelled}\n"
                       f'[[gates]]\nmetric = "toxicity"\nfield = "DIDT"\nstat = "ci_high"\nop = "<="\n'
                       f"threshold = {spelled}\n", encoding="utf-8")
        argv, gates = expand_argv(parser, ["--config", str(cfg)])
        assert f"--seed={value}" in argv and f"--mc-samples={value}" in argv, argv
        assert make_gate(gates[0]).threshold == value
        cfg.write_text(f'seed = "{spelled}"\n', encoding="utf-8")
        with pytest.raises(ConfigError, match="expected a whole number"):
            expand_argv(parser, ["--config", str(cfg)])
        with pytest.raises(GateConfigError):
            make_gate(f"toxicity DIDT ci_high <= {spelled}")
        with pytest.raises(SystemExit):
            parser.parse_args(["--seed", spelled])


_LONG = "h" * 100_000


@pytest.mark.parametrize("case", [
    "config metrics", "config seed", "config options key", "config top key", "config gate", "config flag",
    "cli seed", "cli ci-level", "cli metrics", "cli slices", "cli gate", "cli mc-samples"])
def test_a_usage_error_quotes_a_long_value_shortened(small_input, tmp_path, capsys, case):
    """Trial 28b B9: ``metrics = ["h" * 50_000_000]`` in a --config file was a 50,000,222-character
    "one-line" error. Every usage error quotes a user's value through one function
    (:func:`fair_forge_beam.quoting.quoted`): at most 200 characters of it, its length said."""
    cfg = tmp_path / "c.toml"
    argv = ["--quiet", "--input", str(small_input), "--output", str(tmp_path / "o")]
    body = {"config metrics": f'metrics = ["{_LONG}"]', "config seed": f'seed = "{_LONG}"',
            "config options key": f'[options]\n{_LONG} = 1', "config top key": f'{_LONG} = 1',
            "config gate": f'gates = ["{_LONG}"]', "config flag": f'[options]\nno-clustering = "{_LONG}"'}.get(case)
    if body is not None:
        cfg.write_text(body + "\n", encoding="utf-8")
        argv += ["--config", str(cfg)]
    else:
        flag = case.split(" ", 1)[1]
        argv += [f"--{flag}", _LONG if flag != "metrics" else f"humanity,{_LONG}"]
    err = _usage_error(argv, capsys)
    assert len(err) < 1000 and "100,000 characters" in err, (len(err), err[:300], err[-300:])


_WORKER = '''
import logging, sys
import openai
from fair_forge_beam.components.replies import http_client, openai_http_client
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

logging.basicConfig(level=logging.INFO)  # a Beam worker's logging: no entry point, no cli_logging
if sys.argv[1] == "user-info":
    logging.getLogger("httpx2").setLevel(logging.INFO)  # a level set before the client is made: kept
with ScriptedOpenAIServer(lambda req: "hi") as srv:
    client = openai.OpenAI(base_url=srv.base_url, api_key="unused",
                           http_client=openai_http_client(openai, 10, 10**6, lambda request: None))
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    http_client(10, {}).get(srv.base_url + "/models")
'''


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["none", "user-info"])
def test_the_http_clients_per_request_lines_are_off_where_the_client_is_made(tmp_path, preset):
    """trial35b B4: with ``--direct_running_mode multi_processing`` the judge's ``INFO httpx2: HTTP
    Request`` lines came back, one per request: a Beam worker process never runs an entry point's
    ``cli_logging``. A process that only makes the package's clients (as a worker does) and logs at
    INFO prints none; a level the user set on the client's logger before is kept."""
    import os
    import subprocess
    import sys

    from helpers import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _WORKER, preset], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "HTTP Request:" in line]
    assert len(lines) == (0 if preset == "none" else 2), proc.stderr
