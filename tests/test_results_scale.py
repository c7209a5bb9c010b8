"""Results that scale with the number of assistants, and a headline that follows from the page (issue 28
items 3 and 6).

At a small scale (300 assistants × 2 sessions, Humanity + Toxicity, Bayesian) the main job's outputs
are bounded: ``results.json`` states the run-level texts once and keeps slice summaries (every record
whole in ``slices/<metric>/``), the console prints the overall slice and the extremes, the report's
tables are capped and worst first, with a filterable table of all assistants (checked in Chromium:
the filter works and hostile names stay text). Before: 7 MB of ``results.json``, 620 console lines.
The headline: the issue's three-assistant case, with and without a gate.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from pipelines import audit

N_ASSISTANTS = 300
WORDS = ("the a of to and is it you that for on with as this be are at or from your can will not we they "
         "happy joy love trust hope angry hate fear sad awful wonderful good bad terrible friend enemy "
         "idiot stupid worthless women men black white muslim jewish elderly immigrant").split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _write(path: Path, n_assistants: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for a in range(n_assistants):
            name = f"bot-{a:04d}" if a else "<b>evil</b>\u202e-bot"  # a hostile name among them
            for s in range(2):
                conv = [{"qa_id": f"q{t}", "query": _sentence(rng, 6), "assistant": _sentence(rng, 25),
                         "ground_truth_assistant": _sentence(rng, 25)} for t in range(rng.randint(1, 4))]
                f.write(json.dumps({"session_id": f"{a}-{s}", "assistant_id": name, "language": "english",
                                    "conversation": conv}) + "\n")


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    root = tmp_path_factory.mktemp("many_assistants")
    data = root / "sessions.jsonl"
    _write(data, N_ASSISTANTS)
    out = root / "out"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        doc = audit.run(["--input", str(data), "--metrics", "humanity,toxicity", "--group-extractor", "keyword",
                         "--mode", "bayesian", "--mc-samples", "500", "--output", str(out)])
    return out, doc, buf.getvalue()


@pytest.mark.slow
def test_results_json_states_texts_once_and_keeps_summaries(many):
    from fair_forge_beam.reports.load import iter_slices, load_results
    from fair_forge_beam.reports.results import MAX_DETAILED_SLICES, RESULTS_SCHEMA_VERSION

    out, doc, _ = many
    raw = (out / "results.json").read_bytes()
    assert len(raw) < 1_500_000, len(raw)  # 7 MB before: 11 KB per Toxicity slice
    on_disk = json.loads(raw)
    assert on_disk == doc and on_disk["config"]["versions"]["results_schema"] == RESULTS_SCHEMA_VERSION == 2
    tox, hum = on_disk["metrics"]["toxicity"], on_disk["metrics"]["humanity"]
    # the licence and extractor texts once per metric, in no slice
    assert tox["common"]["group_extractor"]["kind"] == "keyword" and "CC BY-NC-SA" in tox["common"]["lexicon_licence"]
    assert "non-commercial" in hum["common"]["lexicon_licence"]
    for m in (tox, hum):
        assert raw.decode("utf-8").count(m["common"]["lexicon_licence"]) == 2  # metrics.<name>.lexicon_licence + common
        assert len(m["slices"]) == N_ASSISTANTS + 2 > MAX_DETAILED_SLICES
        assert m["detail"]["slices"] == f"slices/{m['slices'][0]['metric']}/"
        assert not any(k in r for r in m["slices"] for k in m["common"])
    # overall whole, the others summaries: headline and gateable fields with their counts
    assert tox["slices"][0]["slice"] == "overall" and "group_profiling" in tox["slices"][0]
    bot = next(r for r in tox["slices"] if r["slice"] == "assistant_id=bot-0001")
    assert {"toxic_rate", "estimates", "n_toxic", "n_interactions", "n_sessions"} <= bot.keys()
    assert "group_profiling" not in bot
    # one summary per line in the file
    assert re.search(r'^\s*\{"metric": "toxicity", "level": "slice", "slice": "assistant_id=bot-0001".*\},?$',
                     raw.decode("utf-8"), re.M)
    # every record whole in slices/<metric>/, equal to the summary on the kept fields
    whole = {r["slice"]: r for r in iter_slices(str(out), "toxicity")}
    assert len(whole) == N_ASSISTANTS + 2
    full = whole["assistant_id=bot-0001"]
    assert full["group_profiling"]["groups"] and full["lexicon_licence"] == tox["common"]["lexicon_licence"]
    assert {k: full[k] for k in bot} == bot
    # load_results reads the detail from the shards: a group estimate of an assistant is a column
    df = load_results(str(out))["toxicity"]
    assert len(df) == N_ASSISTANTS + 2 and "group_profiling.group_estimates.women.T.mean" in df.columns
    assert df.loc[df["slice"] == "assistant_id=bot-0001", "lexicon"].item() == tox["common"]["lexicon"]


@pytest.mark.slow
def test_readers_of_slices_work_on_summaries(many):
    from fair_forge_beam.reports.compare import compare_runs
    from fair_forge_beam.reports.gates import evaluate_gates, parse_gate

    _, doc, _ = many
    checks = evaluate_gates(doc, [parse_gate("toxicity toxic_rate ci_high <= 0.99 in every assistant_id"),
                                  parse_gate("toxicity DIDT mean <= 1 in every assistant_id")])
    # every assistant's summary holds the gated estimates: each check read the record's own value
    assert len(checks) == 2 * N_ASSISTANTS
    recs = {r["slice"]: r for r in doc["metrics"]["toxicity"]["slices"]}
    for c in checks[:N_ASSISTANTS]:
        assert c.value == recs[c.slice]["toxic_rate"]["ci_high"]
        assert c.status == ("pass" if c.value <= 0.99 else "fail")
    didt = [(c, recs[c.slice]["estimates"]["DIDT"]["mean"]) for c in checks[N_ASSISTANTS:]]
    assert sum(m is not None for _, m in didt) > N_ASSISTANTS / 2
    assert all(c.value == m and c.status == "pass" for c, m in didt if m is not None)
    cmp = compare_runs(doc, doc)
    assert cmp["verdicts"]["toxicity"] and "worse" not in cmp["verdicts"]["toxicity"]


@pytest.mark.slow
def test_console_prints_overall_and_extremes(many):
    _, doc, console = many
    lines = console.splitlines()
    assert len(lines) < 100, len(lines)  # 620 lines before: one per slice
    tox = lines[[i for i, ln in enumerate(lines) if ln.startswith("toxicity:")][0]:]
    assert any(ln.split()[0] == "overall" for ln in tox[:4] if ln.strip())
    i = tox.index("  highest toxic-answer rate (worst):")
    top = [r for r in doc["metrics"]["toxicity"]["slices"] if r["slice"] != "overall"
           and r["n_sessions"] >= 2 and r["toxic_rate"]["mean"] is not None]
    worst = max(top, key=lambda r: (r["toxic_rate"]["mean"], [-ord(c) for c in r["slice"]]))
    assert tox[i + 1].split()[0] == worst["slice"]
    assert any(f"{N_ASSISTANTS + 2} slices" in ln and "slices/toxicity/" in ln for ln in tox)


@pytest.mark.slow
def test_report_is_bounded_worst_first_and_filterable(many, browser):
    out, doc, _ = many
    html = (out / "report.html").read_text(encoding="utf-8")
    assert len(html.encode("utf-8")) < 1_000_000
    tox = html[html.index('id="metric-toxicity"'):html.index('id="dead-letter"')]
    first = tox[tox.index("<table>"):tox.index("</table>")]
    assert first.count("<tr>") == 1 + 40  # header + at most 40 slices
    more = int(re.search(r"The 40 above: all interactions, then worst first\. (\d+) more slices", tox).group(1))
    # the section is left out when no slice is too small: since a value wholly beyond its reference line
    # is judged however wide its interval (issue 28 H6), these 300 assistants' slices are all judged
    found_small = re.search(r"Too small to judge: (\d+) slices?", tox)
    small = int(found_small.group(1)) if found_small else 0
    assert 40 + more + small == N_ASSISTANTS + 2
    # worst first: the first assistant row of the slice table has the highest toxic rate
    rates = [r["toxic_rate"]["mean"] for r in doc["metrics"]["toxicity"]["slices"]
             if r["slice"].startswith("assistant_id=") and r["n_sessions"] >= 2 and r["toxic_rate"]["mean"] is not None]
    assert f"{max(rates):.4f}" in first.split("</tr>")[2]
    # the filterable table: hostile names are JSON data, never markup
    assert "<b>evil</b>" not in html and '\\u003cb\\u003eevil' in html
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto((out / "report.html").resolve().as_uri(), wait_until="load")
        rows = page.locator("#assistant-rows tr")
        assert rows.count() == 200  # FILTER_ROWS of the 300
        assert "300 of 300 assistants match" in page.locator("#assistant-count").inner_text()
        page.fill("#assistant-filter", "bot-012")
        assert rows.count() == 10 and all("bot-012" in rows.nth(i).inner_text() for i in range(10))
        page.fill("#assistant-filter", "evil")
        assert rows.count() == 1 and rows.nth(0).locator("td").first.inner_text() == "<b>evil</b>\\u202e-bot"  # bidi control escaped
        assert page.locator("#assistant-rows b").count() == 0
        assert not errors, errors
    finally:
        page.close()


# ------------------------------------------------------------------ the headline (issue 28 item 6)
def _tox(slice_, k, n, didt, lo, hi, n_ses=20):
    return {"slice": slice_, "n_interactions": n, "n_sessions": n_ses, "n_toxic": k,
            "toxic_rate": {"mean": (k + 1) / (n + 2), "ci_low": None, "ci_high": None, "n": n},
            "estimates": {"DIDT": {"mean": didt, "ci_low": lo, "ci_high": hi, "n": n}}}


def _helpbots(slices):
    from scipy import stats

    for r in slices:  # Beta(1 + k, 1 + n - k) intervals of the rates, as a Bayesian run writes them
        k, n = r["n_toxic"], r["n_interactions"]
        r["toxic_rate"]["ci_low"], r["toxic_rate"]["ci_high"] = (float(x) for x in stats.beta.ppf([0.025, 0.975], 1 + k, 1 + n - k))
    return {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 7},
            "summary": {"interactions_read": 600, "metrics": {"toxicity": {"scored": 600, "not_scored": 0}}},
            "metrics": {"toxicity": {"headline_columns": ["toxic_rate", "estimates.DIDT"], "slices": slices}}}


HELPBOTS = [("overall", 92, 600, 0.36, 0.33, 0.39, 60),
            ("assistant_id=helpbot-a", 8, 200, 0.10, 0.08, 0.12),
            ("assistant_id=helpbot-b", 32, 200, 0.503, 0.45, 0.55),
            ("assistant_id=helpbot-c", 52, 200, 0.49, 0.44, 0.54)]


def _first_line(html: str) -> str:
    sec = html[html.index('<section id="summary">'):]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", sec[sec.index('<p class="headline'):sec.index('<p class="note">')]))


def test_headline_does_not_call_an_assistant_worst_against_the_evidence():
    """The issue's page: helpbot-b's DIDT is farthest beyond its line but not credibly worse than
    helpbot-c's, and helpbot-c is credibly worse than helpbot-a on the toxic rate. It said "Worst
    assistant: helpbot-b"."""
    from fair_forge_beam.reports.html import render_report

    doc = _helpbots([_tox(*t) for t in HELPBOTS])
    html = render_report(doc, with_plots=False)
    line = _first_line(html)
    assert not line.startswith("Worst assistant") and line.startswith("Farthest beyond a threshold: helpbot-b")
    assert "Not credibly worse on this metric than helpbot-c" in line and "do not single it out" in line
    assert "2 judged assistants are beyond a threshold" in line
    # the page's differences: helpbot-c credibly worse than helpbot-a on the toxic rate; every
    # difference the headline states is one the page lists
    listed = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[html.index('<ul id="differences">'):html.index("</ul>")]))
    assert "helpbot-c is worse than helpbot-a on the toxic-answer rate" in listed
    for m in re.finditer(r"Largest credible difference: (\S+) is worse than (\S+) on the (.+?), difference", line):
        assert f"{m.group(1)} is worse than {m.group(2)} on the {m.group(3)}" in listed


def test_headline_puts_failed_gates_first_and_their_assistant():
    """With a gate on the toxic rate that helpbot-c fails, the first line says a gate failed and the
    assistant beyond a gate comes before one beyond a reference line (it named helpbot-b)."""
    from fair_forge_beam.reports.gates import parse_gate
    from fair_forge_beam.reports.html import render_report

    doc = _helpbots([_tox(*t) for t in HELPBOTS])
    gate = parse_gate("toxicity toxic_rate mean <= 0.2 in every assistant_id")
    html = render_report(doc, with_plots=False, gates=[gate])
    sec = html[html.index('<section id="summary">'):]
    gates_line = re.sub(r"<[^>]+>", "", sec[sec.index('id="gates-verdict"'):sec.index("</p>")])
    assert "1 of 1 gate failed" in gates_line and "assistant_id=helpbot-c" in gates_line
    line = _first_line(html)
    # then every assistant the gate failed on (here one), then the worst line
    named, rest = line.split(". ", 1)[1].split(". ", 1)
    assert named == "1 assistant failed a gate: helpbot-c (toxicity toxic_rate mean = 0.2624 &gt; 0.2)", line
    assert re.match(r"(Worst assistant|Farthest beyond a threshold): helpbot-c — its worst metric is the toxic-answer rate, "
                    r"\S+ \[\S+, \S+\], above the gate 0\.20", rest), line
    passing = render_report(doc, with_plots=False, gates=[parse_gate("toxicity toxic_rate mean <= 0.9 in every assistant_id")])
    assert "All 1 gate this page can check passed." in passing


def test_headline_says_worst_only_when_credibly_worse_than_every_other():
    from fair_forge_beam.reports.html import render_report

    rows = [("overall", 160, 600, 0.2, 0.18, 0.22, 60), ("assistant_id=helpbot-a", 8, 200, 0.10, 0.08, 0.12),
            ("assistant_id=helpbot-b", 12, 200, 0.11, 0.09, 0.13), ("assistant_id=helpbot-c", 140, 200, 0.12, 0.10, 0.14)]
    line = _first_line(render_report(_helpbots([_tox(*t) for t in rows]), with_plots=False))
    assert line.startswith("Worst assistant: helpbot-c — its worst metric is the toxic-answer rate")
    assert "Credibly worse on this metric than every other judged assistant (2)" in line


def test_an_assistant_conclusively_beyond_a_gate_is_judged_however_wide_its_interval():
    """Hostile-tester trial: bot-t failed the run's gate with its whole interval above it
    (0.526 [0.369, 0.681] against <= 0.2), but the interval was wider than the inconclusive width,
    so bot-t was listed as too small to judge, another assistant was named in the first line, and
    the page said no difference between judged assistants excluded 0."""
    from fair_forge_beam.reports.gates import parse_gate
    from fair_forge_beam.reports.html import render_report

    rows = [("overall", 30, 108, 0.365, 0.347, 0.371, 36), ("assistant_id=bot-g", 1, 36, 0.365, 0.347, 0.371, 12),
            ("assistant_id=bot-t", 19, 36, None, None, None, 12), ("assistant_id=bot-c", 1, 36, None, None, None, 12)]
    doc = _helpbots([_tox(*t) for t in rows])
    html = render_report(doc, with_plots=False, gates=[parse_gate("toxicity toxic_rate mean <= 0.2 in every assistant_id")])
    line = _first_line(html)
    assert "bot-t — its worst metric is the toxic-answer rate" in line and "above the gate 0.20" in line, line
    assert 'id="too-small"' not in html or "bot-t (" not in html[html.index('id="too-small"'):][:600]
    listed = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[html.index('<ul id="differences">'):]))
    assert "bot-t is worse than bot-c on the toxic-answer rate" in listed


def test_a_failed_gate_is_named_by_a_failure_with_a_value():
    """Hostile-tester trial: the findings said '"toxicity DIDT ci_high <= 0.3 in every assistant_id":
    failed — DIDT ci_high is undefined (no data: n = 0)', naming an assistant without DIDT instead of
    the one beyond the gate (0.554 > 0.3)."""
    from fair_forge_beam.reports.gates import evaluate_gates, gates_report, parse_gate
    from fair_forge_beam.reports.html import render_report

    rows = [("overall", 30, 108, 0.40, 0.35, 0.45, 36), ("assistant_id=bot-clean", 1, 36, None, None, None, 12),
            ("assistant_id=bot-groups", 2, 36, 0.50, 0.45, 0.554, 12)]
    doc, gate = _helpbots([_tox(*t) for t in rows]), parse_gate("toxicity DIDT ci_high <= 0.3 in every assistant_id")
    outcome = gates_report(evaluate_gates(doc, [gate]), [gate], 0.95)
    html = render_report(doc, with_plots=False, gates=[gate], gate_outcome=outcome)
    gates = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[html.index('<ul class="gates">'):html.index("</ul>")]))
    assert "bot-groups" in gates and "0.554" in gates and "undefined" not in gates, gates
    # the first line of a page without the job's outcome lists the failing checks: the one with a value first
    bare = render_report(doc, with_plots=False, gates=[gate])
    verdict = re.sub(r"<[^>]+>", "", bare[bare.index('id="gates-verdict"'):][:1500])
    assert verdict.index("bot-groups") < verdict.index("bot-clean"), verdict
