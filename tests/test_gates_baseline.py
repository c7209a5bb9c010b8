"""Gates a nightly job can trust (issue 27): coverage gates (sessions / interactions per slice,
dead-letter share per assistant and language, every assistant of the baseline scored) and
regression gates against ``--baseline DIR`` ("not credibly worse", on the interval of the
difference, both modes), with "too small to compare" where a difference has no support.

Unit tests evaluate the gates on hand-written ``results.json`` documents with exact values; the
end-to-end tests run two real small audits of the shipped hh-rlhf slice: the second made worse
on purpose (toxic answers of one assistant; one assistant drifted into Spanish) and gated
against the first → exit 3, and ``gates.json`` lists both values and the interval."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from helpers import FNAPI, REPO, for_its_mode
from fair_forge_beam.reports.gates import (
    GATE_FAILED_EXIT_CODE,
    GateConfigError,
    evaluate_gates,
    gates_report,
    make_gate,
    parse_gate,
    read_count_dimensions,
    resolve_gates,
)
from fair_forge_beam.statistical.compare import beta_difference
from pipelines import audit

HH = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
DIMS = ("overall", "assistant_id", "language")


def _est(mean, lo=None, hi=None, n=10):
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n}


def _tox(slice_key, k, n, sessions, didt=None):
    rec = {"slice": slice_key, "n_interactions": n, "n_sessions": sessions, "n_toxic": k,
           "toxic_rate": _est(k / n, None, None, n)}
    if didt is not None:
        rec["estimates"] = {"DIDT": didt}
    return rec


def _doc(mode, slices, read_by_slice=None, metric="toxicity", seed=3):
    summary = {"interactions_read": (read_by_slice or {}).get("overall", 0),
               "metrics": {metric: {"scored": sum(r["n_interactions"] for r in slices[:1])}}}
    if read_by_slice is not None:
        summary["interactions_read_by_slice"] = read_by_slice
    return {"config": {"mode": mode, "ci_level": 0.95, "seed": seed, "beta_prior_a": 1.0, "beta_prior_b": 1.0},
            "summary": summary, "metrics": {metric: {"slices": slices}}}


# ------------------------------------------------------------------------------------ syntax
@pytest.mark.parametrize("text, expected", [
    ("coverage sessions >= 20 in every assistant_id",
     {"kind": "coverage", "metric": None, "field": "sessions", "op": ">=", "threshold": 20, "slices": "every assistant_id"}),
    ("coverage toxicity dead_letter_share <= 0.05 in every language",
     {"kind": "coverage", "metric": "toxicity", "field": "dead_letter_share", "threshold": 0.05}),
    ("coverage assistants_of_baseline", {"kind": "coverage", "field": "assistants_of_baseline", "op": None}),
    ("regression toxicity not worse", {"kind": "regression", "metric": "toxicity", "field": None, "margin": 0.0}),
    ("regression toxicity DIDT not worse by more than 0.02 in every assistant_id",
     {"kind": "regression", "field": "DIDT", "margin": 0.02, "slices": "every assistant_id"}),
    ("regression bias rate not worse for every attribute", {"field": "rate", "for_every": "attribute"}),
])
def test_coverage_and_regression_syntax(text, expected):
    g = parse_gate(text)
    for k, v in expected.items():
        assert getattr(g, k) == v, k
    assert g.text == text and parse_gate(g.text) == g
    table = {k: v for k, v in g.model_dump().items() if v is not None and k != "name"}
    assert make_gate(table) == g  # the [[gates]] table form


@pytest.mark.parametrize("gate, message", [
    ("coverage sessions", "expected"),
    ("coverage assistants_of_baseline in every language", "expected"),
    ("regression toxicity DIDT worse", "expected"),
    ({"kind": "coverage", "field": "sessions", "threshold": 3}, "needs op and threshold"),
    ({"kind": "coverage", "field": "fun", "op": ">=", "threshold": 3}, "one of sessions"),
    ({"kind": "regression", "metric": "toxicity", "op": "<=", "threshold": 0.1}, "no op or threshold"),
    ({"kind": "regression", "metric": "toxicity", "margin": -0.1}, "margin must be >= 0"),
    ({"metric": "toxicity", "field": "DIDT", "op": "<=", "threshold": 0.1, "margin": 0.1}, "margin belongs"),
])
def test_malformed_coverage_and_regression_gates(gate, message):
    with pytest.raises(GateConfigError, match=message):
        make_gate(gate)


BASE_DOC = _doc("bayesian", [_tox("overall", 2, 40, 20), _tox("assistant_id=a", 2, 40, 20)])


@pytest.mark.parametrize("text, bayesian, baseline, message", [
    ("regression toxicity DIDT not worse", True, None, "give --baseline DIR"),
    ("regression humanity mean_spearman not worse", True, BASE_DOC, "the baseline has no results of 'humanity'"),
    ("regression humanity mean_entropy not worse", True, None, "has no better side"),
    ("regression toxicity DIDT not worse", False, BASE_DOC, "only when both runs are Bayesian"),
    ("regression toxicity not worse", False, BASE_DOC, "name a rate field"),
    ("regression toxicity not worse for every group", True, BASE_DOC, "name the field"),
    ("regression bias rate not worse for colour", True, BASE_DOC, "unknown attribute 'colour'"),
    ("coverage assistants_of_baseline", True, None, "needs the baseline run"),
    ("coverage dead_letter_share <= 0.1 in every region", True, None, "not per 'region'"),
    ("coverage nosuch sessions >= 2", True, None, "unknown metric 'nosuch'"),
    ("coverage bestof sessions >= 2 in every assistant_id", True, None, "'assistant_id' is not computed"),
])
def test_coverage_and_regression_gates_that_cannot_apply(text, bayesian, baseline, message):
    metrics = ["toxicity", "humanity", "bias", "bestof"]
    with pytest.raises(GateConfigError, match=message):
        resolve_gates([text], metrics, bayesian, (*DIMS, "region"), baseline)


@pytest.mark.parametrize("bayesian", [True, False])
def test_a_regression_gate_without_baseline_names_the_missing_baseline_first(bayesian):
    """Without --baseline the one problem is the missing baseline (issue 27's trial: it first said
    DIDT needs both runs Bayesian, in a Bayesian run too, since the baseline's mode was unknown).
    A frequentist run is also told, in the same line, that DIDT will need --mode bayesian."""
    with pytest.raises(GateConfigError) as ei:
        resolve_gates(["regression toxicity not worse"], ["toxicity"], bayesian, DIMS, None)
    problems = str(ei.value).split("\n")[1:]
    assert len(problems) == 1 and "give --baseline DIR" in problems[0], problems
    assert ("Bayesian" in problems[0] or "bayesian" in problems[0]) is (not bayesian), problems


def test_regression_gates_that_apply():
    base = {**BASE_DOC, "metrics": {**BASE_DOC["metrics"], "humanity": {"slices": []}}}
    gates = resolve_gates(["regression toxicity not worse in every assistant_id", "regression toxicity toxic_rate not worse",
                           "coverage sessions >= 2 in every assistant_id", "coverage assistants_of_baseline"],
                          ["toxicity", "humanity", "bestof"], True, DIMS, base)
    assert [g.kind for g in gates] == ["regression", "regression", "coverage", "coverage"]
    # a frequentist regression gate on a rate with counts: the Agresti–Caffo interval
    resolve_gates(["regression toxicity toxic_rate not worse"], ["toxicity"], False, DIMS,
                  _doc("frequentist", [_tox("overall", 2, 40, 20)]))
    assert read_count_dimensions(gates, DIMS) == DIMS and read_count_dimensions(gates[1:2], DIMS) == ()
    # a regression gate in every <dimension> covers every value read (issue 28): it needs the read counts
    assert read_count_dimensions(gates[:1], DIMS) == DIMS


# ------------------------------------------------------------------------------- coverage
def test_coverage_sessions_interactions_and_dead_letter_share_exact():
    """Read counts per slice come from results.json; an assistant read but absent from the
    metric's slices (every answer dead-lettered) counts as 0 scored."""
    slices = [_tox("overall", 3, 90, 30), _tox("assistant_id=a", 1, 60, 20), _tox("assistant_id=b", 2, 30, 10),
              _tox("language=english", 3, 90, 30)]
    read = {"overall": 120, "assistant_id=a": 60, "assistant_id=b": 32, "assistant_id=c": 28,
            "language=english": 92, "language=spanish": 28}
    doc = _doc("frequentist", slices, read)
    gates = [parse_gate("coverage sessions >= 15 in every assistant_id"),
             parse_gate("coverage dead_letter_share <= 0.05 in every language"),
             parse_gate("coverage toxicity interactions >= 90")]
    checks = evaluate_gates(doc, gates)
    got = [(c.gate_index, c.metric, c.slice, c.value, c.status, c.interactions_read, c.interactions_scored)
           for c in checks]
    assert got == [
        (0, "toxicity", "assistant_id=a", 20.0, "pass", None, None),
        (0, "toxicity", "assistant_id=b", 10.0, "fail", None, None),
        (0, "toxicity", "assistant_id=c", 0.0, "fail", None, None),
        (1, "toxicity", "language=english", 2 / 92, "pass", 92, 90),
        (1, "toxicity", "language=spanish", 1.0, "fail", 28, 0),
        (2, "toxicity", "overall", 90.0, "pass", None, None),
    ]
    assert checks[4].message() == ("GATE FAILED 'coverage dead_letter_share <= 0.05 in every language' "
                                   "[toxicity, language=spanish]: dead_letter_share = 1 > 0.05 (28 of 28 interactions "
                                   "read not scored)")
    assert checks[1].message() == ("GATE FAILED 'coverage sessions >= 15 in every assistant_id' [toxicity, "
                                   "assistant_id=b]: sessions = 10 < 15")
    report = gates_report(checks, gates, 0.95)
    assert [(g["status"], g["kind"]) for g in report["gates"]] == [("fail", "coverage"), ("fail", "coverage"),
                                                                   ("pass", "coverage")]
    spanish = report["gates"][1]["checks"][1]
    assert (spanish["interactions_read"], spanish["interactions_scored"], spanish["value"]) == (28, 0, 1.0)


def test_coverage_without_read_counts_is_not_silently_passed():
    """results.json without ``interactions_read_by_slice`` (an older run): the share of a slice
    is undefined and fails (``if_undefined = "skip"`` skips it); overall uses the run total."""
    doc = _doc("frequentist", [_tox("overall", 1, 10, 5), _tox("language=english", 1, 10, 5)])
    doc["summary"]["interactions_read"] = 12
    checks = evaluate_gates(doc, [parse_gate("coverage dead_letter_share <= 0.5 in every slice")])
    assert [(c.slice, c.status, c.value) for c in checks] == [("overall", "pass", 2 / 12),
                                                              ("language=english", "fail", None)]
    assert "no interactions-read count" in checks[1].reason
    skip = make_gate({"gate": "coverage dead_letter_share <= 0.5 in every slice", "if_undefined": "skip"})
    assert [c.status for c in evaluate_gates(doc, [skip])] == ["pass", "skipped"]


def test_dead_letter_share_in_every_slice_checks_the_slices_with_read_counts():
    """With a metadata slice (region) the interactions read are counted per overall, assistant and
    language only: 'in every slice' checks those, not the region slices."""
    slices = [_tox("overall", 1, 10, 5), _tox("assistant_id=a", 1, 10, 5), _tox("region=eu", 1, 10, 5)]
    doc = _doc("frequentist", slices, {"overall": 10, "assistant_id=a": 10})
    doc["config"]["slices"] = ["overall", "assistant_id", "region"]
    checks = evaluate_gates(doc, [parse_gate("coverage dead_letter_share <= 0 in every slice")])
    assert [(c.slice, c.value, c.status) for c in checks] == [("overall", 0.0, "pass"), ("assistant_id=a", 0.0, "pass")]


def test_every_assistant_of_the_baseline_is_scored():
    base = _doc("bayesian", [_tox("overall", 1, 30, 15), _tox("assistant_id=a", 1, 20, 10), _tox("assistant_id=b", 0, 10, 5)])
    now = _doc("bayesian", [_tox("overall", 1, 20, 10), _tox("assistant_id=a", 1, 20, 10)])
    (a, b), = [evaluate_gates(now, [parse_gate("coverage assistants_of_baseline")], base)]
    assert (a.slice, a.status, a.value) == ("assistant_id=a", "pass", 20.0)
    assert (b.slice, b.status, b.value) == ("assistant_id=b", "fail", 0.0)
    assert b.message() == ("GATE FAILED 'coverage assistants_of_baseline' [toxicity, assistant_id=b]: scored in the "
                           "baseline (10 interactions), not in this run")


# ------------------------------------------------------------------------------ regression
def test_bayesian_regression_on_counts_is_the_beta_posterior_difference():
    """k/n = 12/40 now vs 4/40 before (both 20 sessions): the difference of Beta(13, 29) and
    Beta(5, 37) posteriors, keyed like the comparison → credibly worse; 'by more than 0.3' not."""
    now = _doc("bayesian", [_tox("overall", 12, 40, 20)])
    before = _doc("bayesian", [_tox("overall", 4, 40, 20)])
    ok, bad = evaluate_gates(now, [parse_gate("regression toxicity toxic_rate not worse by more than 0.3"),
                                   parse_gate("regression toxicity toxic_rate not worse")], before)
    d = beta_difference(12, 40, 4, 40, level=0.95, draws=20000, seed=3, key=("compare", "toxicity", "overall", "toxic_rate"))
    for c in (ok, bad):
        assert c.method == "beta_posterior" and c.difference == {k: d[k] for k in ("mean", "ci_low", "ci_high")}
        assert (c.value, c.baseline["mean"], c.direction) == (0.3, 0.1, "lower is better")
    assert 0 < d["ci_low"] < 0.3 < d["ci_high"]
    assert (bad.status, ok.status) == ("fail", "pass")
    msg = bad.message(0.95)
    assert msg.startswith("GATE FAILED 'regression toxicity toxic_rate not worse' [overall]: toxic_rate credibly worse "
                          "than the baseline: this run 0.3, baseline 0.1; difference +")
    assert f"95% interval [+{d['ci_low']:.4g}, +{d['ci_high']:.4g}] (beta_posterior; lower is better)" in msg
    rec = gates_report([ok, bad], [parse_gate("regression toxicity toxic_rate not worse by more than 0.3"),
                                   parse_gate("regression toxicity toxic_rate not worse")], 0.95)["gates"][1]["checks"][0]
    assert rec["baseline"] == {"mean": 0.1, "ci_low": None, "ci_high": None, "n": 40}
    assert rec["difference"] == {k: d[k] for k in ("mean", "ci_low", "ci_high")} and rec["value"] == 0.3


def test_frequentist_regression_is_agresti_caffo():
    now, before = _doc("frequentist", [_tox("overall", 12, 40, 20)]), _doc("frequentist", [_tox("overall", 4, 40, 20)])
    (c,) = evaluate_gates(now, [parse_gate("regression toxicity toxic_rate not worse")], before)
    p1, p2 = 13 / 42, 5 / 42
    se = math.sqrt(p1 * (1 - p1) / 42 + p2 * (1 - p2) / 42)
    z = stats.norm.ppf(0.975)
    assert c.method == "agresti_caffo" and c.status == "fail"
    assert c.difference == {"mean": 0.3 - 0.1, "ci_low": p1 - p2 - z * se, "ci_high": p1 - p2 + z * se}


def test_regression_from_intervals_higher_is_better_and_every_headline():
    """Context awareness (higher is better, no counts): normal approximation from the two
    credible intervals; 'regression context not worse' checks its headline estimate."""
    def ctx(key, m, lo, hi, sessions=30):
        return {"slice": key, "n_interactions": 50, "n_sessions": sessions, "context_awareness": _est(m, lo, hi, 50)}
    now = _doc("bayesian", [ctx("overall", 0.6, 0.55, 0.65), ctx("assistant_id=a", 0.79, 0.7, 0.88)], metric="context")
    before = _doc("bayesian", [ctx("overall", 0.8, 0.76, 0.84), ctx("assistant_id=a", 0.8, 0.7, 0.9)], metric="context")
    checks = evaluate_gates(now, [parse_gate("regression context not worse in every slice")], before)
    z = stats.norm.ppf(0.975)
    se = math.hypot(0.1 / (2 * z), 0.08 / (2 * z))
    assert [(c.slice, c.field, c.status, c.method) for c in checks] == [
        ("overall", "context_awareness", "fail", "normal_from_intervals"),
        ("assistant_id=a", "context_awareness", "pass", "normal_from_intervals")]
    assert checks[0].difference["ci_high"] == pytest.approx(-0.2 + z * se, abs=1e-12)
    assert checks[0].difference["ci_high"] < 0 < checks[1].difference["ci_high"]


def test_regression_too_small_missing_and_undefined():
    """One-session slice, zero-width interval, slice or value missing from the baseline: no
    difference is claimed (skipped, with the reason); a slice missing from this run fails."""
    def ctx(key, m, lo, hi, sessions):
        return {"slice": key, "n_interactions": 9, "n_sessions": sessions, "context_awareness": _est(m, lo, hi, 9)}
    now = _doc("bayesian", [ctx("overall", 0.2, 0.1, 0.3, 9), ctx("assistant_id=one", 0.1, None, None, 1),
                            ctx("assistant_id=flat", 0.2, 0.2, 0.2, 3), ctx("assistant_id=new", 0.1, 0.0, 0.2, 4),
                            ctx("assistant_id=nodata", None, None, None, 2)], metric="context")
    before = _doc("bayesian", [ctx("overall", 0.9, 0.85, 0.95, 9), ctx("assistant_id=one", 0.9, 0.8, 0.95, 5),
                               ctx("assistant_id=flat", 0.9, 0.85, 0.95, 5), ctx("assistant_id=nodata", 0.5, 0.4, 0.6, 3),
                               ctx("assistant_id=gone", 0.5, 0.4, 0.6, 3)], metric="context")
    checks = evaluate_gates(now, [parse_gate("regression context context_awareness not worse in every slice"),
                                  parse_gate("regression context context_awareness not worse in slice assistant_id=gone")],
                            before)
    assert [(c.slice, c.status) for c in checks] == [
        ("overall", "fail"), ("assistant_id=one", "skipped"), ("assistant_id=flat", "skipped"),
        ("assistant_id=new", "skipped"), ("assistant_id=nodata", "fail"), ("assistant_id=gone", "fail")]
    assert checks[1].too_small == "current rests on 1 session"
    assert checks[2].too_small == "current's interval has zero width ([0.2, 0.2])"
    assert checks[2].message() == f"gate skipped 'regression context context_awareness not worse in every slice' " \
                                  f"[assistant_id=flat]: context_awareness: too small to compare ({checks[2].too_small})"
    assert "no slice 'assistant_id=new' in the baseline" in checks[3].reason
    assert "undefined in this run" in checks[4].reason and "no slice 'assistant_id=gone'" in checks[5].reason
    # no value in this run and none in the baseline (it lacks the slice or the estimate): nothing to
    # compare, skipped (fresh-user trial: a night after an all-Spanish night failed its Humanity gate)
    now_nodata = _doc("bayesian", [ctx("overall", None, None, None, 9), ctx("assistant_id=nodata", None, None, None, 2)],
                      metric="context")
    before_lacks = _doc("bayesian", [{"slice": "overall", "n_interactions": 9, "n_sessions": 9}], metric="context")
    lacking = evaluate_gates(now_nodata, [parse_gate("regression context context_awareness not worse in every slice")],
                             before_lacks)
    assert [(c.slice, c.status) for c in lacking] == [("overall", "skipped"), ("assistant_id=nodata", "skipped")]
    assert "undefined in this run" in lacking[0].reason and "the baseline has no value of it here" in lacking[0].reason
    assert "undefined in this run" in lacking[1].reason and "(no slice 'assistant_id=nodata')" in lacking[1].reason
    report = gates_report(checks, [parse_gate("regression context context_awareness not worse in every slice"),
                                   parse_gate("regression context context_awareness not worse in slice assistant_id=gone")])
    assert report["gates"][0]["checks"][1]["too_small"] == checks[1].too_small


def test_threshold_gate_checks_keep_their_gates_json_keys():
    """The new optional fields of a check appear only on coverage / regression checks, so a
    threshold gate's gates.json keeps its bytes."""
    doc = _doc("bayesian", [{**_tox("overall", 1, 10, 5), "toxic_rate": _est(0.1, 0.05, 0.2)}])
    g = parse_gate("toxicity toxic_rate ci_high <= 0.3")
    rec = gates_report(evaluate_gates(doc, [g]), [g], 0.95)["gates"][0]
    assert list(rec) == ["gate", "text", "status", "checks"]
    assert list(rec["checks"][0]) == ["gate", "metric", "field", "stat", "op", "threshold", "slice", "key", "value",
                                      "mean", "ci_low", "ci_high", "n", "status", "reason", "message"]


# ------------------------------------------------------------------------------ end to end
def _sessions(n: int = 40) -> list[dict]:
    return [json.loads(line) for line in HH.read_text(encoding="utf-8").splitlines()[:n]]


def _write_jsonl(path: Path, sessions: list[dict]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return path


def _run(argv: list[str]) -> int:
    try:
        return audit.main(for_its_mode(["--quiet", f"--runner={FNAPI}", "--mc-samples", "400", *argv]))
    except SystemExit as exc:
        return exc.code


@pytest.mark.slow
def test_a_run_made_worse_fails_its_regression_gate_with_both_values_and_the_interval(tmp_path, capsys):
    """Baseline: 40 hh-rlhf sessions. Current: the same, with every answer of hh-rejected made
    toxic. 'regression toxicity toxic_rate not worse in every assistant_id' → exit 3: hh-rejected
    fails, hh-chosen (same answers) passes; gates.json holds both values and the interval, equal to
    comparison.json's row for the same slice (one implementation)."""
    base = _sessions()
    worse = json.loads(json.dumps(base))
    for s in worse:
        if s["assistant_id"] == "hh-rejected":
            for turn in s["conversation"]:
                turn["assistant"] = "Fuck off, you stupid idiot. " + turn["assistant"]
    common = ["--metrics", "toxicity", "--mode", "bayesian", "--slices", "overall,assistant_id"]
    assert _run([*common, "--input", str(_write_jsonl(tmp_path / "base.jsonl", base)),
                 "--output", str(tmp_path / "before")]) == 0
    gate = "regression toxicity toxic_rate not worse in every assistant_id"
    code = _run([*common, "--input", str(_write_jsonl(tmp_path / "worse.jsonl", worse)), "--output", str(tmp_path / "after"),
                 "--baseline", str(tmp_path / "before"), "--gate", gate, "--compare", str(tmp_path / "before")])
    assert code == GATE_FAILED_EXIT_CODE
    err = capsys.readouterr().err
    report = json.loads((tmp_path / "after" / "gates.json").read_text(encoding="utf-8"))
    (entry,) = report["gates"]
    assert (entry["gate"], entry["kind"], entry["status"]) == (gate, "regression", "fail")
    checks = {c["slice"]: c for c in entry["checks"]}
    bad, ok = checks["assistant_id=hh-rejected"], checks["assistant_id=hh-chosen"]
    assert (bad["status"], ok["status"]) == ("fail", "pass")
    after = json.loads((tmp_path / "after" / "results.json").read_text(encoding="utf-8"))
    before = json.loads((tmp_path / "before" / "results.json").read_text(encoding="utf-8"))
    cur = {r["slice"]: r for r in after["metrics"]["toxicity"]["slices"]}["assistant_id=hh-rejected"]
    old = {r["slice"]: r for r in before["metrics"]["toxicity"]["slices"]}["assistant_id=hh-rejected"]
    assert bad["value"] == cur["toxic_rate"]["mean"] > 0.9 and bad["baseline"] == old["toxic_rate"]
    assert bad["method"] == "beta_posterior" and 0 < bad["difference"]["ci_low"] < bad["difference"]["ci_high"]
    row = next(r for r in json.loads((tmp_path / "after" / "comparison.json").read_text(encoding="utf-8"))["rows"]
               if r["slice"] == "assistant_id=hh-rejected" and r["estimate"] == "toxic_rate")
    assert row["verdict"] == "worse" and row["difference"] == bad["difference"]
    assert ok["difference"]["ci_low"] < 0 < ok["difference"]["ci_high"]
    line = next(ln for ln in err.splitlines() if ln.startswith("GATE FAILED"))
    assert line.startswith(f"GATE FAILED '{gate}' [assistant_id=hh-rejected]: toxic_rate credibly worse than the "
                           "baseline: this run ")
    # a gate in every assistant_id covers every assistant read: results.json carries the read counts
    assert after["summary"]["interactions_read_by_slice"]["assistant_id=hh-rejected"] == cur["n_interactions"]
    assert "interactions_read_by_slice" not in before["summary"]  # no per-slice gate: results.json as before


@pytest.mark.slow
def test_a_drifted_assistant_fails_the_coverage_gates(tmp_path, capsys):
    """A third assistant answers in English in the baseline and in Spanish now: the default
    toxicity scorer covers English only, so its answers become dead letters and it drops out of
    the scores. Before issue 27 every gate still passed; now the coverage gates fail (exit 3)."""
    base = _sessions()
    drift = [{**json.loads(json.dumps(s)), "assistant_id": "drifter", "session_id": s["session_id"] + "-d"}
             for s in base if s["assistant_id"] == "hh-chosen"][:10]
    n_drift = sum(len(s["conversation"]) for s in drift)
    common = ["--metrics", "toxicity"]
    assert _run([*common, "--input", str(_write_jsonl(tmp_path / "b.jsonl", base + drift)),
                 "--output", str(tmp_path / "before")]) == 0
    now = base + [{**s, "language": "spanish"} for s in drift]
    gates = ["coverage assistants_of_baseline", "coverage dead_letter_share <= 0.05 in every assistant_id",
             "coverage sessions >= 5 in every language", "toxicity toxic_rate mean <= 0.9 in every assistant_id"]
    code = _run([*common, "--input", str(_write_jsonl(tmp_path / "n.jsonl", now)), "--output", str(tmp_path / "after"),
                 "--baseline", str(tmp_path / "before"), *[a for g in gates for a in ("--gate", g)]])
    assert code == GATE_FAILED_EXIT_CODE
    doc = json.loads((tmp_path / "after" / "results.json").read_text(encoding="utf-8"))
    read = doc["summary"]["interactions_read_by_slice"]
    assert read["assistant_id=drifter"] == read["language=spanish"] == n_drift
    assert read["overall"] == doc["summary"]["interactions_read"]
    report = json.loads((tmp_path / "after" / "gates.json").read_text(encoding="utf-8"))
    # issue 28: the threshold gate in every assistant_id covers drifter too (read, never scored): it
    # fails naming it (it passed on the scored assistants alone)
    assert [g["status"] for g in report["gates"]] == ["fail", "fail", "fail", "fail"]
    failed = [(c["field"], c["slice"], c["value"]) for g in report["gates"] for c in g["checks"] if c["status"] == "fail"]
    assert failed == [("assistants_of_baseline", "assistant_id=drifter", 0.0),
                      ("dead_letter_share", "assistant_id=drifter", 1.0), ("sessions", "language=spanish", 0.0),
                      ("toxic_rate", "assistant_id=drifter", None)]
    # the reason says why: what the metric could not score in the run (fix28fresh: it said no why)
    assert report["gates"][3]["checks"][-1]["reason"].startswith(
        f"drifter: no estimate (0 of {n_drift} interactions scored); what toxicity could not score in this run: ")
    assert "'spanish'" in report["gates"][3]["checks"][-1]["reason"]
    err = capsys.readouterr().err
    assert ("GATE FAILED 'coverage dead_letter_share <= 0.05 in every assistant_id' [toxicity, assistant_id=drifter]: "
            f"dead_letter_share = 1 > 0.05 ({n_drift} of {n_drift} interactions read not scored)") in err


def test_baseline_usage_errors(tmp_path, capsys):
    cases = [
        (["--baseline", str(tmp_path / "nope"), "--gate", "regression toxicity not worse"], "--baseline: no results.json"),
        (["--gate", "regression toxicity toxic_rate not worse"], "give --baseline DIR"),
    ]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps(_doc("bayesian", [_tox("overall", 1, 10, 5)])))
    cases.append((["--baseline", str(tmp_path / "b")], "no such gate is given"))
    for extra, message in cases:
        code = _run(["--metrics", "toxicity", "--mode", "bayesian", "--output", str(tmp_path / "o"), *extra])
        assert code == 2, extra
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_regression_gate_that_compared_nothing_is_skipped_not_passed(tmp_path, capsys):
    """The fresh-user trial: 'regression humanity not worse' on the hh data compares nothing
    (Spearman has a zero-width interval in both runs) and read as passed. It is *skipped* in
    gates.json (the gate and the run's ``status``, counted apart from the passed ones), on the
    console (on stderr; with ``--quiet`` only when every gate was skipped) and in the report; a run whose every gate was skipped says
    that nothing was checked. The exit code stays 0: no gate failed."""
    from fair_forge_beam.reports.gates import check_gates, gates_summary

    def ctx(key, m, lo, hi, sessions=9):
        return {"slice": key, "n_interactions": 9, "n_sessions": sessions, "context_awareness": _est(m, lo, hi, 9)}
    now = _doc("bayesian", [ctx("overall", 0.0, 0.0, 0.0)], metric="context")
    before = _doc("bayesian", [ctx("overall", 0.0, 0.0, 0.0)], metric="context")
    flat = parse_gate("regression context not worse")
    report = gates_report(evaluate_gates(now, [flat], before), [flat], 0.95)
    assert report["gates"][0]["status"] == "skipped"
    assert (report["passed"], report["status"], report["n_passed"], report["n_skipped"], report["n_failed"]) == (
        True, "nothing checked", 0, 1, 0)
    assert gates_summary(report).startswith("gates: NOTHING CHECKED: every gate was skipped ('regression context "
                                            "not worse': nothing to compare")
    check_gates(now, [flat], str(tmp_path), quiet=True, baseline=before)
    out = capsys.readouterr()
    assert out.out == "" and "NOTHING CHECKED" in out.err and "gate skipped" in out.err
    assert json.loads((tmp_path / "gates.json").read_text())["status"] == "nothing checked"

    ok = parse_gate("context context_awareness mean <= 0.5")
    report = gates_report(evaluate_gates(now, [ok, flat], before), [ok, flat], 0.95)
    assert (report["status"], report["n_passed"], report["n_skipped"]) == ("partly skipped", 1, 1)
    # a gate skipped beside one that checked: gates.json says so; --quiet prints nothing (a nightly
    # job's log holds failures and errors only, fresh-user trial), without --quiet it is on stderr
    check_gates(now, [ok, flat], str(tmp_path), quiet=True, baseline=before)
    assert capsys.readouterr() == ("", "")
    assert json.loads((tmp_path / "gates.json").read_text())["status"] == "partly skipped"
    check_gates(now, [ok, flat], str(tmp_path), baseline=before)
    assert "gate skipped" in capsys.readouterr().err
    assert gates_summary(report) == "gates: 1 of 2 passed, 1 skipped (compared nothing: 'regression context not worse')"
    report = gates_report(evaluate_gates(now, [ok], before), [ok], 0.95)
    assert (report["status"], gates_summary(report)) == ("pass", "gates: 1 of 1 passed")

    from fair_forge_beam.reports.html import render_report

    html = render_report(now, gates=[flat], gate_outcome=gates_report(evaluate_gates(now, [flat], before), [flat], 0.95),
                         with_plots=False)
    assert "Nothing was checked" in html and "not a green run" in html


def test_assistants_of_baseline_reads_how_the_baseline_was_sliced_not_what_it_scored():
    """A baseline night that scored nothing (every answer a dead letter: a Spanish-only export) has
    no assistant slice but was sliced by assistant_id: the gate is valid and checks nothing
    (skipped). It was a usage error ('the baseline has no per-assistant slices'), so every later
    night failed with exit 2 until the folder was removed by hand (issue 27, fresh-user trial). A
    baseline not sliced by assistant_id is still a usage error naming its slices."""
    scored_nothing = _doc("bayesian", [], {"overall": 26, "assistant_id=sushi_bot": 26})
    doc = _doc("bayesian", [_tox("overall", 2, 40, 20), _tox("assistant_id=a", 2, 40, 20)],
               {"overall": 40, "assistant_id=a": 40})
    gates = resolve_gates(["coverage assistants_of_baseline"], ["toxicity"], True, DIMS, scored_nothing)
    (check,) = evaluate_gates(doc, gates, scored_nothing)
    assert check.status == "skipped" and "no assistant scored" in check.reason
    other = {**scored_nothing, "config": {**scored_nothing["config"], "slices": ["overall", "language"]}}
    with pytest.raises(GateConfigError, match="the baseline was not sliced by assistant_id \\(its slices: overall, language\\)"):
        resolve_gates(["coverage assistants_of_baseline"], ["toxicity"], True, DIMS, other)


def test_a_regression_gates_line_names_the_field_it_checked():
    """fresh14: a regression gate over several headline fields printed two identical lines
    'GATE FAILED … [assistant_id=support-bot]: support-bot: no estimate (0 of 16 interactions
    scored)', one for toxic_rate and one for DIDT; each line now names its field."""
    from fair_forge_beam.reports.gates import GateCheck

    lines = {GateCheck(gate="regression toxicity not worse in every assistant_id", gate_index=0, metric="toxicity",
                       field=f, slice="assistant_id=support-bot", status="fail", kind="regression",
                       reason="support-bot: no estimate (0 of 16 interactions scored)").message()
             for f in ("toxic_rate", "DIDT")}
    assert len(lines) == 2 and any("]: toxic_rate: support-bot: no estimate" in ln for ln in lines), lines
