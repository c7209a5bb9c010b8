"""Issue 28, trial 28f B15 (fix28z): ``--input-format bfcl`` said "pass answers_path", a parameter
the audit's command line does not have. The class: an error raised by library code that names a
Python parameter reaches a command-line user in the command line's words — the option that sets it,
or how to do without one — translated in one place (``options.command_line_words``, called by every
command's one-line error)."""
from __future__ import annotations

import json
import re

import pytest


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def _bare_parameters(line: str) -> set:
    """The library parameters of the table that ``line`` names as bare words (not as an option)."""
    from fair_forge_beam.options import api_parameters

    words = set(re.findall(r"(?<![\w.\-/'\"`])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w\-/'\"`])", line))
    found = words & set(api_parameters())
    if "the Python API's answers_path" in line:  # named as the Python API's, on purpose
        found.discard("answers_path")
    return found


def _bfcl_questions(tmp_path):
    q = tmp_path / "BFCL_v4_multi_turn_base.json"
    q.write_text(json.dumps({"id": "multi_turn_base_0", "question": [[{"role": "user", "content": "hi"}]],
                             "involved_classes": []}) + "\n")
    return q


def test_bfcl_without_its_answer_file_names_what_the_audit_offers(tmp_path, capsys):
    from pipelines.audit import run

    q = _bfcl_questions(tmp_path)
    with pytest.raises(SystemExit) as exc:
        run(["--input-format", "bfcl", "--input", str(q), "--output", str(tmp_path / "out")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "pass answers_path" not in line and not _bare_parameters(line)
    assert "possible_answer_<name>" in line and "--answers FILE" in line and "docs/metrics/agentic.md" in line


def test_the_converter_names_its_own_option(tmp_path, capsys):
    from fair_forge_beam.io.agentic_sources import main

    q = _bfcl_questions(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["bfcl", str(q), str(tmp_path / "out.jsonl")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and line.endswith("pass --answers (every option: python -m "
                                                 "fair_forge_beam.io.agentic_sources --help)"), line


def test_the_python_api_still_names_its_parameter(tmp_path):
    from fair_forge_beam.io.agentic_sources import bfcl_sessions

    with pytest.raises(ValueError, match="pass answers_path"):
        list(bfcl_sessions(str(_bfcl_questions(tmp_path))))


def test_bfcl_with_a_window_names_the_option_not_the_reader_s_parameter(tmp_path, capsys):
    from pipelines.audit import run

    q = _bfcl_questions(tmp_path)
    with pytest.raises(SystemExit) as exc:
        run(["--input-format", "bfcl", "--input", str(q), "--window", "fixed:1h", "--output", str(tmp_path / "out")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "file_format" not in line and "--input-format bfcl is read by a batch audit only" in line


@pytest.mark.parametrize("message, prog, expected", [
    ("file_format must be auto, json, jsonl or parquet, got 'x'", "fair-forge-beam",
     "--input-format must be auto, json, jsonl or parquet, got 'x'"),
    ("max_record_bytes must be > 0, got 0", "fair-forge-beam", "--max-record-bytes must be > 0, got 0"),
    ("give exactly one of file_patterns or retriever", "fair-forge-beam", "give exactly one of --input or retriever"),
    ("seed_prompt (the system prompt under test) must be a non-empty string", "fair-forge-beam run",
     "--seed-prompt (the system prompt under test) must be a non-empty string"),
    ("x; pass answers_path", "python -m fair_forge_beam.io.agentic_sources", "x; pass --answers"),
    # a field of the data, a quoted value, a dotted path or a file name is never a parameter
    ("no correctness label at 'label_field'", "fair-forge-beam", "no correctness label at 'label_field'"),
    ("agentic.label_field is missing", "fair-forge-beam", "agentic.label_field is missing"),
    ("cannot read out/max_record_bytes.json", "fair-forge-beam", "cannot read out/max_record_bytes.json"),
])
def test_command_line_words(message, prog, expected):
    from fair_forge_beam.options import command_line_words

    assert command_line_words(message, prog) == expected


def test_every_parameter_an_option_feeds_is_named_by_that_option():
    """The derived table: a parameter that one option feeds is that option on the command line."""
    from fair_forge_beam.options import API_PARAMETERS, COMMANDS, api_parameters, command_options

    feeders: dict = {}
    for command in (*COMMANDS, "audit"):
        for o in command_options(command).values():
            for target in o.feeds:
                feeders.setdefault(target.rsplit(".", 1)[-1], set()).add(o.flag)
    table = api_parameters()
    assert table["max_record_bytes"]["*"] == "--max-record-bytes" and table["mc_samples"]["*"] == "--mc-samples"
    assert "api_key_env" not in table  # fed by --judge-api-key-env and --guardian-api-key-env: not known which
    for arg, offers in table.items():
        if arg not in API_PARAMETERS:
            assert feeders[arg] == {offers["*"]}, arg
