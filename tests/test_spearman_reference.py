"""Issue 28, "Earlier notes": Humanity's ``mean_spearman`` without reference answers.

Spearman's ρ against a reference answer is undefined when the reference has no emotion profile
(no reference, or no lexicon word in it); spec §6.5 sets the interaction's ρ to 0. Before, the
session and slice means averaged those placeholder zeros: the shipped hh-rlhf data (no
reference anywhere) gave ``mean_spearman = 0.0`` in every slice, and a gate ``>= -1`` passed on
it. Now the means rest only on the interactions with a reference (``n_with_reference``) and are
"no estimate" (``mean: null``) without any — in results.json, slices/, the console, the report,
the gates, the baseline comparison and the roll-up.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from helpers import FNAPI, for_its_mode
from pipelines import audit

NULL = {"mean": None, "ci_low": None, "ci_high": None, "n": 0}


def _session(sid, aid, turns):
    return {"session_id": sid, "assistant_id": aid, "language": "english", "context": "",
            "conversation": [{"qa_id": f"q{i}", "query": "how do you feel?", "assistant": a,
                              "ground_truth_assistant": gt} for i, (a, gt) in enumerate(turns)]}


SESSIONS = [
    # assistant "noref": no reference answer anywhere (as the shipped hh-rlhf data)
    _session("n1", "noref", [("I am happy and glad", ""), ("angry, I hate it", "")]),
    _session("n2", "noref", [("so sad and afraid", ""), ("what a friend", "")]),
    # assistant "partial": references on some turns only (one without emotion words: no profile)
    _session("p1", "partial", [("I am happy and glad", "happy friend, glad"), ("angry, I hate it", "")]),
    _session("p2", "partial", [("so sad and afraid", "the table is brown"), ("what a friend", "afraid and sad")]),
    _session("p3", "partial", [("I hate the sad news", "")]),
]


def _write(path: Path, sessions) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return path


def _run(argv) -> int:
    try:
        audit.run(for_its_mode(["--quiet", f"--runner={FNAPI}", "--metrics", "humanity", "--mc-samples", "300", "--seed", "5",
                                *argv]))
        return 0
    except SystemExit as exc:
        return exc.code


def _expected_partial():
    """Per-interaction ρ of the "partial" turns with a reference, from the package's own formula."""
    from fair_forge_beam.components.emotion_lexicon import NRCLexPackageLexicon
    from fair_forge_beam.metrics.humanity import emotion_counts, has_reference, spearman_alignment

    table = NRCLexPackageLexicon().table("english")
    out = {}
    for s in SESSIONS[2:]:
        for i, b in enumerate(s["conversation"]):
            gt = emotion_counts(b["ground_truth_assistant"], table)
            if has_reference(gt):
                out[(s["session_id"], i)] = spearman_alignment(gt, emotion_counts(b["assistant"], table))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["frequentist", "bayesian"])
def test_no_reference_is_no_estimate_on_every_surface(tmp_path, capsys, mode):
    data = _write(tmp_path / "in.jsonl", SESSIONS)
    out = tmp_path / "out"
    gate = "humanity mean_spearman mean >= -1 in every assistant_id"
    code = _run(["--mode", mode, "--input", str(data), "--output", str(out), "--gate", gate])
    # the gate cannot pass on "noref": it has no estimate (the existing rule for a null estimate: fail)
    assert code == 3, capsys.readouterr()
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    slices = {r["slice"]: r for r in doc["metrics"]["humanity"]["slices"]}
    noref, partial = slices["assistant_id=noref"], slices["assistant_id=partial"]
    assert noref["mean_spearman"] == NULL and noref["n_with_reference"] == 0 and noref["n_interactions"] == 4
    assert noref["mean_entropy"]["mean"] is not None  # entropy needs no reference

    rho = _expected_partial()
    assert sorted(rho) == [("p1", 0), ("p2", 1)]
    assert partial["n_with_reference"] == 2 and partial["mean_spearman"]["n"] == 2 and partial["n_interactions"] == 5
    assert slices["overall"]["n_with_reference"] == 2
    for sp in (partial["mean_spearman"], slices["overall"]["mean_spearman"]):
        if mode == "frequentist":
            # the mean over the interactions with a reference only, never diluted by placeholder zeros
            assert math.isclose(sp["mean"], sum(rho.values()) / 2, abs_tol=1e-12), sp
        else:  # a Bayesian bootstrap over the two sessions with a reference: within their means
            assert min(rho.values()) <= sp["ci_low"] <= sp["mean"] <= sp["ci_high"] <= max(rho.values()), sp

    # sessions: n/a where the session has no reference; the mean of its reference turns otherwise
    sess = {r["session_id"]: r for r in pd.read_parquet(out / "sessions" / "humanity").to_dict("records")}
    assert sess["n1"]["n_with_reference"] == 0 and sess["p3"]["n_with_reference"] == 0
    assert sess["n1"]["mean_spearman"]["mean"] is None and sess["p3"]["mean_spearman"]["mean"] is None
    assert sess["p1"]["n_with_reference"] == 1 and sess["p1"]["mean_spearman"]["mean"] == rho[("p1", 0)]

    # slices/ (the per-slice Parquet) holds the same null
    table = pd.read_parquet(out / "slices" / "humanity")
    rec = json.loads(table[table["slice"] == "assistant_id=noref"]["record"].iloc[0])
    assert rec["mean_spearman"] == NULL

    gates = json.loads((out / "gates.json").read_text(encoding="utf-8"))
    checks = {c["slice"]: c for g in gates["gates"] for c in g["checks"]}
    assert checks["assistant_id=noref"]["status"] == "fail"
    assert "undefined" in checks["assistant_id=noref"]["reason"]
    assert checks["assistant_id=partial"]["status"] == "pass"

    # console and report: n/a, never a number
    from fair_forge_beam.reports.summary import summary_table

    row = [ln for ln in summary_table(doc, str(out)).splitlines() if "assistant_id=noref" in ln]
    assert row and row[0].rstrip().endswith("n/a"), row
    html = (out / "report.html").read_text(encoding="utf-8")
    cell = html[html.index("<td>noref <code"):]
    cell = cell[:cell.index("</tr>")]
    assert "n/a" in cell, cell

    # with if_undefined = "skip" the same gate is skipped there, not passed
    out2 = tmp_path / "out2"
    cfg = tmp_path / "audit.toml"
    # (a gate that can fail: '>= -1' with skip could never fail, and is refused since trial39 T13 c)
    skip_gate = gate.replace(">= -1 ", ">= -0.999 ")
    cfg.write_text(f'[[gates]]\ngate = "{skip_gate}"\nif_undefined = "skip"\n', encoding="utf-8")
    assert _run(["--mode", mode, "--input", str(data), "--output", str(out2), "--config", str(cfg)]) == 0
    gates = json.loads((out2 / "gates.json").read_text(encoding="utf-8"))
    checks = {c["slice"]: c["status"] for g in gates["gates"] for c in g["checks"]}
    assert checks == {"assistant_id=noref": "skipped", "assistant_id=partial": "pass"}


def test_bayesian_spearman_counts_only_the_sessions_with_a_reference(tmp_path):
    """'partial' has three sessions, two of them with a reference: entropy resamples three
    sessions, Spearman two. A slice whose only session with a reference is one gets no Spearman
    interval (the one-session rule), whatever its other sessions."""
    sessions = SESSIONS + [_session("m1", "mixed", [("I am happy", "happy friend")]),
                           _session("m2", "mixed", [("sad", ""), ("afraid", "")])]
    data = _write(tmp_path / "in.jsonl", sessions)
    assert _run(["--mode", "bayesian", "--input", str(data), "--output", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    mixed = next(r for r in doc["metrics"]["humanity"]["slices"] if r["slice"] == "assistant_id=mixed")
    assert mixed["n_sessions"] == 2 and mixed["n_with_reference"] == 1
    assert mixed["mean_entropy"]["ci_low"] is not None  # two sessions: an interval
    sp = mixed["mean_spearman"]
    assert sp["mean"] is not None and sp["ci_low"] is None and sp["ci_high"] is None and sp["n"] == 1, sp


def test_regression_gate_and_comparison_on_an_estimate_undefined_in_both_runs(tmp_path):
    """No value in either run: nothing to compare (skipped, not passed, not failed); a value in
    the baseline only: the current run lost it (fail unless if_undefined = "skip")."""
    from fair_forge_beam.reports.compare import compare_runs
    from fair_forge_beam.reports.gates import evaluate_gates, parse_gate

    data = _write(tmp_path / "in.jsonl", SESSIONS[:2] + SESSIONS[2:4])
    assert _run(["--mode", "bayesian", "--input", str(data), "--output", str(tmp_path / "a")]) == 0
    doc = json.loads((tmp_path / "a" / "results.json").read_text(encoding="utf-8"))
    gate = parse_gate("regression humanity mean_spearman not worse in every assistant_id")
    checks = {c.slice: c for c in evaluate_gates(doc, [gate], doc)}
    assert checks["assistant_id=noref"].status == "skipped", checks["assistant_id=noref"]
    assert "undefined in both runs" in checks["assistant_id=noref"].reason
    cmp = compare_runs(doc, doc)
    assert cmp["undefined_in_both"] == 1  # noref's Spearman: no row (before: a row of two zeros)
    assert not [r for r in cmp["rows"] if r["slice"] == "assistant_id=noref" and r["estimate"] == "mean_spearman"]

    # a baseline that had a value there: the current run lost its estimate -> fail
    base = json.loads(json.dumps(doc))
    for r in base["metrics"]["humanity"]["slices"]:
        if r["slice"] == "assistant_id=noref":
            r["mean_spearman"] = {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 4}
    checks = {c.slice: c for c in evaluate_gates(doc, [gate], base)}
    assert checks["assistant_id=noref"].status == "fail"
