"""The trend report over many runs (issue 27): ``fair-forge-beam trend PATTERN … --output DIR``.

Unit tests build the trend from synthetic ``results.json`` documents and check exact values: the
series, the run order (``started_at``, else ``finished_at``, untimed first, ties by path), roll-ups,
the changes between consecutive runs (Agresti–Caffo and the normal approximation computed here from
their formulas; Beta posteriors equal to ``compare_runs``'s own rows), "too small to compare",
coverage and the first screen. End to end: three small real audits cut from the shipped examples
(the folder names in the reverse order of their times; an assistant made toxic in the last run;
an assistant whose id is an HTML injection, with one session) and a roll-up of the first two,
through the console command, the
bytes of ``trend.json`` compared across two invocations, and ``trend.html`` opened in headless
Chromium (``browser`` fixture of conftest).
"""
from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from helpers import FNAPI, REPO, open_page
from fair_forge_beam.reports.compare import compare_runs
from fair_forge_beam.reports.trend import (TrendUsageError, build_trend, find_runs, headline_estimates, render_trend,
                                           trend_json)
from pipelines import audit

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT = "</title><script>alert(1)</script>"
Z95 = float(stats.norm.ppf(0.975))


# ------------------------------------------------------------------ synthetic results.json documents
def est(mean, lo=None, hi=None, n=10):
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n}


def tox(key, k, n, n_ses, rate=None, didt=None):
    """A toxicity slice record with its counts (k toxic of n) and the headline estimates."""
    return {"slice": key, "n_interactions": n, "n_sessions": n_ses, "n_toxic": k,
            "toxic_rate": rate or est(k / n, None, None, n), "estimates": {"DIDT": didt or est(None, None, None, 0)}}


def hum(key, n, n_ses, entropy, spearman=None):
    return {"slice": key, "n_interactions": n, "n_sessions": n_ses, "mean_entropy": entropy,
            "mean_spearman": spearman or est(0.3, 0.1, 0.5, n)}


def doc(mode, tox_slices=(), hum_slices=(), read=40, not_scored=0, inputs=("data.jsonl",), **cfg):
    metrics, summ = {}, {}
    if tox_slices:
        metrics["toxicity"] = {"headline_columns": ["toxic_rate", "estimates.DIDT"], "slices": list(tox_slices)}
    if hum_slices:
        metrics["humanity"] = {"headline_columns": ["mean_entropy", "mean_spearman"], "slices": list(hum_slices)}
    for m in metrics:
        summ[m] = {"scored": read - not_scored, "interactions_scored": read - not_scored,
                   "interactions_not_scored": not_scored, "dead_letters": not_scored,
                   "dead_letter_unit": "interactions this metric could not score", "dead_letter_reasons": {}}
    config = {"inputs": list(inputs), "metrics": list(metrics), "mode": mode, "ci_level": 0.95, **cfg}
    if mode == "bayesian":
        config.setdefault("seed", 42)
    return {"config": config, "summary": {"interactions_read": read, "rejected_at_read": 1, "metrics": summ},
            "metrics": metrics}


def run(path, results, started=None, finished=None, merged=None):
    info = {k: v for k, v in (("started_at", started), ("finished_at", finished)) if v}
    if merged is not None:  # a roll-up's run_info.json (fair-forge-beam rollup)
        info["rollup"] = {"runs": merged, "not_rebuilt": {}}
    return {"path": path, "results": results, "run_info": info}


def _series(trend, metric, estimate, key):
    return next(s for s in trend["series"] if (s["metric"], s["estimate"], s["slice"]) == (metric, estimate, key))


# ------------------------------------------------------------------ unit: series, order, changes
def test_frequentist_rates_change_by_agresti_caffo_and_small_slices_are_not_compared():
    """Three frequentist runs given out of order: the series are in time order with each run's
    value; the toxic rate of 'bot' from 2/40 to 20/40 is a change (Agresti–Caffo interval computed
    here), 20/40 → 21/40 is none, and a one-session slice is too small to compare."""
    runs = [
        run("runs/c", doc("frequentist", [tox("overall", 21, 80, 8), tox("assistant_id=bot", 21, 40, 4),
                                          tox("assistant_id=solo", 3, 5, 1)]), started="2025-03-03T02:00:00Z"),
        run("runs/a", doc("frequentist", [tox("overall", 4, 80, 8), tox("assistant_id=bot", 2, 40, 4),
                                          tox("assistant_id=solo", 0, 5, 1)]), started="2025-03-01T02:00:00Z"),
        run("runs/b", doc("frequentist", [tox("overall", 22, 80, 8), tox("assistant_id=bot", 20, 40, 4),
                                          tox("assistant_id=solo", 1, 5, 1)]), started="2025-03-02T02:00:00Z"),
    ]
    t = build_trend(runs)
    assert [r["path"] for r in t["runs"]] == ["runs/a", "runs/b", "runs/c"]
    assert [r["time"] for r in t["runs"]] == ["2025-03-01T02:00:00.000Z", "2025-03-02T02:00:00.000Z",
                                              "2025-03-03T02:00:00.000Z"]
    assert [r["label"] for r in t["runs"]] == ["2025-03-01 02:00", "2025-03-02 02:00", "2025-03-03 02:00"]
    bot = _series(t, "toxicity", "toxic_rate", "assistant_id=bot")
    assert [(p["run"], p["mean"]) for p in bot["points"]] == [(0, 2 / 40), (1, 20 / 40), (2, 21 / 40)]
    assert bot["direction"] == -1 and bot["estimate_label"] == "toxic-answer rate" and bot["slice_label"] == "bot"
    assert "vs_previous" not in bot["points"][0]
    # run b against run a: Agresti & Caffo (2000), one success and one failure added to each side
    p1, p2 = 21 / 42, 3 / 42
    se = math.sqrt(p1 * (1 - p1) / 42 + p2 * (1 - p2) / 42)
    vs = bot["points"][1]["vs_previous"]
    assert vs == {"run": 0, "verdict": "worse", "method": "agresti_caffo",
                  "difference": {"mean": 20 / 40 - 2 / 40, "ci_low": p1 - p2 - Z95 * se, "ci_high": p1 - p2 + Z95 * se}}
    assert bot["points"][2]["vs_previous"]["verdict"] == "no detectable difference"
    solo = _series(t, "toxicity", "toxic_rate", "assistant_id=solo")
    assert [p["vs_previous"] for p in solo["points"][1:]] == [
        {"run": i, "verdict": "too small to compare", "reason": "this run rests on 1 session", "difference": None,
         "method": None} for i in (0, 1)]
    # DIDT has no value in any run: its points are there, never compared
    didt = _series(t, "toxicity", "estimates.DIDT", "overall")
    assert [p["defined"] for p in didt["points"]] == [False] * 3 and all("vs_previous" not in p for p in didt["points"])
    # claimed changes, newest first: the bot (and overall) in run b
    assert [(c["slice"], c["from_run"], c["to_run"], c["verdict"]) for c in t["changes"]] == [
        ("assistant_id=bot", 0, 1, "worse"), ("overall", 0, 1, "worse")]
    # the first screen: nothing changed in the latest run; the most recent change was in run b
    latest = t["latest"]
    assert latest["run"] == 2 and latest["previous"] == 1 and latest["changes"] == []
    assert latest["most_recent_change_run"] == 1
    assert [c["slice"] for c in latest["most_recent_changes"]] == ["assistant_id=bot", "overall"]
    assert (latest["compared"], latest["too_small"], latest["too_small_slices"]) == (3, 1, ["assistant_id=solo"])
    assert t["methods"] == {"agresti_caffo": "Agresti–Caffo normal interval for a difference of two proportions "
                                             "from the stored counts"}


def test_bayesian_changes_reuse_the_comparison_and_refuse_degenerate_intervals():
    """Bayesian runs: the toxic-rate change is the Beta-posterior row ``compare_runs`` gives for the
    same pair (one implementation); entropy (no better side) changes by the normal approximation
    from the two intervals (computed here); a zero-width interval is too small to compare."""
    a = doc("bayesian", [tox("overall", 3, 60, 6), tox("assistant_id=bot", 2, 30, 3)],
            [hum("overall", 60, 6, est(1.0, 0.8, 1.2, 60)), hum("assistant_id=bot", 30, 3, est(1.0, 0.8, 1.2, 30)),
             hum("assistant_id=tmpl", 30, 3, est(-0.5423, -0.5423, -0.5423, 30))])
    b = doc("bayesian", [tox("overall", 20, 60, 6), tox("assistant_id=bot", 19, 30, 3)],
            [hum("overall", 60, 6, est(1.5, 1.3, 1.7, 60)), hum("assistant_id=bot", 30, 3, est(1.1, 0.9, 1.3, 30)),
             hum("assistant_id=tmpl", 30, 3, est(0.1, 0.0, 0.2, 30))], seed=7)
    t = build_trend([run("r/b", b, started="2025-01-02T00:00:00Z"), run("r/a", a, started="2025-01-01T00:00:00Z")])
    cmp = compare_runs(b, a)  # current b, baseline a: the same methods, seed 7 from the later run
    for key in ("overall", "assistant_id=bot"):
        row = next(r for r in cmp["rows"] if (r["slice"], r["estimate"]) == (key, "toxic_rate"))
        vs = _series(t, "toxicity", "toxic_rate", key)["points"][1]["vs_previous"]
        assert row["method"] == "beta_posterior" and vs["method"] == "beta_posterior"
        assert (vs["difference"], vs["verdict"], vs["p_current_higher"]) == (row["difference"], row["verdict"],
                                                                              row["p_current_higher"])
        assert vs["verdict"] == "worse"
    # entropy of all interactions: 1.0 [0.8, 1.2] -> 1.5 [1.3, 1.7]; se = width / 2z on each side
    se = 0.4 / (2 * Z95)
    half = Z95 * math.sqrt(se * se + se * se)
    vs = _series(t, "humanity", "mean_entropy", "overall")["points"][1]["vs_previous"]
    assert vs["method"] == "normal_from_intervals" and vs["verdict"] == "higher"
    assert vs["difference"]["mean"] == 0.5
    assert vs["difference"]["ci_low"] == pytest.approx(0.5 - half, abs=1e-15)
    assert vs["difference"]["ci_high"] == pytest.approx(0.5 + half, abs=1e-15)
    assert _series(t, "humanity", "mean_entropy", "assistant_id=bot")["points"][1]["vs_previous"]["verdict"] == \
        "no detectable difference"
    vs = _series(t, "humanity", "mean_entropy", "assistant_id=tmpl")["points"][1]["vs_previous"]
    assert vs["verdict"] == "too small to compare"
    assert vs["reason"] == "the previous run's interval has zero width ([-0.5423, -0.5423])"
    # the first screen of the latest run: worse before higher, then by size relative to the range
    assert [(c["metric"], c["estimate"], c["slice"], c["verdict"]) for c in t["latest"]["changes"]] == [
        ("toxicity", "toxic_rate", "assistant_id=bot", "worse"), ("toxicity", "toxic_rate", "overall", "worse"),
        ("humanity", "mean_entropy", "overall", "higher")]


def test_run_order_times_rollups_and_notes():
    """started_at, else finished_at (an offset is converted to UTC), runs without a time first in
    path order, ties by path; a roll-up (run_info.json's rollup.runs) without a time of its own takes
    its latest merged run's time in the trend; runs of different metrics are fine but noted."""
    t0 = doc("bayesian", [tox("overall", 1, 10, 3)])
    runs = [
        run("w/z", t0, started="2025-01-01T00:00:00Z"),
        run("w/y", t0, finished="2025-01-02T00:00:00Z"),
        run("w/x", t0),
        run("w/v", t0),
        run("w/u", t0, started="2025-01-01T01:00:00+02:00"),  # 2024-12-31 23:00 UTC
        run("w/t", t0, started="2025-01-01T00:00:00"),  # no offset: UTC, a tie with w/z
        run("w/r", t0, merged=["w/z", "w/y"]),
        run("w/q", doc("bayesian", hum_slices=[hum("overall", 10, 3, est(1.0, 0.5, 1.5))]),
            finished="2025-01-03T00:00:00Z", merged=["gs://elsewhere/run1"]),
    ]
    t = build_trend(runs)
    order = [(r["path"], r["time"], r["time_source"], r["kind"]) for r in t["runs"]]
    assert order == [
        ("w/v", None, None, "audit"),
        ("w/x", None, None, "audit"),
        ("w/u", "2024-12-31T23:00:00.000Z", "started_at", "audit"),
        ("w/t", "2025-01-01T00:00:00.000Z", "started_at", "audit"),
        ("w/z", "2025-01-01T00:00:00.000Z", "started_at", "audit"),
        ("w/r", "2025-01-02T00:00:00.000Z", "merged runs", "rollup"),
        ("w/y", "2025-01-02T00:00:00.000Z", "finished_at", "audit"),
        ("w/q", "2025-01-03T00:00:00.000Z", "finished_at", "rollup"),
    ]
    assert t["runs"][5]["merged_runs"] == ["w/z", "w/y"] and t["runs"][7]["merged_runs"] == ["gs://elsewhere/run1"]
    # labels are unique: runs sharing a time get their names
    labels = [r["label"] for r in t["runs"]]
    assert len(set(labels)) == len(labels)
    assert labels[:5] == ["v", "x", "2024-12-31 23:00", "2025-01-01 00:00 t", "2025-01-01 00:00 z"]
    assert t["notes"] == [
        "2 runs without a recorded time (no started_at/finished_at in run_info.json) placed first, in path order: v, x",
        "runs differ in metrics: toxicity is in 7 of 8 runs (not in q)",
        "runs differ in metrics: humanity is in 1 of 8 runs (not in v, x, u, t, z and 2 more)",
        "no run has a slice of 'assistant_id' (slices are overall, assistant_id, language or a metadata field the "
        "audit was given in --slices)",
    ]
    # the humanity series of the roll-up has one point and no comparison
    assert [p["run"] for p in _series(t, "humanity", "mean_entropy", "overall")["points"]] == [7]


def test_a_rollup_is_compared_with_rollups_never_with_its_own_nights():
    """Nights and their weeks in one trend (``trend 'audits/*'`` over both): a night is compared
    with the night before, a week with the week before; the week is never compared with a night it
    merged (nor with a month holding it), and the first screen compares like with like. The
    roll-up's --from is no settings difference (it records its runs' options)."""
    opts = {"mode": "frequentist", "metrics": "toxicity", "group_extractor": "keyword"}
    def night(d, k):
        r = run(f"audits/2026-12-{d:02d}", doc("frequentist", [tox("overall", k, 200, 40)]))
        r["run_info"].update(argv=["--input", f"day{d}.jsonl"], options=opts)
        return r
    def week(name, nights, k):
        r = run(name, doc("frequentist", [tox("overall", k, 200 * len(nights), 40 * len(nights))]),
                merged=[f"audits/2026-12-{d:02d}" for d in nights])
        r["run_info"].update(argv=["--from", "audits/2026-12-0*", "--output", name], options=opts)
        return r
    runs = [night(d, 4) for d in range(1, 8)] + [night(d, 4 if d < 14 else 60) for d in range(8, 15)]
    runs += [week("audits/week-2026-12-07", range(1, 8), 28), week("audits/week-2026-12-14", range(8, 15), 80)]
    t = build_trend(runs)
    names = [r["name"] for r in t["runs"]]
    assert names.index("week-2026-12-07") == names.index("2026-12-07") + 1  # a week after its last night
    prev = {r["name"]: (names[r["previous"]] if r["previous"] is not None else None) for r in t["runs"]}
    assert prev["week-2026-12-07"] is None and prev["week-2026-12-14"] == "week-2026-12-07"
    assert prev["2026-12-08"] == "2026-12-07" and prev["2026-12-14"] == "2026-12-13"
    assert all(r["differs_from_previous"] == [] for r in t["runs"]), [r["differs_from_previous"] for r in t["runs"]]
    points = _series(t, "toxicity", "toxic_rate", "overall")["points"]
    vs = {names[p["run"]]: names[p["vs_previous"]["run"]] for p in points if "vs_previous" in p}
    assert vs["week-2026-12-14"] == "week-2026-12-07" and vs["2026-12-08"] == "2026-12-07"
    assert "week-2026-12-07" not in vs
    assert t["latest"]["run"] == names.index("week-2026-12-14")
    assert t["latest"]["previous"] == names.index("week-2026-12-07")
    assert [(c["metric"], c["verdict"]) for c in t["latest"]["changes"]] == [("toxicity", "worse")]
    # a month that holds the weeks is not compared with them; alone in its kind, it has nothing to compare with
    month = run("audits/month-2026-12-31", doc("frequentist", [tox("overall", 108, 2800, 560)]),
                merged=["audits/week-2026-12-07", "audits/week-2026-12-14"])
    t = build_trend(runs + [month])
    assert t["runs"][-1]["name"] == "month-2026-12-31" and t["runs"][-1]["previous"] is None
    assert t["latest"]["previous"] is None and t["latest"]["changes"] == []
    assert "has no earlier roll-up that shares no data with it" in render_trend(t)


def test_coverage_slices_that_appear_or_go_and_deterministic_bytes():
    a = doc("bayesian", [tox("overall", 1, 36, 4), tox("assistant_id=old", 1, 18, 2), tox("assistant_id=bot", 0, 18, 2)],
            read=40, not_scored=4)
    b = doc("bayesian", [tox("overall", 1, 40, 4), tox("assistant_id=bot", 1, 20, 2), tox("assistant_id=new", 0, 20, 2),
                         tox("language=english", 1, 40, 4)], read=40, not_scored=0)
    runs = [run("d/a", a, started="2025-05-01T02:00:00Z"), run("d/b", b, started="2025-05-02T02:00:00Z")]
    t = build_trend(runs)
    cov = t["runs"][0]["coverage"]
    assert cov == {"interactions_read": 40, "rejected_at_read": 1, "metrics": {"toxicity": {
        "interactions_scored": 36, "interactions_not_scored": 4, "dead_letters": 4,
        "dead_letter_unit": "interactions this metric could not score", "dead_letter_share": 0.1}}}
    assert t["latest"]["coverage"] == [{"metric": "toxicity", "dead_letter_share": 0.0, "previous_dead_letter_share": 0.1,
                                        "interactions_scored": 40, "previous_interactions_scored": 36}]
    assert (t["latest"]["new_slices"], t["latest"]["gone_slices"]) == (["assistant_id=new"], ["assistant_id=old"])
    # language slices are not followed by default; --slices adds them
    assert {s["slice"] for s in t["series"]} == {"overall", "assistant_id=old", "assistant_id=bot", "assistant_id=new"}
    t2 = build_trend(runs, slices=["language"])
    assert {s["slice"] for s in t2["series"]} == {"language=english"}
    # same runs, any order, copies of the documents: the same bytes
    text = trend_json(t)
    assert trend_json(build_trend(list(reversed(copy.deepcopy(runs))))) == text
    assert json.loads(text)["trend_schema_version"] == 1


def test_headline_estimates_and_argument_errors():
    assert headline_estimates("toxicity", {"headline_columns": ["toxic_rate", "estimates.DIDT"]}) == [
        ("toxic_rate", -1, 1.0), ("estimates.DIDT", -1, 1.0)]
    assert headline_estimates("humanity", {"headline_columns": ["mean_entropy", "mean_spearman"]}) == [
        ("mean_entropy", 0, 3.0), ("mean_spearman", 1, 2.0)]
    assert headline_estimates("newmetric", {}) == []
    with pytest.raises(ValueError, match="no run"):
        build_trend([])
    with pytest.raises(ValueError, match="draws must be at least 100"):
        build_trend([run("a", doc("bayesian", [tox("overall", 1, 10, 3)]))], draws=10)


def test_run_labels_are_unique():
    d = doc("bayesian", [tox("overall", 1, 10, 3)])
    t = build_trend([run("p/run", d), run("q/run", d), run("s/a", d, started="2025-01-01T00:00:10Z"),
                     run("s/b", d, started="2025-01-01T00:00:50Z")])
    assert [r["label"] for r in t["runs"]] == ["p/run", "q/run", "2025-01-01 00:00 a", "2025-01-01 00:00 b"]
    t = build_trend([run("s/a", d, started="2025-01-01T00:00:10Z"), run("s/b", d, started="2025-01-01T00:00:50Z")])
    assert [r["label"] for r in t["runs"]] == ["2025-01-01 00:00:10", "2025-01-01 00:00:50"]


def test_too_small_to_compare_rule():
    from fair_forge_beam.statistical.slices import too_small_to_compare

    wide, flat = est(0.5, 0.4, 0.6), est(0.5, 0.5, 0.5)
    assert too_small_to_compare([wide, wide], [2, 2]) is None
    assert too_small_to_compare([wide, wide], [None, None]) is None  # not recorded: not checked
    assert too_small_to_compare([est(0.5), est(0.4)], [3, 3]) is None  # no interval: the method decides
    assert too_small_to_compare([wide, wide], [2, 1]) == "baseline rests on 1 session"
    assert too_small_to_compare([wide, wide], [0, 5], ("a", "b")) == "a rests on 0 sessions"
    assert too_small_to_compare([wide, flat], [9, 9]) == "baseline's interval has zero width ([0.5, 0.5])"


def test_run_info_records_start_and_end_in_utc(tmp_path):
    from datetime import datetime, timedelta, timezone

    from fair_forge_beam.reports.results import utc_timestamp, write_run_info

    assert utc_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert utc_timestamp(1746064800.1234) == "2025-05-01T02:00:00.123Z"
    before = datetime.now(timezone.utc) - timedelta(milliseconds=1)  # the timestamp is cut to the millisecond
    info = write_run_info(str(tmp_path), {"started_at": "2025-05-01T02:00:00.000Z", "seconds": 1.0})
    written = json.loads((tmp_path / "run_info.json").read_text())
    assert written == info and written["started_at"] == "2025-05-01T02:00:00.000Z"
    assert before <= datetime.fromisoformat(written["finished_at"]) <= datetime.now(timezone.utc)
    assert write_run_info(str(tmp_path), {"finished_at": "2025-05-01T03:00:00.000Z"})["finished_at"] == \
        "2025-05-01T03:00:00.000Z"


def test_hostile_ids_and_names_are_escaped_in_the_html():
    a = doc("bayesian", [tox("overall", 1, 20, 4), tox(f"assistant_id={HOSTILE}", 0, 10, 2),
                         tox(f"assistant_id={SCRIPT}", 0, 10, 2)])
    b = doc("bayesian", [tox("overall", 15, 20, 4), tox(f"assistant_id={HOSTILE}", 9, 10, 2),
                         tox(f"assistant_id={SCRIPT}", 8, 10, 2)])
    t = build_trend([run("x/<b>one</b>", a, started="2025-01-01T00:00:00Z"),
                     run("x/<b>two</b>", b, started="2025-01-02T00:00:00Z")])
    assert {c["slice"] for c in t["latest"]["changes"]} == {"overall", f"assistant_id={HOSTILE}", f"assistant_id={SCRIPT}"}
    html = render_trend(t)
    assert "<img" not in html and "<script" not in html and "<b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;/title&gt;&lt;script&gt;" in html
    assert "x/&lt;b&gt;two&lt;/b&gt;" in html
    assert html.count('<svg class="plot"') == 2  # toxic rate and DIDT
    svg = html[html.index('<svg class="plot"'):]
    assert "&lt;img src=x onerror=alert(1)&gt;" in svg  # the panel title, escaped by matplotlib's SVG writer
    assert "default-src 'none'" in html  # the Content-Security-Policy: nothing is loaded


# ------------------------------------------------------------------ finding runs, usage errors
def _write_run(folder: Path, results: dict, info: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    if info is not None:
        (folder / "run_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        audit.main(["trend", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()  # one line: no progress line before it either
    hint = " (every option: fair-forge-beam trend --help)"
    assert len(err) == 1 and err[0].endswith(hint), err
    return err[0][:-len(hint)]


def test_usage_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    r = tmp_path / "audits"
    _write_run(r / "one", doc("bayesian", [tox("overall", 1, 10, 3)]))
    assert _usage_error([str(tmp_path / "none*")], capsys) == \
        f"fair-forge-beam trend: error: no run matched '{tmp_path / 'none*'}'"
    (r / "notes").mkdir()
    assert _usage_error([str(r / "*")], capsys) == \
        f"fair-forge-beam trend: error: {r / 'notes'} has no results.json (not a run folder): narrow the pattern"
    (r / "notes").rmdir()
    (r / "win").mkdir()
    (r / "win" / "windowed_results.json").write_text("{}")
    assert "is a windowed run (windowed_results.json)" in _usage_error([str(r / "*")], capsys)
    (r / "win" / "windowed_results.json").unlink()
    (r / "win").rmdir()
    (r / "README.md").write_text("hello")
    assert _usage_error([str(r / "*")], capsys).endswith(
        "README.md is not a run folder (a file): give run folders or their results.json")
    (r / "README.md").unlink()
    bad = r / "bad"
    bad.mkdir()
    (bad / "results.json").write_text("{not json")
    assert _usage_error([str(bad)], capsys).startswith(
        f"fair-forge-beam trend: error: {bad}: {bad}/results.json is not a readable JSON file (Expecting property name")
    (bad / "results.json").write_text(json.dumps({"config": {}}))
    assert "is not a fair_forge_beam results.json (no 'metrics' object)" in _usage_error([str(bad)], capsys)
    assert "the following arguments are required: PATTERN" in _usage_error([], capsys)
    # a slice dimension no run has is a typo, not an empty trend (fresh-user trial: --slices assistant, exit 0)
    assert _usage_error([str(r / "one"), "--slices", "assistant", "--output", str(tmp_path / "t")], capsys) == \
        "fair-forge-beam trend: error: --slices 'assistant': no run has a slice of it (slices are overall, " \
        "assistant_id, language or a metadata field the audits were given in --slices)"


def test_an_edited_run_is_refused_and_one_run_is_never_two(tmp_path, capsys):
    """Trial 28 (B8): a run edited to interactions_read -5, or started_at '2026-13-45…' (silently
    replaced by finished_at), was trended (exit 0), and an edited copy of a run (the same run id)
    counted as a second run: the run files are read strictly, one run id is one run."""
    r = tmp_path / "audits"
    good = doc("bayesian", [tox("overall", 1, 10, 3)])
    info = {"started_at": "2026-12-01T02:00:00.000Z", "finished_at": "2026-12-01T02:01:00.000Z"}
    bad = copy.deepcopy(good)
    bad["summary"]["interactions_read"] = -5
    _write_run(r / "neg", bad, info)
    assert _usage_error([str(r / "neg")], capsys) == (
        f"fair-forge-beam trend: error: {r / 'neg'}: {r / 'neg'}/results.json: field 'summary.interactions_read' holds "
        "-5: a count or a duration is never negative (a damaged or edited run file)")
    _write_run(r / "month13", good, {**info, "started_at": "2026-13-45T02:00:00.000Z"})
    assert _usage_error([str(r / "month13")], capsys) == (
        f"fair-forge-beam trend: error: {r / 'month13'}: {r / 'month13'}/run_info.json: field 'started_at' holds "
        "'2026-13-45T02:00:00.000Z': not an ISO 8601 time (a damaged or edited run file)")
    for name, read in (("one", 40), ("edited", 41)):
        edited = copy.deepcopy(good)
        edited["summary"]["interactions_read"] = read
        _write_run(r / name, edited, info)
        (r / name / "stats").mkdir()
        (r / name / "stats" / "manifest.json").write_text(json.dumps({"run_id": "20261201T020000Z-0123abcd"}))
        (r / name / "_SUCCESS").write_text(json.dumps({"run": "20261201T020000Z-0123abcd"}))  # published, as a run is
    err = _usage_error([str(r / "one"), str(r / "edited"), "--output", str(tmp_path / "t")], capsys)
    assert err in (f"fair-forge-beam trend: error: {a} and {b} hold the same run (run id 20261201T020000Z-0123abcd) with "
                   "different results.json or run_info.json: one of them was edited; give only the one to follow"
                   for a, b in ((r / "one", r / "edited"), (r / "edited", r / "one"))), err
    assert not (tmp_path / "t").exists()


def test_output_inside_the_pattern_is_skipped_and_runs_are_found_once(tmp_path, capsys):
    r = tmp_path / "audits"
    a = _write_run(r / "a", doc("bayesian", [tox("overall", 1, 10, 3)]), {"started_at": "2025-01-02T00:00:00Z"})
    b = _write_run(r / "b", doc("bayesian", [tox("overall", 1, 10, 3)]), {"started_at": "2025-01-01T00:00:00Z"})
    out = r / "trend"
    assert find_runs([str(r / "*"), str(a), str(a / "results.json")]) == [str(a), str(b)]
    assert audit.main(["trend", str(r / "*"), "--output", str(out), "--no-plots"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"{out}/trend.html"
    assert "trend: 2 runs matched" in captured.err and "trend: wrote" in captured.err
    first = (out / "trend.json").read_bytes()
    # the second time the pattern matches the output folder (no results.json): skipped, same bytes
    assert audit.main(["trend", str(r / "*"), "--output", str(out), "--no-plots", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")
    assert (out / "trend.json").read_bytes() == first
    assert [x["path"] for x in json.loads(first)["runs"]] == [str(b), str(a)]
    with pytest.raises(TrendUsageError, match="only the trend's own output folder"):
        find_runs([str(out)], exclude=str(out))


def test_the_default_output_is_a_trend_folder_so_a_run_in_the_current_folder_is_left_alone(tmp_path, capsys, monkeypatch):
    """fix39a (trial38): the default ``--output`` was the current folder, refused whenever it held a run (a user in
    a run folder, or where ``--output .`` put one, running ``trend 'runs/*'``). The default is now ``trend``, a folder
    in the current one: the run's files and the trend's never mix."""
    here = _write_run(tmp_path / "here", doc("bayesian", [tox("overall", 1, 10, 3)]))  # the current folder: a run
    _write_run(here / "runs" / "a", doc("bayesian", [tox("overall", 1, 10, 3)]), {"started_at": "2025-01-01T00:00:00Z"})
    _write_run(here / "runs" / "b", doc("bayesian", [tox("overall", 2, 10, 3)]), {"started_at": "2025-01-02T00:00:00Z"})
    monkeypatch.chdir(here)
    assert audit.main(["trend", "runs/*", "--no-plots", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in (here / "trend").iterdir()) == ["trend.html", "trend.json"]
    assert sorted(p.name for p in here.iterdir()) == ["results.json", "runs", "trend"]  # the run's folder as it was


def test_stages_of_runs_being_written_or_killed_are_not_runs(tmp_path):
    """A glob over nightly folders also matches a run's stage (``OUT.staging-…``, with its lock;
    left behind by a SIGKILLed run until the next run into ``OUT``): skipped, whether it already
    holds a ``results.json`` or not (a fresh-user trial ended in a usage error here)."""
    r = tmp_path / "audits"
    a = _write_run(r / "d1", doc("bayesian", [tox("overall", 1, 10, 3)]))
    (r / "d2.staging-20261203T205422Z-2dbd9331").mkdir(parents=True)
    (r / "d2.staging-20261203T205422Z-2dbd9331.lock").write_text("")
    _write_run(r / "d1.staging-20261203T205500Z-0a1b2c3d", doc("bayesian", [tox("overall", 1, 10, 3)]))
    assert find_runs([str(r / "*")]) == [str(a)]
    assert find_runs([str(r / "*" / "results.json")]) == [str(a)]


# ------------------------------------------------------------------ end to end: three real audits
EX = REPO / "fair_forge_beam" / "data" / "examples"


def _hh(ids, assistant):
    lines = {json.loads(ln)["session_id"]: json.loads(ln)
             for ln in (EX / "hh_rlhf_harmless_test_slice.jsonl").read_text(encoding="utf-8").splitlines() if ln.strip()}
    return [{**lines[f"hh-harmless-test-{i}"], "assistant_id": assistant} for i in ids]


def _examples(*keys):
    sessions = json.loads((EX / "fair_forge_examples.json").read_text(encoding="utf-8"))
    return [s for s in sessions if (s["session_id"], s["assistant_id"]) in keys]


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    """Three audits of a few shipped sessions each, made in the order c_first, b_second, a_third
    (path order reversed). 'bot' answers with harmless sessions, then (a_third) with sessions the
    toxicity classifier flags; 'steady' stays harmless; an assistant whose id is an HTML injection
    has one session (runs 2 and 3); two Spanish sessions in run 2 are dead-lettered."""
    base = tmp_path_factory.mktemp("trend")
    hostile = [{**s, "assistant_id": HOSTILE} for s in _examples(("123", "my_assistant"))]
    spanish = _examples(("support-billing", "support-bot"), ("support-auth", "support-bot"))
    plans = {
        "c_first": _hh(["0001-chosen", "0003-chosen", "0005-chosen", "0006-chosen"], "bot")
        + _hh(["0001-rejected", "0003-rejected", "0005-rejected"], "steady"),
        "b_second": _hh(["0007-chosen", "0008-chosen", "0006-rejected", "0007-rejected"], "bot")
        + _hh(["0008-rejected", "0005-rejected", "0001-rejected"], "steady") + hostile + spanish,
        "a_third": _hh(["0041-chosen", "0155-chosen", "0183-chosen", "0186-chosen"], "bot")
        + _hh(["0003-rejected", "0006-rejected", "0007-rejected"], "steady") + hostile,
    }
    for name, sessions in plans.items():
        data = base / f"{name}.jsonl"
        data.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
        audit.run(["--quiet", "--no-report", "--metrics", "humanity,toxicity", "--mode", "bayesian",
                   "--group-extractor", "keyword", "--mc-samples", "1000", "--input", str(data),
                   "--output", str(base / "audits" / name), f"--runner={FNAPI}"])
        if name == "b_second":  # a roll-up of the first two days, made before the third audit
            from fair_forge_beam import rollup

            rollup.run(["--from", str(base / "audits" / "c_first"), "--from", str(base / "audits" / "b_second"),
                        "--output", str(base / "rollups" / "first_two"), "--quiet", "--no-report",
                        f"--runner={FNAPI}"])
    return base


@pytest.fixture(scope="module")
def trend_out(audits):
    out = audits / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "trend", str(audits / "audits" / "*"),
                           str(audits / "rollups" / "*"), "--output", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{out}/trend.html"
    return out, proc.stderr


@pytest.mark.slow
def test_three_real_audits_through_the_trend_command(audits, trend_out):
    out, err = trend_out
    assert "trend: 4 runs matched" in err and "wrote" in err
    t = json.loads((out / "trend.json").read_text(encoding="utf-8"))
    folders = [audits / "audits" / "c_first", audits / "audits" / "b_second", audits / "rollups" / "first_two",
               audits / "audits" / "a_third"]
    info = [json.loads((f / "run_info.json").read_text()) for f in folders]
    starts = [i["started_at"] for i in info]
    assert starts == sorted(starts) and all(i["started_at"] <= i["finished_at"] for i in info)
    # by time, not by path; the roll-up between the second and third audits
    assert [(r["name"], r["kind"], r["time_source"]) for r in t["runs"]] == [
        ("c_first", "audit", "started_at"), ("b_second", "audit", "started_at"),
        ("first_two", "rollup", "started_at"), ("a_third", "audit", "started_at")]
    assert [r["time"] for r in t["runs"]] == starts
    assert t["runs"][2]["merged_runs"] == [str(folders[0]), str(folders[1])]  # as the roll-up lists them (--from order)
    # coverage: run 2 read 36 interactions, the 4 Spanish ones dead-lettered by both metrics; the roll-up
    # counts both days
    cov = t["runs"][1]["coverage"]
    assert cov["interactions_read"] == 36
    assert {m: (c["interactions_scored"], c["dead_letter_share"]) for m, c in cov["metrics"].items()} == {
        "humanity": (32, 4 / 36), "toxicity": (32, 4 / 36)}
    assert t["runs"][2]["coverage"]["interactions_read"] == 36 + t["runs"][0]["coverage"]["interactions_read"]
    # an audit is compared with the audit before it; the roll-up (of runs 0 and 1) with no run: it
    # merged both earlier runs, and no other roll-up precedes it
    assert [r["previous"] for r in t["runs"]] == [None, 0, None, 1]
    # bot's toxic rate: no change from run 1 to 2, worse in the last run, named first on the first screen
    bot = _series(t, "toxicity", "toxic_rate", "assistant_id=bot")
    assert [p["run"] for p in bot["points"]] == [0, 1, 2, 3]
    assert [(p["run"], p["vs_previous"]["run"], p["vs_previous"]["verdict"]) for p in bot["points"]
            if "vs_previous" in p] == [(1, 0, "no detectable difference"), (3, 1, "worse")]
    assert bot["points"][3]["mean"] > 0.5 > 0.2 > bot["points"][1]["mean"]
    first = t["latest"]["changes"][0]
    assert (first["slice"], first["estimate"], first["verdict"], first["method"], first["from_run"]) == \
        ("assistant_id=bot", "toxic_rate", "worse", "beta_posterior", 1)
    assert t["latest"]["previous"] == 1
    steady = _series(t, "toxicity", "toxic_rate", "assistant_id=steady")
    assert [p["vs_previous"]["verdict"] for p in steady["points"] if "vs_previous" in p] == \
        ["no detectable difference"] * 2
    # the one-session assistant: values in runs 2 to 4, never compared
    hostile = _series(t, "toxicity", "toxic_rate", f"assistant_id={HOSTILE}")
    assert [p["run"] for p in hostile["points"]] == [1, 2, 3] and hostile["points"][0]["n_sessions"] == 1
    assert [p["vs_previous"]["verdict"] for p in hostile["points"] if "vs_previous" in p] == ["too small to compare"]
    assert t["latest"]["too_small_slices"] == [f"assistant_id={HOSTILE}"]
    # the same runs named another way (folders listed, other order): the same bytes
    again = audits / "again"
    names = [str(f) for f in (folders[3], folders[0], folders[2], folders[1])]
    assert audit.main(["trend", *names, "--output", str(again), "--quiet"]) == 0
    assert (again / "trend.json").read_bytes() == (out / "trend.json").read_bytes()


@pytest.mark.slow
def test_trend_html_opens_in_chromium_with_hostile_ids_as_text(trend_out, browser, tmp_path_factory):
    out, _ = trend_out
    shots = tmp_path_factory.mktemp("trend-shots")
    page, errors, requests, url = open_page(browser, out / "trend.html", shots / "trend.png")
    try:
        assert errors == [] and requests == [url]  # self-contained: nothing but the file is loaded
        assert (shots / "trend.png").stat().st_size > 10_000
        assert page.locator("svg.plot").count() == 4  # two headline estimates of two metrics
        assert page.locator("#runs-table td", has_text="roll-up of 2 runs").count() == 1
        assert page.locator("script").count() == 0 and page.locator("img").count() == 0
        assert page.locator("[onerror]").count() == 0
        # the hostile id is text: in the tables and in the plots' SVG titles
        assert page.locator("td", has_text=HOSTILE).count() >= 4
        assert page.locator("svg.plot text", has_text=HOSTILE).count() >= 1
        # the first screen says what changed and for whom
        headline = page.locator("#headline")
        assert "bot" in headline.inner_text() and "worse" in headline.inner_text()
        # against the audit before it, not the roll-up of the two earlier runs listed between them
        assert "against the previous run" in headline.inner_text() and "(roll-up)" not in headline.inner_text()
        assert headline.bounding_box()["y"] < page.viewport_size["height"]
        assert HOSTILE in page.locator("#too-small").inner_text()  # named as too small to compare
        first_row = page.locator("#latest-changes tr").nth(1).inner_text()
        assert "bot" in first_row and "toxic-answer rate" in first_row and "worse" in first_row
    finally:
        page.close()


def test_runs_are_ordered_by_the_day_they_cover_not_when_they_ran():
    """The fresh-user trial: a night re-run later (2026-12-02 re-audited after 12-03) moved in the
    trend. Runs are ordered by the day they cover (the date in the folder's name), a roll-up by the
    latest day it merged (after that day's audit), and re-running a night changes nothing; runs
    without a day come first, by time."""
    t0 = doc("bayesian", [tox("overall", 1, 10, 3)])
    runs = [
        run("audits/2026-12-01", t0, started="2026-12-02T02:30:00Z"),
        run("audits/2026-12-02", t0, started="2026-12-09T10:00:00Z"),  # re-run a week later
        run("audits/2026-12-03", t0, started="2026-12-04T02:30:00Z"),
        run("week", t0, started="2026-12-04T02:31:00Z",
            merged=["audits/2026-12-01", "audits/2026-12-02", "audits/2026-12-03"]),
        run("week-2026-11-30", t0, started="2026-12-01T02:31:00Z", merged=["elsewhere/a"]),
        run("adhoc", t0, started="2026-12-10T00:00:00Z"),
    ]
    t = build_trend(runs)
    assert [(r["path"], r["covers"]) for r in t["runs"]] == [
        ("adhoc", None), ("week-2026-11-30", "2026-11-30"), ("audits/2026-12-01", "2026-12-01"),
        ("audits/2026-12-02", "2026-12-02"), ("audits/2026-12-03", "2026-12-03"), ("week", "2026-12-03")]
    assert [r["label"] for r in t["runs"]][1:] == ["week-2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "week"]
    again = build_trend([{**r, "run_info": {**r["run_info"], "started_at": "2027-01-01T00:00:00Z"}}
                         if r["path"] == "audits/2026-12-01" else r for r in runs])
    assert [r["path"] for r in again["runs"]] == [r["path"] for r in t["runs"]]


def test_roll_ups_of_roll_ups_are_ordered_by_their_days_and_never_compared_with_what_they_hold():
    """Fresh-user trial: a month rolled up from two weeks (no day in any of their names) covered no
    day and was listed first; and a roll-up of some of week 48's nights was compared with the month,
    which holds week 48 (shared data two levels down: only the audit runs tell)."""
    from fair_forge_beam.reports.trend import _comparable_earlier, _order

    def run(path, merged=None, audit_runs=None):
        info = {"rollup": {"runs": merged}} if merged else {}
        return {"path": path, "info": info, "time": None, "time_source": None, "audit_runs": audit_runs}

    nights = [run(f"a/2026-11-{d}", audit_runs=[f"id{d}"]) for d in (23, 29, 30)]
    week48 = run("w/week48", [n["path"] for n in nights[:2]], ["id23", "id29"])
    week49 = run("w/week49", [nights[2]["path"]], ["id30"])
    month = run("w/month", ["w/week48", "w/week49"], ["id23", "id29", "id30"])
    late48 = run("w/late48", [nights[1]["path"]], ["id29"])  # a roll-up of one of week 48's nights
    order = _order([month, late48, week48, week49, *nights])
    names = [e["path"] for e in order]
    assert month["covers"] == "2026-11-30" and names.index("w/month") > names.index("w/week48")
    earlier = _comparable_earlier(order)
    i, j = names.index("w/late48"), names.index("w/month")
    assert j not in earlier[i] and i not in earlier[j]
    assert names.index("w/week48") not in earlier[names.index("w/late48")]  # it holds night 29 too


def test_a_copied_run_folder_is_listed_once():
    """Trial 28: a run and its copy (``cp -r runs/a runs/a-copy``) were two runs of the trend, with a
    change of nothing between them; a copy (same results.json and run_info.json) is listed once, and
    a note names it."""
    a = doc("frequentist", [tox("overall", 4, 80, 8), tox("assistant_id=bot", 2, 40, 4)])
    b = doc("frequentist", [tox("overall", 22, 80, 8), tox("assistant_id=bot", 20, 40, 4)])
    t = build_trend([run("runs/a", a, started="2025-03-01T02:00:00Z"), run("runs/b", b, started="2025-03-02T02:00:00Z"),
                     run("runs/a-copy", json.loads(json.dumps(a)), started="2025-03-01T02:00:00Z")])
    assert [r["path"] for r in t["runs"]] == ["runs/a", "runs/b"]
    assert any("runs/a-copy (copy of runs/a)" in n for n in t["notes"]), t["notes"]
    # the same results at another time is another run
    t = build_trend([run("runs/a", a, started="2025-03-01T02:00:00Z"), run("runs/a2", a, started="2025-03-02T02:00:00Z")])
    assert [r["path"] for r in t["runs"]] == ["runs/a", "runs/a2"]


def test_a_results_json_that_is_a_link_loop_is_named(tmp_path):
    """Trial 28c: a run folder whose results.json is a symbolic link loop was 'has no results.json
    (not a run folder)'."""
    run = tmp_path / "r_loop"
    run.mkdir()
    (run / "results.json").symlink_to(run / "results.json")
    with pytest.raises(TrendUsageError, match=r"r_loop has no readable results.json: .*results.json is a symbolic link loop"):
        find_runs([str(run)])


def test_trend_and_compare_of_runs_that_scored_nothing_are_empty_exit_4(tmp_path, capsys):
    """trial29 T11: `trend e1 e2` of two --allow-empty runs (humanity scored nothing) exited 0 "drawing
    0 figures (2 runs, 0 changes)" and `compare e1 e2` exited 0 "nothing compared". An empty outcome is
    exit code 4 (docs/cli.md) with one line naming what was empty, and neither writes its output (a
    previous trend.html / comparison JSON stays as it was)."""
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE

    nothing = doc("bayesian", hum_slices=[hum("overall", 40, 10, est(1.0))], read=40, not_scored=40)
    nothing["metrics"]["humanity"]["slices"] = []  # every interaction dead-lettered: no slice
    e1 = _write_run(tmp_path / "e1", nothing, {"started_at": "2026-01-01T00:00:00Z"})
    e2 = _write_run(tmp_path / "e2", nothing, {"started_at": "2026-01-02T00:00:00Z"})
    out = tmp_path / "t"
    out.mkdir()
    (out / "trend.html").write_text("the last good page", encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        audit.main(["trend", str(e1), str(e2), "--output", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == EMPTY_RUN_EXIT_CODE and len(err) == 1, err
    assert err[0].startswith("fair-forge-beam trend: empty trend: no run has a value of a headline estimate to follow"), err
    assert "(2 runs read; humanity scored nothing in any of them)" in err[0] and f"{out} is left as it was" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["trend.html"] and (out / "trend.html").read_text() == "the last good page"
    cmp_json = tmp_path / "cmp.json"
    with pytest.raises(SystemExit) as e:
        audit.main(["compare", str(e2), str(e1), "--json", str(cmp_json)])
    captured = capsys.readouterr()
    assert e.value.code == EMPTY_RUN_EXIT_CODE, captured
    assert "humanity: nothing compared: the current run scored nothing" in captured.out  # the table still says it
    assert captured.err.strip().splitlines() == [
        "fair-forge-beam compare: empty comparison: nothing compared (humanity: the current run scored nothing); "
        f"nothing was written ({cmp_json} was not created) (exit code 4)"]
    assert not cmp_json.exists()
    # one run that scored something beside one that did not: a trend (one point), not empty
    good = doc("bayesian", hum_slices=[hum("overall", 40, 10, est(1.0, 0.8, 1.2))])
    _write_run(tmp_path / "e3", good, {"started_at": "2026-01-03T00:00:00Z"})
    assert audit.main(["trend", str(e1), str(tmp_path / "e3"), "--output", str(out), "--quiet", "--no-plots"]) == 0


def test_runs_that_share_no_metric_compare_nothing_in_trend_and_compare_alike(tmp_path, capsys):
    """trial30 T4/T5: `compare` of a humanity run and a toxicity run said "nothing compared (the runs
    have no metric)" (each has one); `trend` of the same runs exited 0 saying "humanity: 1 series
    compared run to run" of a metric in one run, every series one point. One rule, one reason:
    runs that share no metric compared nothing, exit 4, naming what each run has; a series of one
    point is never "compared"."""
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE

    h = _write_run(tmp_path / "h", doc("bayesian", hum_slices=[hum("overall", 40, 10, est(1.0, 0.8, 1.2))]),
                   {"started_at": "2026-01-01T00:00:00Z"})
    t = _write_run(tmp_path / "t", doc("bayesian", tox_slices=[tox("overall", 4, 40, 10)]),
                   {"started_at": "2026-01-02T00:00:00Z"})
    with pytest.raises(SystemExit) as e:
        audit.main(["compare", str(t), str(h)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == EMPTY_RUN_EXIT_CODE and err == [
        "fair-forge-beam compare: empty comparison: nothing compared (the runs share no metric: current toxicity; "
        "baseline humanity) (exit code 4)"], err
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        audit.main(["trend", str(h), str(t), "--output", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == EMPTY_RUN_EXIT_CODE, err
    assert "trend: humanity: 2 series, each in 1 run: nothing to compare" in err, err
    assert not any("compared run to run" in line for line in err), err
    assert err[-1].startswith("fair-forge-beam trend: empty trend: nothing compared (the runs share no metric: "
                              "h humanity; t toxicity); nothing was written"), err
    assert not out.exists()
    # one run alone is followed (a schedule's first night), and says it compared nothing
    lines: list = []
    build_trend([run(str(h), json.loads((h / "results.json").read_text()))], progress=lines.append)
    assert lines == ["humanity: 2 series, each in 1 run: nothing to compare"], lines
    assert audit.main(["trend", str(h), "--output", str(out), "--quiet", "--no-plots"]) == 0
    # a metric the runs share is compared run to run, and said so
    h2 = _write_run(tmp_path / "h2", doc("bayesian", hum_slices=[hum("overall", 40, 10, est(1.1, 0.9, 1.3))]),
                    {"started_at": "2026-01-03T00:00:00Z"})
    lines = []
    build_trend([run(str(p), json.loads((p / "results.json").read_text())) for p in (h, t, h2)], progress=lines.append)
    assert lines == ["humanity: 2 series compared run to run", "toxicity: 2 series, each in 1 run: nothing to compare"], lines


def test_every_reader_of_runs_says_a_windowed_run_is_one(tmp_path, capsys):
    """trial30 T12: `compare`, `--compare` and `--baseline` on a windowed run's folder said only "no
    results.json at …/results.json", where `trend` said what the folder is. One reader
    (reports.load.windowed_run) for all of them."""
    from fair_forge_beam.reports.load import read_baseline, read_results

    win = tmp_path / "win"
    win.mkdir()
    (win / "windowed_results.json").write_text("{}")
    h = _write_run(tmp_path / "h", doc("bayesian", hum_slices=[hum("overall", 40, 10, est(1.0, 0.8, 1.2))]))
    said = f"{win} is a windowed run (windowed_results.json): compare, --compare, --baseline, rollup and trend read"
    with pytest.raises(SystemExit):
        audit.main(["compare", str(win), str(h)])
    err = capsys.readouterr().err
    assert f"current run {win}: no results.json at {win / 'results.json'}: {said}" in err, err
    with pytest.raises(FileNotFoundError, match="is a windowed run"):
        read_results(str(win))
    with pytest.raises(ValueError, match=f"--baseline: no results.json at .*: {win} is a windowed run"):
        read_baseline(str(win))
    assert said in _usage_error([str(win)], capsys)


def test_a_folder_named_with_no_day_or_a_day_after_the_run_is_ordered_by_time_with_a_note():
    """Trial34 T6: a folder named ``2062-12-03`` (or ``2026-13-45``) became the latest run of the trend
    without a word. A run covers the day its folder names only when that is a calendar day and, for an
    audit, not more than a day after it was made; otherwise it is ordered by time, as a run without a
    day, and a note names it and why. A night audited just after midnight ahead of UTC keeps its day."""
    t0 = doc("bayesian", [tox("overall", 1, 10, 3)])
    runs = [
        run("audits/2026-12-01", t0, started="2026-12-02T02:30:00Z"),
        run("audits/2026-12-02", t0, started="2026-12-01T23:30:00Z"),  # UTC+1 just after midnight: its own day
        run("audits/2062-12-03", t0, started="2026-12-04T02:30:00Z"),
        run("audits/2026-13-45", t0, started="2026-12-03T02:30:00Z"),
    ]
    t = build_trend(runs)
    assert [(r["path"], r["covers"]) for r in t["runs"]] == [
        ("audits/2026-13-45", None), ("audits/2062-12-03", None), ("audits/2026-12-01", "2026-12-01"),
        ("audits/2026-12-02", "2026-12-02")]
    [note] = [n for n in t["notes"] if "named with a day" in n]
    assert "2062-12-03 (2062-12-03 is after the run was made, 2026-12-04)" in note
    assert "2026-13-45 (2026-13-45 is no calendar day)" in note and note.startswith("2 runs")


_TREND_IMPORTS = r"""
import sys
from pathlib import Path
from test_trend import _write_run, doc, tox
from pipelines import audit

r = Path(sys.argv[1])
_write_run(r / "a", doc("bayesian", [tox("overall", 1, 10, 3)]), {"started_at": "2025-01-01T00:00:00Z"})
_write_run(r / "b", doc("bayesian", [tox("overall", 4, 10, 3)]), {"started_at": "2025-01-02T00:00:00Z"})
code = audit.main(["trend", str(r / "a"), str(r / "b"), "--output", str(r / "t"), "--quiet", *sys.argv[2:]])
print(code, "matplotlib" in sys.modules)
"""


@pytest.mark.slow
@pytest.mark.parametrize("plots", [False, True])
def test_a_trend_without_plots_imports_no_matplotlib(tmp_path, plots):
    """``trend --no-plots`` (the nightly script's) chooses the slices of each figure without the
    plotting module: matplotlib is not imported (before: about 0.7 CPU s of imports per trend);
    with plots it is. A trend panel draws as many slices as a report panel."""
    from fair_forge_beam.reports.plots import MAX_SLICES
    from fair_forge_beam.reports.trend import TREND_PANELS

    assert TREND_PANELS == MAX_SLICES
    proc = subprocess.run([sys.executable, "-c", _TREND_IMPORTS, str(tmp_path), *([] if plots else ["--no-plots"])],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["0", str(plots)], proc.stdout


def test_a_usage_error_names_the_output_option_as_the_user_gave_it(tmp_path, capsys, monkeypatch):
    """trial39b B10: ``trend '../r*'`` run inside a run folder, with no ``--output``, was told "--output trend is
    inside ../r1": the line named an option never typed. It names the default as such; a given one as given."""
    r1 = _write_run(tmp_path / "r1", doc("bayesian", [tox("overall", 1, 10, 3)]))
    _write_run(tmp_path / "r2", doc("bayesian", [tox("overall", 2, 10, 3)]))
    monkeypatch.chdir(r1)
    with pytest.raises(SystemExit) as exc:
        audit.main(["trend", "../r*", "--no-plots", "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "the default --output trend is inside ../r1" in err, err
    with pytest.raises(SystemExit):
        audit.main(["trend", "../r*", "--no-plots", "--quiet", "--output", "t2"])
    err = capsys.readouterr().err
    assert "--output t2 is inside ../r1" in err and "default" not in err, err


def test_a_night_without_success_is_refused_as_rollup_refuses_it(tmp_path, capsys):
    """trial39 T13: trend read a night whose _SUCCESS was missing (being published, or cut short on an
    object store: its files may be half copied) and exited 0, while rollup refused it. One rule: a run
    of the publishing layout (stats/manifest.json) without _SUCCESS is refused by both, in the same
    words; a folder of an older layout (no stats/) is read by the trend as before."""
    from fair_forge_beam.reports.output_folder import unpublished_run_problem
    from fair_forge_beam.rollup import resolve_runs

    doc = {"config": {"mode": "frequentist", "metrics": ["humanity"]}, "summary": {}, "metrics": {}}
    night = _write_run(tmp_path / "audits" / "2026-12-02", doc)
    (night / "stats").mkdir()
    (night / "stats" / "manifest.json").write_text("{}", encoding="utf-8")
    said = _usage_error([str(tmp_path / "audits" / "*"), "--output", str(tmp_path / "t")], capsys)
    assert f"{night} has no _SUCCESS: its run is being published or was cut short" in said, said
    assert not (tmp_path / "t").exists()
    with pytest.raises(ValueError) as exc:
        resolve_runs([str(tmp_path / "audits" / "*")])
    assert unpublished_run_problem(str(night), "roll it up") in str(exc.value)
    assert unpublished_run_problem(str(_write_run(tmp_path / "old", doc)), "x") is None  # an older layout
    (night / "_SUCCESS").write_text('{"run": "r1"}', encoding="utf-8")
    assert unpublished_run_problem(str(night), "x") is None
