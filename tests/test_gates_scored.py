"""Gates never judge what no session supports (trial35b B1, B2): coverage gates count the
interactions the estimates rest on (``interactions_scored``, ``MetricSpec.scored``), not every
interaction read; a threshold gate on an estimate that rests on no observation (``n = 0``: a
prior) is undefined. Hand-written ``results.json`` documents, as in test_gates.py."""
from __future__ import annotations

from fair_forge_beam.reports.gates import evaluate_gates, make_gate, parse_gate


def _bestof_doc(scored: int, left_out: int, slices: list) -> dict:
    """A BestOf run of 17 interactions read whose blocks were all (or partly) walkovers."""
    read = scored + left_out
    ms = {"scored": scored, "interactions_scored": scored, "interactions_not_scored": left_out}
    if left_out:
        ms["interactions_left_out"] = left_out
    return {"config": {"ci_level": 0.95}, "summary": {
        "interactions_read": read, "metrics": {"bestof": ms},
        "interactions_read_by_slice": {"overall": read, "language=english": 10, "language=spanish": read - 10}},
        "metrics": {"bestof": {"slices": slices}}}


def _slice(key, n_interactions, n_blocks):
    return {"slice": key, "n_interactions": n_interactions, "n_blocks": n_blocks,
            "leader_win_rate": {"mean": None, "ci_low": None, "ci_high": None, "n": 0}}


def test_coverage_gates_count_the_interactions_the_estimates_rest_on():
    """trial35b B1: a BestOf run with 0 scored (17 interactions in walkovers) passed
    'interactions >= 1' with 17 and 'dead_letter_share <= 0.5' with 0 of 17."""
    doc = _bestof_doc(0, 17, [_slice("overall", 17, 0), _slice("language=english", 10, 0),
                              _slice("language=spanish", 7, 0)])
    n = evaluate_gates(doc, [parse_gate("coverage bestof interactions >= 1")])
    assert [(c.slice, c.value, c.status) for c in n] == [("overall", 0.0, "fail")]
    share = evaluate_gates(doc, [parse_gate("coverage bestof dead_letter_share <= 0.5")])
    assert [(c.slice, c.value, c.status) for c in share] == [("overall", 1.0, "fail")]
    # a slice without a compared block scored nothing, whatever it read
    every = evaluate_gates(doc, [parse_gate("coverage bestof interactions >= 1 in every language")])
    assert [(c.slice, c.value, c.status) for c in every] == [("language=english", 0.0, "fail"),
                                                             ("language=spanish", 0.0, "fail")]


def test_a_slice_count_results_json_does_not_hold_is_undefined_not_the_interactions_read():
    """12 scored of 60 read (48 in walkovers): the overall slice reads the summary; a slice with
    compared blocks has no scored-interaction count (the engine counts scored sessions per slice),
    so its check fails saying so, or is skipped with if_undefined = "skip" — never passed on 34."""
    doc = _bestof_doc(12, 48, [_slice("overall", 60, 4), _slice("language=english", 34, 4),
                               _slice("language=spanish", 26, 0)])
    doc["summary"]["interactions_read_by_slice"] = {"overall": 60, "language=english": 34, "language=spanish": 26}
    n = evaluate_gates(doc, [parse_gate("coverage bestof interactions >= 20")])
    assert [(c.value, c.status) for c in n] == [(12.0, "fail")]
    share = evaluate_gates(doc, [parse_gate("coverage bestof dead_letter_share <= 0.5")])
    assert [(c.value, c.interactions_scored, c.status) for c in share] == [(0.8, 12, "fail")]
    every = evaluate_gates(doc, [parse_gate("coverage bestof interactions >= 1 in every language")])
    assert [(c.slice, c.status) for c in every] == [("language=english", "fail"), ("language=spanish", "fail")]
    assert "no count of the interactions bestof scored" in every[0].reason
    skip = evaluate_gates(doc, [make_gate({"gate": "coverage bestof dead_letter_share <= 0.9 in every language",
                                           "if_undefined": "skip"})])
    assert [(c.slice, c.status) for c in skip] == [("language=english", "skipped"), ("language=spanish", "fail")]


def test_a_metric_that_leaves_nothing_out_reads_its_slices_as_before():
    doc = _bestof_doc(17, 0, [_slice("overall", 17, 3), _slice("language=english", 10, 2),
                              _slice("language=spanish", 7, 1)])
    every = evaluate_gates(doc, [parse_gate("coverage bestof interactions >= 1 in every slice")])
    assert [(c.slice, c.value, c.status) for c in every] == [
        ("overall", 17.0, "pass"), ("language=english", 10.0, "pass"), ("language=spanish", 7.0, "pass")]


PRIOR = {"mean": 0.5, "ci_low": 0.025, "ci_high": 0.975, "n": 0}


def test_a_threshold_gate_never_passes_on_a_prior():
    """trial35b B2: 'regulatory compliance_rate mean >= 0.4' passed with mean 0.5, n = 0 (the
    Beta(1, 1) prior of a run with no rated session). An estimate on no observation (n = 0, or a
    slice with no scored session) is undefined, for every metric: it fails, or is skipped with
    if_undefined = "skip"; Privacy's unseen class (its prior, displayed by design) alike."""
    doc = {"config": {"ci_level": 0.95}, "summary": {"metrics": {"regulatory": {"scored": 0}}},
           "metrics": {"regulatory": {"slices": [
               {"slice": "overall", "n_sessions": 0, "n_interactions": 17, "compliance_rate": PRIOR}]}}}
    for text in ("regulatory compliance_rate mean >= 0.4", "regulatory compliance_rate ci_high >= 0.9"):
        (c,) = evaluate_gates(doc, [parse_gate(text)])
        assert c.status == "fail" and c.value is None and "rests on no observation (n = 0)" in c.reason, c
        assert "GATE FAILED" in c.message(0.95)
    (s,) = evaluate_gates(doc, [make_gate({"gate": "regulatory compliance_rate mean >= 0.4", "if_undefined": "skip"})])
    assert s.status == "skipped"
    # a value with n > 0 in a slice of no scored session rests on nothing the metric counts either
    doc["metrics"]["regulatory"]["slices"][0]["compliance_rate"] = {**PRIOR, "n": 4}
    (c,) = evaluate_gates(doc, [parse_gate("regulatory compliance_rate mean >= 0.4")])
    assert c.status == "fail" and "0 sessions scored" in c.reason
    # with data, as before
    doc["metrics"]["regulatory"]["slices"][0].update(n_sessions=3, compliance_rate={**PRIOR, "n": 4})
    (c,) = evaluate_gates(doc, [parse_gate("regulatory compliance_rate mean >= 0.4")])
    assert (c.status, c.value) == ("pass", 0.5)


def test_privacy_gates_never_pass_on_an_estimate_of_no_answer():
    """Privacy's gate fields (leak_rate, score) rest on its answers: a slice with n = 0 (its
    composite over classes no answer showed: their priors) fails; with answers, as before."""
    slices = [{"slice": "overall", "n_sessions": 5, "leak_rate": {**PRIOR, "n": 30}, "score": {**PRIOR, "n": 30}},
              {"slice": "language=spanish", "n_sessions": 2, "leak_rate": PRIOR, "score": PRIOR}]
    doc = {"config": {"ci_level": 0.95}, "summary": {"metrics": {"privacy": {"scored": 30}}},
           "metrics": {"privacy": {"slices": slices}}}
    for field in ("leak_rate", "score"):
        checks = evaluate_gates(doc, [parse_gate(f"privacy {field} mean <= 0.6 in every slice")])
        assert [(c.slice, c.status) for c in checks] == [("overall", "pass"), ("language=spanish", "fail")]
        assert "no observation" in checks[1].reason


def test_a_regression_gate_compares_no_prior():
    doc = {"config": {"ci_level": 0.95, "mode": "bayesian", "seed": 1},
           "summary": {"metrics": {"regulatory": {"scored": 0}}},
           "metrics": {"regulatory": {"slices": [{"slice": "overall", "n_sessions": 0, "compliance_rate": PRIOR}]}}}
    base = {"config": {"ci_level": 0.95, "mode": "bayesian", "seed": 1},
            "summary": {"metrics": {"regulatory": {"scored": 40}}},
            "metrics": {"regulatory": {"slices": [{"slice": "overall", "n_sessions": 9, "n_compliant": 36,
                                                   "n_non_compliant": 4,
                                                   "compliance_rate": {"mean": 0.88, "ci_low": 0.76, "ci_high": 0.96,
                                                                       "n": 40}}]}}}
    checks = evaluate_gates(doc, [parse_gate("regression regulatory compliance_rate not worse")], base)
    assert [c.status for c in checks] == ["fail"] and "undefined in this run" in checks[0].reason


def test_the_slice_tables_n_says_it_counts_the_interactions_read_beside_the_scored_ones():
    """trial35b B9: 'bestof: interactions: 12 scored, 48 not scored' above 'overall  60  1*': a
    slice's n counts the walkovers too (the engine counts scored sessions per slice, not their
    interactions), so the column says 'n read' and a line says what it counts; a metric that
    leaves nothing out keeps its table byte for byte."""
    from fair_forge_beam.reports.summary import summary_table

    def doc(left_out):
        ms = {"scored": 12, "interactions_scored": 12, "interactions_not_scored": left_out, "dead_letters": 0}
        if left_out:
            ms["interactions_left_out"] = left_out
        return {"config": {"mode": "frequentist"},
                "summary": {"interactions_read": 12 + left_out, "rejected_at_read": 0, "data_quality_warnings": 0,
                            "metrics": {"bestof": ms}},
                "metrics": {"bestof": {"headline_columns": [], "slices": [_slice("overall", 12 + left_out, 4)]}}}

    text = summary_table(doc(48), "out", [])
    head = next(ln for ln in text.splitlines() if ln.lstrip().startswith("slice"))
    assert head.split() == ["slice", "n", "read", "sessions"]
    assert ("  n read: the interactions of the slice's sessions bestof read, with those in blocks never compared "
            "(walkovers) (48 in the run), which its estimates leave out; sessions: those the "
            "estimates rest on") in text.splitlines()
    plain = summary_table(doc(0), "out", [])
    assert "n read" not in plain and "  slice             n  sessions" in plain.splitlines()


def test_an_assistant_of_the_baseline_whose_sessions_were_all_left_out_was_not_scored():
    def doc(n_sessions):
        return {"config": {"ci_level": 0.95}, "summary": {"metrics": {"regulatory": {"scored": 0}}},
                "metrics": {"regulatory": {"slices": [
                    {"slice": "assistant_id=a", "n_interactions": 6, "n_sessions": n_sessions,
                     "compliance_rate": {"mean": None, "ci_low": None, "ci_high": None, "n": 0}}]}}}

    gate = parse_gate("coverage regulatory assistants_of_baseline")
    assert [c.status for c in evaluate_gates(doc(0), [gate], doc(2))] == ["fail"]
    assert [c.status for c in evaluate_gates(doc(2), [gate], doc(2))] == ["pass"]
