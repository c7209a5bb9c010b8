"""Whether two runs may be compared (trial34 T1, T3, T7, T10): one check,
:func:`~fair_forge_beam.reports.compare.comparability` — the settings that differ (``run_info.json``'s
options too) and the data the runs share (the roll-up's own overlap check) —, read by ``--baseline``
gates of the audit and the roll-up, ``--compare``, ``compare`` and the changes ``trend`` claims.

Real runs of the shipped hh-rlhf slice on the in-process FnApiRunner: a toxicity audit with the
default scorer and one with ``--toxicity-scorer hurtlex``; a night, the week that rolls it up, and
the night re-run into another folder."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from helpers import FNAPI, REPO
from fair_forge_beam.reports.gates import GATE_FAILED_EXIT_CODE
from pipelines import audit

pytestmark = pytest.mark.slow  # real audits on the FnApiRunner (docs/testing.md: Tiers)

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
GATE = "regression toxicity toxic_rate not worse in every assistant_id"
COMMON = ["--metrics", "toxicity", "--mode", "bayesian", "--slices", "overall,assistant_id", "--no-report"]


def _run(argv: list, quiet: bool = True) -> int:
    try:
        return audit.main([*(["--quiet"] if quiet else []), f"--runner={FNAPI}", "--mc-samples", "200",
                           *map(str, argv)])
    except SystemExit as exc:
        return exc.code


def _rollup(argv: list) -> int:
    from fair_forge_beam import rollup

    try:
        rollup.run(["--quiet", "--no-report", f"--runner={FNAPI}", *map(str, argv)])
        return 0
    except SystemExit as exc:
        return exc.code


def _night(path: Path, lines: slice) -> Path:
    path.write_text("".join(HH.read_text(encoding="utf-8").splitlines(keepends=True)[lines]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two nights (d1, d2) of 30 sessions each, the week rolling both up, and d2 made with HurtLex."""
    root = tmp_path_factory.mktemp("comparable")
    logs = root / "logs"
    logs.mkdir()
    for name, part in (("d1", slice(0, 30)), ("d2", slice(30, 60))):
        assert _run([*COMMON, "--input", _night(logs / f"{name}.jsonl", part), "--output", root / name]) == 0
    assert _run([*COMMON, "--input", logs / "d2.jsonl", "--output", root / "d2_hurtlex",
                 "--toxicity-scorer", "hurtlex"]) == 0
    assert _rollup(["--from", root / "d1", "--from", root / "d2", "--output", root / "week"]) == 0
    return root


def _gates(folder: Path) -> dict:
    return json.loads((folder / "gates.json").read_text(encoding="utf-8"))


def test_a_baseline_made_with_another_scorer_is_said_and_recorded(runs, tmp_path, caplog, capsys):
    """T1: the current run uses hurtlex, the baseline profanity-check; the gate was read with no word
    and gates.json recorded nothing ('--baseline: the runs differ in metrics' at most)."""
    caplog.set_level(logging.WARNING)
    code = _run([*COMMON, "--input", runs / "logs" / "d1.jsonl", "--output", tmp_path / "cur",
                 "--toxicity-scorer", "hurtlex", "--gate", GATE, "--baseline", runs / "d2"], quiet=False)
    assert code in (0, GATE_FAILED_EXIT_CODE)
    said = [r.getMessage() for r in caplog.records] + capsys.readouterr().err.splitlines()
    assert any(line.endswith("--baseline: the runs differ in --toxicity-scorer: current hurtlex, baseline "
                             "profanity-check") for line in said), said
    report = _gates(tmp_path / "cur")
    assert any("--toxicity-scorer" in c for c in report["baseline_caveats"])
    assert report["gates"][0]["baseline_caveats"] == report["baseline_caveats"]
    if code == 0:  # a pass is never a silent one: the summary line says what the baseline is
        from fair_forge_beam.reports.gates import gates_summary

        assert "against a baseline unlike this run" in gates_summary(report)
    # the same gate against a like baseline (other data, the same settings): no caveat
    assert _run([*COMMON, "--input", runs / "logs" / "d1.jsonl", "--output", tmp_path / "like", "--gate", GATE,
                 "--baseline", runs / "d2"]) == 0
    report = _gates(tmp_path / "like")
    assert "baseline_caveats" not in report and report["status"] == "pass"


def test_a_night_re_run_gated_against_the_week_holding_it_fails(runs, tmp_path, capsys):
    """T3: a re-run of d2 into another folder, gated against the week that rolled d2 up: the same log
    on both sides (0.062 vs 0.067 passed in the trial). Each regression field fails, naming the file."""
    code = _run([*COMMON, "--input", runs / "logs" / "d2.jsonl", "--output", tmp_path / "again", "--gate", GATE,
                 "--baseline", runs / "week"])
    assert code == GATE_FAILED_EXIT_CODE
    report = _gates(tmp_path / "again")
    (gate,) = report["gates"]
    assert gate["status"] == "fail" and gate["checks"]
    for c in gate["checks"]:
        assert c["status"] == "fail"
        assert c["reason"].startswith(f"the baseline shares data with this run ({tmp_path / 'again'} and "
                                      f"{runs / 'week'} both read {runs / 'logs' / 'd2.jsonl'}")
    assert any("the runs share data" in c for c in report["baseline_caveats"])
    assert "GATE FAILED" in capsys.readouterr().err


def test_a_roll_up_gated_against_one_of_its_nights_fails(runs, tmp_path):
    """T3: the week rolled up again and gated against d2, one of the nights it merged."""
    code = _rollup(["--from", runs / "d1", "--from", runs / "d2", "--output", tmp_path / "week_a",
                    "--baseline", runs / "d2", "--gate", GATE])
    assert code == GATE_FAILED_EXIT_CODE
    report = _gates(tmp_path / "week_a")
    checks = report["gates"][0]["checks"]
    assert checks and all(c["status"] == "fail" and "both hold audit run" in c["reason"] for c in checks)


def test_if_undefined_skip_skips_a_gate_on_a_baseline_sharing_data(runs):
    """The gates' model: a check that cannot judge fails, or is skipped with if_undefined = "skip"."""
    from fair_forge_beam.reports.compare import comparability
    from fair_forge_beam.reports.gates import evaluate_gates, gates_report, make_gate

    doc = json.loads((runs / "week" / "results.json").read_text(encoding="utf-8"))
    base = json.loads((runs / "d2" / "results.json").read_text(encoding="utf-8"))
    comp = comparability(doc, base, current_dir=str(runs / "week"), baseline_dir=str(runs / "d2"))
    assert comp["shared_data"] and not comp["differences"]
    skip = make_gate({"gate": GATE, "if_undefined": "skip"})
    report = gates_report(evaluate_gates(doc, [skip], base, comp), [skip], 0.95, comp["caveats"])
    assert report["status"] == "nothing checked" and report["gates"][0]["status"] == "skipped"


def test_compare_a_run_with_itself_says_so(runs, capsys):
    """T10: 'compare X X' printed a full comparison with no note."""
    from fair_forge_beam.reports import compare

    compare.main([str(runs / "d1"), str(runs / "d1")])
    out = capsys.readouterr().out
    assert f"warning: the runs share data: {runs / 'd1'} and {runs / 'd1'} are the same folder" in out
    compare.main([str(runs / "week"), str(runs / "d1")])
    assert "warning: the runs share data:" in capsys.readouterr().out
    compare.main([str(runs / "d2"), str(runs / "d1")])
    assert "share data" not in capsys.readouterr().out


def test_a_trend_change_across_a_scorer_switch_is_marked(runs, tmp_path):
    """T7: a change claimed between a profanity-check night and a HurtLex night carries the switch."""
    from fair_forge_beam.reports.trend import build_trend, iter_runs

    t = build_trend(iter_runs([str(runs / "d1"), str(runs / "d2_hurtlex")]), slices=("overall", "assistant_id"))
    assert t["changes"], "hurtlex and profanity-check give other toxic rates on the same data"
    for c in t["changes"]:
        assert any(d.startswith("--toxicity-scorer: current hurtlex, baseline profanity-check")
                   for d in c["runs_differ_in"])
    assert any("runs made with other settings" in n and "--toxicity-scorer" in n for n in t["notes"])


def test_the_reports_comparison_says_the_runs_share_data(runs):
    """The console and comparison.json said the runs share data; report.html's comparison section
    did not (session 22's note). A roll-up compared with one of its nights, then with a night it
    does not hold."""
    from fair_forge_beam.reports.compare import compare_runs
    from fair_forge_beam.reports.html import render_report

    doc = json.loads((runs / "week" / "results.json").read_text(encoding="utf-8"))
    shared = render_report(doc, comparison=compare_runs(str(runs / "week"), str(runs / "d1"), draws=200),
                           with_plots=False)
    assert 'id="shared-data"' in shared and str(runs / "logs" / "d1.jsonl") in shared.split('id="shared-data"')[1]
    doc = json.loads((runs / "d2" / "results.json").read_text(encoding="utf-8"))
    apart = render_report(doc, comparison=compare_runs(str(runs / "d2"), str(runs / "d1"), draws=200),
                          with_plots=False)
    assert 'id="comparison"' in apart and 'id="shared-data"' not in apart


@pytest.mark.parametrize("report", [True, False])
def test_an_audit_compare_says_the_runs_share_data_on_every_surface(runs, tmp_path, report):
    """trial35b B3: an audit with ``--compare`` warned "the runs share data" on the console, but its
    comparison.json said ``"shared_data": null`` and report.html had no such line: the launcher gave
    ``compare_runs`` the results dicts, no folders. A copy of d1's log (the same content under another
    name) audited and compared with d1, with and without the report; the line names --output, never
    the run's stage."""
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((runs / "logs" / "d1.jsonl").read_bytes())
    common = [a for a in COMMON if report is False or a != "--no-report"]
    out = tmp_path / "cur"
    assert _run([*common, "--input", copy, "--output", out, "--compare", runs / "d1"]) == 0
    shared = json.loads((out / "comparison.json").read_text(encoding="utf-8"))["shared_data"]
    assert shared and shared.startswith(f"{out} read {copy} and {runs / 'd1'} read ") and "the same content" in shared, shared
    if report:
        page = (out / "report.html").read_text(encoding="utf-8")
        assert 'id="shared-data"' in page and "the same content" in page.split('id="shared-data"')[1]
