"""Issue 28, "What users read" (fresh-user trial of README's first command): the surfaces a new user
reads agree with each other — the findings count interactions as the summary does, the progress
line counts what the summary counts, one function labels an estimate inconclusive, the console
marks a value resting on one observation as the report does, and a mistyped option value is
answered with the closest valid one."""
from __future__ import annotations

import pytest

import json
import re

from fair_forge_beam.reports import load
from fair_forge_beam.reports.html import unscored_assistants


def _dead(folder, rows) -> None:
    d = folder / "dead_letter"
    d.mkdir(parents=True)
    lines = []
    for i, (stage, who) in enumerate(rows):
        raw = json.dumps({"session_id": f"s{i}", "assistant_id": who, "query": "q", "assistant": "a"})
        lines.append(json.dumps({"stage": stage, "reason": f"no emotion lexicon for language 'spanish' ({stage})",
                                 "element_id": f"s{i}/{who}/0", "raw": raw, "source": None}))
    (d / "part-00000-of-00001.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_unscored_assistants_are_counted_in_interactions_with_their_metrics_named(tmp_path):
    """The trial's findings said "support-bot (32 dead letters …)" for 16 interactions (one dead
    letter per interaction and metric) while the summary said "26 not scored" (16 + 10): the
    findings now count interactions and name the metrics."""
    rows = [(m, "support-bot") for m in ("humanity", "toxicity") for _ in range(16)]
    rows += [(m, "sushi_bot") for m in ("humanity", "toxicity") for _ in range(10)]
    rows += [("read", "rejected-bot")] * 3 + [("humanity", "half-bot")] * 4 + [("toxicity", "half-bot")] * 2
    _dead(tmp_path, rows)
    summary = load.dead_letter_summary(str(tmp_path))
    doc = {"metrics": {"humanity": {"slices": []}, "toxicity": {"slices": []}}}
    got = {u["assistant"]: u for u in unscored_assistants(doc, summary)}
    assert got["support-bot"]["what"] == "16 interactions not scored by humanity or toxicity"
    assert got["support-bot"]["interactions"] == 16 and got["support-bot"]["dead_letters"] == 32
    assert got["sushi_bot"]["what"] == "10 interactions not scored by humanity or toxicity"
    assert got["rejected-bot"]["what"] == "3 records rejected at read" and got["rejected-bot"]["interactions"] is None
    assert got["half-bot"]["what"] == "interactions not scored: humanity 4, toxicity 2"


def test_progress_counts_what_the_summary_counts_and_its_last_line_is_the_final_count():
    """The trial's console: "progress: 2,042 interactions read, scored: humanity 1,792, …" above
    "humanity: interactions: 2016 scored, 26 not scored": the line counted interactions the scorer
    took (dead letters included) and its last line was sampled mid-run. Now "scored" counts
    scores out of the scorer (results.json's interactions_scored), the dead-lettered ones are
    labelled "not scored", and the reporter's exit writes the final count."""
    import io
    import types

    from apache_beam.pvalue import TaggedOutput

    from fair_forge_beam import progress as P
    from fair_forge_beam.engine import _ScoreAndRoute

    class Scorer:  # a DoFn-like scorer: odd elements are dead letters; a score is the interaction itself
        def process(self, x):  # (it carries the ids a score must: engine.SCORE_IDS, trial38 T1)
            yield TaggedOutput("dead_letter", x) if x.i % 2 else x

    import apache_beam as beam

    class DoFnScorer(Scorer, beam.DoFn):
        pass

    spec = types.SimpleNamespace(name="m", scorer=DoFnScorer(), interaction_record=None, session_value=None,
                                 cell_value=None)
    now = [0.0]
    out = io.StringIO()
    rep = P.ProgressReporter(interval=1000, stream=out, clock=lambda: now[0])
    with rep:
        fn = _ScoreAndRoute(spec, 0)
        fn.setup()
        fn.start_bundle()
        P.ProgressCounter("read", beam_counter=_Null()).inc(10)
        for x in range(10):
            list(fn.process(types.SimpleNamespace(i=x, element_id=f"s{x}/a/0", session_id=f"s{x}", assistant_id="a",
                                                  language="english", turn_index=0, qa_id="q")))
        rep.tick()  # a line mid-run (nothing flushed yet: counted in steps)
        fn.finish_bundle()
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("progress: 10 interactions read, scored: m 5 (5 not scored);"), lines
    assert P.format_progress({(P.NAMESPACE, "read"): 3, (P.NAMESPACE, "taken.m"): 3, (P.NAMESPACE, "scored.m"): 3},
                             1, 0.0).startswith("progress: 3 interactions read, scored: m 3;")
    P.reset()


class _Null:
    def inc(self, n=1):
        pass


def _tox(key, sessions, n, toxic, est):
    return {"metric": "toxicity", "level": "slice", "slice": key, "mode": "distribution", "n_interactions": n,
            "n_sessions": sessions, "n_toxic": toxic, "toxic_rate": {"n": n, **est}}


def test_one_function_labels_an_estimate_inconclusive_on_every_surface():
    """The trial's report: a one-session assistant the scorecard lists as "1 session: no interval"
    was "0.0000 … inconclusive" in the Toxicity table (a Wald width from its counts), a toxic share
    of one answer was flagged and the sentiment of the same answer not, and with a gate the
    scorecard dropped a flag (interval wholly on one side of the gate) that the table kept. The
    scorecard, the metric table and the list of all estimates now agree, cell by cell."""
    from fair_forge_beam.reports.gates import parse_gate
    from fair_forge_beam.reports.html import _metric_section
    from fair_forge_beam.reports.scorecard import inconclusive, scorecard

    doc = {"config": {"ci_level": 0.95, "mode": "bayesian"},
           "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": [
               _tox("overall", 21, 43, 14, {"mean": 0.33, "ci_low": 0.2, "ci_high": 0.47}),
               _tox("assistant_id=one", 1, 3, 0, {"mean": 0.0, "ci_low": None, "ci_high": None}),  # one session: no interval
               _tox("assistant_id=wide", 10, 20, 10, {"mean": 0.5, "ci_low": 0.05, "ci_high": 0.8}),  # straddles 0.10
               _tox("assistant_id=settled", 10, 20, 4, {"mean": 0.25, "ci_low": 0.05, "ci_high": 0.45}),
           ]}}}
    # one observation in a slice of many sessions: no interval, under the one-session rule
    one_obs = {"mean": 0.0, "ci_low": None, "ci_high": None, "n": 1}
    rec = doc["metrics"]["toxicity"]["slices"][2]
    assert inconclusive("toxicity", "toxic_rate", one_obs, rec, 0.2, 0.95, {"toxic_rate": (0, 1)}) is None
    for gates in ((), (parse_gate("toxicity toxic_rate ci_high <= 0.5 in assistant_id=settled"),)):
        card = scorecard(doc, 0.2, gates)
        section = _metric_section("toxicity", doc["metrics"]["toxicity"], {}, doc["config"], 0.2, False, gates)
        card_flags = {r["slice"]: bool(r["cells"][0]["inconclusive"]) for r in card["rows"] + card["small"] + [card["overall"]]}
        table_flags = {r["key"]: bool(r["cells"][0]["flag"]) for r in section["table"] + section["small"]}
        all_flags = {r["key"]: bool(r["flag"]) for r in section["all_rows"] if r["path"] == "toxic_rate"}
        assert card_flags["assistant_id=one"] is False  # "1 session: no interval", not a width
        assert card_flags["assistant_id=wide"] is True
        # a gate on 'settled' decides it whatever the width (the scorecard's rule); 'wide': the width rule
        assert card_flags["assistant_id=settled"] is (not gates)
        for key, flag in card_flags.items():
            assert table_flags[key] == flag and all_flags[key] == flag, (gates, key)
        assert section["n_flags"] == sum(card_flags.values())


def test_an_estimate_of_one_observation_is_marked_on_every_surface():
    """The report says "(1 observation: no interval)" for an estimate resting on one observation
    (statistical.slices.behind) and a gate on its interval fails naming the rule; the console
    printed the bare value. One predicate now decides for the console, the report and the gates;
    results.json holds the same record (n = 1, no interval)."""
    from fair_forge_beam.reports.gates import evaluate_gates, parse_gate
    from fair_forge_beam.reports.html import _text
    from fair_forge_beam.reports.summary import summary_table

    one = {"mean": 0.5, "ci_low": None, "ci_high": None, "n": 1}
    rec = {"metric": "humanity", "level": "slice", "slice": "assistant_id=bot", "mode": "distribution",
           "n_interactions": 12, "n_sessions": 6, "mean_entropy": {"mean": 1.2, "ci_low": 1.0, "ci_high": 1.4, "n": 12},
           "mean_spearman": one}
    overall = {**rec, "slice": "overall"}
    doc = {"config": {"mode": "bayesian", "seed": 42, "mc_samples": 100},
           "summary": {"interactions_read": 12, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"humanity": {"interactions_scored": 12, "interactions_not_scored": 0}}},
           "metrics": {"humanity": {"headline_columns": ["mean_entropy", "mean_spearman"], "slices": [overall, rec]}}}
    text = summary_table(doc, "out", [])
    row = next(ln for ln in text.splitlines() if "assistant_id=bot" in ln)
    assert "0.5000 (1 observation)" in row and "1.2000 [1.0000, 1.4000]" in row
    assert "(1 observation): the estimate rests on one observation" in text
    assert _text("humanity", "mean_spearman", one) == "0.5000 (1 observation: no interval)"
    check = evaluate_gates(doc, [parse_gate("humanity mean_spearman ci_low >= 0.1 in assistant_id=bot")])[0]
    assert check.status == "fail" and "rests on 1 observation" in check.reason
    check = evaluate_gates(doc, [parse_gate("humanity mean_spearman mean >= 0.1 in assistant_id=bot")])[0]
    assert check.status == "pass" and "(mean 0.5, 1 observation: no interval, n = 1)" in check.message(0.95)


def _typo(word: str) -> str:
    """``word`` with two neighbouring letters swapped (a missing letter for short words)."""
    if len(word) < 4:
        return word[:-1] + word[-1] * 2
    i = len(word) // 2
    return word[:i - 1] + word[i] + word[i - 1] + word[i + 1:]


def _parsers():
    import importlib

    for module in ("pipelines.audit", "fair_forge_beam.rollup", "pipelines.loop", "pipelines.generate",
                   "pipelines.run_assistant", "pipelines.trend"):
        yield module, importlib.import_module(module).build_parser()


def test_every_closed_set_option_offers_the_nearest_value(capsys, tmp_path):
    """A mistyped value of any option with a closed set of values — every command's argparse
    choices, --metrics, a --config file's keys, a gate's metric and field, Beam's runner, an
    option's own name — ends in one usage line offering the nearest valid value, said by one
    helper (quoting.did_you_mean)."""

    from fair_forge_beam.quoting import did_you_mean

    assert did_you_mean("humanty", ["humanity", "toxicity"]) == "; did you mean 'humanity'?"
    assert did_you_mean("Bayesian", ["frequentist", "bayesian"]) == "; did you mean 'bayesian'?"
    assert did_you_mean("zzzz", ["humanity", "toxicity"]) == ""
    seen = 0
    for module, parser in _parsers():
        for action in parser._actions:
            if not action.choices or not action.option_strings or isinstance(action.choices, dict):
                continue
            for choice in action.choices:
                typo = _typo(str(choice))
                if typo in action.choices or did_you_mean(typo, action.choices) != f"; did you mean {choice!r}?":
                    continue  # the swap makes another valid value, or one nearer another (json / jsonl)
                with pytest.raises(SystemExit) as exc:
                    parser.parse_args([action.option_strings[-1], typo])
                err = capsys.readouterr().err
                assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, (module, err)
                assert f"invalid choice: {typo!r}" in err and f"did you mean {choice!r}?" in err, (module, err)
                seen += 1
    assert seen >= 30, seen
    import pipelines.audit as audit

    for argv, hint in ((["--metrics", "humanty"], "'humanity'"), (["--metrics", "humanity,toxicty"], "'toxicity'"),
                       (["--mode", "bayesain"], "'bayesian'"), (["--group-extractor", "keywrod"], "'keyword'"),
                       (["--metric", "humanity"], "'--metrics'"), (["--runner", "DirectRuner"], "'DirectRunner'"),
                       (["--metrics", "toxicity", "--gate", "toxicity toxic_rat mean <= 0.2"], "'toxic_rate'")):
        with pytest.raises(SystemExit) as exc:
            audit.main([*argv, "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert exc.value.code == 2 and f"did you mean {hint}?" in err, (argv, err)
    config = tmp_path / "audit.toml"
    for text, hint in (('mode = "bayesain"\n', "'bayesian'"), ('metrics = ["humanty"]\n', "'humanity'")):
        config.write_text(text, encoding="utf-8")
        with pytest.raises(SystemExit) as exc:
            audit.main(["--config", str(config), "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert exc.value.code == 2 and str(config) in err and f"did you mean {hint}?" in err, (text, err)


def test_the_console_names_the_assistants_nobody_scored_in_the_reports_words(tmp_path):
    """trial30 T8: report.html named "Not scored at all (2 assistants …): support-bot (16 …); sushi_bot
    (10 …)", the console (all a CI log shows) named none and, with 6,000 assistants, did not count
    the 858 unscored. The console says the report's words (one function), ten names and the rest
    counted, in one line: with 10,000 unscored assistants the summary stays under 100 lines."""
    from fair_forge_beam.reports.html import unscored_words
    from fair_forge_beam.reports.summary import console_summary

    doc = {"config": {"mode": "frequentist"},
           "summary": {"interactions_read": 20_000, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {m: {"interactions_scored": 0, "dead_letters": 20_000} for m in ("humanity", "toxicity")}},
           "metrics": {m: {"slices": [], "headline_columns": []} for m in ("humanity", "toxicity")}}
    for n, folder in ((2, tmp_path / "two"), (10_000, tmp_path / "many")):
        _dead(folder, [(m, f"bot-{i:05d}") for i in range(n) for m in ("humanity", "toxicity")])
        summary = load.dead_letter_summary(str(folder))
        lines = console_summary(doc, "/out", ["results.json", "report.html"], dead_letters=summary).splitlines()
        head, names = unscored_words(unscored_assistants(doc, summary), 10)
        [line] = [ln for ln in lines if ln.startswith("Not scored at all")]
        assert line.startswith(f"{head} {names}") and len(lines) < 100
        assert line.count(" not scored by humanity or toxicity; most often: ") == min(n, 10)
    assert head == "Not scored at all (10,000 assistants: every interaction is a dead letter):"
    assert names.startswith("bot-00000 (1 interaction not scored by humanity or toxicity; most often: no emotion lexicon")
    assert names.endswith("bot-00009 (1 interaction not scored by humanity or toxicity; most often: "
                          "no emotion lexicon for language 'spanish' (humanity)) and 9,990 more.")
    assert lines[-2].endswith("Every one in /out/report.html and /out/dead_letter/.")


def test_an_audit_reads_its_dead_letters_once_for_the_report_and_the_console(tmp_path, monkeypatch, capsys):
    """The report and the console both name the assistants nobody scored from the dead-letter summary;
    the shards (as large as the input when every record is a dead letter) are streamed once, not once
    per surface. The shipped data's two unscored assistants are named on the console."""
    from pipelines import audit

    calls = []
    real = load.dead_letter_summary

    def counted(run_dir, *a, **kw):
        calls.append(run_dir)
        return real(run_dir, *a, **kw)

    monkeypatch.setattr(load, "dead_letter_summary", counted)
    assert audit.main(["--metrics", "humanity", "--output", str(tmp_path / "out")]) == 0
    assert len(calls) == 1, calls
    out = capsys.readouterr().out
    assert "Not scored at all (2 assistants" in out and "support-bot" in out and "sushi_bot" in out


@pytest.mark.slow
def test_a_rollup_names_the_assistants_nobody_scored_as_an_audit_does(tmp_path, monkeypatch, capsys):
    """A roll-up's console had no line naming the assistants nobody scored (issue 28's leftover): it
    says them as the audit does, from the runs' copied dead letters read once for the report and the
    console."""
    from fair_forge_beam import rollup
    from pipelines import audit

    assert audit.main(["--metrics", "humanity", "--output", str(tmp_path / "a"), "--quiet", "--no-report"]) == 0
    calls = []
    real = load.dead_letter_summary
    monkeypatch.setattr(load, "dead_letter_summary", lambda run_dir, *a, **kw: calls.append(run_dir) or real(run_dir, *a, **kw))
    capsys.readouterr()
    rollup.run(["--from", str(tmp_path / "a"), "--output", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert "Not scored at all (2 assistants" in out and "support-bot" in out and "sushi_bot" in out, out[-2000:]
    assert len(calls) == 1, calls


def _toxicity_doc(rows, rejected=0, reasons=None):
    return {"config": {"mode": "frequentist"},
            "summary": {"interactions_read": 100, "rejected_at_read": rejected, "data_quality_warnings": 0,
                        "rejected_at_read_reasons": reasons or {},
                        "metrics": {"toxicity": {"interactions_scored": 100, "interactions_not_scored": 0}}},
            "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": rows}}}


def _rate_row(key, mean, sessions):
    return {"slice": key, "n_interactions": 9, "n_sessions": sessions,
            "toxic_rate": {"mean": mean, "ci_low": mean / 2, "ci_high": min(1.0, mean * 2)}}


def test_the_console_says_why_records_were_rejected_at_read():
    """trial33 T2: the console counted the records rejected at read but gave no reason and no
    pointer, while each metric's dead letters have both; the most frequent reasons now come with the
    count (at most three, the rest counted) and the folder that holds each record."""
    from fair_forge_beam.reports.summary import console_summary

    reasons = {"nested more than 64 levels deep (at conversation.0.extra.0.0…)": 3, "invalid JSON": 2,
               "weight must be a finite number >= 0, got nan": 1, "a JSON object repeats the key 'assistant'": 1}
    lines = console_summary(_toxicity_doc([_rate_row("overall", 0.1, 5)], 7, reasons), "out", []).splitlines()
    (line,) = [ln for ln in lines if "rejected at read:" in ln]
    assert line == ("  rejected at read: 7 records (nested more than 64 levels deep (at conversation.0.extra.0.0…): 3; "
                    "invalid JSON: 2; weight must be a finite number >= 0, got nan: 1; and 1 more reason); "
                    "each in out/dead_letter/"), line
    quiet = console_summary(_toxicity_doc([_rate_row("overall", 0.1, 5)]), "out", []).splitlines()
    assert not [ln for ln in quiet if "rejected at read:" in ln]  # nothing rejected: no line


def test_few_judged_slices_are_listed_once_not_as_both_worst_and_best():
    """trial33 T10: with more slices than the console prints but only three that can be judged (two
    sessions or more), the same three rows were printed as the three worst and again as the three
    best; they are now listed once, worst first."""
    from fair_forge_beam.reports.summary import MAX_CONSOLE_SLICES, console_summary

    rows = [_rate_row("overall", 0.05, 40), _rate_row("assistant_id=a", 0.09, 3), _rate_row("assistant_id=b", 0.2, 3),
            _rate_row("language=english", 0.05, 40)]
    rows += [_rate_row(f"assistant_id=x{i:03d}", 0.5, 1) for i in range(MAX_CONSOLE_SLICES)]
    lines = console_summary(_toxicity_doc(rows), "out", []).splitlines()
    tox = lines[next(i for i, ln in enumerate(lines) if ln.startswith("toxicity:")):]
    shown = [ln.split()[0] for ln in tox if ln.startswith("  ") and ln.split()[0] in
             {"assistant_id=a", "assistant_id=b", "language=english"}]
    assert shown == ["assistant_id=b", "assistant_id=a", "language=english"], tox  # once each, highest rate first
    assert not [ln for ln in tox if "(best)" in ln or "(worst)" in ln], tox
    assert any(ln.strip() == "toxic-answer rate, worst first:" for ln in tox), tox


def test_a_record_whose_assistant_id_is_blank_belongs_to_no_assistant(tmp_path):
    """trial33 T7: a record rejected at read because its assistant_id was empty was listed as an
    assistant with no name, "not scored at all"; a blank id names no assistant (the reader refuses it
    as one), so the record is counted under "rejected at read" only."""
    _dead(tmp_path, [("read", ""), ("read", " \u200b"), ("read", "real-bot")])
    by = load.dead_letter_summary(str(tmp_path))["by_assistant"]
    assert sorted(by) == ["real-bot"], by
    doc = {"metrics": {"humanity": {"slices": []}}}
    assert [u["assistant"] for u in unscored_assistants(doc, {"by_assistant": by})] == ["real-bot"]


@pytest.mark.slow
def test_an_assistant_scored_under_slices_without_assistant_id_is_not_named_unscored(tmp_path, capsys):
    """trial36 T2: with ``--slices overall,language`` the console and report.html said "Not scored
    at all (3 assistants …)" although each had interactions scored: "scored" was read from the
    ``assistant_id=…`` slices, which that run does not compute. It is read from what the metrics
    scored (the sessions' records), so the same assistants are named whatever the slices."""
    from pipelines import audit

    words = "happy sad angry glad love hate fear joy trust surprise good bad kind calm people help".split()
    recs = []
    for i, (who, lang) in enumerate([("en-bot", "english"), ("mixed-bot", "english"), ("mixed-bot", "german"),
                                     ("de-bot", "german"), ("de-bot", "german")]):
        recs.append({"session_id": f"s{i}", "assistant_id": who, "language": lang,
                     "conversation": [{"qa_id": f"q{t}", "query": "hi", "assistant": " ".join(words[t:t + 8])}
                                      for t in range(3)]})
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    for k, slices in enumerate(("overall,language", "overall,assistant_id", "overall")):
        out = tmp_path / f"out{k}"
        assert audit.main(["--input", str(data), "--metrics", "humanity", "--slices", slices,
                           "--output", str(out)]) == 0
        [line] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Not scored at all")]
        assert line.startswith("Not scored at all (1 assistant: every interaction is a dead letter): de-bot ("), (slices, line)
        assert "mixed-bot" not in line and "en-bot" not in line, (slices, line)
        html = (out / "report.html").read_text(encoding="utf-8")
        [note] = re.findall(r'<p class="note" id="unscored">(.*?)</p>', html, re.S)
        assert "Not scored at all (1 assistant:" in note and "de-bot (" in note, (slices, note)
        assert "mixed-bot" not in note and "en-bot" not in note, (slices, note)
