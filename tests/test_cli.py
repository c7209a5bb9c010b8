"""The command line: one-line usage errors, every default in ``--help``, ``--compare`` warnings."""
from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys

import pytest

from helpers import FNAPI, REPO
from fair_forge_beam.reports.compare import compare_runs, comparison_table, run_differences
from pipelines import audit

HINT = " (every option: fair-forge-beam --help)"


@pytest.mark.parametrize("argv, message", [
    (["--mode", "bayes"], "fair-forge-beam: error: argument --mode: invalid choice: 'bayes'"),
    (["--mod", "bayesian"], "fair-forge-beam: error: unrecognised option(s) --mod: not an option of this job"),
    (["--metrics", "humanity,nope"], "fair-forge-beam: error: unknown metric 'nope'; available:"),
    (["--mc-samples", "many"], "fair-forge-beam: error: argument --mc-samples: 'many' is not a whole number written with "
                               "the digits 0-9"),  # short: shown (quoting.SHORT_SHOWN)
    (["--mc-samples", "hunter2pass"], "fair-forge-beam: error: argument --mc-samples: a text of 11 characters (not shown: it "
                                      "may be a secret given in the wrong place) is not a whole number written with the digits 0-9"),
    (["--mc-samples", "1,000"], "fair-forge-beam: error: argument --mc-samples: '1,000' is not a whole number written with "
                                "the digits 0-9"),
    (["--metrics", "toxicity", "--cluster-points", "/tmp/p.parquet"],  # the default keyword extractor: no clusters
     "fair-forge-beam: error: --cluster-points writes the toxicity clustering's points, but clustering is off"),
    (["--metrics", "humanity", "--cluster-points", "/tmp/p.parquet"],  # its declaration: read by toxicity only
     "fair-forge-beam: error: --cluster-points: not read by a run of --metrics humanity: only metric toxicity reads it"),
])
def test_usage_error_is_one_line_with_a_hint(argv, message, tmp_path, audit_command):
    # in this process (each kind is also a process in test_every_command_gives_a_one_line_usage_error); the first also
    # as the process, the same answer
    proc = audit_command([*argv, "--output", str(tmp_path / "o")], REPO, process=argv == ["--mode", "bayes"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(message), lines[0]
    assert lines[0].endswith(HINT)
    assert "usage:" not in proc.stderr and proc.stdout == ""


def test_usage_error_message_cannot_break_the_line(capsys):
    from fair_forge_beam.options import OneLineErrorParser

    with pytest.raises(SystemExit) as ei:
        OneLineErrorParser(prog="fair-forge-beam").error("bad value 'a\nfair-forge-beam: forged'")
    assert ei.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["fair-forge-beam: error: bad value 'a fair-forge-beam: forged'" + HINT]


def test_help_shows_every_options_default():
    parser = audit.build_parser()
    missing = [a.option_strings[-1] for a in parser._actions
               if a.option_strings and a.option_strings != ["-h", "--help"] and "(default: " not in (a.help or "")]
    assert missing == []
    out = subprocess.run([sys.executable, "-m", "pipelines.audit", "--help"], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=300).stdout
    flat = " ".join(out.split())
    for text in ("no progress lines on stderr and no summary table (default: off)", "(default: 5.0)", "(default: no comparison)",
                 "(default: not set)", "(default: humanity)", "(default: fair_forge_output)"):
        assert text in flat, text


def _doc(mode="bayesian", metrics=("humanity",), inputs=("/a/x.jsonl",), read=10, lexicon="NRC", seed=42):
    bayes = mode == "bayesian"
    return {"config": {"inputs": list(inputs), "metrics": list(metrics), "mode": mode, "seed": seed if bayes else None,
                       "mc_samples": 5000 if bayes else None, "ci_level": 0.95,
                       "beta_prior_a": 1.0 if bayes else None, "beta_prior_b": 1.0 if bayes else None},
            "summary": {"interactions_read": read},
            "metrics": {m: {"lexicon": lexicon, "slices": []} for m in metrics}}


def test_run_differences_names_each_difference():
    same = _doc()
    assert run_differences(same, copy.deepcopy(same)) == []
    msgs = [d["message"] for d in run_differences(_doc(mode="frequentist", metrics=("humanity", "toxicity")), _doc())]
    # the mode, not the Bayesian-only parameters a frequentist run leaves unset
    assert msgs == ["mode: current frequentist, baseline bayesian",
                    "metrics: current [humanity, toxicity], baseline [humanity]"]
    msgs = [d["message"] for d in run_differences(_doc(seed=7, inputs=("/b/x.jsonl",), read=9, lexicon="other"),
                                                  _doc())]
    assert msgs == ["inputs: the same file names in other folders (current [/b/x.jsonl], baseline [/a/x.jsonl])",
                    "seed: current 7, baseline 42",
                    "interactions_read: current 9, baseline 10",
                    "humanity lexicon: current other, baseline NRC"]
    assert [d["message"] for d in run_differences(_doc(inputs=("/a/y.jsonl",)), _doc())] == [
        "inputs: current [/a/y.jsonl], baseline [/a/x.jsonl]"]


def test_run_differences_reads_settings_and_versions_from_run_info():
    info_c = {"argv": ["--group-extractor", "embedding", "--output", "o1", "--quiet", "--direct_num_workers=2", "--streaming"],
              "versions": {"numpy": "2.4.6", "nrclex": "4.1.0"}}
    info_b = {"argv": ["--toxicity-level", "conservative", "--output", "o2", "--no-report"],
              "versions": {"numpy": "2.4.5", "nrclex": "4.1.0"}}
    tox = ("humanity", "toxicity")  # the metric that reads --group-extractor and --toxicity-level
    msgs = [d["message"] for d in run_differences(_doc(metrics=tox), _doc(metrics=tox), info_c, info_b)]
    assert msgs == ["--group-extractor: current embedding, baseline keyword",  # declared default fills the gap
                    "--toxicity-level: current inclusive, baseline conservative",
                    "Beam options: current [--streaming], baseline []",  # where and how it ran is no difference (T8)
                    "version of numpy: current 2.4.6, baseline 2.4.5"]
    # output folder, --quiet, --no-report change no result: never a difference
    assert run_differences(_doc(), _doc(), {"argv": ["--output", "a", "--quiet"]}, {"argv": ["--output", "b"]}) == []
    # nor does any option of how a run ran (the roll-up's rule: options.RUN_ONLY_OPTIONS), typed or in argv
    # (fresh-user trial: a trend named --allow-empty and --progress-interval as settings differences)
    run_only = {"allow_empty": True, "progress_interval": 1.0, "judge_timeout": 9.0, "input_format": "jsonl"}
    assert run_differences(_doc(), _doc(), {"options": run_only}, {"options": {}}) == []
    assert run_differences(_doc(), _doc(), {"argv": ["--allow-empty", "--progress-interval", "1"]}, {"argv": []}) == []
    # an argv this version cannot read: no settings comparison, no crash
    assert run_differences(_doc(), _doc(), {"argv": ["--mode", "nope"]}, {"argv": []}) == []


def test_compare_runs_and_table_carry_the_differences(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tox = ("humanity", "toxicity")  # --group-extractor is toxicity's
    for folder, doc, argv in ((a, _doc(metrics=tox), ["--group-extractor", "embedding"]),
                              (b, _doc(mode="frequentist", metrics=tox), [])):
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        (folder / "run_info.json").write_text(json.dumps({"argv": argv}), encoding="utf-8")
    cmp = compare_runs(str(a), str(b))  # run folders: run_info.json read from each
    assert [d["what"] for d in cmp["differences"]] == ["mode", "--group-extractor"]
    table = comparison_table(cmp).splitlines()
    # (these hand-made runs have no stats/manifest.json: trial37 T9's line says so first)
    assert table[1:3] == [f"warning: {run} has no stats/manifest.json (a run of an older layout, or a partial copy): the "
                          "data it shares with the other run is judged from results.json's inputs alone" for run in (a, b)]
    assert table[3:5] == ["warning: the runs differ in mode: current bayesian, baseline frequentist",
                          "warning: the runs differ in --group-extractor: current embedding, baseline keyword"]
    assert compare_runs(_doc(), _doc())["differences"] == []


def test_the_compare_command_warns_of_the_runs_settings_differences(tmp_path, capsys):
    """fresh16: `python -m fair_forge_beam.reports.compare A B` loaded each run's results.json and
    dropped its run_info.json, so two runs of other settings (--toxicity-scorer hurtlex against the
    default) were compared without a word, while the audit's --compare warned."""
    from fair_forge_beam.reports.compare import main as compare_main

    a, b = tmp_path / "a", tmp_path / "b"
    doc = _doc(metrics=("toxicity",))  # runs that scored something: a comparison of nothing exits 4 (trial29 T11)
    doc["metrics"]["toxicity"]["slices"] = [{"slice": "overall", "mode": "distribution", "n_interactions": 10, "n_sessions": 5,
                                             "toxic_rate": {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10}}]
    for folder, argv in ((a, ["--group-extractor", "embedding"]), (b, [])):
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        (folder / "run_info.json").write_text(json.dumps({"argv": argv}), encoding="utf-8")
    assert compare_main([str(a), str(b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"warning: {a} has no stats/manifest.json"), out  # hand-made runs (trial37 T9)
    assert out[2].startswith(f"warning: {b} has no stats/manifest.json"), out
    assert out[3] == "warning: the runs differ in --group-extractor: current embedding, baseline keyword", out
    cmp = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))
    assert [d["what"] for d in cmp["differences"]] == ["--group-extractor"]
    # the console script's command too (fresh16: `fair-forge-beam compare A B` was read as an audit's stray argument)
    assert audit.main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines()[1:4] == out[1:4]
    # and the audit's --help names the other commands (fresh16: it named none)
    shown = "".join(audit.build_parser().format_help().split())  # argparse wraps the epilog anywhere
    assert "Othercommands(eachwithitsown--help):fair-forge-beamrollup;fair-forge-beamtrend;fair-forge-beamcompare" in shown


#: the toxicity lexicon as a comparison names it (--toxicity-level is part of it)
LEXICON = "HurtLex 1.2 (valeriobasile/hurtlex@e8205fa, level={}, neutral group terms excluded)"


@pytest.mark.slow
def test_main_job_warns_when_compared_runs_differ(tmp_path, caplog):
    """End to end: a keyword run compared with an earlier run of other mode and settings warns on stderr's log.
    (Toxicity runs too, with the HurtLex scorer: --toxicity-level is an option toxicity reads, refused in a
    run without it, trial34 T5.)"""
    base = tmp_path / "base"
    common = ["--quiet", "--no-report", f"--runner={FNAPI}", "--group-extractor", "keyword", "--metrics",
              "humanity,toxicity", "--toxicity-scorer", "hurtlex"]
    audit.run([*common, "--mode", "frequentist", "--output", str(base)])
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.audit"):
        audit.run([*common, "--mode", "frequentist", "--output", str(tmp_path / "same"),
                   "--compare", str(base)])
    assert [r for r in caplog.records if "runs differ" in r.getMessage()] == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.audit"):
        audit.run([*common, "--mode", "bayesian", "--mc-samples", "200",
                   "--toxicity-level", "conservative", "--output", str(tmp_path / "cur"), "--compare", str(base)])
    msgs = [r.getMessage() for r in caplog.records if "runs differ" in r.getMessage()]
    assert msgs == ["--compare: the runs differ in mode: current bayesian, baseline frequentist",
                    f"--compare: the runs differ in toxicity lexicon: current {LEXICON.format('conservative')}, "
                    f"baseline {LEXICON.format('inclusive')}",
                    "--compare: the runs differ in --toxicity-level: current conservative, baseline inclusive"]
    cmp = json.loads((tmp_path / "cur" / "comparison.json").read_text(encoding="utf-8"))
    # both runs' run_info.json too: comparison.json states what the warnings say
    assert [d["what"] for d in cmp["differences"]] == ["mode", "toxicity lexicon", "--toxicity-level"]


@pytest.mark.slow
def test_report_comparison_section_states_each_run_difference(tmp_path):
    """report.html's comparison section lists the mode and settings differences --compare warns about.
    (Toxicity runs too, with the HurtLex scorer: it reads --toxicity-level, trial34 T5.)"""
    base = tmp_path / "base"
    common = ["--quiet", f"--runner={FNAPI}", "--metrics", "humanity,toxicity", "--toxicity-scorer", "hurtlex"]
    audit.run([*common, "--no-report", "--mode", "frequentist", "--output", str(base)])
    audit.run([*common, "--mode", "bayesian", "--mc-samples", "200", "--toxicity-level", "conservative",
               "--output", str(tmp_path / "cur"), "--compare", str(base)])
    html = (tmp_path / "cur" / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<h2 id="comparison">'):]
    items = section[section.index('<ul class="differences">'):section.index("</ul>")]
    assert items.count("<li>") == 3
    assert "<li>mode: current bayesian, baseline frequentist</li>" in items
    assert (f"<li>toxicity lexicon: current {LEXICON.format('conservative')}, baseline {LEXICON.format('inclusive')}"
            "</li>") in items
    assert "<li>--toxicity-level: current conservative, baseline inclusive</li>" in items
    cmp = json.loads((tmp_path / "cur" / "comparison.json").read_text(encoding="utf-8"))
    assert [d["what"] for d in cmp["differences"]] == ["mode", "toxicity lexicon", "--toxicity-level"]


@pytest.mark.slow
def test_quiet_leaves_only_warnings_and_errors_on_stderr(tmp_path):
    """--quiet: no INFO line ("reading [...]"), no progress line, no summary table (docs/cli.md)."""
    examples = REPO / "fair_forge_beam" / "data" / "examples" / "fair_forge_examples.json"
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--quiet", "--no-report", "--metrics", "humanity",
                           "--input", str(examples), "--output", str(tmp_path / "o"), f"--runner={FNAPI}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert [line for line in proc.stderr.splitlines() if " INFO " in line or line.startswith("progress:")] == []
    assert (tmp_path / "o" / "results.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("module", ["pipelines.audit", "pipelines.rollup", "pipelines.trend", "pipelines.loop",
                                    "pipelines.generate", "pipelines.run_assistant", "pipelines.optimize",
                                    "pipelines.explain", "fair_forge_beam.reports.compare",
                                    "fair_forge_beam.io.agentic_sources", "fair_forge_beam.metrics.registry"])
def test_every_command_gives_a_one_line_usage_error(module):
    """Hostile-tester trial: run_assistant's usage errors printed argparse's whole usage block (five
    commands built a plain ArgumentParser); a scheduler's alert shows the first line only."""
    import subprocess
    import sys

    from helpers import REPO

    proc = subprocess.run([sys.executable, "-m", module, "--no-such-option"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "error:" in lines[0] and "--help" in lines[0], proc.stderr
    # the unknown option is named first, before any missing required option (issue 28: rollup, trend,
    # explain, compare and agentic_sources named their required options instead)
    assert "error: unrecognised option(s) --no-such-option: not an option of this job" in lines[0], lines[0]


@pytest.mark.parametrize("argv", [
    ["rollup", "--bogus-opt"],  # --from and --output are required
    ["rollup", "--inconclusive-width", "wide", "--bogus-opt"],  # a bad value too
    ["rollup", "--from", "x", "--seed", "5"],  # an audit option the roll-up does not take
    ["trend", "--bogus-opt"],  # PATTERN is required
    ["trend", "runs/*", "--bogus-opt=sk-not-echoed-1234"],  # trend used argparse's "unrecognized arguments"
    ["--mc-samples", "many", "--bogus-opt", "--runner=DirectRunner"],
])
def test_an_unknown_option_is_named_first_on_every_command(argv, capsys):
    """Issue 28 leftovers: ``rollup --bogus-opt`` named the missing required options, ``trend`` said
    argparse's "unrecognized arguments": an unknown option is named first, in one wording, one line,
    exit 2, without the value given to it."""
    with pytest.raises(SystemExit) as ei:
        audit.main(argv)
    assert ei.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    flag = next(a for a in argv if a.startswith(("--bogus", "--seed"))).split("=")[0]
    assert len(lines) == 1 and f"error: unrecognised option(s) {flag}: not an option of this job" in lines[0], lines
    assert "sk-not-echoed" not in lines[0] and "unrecognized arguments" not in lines[0]


def test_a_stray_value_of_trend_is_named_in_the_commands_words(capsys):
    with pytest.raises(SystemExit) as ei:
        audit.main(["trend", "runs/a", "--no-plots", "runs/b"])
    assert ei.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    # the stray value as every usage error shows a user's value (quoting.choice_text, trial39b B8): by its length
    assert len(lines) == 1 and "error: unexpected argument(s) a text of 6 characters (not shown" in lines[0], lines
    assert "every value belongs to an option" in lines[0], lines


@pytest.mark.parametrize("module, argv, prog", [
    ("pipelines.optimize", ["--outpu", "x"], "fair-forge-beam-optimize"),  # was "--input, --output and --model are required"
    ("pipelines.optimize", ["--outpu", "x", "--input", "a", "--model", "c"], "fair-forge-beam-optimize"),
    ("pipelines.explain", ["--outpu", "x"], "fair-forge-beam-explain"),
    ("pipelines.audit", ["--metric", "humanity"], "fair-forge-beam"),
])
def test_an_abbreviated_option_is_unknown_on_every_command(module, argv, prog, capsys):
    """Trial 28 (B9): optimize and explain took argparse's abbreviations (``--outpu`` was
    ``--output``), so a typo was never named and a missing option was reported instead. Every
    :class:`OneLineErrorParser` refuses abbreviations unless asked."""
    import importlib

    with pytest.raises(SystemExit) as ei:
        importlib.import_module(module).main(argv)
    assert ei.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    flag = argv[0]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: unrecognised option(s) {flag}: "), lines


def test_every_one_line_parser_refuses_abbreviations():
    from fair_forge_beam.options import OneLineErrorParser

    assert OneLineErrorParser().allow_abbrev is False
    assert OneLineErrorParser(allow_abbrev=True).allow_abbrev is True


@pytest.mark.parametrize("module, argv, prog", [
    ("pipelines.audit", ["--input"], "fair-forge-beam"),
    ("pipelines.audit", ["--config"], "fair-forge-beam"),
    ("pipelines.loop", ["--config"], "python -m pipelines.loop"),
])
def test_an_option_without_its_value_names_the_command(module, argv, prog, capsys):
    """Trial 28 (B9): the config pre-parser was a plain ArgumentParser: ``audit --input`` printed
    "audit.py: error: …" without the "(every option: … --help)" tail."""
    import importlib

    with pytest.raises(SystemExit) as ei:
        importlib.import_module(module).main(argv)
    assert ei.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: argument {argv[0]}: expected one argument"), lines
    assert lines[0].endswith(f"(every option: {prog} --help)"), lines


def test_comparison_table_says_why_a_row_was_not_judged():
    """fresh14: every 'too small to compare' row of the console table ended in '(None)' (no method)
    and never said why; the row now shows its reason, and no row shows 'None'."""
    row = {"metric": "toxicity", "slice": "assistant_id=x", "estimate": "toxic_rate", "verdict": "too small to compare",
           "method": None, "too_small": "one session on a side", "difference": {"mean": 0.1, "ci_low": None, "ci_high": None}}
    judged = {**row, "verdict": "same", "method": "bootstrap", "too_small": None,
              "difference": {"mean": 0.0, "ci_low": -0.1, "ci_high": 0.1}}
    lines = comparison_table({"ci_level": 0.95, "verdicts": {}, "rows": [row, judged]}).splitlines()
    assert lines[1].endswith("too small to compare  (one session on a side)"), lines
    assert lines[2].endswith("same  (bootstrap)") and "None" not in "\n".join(lines), lines


def test_compare_lists_only_detectable_differences_by_default(tmp_path, capsys):
    """Issue 28, hostile trial 8: ``compare A A`` on a 10,000-assistant run printed 12,848 "too
    small to compare" rows (its --help: --all lists "every row, not only detectable differences").
    By default only better/worse/higher/lower rows, then one line counting the others and naming
    --all; --json holds every row whatever --all."""
    from fair_forge_beam.reports.compare import main

    row = {"metric": "toxicity", "slice": "assistant_id=x", "estimate": "toxic_rate", "method": "beta",
           "too_small": None, "difference": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.15}}
    rows = [{**row, "verdict": "worse"}, {**row, "verdict": "too small to compare", "too_small": "one session"},
            {**row, "verdict": "no detectable difference"}, {**row, "verdict": "not estimable (no value)"}]
    lines = comparison_table({"ci_level": 0.95, "verdicts": {}, "rows": rows}, only_detectable=True).splitlines()
    assert len(lines) == 3 and lines[1].endswith("worse  (beta)"), lines
    assert lines[2].startswith("3 rows without a detectable difference not listed") and "--all" in lines[2], lines
    assert len(comparison_table({"ci_level": 0.95, "verdicts": {}, "rows": rows}).splitlines()) == 5
    # the command: the same runs compared, every row too small or the same -> no row line, one count line
    slices = [{"slice": "overall", "mode": "distribution", "n_interactions": 10, "n_sessions": 5,
               "toxic_rate": {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10}},
              {"slice": "assistant_id=a", "mode": "distribution", "n_interactions": 2, "n_sessions": 1,
               "toxic_rate": {"mean": 0.5, "ci_low": None, "ci_high": None, "n": 2}}]
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95}, "metrics": {"toxicity": {"slices": slices}}}
    (tmp_path / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "cmp.json"
    assert main([str(tmp_path / "results.json"), str(tmp_path / "results.json"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("  toxicity") for line in printed), printed
    n = len(json.loads(out.read_text())["rows"])
    assert n >= 2 and printed[-1].startswith(f"{n} rows without a detectable difference not listed"), printed
    assert main([str(tmp_path / "results.json"), str(tmp_path / "results.json"), "--all"]) == 0
    assert sum(line.startswith("  toxicity") for line in capsys.readouterr().out.splitlines()) == n


@pytest.mark.parametrize("command", ["rollup", "trend", "compare"])
def test_every_named_command_of_the_console_script_names_itself(command, capsys, monkeypatch):
    """trial29 T12: `fair-forge-beam compare --help` and its errors said "python -m
    fair_forge_beam.reports.compare" (rollup and trend said "fair-forge-beam rollup" / "trend"). Every
    named command (pipelines.audit.COMMANDS) names itself "fair-forge-beam <command>" in its usage, its
    usage errors and its interrupt line (console.guarded's prog)."""
    from pipelines import audit

    assert set(audit.COMMANDS) == {"rollup", "trend", "compare"}  # a new named command: add it above
    prog = f"fair-forge-beam {command}"
    with pytest.raises(SystemExit) as ei:
        audit.main([command, "--help"])
    assert ei.value.code == 0 and capsys.readouterr().out.startswith(f"usage: {prog} ")
    with pytest.raises(SystemExit) as ei:
        audit.main([command, "--no-such-option", "x"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert ei.value.code == 2 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), lines
    assert lines[0].endswith(f"(every option: {prog} --help)"), lines
    seen = {}

    def fake_guarded(run, cmd, prog="fair-forge-beam", owns_process=False):
        seen.update(command=cmd, prog=prog)
        return 0

    monkeypatch.setattr(audit, "guarded", fake_guarded)
    audit.main([command, "x"])
    assert seen == {"command": command, "prog": prog}


@pytest.mark.slow
@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_compare_json_dash_and_dev_stdout_write_the_json_on_standard_output(tmp_path, target):
    """trial39 T13: `compare A B --json -` wrote a 116 KB file named '-' in the current folder, and
    `--json /dev/stdout` was refused ('is a FIFO') when stdout was a pipe: `compare --json` could not
    feed jq. Both now write the JSON alone on stdout (a pipe here), the table on stderr."""
    a, b = tmp_path / "a", tmp_path / "b"
    doc = _doc(metrics=("toxicity",))
    doc["metrics"]["toxicity"]["slices"] = [{"slice": "overall", "mode": "distribution", "n_interactions": 10, "n_sessions": 5,
                                             "toxic_rate": {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10}}]
    for folder in (a, b):
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "fair_forge_beam.reports.compare", str(a), str(b), "--json", target],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    cmp = json.loads(done.stdout)  # the JSON alone: what jq reads
    assert cmp["verdicts"] and done.stderr.startswith("comparison (current − baseline)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no file named '-'


def test_cluster_points_to_standard_output_is_refused(tmp_path, capsys):
    """The same class: --cluster-points writes Parquet, which standard output is not a file for."""
    with pytest.raises(SystemExit) as exc:
        audit.main(["--quiet", "--metrics", "toxicity", "--group-extractor", "embedding", "--cluster-points", "-",
                    "--output", str(tmp_path / "out")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(err) == 1 and "--cluster-points -: standard output is not a file" in err[0], err
