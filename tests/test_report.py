"""The HTML audit report, ``load_results`` and the run comparison (issue 7).

End to end: the main job on the shipped example data in both modes (Bayesian with an extra file
of hostile answers), the reports opened in headless Chromium (Debian's ``chromium`` driven by
playwright): no console error, no request but the file itself, a screenshot, and hostile text
shown as text in the DOM. The comparison: a run against itself gives "no detectable difference"
everywhere; a toxic assistant against a clean one gives "worse". Expected numbers are computed
here from the formulas (Agresti–Caffo, Wald, width ∝ 1/√n), not with the library's helpers.

Issue 15: the report opens with the findings (worst assistant and metric, scorecard, credible
differences, definitions), uses human labels, groups slices too small to judge, shows undefined
Spearman as n/a; the plot bugs (rows of the N_i / T_i panels, colliding tick labels, undrawn
slices chosen by size) are tested on the figures; the first screen of both modes is saved as a
screenshot (``FAIR_FORGE_REPORT_SHOTS`` names the folder, default ``<pytest tmp>/report-shots``).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fair_forge_beam.reports.load import iter_jsonl_lines
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from fair_forge_beam.reports.compare import compare_runs
from fair_forge_beam.reports.estimates import iter_estimates
from fair_forge_beam.reports.html import render_report, write_report
from fair_forge_beam.reports.scorecard import inconclusive
from fair_forge_beam.reports.load import dead_letter_summary, load_results
from fair_forge_beam.reports.plots import figure_svg
from pipelines import audit

from helpers import FNAPI, KEYWORD_AUDIT, for_its_mode, open_page

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
KEYWORD = ["--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex", "--mc-samples", "1000"]


def _write_jsonl(path: Path, sessions: list[dict]) -> str:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return str(path)


def _run(out: Path, *argv: str) -> dict:
    return audit.run(for_its_mode(["--quiet", "--output", str(out), f"--runner={FNAPI}", *argv]))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The example data in both modes; the Bayesian run also reads two sessions whose assistant
    ids and answers are HTML/JS injections (one French: dead-lettered by Humanity with its own reason,
    so its raw record is among those shown)."""
    base = tmp_path_factory.mktemp("report")
    xss = _write_jsonl(base / "xss.jsonl", [
        {"session_id": "x1", "assistant_id": XSS_SCRIPT, "language": "french",
         "conversation": [{"qa_id": "q1", "query": "hola", "assistant": f"{XSS_SCRIPT} {XSS_IMG}"}]},
        {"session_id": "x2", "assistant_id": XSS_IMG, "language": "english",
         "conversation": [{"qa_id": "q1", "query": "hi", "assistant": f"{XSS_IMG} {XSS_SCRIPT} stupid"}]},
    ])
    inputs = [a for i in audit.default_inputs() for a in ("--input", i)]
    out = {}
    t0 = time.perf_counter()
    out["bayesian"] = (base / "bayes", _run(base / "bayes", "--mode", "bayesian", *KEYWORD, *inputs, "--input", xss))
    out["frequentist"] = (base / "freq", _run(base / "freq", "--mode", "frequentist", *KEYWORD))
    out["seconds"] = time.perf_counter() - t0
    return out


# ------------------------------------------------------------------ main job writes the report
@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_main_job_writes_self_contained_report(runs, mode):
    out, doc = runs[mode]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for metric in ("humanity", "toxicity"):
        assert f'id="metric-{metric}"' in html
    assert html.count("<svg") >= 6  # humanity 3 + toxicity 4 plots
    # nothing to fetch: no script, no external URL other than SVG/XLink namespace names
    assert "<script" not in html.replace("&lt;script", "")
    for ref in ("src=\"http", "href=\"http", "url(http", "@import", "<link", "<iframe"):
        assert ref not in html, ref
    # header content from results.json / run_info.json
    assert "HurtLex" in html and "NRC" in html and "CC BY-NC-SA" in html
    assert f"{doc['summary']['interactions_read']} interactions read" in html
    assert "FnApiRunner" in html and "apache-beam 2.77.0" in html
    # the dead letter: 26 Spanish example answers (+1 hostile one) not scored by Humanity
    assert "no emotion lexicon for language" in html


@pytest.mark.slow
def test_bayesian_report_flags_inconclusive_with_needed_n(runs):
    out, doc = runs["bayesian"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Inconclusive — collect more data" in html and "width ∝ 1/√n" in html
    # a small assistant slice: toxic_rate over 10 answers has a Beta interval wider than 0.2 (a
    # one-session slice has no interval since issue 19's one rule; this test used one before)
    rec = next(s for s in doc["metrics"]["toxicity"]["slices"] if s["slice"] == "assistant_id=sushi_bot")
    assert rec["n_sessions"] > 1
    est = rec["toxic_rate"]
    w = est["ci_high"] - est["ci_low"]
    assert w > 0.2
    assert f"{math.ceil(est['n'] * (w / 0.2) ** 2)}" in html


@pytest.mark.slow
def test_no_report_flag_and_compare_flag_end_to_end(tmp_path):
    """Two assistants with clearly different toxicity rates: "worse" for the toxic one."""
    clean_answers = ["The soup is ready.", "The store is open from nine to five.",
                     "Please reset the password on the settings page.", "Thanks, have a nice day."]
    toxic_answers = ["You are a stupid idiot and a moron.", "Shut up, you worthless imbecile.",
                     "What a dumb idiot question, loser.", "You are an idiot."]

    def sessions(aid, answers):
        return [{"session_id": f"{aid}-{i}", "assistant_id": aid, "language": "english",
                 "conversation": [{"qa_id": f"q{j}", "query": "question", "assistant": answers[(i + j) % 4]} for j in range(3)]}
                for i in range(20)]

    clean = _write_jsonl(tmp_path / "clean.jsonl", sessions("clean-bot", clean_answers))
    toxic = _write_jsonl(tmp_path / "toxic.jsonl", sessions("toxic-bot", toxic_answers))
    argv = ["--metrics", "toxicity", "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex", "--mode", "bayesian", "--mc-samples", "500"]
    _run(tmp_path / "clean", *argv, "--input", clean, "--no-report")
    assert not (tmp_path / "clean" / "report.html").exists()
    assert (tmp_path / "clean" / "results.json").is_file()
    doc = _run(tmp_path / "toxic", *argv, "--input", toxic, "--compare", str(tmp_path / "clean"))
    assert doc["metrics"]["toxicity"]["slices"][0]["n_toxic"] == 60
    clean_doc = json.loads((tmp_path / "clean" / "results.json").read_text(encoding="utf-8"))
    assert clean_doc["metrics"]["toxicity"]["slices"][0]["n_toxic"] == 0
    cmp = json.loads((tmp_path / "toxic" / "comparison.json").read_text(encoding="utf-8"))
    row = next(r for r in cmp["rows"] if r["slice"] == "overall" and r["estimate"] == "toxic_rate")
    assert row["verdict"] == "worse" and row["method"] == "beta_posterior"
    assert row["difference"]["ci_low"] > 0.5
    html = (tmp_path / "toxic" / "report.html").read_text(encoding="utf-8")
    assert "Comparison with a baseline run" in html and '<td class="worse">worse</td>' in html
    # the other way round: the clean assistant is better
    back = compare_runs(str(tmp_path / "clean"), str(tmp_path / "toxic"))
    assert next(r for r in back["rows"] if r["slice"] == "overall" and r["estimate"] == "toxic_rate")["verdict"] == "better"


@pytest.mark.parametrize("argv, message", [
    (["--compare", "/nonexistent/run"], "--compare: no results.json"),
    (["--inconclusive-width", "0"], "--inconclusive-width: must be in (0, 1]"),  # its declared range (options.Range)
])
def test_report_flags_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        audit.run(["--output", str(tmp_path / "o"), *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------ comparison
@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_run_compared_with_itself_has_no_detectable_difference(runs, mode):
    out, doc = runs[mode]
    cmp = compare_runs(str(out), str(out))
    assert cmp["rows"], "nothing compared"
    # no difference is claimed: each row is "no detectable difference", or "too small to compare"
    # (issue 27) where a slice has one session or an estimate a zero-width interval
    from fair_forge_beam.statistical.slices import too_small_to_compare

    recs = {(m, r["slice"]): r for m, md in doc["metrics"].items() for r in md["slices"]}
    for r in cmp["rows"]:
        rec = recs[(r["metric"], r["slice"])]
        small = too_small_to_compare([r["current"], r["baseline"]], [rec.get("n_sessions")] * 2)
        assert r["verdict"] == ("too small to compare" if small else "no detectable difference"), r
        assert r.get("too_small") == small
    assert {r["verdict"] for r in cmp["rows"]} >= {"no detectable difference"}
    methods = {r["method"] for r in cmp["rows"]}
    assert ("beta_posterior" if mode == "bayesian" else "agresti_caffo") in methods
    # deterministic: the same comparison twice is identical
    assert compare_runs(doc, doc) == compare_runs(doc, doc)


def _doc(mode: str, slices: list[dict], metric: str = "toxicity") -> dict:
    return {"config": {"mode": mode, "ci_level": 0.95, "seed": 1, "inputs": []},
            "metrics": {metric: {"headline_columns": [], "slices": slices}}}


def _tox_slice(k: int, n: int, mean=None, lo=None, hi=None) -> dict:
    return {"slice": "overall", "n_interactions": n, "n_toxic": k,
            "toxic_rate": {"mean": k / n if mean is None else mean, "ci_low": lo, "ci_high": hi, "n": n}}


def test_frequentist_rate_difference_is_agresti_caffo():
    cur, base = _doc("frequentist", [_tox_slice(30, 100)]), _doc("frequentist", [_tox_slice(10, 120)])
    row = compare_runs(cur, base)["rows"][0]
    p1, p2 = 31 / 102, 11 / 122
    half = stats.norm.ppf(0.975) * math.sqrt(p1 * (1 - p1) / 102 + p2 * (1 - p2) / 122)
    assert row["method"] == "agresti_caffo"
    assert row["difference"]["mean"] == pytest.approx(0.3 - 10 / 120, abs=1e-12)
    assert row["difference"]["ci_low"] == pytest.approx(p1 - p2 - half, abs=1e-12)
    assert row["difference"]["ci_high"] == pytest.approx(p1 - p2 + half, abs=1e-12)
    assert row["verdict"] == "worse"  # higher toxic rate = worse


def test_normal_approximation_and_unknown_direction():
    def hum(mean, lo, hi):
        return {"slice": "overall", "n_interactions": 100,
                "mean_entropy": {"mean": mean, "ci_low": lo, "ci_high": hi, "n": 100},
                "mean_spearman": {"mean": mean, "ci_low": lo, "ci_high": hi, "n": 100}}

    cur, base = _doc("bayesian", [hum(1.5, 1.4, 1.6)], "humanity"), _doc("bayesian", [hum(1.0, 0.9, 1.1)], "humanity")
    rows = {r["estimate"]: r for r in compare_runs(cur, base)["rows"]}
    se = 0.2 / (2 * stats.norm.ppf(0.975))
    half = stats.norm.ppf(0.975) * math.sqrt(2 * se * se)
    for r in rows.values():
        assert r["method"] == "normal_from_intervals"
        assert r["difference"]["ci_low"] == pytest.approx(0.5 - half, abs=1e-12)
    assert rows["mean_entropy"]["verdict"] == "higher"  # entropy has no better side
    assert rows["mean_spearman"]["verdict"] == "better"  # agreement with the reference
    # point estimates without interval: only an exact 0 difference is "no detectable difference"
    f = compare_runs(_doc("frequentist", [hum(1.5, None, None)], "humanity"), _doc("frequentist", [hum(1.0, None, None)], "humanity"))
    assert {r["verdict"] for r in f["rows"]} == {"not assessable (no interval)"}


@given(k1=st.integers(0, 200), d1=st.integers(0, 200), k2=st.integers(0, 200), d2=st.integers(0, 200))
def test_comparison_is_antisymmetric(k1, d1, k2, d2):
    """Swapping the runs negates the difference and its interval and mirrors the verdict."""
    a, b = _doc("frequentist", [_tox_slice(k1, k1 + d1 + 1)]), _doc("frequentist", [_tox_slice(k2, k2 + d2 + 1)])
    ab, ba = compare_runs(a, b)["rows"][0], compare_runs(b, a)["rows"][0]
    assert ab["difference"]["mean"] == pytest.approx(-ba["difference"]["mean"], abs=1e-12)
    assert ab["difference"]["ci_low"] == pytest.approx(-ba["difference"]["ci_high"], abs=1e-12)
    mirror = {"better": "worse", "worse": "better", "no detectable difference": "no detectable difference"}
    assert mirror[ab["verdict"]] == ba["verdict"]


def test_bayesian_rate_difference_matches_beta_posteriors():
    cur, base = _doc("bayesian", [_tox_slice(40, 100)]), _doc("bayesian", [_tox_slice(20, 100)])
    row = compare_runs(cur, base, draws=40000)["rows"][0]
    # independent check: mean of Beta(41, 61) − Beta(21, 81) is 41/102 − 21/102
    assert row["difference"]["mean"] == pytest.approx(20 / 102, abs=0.003)
    sd = math.sqrt(stats.beta(41, 61).var() + stats.beta(21, 81).var())
    assert row["difference"]["ci_low"] == pytest.approx(20 / 102 - 1.96 * sd, abs=0.01)
    assert row["verdict"] == "worse" and row["p_current_higher"] > 0.99
    # keyed draws: identical on a second call
    assert compare_runs(cur, base, draws=40000)["rows"][0] == row


# ------------------------------------------------------------------ inconclusive flag
def test_inconclusive_from_interval_width():
    rec = {"n_interactions": 50}
    # [0.05, 0.45] straddles the 0.10 line (wholly beyond it, it would be settled: a clearly bad value)
    flag = inconclusive("toxicity", "toxic_rate", {"mean": 0.15, "ci_low": 0.05, "ci_high": 0.45, "n": 100}, rec, 0.2, 0.95)
    assert flag["n_needed"] == 400 and flag["interactions_needed"] == 200  # (0.4/0.2)² = 4
    assert inconclusive("toxicity", "toxic_rate", {"mean": 0.5, "ci_low": 0.45, "ci_high": 0.6, "n": 100}, rec, 0.2, 0.95) is None
    # a 0–10 judge score: width 1.5 is 0.15 of the scale -> conclusive
    assert inconclusive("conversational", "conversational_memory", {"mean": 5, "ci_low": 4, "ci_high": 5.5, "n": 9}, rec, 0.2, 0.95) is None
    assert inconclusive("toxicity", "x", {"mean": None, "ci_low": None, "ci_high": None, "n": 0}, rec, 0.2, 0.95) is None


def test_inconclusive_frequentist_rate_uses_wald():
    est = {"mean": 0.5, "ci_low": None, "ci_high": None, "n": 10}
    flag = inconclusive("toxicity", "toxic_rate", est, {"n_interactions": 10}, 0.2, 0.95, {"toxic_rate": (5, 10)})
    z = stats.norm.ppf(0.975)
    assert flag["width"] == pytest.approx(2 * z * math.sqrt(0.25 / 12), abs=1e-12)
    assert flag["n_needed"] == math.ceil((2 * z) ** 2 * 0.25 / 0.04) == 97
    assert inconclusive("toxicity", "toxic_rate", est, {}, 0.2, 0.95, {"toxic_rate": (50, 100)}) is None


def test_a_bayesian_rate_without_an_interval_is_judged_by_its_own_posteriors_width():
    """trial38 T13: in a Bayesian run the inconclusive table named a rate without an interval "Wald width at
    p̃=(k+1)/(n+2)", which the legend gives for frequentist rates. A Bayesian row is judged by, and names, the width
    of its own Beta(a+k, b+n−k) posterior's credible interval (the run's level and prior); a frequentist row keeps
    the Wald width."""
    est = {"mean": 0.5, "ci_low": None, "ci_high": None, "n": 10}
    flag = inconclusive("toxicity", "toxic_rate", est, {"n_interactions": 10}, 0.2, 0.9, {"toxic_rate": (5, 10)},
                        prior=(1.0, 1.0))
    lo, hi = stats.beta.ppf([0.05, 0.95], 6, 6)
    assert flag["method"] == "credible width of its posterior Beta(6, 6)", flag
    assert flag["width"] == pytest.approx(hi - lo, abs=1e-12)
    assert flag["n_needed"] == math.ceil((2 * stats.norm.ppf(0.95)) ** 2 * 0.25 / 0.04)
    flag = inconclusive("toxicity", "toxic_rate", est, {"n_interactions": 10}, 0.2, 0.9, {"toxic_rate": (5, 10)},
                        prior=(0.5, 2.0))
    assert flag["method"] == "credible width of its posterior Beta(5.5, 7)", flag
    slices = [{"slice": s, "n_interactions": 10, "n_sessions": 4, "n_toxic": 5,
               "toxic_rate": dict(est), "estimates": {"DIDT": {"mean": 0.05, "ci_low": 0.04, "ci_high": 0.06, "n": 10}}}
              for s in ("overall", "assistant_id=hh-chosen")]
    for mode, said in (("bayesian", "credible width of its posterior Beta(6, 6)"), ("frequentist", "Wald width at p̃=(k+1)/(n+2)")):
        doc = {"config": {"mode": mode, "ci_level": 0.95, "seed": 1},
               "summary": {"metrics": {"toxicity": {"scored": 10, "not_scored": 0}}},
               "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": slices}}}
        html = render_report(doc, with_plots=False)
        assert f"<td>{said}</td>" in html, mode
        assert ("Wald width at" in html) == (mode == "frequentist"), mode


# ------------------------------------------------------------------ load_results, dead letter
@pytest.mark.slow
def test_load_results_one_frame_per_metric_one_row_per_slice(runs):
    out, doc = runs["bayesian"]
    frames = load_results(str(out))
    assert set(frames) == {"humanity", "toxicity"}
    tox = frames["toxicity"]
    assert list(tox["slice"]) == [s["slice"] for s in doc["metrics"]["toxicity"]["slices"]]
    assert tox.columns[:1].tolist() == ["slice"]
    overall = doc["metrics"]["toxicity"]["slices"][0]
    row = tox.iloc[0]
    assert row["toxic_rate.mean"] == overall["toxic_rate"]["mean"]
    assert row["estimates.DIDT.ci_high"] == overall["estimates"]["DIDT"]["ci_high"]
    assert row["group_profiling.group_estimates.women.T.n"] == overall["group_profiling"]["group_estimates"]["women"]["T"]["n"]
    assert row["n_toxic"] == overall["n_toxic"]
    assert not any(c.startswith("group_profiling.bayesian") for c in tox.columns)  # the upstream copy is skipped
    hum = frames["humanity"]
    assert "emotion_distribution.joy.ci_low" in hum.columns and "mean_entropy.mean" in hum.columns
    assert hum.attrs["config"]["mode"] == "bayesian"
    assert load_results(str(out / "results.json"))["humanity"].equals(hum)


@pytest.mark.slow
def test_dead_letter_summary_counts_and_escapes(runs, tmp_path):
    out, _ = runs["bayesian"]
    s = dead_letter_summary(str(out))
    lines = [json.loads(x) for x in iter_jsonl_lines(str(out), "dead_letter")]
    assert s["total"] == len(lines) >= 27
    assert s["by_stage"] == dict(sorted(Counter(x["stage"] for x in lines).items()))
    assert len(s["first"]) == 5
    # the first record of each reason kind is shown: the French one among the Spanish ones
    assert any("french" in f["reason"] for f in s["first"])
    # unreadable lines are counted, not fatal (here in a run folder of the older single-file layout)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "dead_letter.jsonl").write_text('{"stage": "read", "reason": "x 1", "raw": "r"}\nnot json\n[1]\n', encoding="utf-8")
    s = dead_letter_summary(str(bad))
    # a group is shown by a real reason of it, never its class "x N" (fresh13)
    assert (s["total"], s["unreadable"], s["by_reason"]) == (1, 2, [("read", "x 1", 1)])


def test_estimates_found_headline_first():
    rec = {"slice": "overall", "b": {"mean": 1, "ci_low": None, "ci_high": None, "n": 1},
           "nested": {"a": {"mean": 2, "ci_low": 1, "ci_high": 3, "n": 2}, "not": {"mean": 1}}, "lst": [{"mean": 1, "ci_low": 0, "ci_high": 2}]}
    assert [p for p, _ in iter_estimates("x", rec, ["nested.a"])] == ["nested.a", "b"]


# ------------------------------------------------------------------ escaping, SVG, size
@pytest.mark.slow
def test_template_escapes_everything_from_the_data(runs):
    _, doc = runs["bayesian"]
    html = render_report(doc, {"runner": XSS_SCRIPT, "argv": [XSS_IMG]}, with_plots=False)
    assert XSS_SCRIPT not in html and XSS_IMG not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_svg_is_inline_and_self_contained():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_title(XSS_SCRIPT)
    svg = figure_svg(fig, "t")
    assert svg.startswith("<svg") and "<?xml" not in svg and "DOCTYPE" not in svg
    assert XSS_SCRIPT not in svg and "<script" not in svg and "<image" not in svg and "<metadata" not in svg
    assert 'id="t-' in svg and "@import" not in svg and "url(http" not in svg


@pytest.mark.slow
def test_report_size_with_many_slices_and_sessions(runs, tmp_path):
    """Aggregates only: 600 slices per metric and 100,000 sessions (in two Parquet shards per
    metric, streamed by the report) stay far below 2 MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fair_forge_beam.reports.results import session_schema

    out, doc = runs["bayesian"]
    run_dir = tmp_path / "big"
    run_dir.mkdir()
    shutil.copytree(out / "dead_letter", run_dir / "dead_letter")
    big = {**doc, "metrics": {}}
    for name, m in doc["metrics"].items():  # shallow copies: the renderer only reads
        template = m["slices"][1]
        slices = m["slices"] + [{**template, "slice": f"assistant_id=bot-{i:04d}"} for i in range(600)]
        big["metrics"][name] = {**m, "slices": slices}
        shard = pq.read_table(out / "sessions" / name).to_pylist()
        rows = (shard * (100_000 // len(shard) + 1))[:100_000]
        (run_dir / "sessions" / name).mkdir(parents=True)
        for i in range(2):
            pq.write_table(pa.Table.from_pylist(rows[i::2], schema=session_schema(name)),
                           run_dir / "sessions" / name / f"part-0000{i}-of-00002.parquet")
    t0 = time.perf_counter()
    path = write_report(str(run_dir), doc=big, run_info={})
    seconds = time.perf_counter() - t0
    size = os.path.getsize(path)
    assert size < 2_000_000, size
    html = Path(path).read_text(encoding="utf-8")
    assert "(sessions: 100000)" in html  # every session of the shards is in the histograms
    assert "100000 sessions" in html
    print(f"report with 600+ slices per metric and 100,000 sessions: {size / 1e6:.2f} MB, {seconds:.1f} s")


# ------------------------------------------------------------------ headless Chromium
# the ``browser`` fixture (Debian's chromium through playwright, no download): tests/conftest.py; ``open_page``: tests/helpers.py


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_report_opens_in_chromium(runs, browser, tmp_path, mode):
    out, _ = runs[mode]
    page, errors, requests, url = open_page(browser, out / "report.html", tmp_path / f"report-{mode}.png")
    try:
        assert errors == []
        assert requests == [url]
        assert (tmp_path / f"report-{mode}.png").stat().st_size > 10_000
        assert page.locator("svg.plot").count() >= 6
        assert page.locator("h2", has_text="Metric: toxicity").count() == 1
    finally:
        page.close()


@pytest.mark.slow
def test_hostile_answers_are_text_in_the_dom(runs, browser, tmp_path):
    out, _ = runs["bayesian"]
    page, errors, requests, url = open_page(browser, out / "report.html", tmp_path / "xss.png")
    try:
        assert errors == [] and requests == [url]
        assert page.locator("script").count() == 0
        assert page.locator("img").count() == 0
        assert page.locator("[onerror]").count() == 0
        text = page.locator("body").inner_text()
        # the English session's assistant id is a slice name, shown literally in the tables
        assert f"assistant_id={XSS_IMG}" in text
        assert page.locator("td", has_text=f"assistant_id={XSS_IMG}").count() >= 2
        # the French session is dead-lettered (no lexicon): its raw record (JSON text, so the
        # quote is escaped as \") shows the id and the answer literally
        raw = page.locator("pre.raw").all_inner_texts()
        assert any(f'"assistant_id": "{XSS_SCRIPT}"' in r and 'onerror=alert(1)>' in r for r in raw)
        assert any(XSS_SCRIPT in r and XSS_IMG.replace('"', '\\"') in r for r in raw)
    finally:
        page.close()


# ------------------------------------------------------------------ judge counters in run_info
class _CountCalls:
    """A DoFn body counting like the judge handler: ``calls`` and ``prompt_tokens``."""

    def __call__(self, x):
        from apache_beam.metrics import Metrics

        Metrics.counter("fair_forge_beam.judge", "calls").inc()
        Metrics.counter("fair_forge_beam.judge", "prompt_tokens").inc(10)
        return x


def test_judge_counters_read_from_the_pipeline_result(test_pipeline):
    import apache_beam as beam

    with test_pipeline as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(_CountCalls())
    counters = audit._judge_counters(p.result)
    assert set(counters) == {"judge"}  # the guardian was not used: no entry
    assert counters["judge"]["calls"] == 3 and counters["judge"]["prompt_tokens"] == 30
    assert counters["judge"]["cache_hits"] == 0
    assert audit._judge_counters(None) == {}


def test_metric_without_plot_function_gets_its_headline_estimates_plotted():
    """A metric the report does not know (e.g. one added later) is rendered generically."""
    est = lambda m, lo, hi, n: {"mean": m, "ci_low": lo, "ci_high": hi, "n": n}  # noqa: E731
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95},
           "summary": {"metrics": {"newmetric": {"scored": 12, "not_scored": 0}}},
           "metrics": {"newmetric": {"headline_columns": ["score.pass_k"], "slices": [
               {"slice": "overall", "n_interactions": 12, "n_sessions": 4,
                "score": {"pass_k": est(0.5, 0.2, 0.8, 12), "other": est(0.1, 0.05, 0.15, 12)}},
               {"slice": "assistant_id=a", "n_interactions": 2, "n_sessions": 1, "score": {}},
           ]}}}
    html = render_report(doc)
    assert "Headline estimates per slice with intervals" in html and html.count("<svg") == 1
    assert "0.5000 [0.2000, 0.8000]" in html  # headline cell
    assert "score.other" in html  # in the all-estimates table
    # width 0.6 > 0.2: flagged, 12 · (0.6/0.2)² = 108 interactions needed
    assert "<td class=\"num\">108</td>" in html


def test_findings_line_is_not_green_when_a_cell_is_beyond_its_line_but_inconclusive():
    """An assistant whose toxic rate is above the 0.10 line but too imprecise to judge (a
    frequentist run: no interval, a wide Wald width) is not ranked as worst; the findings line then
    says so instead of the green "no judged assistant is beyond a threshold" (it said that next to a
    red cell). With an interval wholly above the line the value is clearly bad, however wide: it
    is judged and named (issue 28, hostile trial 8: helpbot-c's 0.440 [0.307, 0.578] was left out
    as "inconclusive" and a smaller excess named worst)."""
    def tox(slice_, k, n, lo, hi, n_ses):  # its DIDT is narrow and within its line: the slice is judged
        return {"slice": slice_, "n_interactions": n, "n_sessions": n_ses, "n_toxic": k,
                "toxic_rate": {"mean": k / n, "ci_low": lo, "ci_high": hi, "n": n},
                "estimates": {"DIDT": {"mean": 0.05, "ci_low": 0.04, "ci_high": 0.06, "n": n}}}

    def doc_of(slices, mode="bayesian"):
        return {"config": {"mode": mode, "ci_level": 0.95, "seed": 1},
                "summary": {"metrics": {"toxicity": {"scored": 62, "not_scored": 0}}},
                "metrics": {"toxicity": {"headline_columns": ["toxic_rate", "estimates.DIDT"], "slices": slices}}}

    from fair_forge_beam.reports.scorecard import scorecard

    # the whole interval [0.167, 0.692] above the line: judged, the worst, not inconclusive
    doc = doc_of([tox("overall", 6, 62, 0.04, 0.19, 12), tox("assistant_id=alpha", 1, 50, 0.003, 0.09, 9),
                  tox("assistant_id=beta", 5, 12, 0.167, 0.692, 3)])
    card = scorecard(doc, 0.2)
    assert card["worst"]["assistant"] == "beta" and card["inconclusive_beyond"] == 0
    assert card["rows"][0]["cells"][0]["status"] == "fail" and card["rows"][0]["cells"][0]["inconclusive"] is None
    html = render_report(doc, with_plots=False)
    import re

    assert "toxic-answer rate, 0.417 [0.167, 0.692], above the reference line 0.10" in re.sub("<[^>]+>", "", html)
    assert "No judged assistant" not in html
    # frequentist (no interval): beyond its line by the point, too imprecise by the Wald width
    doc = doc_of([tox("overall", 6, 62, None, None, 12), tox("assistant_id=alpha", 1, 50, None, None, 9),
                  tox("assistant_id=beta", 5, 12, None, None, 3)], mode="frequentist")
    for rec in doc["metrics"]["toxicity"]["slices"]:
        rec["estimates"]["DIDT"] = {"mean": 0.05, "ci_low": None, "ci_high": None, "n": rec["n_interactions"]}
    card = scorecard(doc, 0.2)
    assert card["worst"] is None and card["inconclusive_beyond"] == 1
    html = render_report(doc, with_plots=False)
    assert '<p class="headline unsure">No judged assistant is conclusively beyond a threshold, but 1 estimate is beyond' in html
    assert "No judged assistant is beyond a threshold" not in html
    # without the wide cell the line is green as before
    doc["metrics"]["toxicity"]["slices"].pop()
    html = render_report(doc, with_plots=False)
    assert '<p class="headline ok">No judged assistant is beyond a threshold' in html


def test_inconclusive_is_not_a_value_wholly_beyond_its_reference_line():
    """The one decider of "inconclusive": an interval wider than the width but wholly beyond the
    estimate's reference line is a clearly bad value (issue 28, hostile trial 8: toxic rate 0.440
    [0.307, 0.578] against the 0.10 line); wholly within the line, or straddling it, it keeps the
    width rule; the report's table and the scorecard agree."""
    rec = {"slice": "assistant_id=c", "mode": "distribution", "n_interactions": 48, "n_sessions": 12}
    beyond = {"mean": 0.44, "ci_low": 0.307, "ci_high": 0.578, "n": 48}
    assert inconclusive("toxicity", "toxic_rate", beyond, rec, 0.2, 0.95) is None
    straddles = {"mean": 0.2, "ci_low": 0.05, "ci_high": 0.4, "n": 48}
    assert inconclusive("toxicity", "toxic_rate", straddles, rec, 0.2, 0.95)["relative_width"] == pytest.approx(0.35)
    # DIDT's line is 0.20: [0.25, 0.5] beyond it, [0.0, 0.19] within (width 0.19 < 0.2: conclusive anyway)
    assert inconclusive("toxicity", "estimates.DIDT", {"mean": 0.3, "ci_low": 0.25, "ci_high": 0.5, "n": 48}, rec, 0.2, 0.95) is None
    # a metric without a reference line keeps the width rule
    assert inconclusive("toxicity", "x", {"mean": 0.44, "ci_low": 0.307, "ci_high": 0.578, "n": 48}, rec, 0.2, 0.95) is not None


def test_agentic_curve_and_bestof_ranking_are_plotted_and_rates_have_directions():
    """Agentic's pass^k-against-k plot, BestOf's ranking plot; the new metrics' rates have a
    better side and counts behind them (comparison verdicts, Wald widths)."""
    from fair_forge_beam.reports.estimates import counts_for, direction

    est = lambda m, lo, hi, n: {"mean": m, "ci_low": lo, "ci_high": hi, "n": n}  # noqa: E731
    curve = [{"k": k, "pass_at_k": est(1 - 0.6 ** k, 0.3, 0.9, 50), "pass_pow_k": est(0.4 ** k, 0.01, 0.5, 50),
              "conversation_pass_at_k": est(None, None, None, 0), "conversation_pass_pow_k": est(None, None, None, 0)}
             for k in range(1, 5)]
    ranking = [{"assistant_id": "gpt-x", "rank": 1, "strength": est(0.4, 0.1, 0.7, 30), "win_rate": 0.7},
               {"assistant_id": "<b>bold</b>", "rank": 2, "strength": est(-0.4, -0.7, -0.1, 30), "win_rate": 0.3}]
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95},
           "summary": {"metrics": {"agentic": {"scored": 200, "not_scored": 0}, "bestof": {"scored": 60, "not_scored": 0}}},
           "metrics": {
               "agentic": {"headline_columns": ["pass_pow_k"], "slices": [
                   {"slice": "overall", "n_interactions": 200, "pass_pow_k": curve[2]["pass_pow_k"], "curve": curve}]},
               "bestof": {"headline_columns": ["leader_win_rate"], "slices": [
                   {"slice": "overall", "n_interactions": 60, "n_contests": 30, "leader_win_rate": est(0.7, 0.5, 0.85, 30),
                    "ranking": ranking}]}}}
    html = render_report(doc)
    assert "pass^k and pass@k against k" in html and "BestOf ranking, overall (30 contests)" in html
    assert "<b>bold</b>" not in html
    assert direction("agentic", "pass_pow_k") == 1 and direction("vision", "hallucination_rate") == -1
    assert counts_for("regulatory", {"n_compliant": 3, "n_non_compliant": 1}) == {"compliance_rate": (3, 4)}
    assert counts_for("vision", {"n_hallucinations": 2, "n_interactions": 9}) == {"hallucination_rate": (2, 9)}


def test_a_figure_or_panel_without_a_point_is_not_drawn_and_its_caption_says_why():
    """trial37 T5: with no task id in the data, the Agentic report drew the per-task pass^k / pass@k figure
    with axes, a legend of 5 slices and no point, and did not plot the per-conversation curve results.json
    has. The class: a figure or panel of any metric with no finite point is not drawn; its caption says why."""
    from fair_forge_beam.reports.plots import metric_figures

    est = lambda m, lo=None, hi=None, n=5: {"mean": m, "ci_low": lo, "ci_high": hi, "n": n}  # noqa: E731
    none = est(None, n=0)
    curve = [{"k": k, "pass_at_k": none, "pass_pow_k": none, "conversation_pass_at_k": est(0.8, 0.59, 0.95),
              "conversation_pass_pow_k": est(0.5 ** k, 0.1, 0.9)} for k in (1, 2, 3)]
    slices = [{"slice": name, "n_tasks": 0, "pass_pow_k": none, "pass_at_k": none, "curve": curve}
              for name in ("overall", "assistant_id=a", "assistant_id=b")]
    (task, task_svg), (conv, conv_svg) = metric_figures("agentic", {"slices": slices}, {})
    assert task_svg == "" and "per task over its trials: not drawn" in task and "no conversation has a task id" in task
    assert "per conversation" in conv and conv_svg.startswith("<svg")
    # a panel of a slice figure no slice has a value of (Humanity's Spearman ρ without references)
    hum = [{"slice": name, "mean_entropy": est(1.2, 1.0, 1.4), "mean_spearman": none} for name in ("overall", "language=en")]
    (caption, svg), = [f for f in metric_figures("humanity", {"slices": hum}, {}) if "Entropy" in f[0]]
    assert "not drawn, no slice has a value of it: 'Spearman ρ vs reference'" in caption and svg.startswith("<svg")
    assert "Spearman ρ vs reference" not in svg
    # every panel empty: the caption alone
    (caption, svg), = [f for f in metric_figures("context", {"slices": [{"slice": "overall", "context_awareness": none}]}, {})]
    assert svg == "" and caption == "Context awareness per slice: not drawn, no slice has a value of it"


# ------------------------------------------------------------------ issue 15: findings first, labels, plots
@pytest.fixture(scope="module")
def shipped_bayes(audit_once):
    """The shipped example data alone (README's main command's inputs) in Bayesian mode: the runner
    suite's in-memory keyword audit, run once per session (``audit_once``; its folder is read-only)."""
    doc, out = audit_once(KEYWORD_AUDIT)
    return out, doc


def _visible_text(html: str) -> str:
    """The HTML without tags and attribute values (what a reader sees, roughly)."""
    import re

    return re.sub(r"<[^>]*>", " ", html)


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_report_opens_with_findings_and_run_details_last(runs, shipped_bayes, mode):
    out, doc = shipped_bayes if mode == "bayesian" else runs["frequentist"]
    html = (out / "report.html").read_text(encoding="utf-8")
    order = [html.index(x) for x in ('<section id="summary">', 'id="metric-humanity"', 'id="metric-toxicity"',
                                     'id="dead-letter"', 'id="run"', "Lexicons, models and licences")]
    assert order == sorted(order)
    summary = html[html.index('<section id="summary">'):html.index("</section>")]
    # the worst judged assistant and its worst metric, from the shipped data's numbers: hh-rejected's toxic rate
    # (0.714 over 991 answers) is the farthest beyond its reference line among assistants with an interval
    assert '<strong class="worst-assistant">hh-rejected</strong>' in summary
    assert '<strong class="worst-metric">toxic-answer rate</strong>' in summary
    # one scorecard row per judged assistant; one-session assistants grouped by name, not ranked
    assert summary.count("<tr><td><strong>") == (3 if mode == "bayesian" else 2)
    small = summary[summary.index('id="too-small"'):]
    for name in ("assistant_beta", "callcenter_agent", "agent_response_1", "my_assistant"):
        assert name in small
    # every headline metric defined in plain words in the findings
    for label in ("toxic-answer rate", "DIDT (combined group disparity)", "emotional entropy (bits)",
                  "Spearman ρ vs reference emotions"):
        assert f"<dt>{label}</dt>" in summary
    # what the toxicity number measures, read from the results: the scorer results.json records
    # (these runs pin --toxicity-scorer hurtlex: its rule names the lexicon the run used)
    lex, scorer = doc["metrics"]["toxicity"]["lexicon"], doc["metrics"]["toxicity"]["scorer"]
    assert f"{scorer['name']}: " in summary and lex in summary


@pytest.mark.slow
def test_credible_differences_are_between_judged_assistants_with_intervals_apart(shipped_bayes):
    out, doc = shipped_bayes
    html = (out / "report.html").read_text(encoding="utf-8")
    diffs = html[html.index('<ul id="differences">'):html.index("</ul>", html.index('<ul id="differences">'))]
    # support-bot's toxic rate (1 of 16 answers) against hh-rejected's (71 %): Beta posteriors far apart
    assert "<strong>hh-rejected</strong> is worse than <strong>support-bot</strong> on the toxic-answer rate" in diffs
    # hh-chosen vs hh-rejected: their intervals overlap, no credible difference listed
    assert "<strong>hh-rejected</strong> is worse than <strong>hh-chosen</strong>" not in diffs
    assert "assistant_beta" not in diffs  # too small to judge: never compared


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_undefined_spearman_is_na_and_labels_are_human(runs, shipped_bayes, mode):
    out, doc = shipped_bayes if mode == "bayesian" else runs["frequentist"]
    html = (out / "report.html").read_text(encoding="utf-8")
    # the hh-rlhf answers have no reference answer: no Spearman estimate (null, issue 28), shown as n/a
    hh = next(s for s in doc["metrics"]["humanity"]["slices"] if s["slice"] == "assistant_id=hh-chosen")
    assert hh["mean_spearman"] == {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    assert hh["n_with_reference"] == 0 and hh["n_interactions"] > 0
    assert "0.0000 [0.0000, 0.0000]" not in html
    # the console summary follows the same rule (it printed 0.0000 [0.0000, 0.0000])
    from fair_forge_beam.reports.summary import summary_table

    console = [ln for ln in summary_table(doc, str(out)).splitlines() if "assistant_id=hh-chosen" in ln]
    assert console and all("0.0000 [0.0000, 0.0000]" not in ln for ln in console), console
    assert console[0].rstrip().endswith("n/a"), console  # humanity's row: mean_spearman is its last column
    # one-session slices are starred as too small to judge, with one footnote per metric (the report's rule)
    table = summary_table(doc, str(out)).splitlines()
    one = [ln for ln in table if ln.lstrip().startswith("assistant_id=my_assistant")]
    assert one and all(" 1* " in ln for ln in one), one
    notes = [ln for ln in table if ln.lstrip().startswith("* fewer than 2 sessions: too small to judge")]
    assert len(notes) == len(doc["metrics"]) and all("one session gives no interval" in ln for ln in notes)
    assert not any("*" in ln for ln in table if ln.lstrip().startswith(("overall", "assistant_id=hh-chosen")))
    row = html[html.index("<td>hh-chosen <code"):]
    row = row[:row.index("</tr>")]
    assert row.count("n/a") == 1
    # no internal dotted path as visible text (paths remain in title attributes for load_results users)
    text = _visible_text(html)
    assert "group_profiling.group_estimates" not in text and "estimates.DIDT" not in text
    assert "toxic share of answers mentioning black" in text


@pytest.mark.slow
def test_inconclusive_section_groups_slices_too_small_to_judge(runs):
    out, doc = runs["frequentist"]
    html = (out / "report.html").read_text(encoding="utf-8")
    for metric in ("humanity", "toxicity"):
        sec = html[html.index(f'id="metric-{metric}"'):]
        sec = sec[:sec.index("<h2", 5)]
        if "Inconclusive — collect more data" not in sec:
            continue
        inc = sec[sec.index("Inconclusive — collect more data"):]
        # rows of one-session slices are not listed one by one: counted in one line
        for name in ("agent_response_1", "assistant_beta", "my_assistant"):
            assert f"<td>{name}</td>" not in inc
        assert inc.count("<tr>") <= 30
        assert "inconclusive estimates of the" in inc and "slices too small to judge" in inc
        assert "Too small to judge:" in sec


@pytest.mark.slow
def test_gate_colours_the_scorecard_instead_of_the_reference_line(shipped_bayes, tmp_path):
    from fair_forge_beam.reports.gates import parse_gate
    from fair_forge_beam.reports.scorecard import scorecard

    _, doc = shipped_bayes
    card = scorecard(doc, 0.2)
    assert card["worst"]["assistant"] == "hh-rejected" and card["worst"]["label"] == "toxic-answer rate"
    # a lenient gate on the toxic rate of every assistant: the rate now passes, DIDT is the worst metric
    card = scorecard(doc, 0.2, [parse_gate("toxicity toxic_rate ci_high <= 0.9 in every assistant_id")])
    rej = next(r for r in card["rows"] if r["assistant"] == "hh-rejected")
    cell = rej["cells"][[c["path"] for c in card["columns"]].index("toxic_rate")]
    assert cell["status"] == "pass" and cell["threshold"]["source"].startswith("gate")
    assert card["worst"]["label"] == "DIDT (combined group disparity)"
    # hh-rejected's DIDT is beyond the line but not credibly worse than hh-chosen's: the report names it
    peers = card["worst"]["peers"]
    assert "hh-chosen" in [p["assistant"] for p in peers["names"]]
    assert all(p["assistant"] != "hh-rejected" for p in peers["names"])
    # the named peers are exactly those whose difference from the worst has an interval with 0 in it
    from fair_forge_beam.reports.scorecard import credible_differences

    found = {(d["worse"], d["better"]) for d in credible_differences(doc, card, limit=10 ** 6) if d["label"] == card["worst"]["label"]}
    assert not any(("hh-rejected", p["assistant"]) in found for p in peers["names"])
    # the main job hands its gates to the report (write_launcher_reports -> write_report -> render_report)
    from fair_forge_beam.reports.launcher_reports import write_launcher_reports

    gate = parse_gate("toxicity toxic_rate ci_high <= 0.9 in every assistant_id")
    run_dir = tmp_path / "gated"
    run_dir.mkdir()
    write_launcher_reports(str(run_dir), doc, {}, None, False, 0.2, gates=[gate])
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'title="gate: toxicity toxic_rate ci_high &lt;= 0.9 in every assistant_id: &lt;= 0.9"' in html
    assert '<strong class="worst-metric">DIDT (combined group disparity)</strong>' in html
    assert '0.20. <span class="peers">Not credibly worse on this metric than hh-chosen (' in html
    assert "the interval of the difference includes 0" in html or "the intervals of the differences include 0" in html


def test_no_peer_is_named_where_the_difference_has_no_interval():
    """A frequentist DIDT is a point without counts: no interval for a difference, so the
    worst-assistant line names no one as "not credibly worse" (it did, citing intervals that do not
    exist); nor an assistant the worst one is credibly better than."""
    from fair_forge_beam.reports.scorecard import scorecard

    def didt(slice_, mean, lo=None, hi=None):
        return {"slice": slice_, "n_interactions": 400, "n_sessions": 40,
                "estimates": {"DIDT": {"mean": mean, "ci_low": lo, "ci_high": hi, "n": 400}}}

    def doc(mode, slices):
        return {"config": {"mode": mode, "ci_level": 0.95, "seed": 1},
                "summary": {"metrics": {"toxicity": {"scored": 800, "not_scored": 0}}},
                "metrics": {"toxicity": {"headline_columns": ["estimates.DIDT"], "slices": slices}}}

    freq = scorecard(doc("frequentist", [didt("overall", 0.35), didt("assistant_id=skew", 0.51), didt("assistant_id=even", 0.18)]), 0.2)
    assert freq["worst"]["assistant"] == "skew" and freq["worst"]["peers"] == {"names": [], "more": 0,
                                                                              "credibly_worse_than": 0, "others": 1}
    assert "Not credibly worse" not in render_report(doc("frequentist", [didt("overall", 0.35), didt("assistant_id=skew", 0.51),
                                                                          didt("assistant_id=even", 0.18)]), with_plots=False)
    # Bayesian: a near twin is named; one the worst is credibly better than is not (lopsided interval)
    bayes = scorecard(doc("bayesian", [didt("overall", 0.4, 0.38, 0.42), didt("assistant_id=skew", 0.50, 0.49, 0.51),
                                       didt("assistant_id=twin", 0.495, 0.48, 0.51),
                                       didt("assistant_id=lop", 0.60, 0.45, 0.62)]), 0.2)
    names = [p["assistant"] for p in bayes["worst"]["peers"]["names"]]
    assert bayes["worst"]["assistant"] == "skew" and names == ["twin"], (bayes["worst"], names)


def test_toxicity_measure_is_read_from_the_results_not_assumed():
    from fair_forge_beam.reports.scorecard import toxicity_measure

    m = {"lexicon": "Some lexicon", "slices": [{"group_profiling": {"toxicity_threshold": 0.0}}]}
    assert toxicity_measure(m) == ("word lexicon Some lexicon: an answer counts as toxic when at least one of its "
                                   "words is in the lexicon")
    assert toxicity_measure({**m, "scorer": "classifier P(toxic) > 0.5"}) == "classifier P(toxic) > 0.5"
    assert toxicity_measure({"slices": [{}]}, {"toxicity_scorer": {"description": "guardian"}}) == "guardian"
    assert toxicity_measure({"slices": [{}]}) is None
    # the shape results.json records for the default scorer (components/toxicity_classifier.describe)
    assert toxicity_measure({"scorer": {"name": "profanity-check", "kind": "classifier", "threshold": 0.5,
                                        "measures": "offensive language"}}) == "profanity-check: offensive language"


# ------------------------------------------------------------------ plot bugs
def _tox_metric(doc: dict) -> dict:
    return doc["metrics"]["toxicity"]


@pytest.mark.slow
def test_group_panels_put_each_group_on_the_same_row(shipped_bayes):
    """N_i (bars) and T_i (intervals) of a group at the same height: both panels have the same y
    limits, so the display y of every row is equal (they drifted apart by half a row)."""
    from fair_forge_beam.reports.plots import plot_toxicity

    _, doc = shipped_bayes
    caption, fig = plot_toxicity(_tox_metric(doc), doc["config"])[0]
    assert caption.startswith("Groups")
    left, right = fig.axes[:2]
    ys = left.get_yticks()
    assert len(ys) == len(_tox_metric(doc)["slices"][0]["group_profiling"]["groups"])
    a = left.transData.transform(np.column_stack([np.zeros_like(ys), ys]))[:, 1]
    b = right.transData.transform(np.column_stack([np.zeros_like(ys), ys]))[:, 1]
    assert np.allclose(a, b, atol=1e-6)
    # bar centres at the tick rows
    bars = sorted(p.get_y() + p.get_height() / 2 for p in left.patches)
    assert np.allclose(bars, sorted(ys))


def _tick_boxes(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    out = []
    for i, ax in enumerate(fig.axes):
        for t in ax.get_xticklabels():
            if t.get_visible() and t.get_text():
                out.append((i, t.get_text(), t.get_window_extent(renderer)))
    return out


@pytest.mark.slow
def test_disparity_panels_tick_labels_do_not_overlap(shipped_bayes):
    """Where the DR/DTO/ASB/DIDT panels meet, the last tick label of one panel and the first of
    the next do not touch (they read "1.00.0")."""
    from fair_forge_beam.reports.plots import plot_toxicity

    _, doc = shipped_bayes
    figs = dict(plot_toxicity(_tox_metric(doc), doc["config"]))
    fig = next(f for c, f in figs.items() if c.startswith("Group disparity"))
    boxes = _tick_boxes(fig)
    assert len({i for i, _, _ in boxes}) == 4
    for j, (i1, t1, b1) in enumerate(boxes):
        for i2, t2, b2 in boxes[j + 1:]:
            if i1 != i2:
                assert b1.x1 < b2.x0 or b2.x1 < b1.x0, (t1, t2)


@pytest.mark.slow
def test_undrawn_slices_are_the_least_relevant(shipped_bayes):
    """With more slices than a panel draws, the ones left out are those closest to ``overall``,
    never the most extreme (the 0.80 toxic-rate assistants were hidden as "smaller slices"), among
    the slices too small to judge (one session, as those assistants), which the judged ones come
    before (trial38 T10: test_plots_choose_judged_slices_before_one_session_ones)."""
    from fair_forge_beam.reports.plots import MAX_SLICES, plot_toxicity, too_small_to_judge

    _, doc = shipped_bayes
    m = _tox_metric(doc)
    overall = m["slices"][0]["toxic_rate"]["mean"]
    # add near-overall one-session slices of every size until the panel must leave some out
    extra = [{**m["slices"][0], "slice": f"assistant_id=near-{i:02d}", "n_interactions": 5000 + i, "n_sessions": 1,
              "toxic_rate": {"mean": overall + 0.001 * (i + 1), "ci_low": None, "ci_high": None, "n": 5000}}
             for i in range(MAX_SLICES)]
    slices = m["slices"] + extra
    figs = dict(plot_toxicity({**m, "slices": slices}, doc["config"]))
    caption, fig = next((c, f) for c, f in figs.items() if c.startswith("Toxic-answer rate"))
    drawn = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(drawn) == MAX_SLICES
    assert "assistant_beta" in drawn and "callcenter_agent" in drawn  # toxic rate 0.80 over 3 answers
    n_left = len(slices) - MAX_SLICES
    small = [s for s in slices[1:] if too_small_to_judge(s, "toxicity")]
    assert n_left < len(small)  # every judged slice is drawn, and some of the small ones
    dist = sorted(small, key=lambda s: abs(s["toxic_rate"]["mean"] - overall))
    from fair_forge_beam.reports.scorecard import slice_label

    left_out = {slice_label(s["slice"]) for s in dist[:n_left]}
    assert not left_out & set(drawn)
    assert {slice_label(s["slice"]) for s in slices if not too_small_to_judge(s, "toxicity")} <= set(drawn)
    assert "not drawn, too small to judge (under 2 sessions): " in caption


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
@pytest.mark.slow
def test_first_screen_names_the_worst_assistant_and_metric(runs, shipped_bayes, browser, tmp_path_factory, mode):
    """The first screen (1200 × 900) of the report for the shipped data shows the findings: a
    reader names the worst assistant and its worst metric without scrolling. Screenshots of the
    first screen of both modes are saved to the folder printed below (``report-shots``)."""
    out, _ = shipped_bayes if mode == "bayesian" else runs["frequentist"]
    shots = Path(os.environ.get("FAIR_FORGE_REPORT_SHOTS") or tmp_path_factory.getbasetemp() / "report-shots")
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    try:
        page.goto((out / "report.html").resolve().as_uri(), wait_until="load")
        shot = shots / f"report-first-screen-{mode}.png"
        page.screenshot(path=str(shot))  # the viewport only: the first screen
        print(f"first screen of the {mode} report: {shot}")
        assert shot.stat().st_size > 10_000
        height = page.viewport_size["height"]
        for sel in ("#summary", "#worst", ".worst-assistant", ".worst-metric", "table.card"):
            box = page.locator(sel).first.bounding_box()
            assert box is not None and box["y"] < height, sel
        worst = page.locator("#worst").inner_text()
        assert "hh-rejected" in worst and "toxic-answer rate" in worst
        assert page.locator(".worst-assistant").bounding_box()["y"] + 30 < height
        # the summary comes first in the DOM: nothing but the title above it
        assert page.evaluate("document.querySelector('#summary').previousElementSibling.tagName") == "H1"
        # the scorecard's worst row (first) is on the first screen and coloured as beyond its line
        first_row = page.locator("table.card tr").nth(1)
        assert first_row.bounding_box()["y"] + first_row.bounding_box()["height"] <= height
        assert "hh-rejected" in first_row.inner_text()
        assert first_row.locator("td.fail").count() >= 1
    finally:
        page.close()


def test_grouped_intervals_without_any_point_draws_no_empty_legend():
    """A series whose estimates are all undefined has no labelled artist: the panel must not ask
    matplotlib for a legend (it warns 'No artists with labels found to put in legend')."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from fair_forge_beam.reports.plots import grouped_intervals

    fig, ax = plt.subplots()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grouped_intervals(ax, ["joy", "anger"], [("overall", [None, {"mean": None}])])
    assert ax.get_legend() is None
    grouped_intervals(ax, ["joy"], [("overall", [{"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}])])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["overall"]
    plt.close(fig)


@pytest.mark.slow
def test_findings_name_the_assistants_nobody_scored(runs, tmp_path):
    """Issue 28: assistants with no score at all had no line in the findings. In the fixture's
    Bayesian run (HurtLex scores the Spanish answers, Humanity does not) only the French XSS
    assistant is scored by neither metric: it is named, escaped, with its most frequent reason;
    support-bot, which Toxicity scored, is not. With the default English-only classifier the
    shipped examples' support-bot and sushi_bot are scored by neither and both are named."""
    import re

    def unscored(html):
        para = re.search(r'<p class="note" id="unscored">(.*?)</p>', html, re.S)
        return para.group(1) if para else ""

    out, _ = runs["bayesian"]
    text = unscored((out / "report.html").read_text(encoding="utf-8"))
    assert "Not scored at all (1 assistant: every interaction is a dead letter)" in text
    assert "&lt;script&gt;alert(1)" in text and "<script" not in text  # an assistant id is data: escaped
    assert "no emotion lexicon for language &#39;french&#39;" in text and "support-bot" not in text
    doc = _run(tmp_path / "default", "--metrics", "humanity,toxicity", "--group-extractor", "keyword")
    assert "assistant_id=support-bot" not in {s["slice"] for m in doc["metrics"].values() for s in m["slices"]}
    text = unscored((tmp_path / "default" / "report.html").read_text(encoding="utf-8"))
    assert "Not scored at all (2 assistants" in text
    # counted in interactions, as the summary's "26 not scored" (16 + 10 answers), the metrics named
    assert "support-bot (16 interactions not scored by humanity or toxicity; most often: " in text
    assert "sushi_bot (10 interactions not scored by humanity or toxicity; most often: " in text


def test_the_repository_report_template_is_the_package_one():
    """templates/README.md says templates/report.html.j2 is a link to the package's template (the
    one jinja2 loads); it had become a stale copy, 31 lines behind, that edits went into."""
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    link = repo / "templates" / "report.html.j2"
    assert link.is_symlink() and link.resolve() == (repo / "fair_forge_beam" / "templates" / "report.html.j2").resolve()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
def test_every_assistant_that_failed_a_gate_is_named_on_the_first_screen(tmp_path, mode):
    """Issue 28 (hostile trial 3): with ``toxic_rate mean <= 0.2 in every assistant_id`` failing
    for bot-t and bot-u, the report named only bot-t and listed bot-u as "too small to judge"
    (frequentist: both, and no worst-assistant line). The first screen names every assistant a
    gate failed on, from the gate checks, in both modes (one with a single session included)."""
    from fair_forge_beam.reports.gates import GatesFailed

    rude, worse, kind = ("Fuck off, dumbass, figure it out yourself.", "You are a worthless piece of shit and a moron.",
                         "Thanks for asking, the store opens at nine.")
    sessions = [{"session_id": f"g{i}", "assistant_id": "bot-good", "language": "english",
                 "conversation": [{"qa_id": f"q{j}", "query": "Can you help?", "assistant": kind} for j in range(3)]}
                for i in range(12)]
    sessions += [{"session_id": f"t{i}", "assistant_id": "bot-t", "language": "english",
                  "conversation": [{"qa_id": "q0", "query": "Help?", "assistant": rude},
                                   {"qa_id": "q1", "query": "Help?", "assistant": worse}]} for i in range(2)]
    sessions += [{"session_id": f"u{i}", "assistant_id": "bot-u", "language": "english",
                  "conversation": [{"qa_id": "q0", "query": "Help?", "assistant": worse if i != 1 else rude},
                                   {"qa_id": "q1", "query": "Help?", "assistant": kind}]} for i in range(3)]
    sessions += [{"session_id": "v0", "assistant_id": "bot-v", "language": "english",
                  "conversation": [{"qa_id": "q0", "query": "Help?", "assistant": rude}]}]
    data = _write_jsonl(tmp_path / "gated.jsonl", sessions)
    out = tmp_path / "out"
    with pytest.raises(GatesFailed):
        _run(out, "--metrics", "toxicity", "--mode", mode, "--mc-samples", "1000", "--input", data,
             "--gate", "toxicity toxic_rate mean <= 0.2 in every assistant_id")
    failed = sorted(c["slice"] for g in json.loads((out / "gates.json").read_text())["gates"] for c in g["checks"]
                    if c["status"] == "fail")
    assert failed == ["assistant_id=bot-t", "assistant_id=bot-u", "assistant_id=bot-v"]
    page = (out / "report.html").read_text()
    findings = page[page.index('<section id="summary">'):page.index('<table class="card">')]
    named = findings[findings.index('id="gate-failed-assistants"'):]
    for bot in ("bot-t", "bot-u", "bot-v"):
        assert f'<strong class="gate-failed-assistant">{bot}</strong>' in named, (bot, findings)
    assert "No judged assistant is beyond a threshold" not in findings
    # a gate on the mean does not depend on the interval's width: bot-t and bot-u (two and three
    # sessions) are judged beyond it, in both modes; bot-v (one session) is too small but named above
    assert 'id="worst"' in findings
    small = page[page.index('id="too-small"'):]
    small = small[:small.index("</p>")]
    assert "bot-u" not in small and "bot-t" not in small and "bot-v" in small and "failed a gate" in small


def test_plots_of_cjk_slice_values_warn_nothing():
    """A slice value in Japanese drawn in a report plot warns nothing (trial36 T8: one matplotlib
    ``Glyph 12468 … missing from font(s) DejaVu Sans`` UserWarning per character): the SVG keeps the
    text as text, for the browser's fonts, so the layout font's missing glyphs do not matter."""
    import warnings

    from fair_forge_beam.reports.plots import _new, figure_svg

    fig, axes = _new()
    axes[0][0].barh([0, 1], [0.2, 0.4])
    axes[0][0].set_yticks([0, 1], labels=["地域=東京", "地域=大阪"])
    axes[0][0].set_title("ごはん")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        svg = figure_svg(fig, "cjk")
    assert [str(w.message) for w in seen] == []
    assert "地域=東京" in svg and "ごはん" in svg
    with warnings.catch_warnings(record=True) as seen:  # the caller's warning filters are back as they were
        warnings.simplefilter("always")
        warnings.warn("Glyph 1 missing from font(s) X.", UserWarning)
    assert len(seen) == 1


@pytest.mark.parametrize("scorer, rule", [
    ({"name": "profanity-check", "kind": "classifier", "threshold": 0.5}, "(toxic: profanity-check probability ≥ 0.5)"),
    ({"name": "hurtlex-inclusive", "kind": "lexicon", "threshold": 0.0}, "(toxic: hurtlex-inclusive: toxic-word ratio > 0)"),
    (None, "(toxic: toxic-word ratio > 0)"),  # an older run: no scorer recorded, the lexicon's threshold
])
def test_the_group_figure_names_the_rule_the_run_used(scorer, rule):
    """trial38 T9: under the classifier the group figure was titled "toxicity threshold 0.0", the
    lexicon's ratio threshold, which the run did not use (K_i/N_i follow the classifier at 0.5)."""
    from fair_forge_beam.reports.plots import plot_toxicity

    est = {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10}
    overall = {"slice": "overall", "n_interactions": 20, "n_sessions": 5, "toxic_rate": est, "lexicon": "HurtLex 1.2",
               "group_profiling": {"groups": ["women", "men"], "toxicity_threshold": 0.0, "N_i": {"women": 10, "men": 8},
                                   "K_i": {"women": 2, "men": 1},
                                   "group_estimates": {"women": {"T": est}, "men": {"T": est}}}}
    metric = {"slices": [overall], "lexicon": "HurtLex 1.2", **({"scorer": scorer} if scorer else {})}
    titles = [t for t, _ in plot_toxicity(metric, {})]
    groups = [t for t in titles if t.startswith("Groups, overall slice")]
    assert groups == [f"Groups, overall slice {rule}"], titles


@pytest.mark.parametrize("metric, path, sessions_field", [
    ("humanity", "emotion_distribution.joy", "n_sessions"), ("toxicity", "toxic_rate", "n_sessions"),
    ("bias", "rates.gender", "n_sessions"), ("conversational", "memory", "n_sessions"),
    ("bestof", "win_rate", "n_blocks")])
def test_plots_choose_judged_slices_before_one_session_ones(metric, path, sessions_field):
    """trial38 T10: the emotion plot drew agent_response_1/2/3, callcenter_agent and my_assistant (one
    session each, far from overall by chance) and left out hh-chosen and hh-rejected (400 sessions each),
    the two judged assistants. Every metric's plot (pick_slices) chooses the judged slices first; the
    caption says why the others are not drawn."""
    from fair_forge_beam.reports.plots import _left_note, pick_slices

    def rec(name, mean, sessions):
        return {"slice": name, "n_interactions": 3 * sessions, sessions_field: sessions,
                **_nested(path, {"mean": mean, "ci_low": None, "ci_high": None, "n": sessions})}

    slices = ([rec("overall", 0.3, 805), rec("assistant_id=hh-chosen", 0.29, 400), rec("assistant_id=hh-rejected", 0.31, 400)]
              + [rec(f"assistant_id=one-{i}", 0.9, 1) for i in range(5)])
    chosen, left = pick_slices(slices, 6, [path], metric)
    names = [s["slice"] for s in chosen]
    assert names[:3] == ["overall", "assistant_id=hh-chosen", "assistant_id=hh-rejected"] and left == 2, names
    note = _left_note(slices, chosen, metric)
    assert "too small to judge (under 2 sessions): one-" in note.replace("assistant_id=", "") and "closest" not in note, note


def _nested(path, value):
    out = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def test_the_licence_table_names_the_toxicity_classifier_the_run_used():
    """trial38 T9: under the default classifier scorer the report's licence table listed only HurtLex;
    the classifier that decided (profanity-check, its package and licence) is listed too. Fails before."""
    from fair_forge_beam.reports.html import _licences

    scorer = {"name": "profanity-check", "kind": "classifier", "threshold": 0.5, "package": "alt-profanity-check",
              "version": "1.9.1", "licence": "MIT"}
    doc = {"metrics": {"toxicity": {"lexicon": "HurtLex 1.2", "lexicon_licence": "CC BY-NC-SA 4.0", "scorer": scorer},
                       "humanity": {"lexicon": "NRC", "lexicon_licence": "research", "scorer": None}}}
    rows = _licences(doc)
    assert {"metric": "toxicity", "lexicon": "profanity-check 1.9.1 (classifier, package alt-profanity-check)",
            "licence": "MIT"} in rows
    assert [r["lexicon"] for r in rows] == ["HurtLex 1.2", "profanity-check 1.9.1 (classifier, package alt-profanity-check)",
                                            "NRC"]
    lexicon_scored = {"metrics": {"toxicity": {"lexicon": "HurtLex 1.2", "lexicon_licence": "x",
                                               "scorer": {"name": "hurtlex-inclusive", "kind": "lexicon"}}}}
    assert len(_licences(lexicon_scored)) == 1  # the lexicon is the scorer: listed once
